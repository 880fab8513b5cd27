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
pub use crate::split::{split_input, Flush, SplitError, SplitSettings};
pub use covmerge_source::project::{line_map_lines, ProjectionCache};
