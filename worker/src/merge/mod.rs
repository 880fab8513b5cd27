//! The merge of one shard (SPEC §3): aggregate its spilled rows, project every
//! (file, commit) group onto the base through a line diff, sum hits overall and per
//! manager, pick function names, and encode the part.

mod project;
mod shard;
mod sums;

pub use project::{line_map, line_map_lines, LineMap, ProjectionCache, MAX_DIFF_CELLS};
pub use shard::{merge_shard, merge_shard_with_prefix, MergeError, MergedPart};
