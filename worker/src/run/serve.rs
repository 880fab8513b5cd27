//! The worker loop: takes deliveries, runs them on an [`Executor`], reports, and
//! acknowledges, rejects or hands back with backoff.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use covmerge_proto::retry::RetryPolicy;
use covmerge_proto::wire::{self, Failure, FailureKind, ReportStatus, Task, TaskReport};
use covmerge_proto::Attempt;
use covmerge_queue::Queue;
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
async fn report_and_ack(queue: &dyn Queue, delivery: covmerge_queue::Delivery, r: TaskReport) {
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
        // Waiting: after `idle_release` without a task, the last job's memory goes
        // (its job has most likely ended; the next task opens what it needs).
        let next = queue.next_task();
        tokio::pin!(next);
        let mut released = false;
        let delivery = loop {
            tokio::select! {
                d = &mut next => break d?,
                _ = shutdown.changed() => return Ok(()),
                _ = tokio::time::sleep(exec.cfg.idle_release), if !released => {
                    exec.release_idle();
                    released = true;
                }
            }
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
        // Only a task delivered again (after a worker died, handed it back or failed
        // it) can have run before: only then is its marker looked for. A first
        // delivery of a task that did run (a task republished while it ran, a
        // forged copy) is done again, which is harmless (the same output under the
        // same keys, or new spill objects the marker then names); looking first
        // cost every task a round trip to the store.
        let may_have_run = delivery.attempt > 1 || !delivery.refused_by.is_empty();
        let prepared = async {
            exec.admit(&task).await?;
            if may_have_run {
                exec.finished(&task).await
            } else {
                Ok(None)
            }
        };
        let result = match prepared.await {
            Ok(Some(status)) => {
                metrics().task(kind, outcome::ALREADY_DONE);
                info!(%job, task = %task_ref, "task already done (its marker exists): reporting it again instead of redoing it");
                Ok(status)
            }
            Ok(None) => {
                let _in_flight = InFlight::start(kind);
                let run = async {
                    // The attempt's record is written while the task runs (a round
                    // trip less per task on a distant store), and before its report.
                    let ((), r) = tokio::join!(exec.record_attempt(&task), exec.execute(&task));
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
                match exec.cfg.max_config_failures {
                    Some(max) => {
                        let refusers = distinct_refusers(&delivery.refused_by, &exec.cfg.worker_id);
                        if refusers.len() < REFUSING_WORKERS
                            && delivery.refused_by.len() + 1 < MAX_HAND_BACKS
                        {
                            let failures = exec.config_failures.fetch_add(1, Ordering::SeqCst) + 1;
                            metrics().config_failures.set(i64::from(failures));
                            metrics().task(kind, outcome::MISCONFIGURED);
                            let pause = config_backoff(failures);
                            let f = Failure::new(
                                FailureKind::Config,
                                format!("worker {}: {f}", exec.cfg.worker_id),
                            );
                            warn!(%job, task = %task_ref, failures, max, ?pause, error = %f, "this worker cannot run the task (its configuration): handing it back to another worker, not taking tasks meanwhile");
                            report(
                                queue.as_ref(),
                                &report_of(ReportStatus::Retrying(f.clone())),
                            )
                            .await;
                            // Settled first: pausing cancels the task consumer and may
                            // close the delivery's channel, and an ack on a closed
                            // channel is lost (the broker then requeues the original
                            // beside its copy and counts a delivery).
                            settled(
                                "hand-back",
                                delivery.hand_back(&exec.cfg.worker_id).await,
                                &job_s,
                                &task_s,
                            );
                            // No task comes to this worker during the pause.
                            queue.pause_tasks(pause).await;
                            if failures >= max {
                                return Err(WorkerExit::Misconfigured {
                                    failures,
                                    last: f.message,
                                });
                            }
                            tokio::select! {
                                _ = tokio::time::sleep(pause) => {}
                                _ = shutdown.changed() => {}
                            }
                            continue;
                        }
                        // Several workers could not run it: the task's fault after all.
                        Err(Failure::new(
                            FailureKind::Config,
                            format!(
                                "{f} ({} worker(s) could not run it: {})",
                                refusers.len(),
                                refusers.join(", ")
                            ),
                        ))
                    }
                    None => Err(f),
                }
            }
            r => r,
        };
        match result {
            Ok(status) => report_and_ack(queue.as_ref(), delivery, report_of(status)).await,
            Err(f) if !f.is_retryable() => {
                metrics().task(kind, outcome::FAILED);
                metrics().dead_letters.inc();
                warn!(%job, task = %task_ref, kind = f.kind.as_str(), error = %f, "task failed permanently");
                report(queue.as_ref(), &report_of(ReportStatus::Failed(f))).await;
                settled("reject", delivery.reject().await, &job_s, &task_s);
            }
            Err(f) => {
                metrics().task(kind, outcome::RETRIED);
                let wait = retry_backoff(attempt.0);
                warn!(%job, task = %task_ref, attempt = attempt.0, kind = f.kind.as_str(), error = %f, ?wait, "task failed, will be retried");
                report(queue.as_ref(), &report_of(ReportStatus::Retrying(f))).await;
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.changed() => {}
                }
                settled("retry", delivery.retry().await, &job_s, &task_s);
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
