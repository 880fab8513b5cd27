//! The end of a roll-up job (`coordinator --rollup`, contract §10): no base, no part,
//! no result; its merge tasks wrote only their shards' partial files. The partial's
//! gate ([`super::partial::describe`]: every shard's files, `rows_in` = `rows_bad` +
//! the shards' rows) then the partial published as `--partial-out` publishes it
//! (`partial.json` last), then the manifest and the cleanup.

use covmerge_proto::wire::MergeOutcome;
use covmerge_proto::{JobSpec, Manifest};
use covmerge_queue::Queue;
use covmerge_storage::Store;

use super::begin::still_held;
use super::publish::refuse_job;
use super::{partial, JobError, JobOptions, JobOutcome};
use crate::finish;
use crate::lease::Lease;

/// What a roll-up's tasks made, to publish.
pub(super) struct RolledUp {
    /// The merge tasks' outcomes, in shard order.
    pub(super) parts: Vec<MergeOutcome>,
    /// Whether an input had a `namespace` column.
    pub(super) namespace_column: bool,
}

/// Publishes a roll-up job whose tasks all finished: the partial, refused (the
/// manifest then says failed) unless its gate passes, then the manifest.
pub(super) async fn publish_rollup(
    spec: &JobSpec,
    mut manifest: Manifest,
    done: RolledUp,
    opts: &JobOptions,
    (queue, store): (&dyn Queue, &Store),
    lease: Option<&Lease>,
) -> Result<JobOutcome, JobError> {
    let url = spec
        .partial_out
        .as_deref()
        .ok_or_else(|| JobError::Plan("a roll-up job without partial_out".into()))?;
    covmerge_fault::pause_async("assemble").await;
    let d = match partial::describe(spec, &manifest, done.namespace_column, &done.parts) {
        Ok(d) => d,
        Err(refused) => {
            let e = JobError::Gate {
                job: spec.job.to_string(),
                refused: Box::new(refused),
            };
            return Err(refuse_job(manifest, "partial gate", e, opts, store, spec, lease).await);
        }
    };
    still_held(lease).await?;
    let checked = match partial::check_partial(spec, &d, store, url).await {
        Ok(p) => p,
        Err(e) => {
            return Err(refuse_job(manifest, "--partial-out", e, opts, store, spec, lease).await)
        }
    };
    manifest.partial = Some(checked.write().await?);
    still_held(lease).await?;
    finish::write_manifest(&manifest, opts, store, &spec.job).await?;
    finish::cleanup(opts, store, &spec.job, queue).await;
    Ok(JobOutcome {
        manifest,
        result: String::new(),
        dashboard_rows: None,
    })
}
