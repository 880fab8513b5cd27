//! Reading blocks: every field checked, so a corrupt chunk is an error, not a panic.

use super::{RawKey, RawVal, SpillError, MAGIC, ONE_ROW_EACH};

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
pub(crate) struct Block<'a> {
    /// The block's strings (paths, commits, names, managers), which entries index.
    pub(crate) strings: Vec<&'a [u8]>,
    /// The block's entries, in the order written.
    pub(crate) entries: Vec<(RawKey, RawVal)>,
}

/// Decodes every block of a chunk, calling `f` for each.
pub(crate) fn for_each_block<'a>(
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
