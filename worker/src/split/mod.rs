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
//! A roll-up of a shared table routes rows by their `namespace` column instead of
//! keeping one namespace's ([`Namespaces::Route`], [`route`]): each namespace has its
//! own per-shard tables in each parse thread ([`parse`]).
//!
//! The cutter is [`cut`]; tests of both are in `tests.rs` and, on arbitrary bytes,
//! `fuzz.rs`.

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use covmerge_proto::{
    shard_hash::shard_of,
    wire::{BadRow, SplitOutcome},
    ShardId,
};

mod cut;
mod parse;
mod recent;
use parse::parse_thread;
pub(crate) mod inputs;
pub(crate) mod route;
pub(crate) mod rows;

use cut::{Limits, Piece, Pieces};

use crate::spill::{EntryTable, RawKey, StringIndex, StringTable};

use crate::input::{Groups, Header, InputError, Row, RowReader};

/// How a split runs.
#[derive(Debug, Clone, Default)]
pub struct SplitSettings {
    /// Number of shards to partition rows into.
    pub shards: u32,
    /// Stop reading once more than this many bad rows were seen (the job fails anyway).
    pub max_bad_rows: u64,
    /// Bytes the shard builders of all parse threads may hold before flushing chunks.
    pub memory_budget: usize,
    /// Parse threads. With 1, the calling thread reads, cuts and parses itself.
    pub threads: usize,
    /// The job's `--group`s: a row whose manager is a group's NAME is a bad row, a Go
    /// input whose manager is one is refused (contract §6).
    pub groups: Groups,
}

/// Bad rows reported by name (the count covers all of them).
pub(crate) const BAD_ROW_SAMPLES: usize = 5;

/// Decompressed bytes handed to a parse thread at once.
const PIECE: usize = 1 << 20;

/// Decompressed bytes a one-thread split inflates and then parses at once: small
/// enough to be parsed from the core's own cache, where a 1 MiB piece was read back
/// from the shared cache or memory. With parse threads a piece crosses cores anyway,
/// and larger pieces mean fewer hand-offs. (r20u, 8 one-thread splits on 2 cores,
/// alternating pairs: 3.58-4.06 -> 3.39-3.87 s wall; BENCHMARKS.md.)
const INLINE_PIECE: usize = 1 << 18;

/// Why a split failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    /// The CSV input cannot be read (not a single bad row).
    #[error(transparent)]
    Input(#[from] InputError),
    /// The input cannot be read by its format (Go coverage that does not decode, ...).
    #[error(transparent)]
    Read(#[from] crate::input::formats::ReadError),
    /// A spill object could not be written.
    #[error("writing spill object: {message}")]
    Emit {
        /// The store's error.
        message: String,
        /// Whether another try may write it (an outage, not a refusal).
        transient: bool,
    },
}

/// What one flush of a split's tables wrote: every non-empty shard's chunk, end to
/// end, stored as one spill object.
#[derive(Debug, Default)]
pub struct Flush {
    /// The spill object's bytes.
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
pub(crate) type Emit<'a> = dyn Fn(Flush) -> Result<(), SplitError> + Sync + 'a;

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
/// than sorted. A value is checked (contract §6: a relative path, UTF-8) and a path's
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
    /// The job's groups, whose NAMEs no manager may take.
    groups: Groups,
}

const FILE: usize = 0;
const COMMIT: usize = 1;
const FUNC: usize = 2;
const MANAGER: usize = 3;

impl ThreadStrings {
    fn new(groups: Groups) -> Self {
        ThreadStrings {
            groups,
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
        if !crate::spill::same_bytes(s, &self.last_repo) {
            self.last_repo.clear();
            self.last_repo.extend_from_slice(s);
            self.last_repo_ok = crate::input::valid_name(s);
        }
        self.last_repo_ok
    }

    /// The id of `s` in column `col`, and whether it passed the column's check.
    #[inline(always)]
    fn id(&mut self, col: usize, s: &[u8], shards: u32) -> (u32, bool) {
        self.id_hashed(col, s, crate::spill::hash_bytes(s), shards)
    }

    /// [`ThreadStrings::id`] of `s` whose hash is `hash`.
    #[inline(always)]
    fn id_hashed(&mut self, col: usize, s: &[u8], hash: u64, shards: u32) -> (u32, bool) {
        let (id, new) = self.index[col].intern_hashed(&mut self.table, s, hash);
        if new {
            debug_assert_eq!(id as usize, self.ok.len());
            let ok = match col {
                FILE => crate::input::valid_file_path(s),
                MANAGER => {
                    crate::input::valid_name(s)
                        && covmerge_proto::group::check_manager(s, &self.groups).is_ok()
                }
                _ => crate::input::valid_name(s),
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
        *self = ThreadStrings::new(self.groups.clone());
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
    /// The job's `--namespace`, when the input has a `namespace` column.
    namespace: Option<&'a [u8]>,
    /// Rows routed by their `namespace` column instead ([`Namespaces::Route`]).
    route: Option<&'a route::Router>,
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

fn read_full(
    input: &mut impl Read,
    buf: &mut Vec<u8>,
    want: usize,
) -> Result<usize, std::io::Error> {
    // Into the spare capacity, not zeroed first: a zeroed piece cost a 1 MiB memset per
    // input, most of the time of a job of many one-row inputs.
    buf.reserve(want);
    (&mut *input).take(want as u64).read_to_end(buf)
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

/// Splits one input. `emit(shard, chunk)` stores a finished chunk.
/// Rows counted: `rows_in` (every data row) and `rows_bad`; the first bad rows are named.
/// An input with a `namespace` column is refused: [`split_input_of_namespace`] takes
/// the job's `--namespace`.
pub fn split_input<R: Read>(
    name: &str,
    input: R,
    settings: SplitSettings,
    emit: &Emit<'_>,
) -> Result<SplitOutcome, SplitError> {
    split_input_of_namespace(name, input, settings, Namespaces::Job(None), emit)
}

/// [`split_input`] of a job given `--namespace` (`namespace`; `None`: not given): when
/// the input has a `namespace` column, only the rows naming it exactly are read, the
/// others counted per namespace in the outcome (not in `rows_in`); without
/// `--namespace` such an input is refused before its rows.
pub(crate) fn split_input_of_namespace<R: Read>(
    name: &str,
    input: R,
    settings: SplitSettings,
    namespaces: Namespaces<'_>,
    emit: &Emit<'_>,
) -> Result<SplitOutcome, SplitError> {
    let mut limits = Limits::DEFAULT;
    if settings.threads <= 1 {
        limits.piece = INLINE_PIECE;
    }
    split_input_with(name, input, settings, namespaces, emit, limits).map(|(o, _)| o)
}

/// Which rows of an input with a `namespace` column a split reads.
#[derive(Clone, Copy)]
pub enum Namespaces<'a> {
    /// A job's `--namespace` (`None`: not given, and such an input is refused): only
    /// the rows naming it, the others counted.
    Job(Option<&'a str>),
    /// Every row, each into its namespace's tables (the routed shard
    /// `index × shards + shard` of [`route::Router`]); an input without the column
    /// is refused.
    Route(&'a route::Router),
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
    namespaces: Namespaces<'_>,
    emit: &Emit<'_>,
    limits: Limits,
) -> Result<(SplitOutcome, CutStats), SplitError> {
    let (namespace, route) = match namespaces {
        Namespaces::Job(ns) => (ns, None),
        Namespaces::Route(r) => (None, Some(r)),
    };
    let read_err = |e: std::io::Error| InputError::from_read(name, e);
    let (mut buf, header_end) = read_header_line(name, &mut input, limits, &read_err)?;
    // A quoted header field may hold newlines: the rows start on the line after them.
    let header_lines = count_newlines(&buf[..header_end]).max(1);
    let header = RowReader::new(name, &buf[..header_end])?
        .header()
        .with_bom(buf.starts_with(b"\xef\xbb\xbf"))
        .with_max_row(limits.max_row)
        .with_groups(settings.groups.clone());
    if let (None, Some(_)) = (header.cols().namespace, route) {
        return Err(InputError::Read {
            input: name.to_string(),
            line: 1,
            problem: "no namespace column: rows routed by namespace must name theirs".into(),
        }
        .into());
    }
    let namespace = match (header.cols().namespace, namespace) {
        (None, _) => None,
        (Some(_), _) if route.is_some() => None,
        (Some(_), Some(ns)) => Some(ns.as_bytes()),
        (Some(_), None) => {
            return Err(InputError::NamespaceNotGiven {
                input: name.to_string(),
            }
            .into())
        }
    };
    buf.drain(..header_end);
    let threads = settings.threads.max(1);
    let shared = Shared {
        name,
        settings,
        header,
        bad: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        emit,
        namespace,
        route,
        spare: Mutex::new(Vec::new()),
    };
    let mut pieces = Pieces::new(
        input,
        limits,
        buf,
        (header_end as u64, header_lines),
        &shared.stop,
        &shared.spare,
        &read_err,
    );
    let (mut outcome, mut samples) = if threads == 1 {
        // One thread reads, cuts and parses: no hand-off, for one-core workers.
        parse_thread(&shared, || {
            if shared.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            pieces.next()
        })?
    } else {
        parse_on_threads(&shared, &mut pieces, threads)?
    };
    keep_first_samples(&mut samples);
    outcome.bad_rows = samples.into_iter().map(|s| s.1).collect();
    Ok((outcome, pieces.stats()))
}

/// Reads the header line up to its newline, never more than a row's cap: the bytes
/// read (the header and what followed it in the same reads) and where the header
/// ends in them.
fn read_header_line(
    name: &str,
    input: &mut impl Read,
    limits: Limits,
    read_err: &impl Fn(std::io::Error) -> InputError,
) -> Result<(Vec<u8>, usize), SplitError> {
    let mut buf: Vec<u8> = Vec::with_capacity(limits.piece * 2);
    let mut end = HeaderEnd::default();
    let too_long = || -> SplitError {
        InputError::Read {
            input: name.to_string(),
            line: 1,
            problem: format!(
                "header row longer than the {} byte cap on a row",
                limits.max_row
            ),
        }
        .into()
    };
    let header_end = loop {
        if let Some(i) = end.scan(&buf) {
            break i;
        }
        if buf.len() > limits.max_row {
            return Err(too_long());
        }
        if read_full(input, &mut buf, limits.piece.min(64 << 10)).map_err(read_err)? == 0 {
            break buf.len();
        }
    };
    // A carriage return ends a row for the CSV reader but not for the cutter, which
    // cuts at newlines: a header ended by a bare `\r` took the rows after it up to
    // the first newline with it, and they were dropped unseen, uncounted. Only a
    // `\r\n` ending is a line end here.
    let body_end = header_end - usize::from(buf[..header_end].ends_with(b"\n"));
    let body_end = body_end - usize::from(buf[..body_end].ends_with(b"\r"));
    // The loop stops reading past the cap; a header found within the last read may
    // still pass it (up to 64 KiB more were taken in).
    if body_end > limits.max_row {
        return Err(too_long());
    }
    if body_end == 0 && header_end < buf.len() {
        return Err(InputError::Read {
            input: name.to_string(),
            line: 1,
            problem: "a blank line where the header row must be: the header is the first line"
                .into(),
        }
        .into());
    }
    if let Some(at) = end.first_cr.filter(|&at| at < body_end) {
        return Err(InputError::Read {
            input: name.to_string(),
            line: 1,
            problem: format!(
                "a carriage return at byte {} of the header row: rows end with a newline (\\n or \\r\\n), a bare \\r is not a line end",
                at + 1
            ),
        }
        .into());
    }
    Ok((buf, header_end))
}

/// Where the header row ends, found as the CSV reader reads it: a newline inside a
/// quoted field is text (a header cut at the first physical newline had its second half
/// merged as a row). Fed the growing buffer again and again, it scans each byte once.
#[derive(Default)]
struct HeaderEnd {
    seen: usize,
    quoted: bool,
    /// Just after a `"` inside a quoted field: `""` is a quote, anything else closes.
    quote_in_quoted: bool,
    /// The first carriage return outside quotes.
    first_cr: Option<usize>,
}

impl HeaderEnd {
    /// The header's end (past its newline) in `buf`, if `buf` holds it.
    fn scan(&mut self, buf: &[u8]) -> Option<usize> {
        while self.seen < buf.len() {
            let (i, b) = (self.seen, buf[self.seen]);
            self.seen += 1;
            if self.quote_in_quoted {
                self.quote_in_quoted = false;
                if b == b'"' {
                    continue;
                }
                self.quoted = false;
            } else if self.quoted {
                self.quote_in_quoted = b == b'"';
                continue;
            }
            match b {
                b'\n' => return Some(i + 1),
                b'\r' => {
                    self.first_cr.get_or_insert(i);
                }
                b'"' if field_start(buf, i) => self.quoted = true,
                _ => {}
            }
        }
        None
    }
}

/// Whether `buf[i]` starts a header field (after a separator, or the row's start with
/// or without a byte order mark).
fn field_start(buf: &[u8], i: usize) -> bool {
    i == 0 || buf[i - 1] == b',' || (i == 3 && buf.starts_with(b"\xEF\xBB\xBF"))
}

/// `threads` parse threads fed by this thread, which cuts the pieces: their outcomes
/// summed and their bad row samples together.
fn parse_on_threads<R: Read>(
    shared: &Shared<'_>,
    pieces: &mut Pieces<'_, R>,
    threads: usize,
) -> Result<(SplitOutcome, Vec<Sample>), SplitError> {
    let (tx, rx) = mpsc::sync_channel::<Piece>(threads * 2);
    let rx = Arc::new(Mutex::new(rx));
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let rx = rx.clone();
                scope.spawn(move || {
                    let r = parse_thread(shared, || Ok(rx.lock().unwrap().recv().ok()));
                    if r.is_err() {
                        // The others and the cutter stop too.
                        shared.stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        // Only the parse threads hold the receiver: once they have all stopped (a
        // spill write failed), the cutter's `send` fails instead of waiting forever
        // on a full channel that nobody reads (a full TMPDIR hung `merge`).
        drop(rx);
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
                    outcome.counts.rows_in =
                        outcome.counts.rows_in.saturating_add(o.counts.rows_in);
                    outcome.counts.rows_bad =
                        outcome.counts.rows_bad.saturating_add(o.counts.rows_bad);
                    outcome.namespaces.add(&o.namespaces);
                    samples.extend(s);
                }
                Err(e) => {
                    shared.stop.store(true, Ordering::Relaxed);
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok((outcome, samples)),
        }
    })
}

#[cfg(test)]
mod tests;

/// The cutter and both parse paths against the csv crate reading the whole text at
/// once, on arbitrary bytes: the same rows, the same bad rows at the same lines, never
/// a panic, one pass over the input and a bounded buffer. `COVMERGE_FUZZ_ITERS` runs
/// more cases than CI's bounded run (e.g. 1000000 for a night).
#[cfg(test)]
mod fuzz;
