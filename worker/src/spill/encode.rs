//! Writing blocks: a shard's rows gathered, summed where that pays, ordered by file and
//! commit, and encoded with the strings they use.

use rustc_hash::{FxHashMap, FxHashSet};

use super::{RawKey, RawVal, StringTable, MAGIC, ONE_ROW_EACH};

/// Entries of one shard, keyed by [`StringTable`] ids. Rows are appended as they come
/// and aggregated when the block is written: the aggregation table then holds one
/// shard's rows and stays in cache, where one table per shard filled row by row is hit
/// at random across all of them.
#[derive(Default)]
pub(crate) struct EntryTable {
    /// Rows as added; almost all carry `rows == 1`.
    pending: PendingRows,
    /// The rare entries added with `rows != 1` (already summed elsewhere).
    summed: Vec<(RawKey, RawVal)>,
}

/// One row of [`EntryTable::pending`]: 28 bytes (4-byte aligned, `hits` in two
/// halves) instead of 40 for a `(RawKey, RawVal)`, so a split's memory budget holds
/// 40 % more rows before it flushes: fewer, larger chunks.
#[derive(Clone, Copy)]
pub(super) struct Pending {
    pub(super) key: RawKey,
    pub(super) hits: [u32; 2],
}

impl Pending {
    /// The row's sums: its hits, one row.
    #[inline]
    pub(super) fn val(&self) -> RawVal {
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
pub(super) struct PendingRows {
    blocks: Vec<Vec<Pending>>,
}

/// Rows per block of [`PendingRows`] (112 KiB): a power of two, so the first block's
/// doubling ends exactly there.
pub(super) const PENDING_BLOCK: usize = 1 << 12;

impl PendingRows {
    #[inline]
    pub(super) fn push(&mut self, row: Pending) {
        match self.blocks.last_mut() {
            Some(b) if b.len() < PENDING_BLOCK => b.push(row),
            _ => self.grow(row),
        }
    }

    #[cold]
    pub(super) fn grow(&mut self, row: Pending) {
        let mut b = if self.blocks.is_empty() {
            Vec::new()
        } else {
            Vec::with_capacity(PENDING_BLOCK)
        };
        b.push(row);
        self.blocks.push(b);
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<&Pending> {
        self.blocks.get(i / PENDING_BLOCK)?.get(i % PENDING_BLOCK)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Pending> + '_ {
        self.blocks.iter().flatten()
    }

    pub(super) fn len(&self) -> usize {
        self.blocks.last().map_or(0, |last| {
            (self.blocks.len() - 1) * PENDING_BLOCK + last.len()
        })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    pub(super) fn capacity(&self) -> usize {
        self.blocks.iter().map(|b| b.capacity()).sum()
    }
}

impl EntryTable {
    /// An empty table.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds one row (or `rows` rows already summed).
    #[inline]
    pub(crate) fn add(&mut self, key: RawKey, hits: u64, rows: u64) {
        if rows == 1 {
            self.pending.push(Pending {
                key,
                hits: [hits as u32, (hits >> 32) as u32],
            });
        } else {
            self.summed.push((key, RawVal { hits, rows }));
        }
    }

    /// Whether no row was added since the last flush.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.summed.is_empty()
    }

    /// An estimate of the memory held, to decide when to flush.
    pub(crate) fn approx_bytes(&self) -> usize {
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
    pub(crate) fn finish_into(&mut self, strings: &mut StringTable, out: &mut Vec<u8>) {
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
            e.rows = e.rows.saturating_add(v.rows);
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
/// every split, c20u 7 %; BENCHMARKS.md.)
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
