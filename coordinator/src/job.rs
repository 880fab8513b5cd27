//! Running a job ([`run_job`]): store or load its spec ([`Start`]), the map phase (one
//! split task per input), the reduce phase (one merge task per shard, given every
//! split's chunks), then the manifest, the result and the dashboard. Each phase's tasks
//! are followed by a [`crate::tracker`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use covmerge_proto::layout as keys;
use covmerge_proto::manifest::{FailedTask, JobStatus};
use covmerge_proto::wire::{ChunkRef, MergeOutcome, MergeTask, SplitInput, SplitTask, Task};
use covmerge_proto::TaskRef;
use covmerge_proto::{Counts, JobId, JobSpec, Manifest, ShardId, SplitId};
use covmerge_queue::{Queue, QueueError};
use covmerge_storage::{Atomicity, Store, StoreError};
use tracing::{instrument, warn};

use crate::finish::{self, Assembly, Destination};
use crate::lease::Lease;
use crate::progress::ProgressView;
use crate::state::{Output, TaskState};
use crate::tracker::Tracker;

/// Why a job did not produce its result.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The job cannot be planned from what it was given (an input, a flag, the source).
    #[error("{0}")]
    Plan(String),
    /// A queue operation failed (past the broker outage budget, or refused).
    #[error("queue: {0}")]
    Queue(#[from] QueueError),
    /// A store operation failed (past the store outage budget, or refused).
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// Tasks failed for good: no result is published.
    #[error("job {job}: {} task(s) failed, no result published:\n{}", failed.len(), failed.iter().map(|f| format!("  {}: {}", f.task, f.error)).collect::<Vec<_>>().join("\n"))]
    TasksFailed {
        /// The job's id.
        job: String,
        /// Each failed task with its error.
        failed: Vec<FailedTask>,
    },
    /// More bad rows than `--max-bad-rows` allows.
    #[error("{first} ({count} bad row(s) in all; --max-bad-rows {max}); no result published")]
    TooManyBadRows {
        /// The first bad row: its input, line and problem.
        first: String,
        /// Bad rows in all.
        count: u64,
        /// `--max-bad-rows`.
        max: u64,
    },
    /// Inputs with a `namespace` column had rows, none of `--namespace`'s.
    #[error("--namespace {namespace:?} names no row of the inputs with a `namespace` column; their rows are of {seen} (names match exactly: case and spaces count); no result published")]
    NoRowOfNamespace {
        /// `--namespace`.
        namespace: String,
        /// The namespaces seen, with their rows.
        seen: String,
    },
    /// The result could not be written.
    #[error("writing the result {dest}: {message}")]
    Output {
        /// Where it was to go.
        dest: String,
        /// What failed.
        message: String,
    },
    /// The manifest could not be written.
    #[error("writing the manifest {dest}: {message}")]
    Manifest {
        /// Where it was to go.
        dest: String,
        /// What failed.
        message: String,
    },
    /// The result is in place, complete; what failed came after it (the manifest).
    #[error("{error}\nthe result was published, complete, at {result}; only the manifest above is missing or stale")]
    AfterPublish {
        /// The error after publishing.
        error: Box<JobError>,
        /// Where the complete result is.
        result: String,
    },
    /// The publish gate refused the result: an invariant of the contract is broken.
    #[error("job {job}: {refused}")]
    Gate {
        /// The job's id.
        job: String,
        /// The invariant, where and what.
        refused: Box<crate::gate::Refused>,
    },
    /// A check before any work refused the job (contract §6).
    #[error("{0}; nothing was read or written")]
    Preflight(String),
    /// Every input file is absent at the base: an empty result is not published.
    #[error("{0}")]
    NothingAtBase(String),
    /// The merges' sources do not hold the same base: one worker's `--source` lacks
    /// (or has other) files of it, which its shards would count as deleted.
    #[error("{0}")]
    SourcesDiffer(String),
    /// A new job's id is taken: its `job.json` (or other objects) is in the store.
    #[error("{0}")]
    Exists(String),
    /// `--resume` with a stored spec that is refused or differs from the command line.
    #[error("{0}")]
    Resume(String),
    /// Another coordinator holds the job's lease.
    #[error("{0}")]
    Busy(String),
    /// This coordinator's lease was taken over: it stopped without publishing.
    #[error("{0}")]
    LeaseLost(String),
    /// The dashboard call failed; the result is kept.
    #[error("dashboard: {message}\nthe result stays at {kept}; send it again without merging with:\n  {resend}")]
    Dashboard {
        /// The dashboard's (or the upload's) error.
        message: String,
        /// Where the result is.
        kept: String,
        /// The `covmerge notify` command that re-sends it.
        resend: String,
    },
}

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

fn resume_hint(job: &JobId) -> String {
    format!(
        "a new job needs an id of its own (or no --job: a new id is made); to continue \
         job {job}, run the command that started it with --job {job} --resume"
    )
}

/// Refuses a new job whose id is in use: anything under `jobs/<id>/` but a lease
/// (whose owner, if alive, is refused by the lease itself).
async fn check_new_id(job: &JobId, store: &Store) -> Result<(), JobError> {
    let spec_key = keys::job_spec(job);
    if store.exists(&spec_key).await? {
        if let Some(who) = crate::lease::live_owner(store, job).await? {
            return Err(crate::lease::busy(job, store, who));
        }
        return Err(JobError::Exists(format!(
            "job {job} already exists in {store} ({spec_key}); nothing was changed. {}",
            resume_hint(job)
        )));
    }
    let lease = keys::lease(job);
    let others: Vec<String> = store
        .list(&keys::job_prefix(job))
        .await?
        .into_iter()
        .filter(|k| *k != lease)
        .collect();
    if let Some(first) = others.first() {
        return Err(JobError::Exists(format!(
            "job {job} is in use in {store}: {} object(s) under {}/ without {spec_key} \
             (e.g. {first}); nothing was changed. Use another --job id, or delete that prefix",
            others.len(),
            keys::job_prefix(job)
        )));
    }
    Ok(())
}

/// Loads a resumed job's spec: it must be JSON, name this job, be within the bounds
/// tasks get, and be what the command line asks for.
async fn load_for_resume(
    job: &JobId,
    check: Option<&ResumeCheck>,
    store: &Store,
) -> Result<JobSpec, JobError> {
    let key = keys::job_spec(job);
    let Some(b) = store.get_opt(&key).await? else {
        return Err(JobError::Plan(format!(
            "--resume: job {job} not found in {store} (no {key})"
        )));
    };
    let refused = |why: String| {
        JobError::Resume(format!(
            "--resume: job {job}: {key} in {store} is refused: {why}; nothing was changed"
        ))
    };
    let spec = serde_json::from_slice::<JobSpec>(&b)
        .map_err(|e| refused(format!("not a job spec: {e}")))?;
    if spec.job != *job {
        return Err(refused(format!("it names job {:?}", spec.job.as_str())));
    }
    spec.validate().map_err(refused)?;
    if let Some(c) = check {
        if let Some((field, stored, asked)) =
            spec.first_difference(&c.spec, c.shards_given, c.date_to_given)
        {
            return Err(JobError::Resume(format!(
                "--resume: job {job} was started with other settings: {field} is {stored} \
                 in {key}, {asked} on this command line; nothing was changed. Resume with the \
                 flags that started the job, or start a new job with another --job id"
            )));
        }
        // An input rewritten under its name (BigQuery re-exports reuse
        // `000000000000.csv.gz`): the splits done before would keep its old rows and
        // the rest read the new ones, a result matching neither.
        if spec.input_ids.is_empty() {
            return Err(JobError::Resume(format!(
                "--resume: job {job}: {key} in {store} was written by an older covmerge that \
                 did not record what its inputs were (size, ETag, generation, modification \
                 time), so an input rewritten since under the same name cannot be told; \
                 nothing was changed. Run the job again as a new job (another --job id, or none)"
            )));
        }
        // Only a split that finished read the old content: an input whose split has
        // not (it failed on a bad row, say, and the input was fixed) is read anew,
        // whole, and the result is that of the new content.
        let mut changed = Vec::new();
        for (i, what) in crate::plan::changed_inputs(&spec, &c.spec) {
            let split = spec
                .split_ranges()
                .iter()
                .find(|r| r.contains(&i))
                .map_or(i, |r| r.start);
            if store
                .exists(&keys::split_done(job, SplitId(split as u32)))
                .await?
            {
                changed.push(what);
            } else {
                warn!(job = %job, "{what}; its split has not finished, so it is read anew, whole");
            }
        }
        if !changed.is_empty() {
            return Err(JobError::Resume(format!(
                "--resume: job {job}: {}; the tasks done before read the old content, a \
                 result mixing both would match neither, so nothing was changed. Restore \
                 the input as it was, or merge the new one as a new job (another --job id, \
                 or none)",
                changed.join("; ")
            )));
        }
    }
    Ok(spec)
}

/// Stores a new job's spec (create-if-absent) or loads a resumed job's, and takes the
/// job's lease (if `lease` is set) before anything is written.
async fn begin(
    start: Start,
    lease: Option<Duration>,
    store: &Store,
) -> Result<(JobSpec, Option<Lease>), JobError> {
    match start {
        Start::New(spec) => {
            let spec = *spec;
            let job = spec.job.clone();
            check_new_id(&job, store).await?;
            let held = match lease {
                Some(i) => Some(Lease::acquire(store, &job, i).await?),
                None => None,
            };
            let body = serde_json::to_vec_pretty(&spec).expect("spec encodes");
            let created = store
                .put_new(&keys::job_spec(&job), Bytes::from(body))
                .await;
            let refused = match created {
                Ok((true, atomicity)) => {
                    if atomicity == Atomicity::ReadCompareWrite {
                        warn!(store = %store, "this store has no create-if-absent write: job.json was written after a look");
                    }
                    return Ok((spec, held));
                }
                Ok((false, _)) => JobError::Exists(format!(
                    "job {job} already exists in {store} ({}): another coordinator stored it \
                     just now; nothing of it was changed. {}",
                    keys::job_spec(&job),
                    resume_hint(&job)
                )),
                Err(e) => e.into(),
            };
            if let Some(l) = held {
                l.release().await;
            }
            Err(refused)
        }
        Start::Resume { job, check } => {
            let spec = load_for_resume(&job, check.as_deref(), store).await?;
            let held = match lease {
                Some(i) => Some(Lease::acquire_for_resume(store, &job, i).await?),
                None => None,
            };
            Ok((spec, held))
        }
    }
}

/// Before a write that publishes: the lease must still be this coordinator's.
async fn still_held(lease: Option<&Lease>) -> Result<(), JobError> {
    match lease {
        Some(l) => l.ensure_held().await,
        None => Ok(()),
    }
}

/// The split tasks of a job, one per group of inputs ([`JobSpec::split_ranges`]),
/// numbered by their first input.
fn split_tasks(spec: &JobSpec) -> Vec<Task> {
    spec.split_ranges()
        .into_iter()
        .map(|r| {
            let i = r.start;
            Task::Split(SplitTask {
                job: spec.job.clone(),
                split: SplitId(i as u32),
                input: spec.inputs[i].clone(),
                shards: spec.shards,
                max_bad_rows: spec.max_bad_rows,
                read: spec.input_spec(i),
                namespace: spec.namespace.clone(),
                more: (i + 1..r.end)
                    .map(|j| {
                        let g = spec.input_spec(j);
                        SplitInput {
                            input: spec.inputs[j].clone(),
                            manager: g.manager,
                            commit: g.commit,
                        }
                    })
                    .collect(),
            })
        })
        .collect()
}

/// The merge tasks of a job, one per shard, given each shard's spill chunks: the
/// shards with the most spill bytes first, so that the merge phase does not end on a
/// large shard merged alone while the other task loops sit idle (longest first is
/// the classic bound for scheduling unequal tasks on a few machines).
fn merge_tasks(spec: &JobSpec, chunks: Vec<Vec<ChunkRef>>) -> Vec<Task> {
    let mut shards: Vec<(u64, usize, Vec<ChunkRef>)> = chunks
        .into_iter()
        .enumerate()
        .map(|(i, c)| (c.iter().map(|c| c.len).sum(), i, c))
        .collect();
    shards.sort_by_key(|&(bytes, i, _)| (std::cmp::Reverse(bytes), i));
    shards
        .into_iter()
        .map(|(_, i, shard_chunks)| {
            Task::Merge(MergeTask {
                job: spec.job.clone(),
                shard: ShardId(i as u32),
                base_commit: spec.base_commit.clone(),
                source: spec.source.clone(),
                chunks: shard_chunks,
                file_path_prefix: spec.file_path_prefix.clone(),
                groups: spec.groups.clone(),
            })
        })
        .collect()
}

/// What the map phase produced: totals, each shard's chunks, and the splits that failed.
struct MapOutput {
    totals: Counts,
    chunks: Vec<Vec<ChunkRef>>,
    failed: Vec<FailedTask>,
    first_bad: Option<covmerge_proto::wire::BadRow>,
    namespaces: covmerge_proto::manifest::NamespaceTally,
}

/// Gathers the settled splits' outcomes.
fn map_output(spec: &JobSpec, tracker: &Tracker<'_>) -> MapOutput {
    let mut out = MapOutput {
        totals: Counts::default(),
        chunks: vec![Vec::new(); spec.shards as usize],
        failed: tracker.failed(),
        first_bad: None,
        namespaces: Default::default(),
    };
    for (t, s) in &tracker.states {
        if let TaskState::Done {
            output: Output::Split(o),
            ..
        } = s
        {
            // A chunk for a shard the job does not have would be silently dropped:
            // its rows would be missing from the result.
            if let Some((shard, _)) = o.chunks.iter().find(|(sh, _)| sh.0 >= spec.shards) {
                out.failed.push(FailedTask {
                    task: t.to_string(),
                    error: format!(
                        "reported a chunk for shard {shard}, but the job has {} shards",
                        spec.shards
                    ),
                });
                continue;
            }
            out.totals.rows_in += o.counts.rows_in;
            out.totals.rows_bad += o.counts.rows_bad;
            out.namespaces.add(&o.namespaces);
            if out.first_bad.is_none() {
                out.first_bad = o.bad_rows.first().cloned();
            }
            for (shard, chunk) in &o.chunks {
                if let Some(c) = out.chunks.get_mut(shard.index()) {
                    c.push(chunk.clone());
                }
            }
        }
    }
    out
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
    progress.phase("split", spec.split_ranges().len() as u64);
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
    if failed.is_empty() && totals.rows_bad > spec.max_bad_rows {
        let first = map.first_bad.map(|b| b.to_string()).unwrap_or_default();
        if opts.cleanup {
            finish::close_queues(queue.as_ref(), &job).await;
        }
        return Err(JobError::TooManyBadRows {
            first,
            count: totals.rows_bad,
            max: spec.max_bad_rows,
        });
    }

    // A shared table whose rows are all of other namespaces: `--namespace` misspelt
    // (or of another case), and an empty result would look complete.
    if failed.is_empty()
        && namespaces.column
        && namespaces.matched == 0
        && !namespaces.others.is_empty()
    {
        if opts.cleanup {
            finish::close_queues(queue.as_ref(), &job).await;
        }
        return Err(JobError::NoRowOfNamespace {
            namespace: spec.namespace.clone().unwrap_or_default(),
            seen: namespaces.others.describe(),
        });
    }

    // Reduce phase (only when every split is in: a shard needs every split's chunks).
    let mut merges: BTreeMap<TaskRef, TaskState> = BTreeMap::new();
    if failed.is_empty() {
        progress.phase("merge", spec.shards as u64);
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
    if let Some(e) = refusal(&spec, &mut manifest, failed, &parts) {
        still_held(lease).await?;
        finish::write_manifest(&manifest, opts, &store, &job).await?;
        // Nobody waits for this job's reports any more (a resume declares them anew).
        if opts.cleanup {
            finish::close_queues(queue.as_ref(), &job).await;
        }
        return Err(e);
    }
    publish(&spec, manifest, parts, opts, queue.as_ref(), &store, lease).await
}

/// The manifest of a job whose merge tasks settled as `merges`, and the parts to
/// publish, in shard order.
async fn manifest_of(
    spec: &JobSpec,
    totals: Counts,
    merges: &BTreeMap<TaskRef, TaskState>,
    outages: &HashMap<TaskRef, u32>,
    store: &Store,
) -> Result<(Manifest, Vec<MergeOutcome>), JobError> {
    let job = &spec.job;
    let mut manifest = Manifest {
        job: job.to_string(),
        status: JobStatus::Complete,
        base_repo: spec.base_repo.clone(),
        base_commit: spec.base_commit.clone(),
        result: None,
        inputs: spec.inputs.clone(),
        totals,
        shards: Vec::new(),
        failed: Vec::new(),
        dashboard_upload: None,
        groups: spec.groups.clone(),
        other_namespaces: Default::default(),
        header: None,
    };
    // Executions recorded by the workers: a delivery count misses executions that
    // overlapped (a stalled worker finishing after another one redid its shard).
    let mut executions: HashMap<String, u32> = HashMap::new();
    let attempts_prefix = keys::attempts(job);
    for key in store.list(&attempts_prefix).await? {
        if let Some((dir, _)) = key
            .strip_prefix(&attempts_prefix)
            .and_then(|k| k.split_once('/'))
        {
            *executions.entry(dir.to_string()).or_default() += 1;
        }
    }
    let mut parts = Vec::new();
    for (t, s) in merges {
        if let (
            TaskRef::Merge(shard),
            TaskState::Done {
                output: Output::Merge(o),
                attempts,
            },
        ) = (t, s)
        {
            manifest.totals.add(&o.counts);
            manifest.shards.push(covmerge_proto::ShardEntry {
                index: shard.0,
                records: o.records,
                bytes: o.bytes,
                sha256: o.sha256.clone(),
                attempts: (*attempts)
                    .max(executions.get(&keys::task_dir(*t)).copied().unwrap_or(0))
                    .max(1),
                outages: outages.get(t).copied().unwrap_or(0),
            });
            parts.push((**o).clone());
        }
    }
    // Splits count every row read; rows outside --file-path-prefix are not in scope.
    manifest.totals.rows_in = manifest
        .totals
        .rows_in
        .saturating_sub(manifest.totals.rows_outside_prefix);
    Ok((manifest, parts))
}

/// Why a job whose tasks have all settled publishes nothing (the manifest then says
/// failed): tasks that failed, or no file of the input at the base.
fn refusal(
    spec: &JobSpec,
    manifest: &mut Manifest,
    failed: Vec<FailedTask>,
    parts: &[MergeOutcome],
) -> Option<JobError> {
    let job = &spec.job;
    // Every file of the input absent at the base is not coverage of that base but the
    // sign of a source that does not hold it (an empty `ROOT/<commit>/`, a snapshot
    // index written for the wrong commit, a worker's own `--source`): an empty result
    // would be published as complete.
    let e = if !failed.is_empty() {
        manifest.failed = failed.clone();
        JobError::TasksFailed {
            job: job.to_string(),
            failed,
        }
    } else if let Some(why) = sources_differ(parts, &manifest.shards) {
        JobError::SourcesDiffer(format!(
            "job {job}: the merges' sources do not hold the same base commit {}: {why}; a worker's --source lacks (or has other) files of the base, which its shards would count as deleted; give the workers the same source; no result published",
            spec.base_commit,
        ))
    } else if manifest.totals.files == 0 && manifest.totals.files_deleted > 0 {
        JobError::NothingAtBase(format!(
            "job {job}: none of the {} file(s) of the input exists at the base commit {} in the source {}: the source does not hold that base as the input expects (an empty or wrong ROOT/<commit>, snapshot or worker --source); no result published",
            manifest.totals.files_deleted,
            spec.base_commit,
            covmerge_storage::redact_url(&spec.source),
        ))
    } else {
        return None;
    };
    manifest.status = JobStatus::Failed;
    Some(e)
}

/// The merges grouped by the id of the base their worker's source gave, when there is
/// more than one id: each id with its shards and workers. `shards` is the manifest's
/// (in the order of `parts`).
fn sources_differ(parts: &[MergeOutcome], shards: &[covmerge_proto::ShardEntry]) -> Option<String> {
    let mut by_id: BTreeMap<&str, (Vec<u32>, Vec<&str>)> = BTreeMap::new();
    for (o, s) in parts.iter().zip(shards) {
        let e = by_id.entry(o.source_id.as_str()).or_default();
        e.0.push(s.index);
        let w = if o.worker.is_empty() {
            "a worker of protocol 6 or before"
        } else {
            o.worker.as_str()
        };
        if !e.1.contains(&w) {
            e.1.push(w);
        }
    }
    if by_id.len() < 2 {
        return None;
    }
    let groups: Vec<String> = by_id
        .iter()
        .map(|(id, (shards, workers))| {
            let id = if id.is_empty() {
                "no id (a marker of protocol 6 or before)"
            } else {
                id
            };
            let shards: Vec<String> = shards.iter().map(u32::to_string).collect();
            format!(
                "shard(s) {} merged by {} saw {id}",
                shards.join(", "),
                workers.join(", ")
            )
        })
        .collect();
    Some(groups.join("; "))
}

/// Publishes a complete job: the result, then the manifest naming it, then the
/// cleanup, then the dashboard. Each step that writes first checks the lease.
async fn publish(
    spec: &JobSpec,
    mut manifest: Manifest,
    parts: Vec<MergeOutcome>,
    opts: &JobOptions,
    queue: &dyn Queue,
    store: &Store,
    lease: Option<&Lease>,
) -> Result<JobOutcome, JobError> {
    let dest = Destination::parse(
        opts.out.as_deref(),
        opts.result_in_store,
        opts.dashboard.is_some(),
    )?;
    covmerge_fault::pause_async("assemble").await;
    let out = Assembly::new(spec, &manifest, parts, store, opts);
    if let Err(refused) = out.gate(spec, &manifest).await {
        manifest.status = JobStatus::Failed;
        manifest.failed = vec![FailedTask {
            task: "publish gate".into(),
            error: refused.to_string(),
        }];
        still_held(lease).await?;
        finish::write_manifest(&manifest, opts, store, &spec.job).await?;
        return Err(JobError::Gate {
            job: spec.job.to_string(),
            refused: Box::new(refused),
        });
    }
    if let Some(why) = crate::gate::why_empty(&manifest) {
        warn!("{why}");
    }
    manifest.header = Some(out.header_line().to_string());
    still_held(lease).await?;
    let result = out.write_result(&dest).await?;
    manifest.result = result.clone();
    still_held(lease).await?;
    out.write_manifest(&manifest)
        .await
        .map_err(|e| match &result {
            Some(r) => JobError::AfterPublish {
                error: Box::new(e),
                result: r.clone(),
            },
            None => e,
        })?;
    // The job's own work is done whatever the dashboard says: clean up first, so a
    // dashboard failure (the result kept, `covmerge notify` to re-send) leaves no spill.
    out.cleanup(queue).await;
    let mut dashboard_rows = None;
    if let Some(d) = &opts.dashboard {
        still_held(lease).await?;
        dashboard_rows = Some(
            out.to_dashboard(d, result.as_deref(), &mut manifest)
                .await?,
        );
    }
    Ok(JobOutcome {
        manifest,
        result: result.unwrap_or_default(),
        dashboard_rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_source_lacking_base_files_published_a_result() {
        let part = |shard: u32, id: &str, worker: &str| {
            (
                MergeOutcome {
                    source_id: id.into(),
                    worker: worker.into(),
                    ..MergeOutcome::default()
                },
                covmerge_proto::ShardEntry {
                    index: shard,
                    records: 0,
                    bytes: 0,
                    sha256: String::new(),
                    attempts: 1,
                    outages: 0,
                },
            )
        };
        let split = |v: Vec<(MergeOutcome, covmerge_proto::ShardEntry)>| -> (Vec<_>, Vec<_>) {
            v.into_iter().unzip()
        };
        let (o, s) = split(vec![
            part(0, "x", "w1"),
            part(1, "x", "w2"),
            part(2, "x", "w1"),
        ]);
        assert_eq!(sources_differ(&o, &s), None, "one id");
        assert_eq!(sources_differ(&[], &[]), None, "no shard");
        let (o, s) = split(vec![
            part(0, "x", "w1"),
            part(1, "y", "w2"),
            part(2, "x", "w1"),
            part(3, "", ""),
        ]);
        let why = sources_differ(&o, &s).expect("ids differ");
        assert_eq!(
            why,
            "shard(s) 3 merged by a worker of protocol 6 or before saw no id (a marker of protocol 6 or before); shard(s) 0, 2 merged by w1 saw x; shard(s) 1 merged by w2 saw y"
        );
    }

    #[test]
    fn merge_tasks_are_published_largest_shard_first() {
        let spec = JobSpec {
            namespace: None,
            job: JobId::parse("j1").unwrap(),
            inputs: vec!["in.csv".into()],
            base_repo: "r".into(),
            base_commit: "c".into(),
            source: "dir:/s".into(),
            shards: 4,
            max_bad_rows: 0,
            file_path_prefix: String::new(),
            header: covmerge_proto::job::HeaderSpec {
                namespace: "upstream".into(),
                duration: 0,
                date_to: "2026-12-01".into(),
                total_rows: None,
            },
            input: Default::default(),
            splits: Vec::new(),
            groups: Vec::new(),
            input_ids: Vec::new(),
        };
        let chunk = |len| ChunkRef {
            key: "jobs/j1/spill/00000/n/00000.cms".into(),
            start: 0,
            len,
        };
        let chunks = vec![
            vec![chunk(5)],
            vec![chunk(7), chunk(9)],
            vec![],
            vec![chunk(5)],
        ];
        let order: Vec<(u32, usize)> = merge_tasks(&spec, chunks)
            .iter()
            .map(|t| match t {
                Task::Merge(m) => (m.shard.0, m.chunks.len()),
                Task::Split(_) => panic!("a split"),
            })
            .collect();
        // 16 bytes, then the two of 5 in shard order, then the empty shard.
        assert_eq!(order, vec![(1, 2), (0, 1), (3, 1), (2, 0)]);
    }
}
