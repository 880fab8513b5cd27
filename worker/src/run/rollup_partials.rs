//! A roll-up's task when every input of the job is a partial (contract §10): shard
//! `S` of `n` is summed from only the shard files of each partial that can hold its
//! rows (`m / gcd(m, n)` of a partial of `m` shards, one when `m = n`), as `covmerge
//! rollup` sums them (`covmerge_partial::rollup_shard_within`, within the task's
//! share of memory): no split, no spill, and no source (each row's version is the
//! partial's own). The four files are those `covmerge rollup` writes for shard `S`.

use std::sync::Arc;

use covmerge_partial::{rollup_shard_within, shards_for, Partial, PartialError};
use covmerge_proto::wire::{Failure, FailureKind, MergeTask};
use tracing::info;

use super::budget::reserve_task;
use super::executor::Executor;
use super::failure::TaskError;
use super::partial_task::{shard_dir, WrittenPartial};
use crate::split::SplitError;
use crate::thread::run_on_thread;

impl Executor {
    /// Writes shard `t.shard` (of `shards`) of the roll-up of the job's partials,
    /// `t.partials`, into a temporary directory.
    pub(super) async fn rollup_partials(
        self: &Arc<Self>,
        t: &MergeTask,
        shards: u32,
    ) -> Result<WrittenPartial, TaskError> {
        if !t.chunks.is_empty() {
            return Err(Failure::internal(format!(
                "shard {}: spill chunks in a roll-up of partials alone",
                t.shard
            )));
        }
        let t2 = t.clone();
        let rt = tokio::runtime::Handle::current();
        let name = format!("merge {}", t.shard);
        let share = reserve_task(&self.pool, name.clone(), self.cfg.shares.per_loop);
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
            let parts: Vec<Partial> = opened.iter().map(|o| o.partial().clone()).collect();
            let (scratch, dir) = shard_dir()?;
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
