//! A worker process's configuration ([`WorkerConfig`]) made once per mode: embedded in
//! `covmerge merge` ([`WorkerConfig::embedded`]) or a fleet worker
//! ([`WorkerConfig::fleet`]). The memory budget is divided by the memory plan
//! ([`Shares`]), which holds each role's default.

use std::time::Duration;

use covmerge_proto::memory::Shares;

use super::WorkerConfig;

/// What a fleet worker (`covmerge worker`) is asked for.
#[derive(Debug, Clone)]
pub struct FleetWorker {
    /// `--source`: the worker's own source, overriding the job's.
    pub source: Option<String>,
    /// `--grace`: how long a task may still run after SIGTERM.
    pub grace: Duration,
    /// `--max-config-failures`.
    pub max_config_failures: u32,
    /// `--memory-budget` (default: the worker's, [`Shares::for_worker`]).
    pub memory_budget: Option<u64>,
    /// `--concurrency`: task loops in the process.
    pub concurrency: usize,
    /// `--split-threads` (default: the cores, divided among the task loops).
    pub split_threads: Option<usize>,
}

impl WorkerConfig {
    /// `covmerge merge`'s workers: `loops` task loops sharing `memory_budget` (default:
    /// the merge's, [`Shares::for_merge`]) and the cores, a job of `splits` split tasks
    /// (fewer splits than loops: each gets more parse threads). A task this process
    /// cannot run because of its own configuration fails.
    pub fn embedded(
        memory_budget: Option<u64>,
        loops: usize,
        splits: usize,
    ) -> Result<Self, String> {
        WorkerConfig {
            memory_budget: Shares::for_merge(memory_budget, loops)?.budget,
            ..WorkerConfig::default()
        }
        .shared_by(loops, splits)
    }

    /// A fleet worker: such a task is handed back to another worker, and the worker
    /// exits after `max_config_failures` of them in a row.
    pub fn fleet(w: FleetWorker) -> Result<Self, String> {
        let mut cfg = WorkerConfig {
            source: w.source,
            grace: w.grace,
            max_config_failures: Some(w.max_config_failures),
            memory_budget: Shares::for_worker(w.memory_budget, w.concurrency)?.budget,
            ..WorkerConfig::default()
        }
        .shared_by(w.concurrency, w.concurrency)?;
        if let Some(t) = w.split_threads {
            cfg.split_threads = t.max(1);
        }
        Ok(cfg)
    }
}
