//! One pass over the chunks of a shard ([`Pass::accumulate`]): every entry of the
//! pass's range of paths projected onto the base and added to its file's
//! accumulator, in tables that stay within the pass's share of the budget.
//!
//! - `mod.rs` (here): what a pass uses and holds, and its loop over the chunks.
//! - `block.rs`: one spill block: its strings interned, its entries added (the hot
//!   loop of the merge).
//! - `limit.rs`: after each chunk, whether the tables outgrew their share, and how
//!   the pass then ends (cut into ranges, or its path's names counted in passes) or
//!   goes on (for one path alone).

use std::sync::Arc;

use bytes::Bytes;
use covmerge_proto::Counts;

use super::acc::FileState;
use super::held::Held;
use super::passes::{PathRange, Todo};
use super::{BlockSink, HeldBudget, LineMap, MergeError, ProjectionCache};
use crate::source::Source;
use crate::spill::{self, StringTable};

mod block;
mod limit;

#[cfg(test)]
pub(super) use block::name_bucket;

/// Bytes a file's path costs in the tables besides its text: its span, its entry in
/// the string index, its slot and its place in the file list.
const PER_FILE: usize = 72;

/// Bytes a manager costs in the tables besides its name: its span, its entry in the
/// string index, its slots.
const PER_MANAGER: usize = 64;

/// The paths sampled from a pass that outgrew its share, to cut its range by.
const SAMPLE: usize = 8192;

/// Bytes a function name costs in the tables besides its text: its span, its entry
/// in the string index, its slot.
const NAME_BYTES: usize = 56;

/// Name passes of one path at most: past it, its names are counted in one pass
/// without a limit.
const MAX_NAME_PASSES: u32 = 1 << 16;

/// What one pass over the chunks of a shard uses.
pub(super) struct Pass<'a> {
    pub(super) base_commit: &'a [u8],
    pub(super) source: &'a dyn Source,
    pub(super) cache: &'a ProjectionCache,
    pub(super) file_prefix: &'a [u8],
    pub(super) held: HeldBudget,
    /// Bytes the tables may hold (`None`: a pass over one path, which cannot be cut).
    pub(super) limit: Option<usize>,
    /// The function names counted, `(k, j)`: those whose hash is `j` modulo `k`
    /// (`None`: all).
    pub(super) bucket: Option<(u32, u32)>,
}

/// How a pass ended.
pub(super) enum Accumulated {
    /// Every file of its range accumulated, with the ranges cut off it on the way
    /// (in path order, after it) to merge afterwards, and the bytes its tables held
    /// at the end (0: not counted, in a pass without a limit).
    All {
        tables: Box<Tables>,
        later: Vec<PathRange>,
        bytes: usize,
    },
    /// The tables outgrew the limit: the range is to be merged in these ranges
    /// instead, in this order.
    Over(Vec<Todo>),
    /// The function names of the one path of `range` outgrew the tables' share: its
    /// names are to be counted in `parts` passes (each over part of those of this
    /// pass), then the ranges `later`.
    Names {
        range: PathRange,
        parts: u32,
        later: Vec<PathRange>,
    },
}

/// A pass's tables: every string it interned, each file's tag or accumulator.
pub(super) struct Tables {
    pub(super) strings: StringTable,
    pub(super) files: Vec<(u32, FileState)>,
    /// Managers by the shard's index: their string ids.
    pub(super) managers: Vec<u32>,
    pub(super) counts: Counts,
}

/// A pass under way: its tables, and the indexes that make an entry cost a few
/// vector lookups.
struct Walk<'p, 'a> {
    pass: &'p Pass<'a>,
    /// The paths of the pass: narrowed to one when a path outgrows the share alone.
    range: PathRange,
    /// Bytes the tables may hold (`None`: a pass over one path, without a limit).
    limit: Option<usize>,
    /// Ranges cut off the pass on the way, in path order, to merge after it.
    later: Vec<PathRange>,
    /// Each string once, in an arena, with a hash index of ids (not a boxed copy per
    /// string in a vector and another as the map's key).
    tables: Tables,
    /// Per string id: the index of its file in `files` plus one (0: not a file yet).
    /// String ids are dense, so this is a vector, not a hash lookup per entry.
    file_slot: Vec<u32>,
    held: Held,
    /// The (file, commit) of the last entry and its line map.
    last_map: ((u32, u32), Option<Arc<LineMap>>),
    /// The current block's strings as the pass's.
    ids: block::BlockIds,
    /// Managers by string id: the shard's index of each (`u32::MAX`: not seen yet).
    mgr_slot: Vec<u32>,
    /// Bytes of the managers' names and entries (checked in a pass over one path).
    manager_bytes: usize,
    /// What the accumulators hold (as last counted), and the file of the last
    /// entry: an accumulator is counted again when its run of entries ends.
    accs: usize,
    last_file: u32,
    /// Bytes of the function names interned (in a pass over part of the paths), and
    /// whether they may cut a pass without a limit into name passes.
    name_bytes: usize,
    name_limit: Option<usize>,
    /// The paths of the block being read when the pass went over.
    block_sample: Vec<(Vec<u8>, u64)>,
    /// Chunks read so far.
    read: usize,
}

/// A [`BlockSink`] and the chunks it has seen. Every pass reads the chunks from the
/// first, in one order, and only the last pass (which reads them all) may not end
/// early: the first pass to read a chunk shows its blocks to the sink, whole and
/// before the pass narrows them to its paths, so the sink sees each block once
/// whatever the passes.
pub(super) struct Feed<'s> {
    pub(super) sink: &'s mut dyn BlockSink,
    pub(super) shown: usize,
}

impl Pass<'_> {
    /// Accumulates the files of `range` from `chunks`, showing the chunks `feed` has
    /// not seen yet to its sink.
    pub(super) fn accumulate(
        &self,
        mut chunks: impl Iterator<Item = Result<(String, Bytes), MergeError>>,
        range: PathRange,
        mut feed: Option<&mut Feed<'_>>,
    ) -> Result<Accumulated, MergeError> {
        let mut walk = Walk::new(self, range);
        while let Some(chunk) = chunks.next() {
            let (name, bytes) = chunk?;
            walk.read += 1;
            let show = match feed.as_deref_mut() {
                Some(f) if f.shown < walk.read => {
                    f.shown = walk.read;
                    Some(f)
                }
                _ => None,
            };
            let over_now = walk.read_chunk(&name, &bytes, show)?;
            let hint = chunks.size_hint();
            let left = hint.1.unwrap_or(hint.0);
            if let Some(end) = walk.after_chunk(over_now, left) {
                return Ok(end);
            }
        }
        Ok(walk.finish())
    }
}

impl<'p, 'a> Walk<'p, 'a> {
    fn new(pass: &'p Pass<'a>, range: PathRange) -> Self {
        Walk {
            pass,
            range,
            limit: pass.limit,
            later: Vec::new(),
            tables: Tables {
                strings: StringTable::new(),
                files: Vec::new(),
                managers: Vec::new(),
                counts: Counts::default(),
            },
            file_slot: Vec::new(),
            held: Held::new(pass.held),
            last_map: ((u32::MAX, u32::MAX), None),
            ids: block::BlockIds::default(),
            mgr_slot: Vec::new(),
            manager_bytes: 0,
            accs: 0,
            last_file: u32::MAX,
            name_bytes: 0,
            name_limit: Some(pass.held.tables),
            block_sample: Vec::new(),
            read: 0,
        }
    }

    /// Reads the blocks of one chunk (`name`: the chunk, for errors), showing each to
    /// `show`'s sink first; returns whether the tables went over the limit at a new
    /// path.
    fn read_chunk(
        &mut self,
        name: &str,
        bytes: &[u8],
        mut show: Option<&mut Feed<'_>>,
    ) -> Result<bool, MergeError> {
        let mut failed: Option<MergeError> = None;
        let mut over_now = false;
        // A block that fails or goes over stops there; the chunk's next blocks are
        // still read, and the first failure is returned after them.
        spill::for_each_block(bytes, |mut block| {
            if let (Some(f), None) = (show.as_deref_mut(), &failed) {
                if let Err(e) = f.sink.block(name, &block) {
                    failed = Some(e);
                }
            }
            self.intern_block(&mut block);
            match self.add_entries(&block) {
                Ok(false) => {}
                Ok(true) => over_now = true,
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
            Ok(())
        })
        .map_err(|source| MergeError::Spill {
            chunk: name.to_string(),
            source,
        })?;
        match failed {
            Some(e) => Err(e),
            None => Ok(over_now),
        }
    }

    /// Counts again what the last entry's accumulator holds; returns what the tables
    /// hold, in bytes.
    fn table_bytes_now(&mut self) -> usize {
        self.accs = settle(
            &mut self.tables.files,
            &self.file_slot,
            self.last_file,
            self.accs,
        );
        tables_bytes(&self.tables) + self.accs
    }

    /// The end of a pass that read all its chunks.
    fn finish(mut self) -> Accumulated {
        let bytes = if self.limit.is_some() {
            self.table_bytes_now()
        } else {
            0
        };
        let Walk { tables, later, .. } = self;
        Accumulated::All {
            tables: Box::new(tables),
            later,
            bytes,
        }
    }
}

/// Counts again what the accumulator of `file` (a string id; `u32::MAX`: none) holds
/// into `accs`, the total of the pass's accumulators; returns the new total.
fn settle(files: &mut [(u32, FileState)], file_slot: &[u32], file: u32, accs: usize) -> usize {
    let Some(&slot) = file_slot.get(file as usize) else {
        return accs;
    };
    if slot == 0 {
        return accs;
    }
    let FileState::Live(acc) = &mut files[slot as usize - 1].1 else {
        return accs;
    };
    let now = acc.approx_bytes();
    let total = accs - acc.counted + now;
    acc.counted = now;
    total
}

/// What a pass's tables hold besides its accumulators, in bytes (`file_slot` has a
/// slot per string).
fn tables_bytes(t: &Tables) -> usize {
    t.strings.approx_bytes()
        + t.strings.len() * 4
        + std::mem::size_of_val(t.files.as_slice())
        + t.managers.len() * 8
}
