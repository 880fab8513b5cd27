//! Running a job ([`run_job`]): store or load its spec ([`Start`]), the map phase (one
//! split task per input), the reduce phase (one merge task per shard, given every
//! split's chunks), then the manifest, the result and the dashboard. Each phase's tasks
//! are followed by a [`crate::tracker`].

mod apart;
mod begin;
mod error;
mod partial;
mod publish;
mod rollup;
mod tasks;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use covmerge_proto::layout as keys;
use covmerge_proto::manifest::JobStatus;
use covmerge_proto::{JobId, JobSpec, Manifest, TaskRef};
use covmerge_queue::Queue;
use covmerge_storage::Store;
use tracing::instrument;

pub use apart::{check_outputs_apart, is_stream};
pub use error::JobError;
pub use partial::{
    check_apart, check_apart_as, missing_dirs, partial_store, preflight_partial_out,
    publish_local_partial,
};

use crate::finish;
use crate::lease::Lease;
use crate::progress::ProgressView;
use crate::state::TaskState;
use crate::tracker::Tracker;
use begin::{begin, still_held};
use publish::{manifest_of, publish, refusal};
use tasks::{map_output, merge_tasks, split_tasks};

/// How the job's result is delivered.
#[derive(Debug, Clone, Default)]
pub struct JobOptions {
    /// OUT: a local path or a store URL.
    pub out: Option<String>,
    /// Where to write the manifest locally.
    pub manifest: Option<std::path::PathBuf>,
    /// Also keep `result.jsonl.gz` and `manifest.json` under the job's prefix (fleet mode).
    pub result_in_store: bool,
    /// Send the result to the dashboard (contract §8).
    pub dashboard: Option<crate::dashboard::Dashboard>,
    /// Delete spill chunks once the result is written.
    pub cleanup: bool,
    /// How often tasks still waited for are looked up in the store: a task whose
    /// marker exists is done even if its report was lost. `None`: every 30 s.
    pub reconcile_every: Option<Duration>,
    /// After this long with no task settled and no report or dead letter, every task
    /// still waited for is published again: a task message lost outside covmerge (a
    /// queue purged, a foreign consumer on the same queue) would otherwise be waited
    /// for forever. Duplicates are harmless. `None`: 15 minutes.
    pub republish_after: Option<Duration>,
    /// Hold the job's lease ([`crate::lease`]) with a heartbeat at this interval, so
    /// that no other coordinator drives the job meanwhile. `None`: no lease (embedded
    /// mode, whose store is its own).
    pub lease: Option<Duration>,
}

impl JobOptions {
    /// Embedded mode (`covmerge merge`): the result and the manifest where the
    /// command line says; the job's temporary store is the merge's own, so nothing is
    /// kept or cleaned up in it and no lease is held; the default intervals.
    pub fn embedded(
        out: Option<String>,
        manifest: Option<std::path::PathBuf>,
        dashboard: Option<crate::dashboard::Dashboard>,
    ) -> Self {
        JobOptions {
            out,
            manifest,
            result_in_store: false,
            dashboard,
            cleanup: false,
            reconcile_every: None,
            republish_after: None,
            lease: None,
        }
    }

    /// A fleet coordinator: the result and the manifest also kept in the store, the
    /// spill cleaned up, the job's lease held with a heartbeat of `lease`.
    pub fn fleet(
        out: Option<String>,
        manifest: Option<std::path::PathBuf>,
        dashboard: Option<crate::dashboard::Dashboard>,
        reconcile_every: Duration,
        republish_after: Duration,
        lease: Duration,
    ) -> Self {
        JobOptions {
            out,
            manifest,
            result_in_store: true,
            dashboard,
            cleanup: true,
            reconcile_every: Some(reconcile_every),
            republish_after: Some(republish_after),
            lease: Some(lease),
        }
    }
}

/// Default of [`JobOptions::reconcile_every`].
pub const RECONCILE_EVERY: Duration = Duration::from_secs(30);
/// Default of [`JobOptions::republish_after`].
pub const REPUBLISH_AFTER: Duration = Duration::from_secs(15 * 60);

/// A finished job.
#[derive(Debug, Clone)]
pub struct JobOutcome {
    /// The job's manifest (contract §7).
    pub manifest: Manifest,
    /// Where the result was written (empty: only to the dashboard's object).
    pub result: String,
    /// DB rows the dashboard reported for `save_coverage`.
    pub dashboard_rows: Option<i64>,
}

/// How a job starts.
#[derive(Debug, Clone)]
pub enum Start {
    /// A new job: its spec is stored (only if no job of that id exists), then every
    /// task is published.
    New(Box<JobSpec>),
    /// A job whose spec is stored: only tasks without a `.done` marker run again.
    Resume {
        /// The job's id.
        job: JobId,
        /// What the command line asks for; the stored spec must be the same.
        check: Option<Box<ResumeCheck>>,
    },
}

/// The spec a `--resume` command line plans, to compare with the stored one.
#[derive(Debug, Clone)]
pub struct ResumeCheck {
    /// The spec the command line plans.
    pub spec: JobSpec,
    /// Whether `--shards` was given (else the stored count stands).
    pub shards_given: bool,
    /// Whether `--date-to` (or `--base-at`) was given (else the stored date stands:
    /// the default is the day the job started).
    pub date_to_given: bool,
}

impl Start {
    /// The job's id.
    pub fn job(&self) -> &JobId {
        match self {
            Start::New(spec) => &spec.job,
            Start::Resume { job, .. } => job,
        }
    }
}
/// Runs a new job, or continues a stored one, over `queue` and `store`.
#[instrument(skip_all, fields(job = %start.job()))]
pub async fn run_job(
    start: Start,
    opts: &JobOptions,
    queue: Arc<dyn Queue>,
    store: Store,
    progress: &ProgressView,
) -> Result<JobOutcome, JobError> {
    let (spec, lease) = begin(start, opts.lease, &store).await?;
    let Some(lease) = lease else {
        return drive(spec, opts, queue, store, progress, None).await;
    };
    // Lost lease: the job future is dropped wherever it is (every write is atomic).
    let r = tokio::select! {
        r = drive(spec, opts, queue, store, progress, Some(&lease)) => r,
        e = lease.lost() => Err(e),
    };
    lease.release().await;
    r
}

/// The phases of a job whose spec is stored and whose lease (if any) is held.
async fn drive(
    spec: JobSpec,
    opts: &JobOptions,
    queue: Arc<dyn Queue>,
    store: Store,
    progress: &ProgressView,
    lease: Option<&Lease>,
) -> Result<JobOutcome, JobError> {
    let job = spec.job.clone();
    queue.open_job(job.as_str()).await?;
    let tracker = || Tracker {
        queue: queue.as_ref(),
        store: &store,
        job: &job,
        states: BTreeMap::new(),
        tasks: HashMap::new(),
        notes: HashMap::new(),
        progress,
        reconcile_every: opts.reconcile_every.unwrap_or(RECONCILE_EVERY),
        republish_after: opts.republish_after.unwrap_or(REPUBLISH_AFTER),
        tally: Default::default(),
        visits: Default::default(),
    };

    // Map phase.
    progress.phase("split", spec.split_task_ranges().len() as u64);
    let mut splits = tracker();
    splits.start_phase(split_tasks(&spec)).await?;
    splits.wait_all().await?;
    let map = map_output(&spec, &splits);
    let mut outages: HashMap<TaskRef, u32> = HashMap::new();
    outages.extend(splits.notes.iter().map(|(t, n)| (*t, n.outages)));
    let mut totals = map.totals;
    let namespaces = map.namespaces;
    totals.rows_other_namespaces = namespaces.others.total();
    covmerge_telemetry::metrics()
        .job_rows_read
        .get_or_create(&[("job_id", job.to_string())])
        .set(totals.rows_in as i64);
    let mut failed = map.failed;
    // Refusals of the splits' rows as a whole (each split within its limits): like a
    // failed task, they end the job with a failed manifest.
    let refused = if !failed.is_empty() {
        None
    } else if totals.rows_bad > spec.max_bad_rows {
        Some(JobError::TooManyBadRows {
            first: map.first_bad.map(|b| b.to_string()).unwrap_or_default(),
            count: totals.rows_bad,
            max: spec.max_bad_rows,
        })
    } else if namespaces.column && namespaces.matched == 0 && !namespaces.others.is_empty() {
        // A shared table whose rows are all of other namespaces: `--namespace`
        // misspelt (or of another case), and an empty result would look complete.
        Some(JobError::NoRowOfNamespace {
            namespace: spec.namespace.clone().unwrap_or_default(),
            seen: namespaces.others.describe(),
        })
    } else {
        None
    };

    // Reduce phase (only when every split is in: a shard needs every split's chunks).
    let mut merges: BTreeMap<TaskRef, TaskState> = BTreeMap::new();
    if failed.is_empty() && refused.is_none() {
        progress.phase("merge", spec.shards as u64);
        // The merge tasks' chunks, stored before any is published: a worker runs a
        // merge task only with its shard's (a forged one naming a split's chunk twice
        // was merged).
        let plan = covmerge_proto::wire::MergePlan::new(&job, &map.chunks);
        let plan = serde_json::to_vec(&plan).map_err(|e| JobError::Plan(e.to_string()))?;
        still_held(lease).await?;
        store.put(&keys::merge_plan(&job), plan.into()).await?;
        let mut tracker = tracker();
        tracker.start_phase(merge_tasks(&spec, map.chunks)).await?;
        tracker.wait_all().await?;
        failed.extend(tracker.failed());
        outages.extend(tracker.notes.iter().map(|(t, n)| (*t, n.outages)));
        merges = tracker.states;
    }
    progress.done();

    let (mut manifest, parts) = manifest_of(&spec, totals, &merges, &outages, &store).await?;
    manifest.other_namespaces = namespaces.others;
    if refused.is_some() {
        manifest.status = JobStatus::Failed;
    }
    if let Some(e) = refused.or_else(|| refusal(&spec, &mut manifest, failed, &parts)) {
        still_held(lease).await?;
        finish::write_manifest(&manifest, opts, &store, &job).await?;
        // Nobody waits for this job's reports any more (a resume declares them anew).
        if opts.cleanup {
            finish::close_queues(queue.as_ref(), &job).await;
        }
        return Err(e);
    }
    if spec.rollup.is_some() {
        let done = rollup::RolledUp {
            parts,
            namespace_column: namespaces.column,
        };
        let on = (queue.as_ref(), &store);
        return rollup::publish_rollup(&spec, manifest, done, opts, on, lease).await;
    }
    let partial = spec
        .partial_out
        .as_ref()
        .map(|_| partial::describe(&spec, &manifest, namespaces.column, &parts));
    let merged = publish::Merged { parts, partial };
    publish(&spec, manifest, merged, opts, queue.as_ref(), &store, lease).await
}
