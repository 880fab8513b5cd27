//! What a merge task says of its shard's files of the job's partial (`--partial-out`):
//! part of its [`crate::wire::MergeOutcome`].

use serde::{Deserialize, Serialize};

/// One shard's files of a job's partial (contract §10), as a merge task wrote them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialShardOutcome {
    /// The `lines`, `funcs`, `versions` and `paths` files, in that order.
    pub files: Vec<PartialFile>,
    /// Input rows the shard's tables stand for (bad rows are not a shard's).
    pub rows_in: u64,
    /// Rows without line.
    pub rows_without_line: u64,
    /// Rows with a line but no version.
    pub rows_without_version: u64,
    /// Their hits.
    pub hits_without_version: u64,
}

/// One file of a shard's partial.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialFile {
    /// Its name in the partial (`lines-00003.parquet`).
    pub name: String,
    /// Table rows.
    pub rows: u64,
    /// Bytes.
    pub bytes: u64,
    /// SHA-256 (hex).
    pub sha256: String,
}
