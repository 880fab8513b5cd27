//! One parse thread of a split: its shard builders, the rows of its pieces parsed
//! (the vectorized fast path for pieces without `"`, the csv crate for the others)
//! and, when the split routes rows by namespace ([`super::route`]), each row's
//! namespace's tables.

use std::cell::Cell;
use std::sync::atomic::Ordering;

use covmerge_proto::{manifest::NamespaceTally, wire::SplitOutcome};

use super::cut::Piece;
use super::recent::{Group, Recent};
use super::route::ThreadRoute;
use super::{
    count_newlines, flush_tables, keep_first_samples, Emit, Sample, Shared, SplitError,
    ThreadStrings, COMMIT, FILE, FUNC, MANAGER,
};
use crate::input::{
    for_each_unquoted_record, parse_count_fast, InputError, Pos, RowProblem, RowReader,
};
use crate::spill::{EntryTable, RawKey};
use covmerge_proto::wire::BadRow;

/// One parse thread's shard builders: its strings and one table per shard.
struct Builders {
    strings: ThreadStrings,
    tables: Vec<EntryTable>,
}

impl Builders {
    /// Bytes held, to compare with the thread's share of the budget.
    fn held(&self) -> usize {
        self.strings.approx_bytes() + self.tables.iter().map(|t| t.approx_bytes()).sum::<usize>()
    }

    /// Writes every table's rows as chunks and forgets the strings.
    fn flush(&mut self, emit: &Emit<'_>) -> Result<(), SplitError> {
        let r = flush_tables(&mut self.tables, &mut self.strings.table, emit);
        self.strings.clear();
        r
    }
}

/// One parse thread: its builders and what it counted. `next_piece` hands out
/// numbered line-aligned pieces until it returns `None`.
pub(super) fn parse_thread(
    sh: &Shared<'_>,
    mut next_piece: impl FnMut() -> Result<Option<Piece>, SplitError>,
) -> Result<(SplitOutcome, Vec<Sample>), SplitError> {
    let mut samples: Vec<Sample> = Vec::new();
    let mut tally = NamespaceTally {
        column: sh.namespace.is_some() || sh.route.is_some(),
        ..Default::default()
    };
    let mut routing = sh
        .route
        .zip(sh.header.cols().namespace)
        .map(|(r, col)| Routing {
            route: ThreadRoute::new(r),
            col,
            failed: None,
        });
    // Each row of the input whose namespace is compared: counted as the job's or
    // another's (exact bytes; not in `rows_in` when another's).
    let mut seen = |ns: &[u8], matched: bool| {
        if matched {
            tally.matched += 1;
        } else {
            tally.others.add_rows(ns, 1);
        }
    };
    let n = sh.settings.shards.max(1);
    let budget = sh.settings.memory_budget / sh.settings.threads.max(1);
    let mut b = Builders {
        strings: ThreadStrings::new(sh.settings.groups.clone()),
        tables: (0..n).map(|_| EntryTable::new()).collect(),
    };
    let mut outcome = SplitOutcome::default();
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
        // A bad row: counted, sampled with its line, and the split stops past the cap
        // (or at once, when it is the header again in another form).
        let mut header_again = None;
        // Bad rows come in order: each one's line is counted on from the last one's
        // (counted from the piece's start each time, many bad rows took quadratic time).
        let mut counted = (0, first_line);
        let mut bad = |pos: Pos, problem: RowProblem, outcome: &mut SplitOutcome| -> bool {
            outcome.counts.rows_bad += 1;
            // Recount from the piece: csv's own line count skips blank lines.
            // csv places a record after the previous terminator, before any
            // blank lines: step over them to the record itself.
            let (line, upto) = line_from(&bytes, first_line, counted, pos);
            counted = (upto, line);
            if let Some(e) = sh.header.header_again(&bytes[upto..], line) {
                sh.stop.store(true, Ordering::Relaxed);
                header_again = Some(e);
                return false;
            }
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
        } else {
            let piece = (&bytes[..], first_line);
            let ctx = (&mut outcome, &mut seen, &mut bad);
            if !quoted {
                parse_unquoted(sh, piece, &mut b, ctx, &mut routing);
            } else {
                parse_quoted(sh, piece, &mut b, ctx, &mut routing)?;
            }
            if let Some(e) = routing.as_mut().and_then(|r| r.failed.take()) {
                return Err(e);
            }
        }
        if let Some(e) = header_again {
            return Err(e.into());
        }
        sh.give_back(bytes);
        if b.held() > budget {
            b.flush(sh.emit)?;
        }
    }
    b.flush(sh.emit)?;
    if let Some(r) = routing {
        r.route.finish();
    }
    outcome.namespaces = tally;
    Ok((outcome, samples))
}

/// Where a record at `pos` of a piece (its bytes, the number of its first line)
/// starts: its line and byte offset in the piece. csv's own line count skips blank
/// lines, and csv places a record after the previous terminator, before any blank
/// lines: step over them to the record itself.
fn line_at(bytes: &[u8], first_line: u64, pos: Pos) -> (u64, usize) {
    let mut upto = (pos.byte as usize).min(bytes.len());
    while upto < bytes.len() && matches!(bytes[upto], b'\n' | b'\r') {
        upto += 1;
    }
    (first_line + count_newlines(&bytes[..upto]), upto)
}

/// [`line_at`], counted on from `from` (a byte offset of the piece and its line) when
/// the record starts after it, else from the piece's first line.
fn line_from(bytes: &[u8], first_line: u64, from: (usize, u64), pos: Pos) -> (u64, usize) {
    let mut upto = (pos.byte as usize).min(bytes.len());
    while upto < bytes.len() && matches!(bytes[upto], b'\n' | b'\r') {
        upto += 1;
    }
    let (start, line) = if from.0 <= upto {
        from
    } else {
        (0, first_line)
    };
    (line + count_newlines(&bytes[start..upto]), upto)
}

/// A thread's routing of rows by namespace: the router's view, the `namespace`
/// column, and the first namespace refused (the split fails with it).
struct Routing<'r> {
    route: ThreadRoute<'r>,
    col: usize,
    failed: Option<SplitError>,
}

impl Routing<'_> {
    /// Records that the record at `pos` of a piece names a namespace refused (`why`),
    /// and stops the split.
    fn refuse(&mut self, sh: &Shared<'_>, piece: (&[u8], u64), pos: Pos, v: &[u8], why: String) {
        let (line, _) = line_at(piece.0, piece.1, pos);
        sh.stop.store(true, Ordering::Relaxed);
        self.failed
            .get_or_insert(SplitError::Input(InputError::Read {
                input: sh.name.to_string(),
                line,
                problem: format!("namespace {:?}: {why}", String::from_utf8_lossy(v)),
            }));
    }
}

/// What the parse of a piece counts: the thread's outcome, the namespaces compared
/// (`seen`, a job's), and its bad rows (`bad`: false once the split must stop).
type PieceCtx<'a, S, B> = (&'a mut SplitOutcome, &'a mut S, &'a mut B);

/// Where a record went: its namespace's index, or the namespace refused and why.
type RouteOf = Result<u32, (Vec<u8>, String)>;

/// Parses a piece holding a `"` (its bytes and its first line's number) by the csv
/// crate.
fn parse_quoted<S, B>(
    sh: &Shared<'_>,
    piece: (&[u8], u64),
    b: &mut Builders,
    (outcome, seen, bad): PieceCtx<'_, S, B>,
    routing: &mut Option<Routing<'_>>,
) -> Result<(), SplitError>
where
    S: FnMut(&[u8], bool),
    B: FnMut(Pos, RowProblem, &mut SplitOutcome) -> bool,
{
    let n = sh.settings.shards.max(1);
    let (strings, tables) = (&mut b.strings, &mut b.tables);
    // The namespace the record being read was routed to, or why it was refused; the
    // routed bad rows, counted once the piece is read.
    let routed: Cell<Option<RouteOf>> = Cell::new(None);
    let mut routed_bad: Vec<u32> = Vec::new();
    let mut failed = None;
    let route = |v: &[u8]| -> bool {
        match routing.as_mut() {
            Some(r) => {
                routed.set(Some(r.route.route(v).map_err(|why| (v.to_vec(), why))));
                true
            }
            None => match sh.namespace {
                Some(want) => {
                    let matched = v == want;
                    seen(v, matched);
                    matched
                }
                None => true,
            },
        }
    };
    RowReader::from_header(&sh.header, piece.0, piece.1).for_each_routed(route, |pos, row| {
        let at = match routed.take() {
            Some(Err((v, why))) => {
                failed = Some((pos, v, why));
                return false;
            }
            Some(Ok(k)) => Some(k),
            None => None,
        };
        let base = at.map_or(0, |k| k as usize * n as usize);
        outcome.counts.rows_in += 1;
        match row {
            Ok(row) => {
                let (key, shard) = strings.key(&row, n);
                grow(tables, base + n as usize);
                tables[base + shard.index()].add(key, row.hits, 1);
                true
            }
            Err(problem) => {
                routed_bad.extend(at);
                bad(pos, problem, outcome)
            }
        }
    })?;
    if let Some(r) = routing.as_mut() {
        for k in routed_bad {
            r.route.bad(k);
        }
        if let Some((pos, v, why)) = failed {
            r.refuse(sh, piece, pos, &v, why);
        }
    }
    Ok(())
}

/// Makes `tables` hold at least `len` tables (a namespace's, met first).
#[inline]
fn grow(tables: &mut Vec<EntryTable>, len: usize) {
    if tables.len() < len {
        tables.resize_with(len, EntryTable::new);
    }
}

/// Parses a piece without any `"` (its bytes and its first line's number) by the
/// vectorized fast path: each column of a usual row is checked and interned on its
/// own; anything unusual goes to the row's own checks, which name the problem.
fn parse_unquoted<S, B>(
    sh: &Shared<'_>,
    (bytes, first_line): (&[u8], u64),
    b: &mut Builders,
    (outcome, seen, bad): PieceCtx<'_, S, B>,
    routing: &mut Option<Routing<'_>>,
) where
    S: FnMut(&[u8], bool),
    B: FnMut(Pos, RowProblem, &mut SplitOutcome) -> bool,
{
    let n = sh.settings.shards.max(1);
    let (strings, tables) = (&mut b.strings, &mut b.tables);
    let c = sh.header.cols();
    let ns = c.namespace.zip(sh.namespace);
    // The previous row's value of each string column and what its lookup gave: a
    // run of rows of one (session, file) pays for a column once. Values of this
    // piece only, so no copy is made, and ids stay valid (tables are flushed
    // between pieces).
    let mut last_func = Last::NONE;
    // The recent rows' (file, commit, manager) and their ids: one probe a row where
    // an export interleaves a few (session, file) streams.
    let mut recent = Recent::new();
    for_each_unquoted_record(&sh.header, bytes, first_line, |pos, rec| {
        let fields = match rec {
            Ok(f) => f,
            Err(problem) => {
                outcome.counts.rows_in += 1;
                return bad(pos, problem, outcome);
            }
        };
        // The header again in another form (two exports joined) is read as a row, and
        // refused as such, whatever its namespace field holds.
        let header = c.namespace.is_some() && sh.header.may_be_header(|i| fields.get(i));
        if let Some((i, want)) = ns.filter(|_| !header) {
            let v = fields.get(i);
            let matched = v == want;
            seen(v, matched);
            if !matched {
                return true;
            }
        }
        // Routed by namespace: that namespace's tables, from `base`.
        let mut base = 0;
        let mut at = None;
        if let Some(r) = routing.as_mut().filter(|_| !header) {
            let v = fields.get(r.col);
            match r.route.route(v) {
                Ok(k) => {
                    base = k as usize * n as usize;
                    grow(tables, base + n as usize);
                    at = Some(k);
                }
                Err(why) => {
                    r.refuse(sh, (bytes, first_line), pos, v, why);
                    return false;
                }
            }
        }
        outcome.counts.rows_in += 1;
        // The function name's entry is loaded while the other columns are
        // looked up: its index is the one read at random, out of cache.
        let func_name = fields.get(c.func);
        let same_func = last_func.is(func_name);
        let mut func_hash = 0;
        if !same_func {
            func_hash = crate::spill::hash_bytes(func_name);
            strings.index[FUNC].prefetch(func_hash);
        }
        // The commit is taken as written: ` V ` is not commit `V` (the row is lost,
        // its commit holds no such file).
        let (f, co, m, r) = (
            fields.get(c.file),
            fields.get(c.commit),
            fields.get(c.manager),
            fields.get(c.repo),
        );
        let Group {
            file: (file, ok_file),
            commit: (commit, ok_commit),
            manager: (manager, ok_manager),
            repo_ok: ok_repo,
        } = recent.get([f, co, m, r], || Group {
            file: strings.id(FILE, f, n),
            commit: strings.id(COMMIT, co, n),
            manager: strings.id(MANAGER, m, n),
            repo_ok: strings.repo_ok(r),
        });
        let sl = parse_count_fast(fields.get(c.sl));
        let hits = parse_count_fast(fields.get(c.hits));
        let (func, ok_func) = last_func.or_lookup(same_func, func_name, || {
            strings.id_hashed(FUNC, func_name, func_hash, n)
        });
        let (sl, hits) = match (sl, hits) {
            (Some(sl), Some(hits)) if ok_file && ok_commit && ok_func && ok_manager && ok_repo => {
                (sl.min(u32::MAX as u64) as u32, hits)
            }
            // Anything unusual: the row's own checks decide, and name the problem.
            _ => match fields.row(&sh.header) {
                Ok(row) => (row.sl, row.hits),
                Err(problem) => {
                    if let (Some(r), Some(k)) = (routing.as_mut(), at) {
                        r.route.bad(k);
                    }
                    return bad(pos, problem, outcome);
                }
            },
        };
        let key = RawKey {
            file,
            commit,
            func,
            manager,
            sl,
        };
        tables[base + strings.shard[file as usize] as usize].add(key, hits, 1);
        true
    });
}

/// A string column's value on the previous row of a piece and its id and check.
#[derive(Clone, Copy)]
struct Last<'a> {
    value: &'a [u8],
    id: u32,
    ok: bool,
}

impl<'a> Last<'a> {
    /// Nothing seen yet (an id no lookup gives).
    const NONE: Last<'static> = Last {
        value: &[],
        id: u32::MAX,
        ok: false,
    };

    /// Whether `s` is the previous row's value (compared byte for byte).
    #[inline(always)]
    fn is(&self, s: &[u8]) -> bool {
        self.id != u32::MAX && crate::spill::same_bytes(s, self.value)
    }

    /// The previous row's id and check when `same` (its value is `value`, as
    /// [`Last::is`] told), else `lookup`'s, remembered for `value`.
    #[inline(always)]
    fn or_lookup(
        &mut self,
        same: bool,
        value: &'a [u8],
        lookup: impl FnOnce() -> (u32, bool),
    ) -> (u32, bool) {
        if !same {
            let (id, ok) = lookup();
            *self = Last { value, id, ok };
        }
        (self.id, self.ok)
    }
}
