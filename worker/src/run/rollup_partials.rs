//! A roll-up's task over partials (contract §10): shard `S` of `n` is summed from only
//! the shard files of each partial that can hold its rows (`m / gcd(m, n)` of a
//! partial of `m` shards, one when `m = n`), as `covmerge rollup` sums them
//! (`covmerge_partial::rollup_shard_within`, within the task's share of memory): no
//! split, no spill, and no source (each row's version is the partial's own). With raw
//! rows among the inputs, the task's partial files of them (`RawShard`) are one more
//! partial, of one shard ([`shard_as_partial`]). The four files are those `covmerge
//! rollup` writes for shard `S`.

use std::path::Path;
use std::sync::Arc;

use covmerge_partial::desc::FORMAT;
use covmerge_partial::{
    rollup_shard_within, shards_for, Description, FuncRow, LineRow, Partial, PartialError, PathRow,
    ShardPartial, Table, VersionRow, FORMAT_VERSION,
};
use covmerge_proto::wire::{Failure, FailureKind, MergeTask};
use tracing::info;

use super::budget::reserve_task;
use super::executor::Executor;
use super::failure::TaskError;
use super::partial_task::{shard_dir, WrittenPartial};
use crate::split::SplitError;
use crate::thread::run_on_thread;

/// A roll-up task's partial files of its raw rows (its spill chunks), to roll up with
/// its shards of the partials: the job's partial namespace and period describe them.
pub(super) struct RawShard {
    pub(super) written: WrittenPartial,
    pub(super) namespace: String,
    pub(super) period: (String, String),
}

/// The files of shard `j` (of the job's shards) in `dir`, `shard`, as a partial of one
/// shard of `namespace` and `period`: its files renamed those of shard 0 of 1 and its
/// description written beside them. Every path in them is of shard `j`, so a roll-up
/// of it into shard `j` takes each of its rows.
pub(super) fn shard_as_partial(
    dir: &Path,
    shard: &ShardPartial,
    namespace: &str,
    period: &(String, String),
) -> Result<Partial, PartialError> {
    let mut files = shard.files.clone();
    files.index = 0;
    for (e, table) in [
        (&mut files.lines, LineRow::NAME),
        (&mut files.funcs, FuncRow::NAME),
        (&mut files.versions, VersionRow::NAME),
        (&mut files.paths, PathRow::NAME),
    ] {
        let name = format!("{table}-00000.parquet");
        let to = dir.join(&name);
        std::fs::rename(dir.join(&e.name), &to)
            .map_err(|cause| PartialError::Io { path: to, cause })?;
        e.name = name;
    }
    let d = Description {
        format: FORMAT.to_owned(),
        format_version: FORMAT_VERSION,
        namespace: namespace.to_owned(),
        date_from: period.0.clone(),
        date_to: period.1.clone(),
        counts: shard.counts.clone(),
        other_namespaces: Default::default(),
        shard_count: 1,
        shards: vec![files],
    };
    d.write(dir)?;
    Partial::open(dir)
}

impl Executor {
    /// Writes shard `t.shard` (of `shards`) of the roll-up of the job's partials,
    /// `t.partials`, and of `raw` (the raw rows' files, if any) into a temporary
    /// directory.
    pub(super) async fn rollup_partials(
        self: &Arc<Self>,
        t: &MergeTask,
        shards: u32,
        raw: Option<RawShard>,
    ) -> Result<WrittenPartial, TaskError> {
        if raw.is_none() && !t.chunks.is_empty() {
            return Err(Failure::internal(format!(
                "shard {}: spill chunks in a roll-up of partials alone",
                t.shard
            )));
        }
        let t2 = t.clone();
        let rt = tokio::runtime::Handle::current();
        let name = format!("merge {}", t.shard);
        let share = reserve_task(&self.pool, name.clone(), self.cfg.shares.per_loop);
        let root = self.cfg.scratch.clone();
        run_on_thread(&name, move |cancel| -> Result<_, TaskError> {
            let t0 = std::time::Instant::now();
            let j = t2.shard.0;
            let mut opened = Vec::with_capacity(t2.partials.len());
            for p in &t2.partials {
                if cancel.is_cancelled() {
                    return Err(Failure::transient("the task was abandoned"));
                }
                let read = |e| TaskError::from(SplitError::Read(e));
                let s = covmerge_input::formats::open_partial_shards(
                    &p.input,
                    &rt,
                    &p.description_sha256,
                )
                .map_err(read)?;
                let m = s.partial().description().shard_count;
                s.fetch(&shards_for(m, shards, j)).map_err(read)?;
                opened.push(s);
            }
            let mut parts: Vec<Partial> = opened.iter().map(|o| o.partial().clone()).collect();
            if let Some(r) = &raw {
                let files = r.written.dir.path().join("files");
                let own = shard_as_partial(&files, &r.written.shard, &r.namespace, &r.period)
                    .map_err(|e| Failure::transient(format!("shard {j}'s raw rows: {e}")))?;
                parts.push(own);
            }
            let (scratch, dir) = shard_dir(root.as_deref())?;
            let out = dir.path().join("files");
            let (shard, fan) = rollup_shard_within(&parts, &out, shards, j, share.size(), &scratch)
                .map_err(|e| {
                    // Errors name the store's objects, not the local copies.
                    let text = opened.iter().fold(e.to_string(), |m, o| o.shown(&m));
                    let kind = match e {
                        PartialError::Io { .. } => FailureKind::Transient,
                        _ => FailureKind::BadInput,
                    };
                    Failure::new(kind, format!("shard {j} of the roll-up: {text}"))
                })?;
            drop(share);
            drop(raw);
            info!(
                lines = shard.files.lines.rows,
                paths = shard.files.paths.rows,
                intermediate = fan.intermediate,
                ms = t0.elapsed().as_millis() as u64,
                "shard's partial rolled up from the partials' files"
            );
            Ok(WrittenPartial { dir, shard })
        })
        .await
        .map_err(Failure::transient)?
    }
}
