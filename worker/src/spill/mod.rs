//! Rows travel from the split phase to the merge phase as *spill chunks*: immutable
//! byte strings made of self-contained blocks. A block has its own string table, so
//! chunks written by different splitters can be read in any order and concatenated.
//!
//! ```text
//! block   := "CMS2" u32le(body_len) body
//! body    := varint(n_strings) { varint(len) bytes }*
//!            varint(flags) varint(n_rows) { run }*     (runs until n_rows rows)
//! run     := varint(file) varint(commit) varint(n >= 1) { row }*n
//! row     := varint(func) varint(manager) varint(sl) varint(hits) [varint(rows)]
//! ```
//!
//! Strings are indices into the block's table. A block's rows come in runs of one
//! (file, commit) each, which the run names once. `rows` is how many input rows were
//! pre-aggregated into the entry (identical file, commit, func, manager and line), so
//! the merge can still count lost rows and pick function names by row frequency; it
//! is left out, and is 1, when `flags` has [`ONE_ROW_EACH`] (a block written
//! unaggregated).

pub(crate) const MAGIC: &[u8; 4] = b"CMS2";

/// Block flag: every entry is one input row (`rows` is not written).
pub(crate) const ONE_ROW_EACH: u64 = 1;

/// A spill chunk that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("corrupt spill block at byte {offset}: {what}")]
pub struct SpillError {
    /// Byte offset of the problem in the chunk.
    pub offset: usize,
    /// What was found.
    pub what: &'static str,
}

/// Key of a pre-aggregated entry: indices into the block's string table, and the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct RawKey {
    /// The row's `file_path`, as its index in the block's string table.
    pub(crate) file: u32,
    /// The row's `kernel_commit`, as its index in the block's string table.
    pub(crate) commit: u32,
    /// The row's `func_name`, as its index in the block's string table.
    pub(crate) func: u32,
    /// The row's `manager`, as its index in the block's string table.
    pub(crate) manager: u32,
    /// The row's `sl`, a line of the file at that commit.
    pub(crate) sl: u32,
}

/// Sums for one key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RawVal {
    /// Hits summed over the rows.
    pub(crate) hits: u64,
    /// Rows summed (1 for a single row).
    pub(crate) rows: u64,
}

mod decode;
mod encode;
mod strings;

pub(crate) use decode::{for_each_block, Block};
pub(crate) use encode::EntryTable;
pub(crate) use strings::{hash_bytes, same_bytes, StringIndex, StringTable};

#[cfg(test)]
mod tests;
