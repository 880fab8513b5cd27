//! Per-manager sums spilled to a temporary file ([`RunFile`]): *runs* of
//! `(manager, slot, sum)` records, each sorted by manager index, then slot, merged
//! [`MERGE_AT`] at a time into runs of the next level (repeated pairs summed), so each
//! record is rewritten once per level; when the runs merged away outweigh the live
//! ones the file is written anew. When the file is written the runs are merged into
//! one indexed by manager ([`RunReader`]), an entry per manager of the file, and each
//! manager's records are read with one positioned read.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;

use super::hits::add_sum;

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
    /// Records written to the file, those of runs merged away included.
    written: u64,
    /// The runs not merged away, in the order written.
    runs: Vec<Run>,
    /// Records of runs merged away: past the live ones, the file is written anew.
    dead: u64,
    /// Runs spilled, merged or not.
    spills: usize,
}

/// A run: its records `start..end` and how many merges made it (0: spilled as is).
#[derive(Clone, Copy)]
struct Run {
    start: u64,
    end: u64,
    level: u32,
}

impl RunFile {
    pub(super) fn new() -> io::Result<Self> {
        Ok(RunFile {
            out: BufWriter::with_capacity(256 << 10, tempfile::tempfile()?),
            written: 0,
            runs: Vec::new(),
            dead: 0,
            spills: 0,
        })
    }

    /// Runs spilled, merged or not.
    #[cfg(test)]
    pub(super) fn runs(&self) -> usize {
        self.spills
    }

    /// Records of the runs not merged away.
    #[cfg(test)]
    pub(super) fn records(&self) -> u64 {
        self.runs.iter().map(|r| r.end - r.start).sum()
    }

    /// Appends a run: `recs` sorted by manager, then slot, no pair twice. Runs are
    /// merged as in a tiered LSM tree: [`MERGE_AT`] runs of one level become one of
    /// the next, so each record is rewritten once per level (a logarithm of the
    /// runs), and repeated pairs are summed as they meet.
    pub(super) fn write_run(&mut self, recs: impl Iterator<Item = Rec>) -> io::Result<()> {
        let start = self.written;
        let mut b = [0u8; RECORD];
        for r in recs {
            encode(r, &mut b);
            self.out.write_all(&b)?;
            self.written += 1;
        }
        self.runs.push(Run {
            start,
            end: self.written,
            level: 0,
        });
        self.spills += 1;
        loop {
            let n = self.runs.len();
            if n < MERGE_AT {
                break;
            }
            let level = self.runs[n - 1].level;
            if self.runs[n - MERGE_AT..].iter().any(|r| r.level != level) {
                break;
            }
            let merged: Vec<Run> = self.runs.drain(n - MERGE_AT..).collect();
            self.dead += merged.iter().map(|r| r.end - r.start).sum::<u64>();
            self.out.flush()?;
            let start = self.written;
            // Read through another handle of the file while appending to it.
            let file = self.out.get_ref().try_clone()?;
            let end = merge_into(&file, &merged, &mut self.out, start, |_, _| {})?;
            self.written = end;
            self.runs.push(Run {
                start,
                end,
                level: level + 1,
            });
        }
        let live: u64 = self.runs.iter().map(|r| r.end - r.start).sum();
        if self.dead > live.max(1 << 16) {
            self.rewrite()?;
        }
        Ok(())
    }

    /// Writes the live runs to a new file, without the runs merged away.
    fn rewrite(&mut self) -> io::Result<()> {
        self.out.flush()?;
        let mut into = RunFile::new()?;
        let mut b = [0u8; RECORD];
        for run in &self.runs {
            let mut c = Cursor::new(run.start, run.end);
            let start = into.written;
            while let Some(r) = c.peek(self.out.get_ref())? {
                encode(r, &mut b);
                into.out.write_all(&b)?;
                into.written += 1;
                c.advance();
            }
            into.runs.push(Run {
                start,
                end: into.written,
                level: run.level,
            });
        }
        into.spills = self.spills;
        *self = into;
        Ok(())
    }

    /// The runs merged into one in a new file, to read a manager at a time.
    pub(super) fn finish(mut self) -> io::Result<RunReader> {
        self.out.flush()?;
        let into = tempfile::tempfile()?;
        let mut out = BufWriter::with_capacity(256 << 10, into);
        // Per manager of the file: where its records start (they end where the next
        // manager's start).
        let mut index: Vec<(u32, u64)> = Vec::new();
        let end = merge_into(self.out.get_ref(), &self.runs, &mut out, 0, |r, at| {
            if index.last().is_none_or(|l| l.0 != r.mgr) {
                index.push((r.mgr, at));
            }
        })?;
        out.flush()?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
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

/// Merges `runs` of `file` into `out` (whose next record is number `at`), summing
/// repeated pairs; calls `each(record, its number)` for every record written;
/// returns the number after the last.
fn merge_into(
    file: &File,
    runs: &[Run],
    out: &mut BufWriter<File>,
    mut at: u64,
    mut each: impl FnMut(Rec, u64),
) -> io::Result<u64> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut cursors: Vec<Cursor> = runs.iter().map(|r| Cursor::new(r.start, r.end)).collect();
    let mut heap = BinaryHeap::with_capacity(cursors.len());
    for (i, c) in cursors.iter_mut().enumerate() {
        if let Some(r) = c.peek(file)? {
            heap.push(Reverse((r.mgr, r.slot, i)));
        }
    }
    let mut b = [0u8; RECORD];
    let mut pending: Option<Rec> = None;
    while let Some(Reverse((mgr, slot, i))) = heap.pop() {
        let c = &mut cursors[i];
        let r = c.peek(file)?.expect("a cursor in the heap has a record");
        c.advance();
        if let Some(r) = c.peek(file)? {
            heap.push(Reverse((r.mgr, r.slot, i)));
        }
        match &mut pending {
            Some(p) if (p.mgr, p.slot) == (mgr, slot) => {
                p.sum = add_sum(p.sum, r.sum);
            }
            _ => {
                if let Some(p) = pending.take() {
                    each(p, at);
                    encode(p, &mut b);
                    out.write_all(&b)?;
                    at += 1;
                }
                pending = Some(r);
            }
        }
    }
    if let Some(p) = pending {
        each(p, at);
        encode(p, &mut b);
        out.write_all(&b)?;
        at += 1;
    }
    Ok(at)
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

    /// Records in the run.
    #[cfg(test)]
    pub(super) fn records(&self) -> u64 {
        self.end
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
