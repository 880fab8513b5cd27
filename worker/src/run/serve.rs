//! The worker loop: takes deliveries, runs them on an [`Executor`], reports, and
//! acknowledges, rejects or hands back with backoff.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use covmerge_proto::retry::RetryPolicy;
use covmerge_proto::wire::{self, Failure, FailureKind, ReportStatus, Task, TaskReport};
use covmerge_proto::{Attempt, JobId, TaskRef};
use covmerge_queue::{Delivery, Queue};
use covmerge_telemetry::{metrics, outcome};
use tokio::sync::watch;
use tracing::{info, warn};

use super::executor::*;

/// Backoff before handing a failed task back: the project's one policy for task
/// retries ([`RetryPolicy::task`], jittered so a fleet does not retry in lockstep).
pub fn retry_backoff(attempt: u32) -> Duration {
    RetryPolicy::task().delay(attempt)
}

/// How long a worker takes no task (and is not ready) after its `n`-th configuration
/// failure in a row: 2 s, 4 s, 8 s, ... at most 60 s.
pub fn config_backoff(n: u32) -> Duration {
    Duration::from_secs((2u64 << n.saturating_sub(1).min(5)).min(60))
}

/// Distinct workers that must have failed to run a task for reasons of their
/// configuration before it fails its job: one misconfigured worker is the worker's
/// fault; that many are the task's (a job whose spec or chunks are gone, a forged
/// task) or the whole fleet's.
pub const REFUSING_WORKERS: usize = 3;
/// Hand-backs of one task (by whichever workers) after which it fails its job.
pub const MAX_HAND_BACKS: usize = 8;

/// Why a worker loop ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum WorkerExit {
    /// The task queue failed for good (closed, or its configuration refused).
    #[error(transparent)]
    Queue(#[from] covmerge_queue::QueueError),
    /// Too many tasks in a row this worker could not run: the orchestrator should
    /// replace it (and an operator fix its configuration).
    #[error("{failures} task(s) in a row could not run on this worker because of its configuration; exiting so that it is replaced. Last error: {last}")]
    Misconfigured {
        /// Tasks handed back in a row.
        failures: u32,
        /// The last one's error.
        last: String,
    },
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
    if covmerge_fault::lose_report(&fault_key) {
        warn!(job = %r.job, task, "fault: report lost");
        return true;
    }
    let res = if covmerge_fault::fail_report(&fault_key) {
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
async fn report_and_ack(queue: &dyn Queue, delivery: Delivery, r: TaskReport) {
    let (job, task) = (r.job.to_string(), r.task.to_string());
    if report(queue, &r).await {
        covmerge_fault::pause_async("ack").await;
        settled("ack", delivery.ack().await, &job, &task);
    } else {
        warn!(
            job,
            task, "handing the task back so that its redelivery reports it"
        );
        settled("retry", delivery.retry().await, &job, &task);
    }
}

/// The distinct workers that could not run a task, this one included, in order.
fn distinct_refusers(before: &[String], me: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in before.iter().map(String::as_str).chain([me]) {
        if !out.iter().any(|o| o == w) {
            out.push(w.to_string());
        }
    }
    out
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
) -> Result<(), WorkerExit> {
    loop {
        if *shutdown.borrow() {
            return Ok(());
        }
        let Some(delivery) = next_delivery(queue.as_ref(), &exec, &mut shutdown).await? else {
            return Ok(());
        };
        let Some((delivery, task)) = valid_task(delivery).await else {
            continue;
        };
        let served = Served::new(queue.as_ref(), &exec, &task, &delivery);
        // Only a task delivered again (after a worker died, handed it back or failed
        // it) can have run before: only then is its marker looked for. A first
        // delivery of a task that did run (a task republished while it ran, a
        // forged copy) is done again, which is harmless (the same output under the
        // same keys, or new spill objects the marker then names); looking first
        // cost every task a round trip to the store.
        let may_have_run = delivery.attempt > 1 || !delivery.refused_by.is_empty();
        let Some(result) = served.run(&task, may_have_run, &mut shutdown).await else {
            // The grace period is over: the task goes back to the queue.
            settled(
                "retry",
                delivery.retry().await,
                &served.job_s,
                &served.task_s,
            );
            return Ok(());
        };
        // Anything but a configuration failure shows this worker can run tasks (an
        // outage shows nothing either way).
        match &result {
            Ok(_) => exec.config_ok(),
            Err(f) if f.kind == FailureKind::BadInput || f.kind == FailureKind::Refused => {
                exec.config_ok()
            }
            _ => {}
        }
        let result = match result {
            Err(f) if f.kind == FailureKind::Config => {
                let job_source = exec.job_source_failure(&f);
                match served.config_failure(f, &delivery.refused_by, job_source) {
                    ConfigFailure::HandBack { failures, max, f } => {
                        served
                            .hand_back(delivery, failures, max, f, &mut shutdown)
                            .await?;
                        continue;
                    }
                    ConfigFailure::Fail(f) => Err(f),
                }
            }
            r => r,
        };
        served.settle(delivery, result, &mut shutdown).await;
    }
}

/// The next delivery of `queue` (`None`: shutdown came first). While it waits, after
/// `idle_release` without a task, the last job's memory goes (its job has most
/// likely ended; the next task opens what it needs).
async fn next_delivery(
    queue: &dyn Queue,
    exec: &Executor,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<Option<Delivery>, WorkerExit> {
    let next = queue.next_task();
    tokio::pin!(next);
    let mut released = false;
    loop {
        tokio::select! {
            d = &mut next => return Ok(Some(d?)),
            _ = shutdown.changed() => return Ok(None),
            _ = tokio::time::sleep(exec.cfg.idle_release), if !released => {
                exec.release_idle();
                released = true;
            }
        }
    }
}

/// The task of `delivery`, if it decodes and is valid; else the delivery is
/// dead-lettered (`None`).
async fn valid_task(delivery: Delivery) -> Option<(Delivery, Task)> {
    let task: Task = match wire::decode(&delivery.body) {
        Ok(t) => t,
        Err(e) => {
            metrics().task("unknown", outcome::POISON);
            metrics().dead_letters.inc();
            warn!(error = %e, bytes = delivery.body.len(), "poison message: dead-lettering it");
            settled("reject", delivery.reject().await, "?", "?");
            return None;
        }
    };
    if delivery.attempt > 1 {
        metrics().redeliveries.inc();
    }
    if let Err(why) = task.validate() {
        metrics().task(kind_of(&task), outcome::POISON);
        metrics().dead_letters.inc();
        warn!(job = %task.job(), task = %task.task_ref(), error = %why, "invalid task: dead-lettering it");
        settled("reject", delivery.reject().await, task.job().as_str(), "?");
        return None;
    }
    Some((delivery, task))
}

/// What becomes of a task that failed for this worker's configuration.
enum ConfigFailure {
    /// Handed back to another worker: this one's `failures`-th in a row, of `max`
    /// (`None`: the job's source failed to open, which is not counted against this
    /// worker: it may be the job's mistake, and a fleet that exits over one mistyped
    /// job leaves the job waiting for workers that no longer exist).
    HandBack {
        failures: Option<u32>,
        max: u32,
        f: Failure,
    },
    /// Failed: several workers could not run it (the task's fault after all), or
    /// this worker has no limit of such failures.
    Fail(Failure),
}

/// One delivered task being served: where it reports, and what its reports name.
struct Served<'a> {
    queue: &'a dyn Queue,
    exec: &'a Arc<Executor>,
    kind: &'static str,
    attempt: Attempt,
    job: JobId,
    task_ref: TaskRef,
    job_s: String,
    task_s: String,
}

impl<'a> Served<'a> {
    fn new(
        queue: &'a dyn Queue,
        exec: &'a Arc<Executor>,
        task: &Task,
        delivery: &Delivery,
    ) -> Self {
        let job = task.job().clone();
        let task_ref = task.task_ref();
        Served {
            queue,
            exec,
            kind: kind_of(task),
            attempt: Attempt(delivery.attempt),
            job_s: job.to_string(),
            task_s: task_ref.to_string(),
            job,
            task_ref,
        }
    }

    /// The task's report of `status`.
    fn report_of(&self, status: ReportStatus) -> TaskReport {
        TaskReport {
            job: self.job.clone(),
            task: self.task_ref,
            attempt: self.attempt,
            status,
        }
    }

    /// Admits and runs the task (or, when it `may_have_run`, finds it already done);
    /// `None`: shutdown came and the grace period ended before the task did.
    async fn run(
        &self,
        task: &Task,
        may_have_run: bool,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Option<Result<ReportStatus, Failure>> {
        let (exec, kind) = (self.exec, self.kind);
        let prepared = async {
            exec.admit(task).await?;
            if may_have_run {
                exec.finished(task).await
            } else {
                Ok(None)
            }
        };
        match prepared.await {
            Ok(Some(status)) => {
                metrics().task(kind, outcome::ALREADY_DONE);
                info!(job = %self.job, task = %self.task_ref, "task already done (its marker exists): reporting it again instead of redoing it");
                Some(Ok(status))
            }
            Ok(None) => self.execute(task, shutdown).await,
            Err(e) => Some(Err(e)),
        }
    }

    /// Executes the task; `None`: shutdown came and the grace period ended first.
    async fn execute(
        &self,
        task: &Task,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Option<Result<ReportStatus, Failure>> {
        let (exec, kind) = (self.exec, self.kind);
        let _in_flight = InFlight::start(kind);
        let run = async {
            // The attempt's record is written while the task runs (a round
            // trip less per task on a distant store), and before its report.
            let ((), r) = tokio::join!(exec.record_attempt(task), exec.execute(task));
            if let Ok(status) = &r {
                count_rows(status);
                metrics().task(kind, outcome::DONE);
            }
            r
        };
        tokio::pin!(run);
        tokio::select! {
            r = &mut run => Some(r),
            _ = shutdown.changed() => {
                info!(task = %self.task_ref, grace = ?exec.cfg.grace, "shutdown: finishing the current task within the grace period");
                match tokio::time::timeout(exec.cfg.grace, &mut run).await {
                    Ok(r) => Some(r),
                    Err(_) => {
                        metrics().task(kind, outcome::HANDED_BACK);
                        warn!(task = %self.task_ref, "grace period over: handing the task back");
                        None
                    }
                }
            }
        }
    }

    /// Decides what becomes of the task, failed with `f` for this worker's
    /// configuration (`refused_by`: the workers that could not run it before), or
    /// failed to open the job's source (`job_source`: handed back alike, not counted
    /// toward this worker's exit).
    fn config_failure(&self, f: Failure, refused_by: &[String], job_source: bool) -> ConfigFailure {
        let exec = self.exec;
        let Some(max) = exec.cfg.max_config_failures else {
            return ConfigFailure::Fail(f);
        };
        let refusers = distinct_refusers(refused_by, &exec.cfg.worker_id);
        if refusers.len() < REFUSING_WORKERS && refused_by.len() + 1 < MAX_HAND_BACKS {
            let failures = (!job_source).then(|| {
                let failures = exec.config_failures.fetch_add(1, Ordering::SeqCst) + 1;
                metrics().config_failures.set(i64::from(failures));
                failures
            });
            metrics().task(self.kind, outcome::MISCONFIGURED);
            let f = Failure::new(
                FailureKind::Config,
                format!("worker {}: {f}", exec.cfg.worker_id),
            );
            return ConfigFailure::HandBack { failures, max, f };
        }
        // Several workers could not run it: the task's fault after all.
        ConfigFailure::Fail(Failure::new(
            FailureKind::Config,
            format!(
                "{f} ({} worker(s) could not run it: {})",
                refusers.len(),
                refusers.join(", ")
            ),
        ))
    }

    /// Hands the task back to another worker after this one's `failures`-th
    /// configuration failure in a row, and takes no task for a while; past `max`
    /// the worker exits. `failures` is `None` for a job's source that failed to
    /// open: the task goes back after the shortest pause, and nothing is counted.
    async fn hand_back(
        &self,
        delivery: Delivery,
        failures: Option<u32>,
        max: u32,
        f: Failure,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(), WorkerExit> {
        let (queue, exec) = (self.queue, self.exec);
        let pause = config_backoff(failures.unwrap_or(1));
        match failures {
            Some(failures) => {
                warn!(job = %self.job, task = %self.task_ref, failures, max, ?pause, error = %f, "this worker cannot run the task (its configuration): handing it back to another worker, not taking tasks meanwhile")
            }
            None => {
                warn!(job = %self.job, task = %self.task_ref, ?pause, error = %f, "this worker cannot open the job's source: handing the task back to another worker (not counted as this worker's configuration failure), not taking tasks meanwhile")
            }
        }
        report(queue, &self.report_of(ReportStatus::Retrying(f.clone()))).await;
        // Settled first: pausing cancels the task consumer and may
        // close the delivery's channel, and an ack on a closed
        // channel is lost (the broker then requeues the original
        // beside its copy and counts a delivery).
        settled(
            "hand-back",
            delivery.hand_back(&exec.cfg.worker_id).await,
            &self.job_s,
            &self.task_s,
        );
        // No task comes to this worker during the pause.
        queue.pause_tasks(pause).await;
        if let Some(failures) = failures.filter(|&n| n >= max) {
            return Err(WorkerExit::Misconfigured {
                failures,
                last: f.message,
            });
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => {}
        }
        Ok(())
    }

    /// Reports the task's `result` and settles its delivery: acknowledged when
    /// done, dead-lettered when failed for good, retried after a backoff else.
    async fn settle(
        &self,
        delivery: Delivery,
        result: Result<ReportStatus, Failure>,
        shutdown: &mut watch::Receiver<bool>,
    ) {
        let (queue, kind, attempt) = (self.queue, self.kind, self.attempt);
        let (job, task_ref) = (&self.job, &self.task_ref);
        match result {
            Ok(status) => report_and_ack(queue, delivery, self.report_of(status)).await,
            Err(f) if !f.is_retryable() => {
                metrics().task(kind, outcome::FAILED);
                metrics().dead_letters.inc();
                warn!(%job, task = %task_ref, kind = f.kind.as_str(), error = %f, "task failed permanently");
                report(queue, &self.report_of(ReportStatus::Failed(f))).await;
                settled("reject", delivery.reject().await, &self.job_s, &self.task_s);
            }
            Err(f) => {
                metrics().task(kind, outcome::RETRIED);
                let wait = retry_backoff(attempt.0);
                warn!(%job, task = %task_ref, attempt = attempt.0, kind = f.kind.as_str(), error = %f, ?wait, "task failed, will be retried");
                report(queue, &self.report_of(ReportStatus::Retrying(f))).await;
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.changed() => {}
                }
                settled("retry", delivery.retry().await, &self.job_s, &self.task_s);
            }
        }
    }
}

/// Serves tasks from `queue` with `loops` task loops over one executor until
/// `shutdown` resolves: then no loop takes a new task, and each ends once its current
/// one is settled (or handed back after the grace period). The first loop to fail ends
/// the others and is the error: a misconfigured worker exits non-zero even while its
/// other loops wait for tasks. `covmerge worker` and embedded mode both run this.
pub async fn serve(
    queue: Arc<dyn Queue>,
    exec: Arc<Executor>,
    loops: usize,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), WorkerExit> {
    let (tx, rx) = watch::channel(false);
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..loops.max(1) {
        set.spawn(run_worker(queue.clone(), exec.clone(), rx.clone()));
    }
    let stop = tokio::spawn(async move {
        shutdown.await;
        let _ = tx.send(true);
    });
    let mut first = Ok(());
    while let Some(l) = set.join_next().await {
        let r = match l {
            Ok(r) => r,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Ok(()),
        };
        if let (Err(e), Ok(())) = (r, &first) {
            first = Err(e);
            set.abort_all();
        }
    }
    stop.abort();
    first
}
