//! The merge of one shard (contract §3): aggregate its spilled rows, project every
//! (file, commit) group onto the base through a line diff, sum hits overall and per
//! manager, pick function names, and encode the part.

mod acc;
mod groups;
pub mod part;
mod passes;
mod runs;
mod shard;
mod sums;

pub use covmerge_source::project::{
    line_map, line_map_lines, LineMap, ProjectionCache, MAX_DIFF_CELLS,
};
pub use shard::{merge_shard, merge_shard_with_prefix, HeldBudget, MergeError, MergedPart};

#[cfg(test)]
mod tests;
