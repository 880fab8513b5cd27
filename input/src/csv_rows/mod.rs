//! CSV rows of contract §2: columns found by header name, each row's fields checked against
//! the bad-input rules of contract §6, the first bad rows kept with their line numbers.
//!
//! (Long because its tests are: a quarter of the file checks rows against the csv
//! crate and every bad-row rule.)

use std::io::{self, Read};

/// The required columns of contract §2, in the order of [`Columns`]' fields.
pub(crate) const REQUIRED: [&str; 7] = [
    "kernel_repo",
    "kernel_commit",
    "file_path",
    "func_name",
    "manager",
    "sl",
    "hit_count",
];

/// The optional column naming a row's namespace (contract §2).
pub const NAMESPACE: &str = "namespace";

/// The cap on one row: its fields and the commas between them, as parsed (contract §6).
/// A longer row is a bad row; one whose raw text runs past 4× this is skipped unread,
/// so no row, however long, is ever held in memory whole.
pub const MAX_ROW: usize = 1 << 20;

/// An input that cannot be read at all (as opposed to one bad row).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The input could not be opened.
    #[error("{input}: cannot open: {source}")]
    Open {
        /// The input, as the user named it.
        input: String,
        /// Why it could not be opened.
        #[source]
        source: io::Error,
    },
    /// Reading the input's bytes failed (not a decoding error).
    #[error("{input}: reading: {source}")]
    Stream {
        /// The input, as the user named it.
        input: String,
        /// The read error.
        #[source]
        source: io::Error,
    },
    /// The header lacks a column contract §2 requires.
    #[error("{input}: required column `{column}` missing from the header")]
    MissingColumn {
        /// The input, as the user named it.
        input: String,
        /// The column's name.
        column: &'static str,
    },
    /// Which of the two would be the column is a guess: the input is refused.
    #[error("{input}:1: column `{column}` appears more than once in the header (fields {first} and {second})")]
    RepeatedColumn {
        /// The input, as the user named it.
        input: String,
        /// The column's name.
        column: &'static str,
        /// Its first field, counting from 1.
        first: usize,
        /// Its second field, counting from 1.
        second: usize,
    },
    /// The header has a `namespace` column (syzkaller's shared table of every
    /// namespace's rows) and the job was given no `--namespace` to choose its rows.
    #[error("{input}:1: the header has a `namespace` column (a table of several namespaces' rows): give --namespace NS to merge the rows of NS (it names the header's Namespace too)")]
    NamespaceNotGiven {
        /// The input, as the user named it.
        input: String,
    },
    /// Not even a header row.
    #[error("{input}: empty input, expected a header row")]
    Empty {
        /// The input, as the user named it.
        input: String,
    },
    /// The input's bytes are not valid gzip (or the stream ends early).
    #[error("{input}: at byte {offset}{}: {problem}", if *gzip { " of the gzip stream" } else { "" })]
    Decode {
        /// The input, as the user named it.
        input: String,
        /// Offset of the problem in the raw bytes.
        offset: u64,
        /// Whether the bytes were a gzip stream.
        gzip: bool,
        /// What the decoder found.
        problem: String,
    },
    /// The CSV could not be read at a line (a read error there, a header row past the cap).
    #[error("{input}:{line}: {problem}")]
    Read {
        /// The input, as the user named it.
        input: String,
        /// The record's line, counting from 1.
        line: u64,
        /// What is wrong with it.
        problem: String,
    },
}

impl InputError {
    /// An error reading `input`'s bytes: its offset when the decoder knows it.
    pub fn from_read(input: &str, e: io::Error) -> Self {
        if let Some(d) = e
            .get_ref()
            .and_then(|x| x.downcast_ref::<super::open::DecodeFailure>())
        {
            return InputError::Decode {
                input: input.to_string(),
                offset: d.offset,
                gzip: d.gzip,
                problem: d.problem.clone(),
            };
        }
        InputError::Stream {
            input: input.to_string(),
            source: e,
        }
    }
}

/// Positions of the required columns in this input.
#[derive(Debug, Clone, Copy)]
pub struct Columns {
    /// Field index of `kernel_repo`.
    pub repo: usize,
    /// Field index of `kernel_commit`.
    pub commit: usize,
    /// Field index of `file_path`.
    pub file: usize,
    /// Field index of `func_name`.
    pub func: usize,
    /// Field index of `manager`.
    pub manager: usize,
    /// Field index of `sl`.
    pub sl: usize,
    /// Field index of `hit_count`.
    pub hits: usize,
    /// Field index of the optional `namespace` column (syzkaller's shared table).
    pub namespace: Option<usize>,
}

/// One valid row, borrowing the reader's buffer.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    /// `kernel_repo`.
    pub repo: &'a [u8],
    /// `kernel_commit`: the build the row was recorded on.
    pub commit: &'a [u8],
    /// `file_path`, checked canonical.
    pub file: &'a [u8],
    /// `func_name` (may be empty).
    pub func: &'a [u8],
    /// `manager`.
    pub manager: &'a [u8],
    /// 0 means "no line information" (contract §2).
    pub sl: u32,
    /// `hit_count`.
    pub hits: u64,
}

/// Why a row is malformed (contract §6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowProblem {
    /// The row has another number of fields than the header.
    FieldCount {
        /// Fields in the header.
        want: usize,
        /// Fields in the row.
        got: usize,
    },
    /// A count that is not an integer.
    BadInteger {
        /// The column's name.
        column: &'static str,
        /// The field as found.
        value: String,
    },
    /// A count below 0.
    Negative {
        /// The column's name.
        column: &'static str,
        /// The field as found.
        value: String,
    },
    /// A count that overflows 64 bits.
    Overflow {
        /// The column's name.
        column: &'static str,
        /// The field as found.
        value: String,
    },
    /// A `file_path` that is not a canonical relative path.
    BadPath {
        /// The path as found.
        value: String,
        /// Which rule it breaks.
        why: covmerge_proto::path::PathError,
    },
    /// A name that is not UTF-8.
    NotUtf8 {
        /// The column's name.
        column: &'static str,
        /// The field, lossily decoded.
        value: String,
    },
    /// A `manager` that cannot be a record's own name: empty, `*`, a `--group`'s NAME,
    /// or past the cap.
    BadManager {
        /// The manager as found.
        value: String,
        /// Which rule it breaks.
        why: covmerge_proto::group::ManagerNameError,
    },
    /// A row longer than the cap.
    TooLong {
        /// The cap in bytes ([`MAX_ROW`] unless set lower).
        max: usize,
    },
    /// A malformed record with a quoted field that runs over lines (an unclosed `"`
    /// takes the lines up to the next `"`).
    OverLines {
        /// The lines the record took, its first included.
        lines: u64,
        /// What is wrong with it.
        problem: Box<RowProblem>,
    },
}

impl std::fmt::Display for RowProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RowProblem::FieldCount { want, got } => {
                write!(f, "expected {want} fields like the header, found {got}")
            }
            RowProblem::BadInteger { column, value } => {
                write!(f, "column `{column}`: {} is not an integer", Shown::quoted(value))
            }
            RowProblem::Negative { column, value } => {
                write!(f, "column `{column}`: {} is negative", Shown::quoted(value))
            }
            RowProblem::Overflow { column, value } => {
                write!(f, "column `{column}`: {} overflows a 64-bit count", Shown::quoted(value))
            }
            RowProblem::NotUtf8 { column, value } => write!(
                f,
                "column `{column}`: {} is not valid UTF-8 (names are kept exactly, never altered)",
                Shown::plain(value)
            ),
            RowProblem::TooLong { max } => write!(
                f,
                "row longer than the {max} byte cap on a row ({} MiB)",
                max >> 20
            ),
            RowProblem::OverLines { lines, problem } => write!(
                f,
                "{problem}: a quoted field runs over {lines} lines from this one, taking them into this row (an unclosed `\"`?)"
            ),
            RowProblem::BadManager { value, why } => write!(
                f,
                "column `manager`: {} {why}; every record of a file must have a name of its own",
                Shown::quoted(value)
            ),
            RowProblem::BadPath { value, why } => write!(
                f,
                "column `file_path`: {} is not a canonical path relative to the source root: it {why}",
                Shown::quoted(value)
            ),
        }
    }
}

/// A field's value in a message, cut after [`SHOWN`] characters with its length, so
/// that a 1 MiB field is not printed whole in each message (or twice): quoted, or
/// as it is (`plain`: a value already rendered lossily).
struct Shown<'a> {
    value: &'a str,
    plain: bool,
}

/// The characters of a value a message shows.
const SHOWN: usize = 200;

impl<'a> Shown<'a> {
    /// Quoted.
    fn quoted(value: &'a str) -> Self {
        Shown {
            value,
            plain: false,
        }
    }

    /// Unquoted (the value is already a lossy rendering).
    fn plain(value: &'a str) -> Self {
        Shown { value, plain: true }
    }
}

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.value;
        let (head, cut) = match v.char_indices().nth(SHOWN) {
            None => (v, false),
            Some((at, _)) => (&v[..at], true),
        };
        if self.plain {
            f.write_str(head)?;
        } else {
            write!(f, "{head:?}")?;
        }
        if cut {
            write!(f, "… ({} bytes in all)", v.len())?;
        }
        Ok(())
    }
}

/// Parses a non-negative decimal that must fit an i64 (Go's `int64` on the dashboard).
fn parse_count(column: &'static str, v: &[u8]) -> Result<u64, RowProblem> {
    let v = v.trim_ascii();
    let show = || String::from_utf8_lossy(v).into_owned();
    let digits = match v.first() {
        Some(b'-') => {
            let rest = &v[1..];
            if !rest.is_empty() && rest.iter().all(u8::is_ascii_digit) {
                if rest.iter().all(|&b| b == b'0') {
                    return Ok(0);
                }
                return Err(RowProblem::Negative {
                    column,
                    value: show(),
                });
            }
            return Err(RowProblem::BadInteger {
                column,
                value: show(),
            });
        }
        Some(b'+') => &v[1..],
        _ => v,
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(RowProblem::BadInteger {
            column,
            value: show(),
        });
    }
    let mut n: u64 = 0;
    for &d in digits {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add((d - b'0') as u64))
            .ok_or_else(|| RowProblem::Overflow {
                column,
                value: show(),
            })?;
    }
    if n > i64::MAX as u64 {
        return Err(RowProblem::Overflow {
            column,
            value: show(),
        });
    }
    Ok(n)
}

/// Reads CSV rows of one input: the header names the columns; a repeated header is
/// skipped; blank lines are ignored.
pub struct RowReader<R: Read> {
    name: String,
    rdr: csv::Reader<R>,
    header: csv::ByteRecord,
    cols: Columns,
    rec: csv::ByteRecord,
    /// Lines before this reader's input (a chunk of a larger input).
    line_offset: u64,
    max_row: usize,
    /// The job's groups: no manager may take a group's NAME.
    groups: Groups,
}

/// A job's `--group`s, shared by the readers of its inputs.
pub type Groups = std::sync::Arc<Vec<covmerge_proto::group::Group>>;

/// Where a record starts. `line` is csv's count, which does not count blank lines;
/// `byte` is exact, so a caller holding the text can recount the line (done for bad
/// rows, which are rare).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    /// The record's first line, counting from 1 (blank lines not counted).
    pub line: u64,
    /// Offset in this reader's input.
    pub byte: u64,
}

/// An input's header: its name, the header record and the required columns' positions.
#[derive(Debug, Clone)]
pub struct Header {
    name: String,
    record: csv::ByteRecord,
    cols: Columns,
    max_row: usize,
    groups: Groups,
}

impl Header {
    /// The same header in a job with these `--group`s: a row whose manager is a
    /// group's NAME is a bad row (contract §6).
    pub fn with_groups(mut self, groups: Groups) -> Self {
        self.groups = groups;
        self
    }
    /// The same header with another cap on a row (tests use small ones).
    pub fn with_max_row(mut self, max_row: usize) -> Self {
        self.max_row = max_row;
        self
    }
    /// The cap on one row, in bytes.
    pub fn max_row(&self) -> usize {
        self.max_row
    }
    /// Where the required columns are.
    pub fn cols(&self) -> Columns {
        self.cols
    }
}

fn csv_reader<R: Read>(input: R) -> csv::Reader<R> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .buffer_capacity(1 << 16)
        .from_reader(input)
}

impl<R: Read> RowReader<R> {
    /// Reads the header; refuses the input if a required column is missing.
    pub fn new(name: &str, input: R) -> Result<Self, InputError> {
        let mut rdr = csv_reader(input);
        let mut header = csv::ByteRecord::new();
        let got = rdr
            .read_byte_record(&mut header)
            .map_err(|e| read_err(name, &e))?;
        if !got {
            return Err(InputError::Empty {
                input: name.to_string(),
            });
        }
        // A UTF-8 BOM before the first column name is not part of the name.
        let fields: Vec<Vec<u8>> = header
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let f = if i == 0 {
                    f.strip_prefix(b"\xef\xbb\xbf").unwrap_or(f)
                } else {
                    f
                };
                f.trim_ascii().to_vec()
            })
            .collect();
        let find = |c: &'static str| {
            let mut at = fields
                .iter()
                .enumerate()
                .filter(|(_, f)| *f == c.as_bytes());
            let first = at
                .next()
                .map(|(i, _)| i)
                .ok_or_else(|| InputError::MissingColumn {
                    input: name.to_string(),
                    column: c,
                })?;
            if let Some((second, _)) = at.next() {
                return Err(InputError::RepeatedColumn {
                    input: name.to_string(),
                    column: c,
                    first: first + 1,
                    second: second + 1,
                });
            }
            Ok(first)
        };
        let namespace = match find(NAMESPACE) {
            Ok(i) => Some(i),
            Err(InputError::MissingColumn { .. }) => None,
            Err(e) => return Err(e),
        };
        let cols = Columns {
            repo: find(REQUIRED[0])?,
            commit: find(REQUIRED[1])?,
            file: find(REQUIRED[2])?,
            func: find(REQUIRED[3])?,
            manager: find(REQUIRED[4])?,
            sl: find(REQUIRED[5])?,
            hits: find(REQUIRED[6])?,
            namespace,
        };
        Ok(RowReader {
            name: name.to_string(),
            rdr,
            header,
            cols,
            rec: csv::ByteRecord::new(),
            line_offset: 0,
            max_row: MAX_ROW,
            groups: Groups::default(),
        })
    }

    /// The header this reader found.
    pub fn header(&self) -> Header {
        Header {
            name: self.name.clone(),
            record: self.header.clone(),
            cols: self.cols,
            max_row: self.max_row,
            groups: self.groups.clone(),
        }
    }

    /// Reads a headerless piece of an input whose first line is line `first_line`.
    pub fn from_header(h: &Header, input: R, first_line: u64) -> Self {
        RowReader {
            name: h.name.clone(),
            rdr: csv_reader(input),
            header: h.record.clone(),
            cols: h.cols,
            rec: csv::ByteRecord::new(),
            line_offset: first_line.saturating_sub(1),
            max_row: h.max_row,
            groups: h.groups.clone(),
        }
    }

    /// The input, as the user named it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Calls `f` with every data row: `Ok(row)` or `Err(problem)` with its 1-based line.
    /// Stops early when `f` returns `false`.
    pub fn for_each(
        &mut self,
        f: impl FnMut(Pos, Result<Row<'_>, RowProblem>) -> bool,
    ) -> Result<(), InputError> {
        self.for_each_of_namespace(None, |_, _| {}, f)
    }

    /// [`RowReader::for_each`] of the rows of `namespace` when the input has a
    /// `namespace` column: a record with the header's field count (not a repeated
    /// header) whose namespace is another is not parsed further nor passed to `f`;
    /// `seen(namespace, matched)` is called for every record whose namespace was
    /// compared (exactly, byte for byte).
    pub fn for_each_of_namespace(
        &mut self,
        namespace: Option<&[u8]>,
        mut seen: impl FnMut(&[u8], bool),
        mut f: impl FnMut(Pos, Result<Row<'_>, RowProblem>) -> bool,
    ) -> Result<(), InputError> {
        let c = self.cols;
        let want = self.header.len();
        loop {
            let got = self.rdr.read_byte_record(&mut self.rec).map_err(|e| {
                let mut e = read_err(&self.name, &e);
                if let InputError::Read { line, .. } = &mut e {
                    *line += self.line_offset;
                }
                e
            })?;
            if !got {
                return Ok(());
            }
            let rec = &self.rec;
            let line = Pos {
                line: rec.position().map(|p| p.line()).unwrap_or(0) + self.line_offset,
                byte: rec.position().map(|p| p.byte()).unwrap_or(0),
            };
            if rec.len() == 1 && rec[0].is_empty() {
                continue; // blank line
            }
            if rec.as_slice().len() + rec.len() - 1 > self.max_row {
                // Not decorated as `over_lines` does: the cutter finds most such rows
                // as they stream by, without their lines, and says the same of them.
                if !f(line, Err(RowProblem::TooLong { max: self.max_row })) {
                    return Ok(());
                }
                continue;
            }
            if rec.len() != want {
                let problem = over_lines(
                    rec,
                    RowProblem::FieldCount {
                        want,
                        got: rec.len(),
                    },
                );
                if !f(line, Err(problem)) {
                    return Ok(());
                }
                continue;
            }
            if rec == &self.header {
                continue; // a repeated header
            }
            if let (Some(i), Some(ns)) = (c.namespace, namespace) {
                let matched = &rec[i] == ns;
                seen(&rec[i], matched);
                if !matched {
                    continue;
                }
            }
            let parsed = row_of(&c, &self.groups, |i| &rec[i]);
            if !f(line, parsed) {
                return Ok(());
            }
        }
    }
}

/// `problem` (a wrong field count), or, when the malformed record holds newlines (a
/// quoted field that runs over lines), `problem` with the lines it took: an unclosed `"` takes every line up
/// to the next `"` into the record, and its message said only that the fields were
/// too few.
fn over_lines(rec: &csv::ByteRecord, problem: RowProblem) -> RowProblem {
    let text = rec.as_slice();
    match memchr::memchr_iter(b'\n', text).count() {
        0 => problem,
        // A newline that ends the record's text ends its last line.
        n => RowProblem::OverLines {
            lines: (n + usize::from(!text.ends_with(b"\n"))) as u64,
            problem: Box::new(problem),
        },
    }
}

/// The row in a record's fields (`field(i)` is the i-th), checked as contract §6 says.
fn row_of<'a>(
    c: &Columns,
    groups: &[covmerge_proto::group::Group],
    field: impl Fn(usize) -> &'a [u8],
) -> Result<Row<'a>, RowProblem> {
    let file = field(c.file);
    if let Err(why) = covmerge_proto::path::canonical_path(file) {
        return Err(RowProblem::BadPath {
            value: String::from_utf8_lossy(file).into(),
            why,
        });
    }
    for (column, i) in [
        ("file_path", c.file),
        ("func_name", c.func),
        ("manager", c.manager),
        ("kernel_repo", c.repo),
        ("kernel_commit", c.commit),
    ] {
        let v = field(i);
        if !valid_name(v) {
            return Err(RowProblem::NotUtf8 {
                column,
                value: v.escape_ascii().to_string(),
            });
        }
    }
    let manager = field(c.manager);
    if let Err(why) = covmerge_proto::group::check_manager(manager, groups) {
        return Err(RowProblem::BadManager {
            value: String::from_utf8_lossy(manager).into(),
            why,
        });
    }
    let sl = parse_count("sl", field(c.sl))?;
    let hits = parse_count("hit_count", field(c.hits))?;
    Ok(Row {
        repo: field(c.repo),
        commit: field(c.commit).trim_ascii(),
        file,
        func: field(c.func),
        manager,
        // A line past u32 is past the end of any file: it is lost, not bad.
        sl: sl.min(u32::MAX as u64) as u32,
        hits,
    })
}

/// Calls `f` with every data row of `piece`, a headerless part of an input that holds
/// no `"` (so no field is quoted) and whose first line is line `first_line`: the same
/// rows, problems and skips as [`RowReader::for_each`] (`\r`, `\n` and `\r\n` end a
/// record, blank lines and repeated headers are skipped), found with a word-at-a-time
/// search for delimiters instead of csv's byte-at-a-time state machine. `Pos::line` is
/// exact here. Stops early when `f` returns `false`.
pub fn for_each_unquoted(
    h: &Header,
    piece: &[u8],
    first_line: u64,
    mut f: impl FnMut(Pos, Result<Row<'_>, RowProblem>) -> bool,
) {
    let c = h.cols;
    for_each_unquoted_record(h, piece, first_line, |pos, rec| match rec {
        Ok(fields) => f(pos, row_of(&c, &h.groups, |i| fields.get(i))),
        Err(problem) => f(pos, Err(problem)),
    });
}

/// The fields of one record of a piece, as byte ranges of the piece.
#[derive(Clone, Copy)]
pub struct Fields<'a> {
    piece: &'a [u8],
    spans: &'a [(usize, usize)],
}

impl<'a> Fields<'a> {
    /// The `i`-th field.
    #[inline]
    pub fn get(&self, i: usize) -> &'a [u8] {
        let (a, b) = self.spans[i];
        &self.piece[a..b]
    }

    /// The row these fields hold, checked as contract §6 says ([`for_each_unquoted`]'s row).
    pub fn row(&self, h: &Header) -> Result<Row<'a>, RowProblem> {
        row_of(&h.cols, &h.groups, |i| self.get(i))
    }
}

/// [`for_each_unquoted`] without the checks of the fields themselves: `f` gets the
/// fields of each record with the right number of fields (not a repeated header, not
/// over the cap), or the problem of one without. Callers that look each field up in
/// a table check a value once, when it is first seen ([`valid_file_path`],
/// [`valid_name`], [`parse_count_fast`]), and build the problem of a bad row with
/// [`Fields::row`].
pub fn for_each_unquoted_record(
    h: &Header,
    piece: &[u8],
    first_line: u64,
    mut f: impl FnMut(Pos, Result<Fields<'_>, RowProblem>) -> bool,
) {
    debug_assert!(!piece.contains(&b'"'));
    let want = h.record.len();
    let mut fields: Vec<(usize, usize)> = Vec::with_capacity(want + 1);
    let mut start = 0; // of the current field
    let mut rec_start = 0;
    let mut line = first_line; // of rec_start
    let mut record = |fields: &[(usize, usize)], rec_start: usize, line: u64| -> bool {
        let pos = Pos {
            line,
            byte: rec_start as u64,
        };
        // Fields and commas: the record's text up to the end of its last field.
        let end = fields.last().map_or(rec_start, |&(_, b)| b);
        if end - rec_start > h.max_row {
            return f(pos, Err(RowProblem::TooLong { max: h.max_row }));
        }
        if fields.len() != want {
            return f(
                pos,
                Err(RowProblem::FieldCount {
                    want,
                    got: fields.len(),
                }),
            );
        }
        let fields = Fields {
            piece,
            spans: fields,
        };
        if fields.get(0) == &h.record[0] && (1..want).all(|i| fields.get(i) == &h.record[i]) {
            return true; // a repeated header
        }
        f(pos, Ok(fields))
    };
    // The delimiters, walked bit by bit in each 64-byte block's mask, inline: a
    // callback per delimiter (seven a row) cost a call, and a fifth of the parse in
    // saving and restoring registers.
    for (base, mut m) in delimiter_masks(piece) {
        while m != 0 {
            let i = base + m.trailing_zeros() as usize;
            m &= m - 1;
            if piece[i] == b',' {
                fields.push((start, i));
                start = i + 1;
                continue;
            }
            if !(fields.is_empty() && start == i) {
                fields.push((start, i));
                if !record(&fields, rec_start, line) {
                    return;
                }
            }
            fields.clear();
            if piece[i] == b'\n' {
                line += 1;
            }
            start = i + 1;
            rec_start = i + 1;
        }
    }
    if start < piece.len() || !fields.is_empty() {
        fields.push((start, piece.len()));
        record(&fields, rec_start, line);
    }
}

/// The offset of each 64-byte block of `buf` and its mask of `,`, `\n` and `\r` (bit
/// `j` for `buf[offset + j]`); the last block is padded with zero bytes. A mask costs a
/// few instructions per delimiter to walk, where an iterator of SIMD searches pays a
/// call and a restart for each (rows have one every ~20 bytes).
#[inline]
fn delimiter_masks(buf: &[u8]) -> impl Iterator<Item = (usize, u64)> + '_ {
    buf.chunks(64).enumerate().map(|(k, block)| {
        let mask = match <&[u8; 64]>::try_from(block) {
            Ok(full) => delimiter_mask(full),
            Err(_) => {
                let mut padded = [0u8; 64];
                padded[..block.len()].copy_from_slice(block);
                delimiter_mask(&padded)
            }
        };
        (64 * k, mask)
    })
}

/// Bit `j` set iff `block[j]` is a delimiter: SSE2, part of every x86-64 CPU, compares
/// 16 bytes at once.
#[cfg(target_arch = "x86_64")]
#[inline]
fn delimiter_mask(block: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let mut m = 0u64;
    for (k, lane) in block.chunks_exact(16).enumerate() {
        // SAFETY: SSE2 is in the x86-64 baseline, so the intrinsics exist on every CPU
        // this runs on; the unaligned load reads exactly the 16 bytes of `lane`.
        let bits = unsafe {
            let v = _mm_loadu_si128(lane.as_ptr().cast::<__m128i>());
            let hit = _mm_or_si128(
                _mm_or_si128(
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(b',' as i8)),
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8)),
                ),
                _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\r' as i8)),
            );
            _mm_movemask_epi8(hit) as u32 as u64
        };
        m |= bits << (16 * k);
    }
    m
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn delimiter_mask(block: &[u8; 64]) -> u64 {
    delimiter_mask_words(block)
}

/// Bit `j` set iff `block[j]` is a delimiter: eight bytes per word, found with the
/// exact zero-byte test (no borrow runs into the next byte). Other CPUs use it; on
/// x86-64 the tests check it against the SSE2 mask.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline]
fn delimiter_mask_words(block: &[u8; 64]) -> u64 {
    const LOW: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_bytes = |y: u64| !(((y & !HIGH).wrapping_add(!HIGH)) | y) & HIGH;
    let mut m = 0u64;
    for (k, w) in block.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        let mut z = zero_bytes(x ^ (LOW * b',' as u64))
            | zero_bytes(x ^ (LOW * b'\n' as u64))
            | zero_bytes(x ^ (LOW * b'\r' as u64));
        while z != 0 {
            m |= 1 << (8 * k + (z.trailing_zeros() / 8) as usize);
            z &= z - 1;
        }
    }
    m
}

/// Whether `p` is a `file_path` contract §6 accepts (canonical as
/// [`covmerge_proto::path::canonical_path`] says, UTF-8): the checks [`Fields::row`]
/// makes of it.
pub fn valid_file_path(p: &[u8]) -> bool {
    covmerge_proto::path::canonical_path(p).is_ok() && valid_name(p)
}

/// Whether a name column's value is accepted (UTF-8): the check [`Fields::row`] makes
/// of `func_name`, `manager`, `kernel_repo` and `kernel_commit`.
#[inline]
pub fn valid_name(v: &[u8]) -> bool {
    v.is_ascii() || std::str::from_utf8(v).is_ok()
}

/// `v` as a count when it is a plain run of 1 to 18 digits (below `i64::MAX`, the
/// form of every count a fuzzer writes); `None` otherwise, and the row's own parse
/// ([`Fields::row`]) decides.
#[inline]
pub fn parse_count_fast(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 18 {
        return None;
    }
    let mut n = 0u64;
    let mut digits = true;
    for &b in v {
        let d = b.wrapping_sub(b'0');
        digits &= d < 10;
        n = n.wrapping_mul(10).wrapping_add(d as u64);
    }
    digits.then_some(n)
}

fn read_err(name: &str, e: &csv::Error) -> InputError {
    let line = e.position().map(|p| p.line()).unwrap_or(0);
    let problem = match e.kind() {
        csv::ErrorKind::Io(io) => io.to_string(),
        _ => e.to_string(),
    };
    InputError::Read {
        input: name.to_string(),
        line,
        problem,
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod shown_tests {
    use super::*;

    #[test]
    fn a_huge_field_was_printed_whole_in_its_message() {
        let long = "d/".repeat(450_000) + "a.c";
        let msg = RowProblem::BadPath {
            value: long.clone(),
            why: covmerge_proto::path::PathError::TooLong,
        }
        .to_string();
        assert!(msg.len() < 600, "{} bytes", msg.len());
        assert!(
            msg.contains(&format!("({} bytes in all)", long.len())),
            "{msg}"
        );
        assert!(msg.contains("it is longer than 4095 bytes"), "{msg}");
        let short = RowProblem::BadInteger {
            column: "sl",
            value: "x1".into(),
        }
        .to_string();
        assert_eq!(short, "column `sl`: \"x1\" is not an integer");
    }
}
