//! A roll-up's merge task (`coordinator --rollup`, contract §10): the shard's spill
//! chunks (the raw rows: each row's version found in the source, as a merge's partial
//! finds it) summed into the shard's four partial files (no base, no projection, no
//! part); with partials among the inputs, those files, as a partial of one shard, are
//! rolled up with the shards of every partial that map to this one, whose rows keep
//! their partials' versions (`rollup_partials`). Stored under the job's prefix, then
//! the task's marker. Idempotent as a merge task: another attempt rewrites the same
//! files and the same marker. A job of partials alone is summed without its source.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use covmerge_proto::memory::TaskShare;
use covmerge_proto::wire::{self, Failure, MergeOutcome, MergeTask};
use covmerge_proto::JobSpec;
use tracing::{info, instrument};

use super::budget::reserve_task;
use super::cancel::CancelSource;
use super::executor::Executor;
use super::failure::{store_failure, TaskError};
use super::keys;
use super::partial_task::{shard_dir, WrittenPartial};
use super::prefetch::Prefetch;
use super::rollup_partials::RawShard;
use crate::partial::{partial_shard, PartialShardSpec};
use crate::thread::run_on_thread;

impl Executor {
    /// Runs a roll-up's task: the shard's partial files written and stored, then its
    /// marker (no part: the outcome's `part` is empty).
    #[instrument(skip_all, fields(job = %t.job, shard = %t.shard, rollup = true))]
    pub(super) async fn rollup(self: &Arc<Self>, t: &MergeTask) -> Result<MergeOutcome, TaskError> {
        covmerge_fault::pause_async("merge").await;
        if covmerge_fault::fail_shard(t.shard.0) {
            return Err(Failure::transient(format!(
                "injected failure of shard {}",
                t.shard
            )));
        }
        let spec = self.job_spec(&t.job, false).await?;
        if spec.direct_partials.len() == spec.inputs.len() {
            // Partials only: summed as `covmerge rollup` sums them, no source.
            let written = self.rollup_partials(t, spec.shards, None).await?;
            return self.store_rollup_shard(t, written).await;
        }
        let raw = self.raw_rows_shard(t, spec.shards).await?;
        if t.partials.is_empty() {
            return self.store_rollup_shard(t, raw).await;
        }
        // The partials' rows keep their own versions (the source need not hold the
        // commits they were built on): rolled up with the raw rows' shard.
        let raw = RawShard {
            written: raw,
            namespace: spec.partial_namespace().unwrap_or_default().to_owned(),
            period: period_of(&spec),
        };
        let written = self.rollup_partials(t, spec.shards, Some(raw)).await?;
        self.store_rollup_shard(t, written).await
    }

    /// Writes the shard's partial files of its spill chunks alone (the raw rows), each
    /// row's version found in the source, as a merge's partial finds it.
    async fn raw_rows_shard(
        self: &Arc<Self>,
        t: &MergeTask,
        shards: u32,
    ) -> Result<WrittenPartial, TaskError> {
        let source = self.source(&t.source)?;
        source.forget_absent();
        let this = self.clone();
        let t2 = t.clone();
        let rt = tokio::runtime::Handle::current();
        let name = format!("merge {}", t.shard);
        let share = reserve_task(&self.pool, name.clone(), self.cfg.shares.per_loop);
        run_on_thread(&name, move |cancel| -> Result<_, TaskError> {
            let t0 = std::time::Instant::now();
            // No merge tables: the builder has most of the tables' share.
            let use_of = TaskShare::of(share.size());
            let chunks = Prefetch::start(
                &rt,
                this.store.clone(),
                t2.chunks.clone(),
                use_of.prefetch,
                cancel.clone(),
            );
            let (scratch, dir) = shard_dir(this.cfg.scratch.as_deref())?;
            let spec = PartialShardSpec {
                shard: t2.shard.0,
                shards,
                limit: (use_of.tables / 8 * 7).max(1 << 20),
                finish_budget: share.size(),
                scratch: &scratch,
            };
            // Checked before each file version: an abandoned task stops between files.
            let versions_from = CancelSource {
                inner: source,
                cancel: cancel.clone(),
            };
            let shard = partial_shard(chunks, &versions_from, &spec, &dir.path().join("files"))
                .map_err(Failure::from)?;
            drop(share);
            info!(
                lines = shard.files.lines.rows,
                paths = shard.files.paths.rows,
                ms = t0.elapsed().as_millis() as u64,
                "shard's partial of the raw rows written"
            );
            Ok(WrittenPartial { dir, shard })
        })
        .await
        .map_err(Failure::transient)?
    }

    /// Stores the shard's partial files, then the task's marker.
    async fn store_rollup_shard(
        &self,
        t: &MergeTask,
        written: WrittenPartial,
    ) -> Result<MergeOutcome, TaskError> {
        let partial = self.publish_partial(t, written).await?;
        let outcome = MergeOutcome {
            bytes: partial.files.iter().map(|f| f.bytes).sum(),
            partial: Some(partial),
            worker: self.cfg.worker_id.clone(),
            ..Default::default()
        };
        covmerge_fault::pause_async("upload").await;
        let marker = wire::encode(&outcome).map_err(Failure::internal)?;
        self.store
            .put(&keys::part_done(&t.job, t.shard), Bytes::from(marker))
            .await
            .map_err(store_failure)?;
        self.progress.shards_merged.fetch_add(1, Ordering::Relaxed);
        info!(bytes = outcome.bytes, "shard's partial stored");
        Ok(outcome)
    }
}

/// A roll-up job's period (`date_from`, `date_to`).
fn period_of(spec: &JobSpec) -> (String, String) {
    spec.rollup
        .as_ref()
        .map(|r| (r.date_from.clone(), r.date_to.clone()))
        .unwrap_or_default()
}
