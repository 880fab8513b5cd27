//! A merge task's share of the job's partial (`--partial-out`): the shard's chunks,
//! as the merge reads them, summed into the shard's four partial files
//! (`crate::partial`), then stored under the job's prefix before the task's marker.

use std::sync::Arc;

use bytes::Bytes;
use covmerge_partial::ShardPartial;
use covmerge_proto::memory::TaskShare;
use covmerge_proto::wire::{Failure, MergeTask, PartialFile, PartialShardOutcome};
use covmerge_telemetry::metrics;
use tracing::info;

use super::cancel::CancelSource;
use super::direct_partial::DirectChunks;
use super::executor::{Executor, OnThread};
use super::failure::{store_failure, TaskError};
use super::keys;
use crate::merge::MergedPart;
use crate::partial::{PartialShardSpec, ShardFeed};
use crate::source::Source;

/// A shard's partial files, written in a temporary directory (removed when dropped).
pub(super) struct WrittenPartial {
    pub(super) dir: ShardDir,
    pub(super) shard: ShardPartial,
}

/// A temporary directory for a shard's partial files: removed when dropped, and by the
/// interrupt handler if the process is stopped first (Ctrl-C left them in `$TMPDIR`).
pub(super) struct ShardDir {
    // Declared first: unregistered before the directory goes.
    _interrupt: covmerge_storage::local::Registered,
    dir: tempfile::TempDir,
}

impl ShardDir {
    pub(super) fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// The scratch root (`root`, else `$TMPDIR`) and a new temporary directory in it for a
/// shard's partial files.
pub(super) fn shard_dir(
    root: Option<&std::path::Path>,
) -> Result<(std::path::PathBuf, ShardDir), TaskError> {
    let scratch = root.map_or_else(std::env::temp_dir, std::path::Path::to_owned);
    let dir = tempfile::Builder::new()
        .prefix("covmerge-partial-shard-")
        .tempdir_in(&scratch)
        .map_err(|e| {
            Failure::transient(format!(
                "a temporary directory for the shard's partial in {}: {e}",
                scratch.display()
            ))
        })?;
    let dir = ShardDir {
        _interrupt: covmerge_storage::local::on_interrupt(dir.path()),
        dir,
    };
    Ok((scratch, dir))
}

impl Executor {
    /// Merges the task's shard (of `shards`) and writes its partial from the same
    /// read of its chunks, within `use_of` (the builder's runs spill to `$TMPDIR`
    /// past its share).
    pub(super) fn merge_with_partial_blocking(
        &self,
        t: &MergeTask,
        shards: u32,
        source: Arc<dyn Source>,
        use_of: TaskShare,
        direct: &DirectChunks,
        on: OnThread<'_>,
    ) -> Result<(MergedPart, WrittenPartial), TaskError> {
        let t0 = std::time::Instant::now();
        // The task's share: what the merge used is free when the builder's runs are
        // rolled up.
        let whole = use_of.prefetch + use_of.held_bases + use_of.held_maps + use_of.tables;
        let use_of = use_of.beside_partial();
        let (scratch, dir) = shard_dir(self.cfg.scratch.as_deref())?;
        let spec = PartialShardSpec {
            shard: t.shard.0,
            shards,
            limit: use_of.partial.max(1 << 20),
            finish_budget: whole,
            scratch: &scratch,
        };
        // Checked before each file version, as the merge's own.
        let versions_from = CancelSource {
            inner: source.clone(),
            cancel: on.cancel.clone(),
        };
        let mut feed = ShardFeed::new(&versions_from, &spec).map_err(Failure::from)?;
        let part = self.merge_blocking(t, source, use_of, direct, on, Some(&mut feed))?;
        let shard = feed
            .finish(&dir.path().join("files"))
            .map_err(Failure::from)?;
        info!(
            lines = shard.files.lines.rows,
            paths = shard.files.paths.rows,
            ms = t0.elapsed().as_millis() as u64,
            "shard merged and its partial written"
        );
        Ok((part, WrittenPartial { dir, shard }))
    }

    /// Stores the shard's partial files under the job's prefix; returns what the
    /// marker says of them.
    pub(super) async fn publish_partial(
        &self,
        t: &MergeTask,
        p: WrittenPartial,
    ) -> Result<PartialShardOutcome, TaskError> {
        let s = &p.shard;
        let f = &s.files;
        let mut files = Vec::with_capacity(4);
        for e in [&f.lines, &f.funcs, &f.versions, &f.paths] {
            let path = p.dir.path().join("files").join(&e.name);
            let file = std::fs::File::open(&path)
                .map_err(|err| Failure::transient(format!("{}: {err}", path.display())))?;
            let key = keys::partial_file(&t.job, &e.name);
            if e.bytes <= 8 << 20 {
                let bytes = std::fs::read(&path)
                    .map_err(|err| Failure::transient(format!("{}: {err}", path.display())))?;
                self.store.put(&key, Bytes::from(bytes)).await
            } else {
                self.store.put_file(&key, &file, e.bytes).await
            }
            .map_err(store_failure)?;
            metrics().bytes_written("partial", e.bytes);
            if files.is_empty() {
                // A worker killed here leaves a shard's partial half stored.
                covmerge_fault::pause_async("partial").await;
            }
            files.push(PartialFile {
                name: e.name.clone(),
                rows: e.rows,
                bytes: e.bytes,
                sha256: e.sha256.clone(),
            });
        }
        let c = &s.counts;
        Ok(PartialShardOutcome {
            files,
            rows_in: c.rows_in,
            rows_without_line: c.rows_without_line,
            rows_without_version: c.rows_without_version,
            hits_without_version: c.hits_without_version,
        })
    }
}
