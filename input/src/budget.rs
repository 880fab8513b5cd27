//! The memory budget of reading a result (`report`, `diff`, the publish gate) (`--memory-budget BYTES`, default 256 MiB)
//! and its shares: the longest result record line, the records of one file, the files
//! in flight to the page writers, the directory tree's sums, a source text shown on a
//! page, and the older result of a diff. Each structure that grows with the input is
//! held within its share; past it the structure spills (the tree's file rows go to a
//! temporary file) or, where no bounded way exists, the input is refused naming the
//! dimension and the flag.

use std::fmt;

use covmerge_proto::memory::{format_bytes, parse_budget, MIN_BUDGET};

/// The default budget of `report` and `diff`.
pub const DEFAULT: u64 = 256 << 20;

/// The smallest budget accepted: below it the shares are smaller than a kernel file.
pub const MIN: u64 = MIN_BUDGET;

/// A memory budget in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget(pub u64);

impl Default for Budget {
    fn default() -> Self {
        Budget(DEFAULT)
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", mib(self.0))
    }
}

/// `n` bytes for people (`64 MiB`, `1.5 GiB`), as proto's [`format_bytes`].
pub fn mib(n: u64) -> String {
    format_bytes(n)
}

impl Budget {
    /// The longest record line read (a quarter: the line, its parsed arrays and the
    /// file's script fit beside the rest; 64 MiB at the default).
    pub fn line_cap(self) -> usize {
        (self.0 / 4) as usize
    }

    /// The parsed records of one file (its managers' lines and hits, its functions).
    pub fn file_cap(self) -> u64 {
        self.0 / 4
    }

    /// Files read but not yet written by the page writers.
    pub fn in_flight(self) -> u64 {
        self.0 / 4
    }

    /// The directory tree: its directories and their per-manager sums (file rows
    /// spill to disk).
    pub fn tree(self) -> u64 {
        self.0 / 4
    }

    /// The largest source text shown on a file page (larger ones: numbers without text).
    pub fn text(self) -> u64 {
        self.0 / 4
    }

    /// The older result of a diff (its `*` lines of every file).
    pub fn old_side(self) -> u64 {
        self.0 / 2
    }
}

/// Parses `BYTES` with proto's `--memory-budget` parser (shared with `merge` and
/// `worker`): a number with an optional unit, `K`/`KiB`, `M`/`MiB`, `G`/`GiB` (powers
/// of 1024) or `KB`, `MB`, `GB` (powers of 1000); at least [`MIN`].
pub fn parse(s: &str) -> Result<Budget, String> {
    parse_budget(s).map(Budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_with_units() {
        assert_eq!(parse("256MiB"), Ok(Budget(256 << 20)));
        assert_eq!(parse("1GiB"), Ok(Budget(1 << 30)));
        assert_eq!(parse("1g"), Ok(Budget(1 << 30)));
        assert_eq!(parse("64 MB"), Ok(Budget(64_000_000)));
        assert_eq!(parse("33554432"), Ok(Budget(32 << 20)));
        assert!(parse("1MiB")
            .unwrap_err()
            .contains("smallest memory budget, 16 MiB"));
        assert!(parse("12 parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse("lots").unwrap_err().contains("no number"));
        assert!(parse("99999999999TiB").unwrap_err().contains("too large"));
        assert_eq!(Budget::default().line_cap(), 64 << 20);
        assert_eq!(Budget::default().to_string(), "256 MiB");
    }
}
