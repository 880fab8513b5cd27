//! `covmerge report` and `covmerge diff`: looking at a merge result without syzbot's
//! dashboard.
//!
//! - [`budget`] is the memory budget (`--memory-budget`) and its shares.
//! - [`read`] streams a result (contract §4) file by file, checking every record.
//! - [`tree`] sums each file's instrumented and covered lines (overall and per manager)
//!   into the directories above it.
//! - [`groups`] tells group records from managers' (by the job's manifest) and finds
//!   the lines only one manager covered.
//! - [`diff`] compares two results on the same base commit line by line: lines gained,
//!   lost, and instrumentation changes, as JSON lines.
//! - [`site`] writes a static HTML report (maud pages, embedded script and style, data
//!   loaded per directory and per group of files as script files so it works from
//!   `file://` and from a bucket), optionally marking what changed against an older
//!   result.

pub mod budget;
pub mod diff;
pub mod groups;
pub mod read;
pub mod site;
#[cfg(test)]
mod test_results;
pub mod tree;

pub use site::{generate, Options, Stats};
