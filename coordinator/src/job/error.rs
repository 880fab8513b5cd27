//! Why a job did not produce its result.

use covmerge_proto::manifest::FailedTask;
use covmerge_queue::QueueError;
use covmerge_storage::StoreError;

/// Why a job did not produce its result.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The job cannot be planned from what it was given (an input, a flag, the source).
    #[error("{0}")]
    Plan(String),
    /// A queue operation failed (past the broker outage budget, or refused).
    #[error("queue: {0}")]
    Queue(#[from] QueueError),
    /// A store operation failed (past the store outage budget, or refused).
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// Tasks failed for good: no result is published.
    #[error("job {job}: {} task(s) failed, no result published:\n{}", failed.len(), failed.iter().map(|f| format!("  {}: {}", f.task, f.error)).collect::<Vec<_>>().join("\n"))]
    TasksFailed {
        /// The job's id.
        job: String,
        /// Each failed task with its error.
        failed: Vec<FailedTask>,
    },
    /// More bad rows than `--max-bad-rows` allows.
    #[error("{first} ({count} bad row(s) in all; --max-bad-rows {max}); no result published")]
    TooManyBadRows {
        /// The first bad row: its input, line and problem.
        first: String,
        /// Bad rows in all.
        count: u64,
        /// `--max-bad-rows`.
        max: u64,
    },
    /// Inputs with a `namespace` column had rows, none of `--namespace`'s.
    #[error("--namespace {namespace:?} names no row of the inputs with a `namespace` column; their rows are of {seen} (names match exactly: case and spaces count); no result published")]
    NoRowOfNamespace {
        /// `--namespace`.
        namespace: String,
        /// The namespaces seen, with their rows.
        seen: String,
    },
    /// The result could not be written.
    #[error("writing the result {dest}: {message}")]
    Output {
        /// Where it was to go.
        dest: String,
        /// What failed.
        message: String,
    },
    /// The manifest could not be written.
    #[error("writing the manifest {dest}: {message}")]
    Manifest {
        /// Where it was to go.
        dest: String,
        /// What failed.
        message: String,
    },
    /// The result is in place, complete; what failed came after it (the manifest).
    #[error("{error}\nthe result was published, complete, at {result}; only the manifest above is missing or stale")]
    AfterPublish {
        /// The error after publishing.
        error: Box<JobError>,
        /// Where the complete result is.
        result: String,
    },
    /// The publish gate refused the result: an invariant of the contract is broken.
    #[error("job {job}: {refused}")]
    Gate {
        /// The job's id.
        job: String,
        /// The invariant, where and what.
        refused: Box<crate::gate::Refused>,
    },
    /// A check before any work refused the job (contract §6).
    #[error("{0}; nothing was read or written")]
    Preflight(String),
    /// The same check, made again once the job's work was done, refused it before
    /// anything was published.
    #[error("{0}; nothing was published")]
    NotPublished(String),
    /// The merges' sources do not hold the same base: one worker's `--source` lacks
    /// (or has other) files of it, which its shards would count as deleted.
    #[error("{0}")]
    SourcesDiffer(String),
    /// A new job's id is taken: its `job.json` (or other objects) is in the store.
    #[error("{0}")]
    Exists(String),
    /// `--resume` with a stored spec that is refused or differs from the command line.
    #[error("{0}")]
    Resume(String),
    /// The partial published to `--partial-out` was written over while it was written
    /// (another writer of the same location at once): not reported as written.
    #[error("{0}")]
    PartialOverwritten(String),
    /// Another coordinator holds the job's lease.
    #[error("{0}")]
    Busy(String),
    /// This coordinator's lease was taken over: it stopped without publishing.
    #[error("{0}")]
    LeaseLost(String),
    /// The dashboard call failed; the result is kept.
    #[error("dashboard: {message}\nthe result stays at {kept}; send it again without merging with:\n  {resend}")]
    Dashboard {
        /// The dashboard's (or the upload's) error.
        message: String,
        /// Where the result is.
        kept: String,
        /// The `covmerge notify` command that re-sends it.
        resend: String,
    },
}
