//! Partials (contract §10): a job's rows summed per file version, before any base is
//! known, in Parquet files sharded by the shuffle's file hash, with a JSON description
//! beside them; and their roll-up, which sums any number of partials into one (days
//! into a month, months into a quarter) exactly and in bounded memory.
//!
//! A row's projection depends only on the text of its file version and the base text
//! (contract §3), never on the commit that carried that text: so rows can be summed per
//! (path, version blob id, manager, line) long before the base is chosen, and sums of
//! sums are exact. What else a merge needs to give the same result and manifest as a
//! merge of the raw rows is carried too; contract §10 says what and why.
//!
//! This crate owns no source and no store: the caller finds each row's version (the
//! blob id of the file at the row's commit) and gives rows to a [`Builder`]; partials
//! live in local directories.

use std::path::{Path, PathBuf};

mod bucket;
mod build;
/// `partial.json`, the description beside the shard files.
pub mod desc;
mod dict;
mod entries;
mod fan_in;
mod file;
mod ints;
mod rollup;
mod shard_rollup;
mod sorted;
/// The four tables: their rows and Parquet schemas.
pub mod table;

pub use build::{Builder, IdRow, RawRow, ShardPartial};
pub use desc::{Description, FileEntry, PartialCounts, ShardFiles, FORMAT_VERSION};
pub use fan_in::{rollup_within, FanIn, FOOTER_FACTOR, OPEN_FILE_BYTES};
pub use file::is_table_file_name;
pub use rollup::{add_partial_counts, rollup};
pub use shard_rollup::{rollup_shard_within, shards_for};
pub use table::{FuncRow, LineRow, PathRow, Table, VersionRow};

/// What can go wrong writing, reading or rolling up partials. Every error names the
/// file it is about.
#[derive(Debug, thiserror::Error)]
pub enum PartialError {
    /// A file could not be read or written.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause: in the message, not a source as well (a chain printed the
        /// cause twice: "x.parquet: No such file or directory (os error 2): No such
        /// file or directory (os error 2)").
        cause: std::io::Error,
    },
    /// A file is not what the description says, or not a valid file of its table.
    #[error("{}: {what}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong (size, SHA-256, Parquet's own error, order, a value).
        what: String,
    },
    /// A description of a format version this covmerge does not read.
    #[error(
        "{}: partial format version {found}; this covmerge reads version {FORMAT_VERSION} only",
        path.display()
    )]
    Version {
        /// The description.
        path: PathBuf,
        /// The version found (or `none`).
        found: String,
    },
    /// Partials of two namespaces given to one roll-up.
    #[error(
        "partials of two namespaces: {a:?} ({}) and {b:?} ({}); a partial holds one namespace",
        a_path.display(),
        b_path.display()
    )]
    Namespaces {
        /// The first namespace.
        a: String,
        /// A partial of it.
        a_path: PathBuf,
        /// Another namespace.
        b: String,
        /// A partial of that one.
        b_path: PathBuf,
    },
    /// A wrong argument or row (named).
    #[error("{0}")]
    Invalid(String),
}

impl PartialError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        PartialError::Io {
            path: path.to_owned(),
            cause: source,
        }
    }
    pub(crate) fn corrupt(path: &Path, what: impl std::fmt::Display) -> Self {
        PartialError::Corrupt {
            path: path.to_owned(),
            what: what.to_string(),
        }
    }

    /// What writing the Parquet file at `path` met: the disk's own error (a full disk,
    /// which Parquet's writer wraps) as one, else [`PartialError::corrupt`].
    pub(crate) fn written(path: &Path, e: parquet::errors::ParquetError) -> Self {
        match e {
            parquet::errors::ParquetError::External(b) => match b.downcast::<std::io::Error>() {
                Ok(io) => PartialError::io(path, *io),
                Err(b) => Self::corrupt(path, parquet::errors::ParquetError::External(b)),
            },
            e => Self::corrupt(path, e),
        }
    }
}

/// A partial on disk, its description read and checked (the shard files are checked as
/// they are opened).
#[derive(Debug, Clone)]
pub struct Partial {
    dir: PathBuf,
    desc: Description,
}

/// The rows of one table file, in key order. Each file's size and SHA-256 are checked
/// before its first row; its rows as they are read.
pub struct Rows<T: Table> {
    reader: file::TableReader<T>,
}

impl<T: Table> Iterator for Rows<T> {
    type Item = Result<T, PartialError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.reader.next_row().transpose()
    }
}

/// A whole partial's rows in memory (for tests and small partials).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Content {
    /// `lines`, shard by shard.
    pub lines: Vec<LineRow>,
    /// `funcs`, shard by shard.
    pub funcs: Vec<FuncRow>,
    /// `versions`, shard by shard.
    pub versions: Vec<VersionRow>,
    /// `paths`, shard by shard.
    pub paths: Vec<PathRow>,
}

impl Partial {
    /// Opens the partial in `dir`: reads and checks `partial.json`.
    pub fn open(dir: &Path) -> Result<Partial, PartialError> {
        Ok(Partial {
            dir: dir.to_owned(),
            desc: Description::read(dir)?,
        })
    }

    /// Its description.
    pub fn description(&self) -> &Description {
        &self.desc
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The files of the partial in `dir` described by `d` (`partial.json` and every
    /// shard file there), each with its file system identity (device, inode): two
    /// partials sharing one are one partial's files seen through links, whose rows
    /// would be counted twice. A copy has files of its own.
    pub fn file_identities(dir: &Path, d: &Description) -> Vec<((u64, u64), PathBuf)> {
        use std::os::unix::fs::MetadataExt;
        let names = d
            .shards
            .iter()
            .flat_map(|s| [&s.lines, &s.funcs, &s.versions, &s.paths])
            .map(|e| e.name.as_str())
            .chain([desc::DESCRIPTION]);
        names
            .filter_map(|n| {
                let path = dir.join(n);
                let m = std::fs::metadata(&path).ok()?;
                Some(((m.dev(), m.ino()), path))
            })
            .collect()
    }

    /// The longest footer of the table files of `shards` (a shard it does not have is
    /// not looked at), in bytes ([`file::footer_len`]).
    pub fn largest_footer(&self, shards: &[u32]) -> Result<u64, PartialError> {
        use file::file_name;
        let mut most = 0;
        for &j in shards.iter().filter(|&&j| j < self.desc.shard_count) {
            // The names a partial's files have (the description's are checked as
            // they are opened).
            let s = &self.desc.shards[j as usize];
            let names = [
                (file_name::<LineRow>(j), &s.lines),
                (file_name::<FuncRow>(j), &s.funcs),
                (file_name::<VersionRow>(j), &s.versions),
                (file_name::<PathRow>(j), &s.paths),
            ];
            for (name, entry) in names {
                most = most.max(file::footer_len(&self.dir.join(name), entry.bytes)?);
            }
        }
        Ok(most)
    }

    fn rows<T: Table>(
        &self,
        shard: u32,
        entry: impl Fn(&ShardFiles) -> &FileEntry,
    ) -> Result<Rows<T>, PartialError> {
        let s = self.desc.shards.get(shard as usize).ok_or_else(|| {
            PartialError::Invalid(format!(
                "{}: no shard {shard} (it has {})",
                self.dir.display(),
                self.desc.shard_count
            ))
        })?;
        Ok(Rows {
            reader: file::TableReader::open(&self.dir, shard, self.desc.shard_count, entry(s))?,
        })
    }

    /// The `lines` rows of shard `shard`.
    pub fn lines(&self, shard: u32) -> Result<Rows<LineRow>, PartialError> {
        self.rows(shard, |s| &s.lines)
    }
    /// The `funcs` rows of shard `shard`.
    pub fn funcs(&self, shard: u32) -> Result<Rows<FuncRow>, PartialError> {
        self.rows(shard, |s| &s.funcs)
    }
    /// The `versions` rows of shard `shard`.
    pub fn versions(&self, shard: u32) -> Result<Rows<VersionRow>, PartialError> {
        self.rows(shard, |s| &s.versions)
    }
    /// The `paths` rows of shard `shard`.
    pub fn paths(&self, shard: u32) -> Result<Rows<PathRow>, PartialError> {
        self.rows(shard, |s| &s.paths)
    }

    /// Reads every shard whole, checking each file and that the rows add up to the
    /// description's counts.
    pub fn content(&self) -> Result<Content, PartialError> {
        let mut c = Content::default();
        for s in 0..self.desc.shard_count {
            for r in self.lines(s)? {
                c.lines.push(r?);
            }
            for r in self.funcs(s)? {
                c.funcs.push(r?);
            }
            for r in self.versions(s)? {
                c.versions.push(r?);
            }
            for r in self.paths(s)? {
                c.paths.push(r?);
            }
        }
        let rows = c
            .lines
            .iter()
            .map(Table::input_rows)
            .chain(c.paths.iter().map(Table::input_rows))
            .fold(self.desc.counts.rows_bad, u64::saturating_add);
        check_rows_in(&self.dir, &self.desc, rows)?;
        Ok(c)
    }
}

/// Checks that the rows the tables stand for add up to `rows_in`.
pub(crate) fn check_rows_in(dir: &Path, d: &Description, rows: u64) -> Result<(), PartialError> {
    if rows != d.counts.rows_in {
        return Err(PartialError::corrupt(
            &dir.join(desc::DESCRIPTION),
            format!(
                "rows_in is {} but the shards hold {rows} rows (with rows_bad)",
                d.counts.rows_in
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod written_tests {
    use super::*;

    /// A full disk under Parquet's writer (its `External` error) was a corrupt file,
    /// not an I/O error: the merge gave no advice. It is the disk's error now.
    #[test]
    fn a_full_disk_under_parquet_s_writer_was_not_an_io_error() {
        let path = Path::new("/tmp/x/lines-00000.parquet");
        let io = std::io::Error::from(std::io::ErrorKind::StorageFull);
        let e = PartialError::written(path, parquet::errors::ParquetError::External(Box::new(io)));
        assert!(
            matches!(&e, PartialError::Io { cause, .. } if cause.kind() == std::io::ErrorKind::StorageFull),
            "{e:?}"
        );
        let other = parquet::errors::ParquetError::General("bad".into());
        assert!(matches!(
            PartialError::written(path, other),
            PartialError::Corrupt { .. }
        ));
    }
}
