//! The memory budget of `report` and `diff` (`--memory-budget BYTES`, default 256 MiB):
//! the memory plan's reader budget ([`Budget`], `covmerge_proto::memory::ReadBudget`),
//! whose shares bound the longest result record line, the records of one file, the
//! files in flight to the page writers, the directory tree's sums, a source text shown
//! on a page, a line diff across bases and the older result of a diff. Each structure
//! that grows with the input is held within its share; past it the structure spills
//! (the tree's file rows go to a temporary file) or, where no bounded way exists, the
//! input is refused naming the dimension and the flag.

pub use covmerge_input::budget::{mib, parse, Budget, DEFAULT, MIN};

/// Opens `--source` `spec` reading files up to the budget's
/// [`Budget::source_file`].
pub fn open_source(
    budget: Budget,
    spec: &str,
) -> Result<std::sync::Arc<dyn covmerge_source::Source>, covmerge_source::SourceError> {
    covmerge_source::open_source_within(
        spec,
        covmerge_source::DEFAULT_INDEX_BYTES,
        budget.source_file(),
    )
}
