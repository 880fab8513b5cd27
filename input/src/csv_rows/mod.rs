//! CSV rows of contract §2: columns found by header name, each row's fields checked against
//! the bad-input rules of contract §6, the first bad rows kept with their line numbers.
//!
//! The csv crate's reader ([`RowReader`], any input) is in `reader`; the fast path
//! for pieces without quotes ([`for_each_unquoted_record`]) in `unquoted`; the checks
//! of a row's fields in `check`; the problems a bad row is reported with in `problem`;
//! an input that cannot be read at all in `error`.

mod check;
mod error;
mod problem;
mod reader;
mod unquoted;

pub use check::{parse_count_fast, valid_file_path, valid_name};
pub use error::InputError;
pub use problem::RowProblem;
pub use reader::{Header, RowReader};
pub use unquoted::{for_each_unquoted, for_each_unquoted_record, Fields};

#[cfg(test)]
use unquoted::{delimiter_mask, delimiter_mask_words, delimiter_masks};

/// The required columns of contract §2, in the order of [`Columns`]' fields.
pub(crate) const REQUIRED: [&str; 7] = [
    "kernel_repo",
    "kernel_commit",
    "file_path",
    "func_name",
    "manager",
    "sl",
    "hit_count",
];

/// The optional column naming a row's namespace (contract §2).
pub const NAMESPACE: &str = "namespace";

/// The cap on one row: its fields and the commas between them, as parsed (contract §6).
/// A longer row is a bad row; one whose raw text runs past 4× this is skipped unread,
/// so no row, however long, is ever held in memory whole.
pub const MAX_ROW: usize = 1 << 20;

/// Positions of the required columns in this input.
#[derive(Debug, Clone, Copy)]
pub struct Columns {
    /// Field index of `kernel_repo`.
    pub repo: usize,
    /// Field index of `kernel_commit`.
    pub commit: usize,
    /// Field index of `file_path`.
    pub file: usize,
    /// Field index of `func_name`.
    pub func: usize,
    /// Field index of `manager`.
    pub manager: usize,
    /// Field index of `sl`.
    pub sl: usize,
    /// Field index of `hit_count`.
    pub hits: usize,
    /// Field index of the optional `namespace` column (syzkaller's shared table).
    pub namespace: Option<usize>,
}

/// One valid row, borrowing the reader's buffer.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    /// `kernel_repo`.
    pub repo: &'a [u8],
    /// `kernel_commit`: the build the row was recorded on.
    pub commit: &'a [u8],
    /// `file_path`, checked canonical.
    pub file: &'a [u8],
    /// `func_name` (may be empty).
    pub func: &'a [u8],
    /// `manager`.
    pub manager: &'a [u8],
    /// 0 means "no line information" (contract §2).
    pub sl: u32,
    /// `hit_count`.
    pub hits: u64,
}

/// A job's `--group`s, shared by the readers of its inputs.
pub type Groups = std::sync::Arc<Vec<covmerge_proto::group::Group>>;

/// Where a record starts. `line` is csv's count, which does not count blank lines;
/// `byte` is exact, so a caller holding the text can recount the line (done for bad
/// rows, which are rare).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    /// The record's first line, counting from 1 (blank lines not counted).
    pub line: u64,
    /// Offset in this reader's input.
    pub byte: u64,
}

#[cfg(test)]
mod tests;
