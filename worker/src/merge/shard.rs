use std::io::Write;

use bytes::Bytes;
use covmerge_proto::{output, spill, Counts};
use flate2::{write::GzEncoder, Compression};
use rustc_hash::FxHashMap;

use super::ProjectionCache;
use crate::source::{Source, SourceError};

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
    Fetch { chunk: String, message: String, transient: bool },
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("encoding the part: {0}")]
    Encode(#[from] std::io::Error),
}

/// A merged shard: its gzip-compressed JSON lines and what was counted.
#[derive(Debug, Clone)]
pub struct MergedPart {
    pub gz: Vec<u8>,
    pub records: u64,
    pub counts: Counts,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Key {
    file: u32,
    commit: u32,
    sl: u32,
    manager: u32,
    func: u32,
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

/// Merges one shard from its spill chunks (`(name, bytes)`, fetched lazily: only one
/// chunk is held at a time besides the aggregate).
pub fn merge_shard(
    chunks: impl Iterator<Item = Result<(String, Bytes), MergeError>>,
    base_commit: &[u8],
    source: &dyn Source,
    cache: &ProjectionCache,
) -> Result<MergedPart, MergeError> {
    let mut strings = Interner::default();
    let mut agg: FxHashMap<Key, (u64, u64)> = FxHashMap::default();
    let mut remap: Vec<u32> = Vec::new();
    for chunk in chunks {
        let (name, bytes) = chunk?;
        spill::for_each_block(&bytes, |block| {
            remap.clear();
            remap.extend(block.strings.iter().map(|s| strings.intern(s)));
            for (k, v) in block.entries {
                let key = Key {
                    file: remap[k.file as usize],
                    commit: remap[k.commit as usize],
                    sl: k.sl,
                    manager: remap[k.manager as usize],
                    func: remap[k.func as usize],
                };
                let e = agg.entry(key).or_insert((0, 0));
                e.0 = e.0.saturating_add(v.hits);
                e.1 += v.rows;
            }
            Ok(())
        })
        .map_err(|source| MergeError::Spill { chunk: name.clone(), source })?;
    }

    // Files in path order: the part's order is deterministic.
    let mut files: Vec<u32> = agg.keys().map(|k| k.file).collect();
    files.sort_unstable();
    files.dedup();
    files.sort_by(|a, b| strings.get(*a).cmp(strings.get(*b)));
    let mut rank = vec![u32::MAX; strings.strings.len()];
    for (r, f) in files.iter().enumerate() {
        rank[*f as usize] = r as u32;
    }
    let mut entries: Vec<(Key, (u64, u64))> = agg.into_iter().collect();
    entries.sort_unstable_by_key(|(k, _)| (rank[k.file as usize], k.commit, k.sl, k.manager, k.func));

    let mut counts = Counts::default();
    let mut enc = GzEncoder::new(Vec::new(), Compression::new(6));
    let mut records = 0u64;
    let mut start = 0;
    while start < entries.len() {
        let file = entries[start].0.file;
        let end = start + entries[start..].iter().take_while(|(k, _)| k.file == file).count();
        records += merge_file(&entries[start..end], &strings, base_commit, source, cache, &mut counts, &mut enc)?;
        start = end;
    }
    let gz = enc.finish()?;
    Ok(MergedPart { gz, records, counts })
}

/// Merges the entries of one file (sorted by commit, line); writes its records.
fn merge_file(
    entries: &[(Key, (u64, u64))],
    strings: &Interner,
    base_commit: &[u8],
    source: &dyn Source,
    cache: &ProjectionCache,
    counts: &mut Counts,
    out: &mut impl Write,
) -> Result<u64, MergeError> {
    let path = strings.get(entries[0].0.file);
    let Some(base) = source.get(base_commit, path)? else {
        counts.files_deleted += 1;
        counts.rows_deleted += entries.iter().map(|(_, v)| v.1).sum::<u64>();
        return Ok(0);
    };
    counts.files += 1;
    let mut star: FxHashMap<u32, u64> = FxHashMap::default();
    let mut per_mgr: FxHashMap<(u32, u32), u64> = FxHashMap::default();
    let mut names: FxHashMap<(u32, u32), u64> = FxHashMap::default();
    let mut start = 0;
    while start < entries.len() {
        let commit = entries[start].0.commit;
        let end = start + entries[start..].iter().take_while(|(k, _)| k.commit == commit).count();
        let group = &entries[start..end];
        start = end;
        let version = source.get(strings.get(commit), path)?;
        let map = version.as_ref().map(|v| cache.get(v, &base));
        if map.as_ref().is_some_and(|m| m.capped) {
            counts.diffs_capped += 1;
        }
        for (k, (hits, rows)) in group {
            if k.sl == 0 {
                counts.rows_without_line += rows;
                continue;
            }
            let Some(line) = map.as_ref().and_then(|m| m.project(k.sl)) else {
                counts.rows_lost += rows;
                counts.hits_lost = counts.hits_lost.saturating_add(*hits);
                continue;
            };
            counts.rows_merged += rows;
            let s = star.entry(line).or_insert(0);
            *s = s.saturating_add(*hits);
            let m = per_mgr.entry((k.manager, line)).or_insert(0);
            *m = m.saturating_add(*hits);
            if !strings.get(k.func).is_empty() {
                *names.entry((line, k.func)).or_insert(0) += rows;
            }
        }
    }

    let mut records = 0;
    // `*` always, even when nothing projected.
    let mut star: Vec<(u32, u64)> = star.into_iter().collect();
    star.sort_unstable();
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
        let end = i + per_mgr[i..].iter().take_while(|((m, _), _)| *m == mgr).count();
        let (lines, hits): (Vec<u32>, Vec<u64>) = per_mgr[i..end].iter().map(|((_, l), h)| (*l, *h)).unzip();
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
    let mut owned: Vec<(u32, u32)> = best.into_iter().map(|(line, (_, func))| (func, line)).collect();
    owned.sort_unstable_by(|(fa, la), (fb, lb)| strings.get(*fa).cmp(strings.get(*fb)).then(la.cmp(lb)));
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
