//! A builder's held sums, sorted, written as a partial's tables straight from the
//! builder's interned names: each row's strings are shared bytes, never copied per row.

use std::path::Path;

use bytes::Bytes;
use parquet::file::writer::SerializedRowGroupWriter;

use crate::desc::{FileEntry, ShardFiles};
use crate::dict::write_strings;
use crate::file::{group_full, Hashing, TableFile};
use crate::table::{write_u32, write_u64, FuncRow, LineRow, PathRow, Table, VersionRow};
use crate::PartialError;

/// A (path, version) of a builder's sums, by ids, and the commit kept for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pv {
    pub(crate) path: u32,
    pub(crate) version: u32,
    pub(crate) commit: u32,
}

/// Sums of a `lines` key: a (path, version) by its index, manager and line by ids
/// (in a [`Sorted`], the (path, version)'s place in its `versions` and the manager's
/// rank).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LineAcc {
    pub(crate) pv: u32,
    pub(crate) manager: u32,
    pub(crate) line: u32,
    pub(crate) hits: u64,
    pub(crate) rows: u64,
}

/// Rows of a `funcs` key: a (path, version) by its index, line, function by id (in a
/// [`Sorted`], places and ranks as [`LineAcc`]'s).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FuncAcc {
    pub(crate) pv: u32,
    pub(crate) line: u32,
    pub(crate) func: u32,
    pub(crate) rows: u64,
}

/// (path, (rows without line, rows without version, their hits)).
pub(crate) type PathSums = (u32, (u64, u64, u64));

/// A partial's held sums, each table sorted by (shard, key) with one entry per key,
/// and the names their ids stand for.
pub(crate) struct Sorted {
    pub(crate) lines: Vec<LineAcc>,
    pub(crate) funcs: Vec<FuncAcc>,
    /// The (path, version)s the entries' `pv` index.
    pub(crate) pvs: Vec<Pv>,
    /// Each (path, version)'s shard, by index.
    pub(crate) pv_shard: Vec<u32>,
    /// The indexes of `pvs` in (shard, path, version) order.
    pub(crate) versions: Vec<u32>,
    /// The ids of the names by rank (their byte order).
    pub(crate) order: Vec<u32>,
    /// (shard, path rank) and the path's sums.
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
    fn bytes(&self, i: u32) -> &[u8] {
        &self.names[i as usize]
    }

    fn len(&self, i: u32) -> usize {
        self.names[i as usize].len()
    }

    fn pv(&self, i: u32) -> Pv {
        self.pvs[i as usize]
    }

    /// The (path, version) at place `at` of `versions`.
    fn at(&self, at: u32) -> Pv {
        self.pv(self.versions[at as usize])
    }

    /// The name of rank `r`.
    fn ranked(&self, r: u32) -> u32 {
        self.order[r as usize]
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
        let shard = |pv: u32| self.pv_shard[pv as usize];
        let pv_bytes = |pv: u32| self.len(self.pv(pv).path) + self.len(self.pv(pv).version);
        let place_bytes = |at: u32| self.len(self.at(at).path) + self.len(self.at(at).version);
        let lines = write_table::<LineRow, _>(
            dir,
            j,
            &self.lines,
            li,
            |e| shard(self.versions[e.pv as usize]),
            |e| place_bytes(e.pv) + self.len(self.ranked(e.manager)),
            |rows, rg| {
                write_strings::<LineRow, _>(
                    rg,
                    0,
                    rows.iter().map(|e| self.bytes(self.at(e.pv).path)),
                )?;
                write_strings::<LineRow, _>(
                    rg,
                    1,
                    rows.iter().map(|e| self.bytes(self.at(e.pv).version)),
                )?;
                write_strings::<LineRow, _>(
                    rg,
                    2,
                    rows.iter().map(|e| self.bytes(self.ranked(e.manager))),
                )?;
                write_u32::<LineRow, _>(rg, 3, rows.iter().map(|e| e.line))?;
                write_u64::<LineRow, _>(rg, 4, rows.iter().map(|e| e.hits))?;
                write_u64::<LineRow, _>(rg, 5, rows.iter().map(|e| e.rows))
            },
        )?;
        let funcs = write_table::<FuncRow, _>(
            dir,
            j,
            &self.funcs,
            fi,
            |e| shard(self.versions[e.pv as usize]),
            |e| place_bytes(e.pv) + self.len(self.ranked(e.func)),
            |rows, rg| {
                write_strings::<FuncRow, _>(
                    rg,
                    0,
                    rows.iter().map(|e| self.bytes(self.at(e.pv).path)),
                )?;
                write_strings::<FuncRow, _>(
                    rg,
                    1,
                    rows.iter().map(|e| self.bytes(self.at(e.pv).version)),
                )?;
                write_u32::<FuncRow, _>(rg, 2, rows.iter().map(|e| e.line))?;
                write_strings::<FuncRow, _>(
                    rg,
                    3,
                    rows.iter().map(|e| self.bytes(self.ranked(e.func))),
                )?;
                write_u64::<FuncRow, _>(rg, 4, rows.iter().map(|e| e.rows))
            },
        )?;
        let versions = write_table::<VersionRow, _>(
            dir,
            j,
            &self.versions,
            vi,
            |&pv| shard(pv),
            |&pv| pv_bytes(pv) + self.len(self.pv(pv).commit),
            |rows, rg| {
                write_strings::<VersionRow, _>(
                    rg,
                    0,
                    rows.iter().map(|&pv| self.bytes(self.pv(pv).path)),
                )?;
                write_strings::<VersionRow, _>(
                    rg,
                    1,
                    rows.iter().map(|&pv| self.bytes(self.pv(pv).version)),
                )?;
                write_strings::<VersionRow, _>(
                    rg,
                    2,
                    rows.iter().map(|&pv| self.bytes(self.pv(pv).commit)),
                )
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
                write_strings::<PathRow, _>(rg, 0, rows.iter().map(|e| self.bytes(e.1 .0)))?;
                write_u64::<PathRow, _>(rg, 1, rows.iter().map(|e| e.1 .1 .0))?;
                write_u64::<PathRow, _>(rg, 2, rows.iter().map(|e| e.1 .1 .1))?;
                write_u64::<PathRow, _>(rg, 3, rows.iter().map(|e| e.1 .1 .2))
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
