//! Every error of a task, classified once into a typed [`Failure`] whose kind travels
//! in the report: retried (`Outage`, `Transient`) or not (bad input, a refused task,
//! the configuration, a bug).

use covmerge_proto::wire::{Failure, FailureKind};

use crate::merge::MergeError;
use crate::source::SourceError;
use crate::split::SplitError;

/// A task failure, classified once where it happens ([`FailureKind`]); the same value
/// travels in the report.
pub type TaskError = Failure;

/// A store error: transient ones (still failing after the store's own retry budget)
/// are outages; the others (access denied, an object missing) are the configuration's.
pub fn store_failure(e: covmerge_storage::StoreError) -> Failure {
    if e.is_transient() {
        Failure::outage(e)
    } else {
        Failure::config(e)
    }
}

/// Only a failed chunk write can succeed on retry; bad input stays bad.
impl From<SplitError> for Failure {
    fn from(e: SplitError) -> Self {
        let kind = match &e {
            SplitError::Emit {
                transient: true, ..
            } => FailureKind::Outage,
            SplitError::Emit { .. } => FailureKind::Config,
            SplitError::Input(_) | SplitError::Read(_) => FailureKind::BadInput,
        };
        Failure::new(kind, e.to_string())
    }
}

impl From<MergeError> for Failure {
    fn from(e: MergeError) -> Self {
        let kind = match &e {
            MergeError::Fetch {
                transient: true, ..
            } => FailureKind::Outage,
            MergeError::Fetch { .. } => FailureKind::Config,
            MergeError::Source(SourceError::Io { .. }) => FailureKind::Transient,
            // The same bytes come back on every try.
            MergeError::Source(SourceError::Corrupt { .. }) => FailureKind::BadInput,
            MergeError::Source(
                SourceError::Spec { .. }
                | SourceError::NoCommit { .. }
                | SourceError::TooLarge { .. },
            ) => FailureKind::Config,
            // A chunk this job's splits wrote that no longer decodes, or a part that
            // cannot be encoded: not the input's fault, and not curable by a retry.
            MergeError::Spill { .. } | MergeError::Encode(_) => FailureKind::Internal,
            // This worker's temporary files (its disk full): another try, perhaps on
            // another worker, may have room.
            MergeError::Scratch(_) => FailureKind::Transient,
            MergeError::SumOverflow { .. } => FailureKind::BadInput,
            // The same input and flags fail the same way on every worker.
            MergeError::ManagerNames { .. } => FailureKind::BadInput,
            MergeError::GroupIsManager { .. } => FailureKind::Config,
            MergeError::Partial {
                transient: true, ..
            } => FailureKind::Transient,
            MergeError::Partial { .. } => FailureKind::Internal,
        };
        // A full (or read-only) local disk says so, and what to do.
        let advice = match &e {
            MergeError::Scratch(io) | MergeError::Encode(io) => covmerge_storage::disk_advice(io),
            _ => None,
        };
        match advice {
            Some(a) => Failure::new(kind, format!("{e}: {a}")),
            None => Failure::new(kind, e.to_string()),
        }
    }
}
