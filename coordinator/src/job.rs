use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use covmerge_proto::layout as keys;
use covmerge_proto::manifest::{FailedTask, JobStatus};
use covmerge_proto::wire::{
    self, FailureKind, MergeOutcome, MergeTask, ReportStatus, SplitOutcome, SplitTask, Task,
    TaskRef, TaskReport,
};
use covmerge_proto::{Counts, JobId, JobSpec, Manifest, ShardId, SplitId};
use covmerge_queue::{Event, Queue, QueueError};
use covmerge_storage::{Store, StoreError};
use tracing::{info, instrument, warn};

use crate::finish::{self, Destination};
use crate::progress::ProgressView;
use crate::state::{Output, TaskState};

/// Why a job did not produce its result.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("{0}")]
    Plan(String),
    #[error("queue: {0}")]
    Queue(#[from] QueueError),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("job {job}: {} task(s) failed, no result published:\n{}", failed.len(), failed.iter().map(|f| format!("  {}: {}", f.task, f.error)).collect::<Vec<_>>().join("\n"))]
    TasksFailed {
        job: String,
        failed: Vec<FailedTask>,
    },
    #[error("{first} ({count} bad row(s) in all; --max-bad-rows {max}); no result published")]
    TooManyBadRows { first: String, count: u64, max: u64 },
    #[error("writing the result {dest}: {message}")]
    Output { dest: String, message: String },
    #[error("writing the manifest {dest}: {message}")]
    Manifest { dest: String, message: String },
    #[error("{0}; nothing was read or written")]
    Preflight(String),
    #[error("dashboard: {message}\nthe result stays at {kept}; send it again without merging with:\n  {resend}")]
    Dashboard {
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
}

/// Default of [`JobOptions::reconcile_every`].
pub const RECONCILE_EVERY: Duration = Duration::from_secs(30);
/// Default of [`JobOptions::republish_after`].
pub const REPUBLISH_AFTER: Duration = Duration::from_secs(15 * 60);

/// A finished job.
#[derive(Debug, Clone)]
pub struct JobOutcome {
    pub manifest: Manifest,
    /// Where the result was written (empty: only to the dashboard's object).
    pub result: String,
    /// DB rows the dashboard reported for `save_coverage`.
    pub dashboard_rows: Option<i64>,
}

/// What the workers said about a task's failed deliveries.
#[derive(Debug, Default, Clone)]
struct Notes {
    last_error: Option<String>,
    /// Deliveries handed back because the store was unreachable.
    outages: u32,
    /// Deliveries handed back because the task failed.
    failures: u32,
}

struct Tracker<'a> {
    queue: &'a dyn Queue,
    store: &'a Store,
    job: &'a JobId,
    states: BTreeMap<TaskRef, TaskState>,
    /// The tasks published, kept to publish again after a long silence.
    tasks: HashMap<TaskRef, Task>,
    notes: HashMap<TaskRef, Notes>,
    progress: &'a ProgressView,
    reconcile_every: Duration,
    republish_after: Duration,
}

impl Tracker<'_> {
    /// Starts a phase: a task whose `.done` marker is in the store (a resumed job, or
    /// one whose coordinator restarted) is done already; every other one is published.
    async fn start_phase(&mut self, tasks: Vec<Task>) -> Result<(), JobError> {
        for task in tasks {
            let t = task.task_ref();
            let mut state = TaskState::Pending;
            if let Some(o) = self.load_output(t).await? {
                state.complete(o, 0);
                self.progress.task_finished(&t);
            } else {
                publish(self.queue, self.job.as_str(), &task).await?;
                state.publish();
                self.tasks.insert(t, task);
            }
            self.states.insert(t, state);
        }
        Ok(())
    }

    /// The output recorded by a task's `.done` marker, if it has one.
    async fn load_output(&self, t: TaskRef) -> Result<Option<Output>, JobError> {
        let key = keys::done(self.job, t);
        Ok(match t {
            TaskRef::Split(_) => load_marker::<SplitOutcome>(self.store, &key)
                .await?
                .map(Output::Split),
            TaskRef::Merge(_) => load_marker::<MergeOutcome>(self.store, &key)
                .await?
                .map(Output::Merge),
        })
    }

    /// `covmerge_job_tasks{job_id,state}` from the current states.
    fn gauges(&self) {
        let (mut pending, mut running, mut done, mut failed) = (0, 0, 0, 0);
        // Rows read by the settled splits (`None` in the merge phase: no splits here).
        let mut rows_read = None;
        for s in self.states.values() {
            match s {
                TaskState::Pending => pending += 1,
                TaskState::Published => running += 1,
                TaskState::Done { output, .. } => {
                    done += 1;
                    if let Output::Split(o) = output {
                        *rows_read.get_or_insert(0) += o.counts.rows_in;
                    }
                }
                TaskState::Failed { .. } => failed += 1,
            }
        }
        covmerge_telemetry::metrics().job_tasks(self.job.as_str(), pending, running, done, failed);
        if let Some(n) = rows_read {
            self.progress.settled_rows_read(n);
        }
    }

    /// Settles waiting tasks whose marker is in the store (their report was lost).
    /// Returns whether any was settled.
    async fn reconcile(&mut self) -> Result<bool, JobError> {
        let pending: Vec<TaskRef> = self
            .states
            .iter()
            .filter(|(_, s)| !s.is_final())
            .map(|(t, _)| *t)
            .collect();
        if pending.is_empty() {
            return Ok(false);
        }
        let mut settled = false;
        let mut present = HashSet::new();
        for dir in [keys::splits(self.job), keys::parts(self.job)] {
            present.extend(self.store.list(&dir).await?);
        }
        for t in pending {
            if !present.contains(&keys::done(self.job, t)) {
                continue;
            }
            if let Some(o) = self.load_output(t).await? {
                if self.states.get_mut(&t).is_some_and(|s| s.complete(o, 0)) {
                    settled = true;
                    self.gauges();
                    self.progress.task_finished(&t);
                    info!(task = %t, "task settled from its marker in the store (no report arrived)");
                }
            }
        }
        Ok(settled)
    }

    /// Publishes every task still waited for again (see [`JobOptions::republish_after`]).
    async fn republish(&mut self) -> Result<(), JobError> {
        let waiting: Vec<TaskRef> = self
            .states
            .iter()
            .filter(|(_, s)| matches!(s, TaskState::Published))
            .map(|(t, _)| *t)
            .collect();
        warn!(
            tasks = waiting.len(),
            silent_secs = self.republish_after.as_secs(),
            "no task settled and no report for a long time: publishing the waiting tasks again"
        );
        for t in waiting {
            if let Some(task) = self.tasks.get(&t) {
                publish(self.queue, self.job.as_str(), task).await?;
            }
        }
        Ok(())
    }

    async fn wait_all(&mut self) -> Result<(), JobError> {
        let mut tick = tokio::time::interval(self.reconcile_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await; // The first tick is immediate.
        self.gauges();
        let mut last_news = tokio::time::Instant::now();
        while self.states.values().any(|s| !s.is_final()) {
            let event = tokio::select! {
                e = self.queue.next_event(self.job.as_str()) => e?,
                _ = tick.tick() => {
                    if self.reconcile().await? {
                        last_news = tokio::time::Instant::now();
                    } else if last_news.elapsed() >= self.republish_after {
                        self.republish().await?;
                        last_news = tokio::time::Instant::now();
                    }
                    continue;
                }
            };
            last_news = tokio::time::Instant::now();
            match event {
                Event::Report(body) => {
                    let r: TaskReport = match wire::decode(&body) {
                        Ok(r) => r,
                        Err(e) => {
                            warn!(error = %e, "undecodable report ignored");
                            continue;
                        }
                    };
                    if r.job != *self.job {
                        continue;
                    }
                    let Some(state) = self.states.get_mut(&r.task) else {
                        continue;
                    };
                    let changed = match r.status {
                        ReportStatus::Split(o) => state.complete(Output::Split(o), r.attempt.0),
                        ReportStatus::Merged(o) => state.complete(Output::Merge(o), r.attempt.0),
                        ReportStatus::Failed(f) => state.fail(f.message),
                        ReportStatus::Retrying(f) => {
                            let n = self.notes.entry(r.task).or_default();
                            if f.kind == FailureKind::Outage {
                                n.outages += 1;
                            } else {
                                n.failures += 1;
                            }
                            warn!(task = %r.task, attempt = r.attempt.0, kind = f.kind.as_str(), error = %f, "task attempt failed; it will be retried");
                            n.last_error = Some(f.message);
                            false
                        }
                    };
                    if changed {
                        self.gauges();
                        self.progress.task_finished(&r.task);
                        info!(task = %r.task, attempt = r.attempt.0, "task settled");
                    }
                }
                Event::DeadLetter { body, reason } => {
                    let task: Task = match wire::decode(&body) {
                        Ok(t) => t,
                        Err(e) => {
                            warn!(error = %e, "undecodable dead letter ignored");
                            continue;
                        }
                    };
                    let t = task.task_ref();
                    covmerge_telemetry::metrics().dead_letters.inc();
                    if let Some(state) = self.states.get_mut(&t) {
                        let cause = match self.notes.get(&t) {
                            Some(Notes {
                                last_error: Some(e),
                                outages,
                                failures,
                            }) => format!(
                                "; last error: {e} ({failures} failed attempt(s), {outages} store outage(s))"
                            ),
                            _ => String::new(),
                        };
                        if state.fail(format!("dead-lettered: {reason}{cause}")) {
                            self.gauges();
                            warn!(task = %task.task_ref(), %reason, "task dead-lettered");
                            self.progress.task_finished(&task.task_ref());
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn failed(&self) -> Vec<FailedTask> {
        self.states
            .iter()
            .filter_map(|(t, s)| match s {
                TaskState::Failed { error } => Some(FailedTask {
                    task: t.to_string(),
                    error: error.clone(),
                }),
                _ => None,
            })
            .collect()
    }
}

/// Publishes a task; under the test fault hook `duplicate_tasks` every task twice, to
/// show duplicates are harmless.
async fn publish(queue: &dyn Queue, job: &str, task: &Task) -> Result<(), JobError> {
    let body = wire::encode(task).expect("task encodes");
    if covmerge_fault::duplicate_tasks() {
        queue.publish_task(job, body.clone()).await?;
    }
    queue.publish_task(job, body).await?;
    Ok(())
}

async fn load_marker<T: serde::de::DeserializeOwned>(
    store: &Store,
    key: &str,
) -> Result<Option<T>, JobError> {
    Ok(match store.get_opt(key).await? {
        Some(b) => match wire::decode(&b) {
            Ok(v) => Some(v),
            Err(e) => {
                warn!(key, error = %e, "unreadable marker: the task will run again");
                None
            }
        },
        None => None,
    })
}

/// How a job starts.
#[derive(Debug, Clone)]
pub enum Start {
    /// A new job: its spec is stored, then every task is published.
    New(Box<JobSpec>),
    /// A job whose spec is stored: only tasks without a `.done` marker run again.
    Resume(JobId),
}

impl Start {
    pub fn job(&self) -> &JobId {
        match self {
            Start::New(spec) => &spec.job,
            Start::Resume(job) => job,
        }
    }
}

/// Stores a new job's spec, or loads a resumed job's.
async fn load_or_store_spec(start: Start, store: &Store) -> Result<JobSpec, JobError> {
    match start {
        Start::New(spec) => {
            let spec = *spec;
            let body = serde_json::to_vec_pretty(&spec).expect("spec encodes");
            store
                .put(&keys::job_spec(&spec.job), Bytes::from(body))
                .await?;
            Ok(spec)
        }
        Start::Resume(job) => match store.get_opt(&keys::job_spec(&job)).await? {
            Some(b) => serde_json::from_slice::<JobSpec>(&b)
                .map_err(|e| JobError::Plan(format!("job {job}: stored spec unreadable: {e}"))),
            None => Err(JobError::Plan(format!(
                "--resume: job {job} not found in {store}"
            ))),
        },
    }
}

/// The split tasks of a job, one per input.
fn split_tasks(spec: &JobSpec) -> Vec<Task> {
    spec.inputs
        .iter()
        .enumerate()
        .map(|(i, input)| {
            Task::Split(SplitTask {
                job: spec.job.clone(),
                split: SplitId(i as u32),
                input: input.clone(),
                shards: spec.shards,
                max_bad_rows: spec.max_bad_rows,
                go: spec.go_input(i),
            })
        })
        .collect()
}

/// The merge tasks of a job, one per shard, given each shard's spill chunks.
fn merge_tasks(spec: &JobSpec, chunks: Vec<Vec<String>>) -> Vec<Task> {
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, shard_chunks)| {
            Task::Merge(MergeTask {
                job: spec.job.clone(),
                shard: ShardId(i as u32),
                base_commit: spec.base_commit.clone(),
                source: spec.source.clone(),
                chunks: shard_chunks,
                file_path_prefix: spec.file_path_prefix.clone(),
            })
        })
        .collect()
}

/// What the map phase produced: totals, each shard's chunks, and the splits that failed.
struct MapOutput {
    totals: Counts,
    chunks: Vec<Vec<String>>,
    failed: Vec<FailedTask>,
    first_bad: Option<covmerge_proto::wire::BadRow>,
}

/// Gathers the settled splits' outcomes.
fn map_output(spec: &JobSpec, tracker: &Tracker<'_>) -> MapOutput {
    let mut out = MapOutput {
        totals: Counts::default(),
        chunks: vec![Vec::new(); spec.shards as usize],
        failed: tracker.failed(),
        first_bad: None,
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
            if out.first_bad.is_none() {
                out.first_bad = o.bad_rows.first().cloned();
            }
            for (shard, key) in &o.chunks {
                if let Some(c) = out.chunks.get_mut(shard.index()) {
                    c.push(key.clone());
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
    let spec = load_or_store_spec(start, &store).await?;
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
    };

    // Map phase.
    progress.phase("split", spec.inputs.len() as u64);
    let mut splits = tracker();
    splits.start_phase(split_tasks(&spec)).await?;
    splits.wait_all().await?;
    let map = map_output(&spec, &splits);
    let mut outages: HashMap<TaskRef, u32> = HashMap::new();
    outages.extend(splits.notes.iter().map(|(t, n)| (*t, n.outages)));
    let totals = map.totals;
    covmerge_telemetry::metrics()
        .job_rows_read
        .get_or_create(&[("job_id", job.to_string())])
        .set(totals.rows_in as i64);
    let mut failed = map.failed;
    if failed.is_empty() && totals.rows_bad > spec.max_bad_rows {
        let first = map.first_bad.map(|b| b.to_string()).unwrap_or_default();
        return Err(JobError::TooManyBadRows {
            first,
            count: totals.rows_bad,
            max: spec.max_bad_rows,
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
    };
    // Executions recorded by the workers: a delivery count misses executions that
    // overlapped (a stalled worker finishing after another one redid its shard).
    let mut executions: HashMap<String, u32> = HashMap::new();
    let attempts_prefix = keys::attempts(&job);
    for key in store.list(&attempts_prefix).await? {
        if let Some((dir, _)) = key
            .strip_prefix(&attempts_prefix)
            .and_then(|k| k.split_once('/'))
        {
            *executions.entry(dir.to_string()).or_default() += 1;
        }
    }
    let mut parts = Vec::new();
    for (t, s) in &merges {
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
            parts.push(o.part.clone());
        }
    }
    // Splits count every row read; rows outside --file-path-prefix are not in scope.
    manifest.totals.rows_in = manifest
        .totals
        .rows_in
        .saturating_sub(manifest.totals.rows_outside_prefix);
    if !failed.is_empty() {
        manifest.status = JobStatus::Failed;
        manifest.failed = failed.clone();
        finish::write_manifest(&manifest, opts, &store, &job).await?;
        return Err(JobError::TasksFailed {
            job: job.to_string(),
            failed,
        });
    }

    let dest = Destination::parse(
        opts.out.as_deref(),
        opts.result_in_store,
        opts.dashboard.is_some(),
    )?;
    covmerge_fault::pause_async("assemble").await;
    let header = finish::header_member(&spec, &manifest.totals);
    let result = finish::write_result(
        &dest,
        &store,
        header.clone(),
        &parts,
        opts.result_in_store,
        &job,
    )
    .await?;
    manifest.result = result.clone();
    finish::write_manifest(&manifest, opts, &store, &job).await?;
    // The job's own work is done whatever the dashboard says: clean up first, so a
    // dashboard failure (the result kept, `covmerge notify` to re-send) leaves no spill.
    if opts.cleanup {
        // The result is written: failing to clean up is worth a warning, not the job.
        for dir in [keys::spill_prefix(&job), keys::attempts(&job)] {
            match store.list(&dir).await {
                Ok(keys) => {
                    for key in keys {
                        if let Err(e) = store.delete(&key).await {
                            warn!(key, error = %e, "cleanup: cannot delete");
                        }
                    }
                }
                Err(e) => warn!(error = %e, "cleanup: cannot list {dir}"),
            }
        }
        if let Err(e) = queue.close_job(job.as_str()).await {
            warn!(error = %e, "cleanup: cannot delete the job's queues");
        }
    }
    let mut dashboard_rows = None;
    if let Some(d) = &opts.dashboard {
        let n = finish::to_dashboard(
            d,
            &store,
            header,
            &parts,
            result.as_deref(),
            &mut manifest,
            opts,
            &job,
        )
        .await?;
        dashboard_rows = Some(n);
    }
    let result = result.unwrap_or_default();
    Ok(JobOutcome {
        manifest,
        result,
        dashboard_rows,
    })
}
