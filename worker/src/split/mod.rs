//! The map phase: read one input's rows and partition them by the stable file hash
//! ([`covmerge_proto::shard_hash`]) into per-shard spill chunks, pre-aggregating
//! identical (file, commit, func, manager, line) rows on the way.
//!
//! One input is parsed by several threads: the calling thread cuts the decompressed
//! stream into line-aligned pieces (never inside a quoted field) and numbers their
//! first lines; with one thread, it parses them itself. A piece without any `"` is
//! parsed by a vectorized fast path ([`for_each_unquoted`]), others by the csv crate.
//! Each parse thread interns strings into one table of its own and appends rows to
//! per-shard tables, aggregated when flushed. Memory is bounded by a budget shared by
//! the parse threads: a thread whose tables hold more than its share flushes every
//! non-empty one as a chunk.

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use covmerge_proto::{
    shard_hash::shard_of,
    spill::{EntryTable, RawKey, StringTable},
    wire::{BadRow, SplitOutcome},
    ShardId,
};

use crate::input::{for_each_unquoted, Header, InputError, Pos, Row, RowProblem, RowReader};

/// How a split runs.
#[derive(Debug, Clone, Copy)]
pub struct SplitSettings {
    pub shards: u32,
    /// Stop reading once more than this many bad rows were seen (the job fails anyway).
    pub max_bad_rows: u64,
    /// Bytes the shard builders of all parse threads may hold before flushing chunks.
    pub memory_budget: usize,
    /// Parse threads. With 1, the calling thread reads, cuts and parses itself.
    pub threads: usize,
}

/// Bad rows reported by name (the count covers all of them).
const BAD_ROW_SAMPLES: usize = 5;

/// Decompressed bytes handed to a parse thread at once.
const PIECE: usize = 1 << 20;

/// Why a split failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("writing spill chunk for shard {shard}: {message}")]
    Emit {
        shard: ShardId,
        message: String,
        transient: bool,
    },
}

/// Stores a finished chunk of a shard. Called from several threads.
pub type Emit<'a> = dyn Fn(ShardId, Vec<u8>) -> Result<(), SplitError> + Sync + 'a;

/// The strings of one parse thread, whatever their shard: each field of a row is looked
/// up once in this small table, so shuffled input costs no more than sorted.
struct ThreadStrings {
    table: StringTable,
    /// The id of the last string seen per field, to skip hashing runs of equal values.
    last: [u32; 4],
    /// The shard of each string used as a file path (`u32::MAX`: not computed yet).
    shard: Vec<u32>,
}

impl ThreadStrings {
    fn new() -> Self {
        ThreadStrings {
            table: StringTable::new(),
            last: [u32::MAX; 4],
            shard: Vec::new(),
        }
    }

    fn id(&mut self, slot: usize, s: &[u8]) -> u32 {
        let last = self.last[slot];
        if last != u32::MAX && self.table.get(last) == s {
            return last;
        }
        let id = self.table.intern(s);
        self.last[slot] = id;
        id
    }

    /// The shard of file id `file` (whose path is `path`).
    fn shard(&mut self, file: u32, path: &[u8], shards: u32) -> ShardId {
        let i = file as usize;
        if i >= self.shard.len() {
            self.shard.resize(i + 1, u32::MAX);
        }
        if self.shard[i] == u32::MAX {
            self.shard[i] = shard_of(path, shards).0;
        }
        ShardId(self.shard[i])
    }

    fn approx_bytes(&self) -> usize {
        self.table.approx_bytes() + self.shard.len() * 4
    }

    /// Forgets every string; only once every shard's entries are flushed.
    fn clear(&mut self) {
        *self = ThreadStrings::new();
    }
}

/// State shared by the parse threads of one split.
struct Shared<'a> {
    name: &'a str,
    settings: SplitSettings,
    header: Header,
    bad: AtomicU64,
    stop: AtomicBool,
    emit: &'a Emit<'a>,
}

/// One parse thread: its builders and what it counted. `next_piece` hands out
/// numbered line-aligned pieces until it returns `None`.
fn parse_thread(
    sh: &Shared<'_>,
    mut next_piece: impl FnMut() -> Result<Option<Piece>, SplitError>,
) -> Result<SplitOutcome, SplitError> {
    let n = sh.settings.shards.max(1);
    let budget = sh.settings.memory_budget / sh.settings.threads.max(1);
    let mut strings = ThreadStrings::new();
    let mut tables: Vec<EntryTable> = (0..n).map(|_| EntryTable::new()).collect();
    let mut outcome = SplitOutcome::default();
    let flush_all =
        |tables: &mut Vec<EntryTable>, strings: &mut ThreadStrings| -> Result<(), SplitError> {
            for (i, t) in tables.iter_mut().enumerate() {
                if !t.is_empty() {
                    let mut chunk = Vec::new();
                    t.finish_into(&mut strings.table, &mut chunk);
                    (sh.emit)(ShardId(i as u32), chunk)?;
                }
            }
            strings.clear();
            Ok(())
        };
    while let Some(Piece {
        first_line,
        bytes,
        quoted,
    }) = next_piece()?
    {
        if sh.stop.load(Ordering::Relaxed) {
            break;
        }
        let handle = |pos: Pos, row: Result<Row<'_>, RowProblem>| {
            outcome.counts.rows_in += 1;
            let row = match row {
                Ok(r) => r,
                Err(problem) => {
                    outcome.counts.rows_bad += 1;
                    // Recount from the piece: csv's own line count skips blank lines.
                    // csv places a record after the previous terminator, before any
                    // blank lines: step over them to the record itself.
                    let mut upto = (pos.byte as usize).min(bytes.len());
                    while upto < bytes.len() && matches!(bytes[upto], b'\n' | b'\r') {
                        upto += 1;
                    }
                    let line = first_line + count_newlines(&bytes[..upto]);
                    outcome.bad_rows.push(BadRow {
                        input: sh.name.to_string(),
                        line,
                        problem: problem.to_string(),
                    });
                    outcome.bad_rows.sort_by_key(|b| b.line);
                    outcome.bad_rows.truncate(BAD_ROW_SAMPLES);
                    if sh.bad.fetch_add(1, Ordering::Relaxed) + 1 > sh.settings.max_bad_rows {
                        sh.stop.store(true, Ordering::Relaxed);
                        return false;
                    }
                    return true;
                }
            };
            let file = strings.id(0, row.file);
            let shard = strings.shard(file, row.file, n);
            let key = RawKey {
                file,
                commit: strings.id(1, row.commit),
                func: strings.id(2, row.func),
                manager: strings.id(3, row.manager),
                sl: row.sl,
            };
            tables[shard.index()].add(key, row.hits, 1);
            true
        };
        if !quoted {
            for_each_unquoted(&sh.header, &bytes, first_line, handle);
        } else {
            RowReader::from_header(&sh.header, &bytes[..], first_line).for_each(handle)?;
        }
        let held: usize =
            strings.approx_bytes() + tables.iter().map(|t| t.approx_bytes()).sum::<usize>();
        if held > budget {
            flush_all(&mut tables, &mut strings)?;
        }
    }
    flush_all(&mut tables, &mut strings)?;
    Ok(outcome)
}

/// Where to cut `buf` so the piece ends with a complete line: after the last `\n` that
/// is not inside a quoted field. Pieces always start outside quotes (they start after
/// such a newline), so the quote parity is computed from the start of `buf`.
/// `quoted`: whether `buf` holds a `"` at all.
fn cut_point(buf: &[u8], quoted: bool) -> Option<usize> {
    if !quoted {
        return buf.iter().rposition(|&b| b == b'\n').map(|i| i + 1);
    }
    let mut in_quotes = false;
    let mut cut = None;
    for (i, &b) in buf.iter().enumerate() {
        match b {
            b'"' => in_quotes = !in_quotes,
            b'\n' if !in_quotes => cut = Some(i + 1),
            _ => {}
        }
    }
    cut
}

fn read_full(
    input: &mut impl Read,
    buf: &mut Vec<u8>,
    want: usize,
) -> Result<usize, std::io::Error> {
    let start = buf.len();
    buf.resize(start + want, 0);
    let mut filled = 0;
    while filled < want {
        match input.read(&mut buf[start + filled..]) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                buf.truncate(start + filled);
                return Err(e);
            }
        }
    }
    buf.truncate(start + filled);
    Ok(filled)
}

/// Newlines in `buf`, counted in byte lanes that the compiler vectorizes (a plain
/// `filter().count()` widens every byte to a usize).
fn count_newlines(buf: &[u8]) -> u64 {
    buf.chunks(255)
        .map(|c| {
            c.iter()
                .fold(0u8, |n, &b| n.wrapping_add(u8::from(b == b'\n'))) as u64
        })
        .sum()
}

/// A line-aligned part of an input.
struct Piece {
    /// The line number of its first line.
    first_line: u64,
    bytes: Vec<u8>,
    /// Whether it may hold a `"` (false: it certainly holds none).
    quoted: bool,
}

/// Cuts a decompressed stream into numbered, line-aligned pieces.
struct Pieces<'e, R> {
    input: R,
    /// Read but not yet handed out.
    buf: Vec<u8>,
    /// The line number of `buf`'s first line.
    next_line: u64,
    read_err: &'e dyn Fn(std::io::Error) -> InputError,
}

impl<R: Read> Pieces<'_, R> {
    /// The next piece; `None` at the end.
    fn next(&mut self) -> Result<Option<Piece>, SplitError> {
        loop {
            let got = read_full(&mut self.input, &mut self.buf, PIECE).map_err(self.read_err)?;
            // A piece is part of `buf`: without a quote in `buf`, it has none either.
            let quoted = memchr::memchr(b'"', &self.buf).is_some();
            let bytes = if got == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                std::mem::take(&mut self.buf)
            } else {
                match cut_point(&self.buf, quoted) {
                    Some(cut) => {
                        let rest = self.buf.split_off(cut);
                        std::mem::replace(&mut self.buf, rest)
                    }
                    None => continue, // a line longer than a piece: read more
                }
            };
            let first_line = self.next_line;
            self.next_line += count_newlines(&bytes);
            return Ok(Some(Piece {
                first_line,
                bytes,
                quoted,
            }));
        }
    }
}

/// Splits one input. `emit(shard, chunk)` stores a finished chunk.
/// Rows counted: `rows_in` (every data row) and `rows_bad`; the first bad rows are named.
pub fn split_input<R: Read>(
    name: &str,
    mut input: R,
    settings: SplitSettings,
    emit: &Emit<'_>,
) -> Result<SplitOutcome, SplitError> {
    let read_err = |e: std::io::Error| InputError::Read {
        input: name.to_string(),
        line: 0,
        problem: e.to_string(),
    };
    // The header line, read byte-wise up to its newline.
    let mut buf: Vec<u8> = Vec::with_capacity(PIECE * 2);
    let header_end = loop {
        if let Some(i) = buf.iter().position(|&b| b == b'\n') {
            break i + 1;
        }
        if read_full(&mut input, &mut buf, 64 << 10).map_err(read_err)? == 0 {
            break buf.len();
        }
    };
    let header = RowReader::new(name, &buf[..header_end])?.header();
    buf.drain(..header_end);
    let shared = Shared {
        name,
        settings,
        header,
        bad: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        emit,
    };
    let mut pieces = Pieces {
        input,
        buf,
        next_line: 2,
        read_err: &read_err,
    };
    let threads = settings.threads.max(1);
    if threads == 1 {
        // One thread reads, cuts and parses: no hand-off, for one-core workers.
        let mut outcome = parse_thread(&shared, || {
            if shared.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            pieces.next()
        })?;
        outcome.bad_rows.sort_by_key(|b| b.line);
        outcome.bad_rows.truncate(BAD_ROW_SAMPLES);
        return Ok(outcome);
    }
    let (tx, rx) = mpsc::sync_channel::<Piece>(threads * 2);
    let rx = Arc::new(Mutex::new(rx));
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let rx = rx.clone();
                let sh = &shared;
                scope.spawn(move || parse_thread(sh, || Ok(rx.lock().unwrap().recv().ok())))
            })
            .collect();
        // Producer: this thread cuts pieces for the parse threads.
        let produced: Result<(), SplitError> = (|| {
            while !shared.stop.load(Ordering::Relaxed) {
                let Some(piece) = pieces.next()? else {
                    return Ok(());
                };
                if tx.send(piece).is_err() {
                    return Ok(());
                }
            }
            Ok(())
        })();
        drop(tx);
        if produced.is_err() {
            shared.stop.store(true, Ordering::Relaxed);
        }
        let mut outcome = SplitOutcome::default();
        let mut first_err = produced.err();
        for h in handles {
            match h.join().expect("parse thread panicked") {
                Ok(o) => {
                    outcome.counts.rows_in += o.counts.rows_in;
                    outcome.counts.rows_bad += o.counts.rows_bad;
                    outcome.bad_rows.extend(o.bad_rows);
                }
                Err(e) => {
                    shared.stop.store(true, Ordering::Relaxed);
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        outcome.bad_rows.sort_by_key(|b| b.line);
        outcome.bad_rows.truncate(BAD_ROW_SAMPLES);
        Ok(outcome)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newlines_are_counted_across_lanes() {
        for len in [0, 1, 254, 255, 256, 10_000] {
            let buf: Vec<u8> = (0..len)
                .map(|i| if i % 3 == 0 { b'\n' } else { b'x' })
                .collect();
            let want = buf.iter().filter(|&&b| b == b'\n').count() as u64;
            assert_eq!(count_newlines(&buf), want, "len {len}");
        }
        assert_eq!(count_newlines(&[b'\n'; 1000]), 1000);
    }

    #[test]
    fn cuts_never_split_a_quoted_field() {
        let cut = |b: &[u8]| cut_point(b, b.contains(&b'"'));
        assert_eq!(cut(b"a,b\nc,d\ne"), Some(8));
        assert_eq!(cut(b"a,\"x\ny\"\nb,\"open\nstill"), Some(8));
        assert_eq!(cut(b"no newline"), None);
    }

    fn run(text: &str, threads: usize, max_bad: u64) -> (SplitOutcome, u64) {
        let rows = AtomicU64::new(0);
        let emit = |_s: ShardId, chunk: Vec<u8>| -> Result<(), SplitError> {
            covmerge_proto::spill::for_each_block(&chunk, |b| {
                rows.fetch_add(
                    b.entries.iter().map(|(_, v)| v.rows).sum::<u64>(),
                    Ordering::Relaxed,
                );
                Ok(())
            })
            .unwrap();
            Ok(())
        };
        let settings = SplitSettings {
            shards: 4,
            max_bad_rows: max_bad,
            memory_budget: 4096,
            threads,
        };
        let o = split_input("t.csv", text.as_bytes(), settings, &emit).unwrap();
        (o, rows.load(Ordering::Relaxed))
    }

    #[test]
    fn every_row_lands_once_and_lines_are_numbered_across_pieces() {
        let mut text =
            String::from("file_path,kernel_repo,kernel_commit,func_name,manager,sl,hit_count\n");
        for i in 0..300_000u32 {
            if i == 250_000 {
                text.push_str("f.c,r,c,\"quoted\nfunc\",m,1,1\n"); // a record spanning lines
            }
            text.push_str(&format!(
                "f{}.c,r,c{},fn,m{},{},{}\n",
                i % 97,
                i % 5,
                i % 3,
                i % 500 + 1,
                i
            ));
        }
        text.push_str("bad.c,r,c,fn,m,NaN,1\n");
        // Blank lines count as lines.
        text.push_str("\n\nbad2.c,r,c,fn,m,1,x\n");
        for threads in [1, 3] {
            let (o, rows) = run(&text, threads, 2);
            assert_eq!(o.counts.rows_in, 300_003);
            assert_eq!(o.counts.rows_bad, 2);
            assert_eq!(rows, 300_001);
            // header + 300,000 rows + the two-line quoted record, then the bad row.
            assert_eq!(o.bad_rows[0].line, 300_004, "threads {threads}");
            assert_eq!(o.bad_rows[1].line, 300_007, "after two blank lines");
        }
    }
}
