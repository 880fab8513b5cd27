use std::io::Write;

use crate::spill::{self, StringTable};
use bytes::Bytes;
use covmerge_proto::{output, Counts};
use flate2::{write::GzEncoder, Compression};
use rustc_hash::FxHashMap;

use std::sync::Arc;

use super::acc::{FileAcc, FileState};
use super::groups::{GroupPlan, GroupSums};
use super::part::{PartBytes, PartWriter};
use super::passes::{coalesce, How, PathRange, Todo};
use super::{LineMap, ProjectionCache};
use crate::source::{FileVersion, Source, SourceError};

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
pub struct HeldBudget {
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

/// What a shard merge keeps to avoid asking twice — base texts and line maps — each
/// within a byte budget, so that many files or many commits of one file cost time
/// (a second read, a second diff), not memory without bound.
#[derive(Default)]
struct Held {
    budget: HeldBudget,
    bases: FxHashMap<u32, Arc<FileVersion>>,
    bases_bytes: usize,
    maps: FxHashMap<(u32, u32), Option<Arc<LineMap>>>,
    maps_bytes: usize,
    /// The (file, commit) pairs counted in `diffs_capped`: a map computed again
    /// after being dropped is not counted twice.
    capped: rustc_hash::FxHashSet<(u32, u32)>,
}

impl Held {
    fn hold_base(&mut self, file: u32, base: Arc<FileVersion>) {
        let bytes = base.data.len() + 64;
        if self.bases_bytes + bytes > self.budget.bases {
            self.bases.clear();
            self.bases_bytes = 0;
        }
        self.bases_bytes += bytes;
        self.bases.insert(file, base);
    }

    fn map(&self, file: u32, commit: u32) -> Option<Option<Arc<LineMap>>> {
        self.maps.get(&(file, commit)).cloned()
    }

    fn hold_map(&mut self, file: u32, commit: u32, map: Option<Arc<LineMap>>) {
        let bytes = map.as_ref().map_or(0, |m| m.bytes()) + 32;
        if self.maps_bytes + bytes > self.budget.maps {
            self.maps.clear();
            self.maps_bytes = 0;
        }
        self.maps_bytes += bytes;
        self.maps.insert((file, commit), map);
    }

    /// The line map of `path` at `commit` onto the base (`None`: no such version).
    fn compute_map(
        &mut self,
        source: &dyn Source,
        cache: &ProjectionCache,
        base_commit: &[u8],
        path: &[u8],
        commit: &[u8],
        file: u32,
    ) -> Result<Option<Arc<LineMap>>, MergeError> {
        let Some(version) = source.get(commit, path)? else {
            return Ok(None);
        };
        let base = match self.bases.get(&file) {
            Some(b) => b.clone(),
            None => {
                // Dropped to stay in budget: read again. The source is immutable, so
                // a file that existed at the base still does.
                let b = source.get(base_commit, path)?.ok_or_else(|| {
                    MergeError::Source(SourceError::Io {
                        source_name: "the source".into(),
                        what: format!("{} at the base", String::from_utf8_lossy(path)),
                        message: "present when first read, absent when read again".into(),
                    })
                })?;
                self.hold_base(file, b.clone());
                b
            }
        };
        Ok(Some(cache.get(&version, &base)))
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
pub fn merge_shard_with_prefix<I>(
    mut chunks: impl FnMut() -> I,
    base_commit: &[u8],
    source: &dyn Source,
    cache: &ProjectionCache,
    file_prefix: &[u8],
    groups: &[covmerge_proto::group::Group],
    held: HeldBudget,
) -> Result<MergedPart, MergeError>
where
    I: Iterator<Item = Result<(String, Bytes), MergeError>>,
{
    // Records are written a few bytes at a time (a number, a comma): buffered, the
    // encoder gets them in large writes. Unbuffered, each small write was a deflate
    // call, and output gzip cost 6× the deflate itself (BENCHMARKS.md).
    let mut enc = std::io::BufWriter::with_capacity(
        256 << 10,
        GzEncoder::new(PartWriter::default(), Compression::new(6)),
    );
    let (mut counts, mut records, mut passes) = (Counts::default(), 0u64, 0u32);
    let mut sums_spilled = 0u32;
    let mut base_lines = Vec::new();
    // Ranges still to merge, the next one last; each one's part follows the previous
    // one's, and the files of a part are in path order: the passes' outputs end to
    // end are the one-pass output.
    let mut todo = vec![Todo::bounded(PathRange::all())];
    // Cuts made so far, and what the last pass over a range of a cut (not its last)
    // held at its end per byte its paths held when cut: about 1 when the pass that
    // cut had seen all the rows of those paths (input sorted by path), more when it
    // had seen part of them.
    let (mut cuts, mut growth) = (0u32, None::<(u32, f64)>);
    // The function names of the path of name passes (see `How::Alone`), best so far
    // per line.
    let mut names: Option<BestNames> = None;
    while let Some(mut t) = todo.pop() {
        let joined = coalesce(&mut t, &mut todo, growth, held.tables);
        passes += 1;
        let (limit, bucket) = match t.how {
            How::Bounded { .. } => (Some(held.tables), None),
            How::Alone { k, j } => (None, (k > 1).then_some((k, j))),
        };
        let pass = Pass {
            base_commit,
            source,
            cache,
            file_prefix,
            held,
            limit,
            bucket,
        };
        match pass.accumulate(chunks(), t.range.clone())? {
            Accumulated::All {
                tables,
                later,
                bytes,
            } => {
                if let How::Bounded {
                    seen,
                    cut,
                    tail: None,
                    ..
                } = t.how
                {
                    if seen > 0 && bytes > 0 {
                        growth = Some((cut, bytes as f64 / seen as f64));
                    }
                }
                todo.extend(later.into_iter().rev().map(Todo::bounded));
                if let How::Alone { k, .. } = t.how {
                    if k > 1 {
                        let best = names.get_or_insert_with(BestNames::default);
                        tables.best_names(best);
                        let more = todo.last().is_some_and(|n| {
                            matches!(n.how, How::Alone { k, .. } if k > 1) && n.range == t.range
                        });
                        if more {
                            // The sums are the same in each name pass: written once,
                            // after the last, with the best names of all.
                            continue;
                        }
                    }
                }
                let (c, r) = tables.write(
                    groups,
                    names.take(),
                    &mut sums_spilled,
                    &mut base_lines,
                    &mut enc,
                )?;
                counts.add(&c);
                records += r;
            }
            Accumulated::Over(ranges) => {
                tracing::info!(
                    ranges = ranges.len(),
                    tables = held.tables,
                    "a shard's tables outgrew their share of the memory budget: merging its paths in ranges, one pass each"
                );
                cuts += 1;
                todo.extend(ranges.into_iter().rev().map(|mut r| {
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
            Accumulated::Names {
                range,
                parts,
                later,
            } => {
                let (k, j) = match t.how {
                    How::Alone { k, j } => (k, j),
                    How::Bounded { .. } => (1, 0),
                };
                tracing::info!(
                    parts = k * parts,
                    tables = held.tables,
                    "the function names of one path outgrew the tables' share of the memory budget: counting them in passes, each over the names of one hash bucket"
                );
                todo.extend(later.into_iter().rev().map(Todo::bounded));
                // Bucket `j` of `k` is buckets `j + i k` of `k parts`.
                todo.extend((0..parts).rev().map(|i| Todo {
                    range: range.clone(),
                    how: How::Alone {
                        k: k * parts,
                        j: j + i * k,
                    },
                }));
            }
        }
    }
    let (gz, sha256) = enc
        .into_inner()
        .map_err(|e| MergeError::Encode(e.into_error()))?
        .finish()?
        .finish()?;
    Ok(MergedPart {
        gz,
        sha256,
        records,
        counts,
        passes,
        sums_spilled,
        base_lines,
    })
}

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

/// Per line, the best function name so far (contract §3.5): its row count and name.
type BestNames = FxHashMap<u32, (u64, Vec<u8>)>;

/// What one pass over the chunks of a shard uses.
struct Pass<'a> {
    base_commit: &'a [u8],
    source: &'a dyn Source,
    cache: &'a ProjectionCache,
    file_prefix: &'a [u8],
    held: HeldBudget,
    /// Bytes the tables may hold (`None`: a pass over one path, which cannot be cut).
    limit: Option<usize>,
    /// The function names counted, `(k, j)`: those whose hash is `j` modulo `k`
    /// (`None`: all).
    bucket: Option<(u32, u32)>,
}

/// How a pass ended.
enum Accumulated {
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
struct Tables {
    strings: StringTable,
    files: Vec<(u32, FileState)>,
    /// Managers by the shard's index: their string ids.
    managers: Vec<u32>,
    counts: Counts,
}

impl Pass<'_> {
    /// Accumulates the files of `range` from `chunks`.
    fn accumulate(
        &self,
        mut chunks: impl Iterator<Item = Result<(String, Bytes), MergeError>>,
        mut range: PathRange,
    ) -> Result<Accumulated, MergeError> {
        let (source, base_commit, cache) = (self.source, self.base_commit, self.cache);
        let mut limit = self.limit;
        let mut later: Vec<PathRange> = Vec::new();
        // Each string once, in an arena, with a hash index of ids (not a boxed copy per
        // string in a vector and another as the map's key).
        let mut strings = StringTable::new();
        // Per string id: the index of its file in `files` plus one (0: not a file yet).
        // String ids are dense, so this is a vector, not a hash lookup per entry.
        let mut file_slot: Vec<u32> = Vec::new();
        let mut files: Vec<(u32, FileState)> = Vec::new();
        let mut held = Held {
            budget: self.held,
            ..Held::default()
        };
        // The (file, commit) of the last entry and its line map.
        let mut last_map: ((u32, u32), Option<Arc<LineMap>>) = ((u32::MAX, u32::MAX), None);
        let mut counts = Counts::default();
        let mut remap: Vec<u32> = Vec::new();
        // Per block string: its id as a function name (`None` for the empty name, which
        // is no name), so an entry does not look its name up to ask.
        let mut func_of: Vec<Option<u32>> = Vec::new();
        // Managers by string id: the shard's index of each (`u32::MAX`: not seen yet).
        let mut mgr_slot: Vec<u32> = Vec::new();
        let mut managers: Vec<u32> = Vec::new();
        // Bytes of the managers' names and entries (checked in a pass over one path).
        let mut manager_bytes = 0usize;
        // What the accumulators hold (as last counted), and the file of the last
        // entry: an accumulator is counted again when its run of entries ends.
        let mut accs = 0usize;
        let mut last_file = u32::MAX;
        // Per block string, in a pass over part of the paths: whether it is a path of
        // the range (0: not asked yet, 1: yes, 2: no), whether an entry kept uses it,
        // and whether as a function name counted (0: not asked yet, 1: yes, 2: a name
        // of another bucket).
        let (mut in_range, mut used): (Vec<u8>, Vec<bool>) = (Vec::new(), Vec::new());
        let mut as_func: Vec<u8> = Vec::new();
        // Bytes of the function names interned (in a pass over part of the paths), and
        // whether they may cut a pass without a limit into name passes.
        let mut name_bytes = 0usize;
        let mut name_limit = Some(self.held.tables);
        // The paths of the block being read when the pass went over.
        let mut block_sample: Vec<(Vec<u8>, u64)> = Vec::new();
        let mut read = 0usize;
        while let Some(chunk) = chunks.next() {
            let (name, bytes) = chunk?;
            read += 1;
            let mut failed: Option<MergeError> = None;
            let mut over_now = false;
            spill::for_each_block(&bytes, |mut block| {
                remap.clear();
                func_of.clear();
                if range.is_all() && self.bucket.is_none() {
                    remap.extend(block.strings.iter().map(|s| strings.intern(s)));
                    func_of.extend(
                        block
                            .strings
                            .iter()
                            .zip(&remap)
                            .map(|(s, &id)| (!s.is_empty()).then_some(id)),
                    );
                } else {
                    // Only the entries of the range, and only the strings they use:
                    // the other paths (and their names, and names of other buckets)
                    // are for other passes.
                    let bucket = self.bucket;
                    keep_range(
                        &mut block,
                        &range,
                        bucket,
                        &mut in_range,
                        &mut used,
                        &mut as_func,
                    );
                    let before = strings.len();
                    remap.extend(block.strings.iter().zip(&used).map(|(s, &u)| {
                        if u {
                            strings.intern(s)
                        } else {
                            u32::MAX
                        }
                    }));
                    for ((s, &id), &f) in block.strings.iter().zip(&remap).zip(&as_func) {
                        let counted = f == 1 && !s.is_empty();
                        func_of.push(counted.then_some(id));
                        if counted && id as usize >= before {
                            name_bytes += s.len() + NAME_BYTES;
                        }
                    }
                }
                if file_slot.len() < strings.len() {
                    file_slot.resize(strings.len(), 0);
                }
                for &(k, v) in &block.entries {
                    let (file, commit) = (remap[k.file as usize], remap[k.commit as usize]);
                    if file != last_file {
                        if limit.is_some() {
                            accs = settle(&mut files, &file_slot, last_file, accs);
                        }
                        last_file = file;
                    }
                    let slot = &mut file_slot[file as usize];
                    if *slot == 0 {
                        // First entry of this file: is it in the pass's range (narrowed
                        // within this block), in scope, and its base version.
                        let path = strings.get(file);
                        let acc = if !range.contains(path) {
                            FileState::Skipped
                        } else if path.starts_with(self.file_prefix) {
                            let base = match source.get(base_commit, path) {
                                Ok(b) => b,
                                Err(err) => {
                                    failed = Some(err.into());
                                    return Ok(());
                                }
                            };
                            match base {
                                Some(b) => {
                                    let lines = b.lines().count();
                                    held.hold_base(file, b);
                                    let mut acc = Box::new(FileAcc::new());
                                    acc.base_lines = u32::try_from(lines).unwrap_or(u32::MAX);
                                    if limit.is_none() {
                                        // Merged alone: its sums spill past their share.
                                        acc.per_mgr.spill_past(self.held.tables / 2);
                                    }
                                    FileState::Live(acc)
                                }
                                None => FileState::Deleted,
                            }
                        } else {
                            FileState::OutOfScope
                        };
                        files.push((file, acc));
                        *slot = files.len() as u32;
                        // A new path: are the tables still within the limit? (Once a
                        // path; with one path only, the pass may go on for it alone.)
                        if limit.is_some_and(|max| {
                            files.len() > 1
                                && tables_bytes(&strings, &files, &managers) + accs > max
                        }) {
                            // The block's strings were interned before its entries were
                            // read: its paths are part of what went over, though most
                            // are not files of the pass yet. They are sampled too (a
                            // block of paths in order held more than the share with
                            // two files seen, and each cut then split off one path).
                            let mut ids: Vec<u32> =
                                block.entries.iter().map(|e| e.0.file).collect();
                            ids.sort_unstable();
                            ids.dedup();
                            let stride = ids.len().div_ceil(SAMPLE).max(1);
                            block_sample.extend(ids.iter().step_by(stride).map(|&i| {
                                let path = block.strings[i as usize];
                                (path.to_vec(), ((path.len() + PER_FILE) * stride) as u64)
                            }));
                            over_now = true;
                            return Ok(());
                        }
                    }
                    let acc = match &mut files[*slot as usize - 1].1 {
                        FileState::OutOfScope => {
                            counts.rows_outside_prefix += v.rows;
                            continue;
                        }
                        FileState::Deleted => {
                            counts.rows_deleted += v.rows;
                            continue;
                        }
                        FileState::Skipped => continue,
                        FileState::Live(acc) => acc,
                    };
                    if k.sl == 0 {
                        counts.rows_without_line += v.rows;
                        continue;
                    }
                    // Blocks hold each (file, commit)'s entries together: one lookup per
                    // run of them.
                    if last_map.0 != (file, commit) {
                        let map = match held.map(file, commit) {
                            Some(m) => m,
                            None => {
                                let m = match held.compute_map(
                                    source,
                                    cache,
                                    base_commit,
                                    strings.get(file),
                                    strings.get(commit),
                                    file,
                                ) {
                                    Ok(m) => m,
                                    Err(err) => {
                                        failed = Some(err);
                                        return Ok(());
                                    }
                                };
                                if m.as_ref().is_some_and(|m| m.capped)
                                    && held.capped.insert((file, commit))
                                {
                                    counts.diffs_capped += 1;
                                }
                                held.hold_map(file, commit, m.clone());
                                m
                            }
                        };
                        last_map = ((file, commit), map);
                    }
                    let Some(line) = last_map.1.as_ref().and_then(|m| m.project(k.sl)) else {
                        counts.rows_lost += v.rows;
                        counts.hits_lost = counts.hits_lost.saturating_add(v.hits);
                        continue;
                    };
                    counts.rows_merged += v.rows;
                    let mgr = remap[k.manager as usize];
                    if mgr_slot.len() <= mgr as usize {
                        mgr_slot.resize(mgr as usize + 1, u32::MAX);
                    }
                    if mgr_slot[mgr as usize] == u32::MAX {
                        mgr_slot[mgr as usize] = managers.len() as u32;
                        managers.push(mgr);
                        manager_bytes += strings.get(mgr).len() + PER_MANAGER;
                        if limit.is_none() && manager_bytes > self.held.manager_names {
                            failed = Some(MergeError::ManagerNames {
                                file: String::from_utf8_lossy(strings.get(file)).into_owned(),
                                managers: managers.len() as u64,
                                bytes: manager_bytes as u64,
                                cap: self.held.manager_names as u64,
                            });
                            return Ok(());
                        }
                    }
                    let func = func_of[k.func as usize];
                    acc.add(line, mgr_slot[mgr as usize] as usize, func, v.hits, v.rows);
                    if acc.per_mgr.is_full() {
                        // Merged alone, past its share: the sums go to a run on disk.
                        if let Err(e) = acc.per_mgr.spill() {
                            failed = Some(MergeError::Scratch(e));
                            return Ok(());
                        }
                    }
                }
                Ok(())
            })
            .map_err(|source| MergeError::Spill {
                chunk: name.clone(),
                source,
            })?;
            if let Some(e) = failed {
                return Err(e);
            }
            let Some(max) = limit else {
                // A pass over one path, without a limit: its tables are as large as its
                // output, but for the function names of its lines, which are counted
                // (contract §3.5) and may be many more. Past the share, they are
                // counted in passes, each over part of them.
                let Some(share) = name_limit else { continue };
                let others = match files.first() {
                    Some((_, FileState::Live(acc))) => acc.other_names.capacity() * 17,
                    _ => 0,
                };
                let held_names = name_bytes + others;
                if held_names <= share {
                    continue;
                }
                let hint = chunks.size_hint();
                let left = hint.1.unwrap_or(hint.0);
                let whole = held_names as u128 * (read + left) as u128 / read as u128;
                let parts = whole.div_ceil(share as u128 * 5 / 8).clamp(2, 4096) as u32;
                let k = self.bucket.map_or(1, |b| b.0);
                if k.saturating_mul(parts) > MAX_NAME_PASSES {
                    name_limit = None;
                    continue;
                }
                return Ok(Accumulated::Names {
                    range,
                    parts,
                    later,
                });
            };
            // Checked at each new path and at the end of each chunk (accumulators and
            // names grow within a chunk: one flush of a split, within the split's own
            // share of the budget).
            accs = settle(&mut files, &file_slot, last_file, accs);
            let bytes = tables_bytes(&strings, &files, &managers) + accs;
            if !over_now && bytes <= max {
                continue;
            }
            // With a limit no file is skipped: the pass's files are all those seen.
            let seen = files.len();
            if seen > 1 {
                let hint = chunks.size_hint();
                let left = hint.1.unwrap_or(hint.0);
                // The range's tables at the end, if its paths are spread like those
                // read so far; each pass to hold at most 5/8 of the limit.
                let whole = bytes as u128 * (read + left) as u128 / read as u128;
                let parts = whole.div_ceil(max as u128 * 5 / 8).clamp(2, SAMPLE as u128);
                let stride = seen.div_ceil(SAMPLE);
                let sample = std::mem::take(&mut block_sample)
                    .into_iter()
                    .chain(files.iter().step_by(stride).map(|(f, state)| {
                        let path = strings.get(*f);
                        let acc = match state {
                            FileState::Live(a) => a.approx_bytes(),
                            _ => 0,
                        };
                        (
                            path.to_vec(),
                            ((path.len() + PER_FILE + acc) * stride) as u64,
                        )
                    }))
                    .collect();
                let ranges = range.split(sample, parts as usize);
                let sampled: u64 = ranges.iter().map(|r| r.1).sum();
                let n = ranges.len();
                let whole = whole.min(u64::MAX as u128) as u64;
                return Ok(Accumulated::Over(
                    ranges
                        .into_iter()
                        .enumerate()
                        .map(|(i, (range, seen))| Todo {
                            range,
                            how: How::Bounded {
                                seen,
                                cut: 0,
                                tail: (i + 1 == n).then_some((whole, sampled)),
                                fresh: true,
                            },
                        })
                        .collect(),
                ));
            }
            // One path holds it all: no cut divides it, and it is merged alone without
            // a limit. When no path of the range sorts before it, this pass goes on for
            // it alone (the paths after it get passes of their own); else the paths
            // before it must be written first: the pass starts again, in three.
            let Some((f, _)) = files.first() else {
                continue;
            };
            let path = strings.get(*f).to_vec();
            let (below, above) = range.around(&path);
            if !below.is_empty() {
                let ranges = [
                    Todo::bounded(below),
                    Todo {
                        range: PathRange::only(&path),
                        how: How::Alone { k: 1, j: 0 },
                    },
                    Todo::bounded(above),
                ];
                return Ok(Accumulated::Over(
                    ranges.into_iter().filter(|r| !r.range.is_empty()).collect(),
                ));
            }
            later.extend(Some(above).filter(|r| !r.is_empty()));
            range = PathRange::only(&path);
            limit = None;
            if let Some((_, FileState::Live(acc))) = files.first_mut() {
                acc.per_mgr.spill_past(self.held.tables / 2);
            }
        }
        let bytes = if limit.is_some() {
            accs = settle(&mut files, &file_slot, last_file, accs);
            tables_bytes(&strings, &files, &managers) + accs
        } else {
            0
        };
        drop((held, last_map, file_slot));
        Ok(Accumulated::All {
            tables: Box::new(Tables {
                strings,
                files,
                managers,
                counts,
            }),
            later,
            bytes,
        })
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
fn tables_bytes(strings: &StringTable, files: &[(u32, FileState)], managers: &[u32]) -> usize {
    strings.approx_bytes() + strings.len() * 4 + std::mem::size_of_val(files) + managers.len() * 8
}

/// Keeps the entries of `block` whose path is in `range`, marks in `used` the
/// strings they use, and in `as_func` (1) the function names they use of `bucket`
/// (`(k, j)`: those whose hash is `j` modulo `k`; `None`: all). A name of another
/// bucket is not used, as if absent: it names no line in this pass.
fn keep_range(
    block: &mut spill::Block<'_>,
    range: &PathRange,
    bucket: Option<(u32, u32)>,
    in_range: &mut Vec<u8>,
    used: &mut Vec<bool>,
    as_func: &mut Vec<u8>,
) {
    let n = block.strings.len();
    in_range.clear();
    in_range.resize(n, 0);
    used.clear();
    used.resize(n, false);
    as_func.clear();
    as_func.resize(n, 0);
    let strings = &block.strings;
    block.entries.retain(|(k, _)| {
        let f = k.file as usize;
        if in_range[f] == 0 {
            in_range[f] = if range.contains(strings[f]) { 1 } else { 2 };
        }
        let keep = in_range[f] == 1;
        if keep {
            for i in [k.file, k.commit, k.manager] {
                used[i as usize] = true;
            }
            let func = k.func as usize;
            if as_func[func] == 0 {
                let counted = bucket.is_none_or(|(k, j)| name_bucket(strings[func], k) == j);
                as_func[func] = if counted { 1 } else { 2 };
            }
            if as_func[func] == 1 {
                used[func] = true;
            }
        }
        keep
    });
}

/// The bucket of function name `name` of `k`. Not the string index's hash modulo
/// `k`: the names of one bucket would share its low bits, and collide in the index.
pub(super) fn name_bucket(name: &[u8], k: u32) -> u32 {
    // splitmix64's finalizer over the index's hash.
    let mut z = spill::hash_bytes(name);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z % u64::from(k)) as u32
}

impl Tables {
    /// Adds the best function names of each line of the pass's file (a pass over one
    /// path) to `best`.
    fn best_names(&self, best: &mut BestNames) {
        for (_, state) in &self.files {
            if let FileState::Live(acc) = state {
                let lines = line_names(&acc.lines, &acc.name, &acc.other_names, &self.strings);
                add_names(best, lines, &self.strings);
            }
        }
    }

    /// Writes the files of the pass in path order into `enc`; returns what was
    /// counted and the records written. `names`: for a pass over one path counted
    /// in name passes, the best names of the others. Each file's path and base line
    /// count go to `base_lines`, in the part's order.
    fn write(
        self,
        groups: &[covmerge_proto::group::Group],
        mut names: Option<BestNames>,
        spilled: &mut u32,
        base_lines: &mut Vec<(String, u32)>,
        enc: &mut impl Write,
    ) -> Result<(Counts, u64), MergeError> {
        let Tables {
            strings,
            files,
            managers,
            mut counts,
        } = self;
        let plan = GroupPlan::new(groups, &managers, &strings)?;
        // Files in path order: the part's order is deterministic.
        let mut order: Vec<(u32, Box<FileAcc>)> = Vec::new();
        for (f, state) in files {
            match state {
                FileState::OutOfScope | FileState::Skipped => {}
                FileState::Deleted => counts.files_deleted += 1,
                FileState::Live(acc) => order.push((f, acc)),
            }
        }
        order.sort_by(|a, b| strings.get(a.0).cmp(strings.get(b.0)));
        let mut records = 0u64;
        for (file, acc) in order {
            counts.files += 1;
            base_lines.push((
                String::from_utf8_lossy(strings.get(file)).into_owned(),
                acc.base_lines,
            ));
            records += write_file(
                strings.get(file),
                *acc,
                &managers,
                &plan,
                &strings,
                names.take(),
                &mut counts,
                spilled,
                enc,
            )?;
        }
        Ok((counts, records))
    }
}

/// Writes one file's records: `*`, managers by name, groups as given, functions by
/// name (`names`: the best names of the file's other name passes).
#[allow(clippy::too_many_arguments)]
fn write_file(
    path: &[u8],
    acc: FileAcc,
    managers: &[u32],
    plan: &GroupPlan<'_>,
    strings: &StringTable,
    names: Option<BestNames>,
    counts: &mut Counts,
    spilled: &mut u32,
    out: &mut impl Write,
) -> Result<u64, MergeError> {
    let FileAcc {
        lines: slot_lines,
        star,
        name,
        other_names,
        per_mgr,
        ..
    } = acc;
    let mut records = 0;
    // Slots in line order.
    let mut order: Vec<u32> = (0..slot_lines.len() as u32).collect();
    order.sort_unstable_by_key(|&s| slot_lines[s as usize]);
    // `*` always, even when nothing projected.
    // Sums saturate at u64::MAX, so any sum past i64::MAX is still seen here; a
    // manager's sum never exceeds the `*` sum of its line.
    if let Some(&s) = order.iter().find(|&&s| star[s as usize] > i64::MAX as u64) {
        let sum = star[s as usize];
        return Err(MergeError::SumOverflow {
            file: String::from_utf8_lossy(path).into_owned(),
            line: slot_lines[s as usize],
            sum: if sum == u64::MAX {
                format!("at least {sum}")
            } else {
                sum.to_string()
            },
        });
    }
    let lines: Vec<u32> = order.iter().map(|&s| slot_lines[s as usize]).collect();
    let hits: Vec<u64> = order.iter().map(|&s| star[s as usize]).collect();
    counts.instrumented += lines.len() as u64;
    counts.covered += hits.iter().filter(|&&h| h > 0).count() as u64;
    output::write_mcr(out, b"*", path, &lines, &hits)?;
    records += 1;

    // Managers by name: those that hit a line of the file.
    let mut per_mgr = per_mgr.finish().map_err(MergeError::Scratch)?;
    *spilled += per_mgr.runs_spilled() as u32;
    let mut by_name: Vec<u32> = per_mgr.managers().to_vec();
    by_name.sort_unstable_by(|&a, &b| {
        strings
            .get(managers[a as usize])
            .cmp(strings.get(managers[b as usize]))
    });
    let (mut pairs, mut m_lines, mut m_hits) = (Vec::new(), Vec::new(), Vec::new());
    let mut group_sums = (!plan.is_empty()).then(|| GroupSums::new(plan, &lines));
    for &m in &by_name {
        per_mgr
            .pairs(m, &order, &slot_lines, &mut pairs)
            .map_err(MergeError::Scratch)?;
        if let Some(g) = &mut group_sums {
            g.add(m, &pairs);
        }
        m_lines.clear();
        m_hits.clear();
        m_lines.extend(pairs.iter().map(|p| p.0));
        m_hits.extend(pairs.iter().map(|p| p.1));
        output::write_mcr(
            out,
            strings.get(managers[m as usize]),
            path,
            &m_lines,
            &m_hits,
        )?;
        records += 1;
    }
    if let Some(g) = group_sums {
        records += g.write(&mut per_mgr, &by_name, &order, &slot_lines, path, out)?;
    }

    let best = line_names(&slot_lines, &name, &other_names, strings);
    drop(other_names);
    // Functions by name, and the lines of each in order.
    let all;
    let mut owned: Vec<(&[u8], u32)> = match names {
        None => best
            .into_iter()
            .map(|(line, (_, func))| (strings.get(func), line))
            .collect(),
        Some(mut names) => {
            add_names(&mut names, best, strings);
            all = names;
            all.iter()
                .map(|(&line, (_, f))| (f.as_slice(), line))
                .collect()
        }
    };
    owned.sort_unstable();
    let mut i = 0;
    while i < owned.len() {
        let func = owned[i].0;
        let end = i + owned[i..].iter().take_while(|(f, _)| *f == func).count();
        let lines: Vec<u32> = owned[i..end].iter().map(|(_, l)| *l).collect();
        output::write_fl(out, path, func, &lines)?;
        records += 1;
        i = end;
    }
    Ok(records)
}

/// Whether a name counted `n` times beats `best` (count, name) on its line (contract
/// §3.5): the most frequent non-empty name; ties go to the smallest name.
#[inline]
fn beats(n: u64, name: &[u8], best: (u64, &[u8])) -> bool {
    n > best.0 || (n == best.0 && name < best.1)
}

/// Per line of a file, its best function name (row count, string id) of those
/// counted: a slot's first name and the others.
fn line_names(
    slot_lines: &[u32],
    name: &[(u32, u64)],
    other_names: &FxHashMap<(u32, u32), u64>,
    strings: &StringTable,
) -> FxHashMap<u32, (u64, u32)> {
    let mut best: FxHashMap<u32, (u64, u32)> = FxHashMap::default();
    let firsts = slot_lines
        .iter()
        .zip(name)
        .filter(|(_, (func, _))| *func != u32::MAX)
        .map(|(&line, &(func, n))| ((line, func), n));
    for ((line, func), n) in firsts.chain(other_names.iter().map(|(&k, &n)| (k, n))) {
        let e = best.entry(line).or_insert((n, func));
        if beats(n, strings.get(func), (e.0, strings.get(e.1))) {
            *e = (n, func);
        }
    }
    best
}

/// Adds the best names of one name pass (`lines`, by string id) to those of the
/// others: each pass counts other names, so the best of all is the best of the
/// passes' bests.
fn add_names(best: &mut BestNames, lines: FxHashMap<u32, (u64, u32)>, strings: &StringTable) {
    for (line, (n, func)) in lines {
        let name = strings.get(func);
        match best.entry(line) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                let b = e.get_mut();
                if beats(n, name, (b.0, &b.1)) {
                    *b = (n, name.to_vec());
                }
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert((n, name.to_vec()));
            }
        }
    }
}
