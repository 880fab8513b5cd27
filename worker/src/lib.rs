//! `covmerge-worker` does the work of a covmerge job: it reads and splits input
//! (map phase), merges shards (reduce phase) and writes parts. It holds no job state:
//! everything it needs arrives in a task, everything it produces goes to the store, so
//! a worker may vanish at any moment and another redoes its task with identical bytes.
//!
//! It never plans a job, tracks shards or publishes results: that is the coordinator.

/// Input (the `covmerge-input` crate): local files and store objects, gzip, CSV rows.
pub use covmerge_input as input;
/// Reduce phase: aggregate, project through line diffs, sum, encode a part.
mod merge;
/// A merge task's share of the job's partial (`--partial-out`, contract §10).
mod partial;
/// Running tasks: the task executor and the worker loop over a queue.
pub mod run;
/// File versions (the `covmerge-source` crate): `dir:`, `git:` and `store:`
/// providers, their cache, line maps.
pub use covmerge_source as source;
/// The binary spill format between the phases: interned, pre-aggregated row blocks.
mod spill;
/// Map phase: partition rows by file hash into spill chunks.
mod split;
pub mod stages;
/// Task threads: splits and merges off tokio's blocking pool.
mod thread;

pub use run::{run_worker, Executor, TaskError, WorkerConfig};
