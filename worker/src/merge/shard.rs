use std::io::Write;

use crate::spill::{self, StringTable};
use bytes::Bytes;
use covmerge_proto::{output, Counts};
use flate2::{write::GzEncoder, Compression};
use rustc_hash::FxHashMap;

use std::sync::Arc;

use super::groups::{GroupPlan, GroupSums};
use super::sums::ManagerSums;
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
    /// A group's records would be taken for the manager's (contract §4).
    #[error("--group {group}={glob}: {group:?} is also a manager of the input; a group's NAME must not be a manager's")]
    GroupIsManager {
        /// The group's NAME, also a manager's.
        group: String,
        /// The group's GLOB.
        glob: String,
    },
}

/// A merged shard: its gzip-compressed JSON lines and what was counted.
#[derive(Debug, Clone)]
pub struct MergedPart {
    /// The part's JSON lines, gzip-compressed.
    pub gz: Vec<u8>,
    /// JSON lines in the part.
    pub records: u64,
    /// What the merge counted (rows merged and lost, files, lines).
    pub counts: Counts,
}

/// Base lines the line-to-slot vector may span per slot, and at least.
const SLOT_SPAN: usize = 8;
const MIN_SLOT_SPAN: usize = 1 << 16;

/// Where a file of the shard stands: a live one has its sums; one outside
/// `--file-path-prefix` or absent at the base costs a tag, not an accumulator (a
/// shard of 3 million distinct paths held one for each).
enum FileState {
    OutOfScope,
    Deleted,
    Live(Box<FileAcc>),
}

/// What one file of the shard accumulates: projected sums only, never raw rows, so a
/// shard's memory is bounded by its output (lines × managers), however many rows or
/// builds its files have.
///
/// Each projected line gets a *slot* the first time it is hit; the sums are vectors
/// indexed by slot, so an entry costs one lookup in the small line-to-slot table (the
/// file's instrumented lines) and then plain indexing, where a table keyed by
/// (manager, line) was hit at random for every entry. The per-manager sums take
/// memory in proportion to the (manager, line) pairs hit ([`ManagerSums`]), not lines
/// × managers.
struct FileAcc {
    /// Per base line: its slot (`u32::MAX`: none yet). A vector, not a hash map: the
    /// lines are those of the base version, and a lookup per entry was a tenth of the
    /// merge (BENCHMARKS.md). It spans at most [`SLOT_SPAN`] lines per slot (and
    /// [`MIN_SLOT_SPAN`]); lines past that go to `far`: one row at the end of each of
    /// 200 files of a million lines held 4 bytes per line of them all.
    slot_of: Vec<u32>,
    far: FxHashMap<u32, u32>,
    /// Per slot: its base line, the `*` sum, and the first function name seen there
    /// with its row count (`u32::MAX`: none yet).
    lines: Vec<u32>,
    star: Vec<u64>,
    name: Vec<(u32, u64)>,
    /// (line, function) row counts of the names after a slot's first.
    other_names: FxHashMap<(u32, u32), u64>,
    /// Per manager (by the shard's manager index) and slot: its sum.
    per_mgr: ManagerSums,
}

impl FileAcc {
    fn new() -> Self {
        FileAcc {
            slot_of: Vec::new(),
            far: FxHashMap::default(),
            lines: Vec::new(),
            star: Vec::new(),
            name: Vec::new(),
            other_names: FxHashMap::default(),
            per_mgr: ManagerSums::default(),
        }
    }

    /// Adds `hits` of `rows` rows of manager `mgr` (the shard's index) and function
    /// `func` (`None`: the empty name) to base line `line`.
    #[inline]
    fn add(&mut self, line: u32, mgr: usize, func: Option<u32>, hits: u64, rows: u64) {
        let at = line as usize;
        // Once a line is in `far` the vector never grows again: a line is in one of
        // the two, never both (it would get a second slot).
        if at >= self.slot_of.len()
            && self.far.is_empty()
            && at < (SLOT_SPAN * (self.lines.len() + 1)).max(MIN_SLOT_SPAN)
        {
            self.slot_of.resize(at + 1, u32::MAX);
        }
        let next = self.lines.len() as u32;
        let entry = match self.slot_of.get_mut(at) {
            Some(s) => s,
            None => self.far.entry(line).or_insert(u32::MAX),
        };
        let mut slot = *entry;
        if slot == u32::MAX {
            slot = next;
            *entry = slot;
            self.lines.push(line);
            self.star.push(0);
            self.name.push((u32::MAX, 0));
        }
        let slot = slot as usize;
        self.star[slot] = self.star[slot].saturating_add(hits);
        self.per_mgr.add(mgr as u32, slot as u32, hits);
        if let Some(func) = func {
            let first = &mut self.name[slot];
            if first.0 == func {
                first.1 += rows;
            } else if first.0 == u32::MAX {
                *first = (func, rows);
            } else {
                *self.other_names.entry((line, func)).or_insert(0) += rows;
            }
        }
    }
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
}

impl Default for HeldBudget {
    fn default() -> Self {
        HeldBudget {
            bases: 64 << 20,
            maps: 64 << 20,
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
/// is held at a time). Every entry is projected onto the base as soon as it is read.
pub fn merge_shard(
    chunks: impl Iterator<Item = Result<(String, Bytes), MergeError>>,
    base_commit: &[u8],
    source: &dyn Source,
    cache: &ProjectionCache,
) -> Result<MergedPart, MergeError> {
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
/// held within `held`.
pub fn merge_shard_with_prefix(
    chunks: impl Iterator<Item = Result<(String, Bytes), MergeError>>,
    base_commit: &[u8],
    source: &dyn Source,
    cache: &ProjectionCache,
    file_prefix: &[u8],
    groups: &[covmerge_proto::group::Group],
    held: HeldBudget,
) -> Result<MergedPart, MergeError> {
    // Each string once, in an arena, with a hash index of ids (not a boxed copy per
    // string in a vector and another as the map's key).
    let mut strings = StringTable::new();
    // Per string id: the index of its file in `files` plus one (0: not a file yet).
    // String ids are dense, so this is a vector, not a hash lookup per entry.
    let mut file_slot: Vec<u32> = Vec::new();
    let mut files: Vec<(u32, FileState)> = Vec::new();
    let mut held = Held {
        budget: held,
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
    for chunk in chunks {
        let (name, bytes) = chunk?;
        let mut failed: Option<MergeError> = None;
        spill::for_each_block(&bytes, |block| {
            remap.clear();
            remap.extend(block.strings.iter().map(|s| strings.intern(s)));
            func_of.clear();
            func_of.extend(
                block
                    .strings
                    .iter()
                    .zip(&remap)
                    .map(|(s, &id)| (!s.is_empty()).then_some(id)),
            );
            if file_slot.len() < strings.len() {
                file_slot.resize(strings.len(), 0);
            }
            for (k, v) in block.entries {
                let (file, commit) = (remap[k.file as usize], remap[k.commit as usize]);
                let slot = &mut file_slot[file as usize];
                if *slot == 0 {
                    // First entry of this file: is it in scope, and its base version.
                    let acc = if strings.get(file).starts_with(file_prefix) {
                        let base = match source.get(base_commit, strings.get(file)) {
                            Ok(b) => b,
                            Err(err) => {
                                failed = Some(err.into());
                                return Ok(());
                            }
                        };
                        match base {
                            Some(b) => {
                                held.hold_base(file, b);
                                FileState::Live(Box::new(FileAcc::new()))
                            }
                            None => FileState::Deleted,
                        }
                    } else {
                        FileState::OutOfScope
                    };
                    files.push((file, acc));
                    *slot = files.len() as u32;
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
                }
                let func = func_of[k.func as usize];
                acc.add(line, mgr_slot[mgr as usize] as usize, func, v.hits, v.rows);
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
    }
    drop((held, last_map));
    let plan = GroupPlan::new(groups, &managers, &strings)?;

    // Files in path order: the part's order is deterministic.
    let mut order: Vec<(u32, Box<FileAcc>)> = Vec::new();
    for (f, state) in files {
        match state {
            FileState::OutOfScope => {}
            FileState::Deleted => counts.files_deleted += 1,
            FileState::Live(acc) => order.push((f, acc)),
        }
    }
    order.sort_by(|a, b| strings.get(a.0).cmp(strings.get(b.0)));
    // Records are written a few bytes at a time (a number, a comma): buffered, the
    // encoder gets them in large writes. Unbuffered, each small write was a deflate
    // call, and output gzip cost 6× the deflate itself (BENCHMARKS.md).
    let mut enc = std::io::BufWriter::with_capacity(
        256 << 10,
        GzEncoder::new(Vec::new(), Compression::new(6)),
    );
    let mut records = 0u64;
    for (file, acc) in order {
        counts.files += 1;
        records += write_file(
            strings.get(file),
            *acc,
            &managers,
            &plan,
            &strings,
            &mut counts,
            &mut enc,
        )?;
    }
    let gz = enc
        .into_inner()
        .map_err(|e| MergeError::Encode(e.into_error()))?
        .finish()?;
    Ok(MergedPart {
        gz,
        records,
        counts,
    })
}

/// Writes one file's records: `*`, managers by name, groups as given, functions by
/// name.
fn write_file(
    path: &[u8],
    acc: FileAcc,
    managers: &[u32],
    plan: &GroupPlan<'_>,
    strings: &StringTable,
    counts: &mut Counts,
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
    let per_mgr = per_mgr.finish();
    let mut by_name: Vec<u32> = per_mgr.managers().to_vec();
    by_name.sort_unstable_by(|&a, &b| {
        strings
            .get(managers[a as usize])
            .cmp(strings.get(managers[b as usize]))
    });
    let (mut pairs, mut m_lines, mut m_hits) = (Vec::new(), Vec::new(), Vec::new());
    let mut group_sums = (!plan.is_empty()).then(|| GroupSums::new(plan, &lines));
    for &m in &by_name {
        per_mgr.pairs(m, &order, &slot_lines, &mut pairs);
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
        records += g.write(&per_mgr, &by_name, &order, &slot_lines, path, out)?;
    }

    // contract §3.5: the most frequent non-empty name; ties go to the smallest name.
    let mut best: FxHashMap<u32, (u64, u32)> = FxHashMap::default();
    let firsts = slot_lines
        .iter()
        .zip(&name)
        .filter(|(_, (func, _))| *func != u32::MAX)
        .map(|(&line, &(func, n))| ((line, func), n));
    for ((line, func), n) in firsts.chain(other_names) {
        let e = best.entry(line).or_insert((n, func));
        if n > e.0 || (n == e.0 && strings.get(func) < strings.get(e.1)) {
            *e = (n, func);
        }
    }
    let mut owned: Vec<(u32, u32)> = best
        .into_iter()
        .map(|(line, (_, func))| (func, line))
        .collect();
    owned.sort_unstable_by(|(fa, la), (fb, lb)| {
        strings.get(*fa).cmp(strings.get(*fb)).then(la.cmp(lb))
    });
    let mut i = 0;
    while i < owned.len() {
        let func = owned[i].0;
        let end = i + owned[i..].iter().take_while(|(f, _)| *f == func).count();
        let lines: Vec<u32> = owned[i..end].iter().map(|(_, l)| *l).collect();
        output::write_fl(out, path, strings.get(func), &lines)?;
        records += 1;
        i = end;
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines past the vector's span go to a map; a line never gets two slots,
    /// whichever order the lines come in.
    #[test]
    fn a_line_has_one_slot_whether_in_the_vector_or_far() {
        for far_first in [true, false] {
            let mut acc = FileAcc::new();
            let hit = |acc: &mut FileAcc, l: u32| acc.add(l, 0, None, 1, 1);
            if far_first {
                hit(&mut acc, 5_000_000);
            }
            for l in 1..70_000u32 {
                hit(&mut acc, l);
            }
            hit(&mut acc, 5_000_000);
            for l in (1..70_000u32).rev() {
                hit(&mut acc, l);
            }
            if far_first {
                assert!(acc.slot_of.is_empty(), "no vector once a line is far");
            } else {
                assert!(acc.slot_of.len() >= 70_000 && acc.far.len() == 1);
            }
            let mut lines = acc.lines.clone();
            lines.sort_unstable();
            lines.dedup();
            assert_eq!(lines.len(), acc.lines.len(), "a line with two slots");
            assert_eq!(acc.lines.len(), 70_000);
            let far_hits = if far_first { 2 } else { 1 };
            for (s, &l) in acc.lines.iter().enumerate() {
                let want = if l == 5_000_000 { far_hits } else { 2 };
                assert_eq!(acc.star[s], want, "line {l}");
            }
        }
    }
}
