//! Interned strings: one arena per splitter, hash indexes over it.

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
pub(crate) struct StringTable {
    pub(super) arena: Vec<u8>,
    /// `(start, end)` in `arena` of each id.
    pub(super) spans: Vec<(usize, usize)>,
    index: StringIndex,
    /// Scratch while a block is written: the block-local id of each string
    /// (`u32::MAX`: not in the block yet).
    pub(super) local: Vec<u32>,
    /// Scratch while a block is written: the number of each commit in the block, for
    /// the (file, commit) order (`u32::MAX`: not seen yet).
    pub(super) dense: Vec<u32>,
}

/// The hash of a string as the indexes of a [`StringTable`] use it.
#[inline]
pub(crate) fn hash_bytes(s: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    h.write(s);
    h.finish()
}

/// A hash index from strings to ids of one [`StringTable`]. An index holds ids only:
/// it must always be used with the table it was filled from.
///
/// Open addressing with linear probing over one vector of entries, at most 3/4 full:
/// where a string is looked up first follows from its hash alone, so a caller that
/// knows a lookup is coming can start loading that entry early
/// ([`StringIndex::prefetch`]). The split's function-name lookup, random over an
/// index of ~500 KiB once per row, waited on that load more than on anything else
/// of the row.
#[derive(Default)]
pub(crate) struct StringIndex {
    slots: Vec<IndexEntry>,
    /// `slots.len()` is `1 << bits` (0: no slots yet).
    bits: u32,
    /// Entries held.
    used: usize,
}

/// An indexed string beside its id: short strings (function names, most paths) are
/// kept in the entry itself, so a lookup reads one cache line of the table and not
/// also the arena; longer ones are compared in the arena.
#[derive(Clone, Copy)]
struct IndexEntry {
    /// [`EMPTY`]: a free slot.
    id: u32,
    len: u32,
    /// The string when `len <= INLINE`, else its start in the arena (first 8 bytes).
    bytes: [u8; INLINE],
}

/// The id of a free slot.
const EMPTY: u32 = u32::MAX;

/// The longest string kept in an [`IndexEntry`] (32 bytes in all).
const INLINE: usize = 24;

impl IndexEntry {
    const FREE: IndexEntry = IndexEntry {
        id: EMPTY,
        len: 0,
        bytes: [0; INLINE],
    };

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
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
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
    /// The slot where a string of hash `hash` is looked up first (Fibonacci hashing of
    /// the hash: its top bits, well mixed).
    #[inline]
    fn home(&self, hash: u64) -> usize {
        (hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits)) as usize
    }

    /// Starts loading the entry where a string of hash `hash` is looked up first, so
    /// that [`StringIndex::intern_hashed`] finds it in cache a little later.
    #[inline]
    pub(crate) fn prefetch(&self, hash: u64) {
        if self.bits == 0 {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let p = self.slots.as_ptr().wrapping_add(self.home(hash));
            // SAFETY: a prefetch is a hint; it never faults, whatever the address.
            unsafe {
                std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
            };
        }
    }

    /// The id of `s` in `table` through this index, and whether it was added just now
    /// (a string added to the table through another index is added again).
    #[inline]
    pub(crate) fn intern(&mut self, table: &mut StringTable, s: &[u8]) -> (u32, bool) {
        self.intern_hashed(table, s, hash_bytes(s))
    }

    /// [`StringIndex::intern`] of `s` whose [`hash_bytes`] is `hash`.
    #[inline]
    pub(crate) fn intern_hashed(
        &mut self,
        table: &mut StringTable,
        s: &[u8],
        hash: u64,
    ) -> (u32, bool) {
        if self.bits != 0 {
            let mask = self.slots.len() - 1;
            let mut i = self.home(hash);
            loop {
                let e = &self.slots[i];
                if e.id == EMPTY {
                    break;
                }
                if e.matches(&table.arena, s) {
                    return (e.id, false);
                }
                i = (i + 1) & mask;
            }
        }
        self.insert(table, s, hash)
    }

    /// Adds `s` (not in the index) to `table` and to the index.
    #[inline(never)]
    fn insert(&mut self, table: &mut StringTable, s: &[u8], hash: u64) -> (u32, bool) {
        if 4 * (self.used + 1) > 3 * self.slots.len() {
            self.grow(&table.arena);
        }
        let start = table.arena.len();
        let id = table.push(s);
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
        self.place(entry, hash);
        self.used += 1;
        (id, true)
    }

    /// Puts `entry` in the first free slot from its home.
    fn place(&mut self, entry: IndexEntry, hash: u64) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(hash);
        while self.slots[i].id != EMPTY {
            i = (i + 1) & mask;
        }
        self.slots[i] = entry;
    }

    /// Twice the slots (16 at first), every entry placed again.
    fn grow(&mut self, arena: &[u8]) {
        let bits = (self.bits + 1).max(4);
        let old = std::mem::replace(&mut self.slots, vec![IndexEntry::FREE; 1 << bits]);
        self.bits = bits;
        for e in old.into_iter().filter(|e| e.id != EMPTY) {
            self.place(e, hash_bytes(e.text(arena)));
        }
    }

    /// An estimate of the memory held.
    pub(crate) fn approx_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<IndexEntry>()
    }
}

impl StringTable {
    /// An empty table.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The id of `s` in this table.
    pub(crate) fn intern(&mut self, s: &[u8]) -> u32 {
        let mut index = std::mem::take(&mut self.index);
        let (id, _) = index.intern(self, s);
        self.index = index;
        id
    }

    /// Adds `s` under a new id, without looking for it.
    pub(crate) fn push(&mut self, s: &[u8]) -> u32 {
        let id = self.spans.len() as u32;
        let start = self.arena.len();
        self.arena.extend_from_slice(s);
        self.spans.push((start, self.arena.len()));
        id
    }

    /// The string of `id`.
    #[inline]
    pub(crate) fn get(&self, id: u32) -> &[u8] {
        let (a, b) = self.spans[id as usize];
        &self.arena[a..b]
    }

    /// How many strings the table holds (ids are `0..len`).
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// An estimate of the memory held.
    pub(crate) fn approx_bytes(&self) -> usize {
        self.arena.capacity()
            + self.spans.capacity() * std::mem::size_of::<(usize, usize)>()
            + self.index.approx_bytes()
            + (self.local.capacity() + self.dense.capacity()) * 4
    }

    /// Forgets every string (and frees the tables). Ids handed out before are invalid:
    /// only call this when no [`EntryTable`] holds entries.
    #[cfg(test)]
    pub(crate) fn clear(&mut self) {
        *self = StringTable::default();
    }
}
