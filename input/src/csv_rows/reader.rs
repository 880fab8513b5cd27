//! Rows read with the csv crate: any input, quoted fields included.

use std::io::Read;

use super::check::row_of;
use super::error::read_err;
use super::{Columns, Groups, InputError, Pos, Row, RowProblem, MAX_ROW, NAMESPACE, REQUIRED};

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

/// An input's header: its name, the header record and the required columns' positions.
#[derive(Debug, Clone)]
pub struct Header {
    pub(super) name: String,
    pub(super) record: csv::ByteRecord,
    pub(super) cols: Columns,
    pub(super) max_row: usize,
    pub(super) groups: Groups,
    /// The input starts with a UTF-8 byte order mark: the header found again byte for
    /// byte starts with one too.
    pub(super) bom: bool,
}

impl Header {
    /// The same header of an input that starts with a byte order mark (`bom`).
    pub fn with_bom(mut self, bom: bool) -> Self {
        self.bom = bom;
        self
    }
    /// The header as it reads again byte for byte, later in the input (the byte order
    /// mark included, which the csv reader drops only at the start).
    pub(super) fn repeated(&self) -> csv::ByteRecord {
        if !self.bom {
            return self.record.clone();
        }
        let mut r = csv::ByteRecord::new();
        for (i, f) in self.record.iter().enumerate() {
            if i == 0 {
                r.push_field(&[b"\xef\xbb\xbf", f].concat());
            } else {
                r.push_field(f);
            }
        }
        r
    }
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

    /// Whether a record of the header's field count (`field(i)` its `i`th field) may be
    /// the header again in another form, to be read as a row (and refused as such)
    /// before its namespace decides anything: its `sl` field is not a count and its
    /// fields name every required column. A row of another namespace is not parsed:
    /// without this, a header in another column order (two exports joined) was counted
    /// as a row of another namespace and the rows after it read by the first header's
    /// positions. A data row pays one byte's check.
    pub fn may_be_header<'a>(&self, field: impl Fn(usize) -> &'a [u8]) -> bool {
        may_be_header(&self.cols, self.record.len(), field)
    }

    /// When the first record of `text` (a bad row's text, up to the input's end) names
    /// every required column in as many fields as the header but is not the header byte
    /// for byte (another column order, other columns, a byte order mark, spaces): the
    /// error that stops the input at `line`.
    /// Skipping such a row as bad would read the rows after it by the first header's
    /// positions.
    pub fn header_again(&self, text: &[u8], line: u64) -> Option<InputError> {
        let mut rec = csv::ByteRecord::new();
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .buffer_capacity(4096)
            .from_reader(text);
        // With another field count it is a bad row whatever it names: the rows after
        // it, of the header's count, are read by the header's positions.
        if !matches!(rdr.read_byte_record(&mut rec), Ok(true)) || rec.len() != self.record.len() {
            return None;
        }
        // The csv reader drops a byte order mark at the start of what it reads.
        let bom = text.starts_with(b"\xef\xbb\xbf");
        if rec == self.record && bom == self.bom {
            return None;
        }
        // A record naming every required column (whatever its other columns) is a
        // header, not a row.
        let names: Vec<Vec<u8>> = rec
            .iter()
            .enumerate()
            .map(|(i, f)| column_name(i, f))
            .collect();
        let at = |c: &str| {
            names
                .iter()
                .position(|n| n.eq_ignore_ascii_case(c.as_bytes()))
        };
        let found: Option<Vec<usize>> = REQUIRED.iter().map(|c| at(c)).collect();
        let c = self.cols;
        let first = [c.repo, c.commit, c.file, c.func, c.manager, c.sl, c.hits];
        let same_order = found? == first;
        Some(again(&self.name, line, same_order))
    }
}

/// The error of a header found again at `line` (`same_order`: with the first one's
/// column order, other bytes).
fn again(name: &str, line: u64, same_order: bool) -> InputError {
    let how = if same_order {
        "in another form (other columns, a byte order mark or spaces the first has not)"
    } else {
        "with its columns in another order"
    };
    InputError::Read {
        input: name.to_string(),
        line,
        problem: format!(
            "the header again, {how}: the rows after it cannot be read by the first header's positions (an input holds one header; split it where the header repeats)"
        ),
    }
}

/// [`Header::may_be_header`] of a header of `n` fields whose columns are `cols`.
fn may_be_header<'a>(cols: &Columns, n: usize, field: impl Fn(usize) -> &'a [u8]) -> bool {
    if field(cols.sl).first().is_some_and(u8::is_ascii_digit) {
        return false;
    }
    REQUIRED
        .iter()
        .all(|c| (0..n).any(|i| column_name_of(i, field(i)).eq_ignore_ascii_case(c.as_bytes())))
}

/// A header field as a column name: without a UTF-8 byte order mark before the first
/// and without spaces around it.
fn column_name(i: usize, f: &[u8]) -> Vec<u8> {
    column_name_of(i, f).to_vec()
}

/// [`column_name`] without a copy.
fn column_name_of(i: usize, f: &[u8]) -> &[u8] {
    let f = if i == 0 {
        f.strip_prefix(b"\xef\xbb\xbf").unwrap_or(f)
    } else {
        f
    };
    f.trim_ascii()
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
            .map(|(i, f)| column_name(i, f))
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
        // `Namespace` read as an extra column merged the rows of every namespace
        // together, silently: a column that is `namespace` but for its case is refused.
        if let (None, Some(f)) = (
            namespace,
            fields
                .iter()
                .find(|f| f.eq_ignore_ascii_case(NAMESPACE.as_bytes())),
        ) {
            return Err(InputError::Read {
                input: name.to_string(),
                line: 1,
                problem: format!(
                    "column {:?}: the namespace column is `{NAMESPACE}`, in lower case; \
                     rename it (read as an extra column, every namespace's rows would be merged)",
                    String::from_utf8_lossy(f)
                ),
            });
        }
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
            bom: false,
        }
    }

    /// Reads a headerless piece of an input whose first line is line `first_line`.
    pub fn from_header(h: &Header, input: R, first_line: u64) -> Self {
        RowReader {
            name: h.name.clone(),
            rdr: csv_reader(input),
            header: h.repeated(),
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
        f: impl FnMut(Pos, Result<Row<'_>, RowProblem>) -> bool,
    ) -> Result<(), InputError> {
        let Some(ns) = namespace else {
            return self.for_each_routed(|_| true, f);
        };
        self.for_each_routed(
            |v| {
                let matched = v == ns;
                seen(v, matched);
                matched
            },
            f,
        )
    }

    /// [`RowReader::for_each`] where, when the input has a `namespace` column,
    /// `route(namespace)` is called for every record with the header's field count (not
    /// a repeated header) before its row is parsed, and decides whether it is: a record
    /// it refuses is not passed to `f`. Records before that point (a wrong field count,
    /// over the cap) go to `f` without a `route` call: they name no namespace.
    pub fn for_each_routed(
        &mut self,
        mut route: impl FnMut(&[u8]) -> bool,
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
            if let Some(i) = c.namespace {
                if !may_be_header(&c, want, |j| &rec[j]) && !route(&rec[i]) {
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
