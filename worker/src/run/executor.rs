//! The [`Executor`]: admits a task against its job, runs a split or a merge on its own
//! thread, and writes the outputs and the `.done` marker.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use covmerge_proto::memory::{MemoryPool, MemoryReservation};
use covmerge_proto::wire::MergePlan;
use covmerge_proto::wire::{
    self, Failure, MergeOutcome, MergeTask, PartialShardOutcome, ReportStatus, SplitOutcome,
    SplitTask, Task,
};
use covmerge_proto::{JobId, JobSpec};
use covmerge_storage::Store;
use covmerge_telemetry::metrics;
use tracing::{info, instrument, warn};

use super::admit::Recent;
use super::budget::reserve_task;
use super::cancel::*;
use super::direct_partial::DirectChunks;
use super::failure::*;
use super::keys;
use super::prefetch::Prefetch;
use super::source_cache::SourceCache;
use super::spill_writer::{SpillState, SpillWriter};
use crate::merge::part::PartBytes;
use crate::merge::{merge_shard_feeding, BlockSink, HeldBudget, ProjectionCache, ShardJob};
use crate::source::Source;
use crate::split::inputs::{split_inputs, ReadInput};
use crate::split::{Emit, Flush, SplitError, SplitSettings, BAD_ROW_SAMPLES};
use crate::thread::{run_on_thread, Cancel};
use covmerge_proto::memory::{Shares, TaskShare};

/// What a worker process is configured with.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The worker's own source; overrides the one named in merge tasks.
    pub source: Option<String>,
    /// `--memory-budget`: the bytes every reservation of this process stays within.
    pub memory_budget: usize,
    /// The budget's division among the process's caches and its task loops
    /// ([`WorkerConfig::shared_by`]).
    pub shares: Shares,
    /// Parse threads per split; 1 also inflates on that thread (one-core workers).
    pub split_threads: usize,
    /// After SIGTERM: how long the current task may still run before it is handed back.
    pub grace: Duration,
    /// Without a task for this long, the worker drops its cached sources, line maps
    /// and job specs ([`Executor::release_idle`]).
    pub idle_release: Duration,
    /// This worker's id, named in the tasks it hands back.
    pub worker_id: String,
    /// `Some(n)` (a fleet worker): a task this worker cannot run because of its own
    /// configuration is handed back to another worker, and the worker exits after `n`
    /// such tasks in a row. `None` (embedded mode, one worker): such a task fails.
    pub max_config_failures: Option<u32>,
    /// Where tasks make their scratch directories (a shard's partial files, its
    /// builder's runs): a directory the process owns and a later one sweeps if the
    /// process is killed (`None`: `$TMPDIR` itself).
    pub scratch: Option<std::path::PathBuf>,
}

/// Default of `--max-config-failures`: with the backoff of [`super::config_backoff`]
/// a misconfigured worker exits after about a minute (2+4+8+16 s of pauses).
pub const DEFAULT_MAX_CONFIG_FAILURES: u32 = 5;

/// An id for this worker process: host name, pid and a random part (a restarted
/// worker is a new one).
pub fn new_worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".into());
    let host: String = host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .take(63)
        .collect();
    format!(
        "{host}-{}-{}",
        std::process::id(),
        &covmerge_proto::ids::random_hex()[..6]
    )
}

impl WorkerConfig {
    /// This configuration for `loops` task loops of one process: the memory budget is
    /// divided among the caches and the loops ([`Shares::of`]; refused when a loop's
    /// share would be too small), and the parse threads among the `at_once` splits
    /// that can run at the same time (at most `loops`; fewer when a job has fewer
    /// splits, whose idle cores then parse). With as many splits as cores, each split
    /// inflates and parses on its own thread: no hand-offs, one set of tables per core
    /// (BENCHMARKS.md: 12-15 % less CPU than two parse threads per split).
    pub fn shared_by(self, loops: usize, at_once: usize) -> Result<Self, String> {
        let loops = loops.max(1);
        let at_once = at_once.clamp(1, loops);
        Ok(WorkerConfig {
            shares: Shares::of(self.memory_budget, loops)?,
            split_threads: (self.split_threads / at_once).max(1),
            ..self
        })
    }
}

impl Default for WorkerConfig {
    fn default() -> Self {
        let memory_budget = covmerge_proto::memory::DEFAULT_MERGE_BUDGET as usize;
        WorkerConfig {
            source: None,
            memory_budget,
            shares: Shares::of(memory_budget, 1).expect("the default budget fits one loop"),
            split_threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            grace: Duration::from_secs(25),
            idle_release: Duration::from_secs(20),
            worker_id: new_worker_id(),
            max_config_failures: None,
            scratch: None,
        }
    }
}

pub use covmerge_telemetry::Progress;

/// Runs tasks against a store. One per worker process, shared by its task loops.
pub struct Executor {
    pub(super) store: Store,
    pub(super) cfg: WorkerConfig,
    pub(super) sources: Mutex<SourceCache>,
    /// Specs of the jobs seen lately, to check tasks against.
    pub(super) specs: Recent<JobId, Arc<JobSpec>>,
    /// Merge plans of the jobs seen lately (read as their merge tasks come).
    pub(super) plans: Recent<JobId, Arc<MergePlan>>,
    pub(super) cache: ProjectionCache,
    /// The accountant of `--memory-budget`: the process-wide shares are reserved when
    /// the executor is made, each task's when it starts.
    pub(super) pool: Arc<MemoryPool>,
    _process_shares: [MemoryReservation; 3],
    /// Rows read and shards merged by this executor's tasks so far, for a progress display.
    pub progress: Arc<Progress>,
    /// Tasks handed back in a row because of this worker's configuration.
    pub(super) config_failures: AtomicU32,
    /// The bases' ids as this worker's sources hold them, by (job, source, base):
    /// computed once per job (a `dir:` listing of a kernel tree is ~70k entries), and
    /// again for a later job, whose source may have changed meanwhile.
    tree_ids: Recent<(JobId, String, String), String>,
}

/// What a `git:` source holds besides its version cache once used: decoded trees
/// (up to 16 MB), and gix's object and pack caches and mapped packs of the handles of
/// the threads that read it (measured: ~180 MB of idle RSS per source on a Linux-sized
/// repository).
pub const GIT_SOURCE_COST: usize = 160 << 20;

/// The estimated memory of a source once used: its version cache's budget, plus
/// [`GIT_SOURCE_COST`] for a repository, or its commit indexes' budget for a store.
pub fn source_cost(spec: &str, shares: &Shares) -> usize {
    let extra = if spec.starts_with("git:") {
        GIT_SOURCE_COST
    } else if spec.starts_with("store:") {
        shares.store_indexes + (1 << 20)
    } else {
        1 << 20
    };
    shares.source_cache + extra
}

/// Returns freed heap pages to the system (glibc keeps them otherwise, and a worker's
/// RSS would stay at its peak after its caches are dropped).
pub(super) fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and releases the allocator's free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The task thread a merge runs on: the runtime its fetches go through and the
/// task's cancel.
#[derive(Clone, Copy)]
pub(super) struct OnThread<'a> {
    pub(super) rt: &'a tokio::runtime::Handle,
    pub(super) cancel: &'a Cancel,
}

impl Executor {
    /// An executor writing to `store`, sized by `cfg`.
    pub fn new(store: Store, cfg: WorkerConfig) -> Self {
        let cache = ProjectionCache::new(cfg.shares.projection_cache, cfg.shares.diffs as u64);
        let pool = MemoryPool::new(cfg.memory_budget);
        crate::thread::keep_freed_up_to(cfg.memory_budget / 8);
        let reserve = |name: &'static str, bytes: usize| {
            let mut r = pool.reservation(name);
            // The shares are divided from this budget: they fit.
            let _ = r.grow_up_to(bytes, 0);
            r
        };
        let process_shares = [
            reserve("open sources", cfg.shares.sources),
            reserve("line map cache", cfg.shares.projection_cache),
            reserve("line diffs", cfg.shares.diffs),
        ];
        Executor {
            store,
            cfg,
            sources: Mutex::default(),
            specs: Recent::default(),
            plans: Recent::default(),
            cache,
            pool,
            _process_shares: process_shares,
            progress: Arc::default(),
            config_failures: AtomicU32::new(0),
            tree_ids: Recent::default(),
        }
    }

    /// What this executor was configured with.
    pub fn config(&self) -> &WorkerConfig {
        &self.cfg
    }

    /// A task ran (or failed for its own reasons): this worker's configuration works.
    pub(super) fn config_ok(&self) {
        if self.config_failures.swap(0, Ordering::SeqCst) > 0 {
            metrics().config_failures.set(0);
            info!("a task ran on this worker again: its configuration failures are cleared");
        }
    }

    /// Gives back what the last tasks left cached (open sources, line maps, job
    /// specs): called when the worker has had no task for a while, so that a worker
    /// between jobs holds no job's memory. Sources still used by a running task stay
    /// alive until it ends.
    pub fn release_idle(&self) {
        let dropped = self.sources.lock().unwrap().clear();
        self.cache.clear();
        self.specs.clear();
        self.plans.clear();
        if dropped > 0 {
            info!(sources = dropped, "idle: released the cached sources");
        }
        trim_heap();
    }

    /// Sources open now (for tests and the soak benchmark).
    pub fn open_sources(&self) -> usize {
        self.sources.lock().unwrap().len()
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
        let key = keys::attempt(
            task.job(),
            task.task_ref(),
            &covmerge_proto::ids::random_hex(),
        );
        if let Err(e) = self.store.put(&key, Bytes::new()).await {
            warn!(key, error = %e, "cannot record the attempt; the manifest may undercount it");
        }
    }

    /// Runs one task to completion: outputs and marker written.
    pub async fn execute(self: &Arc<Self>, task: &Task) -> Result<ReportStatus, TaskError> {
        match task {
            Task::Split(t) => self.split(t).await.map(ReportStatus::Split),
            Task::Merge(t) if t.rollup => self.rollup(t).await.map(ReportStatus::Merged),
            Task::Merge(t) => self.merge(t).await.map(ReportStatus::Merged),
        }
    }

    #[instrument(skip_all, fields(job = %t.job, split = %t.split))]
    async fn split(self: &Arc<Self>, t: &SplitTask) -> Result<SplitOutcome, TaskError> {
        // The job's groups: their NAMEs are no manager's (contract §6).
        let groups = Arc::new(self.job_spec(&t.job, false).await?.groups.clone());
        let this = self.clone();
        let t2 = t.clone();
        let rt = tokio::runtime::Handle::current();
        let name = format!("split {}", t.split);
        let share = reserve_task(&self.pool, name.clone(), self.cfg.shares.per_loop);
        let outcome = run_on_thread(&name, move |cancel| -> Result<SplitOutcome, TaskError> {
            // Flushes earlier when the task got less than its loop's share.
            let budget = TaskShare::of(share.size()).split.max(64 << 10);
            let outcome = this.split_blocking(&t2, groups, budget, &rt, &cancel)?;
            drop(share);
            this.progress
                .rows_read
                .fetch_add(outcome.counts.rows_in, Ordering::Relaxed);
            Ok(outcome)
        })
        .await
        .map_err(Failure::transient)??;
        refuse_bad_rows(t, &outcome)?;
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

    /// A split on its task thread: its inputs read one after another within `budget`,
    /// their spill objects written together, on a thread of their own while the
    /// split reads on.
    fn split_blocking(
        &self,
        t: &SplitTask,
        groups: crate::input::Groups,
        budget: usize,
        rt: &tokio::runtime::Handle,
        cancel: &Cancel,
    ) -> Result<SplitOutcome, TaskError> {
        // Chunk contents depend on how pieces fell to parse threads, so every
        // attempt writes under its own nonce: two attempts running at once never
        // overwrite each other's chunks, and the marker names only its own.
        let nonce = covmerge_proto::ids::random_hex();
        let seq = AtomicU64::new(0);
        let written = AtomicU64::new(0);
        let write = |flush: Flush| -> Result<String, SplitError> {
            let n = seq.fetch_add(1, Ordering::Relaxed) as u32;
            let key = keys::spill(&t.job, t.split, &nonce, n);
            let abandoned = || SplitError::Emit {
                message: ABANDONED.into(),
                transient: true,
            };
            let len = flush.bytes.len() as u64;
            until_cancelled(rt, cancel, self.store.put(&key, Bytes::from(flush.bytes)))
                .ok_or_else(abandoned)?
                .map_err(|e| SplitError::Emit {
                    message: e.to_string(),
                    transient: e.is_transient(),
                })?;
            metrics().bytes_written("chunk", len);
            if written.fetch_add(1, Ordering::Relaxed) == 0 {
                covmerge_fault::pause_blocking_unless("split", &|| cancel.is_cancelled());
            }
            if cancel.is_cancelled() {
                return Err(abandoned());
            }
            Ok(key)
        };
        let settings = SplitSettings {
            shards: t.shards,
            max_bad_rows: t.max_bad_rows,
            memory_budget: budget,
            threads: self.cfg.split_threads,
            groups,
        };
        let state = SpillState::default();
        std::thread::scope(|scope| -> Result<SplitOutcome, TaskError> {
            let spills = SpillWriter::start(scope, &state, &write, budget);
            let emit = |flush: Flush| spills.add(flush);
            let mut outcome = self.read_inputs(t, settings, rt, cancel, &emit)?;
            outcome.chunks = spills.finish()?;
            Ok(outcome)
        })
    }

    /// Reads a split task's inputs one after another into `emit`, until more of their
    /// rows were bad than the task allows.
    fn read_inputs(
        &self,
        t: &SplitTask,
        settings: SplitSettings,
        rt: &tokio::runtime::Handle,
        cancel: &Cancel,
        emit: &Emit<'_>,
    ) -> Result<SplitOutcome, TaskError> {
        // A one-thread split inflates on its own thread too: nothing to overlap with.
        let inflate = if self.cfg.split_threads <= 1 {
            crate::input::Inflate::Inline
        } else {
            crate::input::Inflate::Pipelined
        };
        // Abandoned (handed back after the grace period): the next read fails.
        let wrap = |inner: Box<dyn std::io::Read + Send>| -> Box<dyn std::io::Read + Send> {
            let cancel = cancel.clone();
            Box::new(CancelRead { inner, cancel })
        };
        let how = ReadInput {
            namespace: t.namespace.as_deref(),
            rt,
            inflate,
            wrap: &wrap,
        };
        let mut outcome = SplitOutcome::default();
        for (input, spec) in split_inputs(t) {
            let settings = SplitSettings {
                max_bad_rows: t.max_bad_rows.saturating_sub(outcome.counts.rows_bad),
                ..settings.clone()
            };
            let one = how.split(input, &spec, settings, emit)?;
            outcome.counts.add(&one.counts);
            outcome.namespaces.add(&one.namespaces);
            let room = BAD_ROW_SAMPLES.saturating_sub(outcome.bad_rows.len());
            outcome.bad_rows.extend(one.bad_rows.into_iter().take(room));
            if outcome.counts.rows_bad > t.max_bad_rows {
                break;
            }
        }
        Ok(outcome)
    }

    #[instrument(skip_all, fields(job = %t.job, shard = %t.shard))]
    async fn merge(self: &Arc<Self>, t: &MergeTask) -> Result<MergeOutcome, TaskError> {
        let source = self.source(&t.source)?;
        source.forget_absent();
        let source_id = self.base_id(t, source.clone()).await?;
        covmerge_fault::pause_async("merge").await;
        if covmerge_fault::fail_shard(t.shard.0) {
            return Err(Failure::transient(format!(
                "injected failure of shard {}",
                t.shard
            )));
        }
        // `--partial-out`: the shard's partial too, with the job's shard count.
        let spec = self.job_spec(&t.job, false).await?;
        let partial_of = spec.partial_out.as_ref().map(|_| spec.shards);
        let (shards, namespace) = (spec.shards, spec.namespace.clone());
        let groups = Arc::new(spec.groups.clone());
        let this = self.clone();
        let t2 = t.clone();
        let rt = tokio::runtime::Handle::current();
        let name = format!("merge {}", t.shard);
        let share = reserve_task(&self.pool, name.clone(), self.cfg.shares.per_loop);
        let (part, partial) = run_on_thread(&name, move |cancel| -> Result<_, TaskError> {
            // Within what the task got: less than its share means fewer chunks fetched
            // ahead and more base texts and line maps read again.
            let use_of = TaskShare::of(share.size());
            // Its shard of the partials no split read (contract §10).
            let budget = use_of.split.max(64 << 10);
            let direct =
                DirectChunks::read(&t2, shards, namespace.as_deref(), groups, budget, &rt)?;
            let (part, partial) = match partial_of {
                // Its partial from the same read of the chunks.
                Some(shards) => {
                    let on = OnThread {
                        rt: &rt,
                        cancel: &cancel,
                    };
                    let (part, partial) =
                        this.merge_with_partial_blocking(&t2, shards, source, use_of, &direct, on)?;
                    (part, Some(partial))
                }
                None => {
                    let on = OnThread {
                        rt: &rt,
                        cancel: &cancel,
                    };
                    (
                        this.merge_blocking(&t2, source, use_of, &direct, on, None)?,
                        None,
                    )
                }
            };
            drop(share);
            Ok((part, partial))
        })
        .await
        .map_err(Failure::transient)??;
        let partial = match partial {
            Some(p) => Some(self.publish_partial(t, p).await?),
            None => None,
        };
        self.publish_part(t, part, source_id, partial).await
    }

    /// The base's id as this worker's source holds it (computed once per job). A base
    /// the source lacks would make every file look deleted: an empty result that looks
    /// complete. The job's source was checked before any work, so here it is this
    /// worker's source (`--source`) that lacks it: its configuration.
    async fn base_id(&self, t: &MergeTask, src: Arc<dyn Source>) -> Result<String, TaskError> {
        let name = self.cfg.source.as_deref().unwrap_or(&t.source).to_string();
        let base = t.base_commit.clone();
        let id_key = (t.job.clone(), name.clone(), base.clone());
        let known = self.tree_ids.get(&id_key);
        let source_id = tokio::task::spawn_blocking(move || {
            crate::source::require_commit(&*src, &name, &base)?;
            if let Some(id) = known {
                return Ok(id);
            }
            let t0 = std::time::Instant::now();
            let id = src.tree_id(base.as_bytes())?.ok_or_else(|| {
                crate::source::SourceError::NoCommit {
                    source_name: name.clone(),
                    commit: base.clone(),
                    hint: "a full commit id the source has, e.g. `git rev-parse` of it".into(),
                }
            })?;
            info!(source = %covmerge_storage::redact_url(&name), %id, ms = t0.elapsed().as_millis() as u64, "the base as this worker's source holds it");
            Ok(id)
        })
        .await
        .map_err(Failure::internal)?
        .map_err(|e: crate::source::SourceError| Failure::config(e))?;
        self.tree_ids.put(id_key, source_id.clone());
        Ok(source_id)
    }

    /// A merge on its task thread, within what the task got (`use_of`): its chunks,
    /// then its shard of the partials it reads directly.
    pub(super) fn merge_blocking(
        &self,
        t: &MergeTask,
        source: Arc<dyn Source>,
        use_of: TaskShare,
        direct: &DirectChunks,
        on: OnThread<'_>,
        sink: Option<&mut dyn BlockSink>,
    ) -> Result<crate::merge::MergedPart, crate::merge::MergeError> {
        let OnThread { rt, cancel } = on;
        // Fetched several at a time ahead of the merge: one round trip per chunk,
        // one after the other, was most of a merge's time on a distant store.
        // Fetched again for each pass of a shard merged in passes.
        let chunks = || {
            Prefetch::start(
                rt,
                self.store.clone(),
                t.chunks.clone(),
                use_of.prefetch,
                cancel.clone(),
            )
            .chain(direct.iter())
        };
        // Checked before each file version: an abandoned merge stops between files.
        let source = CancelSource {
            inner: source,
            cancel: cancel.clone(),
        };
        let job = ShardJob {
            base_commit: t.base_commit.as_bytes(),
            source: &source,
            cache: &self.cache,
            file_prefix: t.file_path_prefix.as_bytes(),
            groups: &t.groups,
            held: HeldBudget {
                bases: use_of.held_bases,
                maps: use_of.held_maps,
                tables: use_of.tables,
                manager_names: (2 * use_of.tables).max(64 << 20),
            },
        };
        merge_shard_feeding(chunks, &job, sink)
    }

    /// Stores a merged part and its `.done` marker (naming the shard's partial files,
    /// stored before).
    async fn publish_part(
        &self,
        t: &MergeTask,
        mut part: crate::merge::MergedPart,
        source_id: String,
        partial: Option<PartialShardOutcome>,
    ) -> Result<MergeOutcome, TaskError> {
        let key = keys::part(&t.job, t.shard);
        let len = part.gz.len();
        let outcome = MergeOutcome {
            counts: part.counts,
            part: key.clone(),
            records: part.records,
            bytes: len,
            sha256: hex::encode(part.sha256),
            base_lines: std::mem::take(&mut part.base_lines),
            source_id,
            worker: self.cfg.worker_id.clone(),
            partial,
        };
        match part.gz {
            PartBytes::Memory(v) => self.store.put(&key, Bytes::from(v)).await,
            // A large part, from its temporary file.
            PartBytes::File { file, len } => self.store.put_file(&key, &file, len).await,
        }
        .map_err(store_failure)?;
        metrics().bytes_written("part", len);
        if part.sums_spilled > 0 {
            info!(
                runs = part.sums_spilled,
                "a file's per-manager sums outgrew their share of the memory budget: spilled in sorted runs to a temporary file"
            );
        }
        if part.passes > 1 {
            info!(
                passes = part.passes,
                "the shard's tables outgrew the merge's share of the memory budget: merged in passes over ranges of its paths"
            );
        }
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

/// A split whose rows were more often bad than the task allows fails, naming the
/// first bad row.
fn refuse_bad_rows(t: &SplitTask, outcome: &SplitOutcome) -> Result<(), TaskError> {
    if outcome.counts.rows_bad <= t.max_bad_rows {
        return Ok(());
    }
    let first = outcome
        .bad_rows
        .first()
        .map(|b| b.to_string())
        .unwrap_or_default();
    let inputs = match t.more.len() {
        0 => t.input.clone(),
        n => format!("{} and {n} more input(s)", t.input),
    };
    Err(Failure::bad_input(format!(
        "{first} ({} bad row(s) in {inputs}; --max-bad-rows {})",
        outcome.counts.rows_bad, t.max_bad_rows
    )))
}
