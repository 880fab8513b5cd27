//! The site's data scripts: `covmerge.meta(...)`, `covmerge.dir(...)`,
//! `covmerge.file(...)` and `covmerge.paths(...)`, each a JSON value written with serde.
//! Rows are short arrays and objects with one-letter keys: the tree of a kernel has
//! thousands of directories and the first page should stay small.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use covmerge_source::FileVersion;
use serde::Serialize;

use crate::diff::across::CatTotals;
use crate::diff::categories::{CatCounts, CatLines};
use crate::diff::{Counts, FileDiff, Totals};
use crate::read::{FileCov, Header};
use crate::tree::{file_name, Dir, Summary, Tree};

/// Where the data script of directory or file `id` lives (`kind` is `d` or `f`).
pub(super) fn script_path(kind: &str, id: u32) -> String {
    format!("data/{kind}/{}/{id}.js", id / 1000)
}

fn script(call: &str, args: &impl Serialize) -> Result<Vec<u8>> {
    let mut v = Vec::with_capacity(4096);
    v.extend_from_slice(b"covmerge.");
    v.extend_from_slice(call.as_bytes());
    v.push(b'(');
    serde_json::to_writer(&mut v, args)?;
    v.extend_from_slice(b");\n");
    Ok(v)
}

/// `[instrumented, covered]`.
fn pair(c: Counts) -> [u64; 2] {
    [c.instrumented, c.covered]
}

/// `[[column, instrumented, covered], ...]` for managers with lines.
fn sparse<'a>(it: impl Iterator<Item = (u16, &'a Counts)>) -> Vec<[u64; 3]> {
    it.filter(|(_, c)| c.instrumented > 0)
        .map(|(m, c)| [m as u64, c.instrumented, c.covered])
        .collect()
}

/// One row of the tree: a directory (`k` = `d`) or a file (`f`).
#[derive(Serialize)]
pub(super) struct Row<'a> {
    pub k: &'static str,
    pub id: u32,
    pub name: &'a str,
    pub n: [u64; 2],
    pub m: Vec<[u64; 3]>,
    /// Directories: the lowest coverage of a file below, in %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lo: Option<f64>,
    pub g: u64,
    pub l: u64,
    /// Files only in the older result of a diff.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub del: bool,
    /// Against an older result on another base: lines per category, in lcov's order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub c: Option<[u64; 12]>,
}

pub(super) fn dir_row(d: &Dir) -> Row<'_> {
    Row {
        k: "d",
        id: d.id,
        name: d.name(),
        n: pair(d.agg.star),
        m: sparse(d.agg.mgrs.iter().enumerate().map(|(i, c)| (i as u16, c))),
        lo: d.agg.min_ratio.map(|r| (r * 100.0 * 100.0).round() / 100.0),
        g: d.agg.gained,
        l: d.agg.lost,
        del: false,
        c: d.agg.cats.map(|c: CatCounts| c.0),
    }
}

pub(super) fn file_row(f: &Summary) -> Row<'_> {
    Row {
        k: "f",
        id: f.id,
        name: file_name(&f.path),
        n: pair(f.star),
        m: sparse(f.mgrs.iter().map(|(m, c)| (*m, c))),
        lo: None,
        g: f.gained,
        l: f.lost,
        del: f.deleted,
        c: f.cats.map(|c| c.0),
    }
}

/// A directory's children, directories first.
pub(super) fn children<'a>(t: &'a Tree, d: &'a Dir) -> Vec<Row<'a>> {
    d.dirs
        .iter()
        .map(|&c| dir_row(&t.dirs[c as usize]))
        .chain(d.files.iter().map(|&f| file_row(&t.files[f])))
        .collect()
}

#[derive(Serialize)]
struct DirData<'a> {
    id: u32,
    path: &'a str,
    rows: Vec<Row<'a>>,
}

#[derive(Serialize)]
struct Meta<'a> {
    header: &'a Header,
    managers: &'a [String],
    total: Row<'a>,
    files: usize,
    dirs: usize,
    /// The older result and the totals of the diff.
    diff: Option<(&'a str, &'a Totals)>,
    /// Against an older result on another base: its base and the category totals.
    #[serde(skip_serializing_if = "Option::is_none")]
    cats: Option<(&'a str, &'a CatTotals)>,
}

#[derive(Serialize)]
struct Paths<'a> {
    /// `[id, parent, path]`, the root first.
    dirs: Vec<(u32, Option<u32>, &'a str)>,
    /// `[id, dir, name]`.
    files: Vec<(u32, u32, &'a str)>,
}

/// Writes meta.js, every directory's script and paths.js; returns the bytes written.
pub(super) fn write_tree(
    out: &Path,
    header: &Header,
    t: &Tree,
    diff: Option<&(String, Totals)>,
    cats: Option<&(String, CatTotals)>,
) -> Result<u64> {
    let mut bytes = 0;
    let mut put = |rel: &str, b: Vec<u8>| -> Result<()> {
        bytes += b.len() as u64;
        super::write(out, rel, &b)
    };
    let meta = Meta {
        header,
        managers: &t.managers,
        total: dir_row(&t.dirs[0]),
        files: t.files.len(),
        dirs: t.dirs.len(),
        diff: diff.map(|(n, t)| (n.as_str(), t)),
        cats: cats.map(|(c, t)| (c.as_str(), t)),
    };
    put("data/meta.js", script("meta", &meta)?)?;
    for d in &t.dirs {
        let data = DirData {
            id: d.id,
            path: &d.path,
            rows: children(t, d),
        };
        put(&script_path("d", d.id), script("dir", &data)?)?;
    }
    let paths = Paths {
        dirs: t
            .dirs
            .iter()
            .map(|d| (d.id, d.parent, d.path.as_str()))
            .collect(),
        files: t
            .files
            .iter()
            .zip(&t.file_dir)
            .map(|(f, &d)| (f.id, d, file_name(&f.path)))
            .collect(),
    };
    put("data/paths.js", script("paths", &paths)?)?;
    Ok(bytes)
}

#[derive(Serialize)]
struct Lines<'a> {
    /// Manager (`*` first).
    m: &'a str,
    lines: &'a [u32],
    hits: &'a [u64],
}

#[derive(Serialize)]
struct Func<'a> {
    name: &'a str,
    lines: &'a [u32],
}

#[derive(Serialize)]
struct FileData<'a> {
    id: u32,
    path: &'a str,
    /// The source lines at the base commit, or why there are none.
    text: Option<Vec<Cow<'a, str>>>,
    text_missing: Option<&'a str>,
    cov: Vec<Lines<'a>>,
    funcs: Vec<Func<'a>>,
    /// Against an older result: lines gained and lost (`null` without `--diff`).
    diff: Option<FileDiffData<'a>>,
    /// Against an older result on another base: lines per category (NEW's line
    /// numbers; OLD's for DCB and DUB).
    #[serde(skip_serializing_if = "Option::is_none")]
    cats: Option<&'a CatLines>,
}

#[derive(Serialize)]
struct FileDiffData<'a> {
    status: crate::diff::Status,
    gained: &'a [u32],
    lost: &'a [u32],
    old: Counts,
}

/// The script of one file page.
pub(super) fn file_script(
    id: u32,
    f: &FileCov,
    text: Result<Arc<FileVersion>, String>,
    diff: Option<&FileDiff>,
    diff_mode: bool,
    cats: Option<&CatLines>,
) -> Result<Vec<u8>> {
    let (lines, missing) = match &text {
        Ok(v) => (Some(v.lines().map(String::from_utf8_lossy).collect()), None),
        Err(why) => (None, Some(why.as_str())),
    };
    let mut cov = vec![Lines {
        m: "*",
        lines: &f.star.lines,
        hits: &f.star.hits,
    }];
    cov.extend(f.managers.iter().map(|(m, l)| Lines {
        m,
        lines: &l.lines,
        hits: &l.hits,
    }));
    let data = FileData {
        id,
        path: &f.path,
        text: lines,
        text_missing: missing,
        cov,
        funcs: f
            .funcs
            .iter()
            .map(|(name, lines)| Func { name, lines })
            .collect(),
        diff: diff.filter(|_| diff_mode).map(|d| FileDiffData {
            status: d.status,
            gained: &d.gained,
            lost: &d.lost,
            old: d.old,
        }),
        cats,
    };
    script("file", &data)
}
