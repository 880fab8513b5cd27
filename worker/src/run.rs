//! Executing tasks ([`Executor`]) and the worker loop over a queue ([`run_worker`]).
//!
//! A task's outputs are written under the job's prefix in the store, data first and
//! the `.done` marker last; the report is published and the delivery acknowledged only
//! after that. A worker killed at any point leaves either nothing, or objects that a
//! redelivery overwrites with identical bytes.
//!
//! ```text
//! jobs/<job>/spill/<split>/<nonce>/<shard>-<seq>.cms   spill chunks of one split attempt
//! jobs/<job>/splits/<split>.done               SplitOutcome (the split's commit point)
//! jobs/<job>/parts/<shard>.jsonl.gz            a merged part
//! jobs/<job>/parts/<shard>.done                MergeOutcome (the shard's commit point)
//! jobs/<job>/attempts/<task>/<nonce>           one empty object per execution started
//! ```
//!
//! A worker trusts no task: it checks every field against hard bounds
//! ([`Task::validate`]) and the task against the job the coordinator stored
//! (`jobs/<job>/job.json`: a split may only read one of the job's inputs, a merge only
//! use the job's source and base commit). A task whose marker already exists is not
//! redone: its report is sent again from the marker (the first report may have been
//! lost). A report that cannot be published hands the task back instead of
//! acknowledging it, so the redelivery reports it.

use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use covmerge_proto::job::InputFormat;
use covmerge_proto::wire::TaskRef;
use covmerge_proto::wire::{
    self, MergeOutcome, MergeTask, ReportStatus, SplitOutcome, SplitTask, Task, TaskReport,
};
use covmerge_proto::{Attempt, JobId, JobSpec, ShardId, SplitId};
use covmerge_queue::Queue;
use covmerge_storage::Store;
use covmerge_telemetry::{metrics, outcome};
use sha2::Digest;
use tokio::sync::watch;
use tracing::{info, instrument, warn};

use crate::merge::{merge_shard_with_prefix, MergeError, ProjectionCache};
use crate::source::{open_source, CachedSource, Source, SourceError};
use crate::split::go::{split_go, GoSource};
use crate::split::{split_input, SplitError, SplitSettings};
use crate::thread::{run_on_thread, Cancel};

/// Keys of a job's objects.
pub mod keys {
    use super::*;

    pub fn job_prefix(job: &JobId) -> String {
        format!("jobs/{job}")
    }
    pub fn spill(job: &JobId, split: SplitId, nonce: &str, shard: ShardId, seq: u32) -> String {
        format!("jobs/{job}/spill/{split}/{nonce}/{shard}-{seq:05}.cms")
    }
    pub fn split_done(job: &JobId, split: SplitId) -> String {
        format!("jobs/{job}/splits/{split}.done")
    }
    pub fn part(job: &JobId, shard: ShardId) -> String {
        format!("jobs/{job}/parts/{shard}.jsonl.gz")
    }
    pub fn part_done(job: &JobId, shard: ShardId) -> String {
        format!("jobs/{job}/parts/{shard}.done")
    }
    /// The job's spec, written by the coordinator before any task.
    pub fn job_spec(job: &JobId) -> String {
        format!("jobs/{job}/job.json")
    }
    /// Where executions of tasks are recorded, one object each.
    pub fn attempts(job: &JobId) -> String {
        format!("jobs/{job}/attempts/")
    }
    /// The directory name of a task under [`attempts`].
    pub fn task_dir(task: TaskRef) -> String {
        match task {
            TaskRef::Split(s) => format!("split-{s}"),
            TaskRef::Merge(s) => format!("shard-{s}"),
        }
    }
    pub fn attempt(job: &JobId, task: TaskRef, nonce: &str) -> String {
        format!("jobs/{job}/attempts/{}/{nonce}", task_dir(task))
    }
    /// The marker of a task: its output exists.
    pub fn done(job: &JobId, task: TaskRef) -> String {
        match task {
            TaskRef::Split(s) => split_done(job, s),
            TaskRef::Merge(s) => part_done(job, s),
        }
    }
}

/// A task failure, classified once: retrying helps (`Transient`, `Outage`) or not
/// (`Permanent`).
#[derive(Debug, Clone, thiserror::Error)]
pub enum TaskError {
    #[error("{0}")]
    Transient(String),
    /// The store stayed unreachable for its whole retry budget: the task is fine, the
    /// infrastructure is not. Counted apart from failures of the task itself.
    #[error("{0}")]
    Outage(String),
    #[error("{0}")]
    Permanent(String),
}

impl TaskError {
    /// A store error: transient ones (after the store's own retry budget) are outages.
    pub fn store(e: covmerge_storage::StoreError) -> Self {
        if e.is_transient() {
            TaskError::Outage(e.to_string())
        } else {
            TaskError::Transient(e.to_string())
        }
    }
}

/// What a split task's input holds, opened.
enum InputKind {
    GoDir,
    GoText(Box<dyn std::io::Read + Send>),
    Csv(Box<dyn std::io::Read + Send>),
}

/// Detects (or takes as given) an input's format: a local directory is Go covdata, a
/// stream whose first bytes are `mode: ` a Go text profile, anything else CSV.
fn input_kind(
    input: &str,
    format: InputFormat,
    rt: &tokio::runtime::Handle,
    inflate: crate::input::Inflate,
) -> Result<InputKind, TaskError> {
    let local_dir = !covmerge_storage::is_store_url(input) && std::path::Path::new(input).is_dir();
    match format {
        InputFormat::GoCovdata | InputFormat::Auto if local_dir => return Ok(InputKind::GoDir),
        InputFormat::GoCovdata => {
            return Err(TaskError::Permanent(format!(
                "{input}: a Go covdata input must be a local directory"
            )))
        }
        _ => {}
    }
    let mut reader = crate::input::open_input(input, rt, inflate)
        .map_err(|e| TaskError::Permanent(e.to_string()))?;
    let text = match format {
        InputFormat::GoText => true,
        InputFormat::Csv => false,
        _ => {
            // Peek at the first bytes, then hand them back in front of the rest.
            let mut head = Vec::with_capacity(8);
            std::io::Read::by_ref(&mut reader)
                .take(6)
                .read_to_end(&mut head)
                .map_err(|e| {
                    TaskError::Permanent(crate::input::InputError::from_read(input, e).to_string())
                })?;
            let text = crate::input::go::text::looks_like_profile(&head);
            reader = Box::new(std::io::Cursor::new(head).chain(reader));
            text
        }
    };
    Ok(if text {
        InputKind::GoText(reader)
    } else {
        InputKind::Csv(reader)
    })
}

impl From<SplitError> for TaskError {
    /// Only a failed chunk write can succeed on retry; bad input stays bad.
    fn from(e: SplitError) -> Self {
        match &e {
            SplitError::Emit {
                transient: true, ..
            } => TaskError::Outage(e.to_string()),
            _ => TaskError::Permanent(e.to_string()),
        }
    }
}

impl From<MergeError> for TaskError {
    fn from(e: MergeError) -> Self {
        match &e {
            MergeError::Fetch {
                transient: true, ..
            } => TaskError::Outage(e.to_string()),
            MergeError::Source(SourceError::Io { .. }) => TaskError::Transient(e.to_string()),
            _ => TaskError::Permanent(e.to_string()),
        }
    }
}

/// What a worker process is configured with.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The worker's own source; overrides the one named in merge tasks.
    pub source: Option<String>,
    /// Memory the split builders may hold before flushing chunks.
    pub split_budget: usize,
    /// Parse threads per split; 1 also inflates on that thread (one-core workers).
    pub split_threads: usize,
    /// Bytes of file versions to cache.
    pub source_cache: usize,
    /// Bytes of line maps to cache.
    pub projection_cache: usize,
    /// After SIGTERM: how long the current task may still run before it is handed back.
    pub grace: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            source: None,
            // A file's rows all land in one shard, so the versions and line maps a merge
            // needs are those of its own few files: small caches suffice, and every
            // byte here counts toward the 256 MB peak at 2 merges in parallel.
            split_budget: 40 << 20,
            split_threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            source_cache: 24 << 20,
            projection_cache: 8 << 20,
            grace: Duration::from_secs(25),
        }
    }
}

/// Live counters, for a progress display.
#[derive(Debug, Default)]
pub struct Progress {
    pub rows_read: AtomicU64,
    pub shards_merged: AtomicU64,
}

/// Runs tasks against a store. One per worker process, shared by its task loops.
pub struct Executor {
    store: Store,
    cfg: WorkerConfig,
    sources: Mutex<HashMap<String, Arc<dyn Source>>>,
    /// Specs of the jobs seen lately, to check tasks against.
    specs: Mutex<HashMap<JobId, Arc<JobSpec>>>,
    cache: ProjectionCache,
    pub progress: Arc<Progress>,
}

/// Job specs an executor remembers; more jobs than this at once just reload.
const SPEC_CACHE: usize = 64;

impl Executor {
    pub fn new(store: Store, cfg: WorkerConfig) -> Self {
        let cache = ProjectionCache::new(cfg.projection_cache);
        Executor {
            store,
            cfg,
            sources: Mutex::default(),
            specs: Mutex::default(),
            cache,
            progress: Arc::default(),
        }
    }

    fn source(&self, spec: &str) -> Result<Arc<dyn Source>, TaskError> {
        let spec = self.cfg.source.as_deref().unwrap_or(spec);
        if let Some(s) = self.sources.lock().unwrap().get(spec) {
            return Ok(s.clone());
        }
        let inner = open_source(spec).map_err(|e| TaskError::Permanent(e.to_string()))?;
        let s: Arc<dyn Source> = Arc::new(CachedSource::new(inner, self.cfg.source_cache));
        self.sources
            .lock()
            .unwrap()
            .insert(spec.to_string(), s.clone());
        Ok(s)
    }

    /// The spec the coordinator stored for `job` (cached unless `fresh`).
    async fn job_spec(&self, job: &JobId, fresh: bool) -> Result<Arc<JobSpec>, TaskError> {
        if !fresh {
            if let Some(s) = self.specs.lock().unwrap().get(job) {
                return Ok(s.clone());
            }
        }
        let key = keys::job_spec(job);
        let bytes = self
            .store
            .get_opt(&key)
            .await
            .map_err(TaskError::store)?
            .ok_or_else(|| {
                TaskError::Permanent(format!("job {job} is unknown: no {key} in {}", self.store))
            })?;
        let spec: JobSpec = serde_json::from_slice(&bytes)
            .map_err(|e| TaskError::Permanent(format!("{key}: unreadable job spec: {e}")))?;
        if spec.job != *job {
            return Err(TaskError::Permanent(format!(
                "{key} names job {}",
                spec.job
            )));
        }
        let spec = Arc::new(spec);
        let mut specs = self.specs.lock().unwrap();
        if specs.len() >= SPEC_CACHE {
            specs.clear();
        }
        specs.insert(job.clone(), spec.clone());
        Ok(spec)
    }

    /// Admits a task only if it is part of its job as the coordinator stored it: a
    /// split reads one of the job's inputs, a merge uses the job's source and base.
    /// Whoever can publish a task can thus not make a worker read other files.
    pub async fn admit(&self, task: &Task) -> Result<(), TaskError> {
        let check = |spec: &JobSpec| -> Result<(), String> {
            match task {
                Task::Split(t) => {
                    if spec.inputs.get(t.split.index()) != Some(&t.input) {
                        return Err(format!(
                            "its input is not input {} of job {}",
                            t.split, t.job
                        ));
                    }
                    if t.shards != spec.shards
                        || t.max_bad_rows != spec.max_bad_rows
                        || t.go != spec.go_input(t.split.index())
                    {
                        return Err(format!("its settings are not those of job {}", t.job));
                    }
                }
                Task::Merge(t) => {
                    if t.shard.0 >= spec.shards {
                        return Err(format!("job {} has {} shards", t.job, spec.shards));
                    }
                    if t.source != spec.source
                        || t.base_commit != spec.base_commit
                        || t.file_path_prefix != spec.file_path_prefix
                    {
                        return Err(format!(
                            "its source, base commit or file path prefix is not that of job {}",
                            t.job
                        ));
                    }
                }
            }
            Ok(())
        };
        if check(&*self.job_spec(task.job(), false).await?).is_ok() {
            return Ok(());
        }
        // The job may have been planned again under the same id: reload before refusing.
        check(&*self.job_spec(task.job(), true).await?)
            .map_err(|why| TaskError::Permanent(format!("{} refused: {why}", task.task_ref())))
    }

    /// The report of a task whose marker exists: it was done before (and its report
    /// possibly lost), so it is reported again rather than redone.
    pub async fn finished(&self, task: &Task) -> Result<Option<ReportStatus>, TaskError> {
        let key = keys::done(task.job(), task.task_ref());
        let Some(bytes) = self.store.get_opt(&key).await.map_err(TaskError::store)? else {
            return Ok(None);
        };
        let status = match task {
            Task::Split(_) => wire::decode::<SplitOutcome>(&bytes).map(ReportStatus::Split),
            Task::Merge(_) => wire::decode::<MergeOutcome>(&bytes).map(ReportStatus::Merged),
        };
        match status {
            Ok(s) => Ok(Some(s)),
            Err(e) => {
                warn!(key, error = %e, "unreadable marker: doing the task again");
                Ok(None)
            }
        }
    }

    /// Records that an execution of `task` starts (for the manifest's `attempts`).
    pub async fn record_attempt(&self, task: &Task) {
        let key = keys::attempt(task.job(), task.task_ref(), &uuid_like());
        if let Err(e) = self.store.put(&key, Bytes::new()).await {
            warn!(key, error = %e, "cannot record the attempt; the manifest may undercount it");
        }
    }

    /// Runs one task to completion: outputs and marker written.
    pub async fn execute(self: &Arc<Self>, task: &Task) -> Result<ReportStatus, TaskError> {
        match task {
            Task::Split(t) => self.split(t).await.map(ReportStatus::Split),
            Task::Merge(t) => self.merge(t).await.map(ReportStatus::Merged),
        }
    }

    #[instrument(skip_all, fields(job = %t.job, split = %t.split))]
    async fn split(self: &Arc<Self>, t: &SplitTask) -> Result<SplitOutcome, TaskError> {
        let this = self.clone();
        let t2 = t.clone();
        let rt = tokio::runtime::Handle::current();
        let name = format!("split {}", t.split);
        let outcome = run_on_thread(&name, move |cancel| -> Result<SplitOutcome, TaskError> {
            // A one-thread split inflates on its own thread too: nothing to overlap with.
            let inflate = if this.cfg.split_threads <= 1 {
                crate::input::Inflate::Inline
            } else {
                crate::input::Inflate::Pipelined
            };
            // Chunk contents depend on how pieces fell to parse threads, so every
            // attempt writes under its own nonce: two attempts running at once never
            // overwrite each other's chunks, and the marker names only its own.
            let nonce = uuid_like();
            let seq = AtomicU64::new(0);
            let chunks = Mutex::new(Vec::new());
            let settings = SplitSettings {
                shards: t2.shards,
                max_bad_rows: t2.max_bad_rows,
                memory_budget: this.cfg.split_budget,
                threads: this.cfg.split_threads,
            };
            let emit = |shard: ShardId, chunk: Vec<u8>| -> Result<(), SplitError> {
                let n = seq.fetch_add(1, Ordering::Relaxed) as u32;
                let key = keys::spill(&t2.job, t2.split, &nonce, shard, n);
                let abandoned = || SplitError::Emit {
                    shard,
                    message: ABANDONED.into(),
                    transient: true,
                };
                let len = chunk.len() as u64;
                until_cancelled(&rt, &cancel, this.store.put(&key, Bytes::from(chunk)))
                    .ok_or_else(abandoned)?
                    .map_err(|e| SplitError::Emit {
                        shard,
                        message: e.to_string(),
                        transient: e.is_transient(),
                    })?;
                metrics().bytes_written("chunk", len);
                let first = {
                    let mut c = chunks.lock().unwrap();
                    c.push((shard, key));
                    c.len() == 1
                };
                if first {
                    crate::fault::pause_blocking_unless("split", &|| cancel.is_cancelled());
                }
                if cancel.is_cancelled() {
                    return Err(abandoned());
                }
                Ok(())
            };
            // Abandoned (handed back after the grace period): the next read fails.
            let cancelable = |inner| CancelRead {
                inner,
                cancel: cancel.clone(),
            };
            let mut outcome = match input_kind(&t2.input, t2.go.format, &rt, inflate)? {
                InputKind::GoDir => split_go(
                    &t2.input,
                    GoSource::Dir(std::path::Path::new(&t2.input)),
                    &t2.go,
                    settings,
                    &emit,
                )?,
                InputKind::GoText(r) => split_go(
                    &t2.input,
                    GoSource::Text(Box::new(std::io::BufReader::with_capacity(
                        1 << 16,
                        cancelable(r),
                    ))),
                    &t2.go,
                    settings,
                    &emit,
                )?,
                InputKind::Csv(r) => split_input(&t2.input, cancelable(r), settings, &emit)?,
            };
            let mut chunks = chunks.into_inner().unwrap();
            chunks.sort();
            outcome.chunks = chunks;
            this.progress
                .rows_read
                .fetch_add(outcome.counts.rows_in, Ordering::Relaxed);
            Ok(outcome)
        })
        .await
        .map_err(|e| TaskError::Transient(e.to_string()))??;
        if outcome.counts.rows_bad > t.max_bad_rows {
            let first = outcome
                .bad_rows
                .first()
                .map(|b| b.to_string())
                .unwrap_or_default();
            return Err(TaskError::Permanent(format!(
                "{first} ({} bad row(s) in {}; --max-bad-rows {})",
                outcome.counts.rows_bad, t.input, t.max_bad_rows
            )));
        }
        let marker = wire::encode(&outcome).map_err(|e| TaskError::Permanent(e.to_string()))?;
        let key = keys::split_done(&t.job, t.split);
        self.store
            .put(&key, Bytes::from(marker))
            .await
            .map_err(TaskError::store)?;
        info!(
            rows = outcome.counts.rows_in,
            bad = outcome.counts.rows_bad,
            chunks = outcome.chunks.len(),
            "split done"
        );
        Ok(outcome)
    }

    #[instrument(skip_all, fields(job = %t.job, shard = %t.shard))]
    async fn merge(self: &Arc<Self>, t: &MergeTask) -> Result<MergeOutcome, TaskError> {
        let source = self.source(&t.source)?;
        crate::fault::pause_async("merge").await;
        if crate::fault::fail_shard(t.shard.0) {
            return Err(TaskError::Transient(format!(
                "injected failure of shard {}",
                t.shard
            )));
        }
        let this = self.clone();
        let t2 = t.clone();
        let rt = tokio::runtime::Handle::current();
        let name = format!("merge {}", t.shard);
        let part = run_on_thread(&name, move |cancel| {
            let chunks = t2.chunks.iter().map(|k| {
                let abandoned = || MergeError::Fetch {
                    chunk: k.clone(),
                    message: ABANDONED.into(),
                    transient: true,
                };
                if cancel.is_cancelled() {
                    return Err(abandoned());
                }
                until_cancelled(&rt, &cancel, this.store.get(k))
                    .ok_or_else(abandoned)?
                    .map(|b| {
                        metrics().bytes_read("chunk", b.len() as u64);
                        (k.clone(), b)
                    })
                    .map_err(|e| MergeError::Fetch {
                        chunk: k.clone(),
                        message: e.to_string(),
                        transient: e.is_transient(),
                    })
            });
            // Checked before each file version: an abandoned merge stops between files.
            let source = CancelSource {
                inner: source,
                cancel: cancel.clone(),
            };
            merge_shard_with_prefix(
                chunks,
                t2.base_commit.as_bytes(),
                &source,
                &this.cache,
                t2.file_path_prefix.as_bytes(),
            )
        })
        .await
        .map_err(|e| TaskError::Transient(e.to_string()))??;
        let key = keys::part(&t.job, t.shard);
        let sha = hex::encode(sha2::Sha256::digest(&part.gz));
        let outcome = MergeOutcome {
            counts: part.counts,
            part: key.clone(),
            records: part.records,
            bytes: part.gz.len() as u64,
            sha256: sha,
        };
        let len = part.gz.len() as u64;
        self.store
            .put(&key, Bytes::from(part.gz))
            .await
            .map_err(TaskError::store)?;
        metrics().bytes_written("part", len);
        crate::fault::pause_async("upload").await;
        let marker = wire::encode(&outcome).map_err(|e| TaskError::Permanent(e.to_string()))?;
        self.store
            .put(&keys::part_done(&t.job, t.shard), Bytes::from(marker))
            .await
            .map_err(TaskError::store)?;
        self.progress.shards_merged.fetch_add(1, Ordering::Relaxed);
        info!(
            records = outcome.records,
            bytes = outcome.bytes,
            "part written"
        );
        Ok(outcome)
    }
}

/// Why an abandoned task's thread stopped.
const ABANDONED: &str = "task abandoned (handed back)";

/// Runs `fut` on `rt` from a task thread unless the task is abandoned meanwhile
/// (`None`): a store call retrying through an outage must not keep a handed-back
/// task's thread alive for minutes.
fn until_cancelled<T>(
    rt: &tokio::runtime::Handle,
    cancel: &Cancel,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    rt.block_on(async {
        tokio::select! {
            v = fut => Some(v),
            _ = async {
                while !cancel.is_cancelled() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            } => None,
        }
    })
}

/// An input that fails its next read once the task is abandoned.
struct CancelRead<R> {
    inner: R,
    cancel: Cancel,
}

impl<R: std::io::Read> std::io::Read for CancelRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.cancel.is_cancelled() {
            return Err(std::io::Error::other(ABANDONED));
        }
        let n = self.inner.read(buf)?;
        metrics().bytes_read("input", n as u64);
        Ok(n)
    }
}

/// A source that fails once the task is abandoned.
struct CancelSource {
    inner: Arc<dyn Source>,
    cancel: Cancel,
}

impl Source for CancelSource {
    fn get(
        &self,
        commit: &[u8],
        path: &[u8],
    ) -> Result<Option<Arc<crate::source::FileVersion>>, SourceError> {
        if self.cancel.is_cancelled() {
            return Err(SourceError::Io {
                source_name: "task".into(),
                what: String::from_utf8_lossy(path).into_owned(),
                message: ABANDONED.into(),
            });
        }
        self.inner.get(commit, path)
    }
}

/// A random-enough name for one attempt's objects (time and pid based).
fn uuid_like() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

/// Backoff before handing a failed task back: 0.5 s × 2^(attempt-1), capped at 30 s,
/// with ±50 % jitter so a fleet does not retry in lockstep.
pub fn retry_backoff(attempt: u32) -> Duration {
    let base = 500u64
        .saturating_mul(1 << attempt.saturating_sub(1).min(6))
        .min(30_000);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0) as u64;
    let jitter = base / 2 + nanos % (base.max(1));
    Duration::from_millis(jitter)
}

/// Logs a failed ack/nack/reject: the broker then redelivers the task by itself, which
/// is safe, but an operator should see it.
fn settled(what: &str, r: Result<(), covmerge_queue::QueueError>, job: &str, task: &str) {
    if let Err(e) = r {
        warn!(job, task, error = %e, "{what} of the delivery failed; the broker redelivers the task");
    }
}

/// Publishes a report; logs and returns whether the broker took it.
async fn report(queue: &dyn Queue, r: &TaskReport) -> bool {
    let body = wire::encode(r).expect("reports encode");
    let task = r.task.to_string();
    let fault_key = format!("{}/{task}", r.job);
    if crate::fault::lose_report(&fault_key) {
        warn!(job = %r.job, task, "fault: report lost");
        return true;
    }
    let res = if crate::fault::fail_report(&fault_key) {
        Err(covmerge_queue::QueueError::Unavailable(
            "fault: report publish failed".into(),
        ))
    } else {
        queue.publish_report(r.job.as_str(), body).await
    };
    match res {
        Ok(()) => true,
        Err(e) => {
            warn!(job = %r.job, task, error = %e, "report not delivered");
            false
        }
    }
}

/// Reports a finished task, then acknowledges it. A report the broker did not take
/// hands the task back instead: the redelivery finds the marker and reports again.
async fn report_and_ack(queue: &dyn Queue, delivery: covmerge_queue::Delivery, r: TaskReport) {
    let (job, task) = (r.job.to_string(), r.task.to_string());
    if report(queue, &r).await {
        crate::fault::pause_async("ack").await;
        settled("ack", delivery.ack().await, &job, &task);
    } else {
        warn!(
            job,
            task, "handing the task back so that its redelivery reports it"
        );
        settled("retry", delivery.retry().await, &job, &task);
    }
}

fn kind_of(task: &Task) -> &'static str {
    match task {
        Task::Split(_) => "split",
        Task::Merge(_) => "merge",
    }
}

/// Adds an executed task's row counts to the metrics.
fn count_rows(status: &ReportStatus) {
    let m = metrics();
    match status {
        ReportStatus::Split(o) => {
            m.rows_read.inc_by(o.counts.rows_in);
            m.rows_bad.inc_by(o.counts.rows_bad);
        }
        ReportStatus::Merged(o) => {
            m.rows_merged.inc_by(o.counts.rows_merged);
            m.rows_lost.inc_by(o.counts.rows_lost);
            m.rows_without_line.inc_by(o.counts.rows_without_line);
            m.rows_deleted.inc_by(o.counts.rows_deleted);
        }
        _ => {}
    }
}

/// One task executing: `covmerge_tasks_in_flight` and, when it ends however it ends,
/// `covmerge_task_duration_seconds`.
struct InFlight {
    kind: &'static str,
    start: std::time::Instant,
}

impl InFlight {
    fn start(kind: &'static str) -> Self {
        metrics().in_flight.inc();
        InFlight {
            kind,
            start: std::time::Instant::now(),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        metrics().in_flight.dec();
        metrics()
            .task_duration
            .get_or_create(&[("kind", self.kind)])
            .observe(self.start.elapsed().as_secs_f64());
    }
}

/// Serves tasks from `queue` until `shutdown` turns true. After shutdown no new task
/// is taken; the current one may run for `grace`, then it is handed back.
pub async fn run_worker(
    queue: Arc<dyn Queue>,
    exec: Arc<Executor>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), covmerge_queue::QueueError> {
    loop {
        if *shutdown.borrow() {
            return Ok(());
        }
        let delivery = tokio::select! {
            d = queue.next_task() => d?,
            _ = shutdown.changed() => return Ok(()),
        };
        let task: Task = match wire::decode(&delivery.body) {
            Ok(t) => t,
            Err(e) => {
                metrics().task("unknown", outcome::POISON);
                metrics().dead_letters.inc();
                warn!(error = %e, bytes = delivery.body.len(), "poison message: dead-lettering it");
                settled("reject", delivery.reject().await, "?", "?");
                continue;
            }
        };
        let kind = kind_of(&task);
        if delivery.attempt > 1 {
            metrics().redeliveries.inc();
        }
        if let Err(why) = task.validate() {
            metrics().task(kind, outcome::POISON);
            metrics().dead_letters.inc();
            warn!(job = %task.job(), task = %task.task_ref(), error = %why, "invalid task: dead-lettering it");
            settled("reject", delivery.reject().await, task.job().as_str(), "?");
            continue;
        }
        let attempt = Attempt(delivery.attempt);
        let job = task.job().clone();
        let task_ref = task.task_ref();
        let (job_s, task_s) = (job.to_string(), task_ref.to_string());
        let report_of = |status| TaskReport {
            job: job.clone(),
            task: task_ref,
            attempt,
            status,
        };
        let prepared = async {
            exec.admit(&task).await?;
            exec.finished(&task).await
        };
        let result = match prepared.await {
            Ok(Some(status)) => {
                metrics().task(kind, outcome::ALREADY_DONE);
                info!(%job, task = %task_ref, "task already done (its marker exists): reporting it again instead of redoing it");
                Ok(status)
            }
            Ok(None) => {
                exec.record_attempt(&task).await;
                let _in_flight = InFlight::start(kind);
                let run = async {
                    let r = exec.execute(&task).await;
                    if let Ok(status) = &r {
                        count_rows(status);
                        metrics().task(kind, outcome::DONE);
                    }
                    r
                };
                tokio::pin!(run);
                tokio::select! {
                    r = &mut run => r,
                    _ = shutdown.changed() => {
                        info!(task = %task_ref, grace = ?exec.cfg.grace, "shutdown: finishing the current task within the grace period");
                        match tokio::time::timeout(exec.cfg.grace, &mut run).await {
                            Ok(r) => r,
                            Err(_) => {
                                metrics().task(kind, outcome::HANDED_BACK);
                                warn!(task = %task_ref, "grace period over: handing the task back");
                                settled("retry", delivery.retry().await, &job_s, &task_s);
                                return Ok(());
                            }
                        }
                    }
                }
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(status) => report_and_ack(queue.as_ref(), delivery, report_of(status)).await,
            Err(TaskError::Permanent(msg)) => {
                metrics().task(kind, outcome::FAILED);
                metrics().dead_letters.inc();
                warn!(%job, task = %task_ref, error = %msg, "task failed permanently");
                report(
                    queue.as_ref(),
                    &report_of(ReportStatus::Failed { error: msg }),
                )
                .await;
                settled("reject", delivery.reject().await, &job_s, &task_s);
            }
            Err(e @ (TaskError::Transient(_) | TaskError::Outage(_))) => {
                metrics().task(kind, outcome::RETRIED);
                let outage = matches!(e, TaskError::Outage(_));
                let wait = retry_backoff(attempt.0);
                warn!(%job, task = %task_ref, attempt = attempt.0, outage, error = %e, ?wait, "task failed, will be retried");
                let status = ReportStatus::Retrying {
                    error: e.to_string(),
                    outage,
                };
                report(queue.as_ref(), &report_of(status)).await;
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.changed() => {}
                }
                settled("retry", delivery.retry().await, &job_s, &task_s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn abandoned_input_stops_reading() {
        let cancel = Cancel::default();
        let mut r = CancelRead {
            inner: &b"abc"[..],
            cancel: cancel.clone(),
        };
        let mut buf = [0u8; 2];
        assert_eq!(r.read(&mut buf).unwrap(), 2);
        cancel.cancel();
        assert!(r.read(&mut buf).is_err(), "no read after the cancel");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_store_call_of_an_abandoned_task_ends() {
        let rt = tokio::runtime::Handle::current();
        let cancel = Cancel::default();
        let c2 = cancel.clone();
        let t = std::thread::spawn(move || {
            until_cancelled(&rt, &c2, std::future::pending::<()>()).is_none()
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
        let ended = tokio::task::spawn_blocking(move || t.join().unwrap());
        assert!(ended.await.unwrap());
    }
}
