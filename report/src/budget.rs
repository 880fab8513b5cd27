//! The memory budget of `report` and `diff` (`--memory-budget BYTES`, default 256 MiB)
//! and its shares: the longest result record line, the records of one file, the files
//! in flight to the page writers, the directory tree's sums, a source text shown on a
//! page, and the older result of a diff. Each structure that grows with the input is
//! held within its share; past it the structure spills (the tree's file rows go to a
//! temporary file) or, where no bounded way exists, the input is refused naming the
//! dimension and the flag.

pub use covmerge_input::budget::{mib, parse, Budget, DEFAULT, MIN};

/// The shares of a [`Budget`] that concern source texts (they need `covmerge-source`,
/// which the reader's crate does not use).
pub trait SourceShares {
    /// A line diff across bases: both texts of a file and the diff's lines (a quarter,
    /// [`covmerge_source::project::diff_limit`]); a pair over it is mapped by its
    /// common prefix and suffix only, and said so (`"text":"capped"`).
    fn line_diff(self) -> u64;
    /// The largest source file read: the largest text shown ([`Budget::text`], a
    /// quarter; `report` holds one text at a time per page writer, a diff across bases
    /// two, and caps their diff), at most [`covmerge_source::MAX_SOURCE_FILE_BYTES`]; a
    /// larger one is refused naming it, its size and the flag.
    fn source_file(self) -> u64;
    /// Opens `--source` `spec` reading files up to [`SourceShares::source_file`].
    fn open_source(
        self,
        spec: &str,
    ) -> Result<std::sync::Arc<dyn covmerge_source::Source>, covmerge_source::SourceError>;
}

impl SourceShares for Budget {
    fn line_diff(self) -> u64 {
        covmerge_source::project::diff_limit(self.0)
    }

    fn source_file(self) -> u64 {
        self.text().min(covmerge_source::MAX_SOURCE_FILE_BYTES)
    }

    fn open_source(
        self,
        spec: &str,
    ) -> Result<std::sync::Arc<dyn covmerge_source::Source>, covmerge_source::SourceError> {
        covmerge_source::open_source_within(
            spec,
            covmerge_source::DEFAULT_INDEX_BYTES,
            self.source_file(),
        )
    }
}
