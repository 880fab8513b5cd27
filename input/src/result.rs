//! Reads a merge result back (`report`, `diff` and the publish gate; contract §4: a gzip of JSON lines, a local path or an object-store
//! URL) as a stream of files: the header, then one [`FileCov`] per file with its `*`
//! record, its managers' records and its functions.
//!
//! covmerge (and syz-covermerger) write all records of a file together, so the reader
//! holds one file at a time. A result whose records of one file are spread out is
//! refused with [`ReadError::NotContiguous`]; [`read_grouped`] then reads it whole into
//! memory instead. Every record is checked against contract §4 (`Instrumented` and `Covered`
//! equal to what the arrays say, lines ascending): the report shows the result's numbers
//! or refuses it, naming the result and the line.
//!
//! A `FilePath` that is not canonical ([`covmerge_proto::path::canonical_path`]: `..`,
//! absolute, `//`, `./`, ...) cannot come from a merge, which refuses such rows. Its
//! numbers are kept (the result's totals stay the result's), but the file is marked
//! ([`FileCov::path_problem`]) and its text is never asked of a source: a warning names
//! the result, the line and the path.

use std::io::{BufRead, BufReader};

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Deserialize;

use crate::budget::{mib, Budget};

/// Line 1 of a result (Go `coveragedb.HistoryRecord`).
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Header {
    /// `Namespace`.
    #[serde(default)]
    pub namespace: String,
    /// `Repo`: the repository of the base.
    #[serde(default)]
    pub repo: String,
    /// `Commit`: the base commit.
    pub commit: String,
    /// `Duration`: days the rows span.
    #[serde(default)]
    pub duration: i64,
    /// `DateTo`: last day of the rows.
    #[serde(default)]
    pub date_to: String,
    /// `TotalRows`: data rows read.
    #[serde(default)]
    pub total_rows: i64,
    /// `Time`: when the result was made (RFC 3339), where the header has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

/// One manager's lines of one file (`*` is the overall record).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LineHits {
    /// Ascending line numbers.
    pub lines: Vec<u32>,
    /// Hit counts aligned with `lines`.
    pub hits: Vec<u64>,
}

impl LineHits {
    /// Lines with a record.
    pub fn instrumented(&self) -> u64 {
        self.lines.len() as u64
    }

    /// Lines with hits above 0.
    pub fn covered(&self) -> u64 {
        self.hits.iter().filter(|&&h| h > 0).count() as u64
    }

    /// The hit count of `line`, `None` when it is not instrumented.
    pub fn get(&self, line: u32) -> Option<u64> {
        self.lines.binary_search(&line).ok().map(|i| self.hits[i])
    }
}

/// Everything a result says about one file.
#[derive(Debug, Clone, Default)]
pub struct FileCov {
    /// The file, as a repository path.
    pub path: String,
    /// The `*` record (empty when the result has none for this file).
    pub star: LineHits,
    /// Whether the result has a `*` record for this file (contract §4: always).
    pub has_star: bool,
    /// The line of the result where the file's first record is (0: not read from a
    /// result).
    pub line: u64,
    /// Per manager, sorted by manager name.
    pub managers: Vec<(String, LineHits)>,
    /// Functions and their lines, as in the `FL` records.
    pub funcs: Vec<(String, Vec<u32>)>,
    /// Why `path` is not a canonical path (with the result and line of its first
    /// record): no source is asked for its text.
    pub path_problem: Option<String>,
}

impl FileCov {
    /// About the bytes this file holds in memory (its arrays, names and vectors).
    pub fn bytes(&self) -> u64 {
        let lh = |l: &LineHits| 48 + l.lines.len() as u64 * 12;
        self.path.len() as u64
            + 160
            + lh(&self.star)
            + self
                .managers
                .iter()
                .map(|(m, l)| 24 + m.len() as u64 + lh(l))
                .sum::<u64>()
            + self
                .funcs
                .iter()
                .map(|(f, l)| 48 + f.len() as u64 + l.len() as u64 * 4)
                .sum::<u64>()
    }

    /// A file of result `result` first seen on `line`; a path that is not canonical is
    /// marked and warned about.
    fn new(result: &str, line: u64, path: &str) -> FileCov {
        let path_problem = covmerge_proto::path::canonical_path(path.as_bytes())
            .err()
            .map(|why| {
                let m = format!(
                    "result {result}, line {line}: FilePath {path:?} is not a canonical path relative to the source root (it {why}): its source text is not read"
                );
                tracing::warn!("{m}");
                m
            });
        FileCov {
            path: path.to_string(),
            line,
            path_problem,
            ..FileCov::default()
        }
    }
}

/// Why a result cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The result cannot be opened or decompressed.
    #[error("result {result}: {message}")]
    Open {
        /// The result, as named.
        result: String,
        /// What failed.
        message: String,
    },
    /// A line that is not a record of a result (bad JSON, a field missing).
    #[error("result {result}, line {line}: {message}")]
    Bad {
        /// The result, as named.
        result: String,
        /// The line, counting from 1.
        line: u64,
        /// What is wrong with it.
        message: String,
    },
    /// A file's records come in two runs: a streamed read needs them together.
    #[error("result {result}, line {line}: records of {path} are not contiguous")]
    NotContiguous {
        /// The result, as named.
        result: String,
        /// The line where the file's records resumed.
        line: u64,
        /// The file.
        path: String,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct FileData {
    instrumented: u64,
    covered: u64,
    // Go writes an empty slice that was never made as `null`.
    #[serde(deserialize_with = "null_as_empty")]
    lines_instrumented: Vec<u32>,
    #[serde(deserialize_with = "null_as_empty")]
    hit_counts: Vec<u64>,
}

/// A JSON array, `null` read as an empty one (a nil slice as Go's encoder writes it).
fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Mcr {
    manager: String,
    file_path: String,
    file_data: FileData,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Fl {
    file_path: String,
    func_name: String,
    #[serde(deserialize_with = "null_as_empty")]
    lines: Vec<u32>,
}

#[derive(Deserialize)]
struct Record {
    #[serde(rename = "MCR")]
    mcr: Option<Mcr>,
    #[serde(rename = "FL")]
    fl: Option<Fl>,
}

/// A result opened for reading file by file.
pub struct ResultReader {
    name: String,
    input: Box<dyn BufRead + Send>,
    line: u64,
    buf: String,
    header: Header,
    /// The record read past the end of the previous file.
    pending: Option<(u64, Record)>,
    done: FxHashSet<String>,
    budget: Budget,
}

/// Opens a result: a local path or an object-store URL, gzip or plain. Store objects
/// are streamed by a task on `rt`; call `next_file` from a blocking thread.
pub fn open(
    spec: &str,
    rt: &tokio::runtime::Handle,
    budget: Budget,
) -> Result<ResultReader, ReadError> {
    use crate::{open_input, Inflate};
    let raw = open_input(spec, rt, Inflate::Pipelined).map_err(|e| ReadError::Open {
        result: spec.to_string(),
        message: e.to_string(),
    })?;
    ResultReader::with_budget(
        spec,
        Box::new(BufReader::with_capacity(1 << 20, raw)),
        budget,
    )
}

impl ResultReader {
    /// Reads the header line of `input`, named `name` in errors, within the default
    /// budget.
    pub fn new(name: &str, input: Box<dyn BufRead + Send>) -> Result<Self, ReadError> {
        Self::with_budget(name, input, Budget::default())
    }

    /// Reads the header line of `input`; lines and files are capped by `budget`.
    pub fn with_budget(
        name: &str,
        input: Box<dyn BufRead + Send>,
        budget: Budget,
    ) -> Result<Self, ReadError> {
        let mut r = ResultReader {
            budget,
            name: name.to_string(),
            input,
            line: 0,
            buf: String::new(),
            header: Header::default(),
            pending: None,
            done: FxHashSet::default(),
        };
        if !r.read_line()? {
            return Err(r.bad(1, "empty: expected the header line"));
        }
        r.header = serde_json::from_str(&r.buf)
            .map_err(|e| r.bad(1, &format!("not a header line (Commit, Repo, ...): {e}")))?;
        Ok(r)
    }

    /// Reads `input`, a part of a result (its records without the header line: what
    /// one merge task wrote); lines are counted from the part's first record.
    pub fn part(name: &str, input: Box<dyn BufRead + Send>, budget: Budget) -> Self {
        ResultReader {
            budget,
            name: name.to_string(),
            input,
            line: 0,
            buf: String::new(),
            header: Header::default(),
            pending: None,
            done: FxHashSet::default(),
        }
    }

    /// The result, as named.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The result's header line.
    pub fn header(&self) -> &Header {
        &self.header
    }

    fn bad(&self, line: u64, message: &str) -> ReadError {
        ReadError::Bad {
            result: self.name.clone(),
            line,
            message: message.to_string(),
        }
    }

    /// Reads the next non-empty line into `buf`; false at the end. A line longer than
    /// the budget's line cap is refused as soon as the cap is passed, never held whole.
    fn read_line(&mut self) -> Result<bool, ReadError> {
        use std::io::Read;
        let cap = self.budget.line_cap();
        loop {
            self.buf.clear();
            let n = (&mut self.input)
                .take(cap as u64 + 1)
                .read_line(&mut self.buf)
                .map_err(|e| self.bad(self.line + 1, &format!("reading: {e}")))?;
            if n == 0 {
                return Ok(false);
            }
            if n > cap {
                return Err(self.bad(
                    self.line + 1,
                    &format!(
                        "a line longer than {}, the cap on a result record (a quarter of --memory-budget {}; a file of about {:.1} M instrumented lines): not a covmerge result, or one that needs a larger --memory-budget",
                        mib(cap as u64),
                        self.budget,
                        cap as f64 / 20e6
                    ),
                ));
            }
            self.line += 1;
            if !self.buf.trim().is_empty() {
                return Ok(true);
            }
        }
    }

    fn next_record(&mut self) -> Result<Option<(u64, Record)>, ReadError> {
        if let Some(p) = self.pending.take() {
            return Ok(Some(p));
        }
        if !self.read_line()? {
            return Ok(None);
        }
        let rec: Record = serde_json::from_str(&self.buf)
            .map_err(|e| self.bad(self.line, &format!("not an MCR or FL record: {e}")))?;
        Ok(Some((self.line, rec)))
    }

    /// The next file, `None` at the end.
    pub fn next_file(&mut self) -> Result<Option<FileCov>, ReadError> {
        let mut file: Option<FileCov> = None;
        let mut seen = FxHashSet::default();
        let mut held = 0u64;
        while let Some((line, rec)) = self.next_record()? {
            let path = record_path(&rec).ok_or_else(|| {
                self.bad(line, "a record needs exactly one of MCR and FL non-null")
            })?;
            match &file {
                Some(f) if f.path != path => {
                    self.pending = Some((line, rec));
                    break;
                }
                None if self.done.contains(path) => {
                    return Err(ReadError::NotContiguous {
                        result: self.name.clone(),
                        line,
                        path: path.to_string(),
                    })
                }
                _ => {}
            }
            let f = file.get_or_insert_with(|| FileCov::new(&self.name, line, path));
            held += record_bytes(&rec);
            if held > self.budget.file_cap() {
                return Err(self.bad(line, &over_file_cap(&f.path, held, self.budget)));
            }
            add_record(f, rec, &mut seen, 0).map_err(|m| self.bad(line, &m))?;
        }
        if let Some(f) = &mut file {
            self.done.insert(f.path.clone());
            f.managers.sort_by(|a, b| a.0.cmp(&b.0));
            check_file(f).map_err(|m| self.bad(f.line, &m))?;
        }
        Ok(file)
    }

    /// The next file, its records handed to `visit` one at a time as they are read
    /// (each checked as [`ResultReader::next_file`] checks it), so that a file is never
    /// held whole; returns the file (path, first line, path problem) with no records
    /// in it, `None` at the end. For checks that need one record at a time.
    pub fn next_file_records<E>(
        &mut self,
        mut visit: impl FnMut(&FileCov, u64, FileRecord) -> Result<(), E>,
    ) -> Result<Option<FileCov>, StreamError<E>> {
        let mut file: Option<FileCov> = None;
        let mut seen = FxHashSet::default();
        while let Some((line, rec)) = self.next_record().map_err(StreamError::Read)? {
            let path = record_path(&rec).ok_or_else(|| {
                StreamError::Read(
                    self.bad(line, "a record needs exactly one of MCR and FL non-null"),
                )
            })?;
            match &file {
                Some(f) if f.path != path => {
                    self.pending = Some((line, rec));
                    break;
                }
                None if self.done.contains(path) => {
                    return Err(StreamError::Read(ReadError::NotContiguous {
                        result: self.name.clone(),
                        line,
                        path: path.to_string(),
                    }))
                }
                _ => {}
            }
            let f = file.get_or_insert_with(|| FileCov::new(&self.name, line, path));
            let r = check_record(rec, &mut seen, 0)
                .map_err(|m| StreamError::Read(self.bad(line, &m)))?;
            if let Some(r) = r {
                visit(f, line, r).map_err(StreamError::Visit)?;
            }
        }
        if let Some(f) = &file {
            self.done.insert(f.path.clone());
        }
        Ok(file)
    }
}

fn record_path(r: &Record) -> Option<&str> {
    match (&r.mcr, &r.fl) {
        (Some(m), None) => Some(&m.file_path),
        (None, Some(f)) => Some(&f.file_path),
        _ => None,
    }
}

/// About the bytes a record holds once added to its file.
fn record_bytes(r: &Record) -> u64 {
    match (&r.mcr, &r.fl) {
        (Some(m), _) => {
            72 + m.manager.len() as u64 + m.file_data.lines_instrumented.len() as u64 * 12
        }
        (_, Some(f)) => 48 + f.func_name.len() as u64 + f.lines.len() as u64 * 4,
        _ => 0,
    }
}

/// Why a file whose records hold more than the budget's share of one file is refused.
fn over_file_cap(path: &str, held: u64, budget: Budget) -> String {
    format!(
        "the records of {path} hold about {} in memory, over the share of one file (a quarter of --memory-budget {budget}): give a larger --memory-budget",
        mib(held),
    )
}

/// One record of a file, checked as [`ResultReader::next_file`] checks it, as
/// [`ResultReader::next_file_records`] hands it over.
#[derive(Debug)]
pub enum FileRecord {
    /// An `MCR` record: its manager (`*` for the overall record) and its lines.
    Mcr(String, LineHits),
    /// An `FL` record: its function and its lines.
    Fl(String, Vec<u32>),
}

/// Why [`ResultReader::next_file_records`] stopped.
#[derive(Debug)]
pub enum StreamError<E> {
    /// The reader refused a record.
    Read(ReadError),
    /// The visitor did.
    Visit(E),
}

/// Adds a checked record to its file (number `file` in `seen`, the (file, manager)
/// pairs read so far: a hash lookup per record, where a scan of the file's managers
/// made 60,000 managers take minutes).
/// Checks a whole file read by [`ResultReader::next_file`] (contract §4): it has its
/// `*` record, and no hit count past Go's int64.
fn check_file(f: &FileCov) -> Result<(), String> {
    if !f.has_star {
        return Err(format!(
            "file {:?} has no MCR record of manager \"*\" (every file has one)",
            f.path
        ));
    }
    let records =
        std::iter::once(("*", &f.star)).chain(f.managers.iter().map(|(m, l)| (m.as_str(), l)));
    for (m, lh) in records {
        if let Some(i) = lh.hits.iter().position(|&h| h > i64::MAX as u64) {
            return Err(format!(
                "file {:?}, MCR of manager {m:?}: line {} has {} hits, past int64",
                f.path, lh.lines[i], lh.hits[i]
            ));
        }
    }
    Ok(())
}

fn add_record(
    f: &mut FileCov,
    rec: Record,
    seen: &mut FxHashSet<(usize, String)>,
    file: usize,
) -> Result<(), String> {
    match check_record(rec, seen, file)? {
        Some(FileRecord::Fl(func, lines)) => f.funcs.push((func, lines)),
        Some(FileRecord::Mcr(m, lh)) if m == "*" => {
            f.has_star = true;
            f.star = lh;
        }
        Some(FileRecord::Mcr(m, lh)) => f.managers.push((m, lh)),
        None => {}
    }
    Ok(())
}

/// Checks a record on its own and against the names of its file seen so far.
fn check_record(
    rec: Record,
    seen: &mut FxHashSet<(usize, String)>,
    file: usize,
) -> Result<Option<FileRecord>, String> {
    if let Some(fl) = rec.fl {
        if !fl.lines.windows(2).all(|w| w[0] < w[1]) {
            return Err(format!("FL {}: Lines not ascending", fl.func_name));
        }
        if fl.lines.first() == Some(&0) {
            return Err(format!("FL {}: line 0 (lines count from 1)", fl.func_name));
        }
        return Ok(Some(FileRecord::Fl(fl.func_name, fl.lines)));
    }
    let Some(m) = rec.mcr else { return Ok(None) };
    let d = m.file_data;
    let who = format!("MCR of manager {:?}", m.manager);
    if d.lines_instrumented.len() != d.hit_counts.len() {
        return Err(format!(
            "{who}: {} LinesInstrumented but {} HitCounts",
            d.lines_instrumented.len(),
            d.hit_counts.len()
        ));
    }
    if !d.lines_instrumented.windows(2).all(|w| w[0] < w[1]) {
        return Err(format!("{who}: LinesInstrumented not ascending"));
    }
    // Lines count from 1 (contract §4): a line 0 was shown as a line of the source.
    if d.lines_instrumented.first() == Some(&0) {
        return Err(format!(
            "{who}: line 0 in LinesInstrumented (lines count from 1)"
        ));
    }
    let lh = LineHits {
        lines: d.lines_instrumented,
        hits: d.hit_counts,
    };
    if d.instrumented != lh.instrumented() || d.covered != lh.covered() {
        return Err(format!(
            "{who}: Instrumented {} / Covered {} but the arrays say {} / {}",
            d.instrumented,
            d.covered,
            lh.instrumented(),
            lh.covered()
        ));
    }
    // Kept in `seen` for `*` too: an empty first `*` record is still the file's one.
    if !seen.insert((file, m.manager.clone())) {
        return Err(if m.manager == "*" {
            "a second MCR of manager \"*\"".into()
        } else {
            format!("a second {who}")
        });
    }
    Ok(Some(FileRecord::Mcr(m.manager, lh)))
}

/// A result's files: streamed, or read whole and grouped (see [`read_grouped`]).
pub enum Files {
    /// Read a file at a time, as the result is.
    Stream(Box<ResultReader>),
    /// Read whole and grouped by file.
    Grouped {
        /// The result, as named.
        name: String,
        /// Its header line.
        header: Header,
        /// Its files, in order of first appearance.
        files: std::vec::IntoIter<FileCov>,
    },
}

impl Files {
    /// Opens `spec` streamed, or (`grouped`) reads it whole.
    pub fn open(
        spec: &str,
        rt: &tokio::runtime::Handle,
        grouped: bool,
        budget: Budget,
    ) -> Result<Files, ReadError> {
        Ok(if grouped {
            let (header, files) = read_grouped(spec, rt, budget)?;
            Files::Grouped {
                name: spec.to_string(),
                header,
                files: files.into_iter(),
            }
        } else {
            Files::Stream(Box::new(open(spec, rt, budget)?))
        })
    }

    /// The result, as named.
    pub fn name(&self) -> &str {
        match self {
            Files::Stream(r) => r.name(),
            Files::Grouped { name, .. } => name,
        }
    }

    /// The result's header line.
    pub fn header(&self) -> &Header {
        match self {
            Files::Stream(r) => r.header(),
            Files::Grouped { header, .. } => header,
        }
    }

    /// The next file, `None` at the end.
    pub fn next_file(&mut self) -> Result<Option<FileCov>, ReadError> {
        match self {
            Files::Stream(r) => r.next_file(),
            Files::Grouped { files, .. } => Ok(files.next()),
        }
    }
}

/// Reads a whole result into memory, grouping records of a file wherever they are,
/// files in order of first appearance. For results that [`ResultReader::next_file`]
/// refuses as not contiguous; one that holds more than half the budget is refused.
pub fn read_grouped(
    spec: &str,
    rt: &tokio::runtime::Handle,
    budget: Budget,
) -> Result<(Header, Vec<FileCov>), ReadError> {
    let mut r = open(spec, rt, budget)?;
    let mut held = 0u64;
    let mut files: Vec<FileCov> = Vec::new();
    let mut index: FxHashMap<String, usize> = FxHashMap::default();
    let mut seen = FxHashSet::default();
    while let Some((line, rec)) = r.next_record()? {
        let path = record_path(&rec)
            .ok_or_else(|| r.bad(line, "a record needs exactly one of MCR and FL non-null"))?
            .to_string();
        let i = *index.entry(path.clone()).or_insert_with(|| {
            files.push(FileCov::new(&r.name, line, &path));
            files.len() - 1
        });
        held += record_bytes(&rec) + 48;
        add_record(&mut files[i], rec, &mut seen, i).map_err(|m| r.bad(line, &m))?;
        if held > budget.0 / 2 {
            return Err(r.bad(
                line,
                &format!(
                    "the records of a file are not contiguous, so the result is grouped in memory, and it holds more than half of --memory-budget {} (about {} so far): write the result with each file's records together (as covmerge merge does) or give a larger --memory-budget",
                    budget,
                    mib(held)
                ),
            ));
        }
    }
    for f in &mut files {
        f.managers.sort_by(|a, b| a.0.cmp(&b.0));
    }
    Ok((r.header, files))
}

#[cfg(test)]
mod tests;
