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
//!
//! (Over 600 lines with its tests: the cutter's state machine and the parse threads
//! share their invariants, and splitting them would put one state machine in two files.)

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use covmerge_proto::{
    shard_hash::shard_of,
    spill::{EntryTable, RawKey, StringIndex, StringTable},
    wire::{BadRow, SplitOutcome},
    ShardId,
};

pub mod go;

use crate::input::{
    for_each_unquoted_record, parse_count_fast, Header, InputError, Pos, Row, RowProblem, RowReader,
};

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
pub const BAD_ROW_SAMPLES: usize = 5;

/// Decompressed bytes handed to a parse thread at once.
const PIECE: usize = 1 << 20;

/// Decompressed bytes a one-thread split inflates and then parses at once: small
/// enough to be parsed from the core's own cache, where a 1 MiB piece was read back
/// from the shared cache or memory. With parse threads a piece crosses cores anyway,
/// and larger pieces mean fewer hand-offs. (r20u, 8 one-thread splits on 2 cores,
/// alternating pairs: 3.58-4.06 -> 3.39-3.87 s wall; BENCHMARKS.md, issue 12.)
const INLINE_PIECE: usize = 1 << 18;

/// Why a split failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Go(#[from] crate::input::go::GoError),
    #[error("writing spill object: {message}")]
    Emit { message: String, transient: bool },
}

/// What one flush of a split's tables wrote: every non-empty shard's chunk, end to
/// end, stored as one spill object.
#[derive(Debug, Default)]
pub struct Flush {
    pub bytes: Vec<u8>,
    /// Each chunk's shard and byte range in `bytes`, in shard order.
    pub chunks: Vec<(ShardId, std::ops::Range<usize>)>,
}

impl Flush {
    /// Appends a shard's chunk, written by `write` at the end of `bytes`.
    pub fn push(&mut self, shard: ShardId, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.bytes.len();
        write(&mut self.bytes);
        if self.bytes.len() > start {
            self.chunks.push((shard, start..self.bytes.len()));
        }
    }
}

/// Stores one flush as a spill object. Called from several threads.
pub type Emit<'a> = dyn Fn(Flush) -> Result<(), SplitError> + Sync + 'a;

/// Writes every non-empty table's rows as its shard's chunk of one spill object, and
/// emits it (nothing when all tables are empty). The tables are empty afterwards; the
/// caller may then forget the strings.
fn flush_tables(
    tables: &mut [EntryTable],
    strings: &mut StringTable,
    emit: &Emit<'_>,
) -> Result<(), SplitError> {
    let mut flush = Flush::default();
    for (i, t) in tables.iter_mut().enumerate() {
        if !t.is_empty() {
            flush.push(ShardId(i as u32), |out| t.finish_into(strings, out));
        }
    }
    if flush.chunks.is_empty() {
        return Ok(());
    }
    emit(flush)
}

/// The strings of one parse thread, whatever their shard: each string field of a row is
/// looked up once in a small index of its own column, so shuffled input costs no more
/// than sorted. A value is checked (SPEC §6: a relative path, UTF-8) and a path's
/// shard computed once, when the value is first seen, not once per row.
struct ThreadStrings {
    table: StringTable,
    /// One index per string column ([`FILE`], [`COMMIT`], [`FUNC`], [`MANAGER`]): ids
    /// are not shared between columns.
    index: [StringIndex; 4],
    /// Per id: whether the value passed its column's check.
    ok: Vec<bool>,
    /// Per id: the shard of a valid file path (`u32::MAX` for other ids).
    shard: Vec<u32>,
    /// The last `kernel_repo` value and whether it passed its check: the column is
    /// only checked, and is the same on almost every row.
    last_repo: Vec<u8>,
    last_repo_ok: bool,
}

const FILE: usize = 0;
const COMMIT: usize = 1;
const FUNC: usize = 2;
const MANAGER: usize = 3;

impl ThreadStrings {
    fn new() -> Self {
        ThreadStrings {
            table: StringTable::new(),
            index: Default::default(),
            ok: Vec::new(),
            shard: Vec::new(),
            last_repo: Vec::new(),
            last_repo_ok: true,
        }
    }

    /// Whether a `kernel_repo` value passes its check.
    #[inline]
    fn repo_ok(&mut self, s: &[u8]) -> bool {
        // Compared inline: a call to memcmp per row cost 1 % of a split.
        if !covmerge_proto::spill::same_bytes(s, &self.last_repo) {
            self.last_repo.clear();
            self.last_repo.extend_from_slice(s);
            self.last_repo_ok = crate::input::valid_name(s);
        }
        self.last_repo_ok
    }

    /// The id of `s` in column `col`, and whether it passed the column's check.
    #[inline(always)]
    fn id(&mut self, col: usize, s: &[u8], shards: u32) -> (u32, bool) {
        let (id, new) = self.index[col].intern(&mut self.table, s);
        if new {
            debug_assert_eq!(id as usize, self.ok.len());
            let ok = if col == FILE {
                crate::input::valid_file_path(s)
            } else {
                crate::input::valid_name(s)
            };
            self.ok.push(ok);
            self.shard.push(if col == FILE && ok {
                shard_of(s, shards).0
            } else {
                u32::MAX
            });
        }
        (id, self.ok[id as usize])
    }

    /// The key and shard of a valid row.
    fn key(&mut self, row: &Row<'_>, shards: u32) -> (RawKey, ShardId) {
        let file = self.id(FILE, row.file, shards).0;
        let key = RawKey {
            file,
            commit: self.id(COMMIT, row.commit, shards).0,
            func: self.id(FUNC, row.func, shards).0,
            manager: self.id(MANAGER, row.manager, shards).0,
            sl: row.sl,
        };
        (key, ShardId(self.shard[file as usize]))
    }

    fn approx_bytes(&self) -> usize {
        self.table.approx_bytes()
            + self.index.iter().map(|i| i.approx_bytes()).sum::<usize>()
            + self.ok.capacity()
            + self.shard.capacity() * 4
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
    /// Piece buffers handed back by the parse threads, for the cutter to fill again:
    /// their pages stay mapped, where a fresh megabyte per piece was faulted in and
    /// zeroed each time.
    spare: Mutex<Vec<Vec<u8>>>,
}

impl Shared<'_> {
    /// Keeps a parsed piece's buffer for the cutter, up to a few (not those grown
    /// past two pieces by a long record).
    fn give_back(&self, mut bytes: Vec<u8>) {
        if bytes.capacity() > 2 * PIECE {
            return;
        }
        let mut spare = self.spare.lock().unwrap();
        if spare.len() < 2 * self.settings.threads.max(1) + 2 {
            bytes.clear();
            spare.push(bytes);
        }
    }
}

/// One parse thread: its builders and what it counted. `next_piece` hands out
/// numbered line-aligned pieces until it returns `None`.
fn parse_thread(
    sh: &Shared<'_>,
    mut next_piece: impl FnMut() -> Result<Option<Piece>, SplitError>,
) -> Result<(SplitOutcome, Vec<Sample>), SplitError> {
    let mut samples: Vec<Sample> = Vec::new();
    let n = sh.settings.shards.max(1);
    let budget = sh.settings.memory_budget / sh.settings.threads.max(1);
    let mut strings = ThreadStrings::new();
    let mut tables: Vec<EntryTable> = (0..n).map(|_| EntryTable::new()).collect();
    let mut outcome = SplitOutcome::default();
    let flush_all =
        |tables: &mut Vec<EntryTable>, strings: &mut ThreadStrings| -> Result<(), SplitError> {
            let r = flush_tables(tables, &mut strings.table, sh.emit);
            strings.clear();
            r
        };
    while let Some(Piece {
        first_line,
        offset,
        bytes,
        quoted,
        over_long,
    }) = next_piece()?
    {
        if sh.stop.load(Ordering::Relaxed) {
            break;
        }
        // A bad row: counted, sampled with its line, and the split stops past the cap.
        let mut bad = |pos: Pos, problem: RowProblem, outcome: &mut SplitOutcome| -> bool {
            outcome.counts.rows_bad += 1;
            // Recount from the piece: csv's own line count skips blank lines.
            // csv places a record after the previous terminator, before any
            // blank lines: step over them to the record itself.
            let mut upto = (pos.byte as usize).min(bytes.len());
            while upto < bytes.len() && matches!(bytes[upto], b'\n' | b'\r') {
                upto += 1;
            }
            let line = first_line + count_newlines(&bytes[..upto]);
            samples.push((
                (line, offset + upto as u64),
                BadRow {
                    input: sh.name.to_string(),
                    line,
                    problem: problem.to_string(),
                },
            ));
            keep_first_samples(&mut samples);
            if sh.bad.fetch_add(1, Ordering::Relaxed) + 1 > sh.settings.max_bad_rows {
                sh.stop.store(true, Ordering::Relaxed);
                return false;
            }
            true
        };
        if over_long {
            outcome.counts.rows_in += 1;
            bad(
                Pos { line: 0, byte: 0 },
                RowProblem::TooLong {
                    max: sh.header.max_row(),
                },
                &mut outcome,
            );
        } else if !quoted {
            let c = sh.header.cols();
            for_each_unquoted_record(&sh.header, &bytes, first_line, |pos, rec| {
                outcome.counts.rows_in += 1;
                let fields = match rec {
                    Ok(f) => f,
                    Err(problem) => return bad(pos, problem, &mut outcome),
                };
                let (file, ok_file) = strings.id(FILE, fields.get(c.file), n);
                let (commit, ok_commit) = strings.id(COMMIT, fields.get(c.commit).trim_ascii(), n);
                let (func, ok_func) = strings.id(FUNC, fields.get(c.func), n);
                let (manager, ok_manager) = strings.id(MANAGER, fields.get(c.manager), n);
                let ok_repo = strings.repo_ok(fields.get(c.repo));
                let sl = parse_count_fast(fields.get(c.sl));
                let hits = parse_count_fast(fields.get(c.hits));
                let (sl, hits) = match (sl, hits) {
                    (Some(sl), Some(hits))
                        if ok_file && ok_commit && ok_func && ok_manager && ok_repo =>
                    {
                        (sl.min(u32::MAX as u64) as u32, hits)
                    }
                    // Anything unusual: the row's own checks decide, and name the problem.
                    _ => match fields.row(&sh.header) {
                        Ok(row) => (row.sl, row.hits),
                        Err(problem) => return bad(pos, problem, &mut outcome),
                    },
                };
                let key = RawKey {
                    file,
                    commit,
                    func,
                    manager,
                    sl,
                };
                tables[strings.shard[file as usize] as usize].add(key, hits, 1);
                true
            });
        } else {
            RowReader::from_header(&sh.header, &bytes[..], first_line).for_each(|pos, row| {
                outcome.counts.rows_in += 1;
                match row {
                    Ok(row) => {
                        let (key, shard) = strings.key(&row, n);
                        tables[shard.index()].add(key, row.hits, 1);
                        true
                    }
                    Err(problem) => bad(pos, problem, &mut outcome),
                }
            })?;
        }
        sh.give_back(bytes);
        let held: usize =
            strings.approx_bytes() + tables.iter().map(|t| t.approx_bytes()).sum::<usize>();
        if held > budget {
            flush_all(&mut tables, &mut strings)?;
        }
    }
    flush_all(&mut tables, &mut strings)?;
    Ok((outcome, samples))
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

/// A bad row named in the outcome, keyed by (line, byte offset in the input): several
/// records may share a line (`\r` ends one too), and pieces of one line may go to
/// different threads, so the byte offset keeps the samples in input order.
type Sample = ((u64, u64), BadRow);

/// Keeps the first [`BAD_ROW_SAMPLES`] samples in input order.
fn keep_first_samples(samples: &mut Vec<Sample>) {
    samples.sort_by_key(|s| s.0);
    samples.truncate(BAD_ROW_SAMPLES);
}

/// A record-aligned part of an input.
struct Piece {
    /// The line number of its first line.
    first_line: u64,
    /// The offset of its first byte in the (decompressed) input.
    offset: u64,
    bytes: Vec<u8>,
    /// Whether it may hold a `"` (false: it certainly holds none).
    quoted: bool,
    /// The piece stands for one row longer than [`Limits::discard_at`] bytes, dropped
    /// unread: `bytes` is empty and the row, at `first_line`, is bad.
    over_long: bool,
}

/// Where the CSV state machine stands at the end of the scanned bytes, as far as
/// record ends are concerned (csv_core's states, folded to those that matter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// Outside a quoted field: `\n` and `\r` end the record, and a `"` opens a quoted
    /// field only at a field's start (elsewhere it is text, as csv reads it).
    Unquoted,
    /// Inside a quoted field: everything up to the next `"` is text.
    Quoted,
    /// Just after a `"` inside a quoted field: `""` is a quote in the text, anything
    /// else closes the field.
    QuoteInQuoted,
}

/// Sizes of the cutter, fixed in production ([`Limits::DEFAULT`]), small in tests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Decompressed bytes handed to a parse thread at once.
    piece: usize,
    /// The cap on a row (its fields and separators, as parsed): longer rows are bad.
    max_row: usize,
    /// Raw bytes after which a row that has not ended is dropped unread as bad. Quotes
    /// and `""` escapes make the raw text at most 3× the parsed row, so a row this long
    /// is certainly over `max_row` whatever it holds.
    discard_at: usize,
}

impl Limits {
    pub(crate) const DEFAULT: Limits = Limits {
        piece: PIECE,
        max_row: crate::input::MAX_ROW,
        discard_at: 4 * crate::input::MAX_ROW,
    };
}

/// Cuts a decompressed stream into numbered pieces that end at record ends, in one
/// pass: each byte is scanned once, by a quote-driven state machine that agrees with
/// the csv crate on where records end (a stray `"` inside an unquoted field is text and
/// changes nothing). A record longer than `discard_at` is never held: it is reported
/// as an over-long piece and skipped as it streams by, so memory stays bounded by
/// `discard_at + piece` whatever the input.
struct Pieces<'e, R> {
    input: R,
    limits: Limits,
    /// Read but not yet handed out; starts at a record start unless `discarding`.
    buf: Vec<u8>,
    /// How much of `buf` the state machine has seen.
    scanned: usize,
    state: Scan,
    /// The byte before `buf[0]` (`\n` at a record start).
    prev: u8,
    /// The end of the last complete record in `buf[..scanned]`.
    boundary: Option<usize>,
    /// The end of the first one, looked for only while `discarding`.
    first_boundary: Option<usize>,
    /// The first and the last `"` in `buf[..scanned]`, as the scan saw them: a piece
    /// holds a quote iff the first is inside it (no second search over its bytes).
    first_quote: Option<usize>,
    last_quote: Option<usize>,
    /// Inside an over-long record that is being skipped.
    discarding: bool,
    /// The line number of `buf`'s first line.
    next_line: u64,
    /// The offset of `buf[0]` in the input.
    offset: u64,
    /// Bytes scanned in all and the largest `buf` held: tests check both stay linear
    /// and bounded.
    scanned_total: u64,
    peak: usize,
    stop: &'e AtomicBool,
    spare: &'e Mutex<Vec<Vec<u8>>>,
    read_err: &'e dyn Fn(std::io::Error) -> InputError,
}

impl<R: Read> Pieces<'_, R> {
    /// Runs the state machine over `buf[scanned..]`, noting the last record end.
    fn scan(&mut self) {
        let buf = &self.buf;
        let len = buf.len();
        let mut i = self.scanned;
        while i < len {
            match self.state {
                Scan::Unquoted => {
                    let q = memchr::memchr(b'"', &buf[i..]).map(|q| q + i);
                    let end = q.unwrap_or(len);
                    if let Some(t) = memchr::memrchr2(b'\n', b'\r', &buf[i..end]) {
                        self.boundary = Some(i + t + 1);
                        if self.discarding && self.first_boundary.is_none() {
                            let f = memchr::memchr2(b'\n', b'\r', &buf[i..end]).unwrap_or(t);
                            self.first_boundary = Some(i + f + 1);
                        }
                    }
                    let Some(q) = q else {
                        break;
                    };
                    self.first_quote.get_or_insert(q);
                    self.last_quote = Some(q);
                    let before = if q == 0 { self.prev } else { buf[q - 1] };
                    if matches!(before, b',' | b'\n' | b'\r') {
                        self.state = Scan::Quoted;
                    }
                    i = q + 1;
                }
                Scan::Quoted => match memchr::memchr(b'"', &buf[i..]) {
                    Some(q) => {
                        self.state = Scan::QuoteInQuoted;
                        self.first_quote.get_or_insert(i + q);
                        self.last_quote = Some(i + q);
                        i += q + 1;
                    }
                    None => break,
                },
                Scan::QuoteInQuoted => {
                    if buf[i] == b'"' {
                        self.state = Scan::Quoted;
                        self.last_quote = Some(i);
                        i += 1;
                    } else {
                        // The field is closed; this byte is read as unquoted.
                        self.state = Scan::Unquoted;
                    }
                }
            }
        }
        self.scanned_total += (len - self.scanned) as u64;
        self.scanned = len;
        self.peak = self.peak.max(len);
    }

    fn stats(&self) -> CutStats {
        CutStats {
            scanned: self.scanned_total,
            peak: self.peak,
        }
    }

    /// Drops `buf[..n]` (already counted and handed out or skipped).
    fn drop_front(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.prev = self.buf[n - 1];
        self.offset += n as u64;
        self.buf.drain(..n);
        self.scanned -= n;
        let shift = |b: Option<usize>| b.filter(|&b| b > n).map(|b| b - n);
        self.boundary = shift(self.boundary);
        self.first_boundary = shift(self.first_boundary);
        self.forget_quotes_before(n);
    }

    /// Shifts the quote positions after `buf`'s first `n` bytes were removed. Only
    /// when a quote is left does the first one need a search (of what is left).
    fn forget_quotes_before(&mut self, n: usize) {
        let left = self.last_quote.filter(|&l| l >= n).map(|l| l - n);
        self.last_quote = left;
        self.first_quote = left.and_then(|l| memchr::memchr(b'"', &self.buf[..=l]));
    }

    /// The next piece; `None` at the end.
    fn next(&mut self) -> Result<Option<Piece>, SplitError> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            let got = read_full(&mut self.input, &mut self.buf, self.limits.piece)
                .map_err(self.read_err)?;
            self.scan();
            if self.discarding {
                // Skip the over-long record up to its end, counting its lines.
                let upto = self.first_boundary.unwrap_or(self.buf.len());
                self.next_line += count_newlines(&self.buf[..upto]);
                if self.first_boundary.is_some() {
                    self.discarding = false;
                }
                self.drop_front(upto);
                self.first_boundary = None;
                if got == 0 && self.buf.is_empty() {
                    return Ok(None);
                }
                continue;
            }
            let cut = match self.boundary {
                Some(b) => b,
                None if got == 0 => self.buf.len(),
                None if self.buf.len() > self.limits.discard_at => {
                    // One record with no end in sight: bad, and skipped unread.
                    let first_line = self.next_line;
                    let offset = self.offset;
                    self.discarding = true;
                    self.next_line += count_newlines(&self.buf);
                    let n = self.buf.len();
                    self.drop_front(n);
                    return Ok(Some(Piece {
                        first_line,
                        offset,
                        bytes: Vec::new(),
                        quoted: false,
                        over_long: true,
                    }));
                }
                None => continue, // a record longer than a piece: read more
            };
            if cut == 0 {
                return Ok(None); // got == 0 and nothing left
            }
            // The rest (a partial record) moves to a spare buffer, which the next
            // read fills; the piece keeps this one.
            let mut rest = self.spare.lock().unwrap().pop().unwrap_or_default();
            rest.extend_from_slice(&self.buf[cut..]);
            self.buf.truncate(cut);
            let bytes = std::mem::replace(&mut self.buf, rest);
            self.prev = bytes[cut - 1];
            self.scanned -= cut;
            self.boundary = None; // the last one was `cut`
            let quoted = self.first_quote.is_some_and(|f| f < cut);
            self.forget_quotes_before(cut);
            let first_line = self.next_line;
            let offset = self.offset;
            self.offset += cut as u64;
            self.next_line += count_newlines(&bytes);
            return Ok(Some(Piece {
                first_line,
                offset,
                bytes,
                quoted,
                over_long: false,
            }));
        }
    }
}

/// Splits one input. `emit(shard, chunk)` stores a finished chunk.
/// Rows counted: `rows_in` (every data row) and `rows_bad`; the first bad rows are named.
pub fn split_input<R: Read>(
    name: &str,
    input: R,
    settings: SplitSettings,
    emit: &Emit<'_>,
) -> Result<SplitOutcome, SplitError> {
    let mut limits = Limits::DEFAULT;
    if settings.threads <= 1 {
        limits.piece = INLINE_PIECE;
    }
    split_input_with(name, input, settings, emit, limits).map(|(o, _)| o)
}

/// How the cutter went: the bytes it scanned in all (the input's size: one pass) and
/// the most it held at once.
#[derive(Debug, Clone, Copy, Default)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct CutStats {
    pub scanned: u64,
    pub peak: usize,
}

pub(crate) fn split_input_with<R: Read>(
    name: &str,
    mut input: R,
    settings: SplitSettings,
    emit: &Emit<'_>,
    limits: Limits,
) -> Result<(SplitOutcome, CutStats), SplitError> {
    let read_err = |e: std::io::Error| InputError::from_read(name, e);
    // The header line, read up to its newline, never more than a row's cap.
    let mut buf: Vec<u8> = Vec::with_capacity(limits.piece * 2);
    let mut seen = 0;
    let header_end = loop {
        if let Some(i) = memchr::memchr(b'\n', &buf[seen..]) {
            break seen + i + 1;
        }
        seen = buf.len();
        if seen > limits.max_row {
            return Err(InputError::Read {
                input: name.to_string(),
                line: 1,
                problem: format!(
                    "header row longer than the {} byte cap on a row",
                    limits.max_row
                ),
            }
            .into());
        }
        if read_full(&mut input, &mut buf, limits.piece.min(64 << 10)).map_err(read_err)? == 0 {
            break buf.len();
        }
    };
    let header = RowReader::new(name, &buf[..header_end])?.header();
    buf.drain(..header_end);
    let shared = Shared {
        name,
        settings,
        header: header.with_max_row(limits.max_row),
        bad: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        emit,
        spare: Mutex::new(Vec::new()),
    };
    let mut pieces = Pieces {
        input,
        limits,
        buf,
        scanned: 0,
        state: Scan::Unquoted,
        prev: b'\n',
        boundary: None,
        first_boundary: None,
        first_quote: None,
        last_quote: None,
        discarding: false,
        next_line: 2,
        offset: header_end as u64,
        scanned_total: 0,
        peak: 0,
        stop: &shared.stop,
        spare: &shared.spare,
        read_err: &read_err,
    };
    let threads = settings.threads.max(1);
    if threads == 1 {
        // One thread reads, cuts and parses: no hand-off, for one-core workers.
        let (mut outcome, mut samples) = parse_thread(&shared, || {
            if shared.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            pieces.next()
        })?;
        keep_first_samples(&mut samples);
        outcome.bad_rows = samples.into_iter().map(|s| s.1).collect();
        return Ok((outcome, pieces.stats()));
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
        let mut samples = Vec::new();
        let mut first_err = produced.err();
        for h in handles {
            match h.join().expect("parse thread panicked") {
                Ok((o, s)) => {
                    outcome.counts.rows_in += o.counts.rows_in;
                    outcome.counts.rows_bad += o.counts.rows_bad;
                    samples.extend(s);
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
        keep_first_samples(&mut samples);
        outcome.bad_rows = samples.into_iter().map(|s| s.1).collect();
        Ok((outcome, pieces.stats()))
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

    fn run(text: &str, threads: usize, max_bad: u64) -> (SplitOutcome, u64) {
        let rows = AtomicU64::new(0);
        let emit = |flush: Flush| -> Result<(), SplitError> {
            covmerge_proto::spill::for_each_block(&flush.bytes, |b| {
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

/// The cutter and both parse paths against the csv crate reading the whole text at
/// once, on arbitrary bytes: the same rows, the same bad rows at the same lines, never
/// a panic, one pass over the input and a bounded buffer. `COVMERGE_FUZZ_ITERS` runs
/// more cases than CI's bounded run (e.g. 1000000 for a night).
#[cfg(test)]
mod fuzz {
    use super::*;
    use std::collections::BTreeMap;

    const HEADER: &str = "file_path,kernel_repo,kernel_commit,func_name,manager,sl,hit_count\n";

    /// SplitMix64: small, deterministic, good enough to shape texts.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A text mixing valid rows, quoted fields, stray quotes, CR/LF variants, long
    /// fields, invalid UTF-8 and random bytes.
    fn text(rng: &mut Rng, max_row: usize) -> Vec<u8> {
        let mut t = HEADER.as_bytes().to_vec();
        let rows = rng.below(60);
        for _ in 0..rows {
            match rng.below(14) {
                12 => {
                    // Values the per-column fast path hands to the row's own checks:
                    // signs, spaces, 19+ digits, bad UTF-8 in any name, bad paths.
                    const FIELDS: [&[&[u8]]; 7] = [
                        &[b"f1.c", b"../x.c", b"/abs.c", b"a\\..\\b.c", b"f\xc3.c"],
                        &[b"r", b"r\xff"],
                        &[b"c1", b" c1 ", b"c\xfe"],
                        &[b"fn1", b"", b"fn\xe2\x82"],
                        &[b"m1", b"m\x80"],
                        &[
                            b"7",
                            b"+7",
                            b" 7",
                            b"007",
                            b"-0",
                            b"-3",
                            b"1234567890123456789",
                            b"",
                        ],
                        &[
                            b"0",
                            b"+1",
                            b"99999999999999999999",
                            b"x",
                            b"9223372036854775808",
                        ],
                    ];
                    let pick = |rng: &mut Rng, i: usize| {
                        let f = FIELDS[i];
                        // Mostly good values, so that a bad one meets cached good ones.
                        if rng.below(3) == 0 {
                            f[rng.below(f.len() as u64) as usize]
                        } else {
                            f[0]
                        }
                    };
                    let fields: Vec<&[u8]> = (0..7).map(|i| pick(rng, i)).collect();
                    t.extend_from_slice(&fields.join(&b","[..]));
                    t.push(b'\n');
                }
                13 => t.extend_from_slice(b"f1.c,r,c1,fn1,m1,7,0\n"),
                0 => {
                    // random bytes from a hostile alphabet
                    const A: &[u8] = b",,\"\"\n\r\rab1\xff\x00 ";
                    for _ in 0..rng.below(40) {
                        t.push(A[rng.below(A.len() as u64) as usize]);
                    }
                }
                1 => t.extend_from_slice(b"f.c,r,c,foo\"x,m,3,4\n"), // stray quote
                2 => t.extend_from_slice(b"\"q,\"\"d\".c\",r,c,\"a\nb\",m,2,1\r\n"),
                3 => {
                    // a long field: around the row cap, sometimes far past it
                    let n = match rng.below(3) {
                        0 => max_row - 30 + rng.below(60) as usize,
                        1 => max_row * 5,
                        _ => max_row / 2,
                    };
                    t.extend_from_slice(b"l.c,r,c,");
                    if rng.below(2) == 0 {
                        t.push(b'"');
                        t.extend(std::iter::repeat_n(b'x', n));
                        t.extend_from_slice(b"\n\"");
                    } else {
                        t.extend(std::iter::repeat_n(b'y', n));
                    }
                    t.extend_from_slice(b",m,1,1\n");
                }
                4 => t.extend_from_slice(b"\n\r\n"),
                5 => t.extend_from_slice(HEADER.as_bytes()),
                6 => t.extend_from_slice(b"u\xff.c,r,c,f,m,1,1\n"),
                7 => t.extend_from_slice(b"\"open,r,c,f,m,1,1\n"), // an unclosed quote
                _ => {
                    let line = format!(
                        "f{}.c,r,c{},fn{},m{},{},{}{}",
                        rng.below(5),
                        rng.below(3),
                        rng.below(3),
                        rng.below(2),
                        rng.below(20),
                        rng.below(100),
                        ["\n", "\r\n", "\r"][rng.below(3) as usize]
                    );
                    t.extend_from_slice(line.as_bytes());
                }
            }
        }
        t
    }

    type Key = (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, u32);
    /// (hits, rows) per key.
    type Rows = BTreeMap<Key, (u64, u64)>;

    /// What the csv crate reads from the whole text in one reader.
    fn oracle(text: &[u8], max_row: usize) -> (u64, Vec<(u64, String)>, Rows) {
        let r = RowReader::new("t.csv", text).unwrap();
        let header = r.header().with_max_row(max_row);
        let hlen = memchr::memchr(b'\n', text).unwrap() + 1;
        let body = &text[hlen..];
        let mut rows_in = 0;
        let mut bad = Vec::new();
        let mut good = BTreeMap::new();
        RowReader::from_header(&header, body, 2)
            .for_each(|pos, row| {
                rows_in += 1;
                match row {
                    Ok(r) => {
                        let e = good
                            .entry((
                                r.file.to_vec(),
                                r.commit.to_vec(),
                                r.func.to_vec(),
                                r.manager.to_vec(),
                                r.sl,
                            ))
                            .or_insert((0, 0));
                        e.0 += r.hits;
                        e.1 += 1;
                    }
                    Err(p) => {
                        let mut upto = pos.byte as usize;
                        while upto < body.len() && matches!(body[upto], b'\n' | b'\r') {
                            upto += 1;
                        }
                        bad.push((2 + count_newlines(&body[..upto]), p.to_string()));
                    }
                }
                true
            })
            .unwrap();
        (rows_in, bad, good)
    }

    fn split(text: &[u8], threads: usize, limits: Limits) -> (SplitOutcome, CutStats, Rows) {
        let got = Mutex::new(BTreeMap::new());
        // Every chunk of a flush holds its own shard's files only, and the chunks
        // tile the object.
        let emit = |flush: Flush| -> Result<(), SplitError> {
            let mut at = 0;
            for (shard, range) in &flush.chunks {
                assert_eq!(range.start, at, "chunks end to end");
                at = range.end;
                covmerge_proto::spill::for_each_block(&flush.bytes[range.clone()], |b| {
                    let mut g = got.lock().unwrap();
                    for (k, v) in &b.entries {
                        let s = |i: u32| b.strings[i as usize].to_vec();
                        assert_eq!(shard_of(&s(k.file), 3), *shard);
                        let e = g
                            .entry((s(k.file), s(k.commit), s(k.func), s(k.manager), k.sl))
                            .or_insert((0, 0));
                        e.0 += v.hits;
                        e.1 += v.rows;
                    }
                    Ok(())
                })
                .unwrap();
            }
            assert_eq!(at, flush.bytes.len(), "no bytes outside a chunk");
            Ok(())
        };
        let settings = SplitSettings {
            shards: 3,
            max_bad_rows: u64::MAX,
            memory_budget: 2048,
            threads,
        };
        let (o, stats) = split_input_with("t.csv", text, settings, &emit, limits).unwrap();
        (o, stats, got.into_inner().unwrap())
    }

    #[test]
    fn the_splitter_agrees_with_the_csv_crate_on_arbitrary_bytes() {
        let iters: u64 = std::env::var("COVMERGE_FUZZ_ITERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1500);
        let mut rng = Rng(0x5eed);
        for i in 0..iters {
            // Above the header's length: a header over the cap is refused, not fuzzed.
            let max_row = HEADER.len() + 16 + rng.below(200) as usize;
            let limits = Limits {
                piece: 16 + rng.below(300) as usize,
                max_row,
                discard_at: 4 * max_row,
            };
            let text = text(&mut rng, max_row);
            let (rows_in, bad, good) = oracle(&text, max_row);
            for threads in [1, 3] {
                let (o, stats, got) = split(&text, threads, limits);
                let ctx = || {
                    format!(
                        "case {i} threads {threads}: {:?}",
                        text.escape_ascii().to_string()
                    )
                };
                assert_eq!(o.counts.rows_in, rows_in, "{}", ctx());
                assert_eq!(o.counts.rows_bad, bad.len() as u64, "{}", ctx());
                let want: Vec<_> = bad.iter().take(BAD_ROW_SAMPLES).cloned().collect();
                let have: Vec<_> = o
                    .bad_rows
                    .iter()
                    .map(|b| (b.line, b.problem.clone()))
                    .collect();
                assert_eq!(have, want, "{}", ctx());
                assert_eq!(got, good, "{}", ctx());
                let hlen = memchr::memchr(b'\n', &text).unwrap() + 1;
                assert_eq!(
                    stats.scanned,
                    (text.len() - hlen) as u64,
                    "one pass: {}",
                    ctx()
                );
                assert!(
                    stats.peak <= limits.discard_at + 2 * limits.piece,
                    "held {} bytes: {}",
                    stats.peak,
                    ctx()
                );
            }
        }
    }
}
