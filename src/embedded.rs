//! `covmerge merge`: the coordinator and `workers` task loops in one process, over the
//! in-process queue and a local store in a temporary directory (removed afterwards).
//! Same code path as the fleet: only the queue and the store differ.
//!
//! It lives in the binary because it is where both sides meet: the coordinator and the
//! worker crates share only `covmerge-proto` and know nothing of each other.

use std::sync::Arc;

use covmerge_coordinator::progress::ProgressView;
use covmerge_coordinator::{run_job, JobError, JobOptions, JobOutcome, Start};
use covmerge_proto::JobSpec;
use covmerge_queue::{memory::MemoryQueue, Queue};
use covmerge_storage::Store;
use covmerge_worker::run::{serve::serve, Executor, WorkerConfig};
use tokio::sync::oneshot;

use crate::cli::MergeArgs;

/// A `covmerge merge` job's settings, made once from its flags: the task loops, the
/// workers' configuration and the job's options.
pub(crate) struct Embedded {
    /// Parallel task loops (`--workers`, default: the cores).
    workers: usize,
    worker_cfg: WorkerConfig,
    opts: JobOptions,
    show_progress: bool,
    /// The result or the manifest goes to standard output: the summary goes to
    /// standard error.
    pub(crate) summary_to_stderr: bool,
}

impl Embedded {
    /// The settings of `m` for its planned job `spec`.
    pub(crate) fn new(m: &MergeArgs, spec: &JobSpec) -> anyhow::Result<Self> {
        let workers = m.workers.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
        });
        let opts = JobOptions::embedded(m.out.clone(), m.job.manifest.clone(), m.job.dashboard()?);
        // Split tasks run `workers` at a time: they share one budget, and the cores.
        let worker_cfg =
            WorkerConfig::embedded(m.memory_budget, workers, spec.split_ranges().len())
                .map_err(anyhow::Error::msg)?;
        let summary_to_stderr =
            crate::cmd::summary_to_stderr(m.out.as_deref(), m.job.manifest.as_deref());
        Ok(Embedded {
            workers,
            worker_cfg,
            opts,
            show_progress: !m.job.quiet,
            summary_to_stderr,
        })
    }

    /// Runs the job `spec` in this process.
    pub(crate) async fn run(self, spec: JobSpec) -> Result<JobOutcome, JobError> {
        run_embedded(
            spec,
            &self.opts,
            self.workers,
            self.worker_cfg,
            self.show_progress,
        )
        .await
    }
}

/// Runs a whole job in this process with `workers` parallel task loops.
async fn run_embedded(
    spec: JobSpec,
    opts: &JobOptions,
    workers: usize,
    mut worker_cfg: WorkerConfig,
    show_progress: bool,
) -> Result<JobOutcome, JobError> {
    let (tmp, owner) =
        crate::scratch::sweep_and_make(crate::scratch::PREFIX).map_err(JobError::Plan)?;
    // Spills and parts live here: removed if the process is interrupted, too.
    let _cleanup = covmerge_storage::local::on_interrupt(tmp.path());
    let store = Store::open(&format!("file://{}", tmp.path().display()))?;
    // The tasks' own scratch (a shard's partial, its builder's runs) in the same
    // directory: swept with it if this process is killed.
    let scratch = tmp.path().join(".scratch");
    std::fs::create_dir(&scratch)
        .map_err(|e| JobError::Plan(format!("temporary directory {}: {e}", scratch.display())))?;
    // So are the copies of store partials read as inputs.
    covmerge_storage::local::set_scratch_root(&scratch);
    worker_cfg.scratch = Some(scratch);
    let queue: Arc<dyn Queue> = Arc::new(MemoryQueue::default());
    let exec = Arc::new(Executor::new(store.clone(), worker_cfg));
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let loops = tokio::spawn(serve(queue.clone(), exec.clone(), workers, async {
        let _ = stop_rx.await;
    }));
    let progress = if show_progress {
        ProgressView::terminal(Some(exec.progress.clone()))
    } else {
        ProgressView::hidden()
    };
    let r = run_job(Start::New(Box::new(spec)), opts, queue, store, &progress).await;
    let _ = stop_tx.send(());
    // The in-process queue does not fail, and embedded task loops hand no task back
    // for their configuration: a loop's error here would be a bug, worth a line.
    match loops.await {
        Ok(Err(e)) => tracing::warn!(error = %e, "task loop"),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        _ => {}
    }
    drop(tmp);
    drop(owner);
    r
}
