use std::io::Write;

use bytes::Bytes;
use covmerge_proto::{output, spill, Counts};
use flate2::{write::GzEncoder, Compression};
use rustc_hash::FxHashMap;

use std::sync::Arc;

use super::{LineMap, ProjectionCache};
use crate::source::{FileVersion, Source, SourceError};

/// Why a shard could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("spill chunk {chunk}: {source}")]
    Spill {
        chunk: String,
        #[source]
        source: spill::SpillError,
    },
    #[error("fetching spill chunk {chunk}: {message}")]
    Fetch {
        chunk: String,
        message: String,
        transient: bool,
    },
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("encoding the part: {0}")]
    Encode(#[from] std::io::Error),
    /// SPEC §6: the dashboard decodes `HitCounts` as Go's `[]int64`.
    #[error("{file} line {line}: the hits summed onto this line ({sum}) overflow Go's int64 (the dashboard's HitCounts); no result is written")]
    SumOverflow {
        file: String,
        line: u32,
        sum: String,
    },
}

/// A merged shard: its gzip-compressed JSON lines and what was counted.
#[derive(Debug, Clone)]
pub struct MergedPart {
    pub gz: Vec<u8>,
    pub records: u64,
    pub counts: Counts,
}

#[derive(Default)]
struct Interner {
    strings: Vec<Box<[u8]>>,
    index: FxHashMap<Box<[u8]>, u32>,
}

impl Interner {
    fn intern(&mut self, s: &[u8]) -> u32 {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(s.into());
        self.index.insert(s.into(), id);
        id
    }

    fn get(&self, id: u32) -> &[u8] {
        &self.strings[id as usize]
    }
}

/// What one file of the shard accumulates: projected sums only, never raw rows, so a
/// shard's memory is bounded by its output (lines × managers), however many rows or
/// builds its files have.
struct FileAcc {
    /// `None`: the file does not exist at the base.
    base: Option<Arc<FileVersion>>,
    star: FxHashMap<u32, u64>,
    per_mgr: FxHashMap<(u32, u32), u64>,
    names: FxHashMap<(u32, u32), u64>,
}

/// Merges one shard from its spill chunks (`(name, bytes)`, fetched lazily: one chunk
/// is held at a time). Every entry is projected onto the base as soon as it is read.
pub fn merge_shard(
    chunks: impl Iterator<Item = Result<(String, Bytes), MergeError>>,
    base_commit: &[u8],
    source: &dyn Source,
    cache: &ProjectionCache,
) -> Result<MergedPart, MergeError> {
    merge_shard_with_prefix(chunks, base_commit, source, cache, b"")
}

/// [`merge_shard`] of the files whose path starts with `file_prefix` only: the rows of
/// other files are counted in `rows_outside_prefix` and go no further (no source
/// lookup, no output, not a file of the result).
pub fn merge_shard_with_prefix(
    chunks: impl Iterator<Item = Result<(String, Bytes), MergeError>>,
    base_commit: &[u8],
    source: &dyn Source,
    cache: &ProjectionCache,
    file_prefix: &[u8],
) -> Result<MergedPart, MergeError> {
    let mut strings = Interner::default();
    // Per string id: the index of its file in `files` plus one (0: not a file yet).
    // String ids are dense, so this is a vector, not a hash lookup per entry.
    let mut file_slot: Vec<u32> = Vec::new();
    let mut files: Vec<(u32, Option<FileAcc>)> = Vec::new();
    let mut maps: FxHashMap<(u32, u32), Option<Arc<LineMap>>> = FxHashMap::default();
    let mut counts = Counts::default();
    let mut remap: Vec<u32> = Vec::new();
    for chunk in chunks {
        let (name, bytes) = chunk?;
        let mut failed: Option<MergeError> = None;
        spill::for_each_block(&bytes, |block| {
            remap.clear();
            remap.extend(block.strings.iter().map(|s| strings.intern(s)));
            if file_slot.len() < strings.strings.len() {
                file_slot.resize(strings.strings.len(), 0);
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
                        Some(FileAcc {
                            base,
                            star: FxHashMap::default(),
                            per_mgr: FxHashMap::default(),
                            names: FxHashMap::default(),
                        })
                    } else {
                        None
                    };
                    files.push((file, acc));
                    *slot = files.len() as u32;
                }
                let Some(acc) = &mut files[*slot as usize - 1].1 else {
                    counts.rows_outside_prefix += v.rows;
                    continue;
                };
                let Some(base) = &acc.base else {
                    counts.rows_deleted += v.rows;
                    continue;
                };
                if k.sl == 0 {
                    counts.rows_without_line += v.rows;
                    continue;
                }
                let map = match maps.entry((file, commit)) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        let version = match source.get(strings.get(commit), strings.get(file)) {
                            Ok(v) => v,
                            Err(err) => {
                                failed = Some(err.into());
                                return Ok(());
                            }
                        };
                        let m = version.map(|v| cache.get(&v, base));
                        if m.as_ref().is_some_and(|m| m.capped) {
                            counts.diffs_capped += 1;
                        }
                        e.insert(m)
                    }
                };
                let Some(line) = map.as_ref().and_then(|m| m.project(k.sl)) else {
                    counts.rows_lost += v.rows;
                    counts.hits_lost = counts.hits_lost.saturating_add(v.hits);
                    continue;
                };
                counts.rows_merged += v.rows;
                let s = acc.star.entry(line).or_insert(0);
                *s = s.saturating_add(v.hits);
                let m = acc
                    .per_mgr
                    .entry((remap[k.manager as usize], line))
                    .or_insert(0);
                *m = m.saturating_add(v.hits);
                let func = remap[k.func as usize];
                if !strings.get(func).is_empty() {
                    *acc.names.entry((line, func)).or_insert(0) += v.rows;
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
    }
    drop(maps);

    // Files in path order: the part's order is deterministic.
    let mut order: Vec<(u32, FileAcc)> = files
        .into_iter()
        .filter_map(|(f, acc)| Some((f, acc?)))
        .collect();
    order.sort_by(|a, b| strings.get(a.0).cmp(strings.get(b.0)));
    let mut enc = GzEncoder::new(Vec::new(), Compression::new(6));
    let mut records = 0u64;
    for (file, acc) in order {
        if acc.base.is_none() {
            counts.files_deleted += 1;
            continue;
        }
        counts.files += 1;
        records += write_file(strings.get(file), acc, &strings, &mut counts, &mut enc)?;
    }
    let gz = enc.finish()?;
    Ok(MergedPart {
        gz,
        records,
        counts,
    })
}

/// Writes one file's records: `*`, managers by name, functions by name.
fn write_file(
    path: &[u8],
    acc: FileAcc,
    strings: &Interner,
    counts: &mut Counts,
    out: &mut impl Write,
) -> Result<u64, MergeError> {
    let FileAcc {
        star,
        per_mgr,
        names,
        ..
    } = acc;
    let mut records = 0;
    // `*` always, even when nothing projected.
    let mut star: Vec<(u32, u64)> = star.into_iter().collect();
    star.sort_unstable();
    // Sums saturate at u64::MAX, so any sum past i64::MAX is still seen here; a
    // manager's sum never exceeds the `*` sum of its line.
    if let Some(&(line, sum)) = star.iter().find(|(_, h)| *h > i64::MAX as u64) {
        return Err(MergeError::SumOverflow {
            file: String::from_utf8_lossy(path).into_owned(),
            line,
            sum: if sum == u64::MAX {
                format!("at least {sum}")
            } else {
                sum.to_string()
            },
        });
    }
    let (lines, hits): (Vec<u32>, Vec<u64>) = star.iter().copied().unzip();
    counts.instrumented += lines.len() as u64;
    counts.covered += hits.iter().filter(|&&h| h > 0).count() as u64;
    output::write_mcr(out, b"*", path, &lines, &hits)?;
    records += 1;

    let mut per_mgr: Vec<((u32, u32), u64)> = per_mgr.into_iter().collect();
    per_mgr.sort_unstable_by(|((ma, la), _), ((mb, lb), _)| {
        strings.get(*ma).cmp(strings.get(*mb)).then(la.cmp(lb))
    });
    let mut i = 0;
    while i < per_mgr.len() {
        let mgr = per_mgr[i].0 .0;
        let end = i + per_mgr[i..]
            .iter()
            .take_while(|((m, _), _)| *m == mgr)
            .count();
        let (lines, hits): (Vec<u32>, Vec<u64>) =
            per_mgr[i..end].iter().map(|((_, l), h)| (*l, *h)).unzip();
        output::write_mcr(out, strings.get(mgr), path, &lines, &hits)?;
        records += 1;
        i = end;
    }

    // SPEC §3.5: the most frequent non-empty name; ties go to the smallest name.
    let mut best: FxHashMap<u32, (u64, u32)> = FxHashMap::default();
    for ((line, func), n) in names {
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
