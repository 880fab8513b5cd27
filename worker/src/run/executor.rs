//! The [`Executor`]: admits a task against its job, runs a split or a merge on its own
//! thread, and writes the outputs and the `.done` marker.

use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use covmerge_proto::job::InputFormat;
use covmerge_proto::wire::{
    self, ChunkRef, Failure, MergeOutcome, MergeTask, ReportStatus, SplitOutcome, SplitTask, Task,
};
use covmerge_proto::{JobId, JobSpec};
use covmerge_storage::Store;
use covmerge_telemetry::metrics;
use sha2::Digest;
use tracing::{info, instrument, warn};

use super::cancel::*;
use super::failure::*;
use super::keys;
use crate::merge::{merge_shard_with_prefix, MergeError, ProjectionCache};
use crate::source::{open_source, CachedSource, Source};
use crate::split::go::{split_go, GoSource};
use crate::split::{split_input, Flush, SplitError, SplitSettings};
use crate::thread::run_on_thread;

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
            return Err(Failure::bad_input(format!(
                "{input}: a Go covdata input must be a local directory"
            )))
        }
        _ => {}
    }
    let mut reader = crate::input::open_input(input, rt, inflate).map_err(Failure::bad_input)?;
    let text = match format {
        InputFormat::GoText => true,
        InputFormat::Csv => false,
        _ => {
            // Peek at the first bytes, then hand them back in front of the rest.
            let mut head = Vec::with_capacity(8);
            std::io::Read::by_ref(&mut reader)
                .take(6)
                .read_to_end(&mut head)
                .map_err(|e| Failure::bad_input(crate::input::InputError::from_read(input, e)))?;
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

pub use covmerge_telemetry::Progress;

/// Runs tasks against a store. One per worker process, shared by its task loops.
pub struct Executor {
    store: Store,
    pub(super) cfg: WorkerConfig,
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
        let inner = open_source(spec).map_err(Failure::config)?;
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
            .map_err(store_failure)?
            .ok_or_else(|| {
                Failure::refused(format!("job {job} is unknown: no {key} in {}", self.store))
            })?;
        let spec: JobSpec = serde_json::from_slice(&bytes)
            .map_err(|e| Failure::refused(format!("{key}: unreadable job spec: {e}")))?;
        if spec.job != *job {
            return Err(Failure::refused(format!("{key} names job {}", spec.job)));
        }
        spec.validate()
            .map_err(|e| Failure::refused(format!("{key}: job spec refused: {e}")))?;
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
            .map_err(|why| Failure::refused(format!("{} refused: {why}", task.task_ref())))
    }

    /// The report of a task whose marker exists: it was done before (and its report
    /// possibly lost), so it is reported again rather than redone.
    pub async fn finished(&self, task: &Task) -> Result<Option<ReportStatus>, TaskError> {
        let key = keys::done(task.job(), task.task_ref());
        let Some(bytes) = self.store.get_opt(&key).await.map_err(store_failure)? else {
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
            let emit = |flush: Flush| -> Result<(), SplitError> {
                let n = seq.fetch_add(1, Ordering::Relaxed) as u32;
                let key = keys::spill(&t2.job, t2.split, &nonce, n);
                let abandoned = || SplitError::Emit {
                    message: ABANDONED.into(),
                    transient: true,
                };
                let len = flush.bytes.len() as u64;
                until_cancelled(&rt, &cancel, this.store.put(&key, Bytes::from(flush.bytes)))
                    .ok_or_else(abandoned)?
                    .map_err(|e| SplitError::Emit {
                        message: e.to_string(),
                        transient: e.is_transient(),
                    })?;
                metrics().bytes_written("chunk", len);
                let first = {
                    let mut c = chunks.lock().unwrap();
                    let first = c.is_empty();
                    c.extend(flush.chunks.into_iter().map(|(shard, r)| {
                        let chunk = ChunkRef {
                            key: key.clone(),
                            start: r.start as u64,
                            len: r.len() as u64,
                        };
                        (shard, chunk)
                    }));
                    first
                };
                if first {
                    covmerge_fault::pause_blocking_unless("split", &|| cancel.is_cancelled());
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
        .map_err(Failure::transient)??;
        if outcome.counts.rows_bad > t.max_bad_rows {
            let first = outcome
                .bad_rows
                .first()
                .map(|b| b.to_string())
                .unwrap_or_default();
            return Err(Failure::bad_input(format!(
                "{first} ({} bad row(s) in {}; --max-bad-rows {})",
                outcome.counts.rows_bad, t.input, t.max_bad_rows
            )));
        }
        let marker = wire::encode(&outcome).map_err(Failure::internal)?;
        let key = keys::split_done(&t.job, t.split);
        self.store
            .put(&key, Bytes::from(marker))
            .await
            .map_err(store_failure)?;
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
        covmerge_fault::pause_async("merge").await;
        if covmerge_fault::fail_shard(t.shard.0) {
            return Err(Failure::transient(format!(
                "injected failure of shard {}",
                t.shard
            )));
        }
        let this = self.clone();
        let t2 = t.clone();
        let rt = tokio::runtime::Handle::current();
        let name = format!("merge {}", t.shard);
        let part = run_on_thread(&name, move |cancel| {
            let chunks = t2.chunks.iter().map(|c| {
                let abandoned = || MergeError::Fetch {
                    chunk: c.to_string(),
                    message: ABANDONED.into(),
                    transient: true,
                };
                if cancel.is_cancelled() {
                    return Err(abandoned());
                }
                until_cancelled(&rt, &cancel, this.store.get_range(&c.key, c.range()))
                    .ok_or_else(abandoned)?
                    .map(|b| {
                        metrics().bytes_read("chunk", b.len() as u64);
                        (c.to_string(), b)
                    })
                    .map_err(|e| MergeError::Fetch {
                        chunk: c.to_string(),
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
        .map_err(Failure::transient)??;
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
            .map_err(store_failure)?;
        metrics().bytes_written("part", len);
        covmerge_fault::pause_async("upload").await;
        let marker = wire::encode(&outcome).map_err(Failure::internal)?;
        self.store
            .put(&keys::part_done(&t.job, t.shard), Bytes::from(marker))
            .await
            .map_err(store_failure)?;
        self.progress.shards_merged.fetch_add(1, Ordering::Relaxed);
        info!(
            records = outcome.records,
            bytes = outcome.bytes,
            "part written"
        );
        Ok(outcome)
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
