//! The pipeline's two stages, each callable alone on bytes in memory, outside a
//! task, a queue or a store: what the benchmarks (`benches/stages.rs`) measure. A
//! job runs them through [`crate::run`]; nothing else should need them.
//!
//! - Map: [`split_input`] partitions CSV rows into spill chunks, [`Flush`] by
//!   [`Flush`], as [`SplitSettings`] say.
//! - Reduce: [`merge_shard`] merges one shard's chunks into a [`MergedPart`],
//!   projecting lines onto the base through a [`ProjectionCache`].

pub use crate::merge::part::PartBytes;
pub use crate::merge::{merge_shard, MergeError, MergedPart};
pub use crate::spill::SpillError;
pub use crate::split::inputs::split_one_input;
pub use crate::split::route::{NamespaceCheck, Routed, Router};
pub use crate::split::Namespaces;
pub use crate::split::{split_input, Flush, SplitError, SplitSettings};
pub use covmerge_source::project::{line_map_lines, ProjectionCache};

/// Writes shard `shard` of `shards` of a partial (contract §10) from that shard's
/// spill chunks, each row's version found in `source`: the four files a merge task of
/// `merge --partial-out` writes for that shard from the same chunks. Holds about
/// `limit` bytes of sums before it spills sorted runs under `scratch`; the files go
/// to `out` (new or empty).
pub fn partial_of_shard<I>(
    chunks: I,
    source: &dyn crate::source::Source,
    (shard, shards): (u32, u32),
    limit: usize,
    scratch: &std::path::Path,
    out: &std::path::Path,
) -> Result<covmerge_partial::ShardPartial, covmerge_proto::wire::Failure>
where
    I: Iterator<Item = Result<(String, bytes::Bytes), MergeError>>,
{
    let spec = crate::partial::PartialShardSpec {
        shard,
        shards,
        limit,
        finish_budget: limit,
        scratch,
    };
    crate::partial::partial_shard(chunks, source, &spec, out).map_err(Into::into)
}
