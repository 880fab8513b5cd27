//! Tracking one phase's tasks until each is final: reports, dead letters, markers
//! found in the store (a lost report), and republishing tasks lost from the queue.
//! The states and their transitions are [`crate::state`]'s.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use covmerge_proto::layout as keys;
use covmerge_proto::manifest::FailedTask;
use covmerge_proto::wire::{
    self, FailureKind, MergeOutcome, ReportStatus, SplitOutcome, Task, TaskRef, TaskReport,
};
use covmerge_proto::JobId;
use covmerge_queue::{Event, Queue};
use covmerge_storage::Store;
use tracing::{info, warn};

use crate::progress::ProgressView;
use crate::state::{Output, TaskState};
use crate::JobError;

/// What the workers said about a task's failed deliveries.
#[derive(Debug, Default, Clone)]
pub(crate) struct Notes {
    last_error: Option<String>,
    /// Deliveries handed back because the store was unreachable.
    pub(crate) outages: u32,
    /// Deliveries handed back because the task failed.
    failures: u32,
}

/// Notices of lost tasks closer together than this cause one republish.
const LOST_DEBOUNCE: Duration = Duration::from_secs(2);

pub(crate) struct Tracker<'a> {
    pub(crate) queue: &'a dyn Queue,
    pub(crate) store: &'a Store,
    pub(crate) job: &'a JobId,
    pub(crate) states: BTreeMap<TaskRef, TaskState>,
    /// The tasks published, kept to publish again after a long silence.
    pub(crate) tasks: HashMap<TaskRef, Task>,
    pub(crate) notes: HashMap<TaskRef, Notes>,
    pub(crate) progress: &'a ProgressView,
    pub(crate) reconcile_every: Duration,
    pub(crate) republish_after: Duration,
}

impl Tracker<'_> {
    /// Starts a phase: a task whose `.done` marker is in the store (a resumed job, or
    /// one whose coordinator restarted) is done already; every other one is published.
    pub(crate) async fn start_phase(&mut self, tasks: Vec<Task>) -> Result<(), JobError> {
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

    /// Publishes every task still waited for again (see [`JobOptions::republish_after`]
    /// and [`Event::TasksLost`]).
    async fn republish(&mut self, why: &str) -> Result<(), JobError> {
        let waiting: Vec<TaskRef> = self
            .states
            .iter()
            .filter(|(_, s)| matches!(s, TaskState::Published))
            .map(|(t, _)| *t)
            .collect();
        warn!(
            tasks = waiting.len(),
            "{why}: publishing the waiting tasks again"
        );
        for t in waiting {
            if let Some(task) = self.tasks.get(&t) {
                publish(self.queue, self.job.as_str(), task).await?;
            }
        }
        Ok(())
    }

    pub(crate) async fn wait_all(&mut self) -> Result<(), JobError> {
        let mut tick = tokio::time::interval(self.reconcile_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await; // The first tick is immediate.
        self.gauges();
        let mut last_news = tokio::time::Instant::now();
        let mut last_lost: Option<tokio::time::Instant> = None;
        while self.states.values().any(|s| !s.is_final()) {
            let event = tokio::select! {
                e = self.queue.next_event(self.job.as_str()) => e?,
                _ = tick.tick() => {
                    if self.reconcile().await? {
                        last_news = tokio::time::Instant::now();
                    } else if last_news.elapsed() >= self.republish_after {
                        let why = format!(
                            "no task settled and no report for {}s",
                            self.republish_after.as_secs()
                        );
                        self.republish(&why).await?;
                        last_news = tokio::time::Instant::now();
                    }
                    continue;
                }
            };
            last_news = tokio::time::Instant::now();
            match event {
                Event::TasksLost => {
                    // Every worker that saw its consumer cancelled says so: republish
                    // once per burst (duplicates are harmless, but need not pile up).
                    if last_lost.is_none_or(|t| t.elapsed() >= LOST_DEBOUNCE) {
                        self.republish("the task queue was deleted and declared again")
                            .await?;
                        last_lost = Some(tokio::time::Instant::now());
                    }
                }
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

    pub(crate) fn failed(&self) -> Vec<FailedTask> {
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
pub(crate) async fn publish(queue: &dyn Queue, job: &str, task: &Task) -> Result<(), JobError> {
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
