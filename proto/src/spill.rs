//! Rows travel from the split phase to the merge phase as *spill chunks*: immutable
//! objects made of self-contained blocks. A block has its own string table, so
//! chunks written by different splitters can be read in any order and concatenated.
//!
//! ```text
//! block   := "CMS1" u32le(body_len) body
//! body    := varint(n_strings) { varint(len) bytes }*  varint(n_rows) { row }*
//! row     := varint(file) varint(commit) varint(func) varint(manager)
//!            varint(sl) varint(hits) varint(rows)
//! ```
//!
//! Strings are indices into the block's table. `rows` is how many input rows were
//! pre-aggregated into the entry (identical file, commit, func, manager and line), so
//! the merge can still count lost rows and pick function names by row frequency.

use rustc_hash::FxHashMap;

const MAGIC: &[u8; 4] = b"CMS1";

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
#[derive(Default)]
pub struct StringTable {
    index: FxHashMap<Box<[u8]>, u32>,
    strings: Vec<Box<[u8]>>,
    bytes: usize,
    /// Scratch while a block is written: the block-local id of each string
    /// (`u32::MAX`: not in the block yet).
    local: Vec<u32>,
}

impl StringTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `s` in this table.
    pub fn intern(&mut self, s: &[u8]) -> u32 {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        let b: Box<[u8]> = s.into();
        self.bytes += b.len();
        self.strings.push(b.clone());
        self.index.insert(b, id);
        id
    }

    /// The string of `id`.
    pub fn get(&self, id: u32) -> &[u8] {
        &self.strings[id as usize]
    }

    /// An estimate of the memory held.
    pub fn approx_bytes(&self) -> usize {
        self.bytes + self.strings.len() * 48
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
    pending: Vec<Pending>,
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

impl EntryTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one row (or `rows` rows already summed).
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

    /// Aggregates the rows by key and encodes them as one block into `out` (with the
    /// strings of `strings` they use, renumbered from 0), and empties the table. Entry
    /// order is the map's: the merge aggregates, so it does not depend on it.
    pub fn finish_into(&mut self, strings: &mut StringTable, out: &mut Vec<u8>) {
        // `take`, not `clear`: a splitter whose rows arrive sorted by file would
        // otherwise keep one peak-sized buffer per shard.
        let pending = std::mem::take(&mut self.pending);
        let summed = std::mem::take(&mut self.summed);
        let mut entries: FxHashMap<RawKey, RawVal> = FxHashMap::default();
        entries.reserve(pending.len() + summed.len());
        let rows = pending.iter().map(|p| {
            let hits = p.hits[0] as u64 | (p.hits[1] as u64) << 32;
            (p.key, RawVal { hits, rows: 1 })
        });
        for (k, v) in rows.chain(summed) {
            let e = entries.entry(k).or_default();
            e.hits = e.hits.saturating_add(v.hits);
            e.rows += v.rows;
        }
        let local = &mut strings.local;
        local.resize(strings.strings.len(), u32::MAX);
        let mut used: Vec<u32> = Vec::new();
        for k in entries.keys() {
            for id in [k.file, k.commit, k.func, k.manager] {
                let l = &mut local[id as usize];
                if *l == u32::MAX {
                    *l = used.len() as u32;
                    used.push(id);
                }
            }
        }
        let start = out.len();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&[0; 4]);
        put_varint(out, used.len() as u64);
        for &id in &used {
            let s = &strings.strings[id as usize];
            put_varint(out, s.len() as u64);
            out.extend_from_slice(s);
        }
        put_varint(out, entries.len() as u64);
        for (k, v) in entries.iter() {
            for id in [k.file, k.commit, k.func, k.manager] {
                put_varint(out, local[id as usize] as u64);
            }
            put_varint(out, k.sl as u64);
            put_varint(out, v.hits);
            put_varint(out, v.rows);
        }
        let body = (out.len() - start - 8) as u32;
        out[start + 4..start + 8].copy_from_slice(&body.to_le_bytes());
        for id in used {
            local[id as usize] = u32::MAX;
        }
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
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

    fn varint(&mut self) -> Result<u64, SpillError> {
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
        let n_rows = c.varint()? as usize;
        if n_rows > len {
            return Err(c.err("row count exceeds block"));
        }
        let mut entries = Vec::with_capacity(n_rows);
        let ns = strings.len() as u64;
        for _ in 0..n_rows {
            let mut ids = [0u32; 4];
            for id in ids.iter_mut() {
                let v = c.varint()?;
                if v >= ns {
                    return Err(c.err("string index out of range"));
                }
                *id = v as u32;
            }
            let sl = c.varint()?;
            let sl = u32::try_from(sl).map_err(|_| c.err("line out of range"))?;
            let hits = c.varint()?;
            let rows = c.varint()?;
            let key = RawKey {
                file: ids[0],
                commit: ids[1],
                func: ids[2],
                manager: ids[3],
                sl,
            };
            entries.push((key, RawVal { hits, rows }));
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

    #[test]
    fn corruption_is_an_error_not_a_panic() {
        let (mut st, mut b) = (StringTable::new(), EntryTable::new());
        let f = st.intern(b"a.c");
        b.add(
            RawKey {
                file: f,
                commit: f,
                func: f,
                manager: f,
                sl: 1,
            },
            1,
            1,
        );
        let mut out = Vec::new();
        b.finish_into(&mut st, &mut out);
        for cut in 0..out.len() {
            assert!(for_each_block(&out[..cut], |_| Ok(())).is_err() || cut == 0);
        }
        let mut bad = out.clone();
        let n = bad.len();
        bad[n - 7] = 0x7f; // the row's file index, far out of range
        assert!(for_each_block(&bad, |_| Ok(())).is_err());
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
