//! The life of a task (a split or a shard) as the coordinator sees it:
//!
//! ```text
//!            publish            report: done
//! Pending ───────────▶ Published ───────────▶ Done
//!    │                     │
//!    │ marker found        │ report: failed / dead letter
//!    ▼ (resume)            ▼
//!  Done                  Failed
//! ```
//!
//! `Done` and `Failed` are final for this run: a duplicate report for a finished task
//! is ignored (duplicates are expected with at-least-once delivery), and a late
//! success after a dead letter does not revive the task — `--resume` does.

use covmerge_proto::wire::{MergeOutcome, SplitOutcome};

/// What a finished task produced.
#[derive(Debug, Clone)]
pub enum Output {
    /// A split's chunks and counts.
    Split(SplitOutcome),
    /// A merge's part (boxed: it lists its files' base line counts).
    Merge(Box<MergeOutcome>),
}

/// Where one task stands in its job.
#[derive(Debug, Clone)]
pub enum TaskState {
    /// Known, not yet published.
    Pending,
    /// Published to the task queue, not yet settled.
    Published,
    /// Finished: what it produced.
    Done {
        /// What it produced.
        output: Output,
        /// Executions it took (1 = first try).
        attempts: u32,
    },
    /// Failed for good.
    Failed {
        /// Why, naming the input, line or object.
        error: String,
    },
}

impl TaskState {
    /// `Pending → Published`.
    pub fn publish(&mut self) {
        if matches!(self, TaskState::Pending) {
            *self = TaskState::Published;
        }
    }

    /// `Pending | Published → Done`; returns false if the task was already final.
    pub fn complete(&mut self, output: Output, attempts: u32) -> bool {
        match self {
            TaskState::Pending | TaskState::Published => {
                *self = TaskState::Done { output, attempts };
                true
            }
            _ => false,
        }
    }

    /// `Pending | Published → Failed`; returns false if the task was already final.
    pub fn fail(&mut self, error: String) -> bool {
        match self {
            TaskState::Pending | TaskState::Published => {
                *self = TaskState::Failed { error };
                true
            }
            _ => false,
        }
    }

    /// Whether the task is done or failed (no further change).
    pub fn is_final(&self) -> bool {
        matches!(self, TaskState::Done { .. } | TaskState::Failed { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions() {
        let mut s = TaskState::Pending;
        s.publish();
        assert!(matches!(s, TaskState::Published));
        assert!(s.complete(Output::Split(SplitOutcome::default()), 2));
        assert!(!s.fail("late".into()), "done is final");
        assert!(matches!(s, TaskState::Done { attempts: 2, .. }));
        let mut f = TaskState::Published;
        assert!(f.fail("boom".into()));
        assert!(
            !f.complete(Output::Split(SplitOutcome::default()), 1),
            "failed is final"
        );
        assert!(f.is_final());
    }
}
