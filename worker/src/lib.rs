//! `covmerge-worker` does the work of a covmerge job: it reads and splits input
//! (map phase), merges shards (reduce phase) and writes parts. It holds no job state:
//! everything it needs arrives in a task, everything it produces goes to the store, so
//! a worker may vanish at any moment and another redoes its task with identical bytes.
//!
//! It never plans a job, tracks shards or publishes results: that is the coordinator.

/// Input: local files and store objects, gzip, CSV rows by header name.
pub mod input;
/// Reduce phase: aggregate, project through line diffs, sum, encode a part.
pub mod merge;
/// Running tasks: the task executor and the worker loop over a queue.
pub mod run;
/// File versions: `dir:`, `git:` and `store:` providers, and their cache.
pub mod source;
/// Map phase: partition rows by file hash into spill chunks.
pub mod split;
/// Task threads: splits and merges off tokio's blocking pool.
pub mod thread;

pub use run::{run_worker, Executor, TaskError, WorkerConfig};
