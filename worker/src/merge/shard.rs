//! The merge of one shard ([`merge_shard_with_prefix`]): passes over its chunks,
//! one or more (see `passes.rs`), each writing its files' records into one part.

use std::io::BufWriter;

use bytes::Bytes;
use covmerge_proto::group::Group;
use covmerge_proto::Counts;
use flate2::{write::GzEncoder, Compression};

use super::names::BestNames;
use super::part::{PartBytes, PartWriter};
use super::pass::{Accumulated, Feed, Pass, Tables};
use super::passes::{coalesce, How, PathRange, Todo};
use super::{MergeError, ProjectionCache};
use crate::source::Source;
use crate::spill::Block;

/// A merged shard: its gzip-compressed JSON lines and what was counted.
#[derive(Debug)]
pub struct MergedPart {
    /// The part's JSON lines, gzip-compressed: in memory, or in a temporary file
    /// when large.
    pub gz: PartBytes,
    /// The SHA-256 of `gz`.
    pub sha256: [u8; 32],
    /// JSON lines in the part.
    pub records: u64,
    /// What the merge counted (rows merged and lost, files, lines).
    pub counts: Counts,
    /// Passes over the chunks: 1 unless the tables outgrew their share of the budget
    /// (see [`HeldBudget::tables`]).
    pub passes: u32,
    /// Runs of per-manager sums spilled to a temporary file, over the files merged
    /// alone (0: none; see `sums.rs`).
    pub sums_spilled: u32,
    /// Per file of the part, in its order: its path and the line count of its base
    /// version. The publish gate refuses a record line past it.
    pub base_lines: Vec<(String, u32)>,
}

/// What a shard merge may hold between uses, in bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeldBudget {
    /// Base texts; past it they are dropped and read again from the source (which
    /// has its own cache) when needed.
    pub bases: usize,
    /// Line maps; past it they are dropped and looked up again in the worker's
    /// [`ProjectionCache`] (or recomputed).
    pub maps: usize,
    /// The merge's own tables: every string of a pass (paths, commits, names,
    /// managers), each file's tag or accumulator. Past it the shard is merged in
    /// passes over ranges of its paths, each pass reading the chunks again; a single
    /// path whose accumulator outgrows it is merged alone, without a limit but for
    /// its function names, counted in passes over parts of them past it.
    pub tables: usize,
    /// The names of one file's distinct managers, with 64 bytes each for their
    /// entries: a file merged alone holds them all, and past this it fails naming
    /// the file and the flag, before memory runs out.
    pub manager_names: usize,
}

impl Default for HeldBudget {
    fn default() -> Self {
        HeldBudget {
            bases: 64 << 20,
            maps: 64 << 20,
            tables: 128 << 20,
            manager_names: 256 << 20,
        }
    }
}

/// Merges one shard from its spill chunks (`(name, bytes)`, fetched lazily: one chunk
/// is held at a time; `chunks` gives them from the first each time it is called).
/// Every entry is projected onto the base as soon as it is read.
pub fn merge_shard<I>(
    chunks: impl FnMut() -> I,
    base_commit: &[u8],
    source: &dyn Source,
    cache: &ProjectionCache,
) -> Result<MergedPart, MergeError>
where
    I: Iterator<Item = Result<(String, Bytes), MergeError>>,
{
    merge_shard_with_prefix(
        chunks,
        base_commit,
        source,
        cache,
        b"",
        &[],
        HeldBudget::default(),
    )
}

/// [`merge_shard`] of the files whose path starts with `file_prefix` only: the rows of
/// other files are counted in `rows_outside_prefix` and go no further (no source
/// lookup, no output, not a file of the result). Each file gets a record per group of
/// `groups` with a line, after its managers' (`--group`). Base texts and line maps are
/// held within `held`, and the merge's own tables within `held.tables`: a shard whose
/// tables outgrow it is merged in passes over ranges of its paths, each reading the
/// chunks again (`passes.rs`); the part is the same, byte for byte.
pub(crate) fn merge_shard_with_prefix<I>(
    chunks: impl FnMut() -> I,
    base_commit: &[u8],
    source: &dyn Source,
    cache: &ProjectionCache,
    file_prefix: &[u8],
    groups: &[Group],
    held: HeldBudget,
) -> Result<MergedPart, MergeError>
where
    I: Iterator<Item = Result<(String, Bytes), MergeError>>,
{
    let job = ShardJob {
        base_commit,
        source,
        cache,
        file_prefix,
        groups,
        held,
    };
    merge_shard_feeding(chunks, &job, None)
}

/// What a shard's merge is given besides its chunks (see [`merge_shard_with_prefix`]).
pub(crate) struct ShardJob<'a> {
    pub(crate) base_commit: &'a [u8],
    pub(crate) source: &'a dyn Source,
    pub(crate) cache: &'a ProjectionCache,
    pub(crate) file_prefix: &'a [u8],
    pub(crate) groups: &'a [Group],
    pub(crate) held: HeldBudget,
}

/// What sees the blocks of a shard's chunks as its merge reads them (`--partial-out`'s
/// builder): each block once, in chunk order, with all its entries, however many
/// passes the merge makes.
pub(crate) trait BlockSink {
    /// Takes block `block` of chunk `chunk` (the chunk's name, for errors).
    fn block(&mut self, chunk: &str, block: &Block<'_>) -> Result<(), MergeError>;
}

/// [`merge_shard_with_prefix`] of `job`, showing every block of the chunks once to
/// `sink` on the way (in the first pass that reads it): the shard's chunks are read
/// once for both.
pub(crate) fn merge_shard_feeding<I>(
    mut chunks: impl FnMut() -> I,
    job: &ShardJob<'_>,
    sink: Option<&mut dyn BlockSink>,
) -> Result<MergedPart, MergeError>
where
    I: Iterator<Item = Result<(String, Bytes), MergeError>>,
{
    let held = job.held;
    let mut feed = sink.map(|sink| Feed { sink, shown: 0 });
    let mut out = PartOut::new(job.groups);
    let mut plan = Plan::new(held.tables);
    while let Some(mut t) = plan.todo.pop() {
        let joined = coalesce(&mut t, &mut plan.todo, plan.growth, held.tables);
        plan.passes += 1;
        let (limit, bucket) = match t.how {
            How::Bounded { .. } => (Some(held.tables), None),
            How::Alone { k, j } => (None, (k > 1).then_some((k, j))),
        };
        let pass = Pass {
            base_commit: job.base_commit,
            source: job.source,
            cache: job.cache,
            file_prefix: job.file_prefix,
            held,
            limit,
            bucket,
        };
        match pass.accumulate(chunks(), t.range.clone(), feed.as_mut())? {
            Accumulated::All {
                tables,
                later,
                bytes,
            } => {
                if let Some(tables) = plan.all(&t, tables, later, bytes) {
                    out.write(tables, plan.names.take())?;
                }
            }
            Accumulated::Over(ranges) => plan.over(ranges, joined),
            Accumulated::Names {
                range,
                parts,
                later,
            } => plan.names(&t, range, parts, later),
        }
    }
    out.finish(plan.passes)
}

/// The passes of a shard's merge: those still to make, and what the passes made so
/// far tell of those to come.
struct Plan {
    /// The bytes each pass's tables may hold.
    tables: usize,
    /// Ranges still to merge, the next one last; each one's part follows the previous
    /// one's, and the files of a part are in path order: the passes' outputs end to
    /// end are the one-pass output.
    todo: Vec<Todo>,
    /// Passes made.
    passes: u32,
    /// Cuts made so far, and what the last pass over a range of a cut (not its last)
    /// held at its end per byte its paths held when cut: about 1 when the pass that
    /// cut had seen all the rows of those paths (input sorted by path), more when it
    /// had seen part of them.
    cuts: u32,
    growth: Option<(u32, f64)>,
    /// The function names of the path of name passes (see `How::Alone`), best so far
    /// per line.
    names: Option<BestNames>,
}

impl Plan {
    fn new(tables: usize) -> Self {
        Plan {
            tables,
            todo: vec![Todo::bounded(PathRange::all())],
            passes: 0,
            cuts: 0,
            growth: None,
            names: None,
        }
    }

    /// Pass `t` accumulated every file of its range into `tables` (`bytes`: what they
    /// held at its end), and cut off the ranges `later`: returns the tables to write
    /// now (`None`: a name pass of a path whose other name passes are still to come).
    fn all(
        &mut self,
        t: &Todo,
        tables: Box<Tables>,
        later: Vec<PathRange>,
        bytes: usize,
    ) -> Option<Box<Tables>> {
        if let How::Bounded {
            seen,
            cut,
            tail: None,
            ..
        } = t.how
        {
            if seen > 0 && bytes > 0 {
                self.growth = Some((cut, bytes as f64 / seen as f64));
            }
        }
        self.todo.extend(later.into_iter().rev().map(Todo::bounded));
        if let How::Alone { k, .. } = t.how {
            if k > 1 {
                let best = self.names.get_or_insert_with(BestNames::default);
                tables.best_names(best);
                let more = self.todo.last().is_some_and(|n| {
                    matches!(n.how, How::Alone { k, .. } if k > 1) && n.range == t.range
                });
                if more {
                    // The sums are the same in each name pass: written once,
                    // after the last, with the best names of all.
                    return None;
                }
            }
        }
        Some(tables)
    }

    /// A pass (`joined`: over ranges joined by estimate) outgrew its share: its range
    /// is merged in `ranges` instead.
    fn over(&mut self, ranges: Vec<Todo>, joined: bool) {
        tracing::info!(
            ranges = ranges.len(),
            tables = self.tables,
            "a shard's tables outgrew their share of the memory budget: merging its paths in ranges, one pass each"
        );
        self.cuts += 1;
        let cuts = self.cuts;
        self.todo.extend(ranges.into_iter().rev().map(|mut r| {
            if let How::Bounded { cut, fresh, .. } = &mut r.how {
                *cut = cuts;
                // A range joined by estimate that still outgrew the share is
                // cut without joining by an earlier cut's estimate again, so
                // that cutting ends.
                *fresh = !joined;
            }
            r
        }));
    }

    /// The function names of the one path of `range` (pass `t`) outgrew the tables'
    /// share: they are counted in `parts` passes, then come the ranges `later`.
    fn names(&mut self, t: &Todo, range: PathRange, parts: u32, later: Vec<PathRange>) {
        let (k, j) = match t.how {
            How::Alone { k, j } => (k, j),
            How::Bounded { .. } => (1, 0),
        };
        tracing::info!(
            parts = k * parts,
            tables = self.tables,
            "the function names of one path outgrew the tables' share of the memory budget: counting them in passes, each over the names of one hash bucket"
        );
        self.todo.extend(later.into_iter().rev().map(Todo::bounded));
        // Bucket `j` of `k` is buckets `j + i k` of `k parts`.
        self.todo.extend((0..parts).rev().map(|i| Todo {
            range: range.clone(),
            how: How::Alone {
                k: k * parts,
                j: j + i * k,
            },
        }));
    }
}

/// The part being written: its records, gzip-compressed, and what they counted.
struct PartOut<'g> {
    groups: &'g [Group],
    enc: BufWriter<GzEncoder<PartWriter>>,
    counts: Counts,
    records: u64,
    sums_spilled: u32,
    base_lines: Vec<(String, u32)>,
}

impl<'g> PartOut<'g> {
    fn new(groups: &'g [Group]) -> Self {
        PartOut {
            groups,
            // Records are written a few bytes at a time (a number, a comma): buffered,
            // the encoder gets them in large writes. Unbuffered, each small write was
            // a deflate call, and output gzip cost 6× the deflate itself
            // (BENCHMARKS.md).
            enc: BufWriter::with_capacity(
                256 << 10,
                GzEncoder::new(PartWriter::default(), Compression::new(6)),
            ),
            counts: Counts::default(),
            records: 0,
            sums_spilled: 0,
            base_lines: Vec::new(),
        }
    }

    /// Writes the files of a pass (`names`: the best names of a path's other name
    /// passes).
    fn write(&mut self, tables: Box<Tables>, names: Option<BestNames>) -> Result<(), MergeError> {
        let (c, r) = tables.write(
            self.groups,
            names,
            &mut self.sums_spilled,
            &mut self.base_lines,
            &mut self.enc,
        )?;
        self.counts.add(&c);
        self.records += r;
        Ok(())
    }

    /// Ends the part, merged in `passes` passes.
    fn finish(self, passes: u32) -> Result<MergedPart, MergeError> {
        let (gz, sha256) = self
            .enc
            .into_inner()
            .map_err(|e| MergeError::Encode(e.into_error()))?
            .finish()?
            .finish()?;
        Ok(MergedPart {
            gz,
            sha256,
            records: self.records,
            counts: self.counts,
            passes,
            sums_spilled: self.sums_spilled,
            base_lines: self.base_lines,
        })
    }
}
