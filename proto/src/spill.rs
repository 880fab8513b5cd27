//! Rows travel from the split phase to the merge phase as *spill chunks*: immutable
//! byte strings made of self-contained blocks. A block has its own string table, so
//! chunks written by different splitters can be read in any order and concatenated.
//!
//! ```text
//! block   := "CMS2" u32le(body_len) body
//! body    := varint(n_strings) { varint(len) bytes }*
//!            varint(flags) varint(n_rows) { run }*     (runs until n_rows rows)
//! run     := varint(file) varint(commit) varint(n >= 1) { row }*n
//! row     := varint(func) varint(manager) varint(sl) varint(hits) [varint(rows)]
//! ```
//!
//! Strings are indices into the block's table. A block's rows come in runs of one
//! (file, commit) each, which the run names once. `rows` is how many input rows were
//! pre-aggregated into the entry (identical file, commit, func, manager and line), so
//! the merge can still count lost rows and pick function names by row frequency; it
//! is left out, and is 1, when `flags` has [`ONE_ROW_EACH`] (a block written
//! unaggregated).

use rustc_hash::{FxHashMap, FxHashSet};

const MAGIC: &[u8; 4] = b"CMS2";

/// Block flag: every entry is one input row (`rows` is not written).
const ONE_ROW_EACH: u64 = 1;

/// A spill chunk that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("corrupt spill block at byte {offset}: {what}")]
pub struct SpillError {
    pub offset: usize,
    pub what: &'static str,
}

/// Key of a pre-aggregated entry: indices into the block's string table, and the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawKey {
    pub file: u32,
    pub commit: u32,
    pub func: u32,
    pub manager: u32,
    pub sl: u32,
}

/// Sums for one key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawVal {
    pub hits: u64,
    pub rows: u64,
}

/// Strings shared by many blocks. A splitter interns each string of a row once in this
/// table, whatever the row's shard (the table stays small and hot in cache), and each
/// block written by [`EntryTable::finish_into`] carries only the strings its own
/// entries use.
///
/// The strings live end to end in one arena; the hash index holds only their ids, so a
/// lookup hashes the bytes once and compares them once, with no boxed keys to chase.
/// Callers that look strings up per column keep a [`StringIndex`] per column over the
/// same table ([`StringIndex::intern`]); [`StringTable::intern`] uses the table's own.
#[derive(Default)]
pub struct StringTable {
    arena: Vec<u8>,
    /// `(start, end)` in `arena` of each id.
    spans: Vec<(usize, usize)>,
    index: StringIndex,
    /// Scratch while a block is written: the block-local id of each string
    /// (`u32::MAX`: not in the block yet).
    local: Vec<u32>,
    /// Scratch while a block is written: the number of each commit in the block, for
    /// the (file, commit) order (`u32::MAX`: not seen yet).
    dense: Vec<u32>,
}

/// The hash of a string as the indexes of a [`StringTable`] use it.
#[inline]
pub fn hash_bytes(s: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    h.write(s);
    h.finish()
}

/// A hash index from strings to ids of one [`StringTable`]. An index holds ids only:
/// it must always be used with the table it was filled from.
#[derive(Default)]
pub struct StringIndex {
    entries: hashbrown::HashTable<IndexEntry>,
}

/// An indexed string beside its id: short strings (function names, most paths) are
/// kept in the entry itself, so a lookup reads one cache line of the table and not
/// also the arena; longer ones are compared in the arena.
#[derive(Clone, Copy)]
struct IndexEntry {
    id: u32,
    len: u32,
    /// The string when `len <= INLINE`, else its start in the arena (first 8 bytes).
    bytes: [u8; INLINE],
}

/// The longest string kept in an [`IndexEntry`] (32 bytes in all).
const INLINE: usize = 24;

impl IndexEntry {
    #[inline]
    fn matches(&self, arena: &[u8], s: &[u8]) -> bool {
        self.len as usize == s.len() && same_bytes(self.text(arena), s)
    }

    #[inline]
    fn text<'a>(&'a self, arena: &'a [u8]) -> &'a [u8] {
        let len = self.len as usize;
        if len <= INLINE {
            return &self.bytes[..len];
        }
        let start = u64::from_ne_bytes(self.bytes[..8].try_into().expect("8 bytes")) as usize;
        &arena[start..start + len]
    }
}

/// `a == b`, compared a word at a time inline: the strings looked up are short (paths,
/// names, commit hashes), where a call to `memcmp` costs more than the comparison.
#[inline]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut wa, mut wb) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in (&mut wa).zip(&mut wb) {
        if u64::from_ne_bytes(x.try_into().expect("8 bytes"))
            != u64::from_ne_bytes(y.try_into().expect("8 bytes"))
        {
            return false;
        }
    }
    wa.remainder()
        .iter()
        .zip(wb.remainder())
        .all(|(x, y)| x == y)
}

impl StringIndex {
    /// The id of `s` in `table` through this index, and whether it was added just now
    /// (a string added to the table through another index is added again).
    #[inline]
    pub fn intern(&mut self, table: &mut StringTable, s: &[u8]) -> (u32, bool) {
        let hash = hash_bytes(s);
        let arena = &table.arena;
        let found = self.entries.find(hash, |e| e.matches(arena, s));
        if let Some(e) = found {
            return (e.id, false);
        }
        let start = table.arena.len();
        let id = table.push(s);
        let arena = &table.arena;
        let mut entry = IndexEntry {
            id,
            len: s.len() as u32,
            bytes: [0; INLINE],
        };
        if s.len() <= INLINE {
            entry.bytes[..s.len()].copy_from_slice(s);
        } else {
            entry.bytes[..8].copy_from_slice(&(start as u64).to_ne_bytes());
        }
        self.entries
            .insert_unique(hash, entry, |e| hash_bytes(e.text(arena)));
        (id, true)
    }

    /// An estimate of the memory held.
    pub fn approx_bytes(&self) -> usize {
        self.entries.capacity() * (std::mem::size_of::<IndexEntry>() + 1)
    }
}

impl StringTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `s` in this table.
    pub fn intern(&mut self, s: &[u8]) -> u32 {
        let mut index = std::mem::take(&mut self.index);
        let (id, _) = index.intern(self, s);
        self.index = index;
        id
    }

    /// Adds `s` under a new id, without looking for it.
    pub fn push(&mut self, s: &[u8]) -> u32 {
        let id = self.spans.len() as u32;
        let start = self.arena.len();
        self.arena.extend_from_slice(s);
        self.spans.push((start, self.arena.len()));
        id
    }

    /// The string of `id`.
    #[inline]
    pub fn get(&self, id: u32) -> &[u8] {
        let (a, b) = self.spans[id as usize];
        &self.arena[a..b]
    }

    /// How many strings the table holds (ids are `0..len`).
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// An estimate of the memory held.
    pub fn approx_bytes(&self) -> usize {
        self.arena.capacity()
            + self.spans.capacity() * std::mem::size_of::<(usize, usize)>()
            + self.index.approx_bytes()
            + (self.local.capacity() + self.dense.capacity()) * 4
    }

    /// Forgets every string (and frees the tables). Ids handed out before are invalid:
    /// only call this when no [`EntryTable`] holds entries.
    pub fn clear(&mut self) {
        *self = StringTable::default();
    }
}

/// Entries of one shard, keyed by [`StringTable`] ids. Rows are appended as they come
/// and aggregated when the block is written: the aggregation table then holds one
/// shard's rows and stays in cache, where one table per shard filled row by row is hit
/// at random across all of them.
#[derive(Default)]
pub struct EntryTable {
    /// Rows as added; almost all carry `rows == 1`.
    pending: PendingRows,
    /// The rare entries added with `rows != 1` (already summed elsewhere).
    summed: Vec<(RawKey, RawVal)>,
}

/// One row of [`EntryTable::pending`]: 28 bytes (4-byte aligned, `hits` in two
/// halves) instead of 40 for a `(RawKey, RawVal)`, so a split's memory budget holds
/// 40 % more rows before it flushes: fewer, larger chunks.
#[derive(Clone, Copy)]
struct Pending {
    key: RawKey,
    hits: [u32; 2],
}

impl Pending {
    /// The row's sums: its hits, one row.
    #[inline]
    fn val(&self) -> RawVal {
        RawVal {
            hits: self.hits[0] as u64 | (self.hits[1] as u64) << 32,
            rows: 1,
        }
    }
}

/// Rows of one shard in blocks of [`PENDING_BLOCK`], not one vector: a vector doubled
/// when full, copying every row again and, at its largest, holding up to twice its
/// rows (a split's budget counts capacity, so a shard that took most rows flushed at
/// half the budget, or went past it while the copy was made). The first block grows
/// as a vector does, so a shard with few rows holds little. Every block but the last
/// is full.
#[derive(Default)]
struct PendingRows {
    blocks: Vec<Vec<Pending>>,
}

/// Rows per block of [`PendingRows`] (112 KiB): a power of two, so the first block's
/// doubling ends exactly there.
const PENDING_BLOCK: usize = 1 << 12;

impl PendingRows {
    #[inline]
    fn push(&mut self, row: Pending) {
        match self.blocks.last_mut() {
            Some(b) if b.len() < PENDING_BLOCK => b.push(row),
            _ => self.grow(row),
        }
    }

    #[cold]
    fn grow(&mut self, row: Pending) {
        let mut b = if self.blocks.is_empty() {
            Vec::new()
        } else {
            Vec::with_capacity(PENDING_BLOCK)
        };
        b.push(row);
        self.blocks.push(b);
    }

    #[inline]
    fn get(&self, i: usize) -> Option<&Pending> {
        self.blocks.get(i / PENDING_BLOCK)?.get(i % PENDING_BLOCK)
    }

    fn iter(&self) -> impl Iterator<Item = &Pending> + '_ {
        self.blocks.iter().flatten()
    }

    fn len(&self) -> usize {
        self.blocks.last().map_or(0, |last| {
            (self.blocks.len() - 1) * PENDING_BLOCK + last.len()
        })
    }

    fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    fn capacity(&self) -> usize {
        self.blocks.iter().map(|b| b.capacity()).sum()
    }
}

impl EntryTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one row (or `rows` rows already summed).
    #[inline]
    pub fn add(&mut self, key: RawKey, hits: u64, rows: u64) {
        if rows == 1 {
            self.pending.push(Pending {
                key,
                hits: [hits as u32, (hits >> 32) as u32],
            });
        } else {
            self.summed.push((key, RawVal { hits, rows }));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.summed.is_empty()
    }

    /// An estimate of the memory held, to decide when to flush.
    pub fn approx_bytes(&self) -> usize {
        self.pending.capacity() * std::mem::size_of::<Pending>()
            + self.summed.capacity() * std::mem::size_of::<(RawKey, RawVal)>()
    }

    /// Encodes the rows as one block into `out` (with the strings of `strings` they
    /// use, renumbered from 0), and empties the table. Rows of the same key are summed
    /// into one entry when that would remove at least one row in ten
    /// ([`worth_summing`]); otherwise the block carries the rows as they came (the
    /// merge sums entries of one key wherever they are, so the result is the same),
    /// and the hash aggregation, which costs a tenth of a split on shuffled input where
    /// it finds nothing to sum, is skipped. A block's entries are grouped by file and,
    /// within a file, by commit ([`encode_block`]); their order within a group is the
    /// map's or the input's: the merge aggregates, so it does not depend on it.
    pub fn finish_into(&mut self, strings: &mut StringTable, out: &mut Vec<u8>) {
        // `take`, not `clear`: a splitter whose rows arrive sorted by file would
        // otherwise keep one peak-sized set of blocks per shard.
        let pending = std::mem::take(&mut self.pending);
        let summed = std::mem::take(&mut self.summed);
        let n = pending.len() + summed.len();
        if !worth_summing(&pending, &summed) {
            let row = |i: usize| match pending.get(i) {
                Some(p) => (p.key, p.val()),
                None => summed[i - pending.len()],
            };
            encode_block(strings, row, n, out);
            return;
        }
        let rows = pending.iter().map(|p| (p.key, p.val()));
        let mut entries: FxHashMap<RawKey, RawVal> = FxHashMap::default();
        entries.reserve(n);
        for (k, v) in rows.chain(summed.iter().copied()) {
            let e = entries.entry(k).or_default();
            e.hits = e.hits.saturating_add(v.hits);
            e.rows += v.rows;
        }
        drop(pending);
        let entries: Vec<(RawKey, RawVal)> = entries.into_iter().collect();
        encode_block(strings, |i| entries[i], entries.len(), out);
    }
}

/// Blocks of at most this many rows are always summed: their hash table stays in the
/// core's cache.
const ALWAYS_SUM: usize = 4096;

/// Larger blocks look at the keys in one `2^SAMPLE_BITS`-th of the hash space.
const SAMPLE_BITS: u32 = 4;

/// Whether summing the rows of a block would remove at least one in ten. Estimated
/// from the rows in one sixteenth of the (file, line) space: every copy of a key falls
/// in the same part, so that part sums away the same share as the whole (a sample of
/// rows would not: it would hold one copy of most repeated keys). Costs a multiply per
/// row and a small set, where summing costs a large hash table filled at random.
/// (r20u, shuffled, where nothing sums: 4 % less CPU than summing the first block of
/// every split, c20u 7 %; BENCHMARKS.md, issue 12.)
fn worth_summing(pending: &PendingRows, summed: &[(RawKey, RawVal)]) -> bool {
    if pending.len() + summed.len() <= ALWAYS_SUM {
        return true;
    }
    let keys = pending
        .iter()
        .map(|p| p.key)
        .chain(summed.iter().map(|e| e.0));
    let mut seen: FxHashSet<RawKey> = FxHashSet::default();
    let mut sampled = 0usize;
    for key in keys {
        let part =
            (u64::from(key.sl) << 32 | u64::from(key.file)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        if part >> (64 - SAMPLE_BITS) == 0 {
            sampled += 1;
            seen.insert(key);
        }
    }
    // Too few rows in the part to tell (a block of a few lines): summing is never
    // wrong.
    sampled < MIN_SAMPLE || seen.len() * 10 <= sampled * 9
}

/// The fewest sampled rows [`worth_summing`] decides on.
const MIN_SAMPLE: usize = 64;

/// Encodes entries `entry(0..n)` as one block into `out`, with the strings of
/// `strings` they use, the entries of each file together and, within a file, those of
/// each commit together: the merge then works on one file's sums at a time, and
/// projects a run of entries through one commit's line map, which stay in cache,
/// instead of all its files' and commits' at random. The order is a counting sort by
/// (file, commit) (numbered in order of first use), so it costs three passes, not a
/// comparison sort.
fn encode_block(
    strings: &mut StringTable,
    entry: impl Fn(usize) -> (RawKey, RawVal),
    n: usize,
    out: &mut Vec<u8>,
) {
    let local = &mut strings.local;
    local.resize(strings.spans.len(), u32::MAX);
    let dense = &mut strings.dense;
    dense.resize(strings.spans.len(), u32::MAX);
    let mut used: Vec<u32> = Vec::new();
    // Files first: their local ids are 0..files. Commits get a dense number of their
    // own (their local ids are interleaved with functions' and managers').
    let mut commits: Vec<u32> = Vec::new();
    let mut one_row_each = true;
    for i in 0..n {
        let (k, v) = entry(i);
        one_row_each &= v.rows == 1;
        let l = &mut local[k.file as usize];
        if *l == u32::MAX {
            *l = used.len() as u32;
            used.push(k.file);
        }
        let d = &mut dense[k.commit as usize];
        if *d == u32::MAX {
            *d = commits.len() as u32;
            commits.push(k.commit);
        }
    }
    // A block of many files and many commits would need more buckets than entries:
    // then it is ordered by file only.
    let by_commit = used.len().saturating_mul(commits.len()) <= n.max(4096);
    let n_commits = if by_commit { commits.len().max(1) } else { 1 };
    let bucket = |k: &RawKey, local: &[u32], dense: &[u32]| {
        let c = if by_commit {
            dense[k.commit as usize]
        } else {
            0
        };
        local[k.file as usize] as usize * n_commits + c as usize
    };
    let mut per_bucket: Vec<u32> = vec![0; used.len() * n_commits];
    for i in 0..n {
        let k = entry(i).0;
        per_bucket[bucket(&k, local, dense)] += 1;
        for id in [k.commit, k.func, k.manager] {
            let l = &mut local[id as usize];
            if *l == u32::MAX {
                *l = used.len() as u32;
                used.push(id);
            }
        }
    }
    let mut at = 0u32;
    for c in per_bucket.iter_mut() {
        let count = *c;
        *c = at;
        at += count;
    }
    let mut order = vec![0u32; n];
    for i in 0..n {
        let b = bucket(&entry(i).0, local, dense);
        order[per_bucket[b] as usize] = i as u32;
        per_bucket[b] += 1;
    }
    for c in commits {
        dense[c as usize] = u32::MAX;
    }
    let start = out.len();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[0; 4]);
    put_varint(out, used.len() as u64);
    for &id in &used {
        let (a, b) = strings.spans[id as usize];
        let s = &strings.arena[a..b];
        put_varint(out, s.len() as u64);
        out.extend_from_slice(s);
    }
    put_varint(out, if one_row_each { ONE_ROW_EACH } else { 0 });
    put_varint(out, n as u64);
    // Runs: the ordered entries of one (file, commit) each, until `n` are written.
    for run in order.chunk_by(|&a, &b| {
        let (ka, kb) = (entry(a as usize).0, entry(b as usize).0);
        (ka.file, ka.commit) == (kb.file, kb.commit)
    }) {
        let first = entry(run[0] as usize).0;
        put_varint(out, local[first.file as usize] as u64);
        put_varint(out, local[first.commit as usize] as u64);
        put_varint(out, run.len() as u64);
        for &i in run {
            let (k, v) = entry(i as usize);
            // An entry's varints go to a buffer on the stack, then to `out` at once: a
            // push per byte checked `out`'s capacity each time.
            let mut e = Varints::default();
            e.put(local[k.func as usize] as u64);
            e.put(local[k.manager as usize] as u64);
            e.put(k.sl as u64);
            e.put(v.hits);
            if !one_row_each {
                e.put(v.rows);
            }
            out.extend_from_slice(e.bytes());
        }
    }
    let body = (out.len() - start - 8) as u32;
    out[start + 4..start + 8].copy_from_slice(&body.to_le_bytes());
    for id in used {
        local[id as usize] = u32::MAX;
    }
}

/// Up to five varints (an entry) written on the stack.
struct Varints {
    buf: [u8; 5 * 10],
    len: usize,
}

impl Default for Varints {
    fn default() -> Self {
        Varints {
            buf: [0; 5 * 10],
            len: 0,
        }
    }
}

impl Varints {
    #[inline]
    fn put(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf[self.len] = (v as u8) | 0x80;
            self.len += 1;
            v >>= 7;
        }
        self.buf[self.len] = v as u8;
        self.len += 1;
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

fn put_varint(out: &mut Vec<u8>, v: u64) {
    let mut e = Varints::default();
    e.put(v);
    out.extend_from_slice(e.bytes());
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Cursor<'a> {
    fn err(&self, what: &'static str) -> SpillError {
        SpillError {
            offset: self.base + self.pos,
            what,
        }
    }

    #[inline]
    fn varint(&mut self) -> Result<u64, SpillError> {
        // Most values are one or two bytes (ids, lines, small counts).
        if let Some(&[b0, b1]) = self.buf.get(self.pos..self.pos + 2) {
            if b0 < 0x80 {
                self.pos += 1;
                return Ok(b0 as u64);
            }
            if b1 < 0x80 {
                self.pos += 2;
                return Ok((b0 & 0x7f) as u64 | (b1 as u64) << 7);
            }
        }
        self.varint_slow()
    }

    fn varint_slow(&mut self) -> Result<u64, SpillError> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| self.err("truncated varint"))?;
            self.pos += 1;
            if shift >= 64 {
                return Err(self.err("varint too long"));
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return Ok(v);
            }
            shift += 7;
        }
    }

    /// An index into a string table of `n` strings.
    #[inline]
    fn index(&mut self, n: u64) -> Result<u32, SpillError> {
        let v = self.varint()?;
        if v >= n {
            return Err(self.err("string index out of range"));
        }
        Ok(v as u32)
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], SpillError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or_else(|| self.err("truncated bytes"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
}

/// One decoded block: its string table and its entries.
pub struct Block<'a> {
    pub strings: Vec<&'a [u8]>,
    pub entries: Vec<(RawKey, RawVal)>,
}

/// Decodes every block of a chunk, calling `f` for each.
pub fn for_each_block<'a>(
    chunk: &'a [u8],
    mut f: impl FnMut(Block<'a>) -> Result<(), SpillError>,
) -> Result<(), SpillError> {
    let mut pos = 0;
    while pos < chunk.len() {
        if chunk.len() - pos < 8 || &chunk[pos..pos + 4] != MAGIC {
            return Err(SpillError {
                offset: pos,
                what: "bad block magic",
            });
        }
        let len = u32::from_le_bytes(chunk[pos + 4..pos + 8].try_into().unwrap()) as usize;
        let body_start = pos + 8;
        if chunk.len() - body_start < len {
            return Err(SpillError {
                offset: pos,
                what: "truncated block",
            });
        }
        let mut c = Cursor {
            buf: &chunk[body_start..body_start + len],
            pos: 0,
            base: body_start,
        };
        let n_strings = c.varint()? as usize;
        if n_strings > len {
            return Err(c.err("string count exceeds block"));
        }
        let mut strings = Vec::with_capacity(n_strings);
        for _ in 0..n_strings {
            let n = c.varint()? as usize;
            strings.push(c.bytes(n)?);
        }
        let flags = c.varint()?;
        if flags & !ONE_ROW_EACH != 0 {
            return Err(c.err("unknown block flags"));
        }
        let one_row_each = flags & ONE_ROW_EACH != 0;
        let n_rows = c.varint()? as usize;
        if n_rows > len {
            return Err(c.err("row count exceeds block"));
        }
        let mut entries = Vec::with_capacity(n_rows);
        let ns = strings.len() as u64;
        while entries.len() < n_rows {
            let (file, commit) = (c.index(ns)?, c.index(ns)?);
            let n = c.varint()? as usize;
            if n == 0 || n > n_rows - entries.len() {
                return Err(c.err("run of no rows, or of more than the block holds"));
            }
            for _ in 0..n {
                let (func, manager) = (c.index(ns)?, c.index(ns)?);
                let sl = c.varint()?;
                let sl = u32::try_from(sl).map_err(|_| c.err("line out of range"))?;
                let hits = c.varint()?;
                let rows = if one_row_each { 1 } else { c.varint()? };
                let key = RawKey {
                    file,
                    commit,
                    func,
                    manager,
                    sl,
                };
                entries.push((key, RawVal { hits, rows }));
            }
        }
        if c.pos != len {
            return Err(c.err("trailing bytes in block"));
        }
        f(Block { strings, entries })?;
        pos = body_start + len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_aggregation() {
        let (mut st, mut b) = (StringTable::new(), EntryTable::new());
        let (f, c, func, m) = (
            st.intern(b"a.c"),
            st.intern(b"c1"),
            st.intern(b"fn"),
            st.intern(b"m"),
        );
        let k = RawKey {
            file: f,
            commit: c,
            func,
            manager: m,
            sl: 3,
        };
        b.add(k, 5, 1);
        b.add(k, 7, 1);
        // Already summed rows aggregate with single ones.
        b.add(k, 1 << 40, 3);
        b.add(RawKey { sl: 300_000, ..k }, u64::MAX, 1);
        assert_eq!(std::mem::size_of::<Pending>(), 28);
        let mut out = Vec::new();
        b.finish_into(&mut st, &mut out);
        assert!(b.is_empty());
        // A second block in the same chunk with its own table.
        st.clear();
        let x = st.intern(b"b.c");
        b.add(
            RawKey {
                file: x,
                commit: x,
                func: x,
                manager: x,
                sl: 1,
            },
            1,
            1,
        );
        b.finish_into(&mut st, &mut out);
        let mut seen = Vec::new();
        for_each_block(&out, |blk| {
            for (k, v) in blk.entries {
                seen.push((blk.strings[k.file as usize].to_vec(), k.sl, v.hits, v.rows));
            }
            Ok(())
        })
        .unwrap();
        seen.sort();
        assert_eq!(
            seen,
            vec![
                (b"a.c".to_vec(), 3, 12 + (1 << 40), 5),
                (b"a.c".to_vec(), 300_000, u64::MAX, 1),
                (b"b.c".to_vec(), 1, 1, 1)
            ]
        );
    }

    /// (file, sl) and its (hits, rows).
    type Sum = ((Vec<u8>, u32), (u64, u64));

    /// Decoded sums, and each block's files in the order their entries come.
    fn decode(out: &[u8]) -> (Vec<Sum>, Vec<Vec<Vec<u8>>>) {
        let mut sums = std::collections::BTreeMap::new();
        let mut orders = Vec::new();
        for_each_block(out, |blk| {
            let mut order: Vec<Vec<u8>> = Vec::new();
            for (k, v) in &blk.entries {
                let f = blk.strings[k.file as usize].to_vec();
                if order.last() != Some(&f) {
                    order.push(f.clone());
                }
                let e = sums.entry((f, k.sl)).or_insert((0, 0));
                e.0 += v.hits;
                e.1 += v.rows;
            }
            orders.push(order);
            Ok(())
        })
        .unwrap();
        (sums.into_iter().collect(), orders)
    }

    /// Runs of equal values in `seq`, each value once: `true` if no value comes back
    /// after another one.
    fn contiguous<T: PartialEq + Clone>(seq: &[T]) -> bool {
        let mut runs: Vec<T> = Vec::new();
        for x in seq {
            if runs.last() != Some(x) {
                if runs.contains(x) {
                    return false;
                }
                runs.push(x.clone());
            }
        }
        true
    }

    #[test]
    fn blocks_order_entries_by_file_then_commit_and_fall_back_to_file_order() {
        // (files, commits, rows): the last needs more buckets than it has entries.
        for (files, commits, rows) in [(4u32, 6u32, 240u32), (100, 100, 200)] {
            let mut st = StringTable::new();
            let f: Vec<u32> = (0..files)
                .map(|i| st.intern(format!("f{i}.c").as_bytes()))
                .collect();
            let c: Vec<u32> = (0..commits)
                .map(|i| st.intern(format!("c{i}").as_bytes()))
                .collect();
            let m = st.intern(b"m");
            let mut t = EntryTable::new();
            for i in 0..rows {
                let key = RawKey {
                    file: f[(i % files) as usize],
                    commit: c[(i * 7 % commits) as usize],
                    func: m,
                    manager: m,
                    sl: i + 1,
                };
                t.add(key, i as u64, 1);
            }
            let mut out = Vec::new();
            t.finish_into(&mut st, &mut out);
            let mut seq = Vec::new();
            for_each_block(&out, |b| {
                for (k, v) in &b.entries {
                    let s = |id: u32| b.strings[id as usize].to_vec();
                    seq.push((s(k.file), s(k.commit), k.sl, v.hits));
                }
                Ok(())
            })
            .unwrap();
            assert_eq!(seq.len(), rows as usize, "every row once");
            let by_file: Vec<_> = seq.iter().map(|e| e.0.clone()).collect();
            assert!(contiguous(&by_file), "a file's entries are split");
            let by_pair: Vec<_> = seq.iter().map(|e| (e.0.clone(), e.1.clone())).collect();
            if files * commits <= rows.max(4096) {
                assert!(contiguous(&by_pair), "a (file, commit)'s entries are split");
            }
            for (file, commit, sl, hits) in &seq {
                let i = sl - 1;
                assert_eq!(*hits, i as u64);
                assert_eq!(file, format!("f{}.c", i % files).as_bytes());
                assert_eq!(commit, format!("c{}", i * 7 % commits).as_bytes());
            }
        }
    }

    #[test]
    fn blocks_with_few_repeated_keys_are_plain_and_sum_the_same() {
        let mut st = StringTable::new();
        let mut t = EntryTable::new();
        let files: Vec<u32> = (0..5)
            .map(|i| st.intern(format!("f{i}.c").as_bytes()))
            .collect();
        let m = st.intern(b"m");
        let key = |f: usize, sl: u32| RawKey {
            file: files[f],
            commit: m,
            func: m,
            manager: m,
            sl,
        };
        const KEYS: u32 = 20_000;
        let entries = |out: &[u8]| {
            let mut n = 0;
            for_each_block(out, |b| {
                n += b.entries.len();
                Ok(())
            })
            .unwrap();
            n
        };
        // Distinct keys, files interleaved, 2 % of them twice, and one already summed
        // entry: not worth summing, so every row is its own entry.
        let mut plain = Vec::new();
        for i in 0..KEYS {
            t.add(key(i as usize % 5, i), 1, 1);
            if i % 50 == 0 {
                t.add(key(i as usize % 5, i), 2, 1);
            }
        }
        t.add(key(2, 7), 10, 4); // row 7 is in f2.c
        t.finish_into(&mut st, &mut plain);
        assert_eq!(entries(&plain), (KEYS + KEYS / 50 + 1) as usize);
        let (sums, _) = decode(&plain);
        assert_eq!(sums.len(), KEYS as usize);
        for ((f, sl), (hits, rows)) in &sums {
            let mut want = if sl % 50 == 0 { (3, 2) } else { (1, 1) };
            if (f.as_slice(), *sl) == (&b"f2.c"[..], 7) {
                want = (want.0 + 10, want.1 + 4);
            }
            assert_eq!((*hits, *rows), want, "{f:?}:{sl}");
        }
        // Every key three times: summed, one entry per key.
        let mut summed = Vec::new();
        for _ in 0..3 {
            for i in 0..KEYS {
                t.add(key(i as usize % 5, i), 1, 1);
            }
        }
        t.finish_into(&mut st, &mut summed);
        assert_eq!(entries(&summed), KEYS as usize);
        assert!(decode(&summed).0.iter().all(|(_, v)| *v == (3, 3)));
        // A small block is summed whatever it holds.
        let mut small = Vec::new();
        t.add(key(0, 1), 1, 1);
        t.add(key(0, 1), 1, 1);
        t.add(key(1, 2), 1, 1);
        t.finish_into(&mut st, &mut small);
        assert_eq!(entries(&small), 2);
        // Every block holds each file's entries together, whatever the input order.
        for out in [&plain, &summed, &small] {
            for order in decode(out).1 {
                let mut seen = order.clone();
                seen.sort();
                seen.dedup();
                assert_eq!(
                    seen.len(),
                    order.len(),
                    "a file's entries are split: {order:?}"
                );
            }
        }
    }

    #[test]
    fn pending_rows_grow_a_block_at_a_time_and_keep_their_order() {
        let mut rows = PendingRows::default();
        let row = |i: u32| Pending {
            key: RawKey {
                file: i,
                commit: 0,
                func: 0,
                manager: 0,
                sl: i,
            },
            hits: [i, 0],
        };
        rows.push(row(0));
        assert!(rows.capacity() < 16, "a table with one row holds little");
        let n = 3 * PENDING_BLOCK as u32 + 1;
        for i in 1..n {
            rows.push(row(i));
        }
        assert_eq!(rows.len(), n as usize);
        // Four blocks, not a vector doubled to 4 * PENDING_BLOCK * 2 rows.
        assert_eq!(rows.capacity(), 4 * PENDING_BLOCK);
        assert!(rows.iter().map(|p| p.key.sl).eq(0..n));
        for i in [0, PENDING_BLOCK - 1, PENDING_BLOCK, n as usize - 1] {
            assert_eq!(rows.get(i).map(|p| p.hits[0]), Some(i as u32));
        }
        assert!(rows.get(n as usize).is_none());
    }

    #[test]
    fn column_indexes_over_one_table_find_short_and_long_strings() {
        let mut st = StringTable::new();
        let (mut a, mut b) = (StringIndex::default(), StringIndex::default());
        let words: Vec<Vec<u8>> = (0..3000)
            .map(|i| {
                // 1 to 80 bytes: both sides of the inline limit, and the empty string.
                let n = i % 81;
                (0..n).map(|j| b'a' + ((i * 7 + j) % 26) as u8).collect()
            })
            .collect();
        let ids: Vec<u32> = words.iter().map(|w| a.intern(&mut st, w).0).collect();
        for (w, &id) in words.iter().zip(&ids) {
            assert_eq!(a.intern(&mut st, w), (id, false), "{w:?}");
            assert_eq!(st.get(id), w.as_slice());
        }
        // Another column's index adds its own ids for the same strings.
        let (other, new) = b.intern(&mut st, &words[5]);
        assert!(new && other != ids[5]);
        assert_eq!(st.get(other), words[5].as_slice());
        assert_eq!(b.intern(&mut st, &words[5]), (other, false));
        assert_eq!(st.intern(&words[9]), st.intern(&words[9]));
        assert!(a.intern(&mut st, b"not there before").1);
    }

    #[test]
    fn corruption_is_an_error_not_a_panic() {
        let (mut st, mut b) = (StringTable::new(), EntryTable::new());
        let f = st.intern(b"a.c");
        let key = |file, func, sl| RawKey {
            file,
            commit: f,
            func,
            manager: f,
            sl,
        };
        b.add(key(f, f, 1), 1, 1);
        let mut out = Vec::new();
        b.finish_into(&mut st, &mut out);
        for cut in 0..out.len() {
            assert!(for_each_block(&out[..cut], |_| Ok(())).is_err() || cut == 0);
        }
        let mut bad = out.clone();
        let n = bad.len();
        bad[n - 7] = 0x7f; // the run's file index, far out of range
        assert!(for_each_block(&bad, |_| Ok(())).is_err());
        // Any byte of a two-run block set to anything: an error or a block, never a
        // panic or an allocation past the block's size.
        b.add(key(f, f, 2), 3, 2);
        let g = st.intern(b"b.c");
        b.add(key(g, g, 300), 1 << 40, 1);
        let mut two = Vec::new();
        b.finish_into(&mut st, &mut two);
        for i in 8..two.len() {
            for v in [0u8, 1, 2, 0x7f, 0x80, 0xff] {
                let mut bad = two.clone();
                bad[i] = v;
                let _ = for_each_block(&bad, |blk| {
                    assert!(blk.entries.len() <= bad.len());
                    Ok(())
                });
            }
        }
    }

    #[test]
    fn blocks_of_a_shared_string_table_carry_only_their_own_strings() {
        let mut strings = StringTable::new();
        let (mut a, mut b) = (EntryTable::new(), EntryTable::new());
        let key = |st: &mut StringTable, f: &str, c: &str, sl| RawKey {
            file: st.intern(f.as_bytes()),
            commit: st.intern(c.as_bytes()),
            func: st.intern(b"fn"),
            manager: st.intern(b"m"),
            sl,
        };
        let unused = strings.intern(b"unused");
        let ka = key(&mut strings, "a.c", "c1", 1);
        a.add(ka, 2, 1);
        b.add(key(&mut strings, "b.c", "c2", 9), 3, 2);
        a.add(ka, 5, 1);
        let mut out = Vec::new();
        a.finish_into(&mut strings, &mut out);
        b.finish_into(&mut strings, &mut out);
        assert!(a.is_empty() && b.is_empty());
        assert_eq!(strings.get(unused), b"unused");
        let mut blocks = Vec::new();
        for_each_block(&out, |blk| {
            let mut names: Vec<Vec<u8>> = blk.strings.iter().map(|s| s.to_vec()).collect();
            names.sort();
            let (k, v) = blk.entries[0];
            let s = |i: u32| String::from_utf8(blk.strings[i as usize].to_vec()).unwrap();
            blocks.push((
                names.len(),
                s(k.file),
                s(k.commit),
                s(k.func),
                k.sl,
                v.hits,
                v.rows,
            ));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            blocks,
            vec![
                (4, "a.c".into(), "c1".into(), "fn".into(), 1, 7, 2),
                (4, "b.c".into(), "c2".into(), "fn".into(), 9, 3, 2),
            ]
        );
    }
}
