//! The merge of one shard (contract §3): aggregate its spilled rows, project every
//! (file, commit) group onto the base through a line diff, sum hits overall and per
//! manager, pick function names, and encode the part.
//!
//! - `shard.rs`: the merge of a shard, pass after pass, into one part.
//! - `passes.rs`: the ranges of paths a shard is merged in when its tables outgrow
//!   their share of the budget.
//! - `pass/`: one pass over the chunks: blocks read, entries projected and added.
//! - `held.rs`: base texts and line maps held between uses, within a budget.
//! - `acc.rs`: what one file accumulates; `sums.rs`: its per-manager sums, spilled
//!   as sorted runs (`runs.rs`) past their share; `hits.rs`: how a sum adds hits.
//! - `write.rs`: a pass's files written as records; `names.rs`: each line's best
//!   function name; `groups.rs`: the sums of `--group`s; `part.rs`: the part's
//!   bytes.
//! - `error.rs`: why a merge fails.

mod acc;
mod error;
mod groups;
mod held;
mod hits;
mod names;
pub(crate) mod part;
mod pass;
mod passes;
mod runs;
mod shard;
mod sums;
mod write;

pub(crate) use covmerge_source::project::{LineMap, ProjectionCache};
pub use error::MergeError;
#[cfg(test)]
pub(crate) use shard::merge_shard_with_prefix;
pub use shard::{merge_shard, MergedPart};
pub(crate) use shard::{merge_shard_feeding, BlockSink, HeldBudget, ShardJob};

#[cfg(test)]
mod tests;
