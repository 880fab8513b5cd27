//! `covmerge-coordinator` runs a job: it plans the splits and shards, publishes tasks,
//! tracks every task through its states until each is done or failed, assembles the
//! result from the parts (header first, parts in shard order, one atomic write) once
//! the publish gate ([`gate`]) has read every part back and checked it, writes
//! the manifest and notifies the dashboard.
//!
//! It never reads a row or a source file: that is the workers' job, and it shares only
//! `covmerge-proto` (ids, wire messages, the store layout) with the worker crate, which
//! it does not depend on. Embedded mode (the binary's `embedded` module) runs this same
//! coordinator with workers in the same process over an in-process queue and a
//! temporary local store.

/// syzkaller dashboard notification (contract §8).
pub mod dashboard;
/// Assembling the result and the manifest.
pub mod finish;
/// The publish gate: a result read back and checked before it is published.
pub mod gate;
/// Running a job over a queue and a store.
pub mod job;
/// One coordinator per job: the lease object and its heartbeat.
pub mod lease;
/// Planning: inputs, shard count, the job spec.
pub mod plan;
/// The terminal progress display.
pub mod progress;
/// Task states and their transitions.
pub mod state;
/// `covmerge status`: a job's progress, read from the store.
pub mod status;
/// One phase's tasks, tracked until each is final.
mod tracker;

pub use job::{
    check_apart, check_apart_as, check_outputs_apart, is_stream, missing_dirs, partial_store,
    preflight_partial_out, publish_local_partial, run_job, JobError, JobOptions, JobOutcome,
    ResumeCheck, Start,
};
pub use plan::{plan_job, JobRequest};
