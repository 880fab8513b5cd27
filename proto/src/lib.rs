//! `covmerge-proto` is what the coordinator and the workers share, and nothing else:
//! typed ids, the wire messages that travel over the queue (with their protocol
//! version), the stable file → shard hash, the syzkaller output records and the manifest.
//! (The spill format that carries rows from the split phase to the merge phase is
//! the worker's own: both phases run there.)
//!
//! It owns no I/O, no threads and no runtime: it must stay small and boring so that
//! both sides can depend on it without depending on each other. The one shared policy
//! it holds is how long to wait before retrying ([`retry`]), as plain data.

/// Calendar dates (UTC) from Unix time, without a date crate.
pub mod date;
/// Partials read by merge tasks directly.
pub mod direct;
/// `--group NAME=GLOB`: records summing the managers a glob matches.
pub mod group;
/// Typed ids: jobs, shards, splits, attempts.
pub mod ids;
/// How inputs are read: their format and how they become rows.
pub mod input;
/// The job description every task carries.
pub mod job;
/// The store keys of a job's objects (spec, spill chunks, markers, parts, result).
pub mod layout;
/// Hard bounds on shards, task loops and other sizes.
pub mod limits;
/// The manifest of contract §7 and the counters it totals.
pub mod manifest;
/// One memory budget per process, shared by named reservations; `--memory-budget`'s
/// value parsed.
pub mod memory;
/// syzkaller's `coveragedb` JSON lines (contract §4), written without intermediate trees.
pub mod output;
mod partial_shard;
/// The one rule for a file path: canonical, relative, one name per file.
pub mod path;
/// Credentials removed from any URL before it reaches a log or an error.
pub mod redact;
/// The one retry policy (exponential backoff with jitter, on backon).
pub mod retry;
/// The stable hash that assigns a file path to a shard.
pub mod shard_hash;
/// Wire messages (MessagePack) with protocol version and size cap.
pub mod wire;

pub use ids::{Attempt, JobId, ShardId, SplitId, TaskRef};
pub use job::JobSpec;
pub use manifest::{Counts, Manifest, PartialWritten, ShardEntry};
