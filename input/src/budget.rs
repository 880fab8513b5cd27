//! The memory budget of reading a result (`report`, `diff`, the publish gate)
//! (`--memory-budget BYTES`, default 256 MiB): the memory plan's [`ReadBudget`] (in
//! `covmerge_proto::memory::plan`), which divides it into the longest result record
//! line, the records of one file and the other shares of a reader. Named here
//! [`Budget`], as the result reader takes it.

pub use covmerge_proto::memory::ReadBudget;
use covmerge_proto::memory::{format_bytes, parse_budget, MIN_BUDGET};

/// The memory budget of a reader, divided by the plan ([`ReadBudget`]).
pub use covmerge_proto::memory::ReadBudget as Budget;

/// The default budget of `report` and `diff`.
pub const DEFAULT: u64 = covmerge_proto::memory::DEFAULT_READ_BUDGET;

/// The smallest budget accepted: below it the shares are smaller than a kernel file.
pub const MIN: u64 = MIN_BUDGET;

/// `n` bytes for people (`64 MiB`, `1.5 GiB`), as proto's [`format_bytes`].
pub fn mib(n: u64) -> String {
    format_bytes(n)
}

/// Parses `BYTES` with proto's `--memory-budget` parser (shared with `merge` and
/// `worker`): a number with an optional unit, `K`/`KiB`, `M`/`MiB`, `G`/`GiB` (powers
/// of 1024) or `KB`, `MB`, `GB` (powers of 1000); at least [`MIN`].
pub fn parse(s: &str) -> Result<Budget, String> {
    parse_budget(s).map(ReadBudget)
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
        assert_eq!(Budget::default(), Budget(DEFAULT));
    }
}
