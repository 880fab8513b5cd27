//! Per-manager sums spilled to a temporary file ([`RunFile`]): *runs* of
//! `(manager, slot, sum)` records, each sorted by manager index, then slot. Past
//! [`MERGE_AT`] runs they are merged into one, repeated pairs summed, so the file
//! grows with the distinct pairs, not with the rows; when the file is written they
//! are merged into one run indexed by manager ([`RunReader`]), an entry per manager
//! of the file, and each manager's records are read with one positioned read.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;

/// Bytes of a record: manager, slot, sum.
const RECORD: usize = 16;
/// Runs held before they are merged into one.
const MERGE_AT: usize = 16;
/// Bytes a cursor reads at a time.
const CURSOR_BYTES: usize = 64 << 10;

/// One record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Rec {
    pub(super) mgr: u32,
    pub(super) slot: u32,
    pub(super) sum: u64,
}

fn encode(r: Rec, out: &mut [u8]) {
    out[..4].copy_from_slice(&r.mgr.to_le_bytes());
    out[4..8].copy_from_slice(&r.slot.to_le_bytes());
    out[8..16].copy_from_slice(&r.sum.to_le_bytes());
}

fn decode(b: &[u8]) -> Rec {
    Rec {
        mgr: u32::from_le_bytes(b[..4].try_into().expect("4 bytes")),
        slot: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
        sum: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
    }
}

/// The runs written so far, in a temporary file.
pub(super) struct RunFile {
    out: BufWriter<File>,
    /// Records written.
    written: u64,
    /// Each run's records, `start..end`.
    runs: Vec<(u64, u64)>,
    /// Runs written, merged or not.
    spills: usize,
}

impl RunFile {
    pub(super) fn new() -> io::Result<Self> {
        Ok(RunFile {
            out: BufWriter::with_capacity(256 << 10, tempfile::tempfile()?),
            written: 0,
            runs: Vec::new(),
            spills: 0,
        })
    }

    /// Runs written, merged or not.
    #[cfg(test)]
    pub(super) fn runs(&self) -> usize {
        self.spills
    }

    /// Records in the file (runs merged: each pair once).
    #[cfg(test)]
    pub(super) fn records(&self) -> u64 {
        self.written
    }

    /// Appends a run: `recs` sorted by manager, then slot, no pair twice.
    pub(super) fn write_run(&mut self, recs: impl Iterator<Item = Rec>) -> io::Result<()> {
        let start = self.written;
        let mut b = [0u8; RECORD];
        for r in recs {
            encode(r, &mut b);
            self.out.write_all(&b)?;
            self.written += 1;
        }
        self.runs.push((start, self.written));
        self.spills += 1;
        if self.runs.len() >= MERGE_AT {
            self.merge_all(|_, _| {})?;
        }
        Ok(())
    }

    /// Merges every run into one in a new file, summing repeated pairs; calls
    /// `each(record, its index)` for every record written.
    fn merge_all(&mut self, mut each: impl FnMut(Rec, u64)) -> io::Result<()> {
        self.out.flush()?;
        let mut into = RunFile::new()?;
        {
            let file = self.out.get_ref();
            let mut cursors: Vec<Cursor> =
                self.runs.iter().map(|&(s, e)| Cursor::new(s, e)).collect();
            let mut b = [0u8; RECORD];
            loop {
                let mut best: Option<(u32, u32)> = None;
                for c in &mut cursors {
                    if let Some(r) = c.peek(file)? {
                        if best.is_none_or(|b| (r.mgr, r.slot) < b) {
                            best = Some((r.mgr, r.slot));
                        }
                    }
                }
                let Some((mgr, slot)) = best else { break };
                let mut r = Rec { mgr, slot, sum: 0 };
                for c in &mut cursors {
                    if let Some(x) = c.peek(file)? {
                        if (x.mgr, x.slot) == (mgr, slot) {
                            r.sum = super::sums::add_sum(r.sum, x.sum);
                            c.advance();
                        }
                    }
                }
                each(r, into.written);
                encode(r, &mut b);
                into.out.write_all(&b)?;
                into.written += 1;
            }
        }
        into.runs.push((0, into.written));
        into.spills = self.spills;
        *self = into;
        Ok(())
    }

    /// The runs merged into one, to read a manager at a time.
    pub(super) fn finish(mut self) -> io::Result<RunReader> {
        // Per manager of the file: where its records start (they end where the next
        // manager's start).
        let mut index: Vec<(u32, u64)> = Vec::new();
        self.merge_all(|r, at| {
            if index.last().is_none_or(|l| l.0 != r.mgr) {
                index.push((r.mgr, at));
            }
        })?;
        self.out.flush()?;
        let end = self.written;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        index.shrink_to_fit();
        Ok(RunReader {
            file,
            index,
            end,
            buf: Vec::new(),
            buf_at: 0,
            spills: self.spills,
        })
    }
}

/// A cursor over one run's records.
struct Cursor {
    end: u64,
    /// The next record to read into `buf`.
    next: u64,
    buf: Vec<u8>,
    /// Position in `buf` of the current record.
    at: usize,
}

impl Cursor {
    fn new(start: u64, end: u64) -> Self {
        Cursor {
            end,
            next: start,
            buf: Vec::new(),
            at: 0,
        }
    }

    fn peek(&mut self, file: &File) -> io::Result<Option<Rec>> {
        if self.at >= self.buf.len() {
            if self.next >= self.end {
                return Ok(None);
            }
            let n = (self.end - self.next).min((CURSOR_BYTES / RECORD) as u64) as usize;
            self.buf.resize(n * RECORD, 0);
            file.read_exact_at(&mut self.buf, self.next * RECORD as u64)?;
            self.next += n as u64;
            self.at = 0;
        }
        Ok(Some(decode(&self.buf[self.at..self.at + RECORD])))
    }

    fn advance(&mut self) {
        self.at += RECORD;
    }
}

/// The spilled sums as one run, read back a manager at a time.
pub(super) struct RunReader {
    file: File,
    /// Per manager (ascending): its first record.
    index: Vec<(u32, u64)>,
    /// Records in the run.
    end: u64,
    /// Records `buf_at..` as last read.
    buf: Vec<u8>,
    buf_at: u64,
    /// Runs written, merged or not.
    spills: usize,
}

impl RunReader {
    /// Runs written, merged or not.
    pub(super) fn runs(&self) -> usize {
        self.spills
    }

    /// The managers with records, ascending.
    pub(super) fn managers(&self) -> impl Iterator<Item = u32> + '_ {
        self.index.iter().map(|e| e.0)
    }

    /// Calls `f(slot, sum)` for every record of manager `mgr`, slots ascending. Read
    /// 64 KiB at a time and kept: managers asked in ascending order (a group's
    /// members) cost a read per 4,096 records, not one each.
    pub(super) fn each(&mut self, mgr: u32, mut f: impl FnMut(u32, u64)) -> io::Result<()> {
        let Ok(i) = self.index.binary_search_by_key(&mgr, |e| e.0) else {
            return Ok(());
        };
        let (mut at, end) = (
            self.index[i].1,
            self.index.get(i + 1).map_or(self.end, |e| e.1),
        );
        while at < end {
            let held = self.buf_at..self.buf_at + (self.buf.len() / RECORD) as u64;
            if !held.contains(&at) {
                let n = (self.end - at).min((CURSOR_BYTES / RECORD) as u64) as usize;
                self.buf.resize(n * RECORD, 0);
                self.file.read_exact_at(&mut self.buf, at * RECORD as u64)?;
                self.buf_at = at;
            }
            let from = (at - self.buf_at) as usize;
            let upto = ((end - self.buf_at) as usize).min(self.buf.len() / RECORD);
            for rec in self.buf[from * RECORD..upto * RECORD].chunks_exact(RECORD) {
                let r = decode(rec);
                f(r.slot, r.sum);
            }
            at = self.buf_at + upto as u64;
        }
        Ok(())
    }
}
