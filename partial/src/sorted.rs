//! A builder's held sums, sorted, written as a partial's tables straight from the
//! builder's interned names: each row's strings are shared bytes, never copied per row.

use std::path::Path;

use bytes::Bytes;
use parquet::data_type::ByteArray;
use parquet::file::writer::SerializedRowGroupWriter;

use crate::desc::{FileEntry, ShardFiles};
use crate::file::{group_full, Hashing, TableFile};
use crate::table::{
    write_byte_arrays, write_u32, write_u64, FuncRow, LineRow, PathRow, Table, VersionRow,
};
use crate::PartialError;

/// Sort key of a line or function entry: shard, then ranks and the line.
pub(crate) type Key5 = (u32, u32, u32, u32, u32);
/// Sort key of a version entry: shard, path rank, version rank.
pub(crate) type Key3 = (u32, u32, u32);
/// (path, version, manager, (hits, rows)).
pub(crate) type LineSums = (u32, u32, u32, (u64, u64));
/// (path, version, function, rows).
pub(crate) type FuncSums = (u32, u32, u32, u64);
/// (path, (rows without line, rows without version, their hits)).
pub(crate) type PathSums = (u32, (u64, u64, u64));

/// A partial's held sums, each table sorted by (shard, key) with string ranks (keys
/// unique), and the names their ids stand for.
pub(crate) struct Sorted {
    pub(crate) lines: Vec<(Key5, LineSums)>,
    pub(crate) funcs: Vec<(Key5, FuncSums)>,
    pub(crate) versions: Vec<(Key3, (u32, u32, u32))>,
    pub(crate) paths: Vec<((u32, u32), PathSums)>,
    pub(crate) names: Vec<Bytes>,
}

type Rg<'a> = SerializedRowGroupWriter<'a, Hashing>;

/// Writes table `T` of shard `j` from the entries of `sorted` at `*at` (ordered by
/// shard first), leaving `*at` at the first entry of a later shard; row groups cut as a
/// [`crate::file::TableWriter`] cuts them (`bytes`: an entry's string bytes).
fn write_table<T: Table, E>(
    dir: &Path,
    j: u32,
    sorted: &[E],
    at: &mut usize,
    shard: impl Fn(&E) -> u32,
    bytes: impl Fn(&E) -> usize,
    write: impl Fn(&[E], &mut Rg<'_>) -> parquet::errors::Result<()>,
) -> Result<FileEntry, PartialError> {
    let start = *at;
    while *at < sorted.len() && shard(&sorted[*at]) == j {
        *at += 1;
    }
    let rows = &sorted[start..*at];
    let mut f = TableFile::<T>::create(dir, j)?;
    let (mut from, mut held) = (0, 0);
    for (i, e) in rows.iter().enumerate() {
        held += bytes(e);
        if group_full(i + 1 - from, held) {
            f.group(i + 1 - from, |rg| write(&rows[from..=i], rg))?;
            (from, held) = (i + 1, 0);
        }
    }
    if from < rows.len() {
        f.group(rows.len() - from, |rg| write(&rows[from..], rg))?;
    }
    f.finish()
}

impl Sorted {
    fn name(&self, i: u32) -> ByteArray {
        ByteArray::from(self.names[i as usize].clone())
    }

    fn len(&self, i: u32) -> usize {
        self.names[i as usize].len()
    }

    /// Writes the four tables of every shard in `dir`.
    pub(crate) fn write(&self, dir: &Path, n: u32) -> Result<Vec<ShardFiles>, PartialError> {
        let mut at = [0; 4];
        (0..n).map(|j| self.write_shard(dir, j, &mut at)).collect()
    }

    /// Writes the four tables of shard `j` in `dir`, from the entries at `at` (lines,
    /// funcs, versions, paths), leaving `at` at the next shard's.
    pub(crate) fn write_shard(
        &self,
        dir: &Path,
        j: u32,
        at: &mut [usize; 4],
    ) -> Result<ShardFiles, PartialError> {
        let [li, fi, vi, pi] = at;
        let lines = write_table::<LineRow, _>(
            dir,
            j,
            &self.lines,
            li,
            |e| e.0 .0,
            |e| self.len(e.1 .0) + self.len(e.1 .1) + self.len(e.1 .2),
            |rows, rg| {
                write_byte_arrays(rg, rows.iter().map(|e| self.name(e.1 .0)))?;
                write_byte_arrays(rg, rows.iter().map(|e| self.name(e.1 .1)))?;
                write_byte_arrays(rg, rows.iter().map(|e| self.name(e.1 .2)))?;
                write_u32(rg, rows.iter().map(|e| e.0 .4))?;
                write_u64(rg, rows.iter().map(|e| e.1 .3 .0))?;
                write_u64(rg, rows.iter().map(|e| e.1 .3 .1))
            },
        )?;
        let funcs = write_table::<FuncRow, _>(
            dir,
            j,
            &self.funcs,
            fi,
            |e| e.0 .0,
            |e| self.len(e.1 .0) + self.len(e.1 .1) + self.len(e.1 .2),
            |rows, rg| {
                write_byte_arrays(rg, rows.iter().map(|e| self.name(e.1 .0)))?;
                write_byte_arrays(rg, rows.iter().map(|e| self.name(e.1 .1)))?;
                write_u32(rg, rows.iter().map(|e| e.0 .3))?;
                write_byte_arrays(rg, rows.iter().map(|e| self.name(e.1 .2)))?;
                write_u64(rg, rows.iter().map(|e| e.1 .3))
            },
        )?;
        let versions = write_table::<VersionRow, _>(
            dir,
            j,
            &self.versions,
            vi,
            |e| e.0 .0,
            |e| self.len(e.1 .0) + self.len(e.1 .1) + self.len(e.1 .2),
            |rows, rg| {
                write_byte_arrays(rg, rows.iter().map(|e| self.name(e.1 .0)))?;
                write_byte_arrays(rg, rows.iter().map(|e| self.name(e.1 .1)))?;
                write_byte_arrays(rg, rows.iter().map(|e| self.name(e.1 .2)))
            },
        )?;
        let paths = write_table::<PathRow, _>(
            dir,
            j,
            &self.paths,
            pi,
            |e| e.0 .0,
            |e| self.len(e.1 .0),
            |rows, rg| {
                write_byte_arrays(rg, rows.iter().map(|e| self.name(e.1 .0)))?;
                write_u64(rg, rows.iter().map(|e| e.1 .1 .0))?;
                write_u64(rg, rows.iter().map(|e| e.1 .1 .1))?;
                write_u64(rg, rows.iter().map(|e| e.1 .1 .2))
            },
        )?;
        Ok(ShardFiles {
            index: j,
            lines,
            funcs,
            versions,
            paths,
        })
    }
}
