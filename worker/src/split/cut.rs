//! The cutter: a decompressed input cut into numbered pieces that end at record ends.

use std::io::Read;

use super::*;

/// A record-aligned part of an input.
pub(crate) struct Piece {
    /// The line number of its first line.
    pub(crate) first_line: u64,
    /// The offset of its first byte in the (decompressed) input.
    pub(crate) offset: u64,
    pub(crate) bytes: Vec<u8>,
    /// Whether it may hold a `"` (false: it certainly holds none).
    pub(crate) quoted: bool,
    /// The piece stands for one row longer than [`Limits::discard_at`] bytes, dropped
    /// unread: `bytes` is empty and the row, at `first_line`, is bad.
    pub(crate) over_long: bool,
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
    pub(crate) piece: usize,
    /// The cap on a row (its fields and separators, as parsed): longer rows are bad.
    pub(crate) max_row: usize,
    /// Raw bytes after which a row that has not ended is dropped unread as bad. Quotes
    /// and `""` escapes make the raw text at most 3× the parsed row, so a row this long
    /// is certainly over `max_row` whatever it holds.
    pub(crate) discard_at: usize,
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
pub(crate) struct Pieces<'e, R> {
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

impl<'e, R: Read> Pieces<'e, R> {
    /// A cutter over `input`, whose header ended at byte `header.0` after `header.1`
    /// lines; `buf` holds what was read past it (from the record start on the next
    /// line).
    pub(crate) fn new(
        input: R,
        limits: Limits,
        buf: Vec<u8>,
        (offset, header_lines): (u64, u64),
        stop: &'e AtomicBool,
        spare: &'e Mutex<Vec<Vec<u8>>>,
        read_err: &'e dyn Fn(std::io::Error) -> InputError,
    ) -> Self {
        Pieces {
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
            next_line: header_lines + 1,
            offset,
            scanned_total: 0,
            peak: 0,
            stop,
            spare,
            read_err,
        }
    }
}

impl<R: Read> Pieces<'_, R> {
    /// Runs the state machine over `buf[scanned..]`, noting the last record end.
    pub(crate) fn scan(&mut self) {
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

    pub(crate) fn stats(&self) -> CutStats {
        CutStats {
            scanned: self.scanned_total,
            peak: self.peak,
        }
    }

    /// Drops `buf[..n]` (already counted and handed out or skipped).
    pub(crate) fn drop_front(&mut self, n: usize) {
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
    pub(crate) fn forget_quotes_before(&mut self, n: usize) {
        let left = self.last_quote.filter(|&l| l >= n).map(|l| l - n);
        self.last_quote = left;
        self.first_quote = left.and_then(|l| memchr::memchr(b'"', &self.buf[..=l]));
    }

    /// The next piece; `None` at the end.
    pub(crate) fn next(&mut self) -> Result<Option<Piece>, SplitError> {
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
