//! Tracking one phase's tasks until each is final: reports, dead letters, markers
//! found in the store (a lost report), and republishing tasks lost from the queue.
//! The states and their transitions are [`crate::state`]'s.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use covmerge_proto::layout as keys;
use covmerge_proto::manifest::FailedTask;
use covmerge_proto::wire::{
    self, FailureKind, MergeOutcome, ReportStatus, SplitOutcome, Task, TaskReport,
};
use covmerge_proto::{JobId, TaskRef};
use covmerge_queue::{Event, Queue};
use covmerge_storage::Store;
use tracing::{info, warn};

/// How long a dead letter with no failure heard of waits for its task's report.
const DEAD_LETTER_GRACE: Duration = Duration::from_secs(2);

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

/// How many tasks are in each state, and the rows the settled splits read: kept up to
/// date as each state changes. Recounting them over every task at each settled task
/// (the gauges, and the "any task still waited for?" test of the event loop) made a
/// job of many small inputs quadratic: 100k one-row objects cost 2.85 ms each where
/// 10k cost 1.7.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) pending: u64,
    pub(crate) running: u64,
    pub(crate) done: u64,
    pub(crate) failed: u64,
    /// Settled splits, and the rows they read (wider than a count: an input's
    /// `rows_in` saturates at 2^64 − 1, and this sum must take it off again exactly).
    splits_done: u64,
    rows_read: u128,
}

impl Tally {
    /// `s` counted in (`add`) or out.
    fn count(&mut self, s: &TaskState, add: bool) {
        let n = |v: &mut u64| {
            if add {
                *v += 1
            } else {
                *v -= 1
            }
        };
        match s {
            TaskState::Pending => n(&mut self.pending),
            TaskState::Published => n(&mut self.running),
            TaskState::Done { output, .. } => {
                n(&mut self.done);
                if let Output::Split(o) = output {
                    n(&mut self.splits_done);
                    if add {
                        self.rows_read += u128::from(o.counts.rows_in);
                    } else {
                        self.rows_read -= u128::from(o.counts.rows_in);
                    }
                }
            }
            TaskState::Failed { .. } => n(&mut self.failed),
        }
    }

    /// The tally of `states`, counted one by one.
    #[cfg(test)]
    pub(crate) fn of<'s>(states: impl IntoIterator<Item = &'s TaskState>) -> Tally {
        let mut t = Tally::default();
        for s in states {
            t.count(s, true);
        }
        t
    }

    /// Tasks not yet done or failed.
    pub(crate) fn waiting(&self) -> u64 {
        self.pending + self.running
    }
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
    /// The states counted (see [`Tally`]); every change of `states` goes through
    /// [`Tracker::insert`] or [`Tracker::change`].
    pub(crate) tally: Tally,
    /// Task states looked at so far: one per change, every task per pass over them
    /// all ([`Tracker::all`]). What a job costs here must stay linear in its tasks.
    pub(crate) visits: std::cell::Cell<u64>,
}

impl Tracker<'_> {
    /// Every task and its state: the one way to pass over them all (counted).
    fn all(&self) -> impl Iterator<Item = (&TaskRef, &TaskState)> {
        self.visits
            .set(self.visits.get() + self.states.len() as u64);
        self.states.iter()
    }

    /// Adds a task in state `s` (a task already tracked is replaced).
    fn insert(&mut self, t: TaskRef, s: TaskState) {
        self.visits.set(self.visits.get() + 1);
        self.tally.count(&s, true);
        if let Some(old) = self.states.insert(t, s) {
            self.tally.count(&old, false);
        }
    }

    /// Applies `f` to the state of `t`, if tracked, keeping the tally; returns what `f`
    /// returned (whether the state changed), `None` for a task not tracked.
    fn change<R>(&mut self, t: &TaskRef, f: impl FnOnce(&mut TaskState) -> R) -> Option<R> {
        let s = self.states.get_mut(t)?;
        self.visits.set(self.visits.get() + 1);
        self.tally.count(s, false);
        let r = f(s);
        self.tally.count(s, true);
        Some(r)
    }

    /// Starts a phase: a task whose `.done` marker is in the store (a resumed job, or
    /// one whose coordinator restarted) is done already; every other one is published.
    pub(crate) async fn start_phase(&mut self, tasks: Vec<Task>) -> Result<(), JobError> {
        // One listing of the phase's markers, not one request per task before its
        // publication: on a bucket 20 ms away a phase of 1,000 tasks started 20 s late.
        let dirs = match tasks.first().map(Task::task_ref) {
            Some(TaskRef::Split(_)) => vec![keys::splits(self.job)],
            Some(TaskRef::Merge(_)) => vec![keys::parts(self.job)],
            None => Vec::new(),
        };
        let present = self.markers(&dirs).await?;
        for task in tasks {
            let t = task.task_ref();
            let mut state = TaskState::Pending;
            let marked = present.contains(&keys::done(self.job, t));
            if let Some(o) = if marked {
                self.load_output(t).await?
            } else {
                None
            } {
                state.complete(o, 0);
                self.progress.task_finished(&t);
            } else {
                publish(self.queue, self.job.as_str(), &task).await?;
                state.publish();
                self.tasks.insert(t, task);
            }
            self.insert(t, state);
        }
        Ok(())
    }

    /// The keys now in the store under `dirs` (the job's `splits/`, `parts/`): the
    /// `.done` markers of its tasks, one listing a directory.
    async fn markers(&self, dirs: &[String]) -> Result<HashSet<String>, JobError> {
        let mut present = HashSet::new();
        for dir in dirs {
            present.extend(self.store.list(dir).await?);
        }
        Ok(present)
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
                .map(|o| Output::Merge(Box::new(o))),
        })
    }

    /// `covmerge_job_tasks{job_id,state}` from the current states.
    fn gauges(&self) {
        let t = &self.tally;
        covmerge_telemetry::metrics().job_tasks(
            self.job.as_str(),
            t.pending,
            t.running,
            t.done,
            t.failed,
        );
        // Rows read by the settled splits (none in the merge phase: no splits here).
        if t.splits_done > 0 {
            self.progress
                .settled_rows_read(u64::try_from(t.rows_read).unwrap_or(u64::MAX));
        }
    }

    /// Settles waiting tasks whose marker is in the store (their report was lost).
    /// Returns whether any was settled.
    async fn reconcile(&mut self) -> Result<bool, JobError> {
        if self.tally.waiting() == 0 {
            return Ok(false);
        }
        let pending: Vec<TaskRef> = self
            .all()
            .filter(|(_, s)| !s.is_final())
            .map(|(t, _)| *t)
            .collect();
        if pending.is_empty() {
            return Ok(false);
        }
        let mut settled = false;
        let present = self
            .markers(&[keys::splits(self.job), keys::parts(self.job)])
            .await?;
        for t in pending {
            if !present.contains(&keys::done(self.job, t)) {
                continue;
            }
            if let Some(o) = self.load_output(t).await? {
                if self.change(&t, |s| s.complete(o, 0)) == Some(true) {
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
            .all()
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
        // Dead letters of tasks with no failure heard of yet, settled after
        // DEAD_LETTER_GRACE: the worker's failure report (naming the input and the
        // line) travels on another queue and may arrive just after the dead letter.
        let mut held: Vec<(tokio::time::Instant, TaskRef, String)> = Vec::new();
        while self.tally.waiting() > 0 {
            let first_held = held.iter().map(|h| h.0).min();
            let event = tokio::select! {
                e = self.queue.next_event(self.job.as_str()) => e?,
                _ = tokio::time::sleep_until(first_held.unwrap_or_else(tokio::time::Instant::now)), if first_held.is_some() => {
                    let now = tokio::time::Instant::now();
                    let (due, rest): (Vec<_>, Vec<_>) = held.into_iter().partition(|h| h.0 <= now);
                    held = rest;
                    for (_, t, why) in due {
                        self.settle_dead_letter(t, why);
                    }
                    continue;
                }
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
                Event::Report(body) => self.on_report(&body).await,
                Event::DeadLetter { body, reason } => {
                    held.extend(self.on_dead_letter(&body, &reason));
                }
            }
        }
        Ok(())
    }

    /// A task's report: settles it when done or failed, notes a failed attempt that
    /// is retried.
    async fn on_report(&mut self, body: &[u8]) {
        let r: TaskReport = match wire::decode(body) {
            Ok(r) => r,
            Err(e) => {
                warn!(error = %e, "undecodable report ignored");
                return;
            }
        };
        if r.job != *self.job {
            return;
        }
        if self.states.get(&r.task).is_none_or(|s| s.is_final()) {
            return;
        }
        let attempt = r.attempt.0;
        let changed = match r.status {
            // A report of a finished task says only that its marker is written: the
            // output is the marker's, read back (a report is a message anyone who can
            // reach the broker can send; a forged split report without chunks had its
            // input's rows left out of a published result).
            ReportStatus::Split(_) | ReportStatus::Merged(_) => {
                match self.load_output(r.task).await {
                    Ok(Some(o)) => self
                        .change(&r.task, |s| s.complete(o, attempt))
                        .unwrap_or(false),
                    Ok(None) => {
                        warn!(task = %r.task, attempt, "a report of a finished task without its marker in the store: ignored");
                        false
                    }
                    // Settled from its marker by a later reconciliation.
                    Err(e) => {
                        warn!(task = %r.task, attempt, error = %e, "the marker of a reported task could not be read now");
                        false
                    }
                }
            }
            ReportStatus::Failed(f) => self.change(&r.task, |s| s.fail(f.message)).unwrap_or(false),
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

    /// A dead-lettered task (`reason`: the broker's): failed now when a failure of it
    /// was heard of, else returned to be failed after [`DEAD_LETTER_GRACE`] (when
    /// its failure report may have come).
    fn on_dead_letter(
        &mut self,
        body: &[u8],
        reason: &str,
    ) -> Option<(tokio::time::Instant, TaskRef, String)> {
        let task: Task = match wire::decode(body) {
            Ok(t) => t,
            Err(e) => {
                warn!(error = %e, "undecodable dead letter ignored");
                return None;
            }
        };
        let t = task.task_ref();
        covmerge_telemetry::metrics().dead_letters.inc();
        if !self.states.contains_key(&t) {
            return None;
        }
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
        let why = format!("dead-lettered: {reason}{cause}");
        if cause.is_empty() {
            return Some((tokio::time::Instant::now() + DEAD_LETTER_GRACE, t, why));
        }
        self.settle_dead_letter(t, why);
        None
    }

    /// Fails a dead-lettered task, unless a report settled it meanwhile.
    fn settle_dead_letter(&mut self, t: TaskRef, why: String) {
        if self.change(&t, |s| s.fail(why)) == Some(true) {
            self.gauges();
            warn!(task = %t, "task dead-lettered");
            self.progress.task_finished(&t);
        }
    }

    pub(crate) fn failed(&self) -> Vec<FailedTask> {
        self.all()
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

#[cfg(test)]
mod tests {
    use super::*;
    use covmerge_proto::wire::{Failure, SplitTask};
    use covmerge_proto::{Attempt, SplitId};
    use covmerge_queue::memory::MemoryQueue;

    /// One settled task made the coordinator look at every task (its gauges and its
    /// "any task still waited for?" test recounted them all), so that a job of many
    /// small inputs cost more than linear time: 100k one-row objects 2.85 ms each, 10k
    /// 1.7. Now a phase of N tasks, settled one report at a time (done, failed,
    /// retried, reported twice, dead-lettered), looks at O(N) task states, and the
    /// counts kept as it goes equal the counts of the final states.
    #[tokio::test]
    async fn settling_each_task_looked_at_every_task() {
        for n in [1_000u32, 4_000] {
            let queue = MemoryQueue::default();
            let store = Store::open("memory:").unwrap();
            let job = JobId::new_random();
            queue.open_job(job.as_str()).await.unwrap();
            let progress = ProgressView::hidden();
            let mut tr = tracker(&queue, &store, &job, &progress);
            let tasks: Vec<Task> = (0..n).map(|i| split_task(&job, i)).collect();
            tr.start_phase(tasks.clone()).await.unwrap();
            assert_eq!(tr.tally.running, n as u64);
            let report = |i: u32, status: ReportStatus| {
                wire::encode(&TaskReport {
                    job: job.clone(),
                    task: TaskRef::Split(SplitId(i)),
                    attempt: Attempt(1),
                    status,
                })
                .unwrap()
            };
            let done = |rows: u64| {
                let mut o = SplitOutcome::default();
                o.counts.rows_in = rows;
                ReportStatus::Split(o)
            };
            let failure = || Failure::new(FailureKind::BadInput, "bad input");
            for i in 0..n {
                // A finished task's marker, written before its report.
                if i % 4 < 2 {
                    let mut o = SplitOutcome::default();
                    o.counts.rows_in = 2 + u64::from(i % 4);
                    put_marker(&store, &job, i, &o).await;
                }
                let bodies = match i % 4 {
                    0 => vec![report(i, done(2)), report(i, done(2))],
                    1 => vec![
                        report(i, ReportStatus::Retrying(failure())),
                        report(i, done(3)),
                    ],
                    2 => vec![report(i, ReportStatus::Failed(failure()))],
                    _ => vec![],
                };
                for b in bodies {
                    queue.publish_report(job.as_str(), b).await.unwrap();
                }
            }
            // The last quarter is dead-lettered (a report for another task is ignored).
            queue
                .publish_report(job.as_str(), report(n + 7, done(1)))
                .await
                .unwrap();
            // Workers take the tasks in order; every fourth is rejected: dead-lettered.
            for i in 0..n {
                let d = queue.next_task().await.unwrap();
                let t: Task = wire::decode(&d.body).unwrap();
                assert_eq!(t.task_ref(), TaskRef::Split(SplitId(i)));
                if i % 4 == 3 {
                    d.reject().await.unwrap();
                } else {
                    d.ack().await.unwrap();
                }
            }
            tokio::time::timeout(Duration::from_secs(60), tr.wait_all())
                .await
                .expect("the phase ends")
                .unwrap();
            assert_eq!(tr.tally, Tally::of(tr.states.values()), "n = {n}");
            assert_eq!(tr.tally.done, n as u64 / 2, "n = {n}");
            assert_eq!(tr.tally.failed, n as u64 / 2, "n = {n}");
            assert_eq!(tr.tally.rows_read, (n as u128 / 4) * 5, "n = {n}");
            assert_eq!(tr.failed().len(), n as usize / 2);
            // Start, one change per settled task, the few passes over all of them.
            let visits = tr.visits.get();
            assert!(
                visits <= 4 * n as u64,
                "{n} tasks: {visits} task states looked at (quadratic)"
            );
        }
    }

    /// A tracker of `job` that neither reconciles nor republishes by itself.
    fn tracker<'a>(
        queue: &'a MemoryQueue,
        store: &'a Store,
        job: &'a JobId,
        progress: &'a ProgressView,
    ) -> Tracker<'a> {
        Tracker {
            queue,
            store,
            job,
            states: BTreeMap::new(),
            tasks: HashMap::new(),
            notes: HashMap::new(),
            progress,
            reconcile_every: Duration::from_secs(3600),
            republish_after: Duration::from_secs(3600),
            tally: Tally::default(),
            visits: Default::default(),
        }
    }

    /// Split `i` of `job`, of the input `/in/<i>.csv`.
    fn split_task(job: &JobId, i: u32) -> Task {
        Task::Split(SplitTask {
            namespace: None,
            job: job.clone(),
            split: SplitId(i),
            input: format!("/in/{i}.csv"),
            shards: 1,
            max_bad_rows: 0,
            read: Default::default(),
            more: Vec::new(),
        })
    }

    /// Writes the `.done` marker of split `i` of `job` holding `o`.
    async fn put_marker(store: &Store, job: &JobId, i: u32, o: &SplitOutcome) {
        let key = keys::done(job, TaskRef::Split(SplitId(i)));
        store
            .put(&key, bytes::Bytes::from(wire::encode(o).unwrap()))
            .await
            .unwrap();
    }

    /// A report is a message anyone who can reach the broker can send: a forged
    /// split report without chunks settled the split, its worker's real report was
    /// then dropped as a duplicate, and the result was published without that
    /// input's rows (exit 0, the manifest's totals agreeing with themselves). A
    /// report now settles a task with its marker's output, and is ignored without one.
    #[tokio::test]
    async fn a_forged_split_report_settled_the_split_without_its_rows() {
        let queue = MemoryQueue::default();
        let store = Store::open("memory:").unwrap();
        let job = JobId::new_random();
        queue.open_job(job.as_str()).await.unwrap();
        let progress = ProgressView::hidden();
        let mut tr = tracker(&queue, &store, &job, &progress);
        tr.start_phase(vec![split_task(&job, 0)]).await.unwrap();
        let report = |rows: u64| {
            let mut o = SplitOutcome::default();
            o.counts.rows_in = rows;
            wire::encode(&TaskReport {
                job: job.clone(),
                task: TaskRef::Split(SplitId(0)),
                attempt: Attempt(1),
                status: ReportStatus::Split(o),
            })
            .unwrap()
        };
        // Forged before the worker wrote anything: no marker, not settled.
        tr.on_report(&report(0)).await;
        assert_eq!(
            tr.tally.done, 0,
            "a report without a marker settled its task"
        );
        // The worker's marker, then a report that disagrees with it: the marker counts.
        let mut real = SplitOutcome::default();
        real.counts.rows_in = 10_557;
        put_marker(&store, &job, 0, &real).await;
        tr.on_report(&report(0)).await;
        assert_eq!(tr.tally.done, 1);
        assert_eq!(tr.tally.rows_read, 10_557, "the report's counts were taken");
    }
}
