//! The four tables of a partial (contract §10), one Parquet file each per shard: their
//! rows, keys, schemas, and how two rows of one key combine.

use std::cmp::Ordering;

use parquet::basic::Compression;
use parquet::column::reader::get_typed_column_reader;
use parquet::data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::metadata::SortingColumn;
use parquet::file::properties::{WriterProperties, WriterVersion};
use parquet::file::reader::RowGroupReader;
use parquet::file::writer::SerializedRowGroupWriter;
use parquet::schema::types::Type;

use crate::dict::write_strings;
use crate::ints::Width;

/// A row group holds at most this many rows...
pub(crate) const ROW_GROUP_ROWS: usize = 8192;
/// ...and at most about this many bytes of strings (cut at the row that passes it), so
/// that one decoded row group, what a reader holds per open file, stays small whatever
/// the names' lengths.
pub(crate) const ROW_GROUP_BYTES: usize = 4 << 20;
/// What a reader takes of one string column of one row group: the writer's cut plus
/// one row of the largest a merge reads (1 MiB), with room. A file claiming more (a
/// forged one: a dictionary of one long name, repeated 8,192 times, decodes to
/// gigabytes from a few kilobytes) is refused before its strings are copied.
pub(crate) const COLUMN_STRING_CAP: usize = ROW_GROUP_BYTES + (2 << 20);

/// One row of a table, ordered by its key: implemented by the four row types of a
/// partial ([`LineRow`], [`FuncRow`], [`VersionRow`], [`PathRow`]) and by nothing else.
pub trait Table: Sized + Clone {
    /// The table's name: its files are `NAME-SSSSS.parquet`.
    const NAME: &'static str;
    /// Its Parquet schema (message type).
    const SCHEMA: &'static str;
    /// How many leading columns are the key (the file is sorted on them).
    const KEY_COLUMNS: usize;
    /// The file path of the row (shards are by path).
    fn path(&self) -> &str;
    /// Key order.
    fn cmp_key(&self, other: &Self) -> Ordering;
    /// Adds `other` (same key) into `self`: exact sums, saturating at 2^64 − 1.
    fn absorb(&mut self, other: &Self);
    /// Bytes of the strings of the row (for the row group's byte cap and budgets).
    fn string_bytes(&self) -> usize;
    /// Rows of input this table row stands for (summed into `rows_in`).
    fn input_rows(&self) -> u64;
    /// Writes `rows` as one row group's columns.
    fn write_group<W: std::io::Write + Send>(
        rows: &[Self],
        rg: &mut SerializedRowGroupWriter<'_, W>,
    ) -> parquet::errors::Result<()>;
    /// Reads a row group of `n` rows.
    fn read_group(rg: &dyn RowGroupReader, n: usize) -> Result<Vec<Self>, String>;
    /// Checks the values a reader may not trust (a version that is not a blob id...).
    fn check(&self) -> Result<(), String>;
}

/// Hits and rows of one (path, version, manager, line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRow {
    /// File path, relative to the repository root.
    pub path: String,
    /// The file's version: git's blob id (hex) of the file at the rows' commits.
    pub version: String,
    /// The manager that recorded the rows.
    pub manager: String,
    /// Line of the version, from 1.
    pub line: u32,
    /// Hits summed (saturating at 2^64 − 1).
    pub hits: u64,
    /// Rows summed.
    pub rows: u64,
}

/// Rows of one (path, version, line) naming one non-empty function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuncRow {
    /// File path.
    pub path: String,
    /// The file's version (blob id).
    pub version: String,
    /// Line of the version, from 1.
    pub line: u32,
    /// A non-empty `func_name`.
    pub func_name: String,
    /// Rows of that line (any manager) naming that function.
    pub rows: u64,
}

/// One commit that holds a version (the smallest in byte order among the rows').
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRow {
    /// File path.
    pub path: String,
    /// The file's version (blob id).
    pub version: String,
    /// A commit at which `path` is `version`.
    pub commit: String,
}

/// Every path the rows named, with the rows that reach no line of a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRow {
    /// File path.
    pub path: String,
    /// Rows whose `sl` is below 1.
    pub rows_without_line: u64,
    /// Rows with a line whose commit does not hold the path (no version).
    pub rows_without_version: u64,
    /// Hits of those rows (saturating).
    pub hits_without_version: u64,
}

/// Whether `v` is a git blob id: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits.
pub(crate) fn is_blob_id(v: &str) -> bool {
    (v.len() == 40 || v.len() == 64) && v.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn check_common(path: &str, version: Option<&str>) -> Result<(), String> {
    if path.is_empty() {
        return Err("an empty path".into());
    }
    if let Some(v) = version {
        if !is_blob_id(v) {
            return Err(format!("version {v:?} of {path:?} is not a blob id"));
        }
    }
    Ok(())
}

/// The writer settings of every file: fixed, so equal content gives equal bytes.
pub(crate) fn properties<T: Table>() -> WriterProperties {
    let sorting = (0..T::KEY_COLUMNS)
        .map(|i| SortingColumn {
            column_idx: i as i32,
            descending: false,
            nulls_first: false,
        })
        .collect();
    // Every column chunk is made whole by this crate (strings in `dict.rs`, integers
    // as deltas in `ints.rs`) and appended; the writer only frames the file.
    WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_1_0)
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_sorting_columns(Some(sorting))
        .build()
}

/// The schema of `T`, parsed.
pub(crate) fn schema<T: Table>() -> Type {
    parquet::schema::parser::parse_message_type(T::SCHEMA).expect("the schemas are valid")
}

/// Writes column `i` of table `T`, a `UINT32` column, as the next column of `rg`.
pub(crate) fn write_u32<T: Table, W: std::io::Write + Send>(
    rg: &mut SerializedRowGroupWriter<'_, W>,
    i: usize,
    values: impl Iterator<Item = u32>,
) -> parquet::errors::Result<()> {
    crate::ints::write_ints::<T, W>(rg, i, Width::W32, values.map(u64::from))
}

/// Writes column `i` of table `T`, a `UINT64` column, as the next column of `rg`.
pub(crate) fn write_u64<T: Table, W: std::io::Write + Send>(
    rg: &mut SerializedRowGroupWriter<'_, W>,
    i: usize,
    values: impl Iterator<Item = u64>,
) -> parquet::errors::Result<()> {
    crate::ints::write_ints::<T, W>(rg, i, Width::W64, values)
}

fn read_strings(rg: &dyn RowGroupReader, i: usize, n: usize) -> Result<Vec<String>, String> {
    let mut r = get_typed_column_reader::<ByteArrayType>(
        rg.get_column_reader(i).map_err(|e| e.to_string())?,
    );
    let mut v: Vec<ByteArray> = Vec::with_capacity(n);
    while v.len() < n {
        let (got, _, _) = r
            .read_records(n - v.len(), None, None, &mut v)
            .map_err(|e| e.to_string())?;
        if got == 0 {
            return Err(format!("column {i} ends after {} of {n} rows", v.len()));
        }
    }
    // Values of a dictionary share its buffer: their lengths are summed before any
    // is copied.
    let total: usize = v.iter().map(|b| b.len()).sum();
    if total > COLUMN_STRING_CAP {
        return Err(format!(
            "column {i} holds {total} bytes of strings in {n} rows, more than the \
             {COLUMN_STRING_CAP} a partial's row group may"
        ));
    }
    v.into_iter()
        .map(|b| {
            String::from_utf8(b.data().to_vec())
                .map_err(|_| format!("column {i} holds a value that is not UTF-8"))
        })
        .collect()
}

fn read_i32(rg: &dyn RowGroupReader, i: usize, n: usize) -> Result<Vec<u32>, String> {
    let mut r =
        get_typed_column_reader::<Int32Type>(rg.get_column_reader(i).map_err(|e| e.to_string())?);
    let mut v: Vec<i32> = Vec::with_capacity(n);
    while v.len() < n {
        let (got, _, _) = r
            .read_records(n - v.len(), None, None, &mut v)
            .map_err(|e| e.to_string())?;
        if got == 0 {
            return Err(format!("column {i} ends after {} of {n} rows", v.len()));
        }
    }
    Ok(v.into_iter().map(|x| x as u32).collect())
}

fn read_i64(rg: &dyn RowGroupReader, i: usize, n: usize) -> Result<Vec<u64>, String> {
    let mut r =
        get_typed_column_reader::<Int64Type>(rg.get_column_reader(i).map_err(|e| e.to_string())?);
    let mut v: Vec<i64> = Vec::with_capacity(n);
    while v.len() < n {
        let (got, _, _) = r
            .read_records(n - v.len(), None, None, &mut v)
            .map_err(|e| e.to_string())?;
        if got == 0 {
            return Err(format!("column {i} ends after {} of {n} rows", v.len()));
        }
    }
    Ok(v.into_iter().map(|x| x as u64).collect())
}

impl Table for LineRow {
    const NAME: &'static str = "lines";
    const SCHEMA: &'static str = "message lines {
        REQUIRED BYTE_ARRAY path (STRING);
        REQUIRED BYTE_ARRAY version (STRING);
        REQUIRED BYTE_ARRAY manager (STRING);
        REQUIRED INT32 line (INTEGER(32,false));
        REQUIRED INT64 hits (INTEGER(64,false));
        REQUIRED INT64 rows (INTEGER(64,false));
    }";
    const KEY_COLUMNS: usize = 4;
    fn path(&self) -> &str {
        &self.path
    }
    fn cmp_key(&self, o: &Self) -> Ordering {
        (
            self.path.as_bytes(),
            self.version.as_bytes(),
            self.manager.as_bytes(),
            self.line,
        )
            .cmp(&(
                o.path.as_bytes(),
                o.version.as_bytes(),
                o.manager.as_bytes(),
                o.line,
            ))
    }
    fn absorb(&mut self, o: &Self) {
        self.hits = self.hits.saturating_add(o.hits);
        self.rows = self.rows.saturating_add(o.rows);
    }
    fn string_bytes(&self) -> usize {
        self.path.len() + self.version.len() + self.manager.len()
    }
    fn input_rows(&self) -> u64 {
        self.rows
    }
    fn write_group<W: std::io::Write + Send>(
        rows: &[Self],
        rg: &mut SerializedRowGroupWriter<'_, W>,
    ) -> parquet::errors::Result<()> {
        write_strings::<Self, W>(rg, 0, rows.iter().map(|r| r.path.as_bytes()))?;
        write_strings::<Self, W>(rg, 1, rows.iter().map(|r| r.version.as_bytes()))?;
        write_strings::<Self, W>(rg, 2, rows.iter().map(|r| r.manager.as_bytes()))?;
        write_u32::<Self, W>(rg, 3, rows.iter().map(|r| r.line))?;
        write_u64::<Self, W>(rg, 4, rows.iter().map(|r| r.hits))?;
        write_u64::<Self, W>(rg, 5, rows.iter().map(|r| r.rows))
    }
    fn read_group(rg: &dyn RowGroupReader, n: usize) -> Result<Vec<Self>, String> {
        let path = read_strings(rg, 0, n)?;
        let version = read_strings(rg, 1, n)?;
        let manager = read_strings(rg, 2, n)?;
        let line = read_i32(rg, 3, n)?;
        let hits = read_i64(rg, 4, n)?;
        let rows = read_i64(rg, 5, n)?;
        Ok(path
            .into_iter()
            .zip(version)
            .zip(manager)
            .zip(line.into_iter().zip(hits).zip(rows))
            .map(
                |(((path, version), manager), ((line, hits), rows))| LineRow {
                    path,
                    version,
                    manager,
                    line,
                    hits,
                    rows,
                },
            )
            .collect())
    }
    fn check(&self) -> Result<(), String> {
        check_common(&self.path, Some(&self.version))?;
        if self.manager.is_empty() || self.line == 0 || self.rows == 0 {
            return Err(format!(
                "a row of {:?} with an empty manager, line 0 or no rows",
                self.path
            ));
        }
        // A manager no record may take (`*`, past the cap): refused by every reader,
        // a roll-up too (it took them, and the merge of its output named the roll-up).
        if let Err(why) = covmerge_proto::group::check_manager(self.manager.as_bytes(), &[]) {
            return Err(format!(
                "a row of {:?} whose manager {:?} {why}",
                self.path, self.manager
            ));
        }
        Ok(())
    }
}

impl Table for FuncRow {
    const NAME: &'static str = "funcs";
    const SCHEMA: &'static str = "message funcs {
        REQUIRED BYTE_ARRAY path (STRING);
        REQUIRED BYTE_ARRAY version (STRING);
        REQUIRED INT32 line (INTEGER(32,false));
        REQUIRED BYTE_ARRAY func_name (STRING);
        REQUIRED INT64 rows (INTEGER(64,false));
    }";
    const KEY_COLUMNS: usize = 4;
    fn path(&self) -> &str {
        &self.path
    }
    fn cmp_key(&self, o: &Self) -> Ordering {
        (
            self.path.as_bytes(),
            self.version.as_bytes(),
            self.line,
            self.func_name.as_bytes(),
        )
            .cmp(&(
                o.path.as_bytes(),
                o.version.as_bytes(),
                o.line,
                o.func_name.as_bytes(),
            ))
    }
    fn absorb(&mut self, o: &Self) {
        self.rows = self.rows.saturating_add(o.rows);
    }
    fn string_bytes(&self) -> usize {
        self.path.len() + self.version.len() + self.func_name.len()
    }
    fn input_rows(&self) -> u64 {
        0
    }
    fn write_group<W: std::io::Write + Send>(
        rows: &[Self],
        rg: &mut SerializedRowGroupWriter<'_, W>,
    ) -> parquet::errors::Result<()> {
        write_strings::<Self, W>(rg, 0, rows.iter().map(|r| r.path.as_bytes()))?;
        write_strings::<Self, W>(rg, 1, rows.iter().map(|r| r.version.as_bytes()))?;
        write_u32::<Self, W>(rg, 2, rows.iter().map(|r| r.line))?;
        write_strings::<Self, W>(rg, 3, rows.iter().map(|r| r.func_name.as_bytes()))?;
        write_u64::<Self, W>(rg, 4, rows.iter().map(|r| r.rows))
    }
    fn read_group(rg: &dyn RowGroupReader, n: usize) -> Result<Vec<Self>, String> {
        let path = read_strings(rg, 0, n)?;
        let version = read_strings(rg, 1, n)?;
        let line = read_i32(rg, 2, n)?;
        let func = read_strings(rg, 3, n)?;
        let rows = read_i64(rg, 4, n)?;
        Ok(path
            .into_iter()
            .zip(version)
            .zip(line)
            .zip(func.into_iter().zip(rows))
            .map(|(((path, version), line), (func_name, rows))| FuncRow {
                path,
                version,
                line,
                func_name,
                rows,
            })
            .collect())
    }
    fn check(&self) -> Result<(), String> {
        check_common(&self.path, Some(&self.version))?;
        if self.func_name.is_empty() || self.line == 0 || self.rows == 0 {
            return Err(format!(
                "a function row of {:?} with an empty name, line 0 or no rows",
                self.path
            ));
        }
        Ok(())
    }
}

impl Table for VersionRow {
    const NAME: &'static str = "versions";
    const SCHEMA: &'static str = "message versions {
        REQUIRED BYTE_ARRAY path (STRING);
        REQUIRED BYTE_ARRAY version (STRING);
        REQUIRED BYTE_ARRAY commit (STRING);
    }";
    const KEY_COLUMNS: usize = 2;
    fn path(&self) -> &str {
        &self.path
    }
    fn cmp_key(&self, o: &Self) -> Ordering {
        (self.path.as_bytes(), self.version.as_bytes())
            .cmp(&(o.path.as_bytes(), o.version.as_bytes()))
    }
    fn absorb(&mut self, o: &Self) {
        // The smallest commit: the same whatever the grouping and order of the rows.
        if o.commit.as_bytes() < self.commit.as_bytes() {
            self.commit.clone_from(&o.commit);
        }
    }
    fn string_bytes(&self) -> usize {
        self.path.len() + self.version.len() + self.commit.len()
    }
    fn input_rows(&self) -> u64 {
        0
    }
    fn write_group<W: std::io::Write + Send>(
        rows: &[Self],
        rg: &mut SerializedRowGroupWriter<'_, W>,
    ) -> parquet::errors::Result<()> {
        write_strings::<Self, W>(rg, 0, rows.iter().map(|r| r.path.as_bytes()))?;
        write_strings::<Self, W>(rg, 1, rows.iter().map(|r| r.version.as_bytes()))?;
        write_strings::<Self, W>(rg, 2, rows.iter().map(|r| r.commit.as_bytes()))
    }
    fn read_group(rg: &dyn RowGroupReader, n: usize) -> Result<Vec<Self>, String> {
        let path = read_strings(rg, 0, n)?;
        let version = read_strings(rg, 1, n)?;
        let commit = read_strings(rg, 2, n)?;
        Ok(path
            .into_iter()
            .zip(version)
            .zip(commit)
            .map(|((path, version), commit)| VersionRow {
                path,
                version,
                commit,
            })
            .collect())
    }
    fn check(&self) -> Result<(), String> {
        check_common(&self.path, Some(&self.version))?;
        if self.commit.is_empty() {
            return Err(format!(
                "version {} of {:?} has no commit",
                self.version, self.path
            ));
        }
        Ok(())
    }
}

impl Table for PathRow {
    const NAME: &'static str = "paths";
    const SCHEMA: &'static str = "message paths {
        REQUIRED BYTE_ARRAY path (STRING);
        REQUIRED INT64 rows_without_line (INTEGER(64,false));
        REQUIRED INT64 rows_without_version (INTEGER(64,false));
        REQUIRED INT64 hits_without_version (INTEGER(64,false));
    }";
    const KEY_COLUMNS: usize = 1;
    fn path(&self) -> &str {
        &self.path
    }
    fn cmp_key(&self, o: &Self) -> Ordering {
        self.path.as_bytes().cmp(o.path.as_bytes())
    }
    fn absorb(&mut self, o: &Self) {
        self.rows_without_line = self.rows_without_line.saturating_add(o.rows_without_line);
        self.rows_without_version = self
            .rows_without_version
            .saturating_add(o.rows_without_version);
        self.hits_without_version = self
            .hits_without_version
            .saturating_add(o.hits_without_version);
    }
    fn string_bytes(&self) -> usize {
        self.path.len()
    }
    fn input_rows(&self) -> u64 {
        self.rows_without_line
            .saturating_add(self.rows_without_version)
    }
    fn write_group<W: std::io::Write + Send>(
        rows: &[Self],
        rg: &mut SerializedRowGroupWriter<'_, W>,
    ) -> parquet::errors::Result<()> {
        write_strings::<Self, W>(rg, 0, rows.iter().map(|r| r.path.as_bytes()))?;
        write_u64::<Self, W>(rg, 1, rows.iter().map(|r| r.rows_without_line))?;
        write_u64::<Self, W>(rg, 2, rows.iter().map(|r| r.rows_without_version))?;
        write_u64::<Self, W>(rg, 3, rows.iter().map(|r| r.hits_without_version))
    }
    fn read_group(rg: &dyn RowGroupReader, n: usize) -> Result<Vec<Self>, String> {
        let path = read_strings(rg, 0, n)?;
        let wl = read_i64(rg, 1, n)?;
        let wv = read_i64(rg, 2, n)?;
        let hv = read_i64(rg, 3, n)?;
        Ok(path
            .into_iter()
            .zip(wl)
            .zip(wv.into_iter().zip(hv))
            .map(
                |((path, rows_without_line), (rows_without_version, hits_without_version))| {
                    PathRow {
                        path,
                        rows_without_line,
                        rows_without_version,
                        hits_without_version,
                    }
                },
            )
            .collect())
    }
    fn check(&self) -> Result<(), String> {
        check_common(&self.path, None)
    }
}
