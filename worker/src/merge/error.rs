//! Why a shard could not be merged ([`MergeError`]).

use crate::source::SourceError;
use crate::spill;

/// Why a shard could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A spill chunk that does not decode.
    #[error("spill chunk {chunk}: {source}")]
    Spill {
        /// The chunk (its object and byte range).
        chunk: String,
        /// What is wrong with it.
        #[source]
        source: spill::SpillError,
    },
    /// A spill chunk could not be read from the store.
    #[error("fetching spill chunk {chunk}: {message}")]
    Fetch {
        /// The chunk (its object and byte range).
        chunk: String,
        /// The store's error.
        message: String,
        /// Whether another try may read it (an outage, not a refusal).
        transient: bool,
    },
    /// The source could not give a file version.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Writing the part failed.
    #[error("encoding the part: {0}")]
    Encode(#[from] std::io::Error),
    /// The temporary file of a file's per-manager sums (spilled past the tables'
    /// share) could not be created, written or read.
    #[error("the temporary file of a file's per-manager sums: {0}")]
    Scratch(std::io::Error),
    /// contract §6: the dashboard decodes `HitCounts` as Go's `[]int64`.
    #[error("{file} line {line}: the hits summed onto this line ({sum}) overflow Go's int64 (the dashboard's HitCounts); no result is written")]
    SumOverflow {
        /// The file, as a repository path.
        file: String,
        /// The base line, counting from 1.
        line: u32,
        /// The sum, in decimal.
        sum: String,
    },
    /// One file's distinct managers whose names would take the merge past its cap
    /// (a file merged alone holds them all at once).
    #[error("{file}: {managers} distinct managers whose names take {bytes} bytes in the merge's tables, over the {cap} bytes one file's manager names may take (twice the merge's share of --memory-budget, at least 64 MiB); no result is written: raise --memory-budget")]
    ManagerNames {
        /// The file, as a repository path.
        file: String,
        /// Its distinct managers so far.
        managers: u64,
        /// What their names and entries take, in bytes.
        bytes: u64,
        /// The cap, in bytes.
        cap: u64,
    },
    /// Building the shard's partial beside the merge (`--partial-out`) failed.
    #[error("{message}")]
    Partial {
        /// What failed, naming the chunk or the file.
        message: String,
        /// Whether another try may succeed (this worker's temporary files).
        transient: bool,
    },
    /// A group's records would be taken for the manager's (contract §4). The split
    /// makes such rows bad rows, so only a spill of another build holds them.
    #[error("--group {group}={glob}: {group:?} is also a manager of the input; a group's NAME must not be a manager's")]
    GroupIsManager {
        /// The group's NAME, also a manager's.
        group: String,
        /// The group's GLOB.
        glob: String,
    },
}
