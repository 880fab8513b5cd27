//! `covmerge status`: where a fleet job stands, read from the store alone, so it works
//! while the job runs, after it ended, and after its coordinator crashed.
//!
//! Everything comes from the job's objects: `job.json` (the plan, and by its write
//! time the start), the `.done` markers (finished tasks and their counts), the
//! `attempts/` records (tasks started, and how often) and `manifest.json` (the end).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use covmerge_proto::layout as keys;
use covmerge_proto::wire::{self, MergeOutcome, SplitOutcome};
use covmerge_proto::{JobId, JobSpec, Manifest};
use covmerge_storage::Store;
use serde::Serialize;

use crate::JobError;

/// The phase a job is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Splitting inputs into shards.
    Map,
    /// Merging shards.
    Reduce,
    /// Every shard merged; the result is being written.
    Assembling,
    /// The result is written.
    Complete,
    /// The job failed; nothing was published.
    Failed,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Map => "map",
            Phase::Reduce => "reduce",
            Phase::Assembling => "assembling",
            Phase::Complete => "complete",
            Phase::Failed => "failed",
        })
    }
}

/// Tasks of one kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TaskCounts {
    /// Tasks of the job.
    pub total: u64,
    /// Tasks finished.
    pub done: u64,
    /// Started (an attempt is recorded) and not done: running, or waiting for a retry.
    pub running: u64,
    /// Named failed by the manifest of a failed job.
    pub failed: u64,
    /// Executions recorded over all these tasks (more than `done + running` means
    /// retries).
    pub attempts: u64,
}

/// Where a job stands.
#[derive(Debug, Clone, Serialize)]
pub struct JobStatus {
    /// The job's id.
    pub job: String,
    /// Where the job is.
    pub phase: Phase,
    /// The split tasks.
    pub splits: TaskCounts,
    /// The merge tasks.
    pub merges: TaskCounts,
    /// Data rows read by the finished splits.
    pub rows_read: u64,
    /// Rows merged by the finished shards.
    pub rows_merged: u64,
    /// Seconds since the job started.
    pub elapsed_secs: u64,
    /// Seconds left at the pace so far; `None` before any task finished or at the end.
    pub eta_secs: Option<u64>,
    /// The failed tasks of a failed job, with their errors.
    pub failed: Vec<String>,
    /// Where the result was written, once the job completed.
    pub result: Option<String>,
}

fn task_of(dir: &str) -> Option<(&str, &str)> {
    dir.split_once('-')
}

/// Reads the status of `job` from `store`.
pub async fn job_status(store: &Store, job: &JobId) -> Result<JobStatus, JobError> {
    let (started, spec) = stored_spec(store, job).await?;
    let (done_splits, splits_done, rows_read) =
        done_tasks::<SplitOutcome>(store, &keys::splits(job), |o| o.counts.rows_in).await?;
    let (done_shards, shards_done, rows_merged) =
        done_tasks::<MergeOutcome>(store, &keys::parts(job), |o| o.counts.rows_merged).await?;
    let mut splits = TaskCounts {
        total: spec.split_task_ranges().len() as u64,
        done: splits_done,
        ..TaskCounts::default()
    };
    let mut merges = TaskCounts {
        total: spec.shards as u64,
        done: shards_done,
        ..TaskCounts::default()
    };
    let executions = executions(store, job).await?;
    let manifest: Option<Manifest> = match store.get_opt(&keys::manifest(job)).await? {
        Some(b) => serde_json::from_slice(&b).ok(),
        None => None,
    };
    // A task the manifest names failed is not running (a failed job showed
    // "7 running, 7 failed"). Failed tasks are named "split N" / "shard N", their
    // attempts directories "split-N" / "shard-N".
    let failed_tasks: BTreeSet<String> = manifest
        .iter()
        .flat_map(|m| &m.failed)
        .map(|f| f.task.replacen(' ', "-", 1))
        .collect();
    for (dir, n) in &executions {
        let Some((kind, index)) = task_of(dir) else {
            continue;
        };
        let (counts, done) = match kind {
            "split" => (&mut splits, &done_splits),
            "shard" => (&mut merges, &done_shards),
            _ => continue,
        };
        counts.attempts += n;
        if !done.contains(index) && !failed_tasks.contains(dir) {
            counts.running += 1;
        }
    }
    let (ended, phase, failed, result) = match &manifest {
        Some(m) => {
            let ended = store.modified(&keys::manifest(job)).await?;
            let (phase, failed) = ended_phase(m, &mut splits, &mut merges);
            (ended, phase, failed, m.result.clone())
        }
        None => (None, running_phase(&splits, &merges), Vec::new(), None),
    };
    let now = ended.unwrap_or_else(SystemTime::now);
    let elapsed = now.duration_since(started).unwrap_or(Duration::ZERO);
    Ok(JobStatus {
        job: job.to_string(),
        phase,
        eta_secs: eta_secs(phase, elapsed, &splits, &merges),
        splits,
        merges,
        rows_read,
        rows_merged,
        elapsed_secs: elapsed.as_secs(),
        failed,
        result,
    })
}

/// The job's spec, checked, and when it was written (the job's start).
async fn stored_spec(store: &Store, job: &JobId) -> Result<(SystemTime, JobSpec), JobError> {
    let spec_key = keys::job_spec(job);
    let started = store.modified(&spec_key).await?;
    let Some(started) = started else {
        return Err(JobError::Plan(format!("job {job} not found in {store}")));
    };
    let spec: JobSpec = serde_json::from_slice(&store.get(&spec_key).await?)
        .map_err(|e| JobError::Plan(format!("job {job}: stored spec unreadable: {e}")))?;
    spec.validate()
        .map_err(|e| JobError::Plan(format!("job {job}: stored spec refused: {e}")))?;
    Ok((started, spec))
}

/// The tasks done under `prefix` (by their `.done` markers): their indexes, the
/// markers, and the `rows` their outcomes counted (an outcome that does not decode
/// counts none).
async fn done_tasks<T: serde::de::DeserializeOwned>(
    store: &Store,
    prefix: &str,
    rows: impl Fn(&T) -> u64,
) -> Result<(BTreeSet<String>, u64, u64), JobError> {
    let (mut done, mut markers, mut total) = (BTreeSet::new(), 0, 0);
    for key in store.list(prefix).await? {
        if key.ends_with(".done") {
            if let Some(b) = store.get_opt(&key).await? {
                if let Ok(o) = wire::decode::<T>(&b) {
                    total += rows(&o);
                }
            }
            markers += 1;
            done.insert(name_of(&key));
        }
    }
    Ok((done, markers, total))
}

/// Executions per task, from `attempts/<kind>-<index>/<nonce>`.
async fn executions(store: &Store, job: &JobId) -> Result<BTreeMap<String, u64>, JobError> {
    let mut executions: BTreeMap<String, u64> = BTreeMap::new();
    for key in store.list(&keys::attempts(job)).await? {
        let rest = key.strip_prefix(&keys::attempts(job)).unwrap_or(&key);
        if let Some((dir, _)) = rest.split_once('/') {
            *executions.entry(dir.to_string()).or_default() += 1;
        }
    }
    Ok(executions)
}

/// The phase of a job that ended with `manifest`, and its failed tasks with their
/// errors (counted into `splits` and `merges`).
fn ended_phase(
    manifest: &Manifest,
    splits: &mut TaskCounts,
    merges: &mut TaskCounts,
) -> (Phase, Vec<String>) {
    let phase = if manifest.status == covmerge_proto::manifest::JobStatus::Complete {
        Phase::Complete
    } else {
        Phase::Failed
    };
    let failed: Vec<String> = manifest
        .failed
        .iter()
        .map(|f| format!("{}: {}", f.task, f.error))
        .collect();
    for f in &manifest.failed {
        let t = f.task.to_string();
        if t.starts_with("split") {
            splits.failed += 1;
        } else {
            merges.failed += 1;
        }
    }
    (phase, failed)
}

/// The phase of a job still running, by its tasks done.
fn running_phase(splits: &TaskCounts, merges: &TaskCounts) -> Phase {
    if splits.done < splits.total {
        Phase::Map
    } else if merges.done < merges.total {
        Phase::Reduce
    } else {
        Phase::Assembling
    }
}

/// Seconds left at the pace so far (`None` before any task finished or at the end).
fn eta_secs(
    phase: Phase,
    elapsed: Duration,
    splits: &TaskCounts,
    merges: &TaskCounts,
) -> Option<u64> {
    let total = splits.total + merges.total;
    let done = splits.done + merges.done;
    match phase {
        Phase::Map | Phase::Reduce if done > 0 && done < total => {
            Some(elapsed.as_secs() * (total - done) / done)
        }
        Phase::Assembling => Some(0),
        _ => None,
    }
}

/// The index in a marker key `…/<index>.done`.
fn name_of(key: &str) -> String {
    key.rsplit('/')
        .next()
        .unwrap_or(key)
        .trim_end_matches(".done")
        .to_string()
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = |c: &TaskCounts| {
            format!(
                "{}/{} done, {} running, {} failed, {} attempt(s)",
                c.done, c.total, c.running, c.failed, c.attempts
            )
        };
        writeln!(f, "job      {}", self.job)?;
        writeln!(f, "phase    {}", self.phase)?;
        writeln!(f, "splits   {}", t(&self.splits))?;
        writeln!(f, "merges   {}", t(&self.merges))?;
        writeln!(
            f,
            "rows     {} read, {} merged",
            self.rows_read, self.rows_merged
        )?;
        write!(f, "elapsed  {}s", self.elapsed_secs)?;
        if let Some(e) = self.eta_secs {
            write!(f, ", about {e}s left")?;
        }
        writeln!(f)?;
        if let Some(r) = &self.result {
            writeln!(f, "result   {r}")?;
        }
        for x in &self.failed {
            writeln!(f, "failed   {x}")?;
        }
        Ok(())
    }
}
