//! Executing tasks ([`Executor`]) and the worker loop over a queue ([`run_worker`]).
//!
//! A task's outputs are written under the job's prefix in the store (the keys are
//! `covmerge_proto::layout`'s), data first and the `.done` marker last; the report is
//! published and the delivery acknowledged only after that. A worker killed at any
//! point leaves either nothing, or objects that a redelivery overwrites with identical
//! bytes.
//!
//! A worker trusts no task: it checks every field against hard bounds
//! ([`covmerge_proto::wire::Task::validate`]) and the task against the job the
//! coordinator stored (`jobs/<job>/job.json`: a split may only read one of the job's
//! inputs, a merge only use the job's source and base commit). A task whose marker
//! already exists is not redone: its report is sent again from the marker (the first
//! report may have been lost). A report that cannot be published hands the task back
//! instead of acknowledging it, so the redelivery reports it.
//!
//! - [`budget`]: how `--memory-budget` is held: each task's share reserved.
//! - [`config`]: a worker process's configuration, made once per mode.
//! - [`executor`]: admitting a task, running a split or a merge, writing its outputs.
//! - [`failure`]: every error of a task classified once into a typed `Failure`.
//! - `partial_task`: a merge's share of the job's partial (`--partial-out`), stored.
//! - [`cancel`]: how a handed-back task's thread stops reading and waiting.
//! - [`serve`]: the loop over deliveries: report, acknowledge, retry with backoff.

mod admit;
pub mod budget;
mod cancel;
pub mod config;
mod direct_partial;
pub mod executor;
pub mod failure;
mod partial_task;
mod prefetch;
mod rollup_partials;
mod rollup_task;
pub mod serve;
mod source_cache;
mod spill_writer;

pub use config::FleetWorker;
/// The store layout lives in `covmerge_proto::layout`; re-exported for callers that
/// knew it here.
pub use covmerge_proto::layout as keys;
pub use covmerge_telemetry::Progress;
pub use executor::{new_worker_id, Executor, WorkerConfig, DEFAULT_MAX_CONFIG_FAILURES};
pub use failure::{store_failure, TaskError};
pub use serve::{
    config_backoff, retry_backoff, run_worker, WorkerExit, MAX_HAND_BACKS, REFUSING_WORKERS,
};
