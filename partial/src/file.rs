//! One table file of one shard: written sorted, summing rows of one key, with its size and
//! SHA-256; read back only after both match the description, row group by row group.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::{SerializedFileWriter, SerializedRowGroupWriter};
use sha2::{Digest, Sha256};

use crate::desc::FileEntry;
use crate::table::{properties, schema, Table, ROW_GROUP_BYTES, ROW_GROUP_ROWS};
use crate::PartialError;

/// The name of table `T`'s file of shard `shard`.
pub(crate) fn file_name<T: Table>(shard: u32) -> String {
    format!("{}-{shard:05}.parquet", T::NAME)
}

/// Whether `name` is the name of a table file of some shard (`lines-00003.parquet`):
/// a directory holding only such files and no description is a partial whose writing
/// was cut (its description goes first when it is replaced, comes last when written).
pub fn is_table_file_name(name: &str) -> bool {
    let Some(rest) = name.strip_suffix(".parquet") else {
        return false;
    };
    let Some((table, shard)) = rest.rsplit_once('-') else {
        return false;
    };
    matches!(table, "lines" | "funcs" | "versions" | "paths")
        && shard.len() == 5
        && shard.bytes().all(|b| b.is_ascii_digit())
}

/// A `Write` that counts and hashes what goes through it.
pub(crate) struct Hashing {
    out: BufWriter<File>,
    sha: Sha256,
    bytes: u64,
}

impl Write for Hashing {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.sha.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// One table file being written, a row group at a time, counted and hashed.
pub(crate) struct TableFile<T: Table> {
    path: PathBuf,
    name: String,
    w: SerializedFileWriter<Hashing>,
    rows: u64,
    _table: std::marker::PhantomData<T>,
}

impl<T: Table> TableFile<T> {
    /// Creates `dir/NAME-SSSSS.parquet`.
    pub(crate) fn create(dir: &Path, shard: u32) -> Result<Self, PartialError> {
        let name = file_name::<T>(shard);
        let path = dir.join(&name);
        let f = File::create(&path).map_err(|e| PartialError::io(&path, e))?;
        let sink = Hashing {
            out: BufWriter::with_capacity(1 << 16, f),
            sha: Sha256::new(),
            bytes: 0,
        };
        let w =
            SerializedFileWriter::new(sink, Arc::new(schema::<T>()), Arc::new(properties::<T>()))
                .map_err(|e| PartialError::written(&path, e))?;
        Ok(TableFile {
            path,
            name,
            w,
            rows: 0,
            _table: std::marker::PhantomData,
        })
    }

    /// Writes one row group of `rows` rows, its columns written by `write`.
    pub(crate) fn group(
        &mut self,
        rows: usize,
        write: impl FnOnce(&mut SerializedRowGroupWriter<'_, Hashing>) -> parquet::errors::Result<()>,
    ) -> Result<(), PartialError> {
        let path = &self.path;
        let mut rg = self
            .w
            .next_row_group()
            .map_err(|e| PartialError::written(path, e))?;
        write(&mut rg).map_err(|e| PartialError::written(path, e))?;
        rg.close().map_err(|e| PartialError::written(path, e))?;
        self.rows += rows as u64;
        Ok(())
    }

    /// Writes the footer; returns the file's entry.
    pub(crate) fn finish(self) -> Result<FileEntry, PartialError> {
        let path = self.path;
        let mut sink = self
            .w
            .into_inner()
            .map_err(|e| PartialError::written(&path, e))?;
        // Not synced: a file torn by a crash is refused by its SHA-256 when read.
        sink.out.flush().map_err(|e| PartialError::io(&path, e))?;
        Ok(FileEntry {
            name: self.name,
            rows: self.rows,
            bytes: sink.bytes,
            sha256: hex::encode(sink.sha.finalize()),
        })
    }
}

/// Whether a row group of `rows` rows and `bytes` bytes of strings is full.
pub(crate) fn group_full(rows: usize, bytes: usize) -> bool {
    rows >= ROW_GROUP_ROWS || bytes >= ROW_GROUP_BYTES
}

/// Writes one table file from rows given in key order; rows of one key are summed.
pub(crate) struct TableWriter<T: Table> {
    file: TableFile<T>,
    group: Vec<T>,
    group_bytes: usize,
    pending: Option<T>,
}

impl<T: Table> TableWriter<T> {
    /// Creates `dir/NAME-SSSSS.parquet`.
    pub(crate) fn create(dir: &Path, shard: u32) -> Result<Self, PartialError> {
        Ok(TableWriter {
            file: TableFile::create(dir, shard)?,
            group: Vec::new(),
            group_bytes: 0,
            pending: None,
        })
    }

    /// Adds a row: its key is at least the previous row's; an equal key is summed.
    pub(crate) fn push(&mut self, row: T) -> Result<(), PartialError> {
        match &mut self.pending {
            Some(p) if p.cmp_key(&row).is_eq() => {
                p.absorb(&row);
                Ok(())
            }
            Some(p) => {
                debug_assert!(p.cmp_key(&row).is_lt(), "rows in key order");
                let done = std::mem::replace(p, row);
                self.buffer(done)
            }
            None => {
                self.pending = Some(row);
                Ok(())
            }
        }
    }

    fn buffer(&mut self, row: T) -> Result<(), PartialError> {
        self.group_bytes += row.string_bytes();
        self.group.push(row);
        if group_full(self.group.len(), self.group_bytes) {
            self.flush_group()?;
        }
        Ok(())
    }

    fn flush_group(&mut self) -> Result<(), PartialError> {
        if self.group.is_empty() {
            return Ok(());
        }
        let group = &self.group;
        self.file
            .group(group.len(), |rg| T::write_group(group, rg))?;
        self.group.clear();
        self.group_bytes = 0;
        Ok(())
    }

    /// Writes the rest and the footer; returns the file's entry.
    pub(crate) fn finish(mut self) -> Result<FileEntry, PartialError> {
        if let Some(p) = self.pending.take() {
            self.buffer(p)?;
        }
        self.flush_group()?;
        self.file.finish()
    }
}

/// Opens the file at `path` of a partial for reading, refusing anything but a regular
/// file: opened without waiting (a FIFO's open would block until a writer came, and
/// its reads until it wrote), then looked at through the open handle.
pub(crate) fn open_regular(path: &Path) -> Result<File, PartialError> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| PartialError::io(path, e))?;
    let m = f.metadata().map_err(|e| PartialError::io(path, e))?;
    if !m.is_file() {
        return Err(PartialError::corrupt(
            path,
            "not a regular file (a partial's files are)",
        ));
    }
    Ok(f)
}

/// Checks a file's size and SHA-256 against its entry (reading it once, in 64 KiB pieces).
pub(crate) fn verify(path: &Path, entry: &FileEntry) -> Result<(), PartialError> {
    let mut f = open_regular(path)?;
    let size = f.metadata().map_err(|e| PartialError::io(path, e))?.len();
    if size != entry.bytes {
        return Err(PartialError::corrupt(
            path,
            format!(
                "{size} bytes, the description says {} (truncated or another file)",
                entry.bytes
            ),
        ));
    }
    let mut sha = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(|e| PartialError::io(path, e))?;
        if n == 0 {
            break;
        }
        sha.update(&buf[..n]);
    }
    let got = hex::encode(sha.finalize());
    if got != entry.sha256 {
        return Err(PartialError::corrupt(
            path,
            format!(
                "SHA-256 {got}, the description says {} (corrupt or another file)",
                entry.sha256
            ),
        ));
    }
    Ok(())
}

/// The length of the Parquet footer of the file at `path`, described as `described`
/// bytes long (its last 8 bytes: the footer's length and `PAR1`), read without parsing
/// it: what opening the file will hold decoded grows with it
/// ([`crate::fan_in::FOOTER_FACTOR`]).
pub(crate) fn footer_len(path: &Path, described: u64) -> Result<u64, PartialError> {
    use std::io::{Seek, SeekFrom};
    let mut f = open_regular(path)?;
    let size = f
        .seek(SeekFrom::End(0))
        .map_err(|e| PartialError::io(path, e))?;
    let mut tail = [0u8; 8];
    if size != described {
        // As the SHA-256 check would say it (it comes later, as the file is read).
        return Err(PartialError::corrupt(
            path,
            format!("{size} bytes, the description says {described} (truncated or another file)"),
        ));
    }
    if size < 12 {
        return Err(PartialError::corrupt(
            path,
            format!("{size} bytes: not a Parquet file"),
        ));
    }
    f.seek(SeekFrom::Start(size - 8))
        .and_then(|_| f.read_exact(&mut tail))
        .map_err(|e| PartialError::io(path, e))?;
    if &tail[4..] != b"PAR1" {
        return Err(PartialError::corrupt(path, "no Parquet magic at its end"));
    }
    let len = u64::from(u32::from_le_bytes(tail[..4].try_into().expect("4 bytes")));
    if len + 12 > size {
        return Err(PartialError::corrupt(
            path,
            format!("its footer claims {len} bytes, past the file's {size}"),
        ));
    }
    Ok(len)
}

/// Reads one table file in key order, a row group at a time, checking what a file of a
/// partial must be: its schema, its row count, keys strictly ascending, each path in the
/// file's shard, and each row's values.
pub(crate) struct TableReader<T: Table> {
    path: PathBuf,
    reader: SerializedFileReader<File>,
    next_group: usize,
    rows: std::vec::IntoIter<T>,
    last: Option<T>,
    shard: u32,
    shards: u32,
    /// Path hash of the last path checked (a path is checked once per run of rows).
    checked_path: Option<String>,
}

impl<T: Table> TableReader<T> {
    /// Opens table `T` of shard `shard` (of `shards`) in `dir` after checking its size
    /// and SHA-256 against `entry`.
    pub(crate) fn open(
        dir: &Path,
        shard: u32,
        shards: u32,
        entry: &FileEntry,
    ) -> Result<Self, PartialError> {
        let path = dir.join(file_name::<T>(shard));
        if entry.name != file_name::<T>(shard) {
            return Err(PartialError::corrupt(
                &path,
                format!("the description names it {:?}", entry.name),
            ));
        }
        verify(&path, entry)?;
        let f = open_regular(&path)?;
        let reader = SerializedFileReader::new(f).map_err(|e| PartialError::corrupt(&path, e))?;
        let meta = reader.metadata().file_metadata();
        if meta.schema() != &schema::<T>() {
            return Err(PartialError::corrupt(
                &path,
                format!("not the schema of table {:?}", T::NAME),
            ));
        }
        if meta.num_rows() as u64 != entry.rows {
            return Err(PartialError::corrupt(
                &path,
                format!(
                    "{} rows, the description says {}",
                    meta.num_rows(),
                    entry.rows
                ),
            ));
        }
        Ok(TableReader {
            path,
            reader,
            next_group: 0,
            rows: Vec::new().into_iter(),
            last: None,
            shard,
            shards,
            checked_path: None,
        })
    }

    /// The next row, or `None` at the end (and after an error).
    pub(crate) fn next_row(&mut self) -> Result<Option<T>, PartialError> {
        loop {
            if let Some(row) = self.rows.next() {
                return Ok(Some(row));
            }
            if self.next_group >= self.reader.num_row_groups() {
                return Ok(None);
            }
            let group = self.next_group;
            // A file in error yields nothing more.
            self.next_group = usize::MAX;
            let rg = self
                .reader
                .get_row_group(group)
                .map_err(|e| PartialError::corrupt(&self.path, e))?;
            // A partial's row groups hold at most ROW_GROUP_ROWS rows (contract §10):
            // what the reader holds at once, whatever the footer claims.
            let n = rg.metadata().num_rows();
            let n = match usize::try_from(n) {
                Ok(n) if n <= ROW_GROUP_ROWS => n,
                _ => {
                    return Err(PartialError::corrupt(
                        &self.path,
                        format!(
                            "row group {group} holds {n} rows, more than the \
                             {ROW_GROUP_ROWS} of a partial's row group"
                        ),
                    ))
                }
            };
            let rows = T::read_group(rg.as_ref(), n).map_err(|e| {
                PartialError::corrupt(&self.path, format!("row group {group}: {e}"))
            })?;
            drop(rg);
            let prev = self.last.take();
            for (i, row) in rows.iter().enumerate() {
                let before = if i == 0 {
                    prev.as_ref()
                } else {
                    Some(&rows[i - 1])
                };
                self.check(before, row)?;
            }
            self.next_group = group + 1;
            self.last = rows.last().cloned().or(prev);
            self.rows = rows.into_iter();
        }
    }

    /// Checks a row read after `before`.
    fn check(&mut self, before: Option<&T>, row: &T) -> Result<(), PartialError> {
        row.check()
            .map_err(|e| PartialError::corrupt(&self.path, e))?;
        if let Some(last) = before {
            if !last.cmp_key(row).is_lt() {
                return Err(PartialError::corrupt(
                    &self.path,
                    format!(
                        "rows not in strictly ascending key order at path {:?}",
                        row.path()
                    ),
                ));
            }
        }
        if self.checked_path.as_deref() != Some(row.path()) {
            let s = covmerge_proto::shard_hash::shard_of(row.path().as_bytes(), self.shards).0;
            if s != self.shard {
                return Err(PartialError::corrupt(
                    &self.path,
                    format!(
                        "path {:?} belongs to shard {s} of {}, not {}",
                        row.path(),
                        self.shards,
                        self.shard
                    ),
                ));
            }
            self.checked_path = Some(row.path().to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::LineRow;

    /// A row group of more rows than a partial's (a file written by another tool, or
    /// a forged footer) is refused naming the file: the reader holds one row group at
    /// once, and its memory must not grow with the rows.
    #[test]
    fn a_row_group_over_the_row_cap_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let name = file_name::<LineRow>(0);
        let path = dir.path().join(&name);
        let rows: Vec<LineRow> = (1..=ROW_GROUP_ROWS as u32 + 1)
            .map(|line| LineRow {
                path: "a.c".into(),
                version: "0".repeat(40),
                manager: "m".into(),
                line,
                hits: 1,
                rows: 1,
            })
            .collect();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(1 << 20))
            .build();
        let f = File::create(&path).unwrap();
        let mut w =
            SerializedFileWriter::new(f, Arc::new(schema::<LineRow>()), Arc::new(props)).unwrap();
        let mut rg = w.next_row_group().unwrap();
        LineRow::write_group(&rows, &mut rg).unwrap();
        rg.close().unwrap();
        w.close().unwrap();
        let data = std::fs::read(&path).unwrap();
        let entry = FileEntry {
            name,
            rows: rows.len() as u64,
            bytes: data.len() as u64,
            sha256: hex::encode(Sha256::digest(&data)),
        };
        let mut r = TableReader::<LineRow>::open(dir.path(), 0, 1, &entry).unwrap();
        let e = r.next_row().unwrap_err().to_string();
        assert!(
            e.contains(path.to_str().unwrap()) && e.contains("8193 rows"),
            "{e}"
        );
    }

    /// A row group of few rows' worth of bytes on disk that decodes to gigabytes (one
    /// long function name in a dictionary, on every row) is refused naming the file,
    /// before its strings are copied.
    #[test]
    fn a_row_group_whose_strings_decode_past_the_cap_is_refused_naming_the_file() {
        use crate::table::{FuncRow, COLUMN_STRING_CAP};
        let dir = tempfile::tempdir().unwrap();
        let name = file_name::<FuncRow>(0);
        let path = dir.path().join(&name);
        // 8,192 rows of a 1 KiB name: 8 MiB decoded, a few KiB on disk (gigabytes
        // with a 1 MiB name, the same way).
        let long = "f".repeat(1 << 10);
        let rows: Vec<FuncRow> = (1..=ROW_GROUP_ROWS as u32)
            .map(|line| FuncRow {
                path: "a.c".into(),
                version: "0".repeat(40),
                line,
                func_name: long.clone(),
                rows: 1,
            })
            .collect();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY)
            .build();
        let f = File::create(&path).unwrap();
        let mut w =
            SerializedFileWriter::new(f, Arc::new(schema::<FuncRow>()), Arc::new(props)).unwrap();
        let mut rg = w.next_row_group().unwrap();
        FuncRow::write_group(&rows, &mut rg).unwrap();
        rg.close().unwrap();
        w.close().unwrap();
        drop(rows);
        let data = std::fs::read(&path).unwrap();
        assert!(data.len() < 64 << 10, "{} bytes", data.len());
        assert!(ROW_GROUP_ROWS * long.len() > COLUMN_STRING_CAP);
        let entry = FileEntry {
            name,
            rows: ROW_GROUP_ROWS as u64,
            bytes: data.len() as u64,
            sha256: hex::encode(Sha256::digest(&data)),
        };
        let mut r = TableReader::<FuncRow>::open(dir.path(), 0, 1, &entry).unwrap();
        let e = r.next_row().unwrap_err().to_string();
        assert!(
            e.contains(path.to_str().unwrap()) && e.contains("bytes of strings"),
            "{e}"
        );
    }
}
