//! The bounds-checked reader every decoder uses.

use super::super::GoError;

/// A bounds-checked reader over one file's bytes (or a part of them starting at
/// `base`): every error names the file and the absolute offset.
pub(super) struct Rd<'a> {
    pub(super) file: &'a str,
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
    pub(super) base: usize,
}

impl<'a> Rd<'a> {
    pub(super) fn new(file: &'a str, buf: &'a [u8], base: usize) -> Self {
        Rd {
            file,
            buf,
            pos: 0,
            base,
        }
    }

    pub(super) fn err_at(&self, at: usize, problem: impl Into<String>) -> GoError {
        GoError::Corrupt {
            file: self.file.to_string(),
            offset: (self.base + at) as u64,
            problem: problem.into(),
        }
    }

    pub(super) fn err(&self, problem: impl Into<String>) -> GoError {
        self.err_at(self.pos, problem)
    }

    pub(super) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(super) fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], GoError> {
        if n > self.remaining() {
            return Err(self.err(format!(
                "truncated: {what} needs {n} bytes, {} left",
                self.remaining()
            )));
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    pub(super) fn u8(&mut self, what: &str) -> Result<u8, GoError> {
        Ok(self.bytes(1, what)?[0])
    }

    pub(super) fn u32(&mut self, what: &str, big: bool) -> Result<u32, GoError> {
        let b: [u8; 4] = self.bytes(4, what)?.try_into().expect("4 bytes");
        Ok(if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }

    pub(super) fn u64(&mut self, what: &str) -> Result<u64, GoError> {
        let b: [u8; 8] = self.bytes(8, what)?.try_into().expect("8 bytes");
        Ok(u64::from_le_bytes(b))
    }

    /// A ULEB128 value of at most 32 bits (all that Go writes).
    pub(super) fn uleb(&mut self, what: &str) -> Result<u32, GoError> {
        // Most counters and indexes are below 128: one byte.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u32::from(b));
            }
        }
        let start = self.pos;
        let mut v: u64 = 0;
        let mut shift = 0;
        loop {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(self.err_at(start, format!("truncated ULEB128 {what}")));
            };
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 28 {
                return Err(self.err_at(start, format!("ULEB128 {what} longer than 5 bytes")));
            }
        }
        u32::try_from(v)
            .map_err(|_| self.err_at(start, format!("ULEB128 {what} {v} exceeds 32 bits")))
    }

    pub(super) fn seek(&mut self, to: usize, what: &str) -> Result<(), GoError> {
        if to > self.buf.len() {
            return Err(self.err(format!(
                "{what} at {} is past the end ({} bytes)",
                self.base + to,
                self.base + self.buf.len()
            )));
        }
        self.pos = to;
        Ok(())
    }

    /// A string table: ULEB128 count, then ULEB128 length + bytes per string.
    pub(super) fn string_table(&mut self, what: &str) -> Result<Vec<&'a str>, GoError> {
        let n = self.uleb(&format!("{what} size"))? as usize;
        // Every string takes at least its length byte: checked before allocating.
        if n > self.remaining() {
            return Err(self.err(format!(
                "{what} claims {n} strings, only {} bytes left",
                self.remaining()
            )));
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let len = self.uleb(&format!("{what} string length"))? as usize;
            let at = self.pos;
            let b = self.bytes(len, what)?;
            let s = std::str::from_utf8(b)
                .map_err(|_| self.err_at(at, format!("{what}: string is not UTF-8")))?;
            out.push(s);
        }
        Ok(out)
    }
}

pub(super) fn get_str<'a>(
    r: &Rd<'_>,
    tab: &[&'a str],
    idx: u32,
    what: &str,
) -> Result<&'a str, GoError> {
    tab.get(idx as usize).copied().ok_or_else(|| {
        r.err(format!(
            "{what}: string index {idx} out of range (table has {})",
            tab.len()
        ))
    })
}
