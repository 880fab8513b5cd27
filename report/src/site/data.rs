//! The site's data scripts: `covmerge.meta(...)`, `covmerge.dir(...)`,
//! `covmerge.groups(...)`, `covmerge.file(...)`, `covmerge.page(...)` and
//! `covmerge.paths(...)`, each a JSON value written with serde. Rows are short arrays
//! and objects with one-letter keys: the tree of a kernel has thousands of directories
//! and the first page should stay small.
//!
//! Files are written in groups (one script calling `covmerge.file` for up to
//! [`GROUP_FILES`] files or about [`GROUP_BYTES`] of their records), so a million files
//! make thousands of scripts, not a million; `data/groups.js` lists the first file id
//! of each group. A source text of more than [`PAGE_LINES`] lines is written in pages
//! of that many lines (`data/t/ID/P.js`, loaded when the page is shown), not in the
//! file's record.

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use covmerge_source::FileVersion;
use serde::Serialize;

use crate::diff::across::CatTotals;
use crate::diff::categories::{CatCounts, CatLines};
use crate::diff::{Counts, Totals};
use crate::groups::Groups;
use crate::read::Header;
use crate::tree::{file_name, Dir, Summary, Tree};

/// Most files in one group script.
pub(super) const GROUP_FILES: usize = 64;
/// A group is closed once its files' records hold about this many bytes.
pub(super) const GROUP_BYTES: u64 = 4 << 20;
/// Source lines per page of a tall file (as `PAGE` in file.js).
pub(super) const PAGE_LINES: usize = 10_000;

/// Where the data script of directory `id` or file group `id` lives (`kind` is `d` or
/// `f`).
pub(super) fn script_path(kind: &str, id: u32) -> String {
    format!("data/{kind}/{}/{id}.js", id / 1000)
}

/// Where page `page` of the text of file `id` lives.
pub(super) fn page_path(id: u32, page: usize) -> String {
    format!("data/t/{id}/{page}.js")
}

fn script(call: &str, args: &impl Serialize) -> Result<Vec<u8>> {
    let mut v = Vec::with_capacity(4096);
    script_to(&mut v, call, args)?;
    Ok(v)
}

fn script_to(w: &mut impl Write, call: &str, args: &impl Serialize) -> Result<()> {
    w.write_all(b"covmerge.")?;
    w.write_all(call.as_bytes())?;
    w.write_all(b"(")?;
    serde_json::to_writer(&mut *w, args)?;
    w.write_all(b");\n")?;
    Ok(())
}

/// `[instrumented, covered]`.
fn pair(c: Counts) -> [u64; 2] {
    [c.instrumented, c.covered]
}

/// `[[column, instrumented, covered], ...]` for managers with lines.
fn sparse<'a>(it: impl Iterator<Item = (u32, &'a Counts)>) -> Vec<[u64; 3]> {
    it.filter(|(_, c)| c.instrumented > 0)
        .map(|(m, c)| [m as u64, c.instrumented, c.covered])
        .collect()
}

/// One row of the tree: a directory (`k` = `d`) or a file (`f`).
#[derive(Serialize)]
pub(super) struct Row<'a> {
    pub k: &'static str,
    pub id: u32,
    pub name: Cow<'a, str>,
    pub n: [u64; 2],
    pub m: Vec<[u64; 3]>,
    /// `[[column, lines only that manager covered], ...]` for managers with such lines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub u: Vec<[u64; 2]>,
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
        name: Cow::Borrowed(d.name()),
        n: pair(d.agg.star),
        m: sparse(d.agg.mgrs.iter().map(|(m, c)| (*m, c))),
        u: d.agg
            .uniq
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|&(m, n)| [m as u64, n])
            .collect(),
        lo: d.agg.min_ratio.map(|r| (r * 100.0 * 100.0).round() / 100.0),
        g: d.agg.gained,
        l: d.agg.lost,
        del: false,
        c: d.agg.cats.map(|c: CatCounts| c.0),
    }
}

pub(super) fn file_row<'a>(f: &Summary) -> Row<'a> {
    Row {
        k: "f",
        id: f.id,
        name: Cow::Owned(file_name(&f.path).to_string()),
        n: pair(f.star),
        m: sparse(f.mgrs.iter().map(|(m, c)| (*m, c))),
        u: f.uniq.iter().map(|&(m, n)| [m as u64, n]).collect(),
        lo: None,
        g: f.gained,
        l: f.lost,
        del: f.deleted,
        c: f.cats.map(|c| c.0),
    }
}

/// A directory's children, directories first (its file rows read from the spill).
pub(super) fn children<'a>(t: &'a Tree, d: &'a Dir) -> Result<Vec<Row<'a>>> {
    let files = t.files_of(d)?;
    Ok(d.dirs
        .iter()
        .map(|&c| dir_row(&t.dirs[c as usize]))
        .chain(files.iter().map(file_row))
        .collect())
}

/// Writes a directory's script, `covmerge.dir({"id", "path", "rows"})`, a file row
/// at a time; returns its bytes.
fn write_dir(out: &Path, t: &Tree, d: &Dir) -> Result<u64> {
    let p = out.join(script_path("d", d.id));
    std::fs::create_dir_all(p.parent().unwrap())
        .with_context(|| format!("creating {}", p.parent().unwrap().display()))?;
    let f = std::fs::File::create(&p).with_context(|| format!("writing {}", p.display()))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
    (|| -> Result<()> {
        write!(w, "covmerge.dir({{\"id\":{},\"path\":", d.id)?;
        serde_json::to_writer(&mut w, &d.path)?;
        w.write_all(b",\"rows\":[")?;
        let mut first = true;
        let mut sep = |w: &mut std::io::BufWriter<std::fs::File>| -> std::io::Result<()> {
            if !std::mem::take(&mut first) {
                w.write_all(b",")?;
            }
            Ok(())
        };
        for &c in &d.dirs {
            sep(&mut w)?;
            serde_json::to_writer(&mut w, &dir_row(&t.dirs[c as usize]))?;
        }
        for at in t.file_order(d)? {
            sep(&mut w)?;
            serde_json::to_writer(&mut w, &file_row(&t.file_at(at)?))?;
        }
        w.write_all(b"]});\n")?;
        Ok(())
    })()
    .with_context(|| format!("writing {}", p.display()))?;
    let f = w
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("writing {}", p.display()))?;
    Ok(f.metadata()?.len())
}

#[derive(Serialize)]
struct Meta<'a> {
    header: &'a Header,
    managers: &'a [String],
    /// `[[column, glob], ...]`: the columns that are groups (`merge --group`).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    groups: &'a [(u32, String)],
    total: Row<'a>,
    files: u64,
    dirs: usize,
    /// The older result and the totals of the diff.
    diff: Option<(&'a str, &'a Totals)>,
    /// Against an older result on another base: its base and the category totals.
    #[serde(skip_serializing_if = "Option::is_none")]
    cats: Option<(&'a str, &'a CatTotals)>,
}

/// Writes meta.js, every directory's script, paths.js and groups.js (`groups`: the
/// first file id of each group); returns the bytes written.
pub(super) fn write_tree(
    out: &Path,
    header: &Header,
    t: &Tree,
    diff: Option<&(String, Totals)>,
    cats: Option<&(String, CatTotals)>,
    groups: &[u32],
) -> Result<u64> {
    let mut bytes = 0;
    let mut put = |rel: &str, b: Vec<u8>| -> Result<()> {
        bytes += b.len() as u64;
        super::write(out, rel, &b)
    };
    let meta = Meta {
        header,
        managers: &t.managers,
        groups: &t.groups,
        total: dir_row(&t.dirs[0]),
        files: t.files,
        dirs: t.dirs.len(),
        diff: diff.map(|(n, t)| (n.as_str(), t)),
        cats: cats.map(|(c, t)| (c.as_str(), t)),
    };
    put("data/meta.js", script("meta", &meta)?)?;
    put("data/groups.js", script("groups", &groups)?)?;
    for d in &t.dirs {
        bytes += write_dir(out, t, d)?;
    }
    // paths.js as serde would write {"dirs": [[id, parent, path]], "files": [[id, dir,
    // name]]}, streamed: the files come from the spill.
    let p = out.join("data/paths.js");
    let mut w = std::io::BufWriter::new(
        std::fs::File::create(&p).with_context(|| format!("writing {}", p.display()))?,
    );
    let dirs: Vec<(u32, Option<u32>, &str)> = t
        .dirs
        .iter()
        .map(|d| (d.id, d.parent, d.path.as_str()))
        .collect();
    w.write_all(b"covmerge.paths({\"dirs\":")?;
    serde_json::to_writer(&mut w, &dirs)?;
    w.write_all(b",\"files\":[")?;
    let mut first = true;
    t.each_file(|d, f| {
        if !first {
            w.write_all(b",")?;
        }
        first = false;
        serde_json::to_writer(&mut w, &(f.id, d, file_name(&f.path)))?;
        Ok(())
    })?;
    w.write_all(b"]});\n")?;
    let f = w.into_inner().map_err(|e| e.into_error())?;
    bytes += f.metadata()?.len();
    Ok(bytes)
}

#[derive(Serialize)]
struct Lines<'a> {
    /// Manager (`*` first).
    m: &'a str,
    lines: &'a [u32],
    hits: &'a [u64],
    /// A group's record (`merge --group`), not a manager's.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    g: bool,
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
    /// A tall text: how many pages of [`PAGE_LINES`] and lines (`text` is then null).
    #[serde(skip_serializing_if = "Option::is_none")]
    pages: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text_lines: Option<usize>,
    cov: Vec<Lines<'a>>,
    /// `[[line, k], ...]`: lines covered by one manager only, `cov[k]` (groups aside).
    only: Vec<(u32, u32)>,
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

#[derive(Serialize)]
struct Page<'a> {
    id: u32,
    page: usize,
    text: Vec<Cow<'a, str>>,
}

/// Writes one file's record to its group script `w`, and the pages of a tall text
/// under `out`; returns the bytes and the number of the pages.
pub(super) fn file_script(
    w: &mut impl Write,
    out: &Path,
    job: &super::FileJob,
    text: Result<Arc<FileVersion>, String>,
    diff_mode: bool,
    groups: &Groups,
) -> Result<(u64, u64)> {
    let (id, f, diff, unique) = (job.id, &job.file, job.diff.as_ref(), &job.unique);
    let cats = job.cats.as_ref();
    let (mut lines, mut missing, mut pages, mut text_lines, mut paged) =
        (None, None, None, None, 0);
    match &text {
        Err(why) => missing = Some(why.as_str()),
        Ok(v) => {
            let n = v.lines().count();
            if n <= PAGE_LINES {
                lines = Some(v.lines().map(String::from_utf8_lossy).collect());
            } else {
                // Page by page: a tall text is never held as one list of lines.
                let mut it = v.lines();
                for page in 0..n.div_ceil(PAGE_LINES) {
                    let p = Page {
                        id,
                        page,
                        text: it
                            .by_ref()
                            .take(PAGE_LINES)
                            .map(String::from_utf8_lossy)
                            .collect(),
                    };
                    let b = script("page", &p)?;
                    paged += b.len() as u64;
                    super::write(out, &page_path(id, page), &b)?;
                }
                pages = Some(n.div_ceil(PAGE_LINES));
                text_lines = Some(n);
            }
        }
    }
    let mut cov = vec![Lines {
        m: "*",
        lines: &f.star.lines,
        hits: &f.star.hits,
        g: false,
    }];
    cov.extend(f.managers.iter().map(|(m, l)| Lines {
        m,
        lines: &l.lines,
        hits: &l.hits,
        g: groups.is_group(m),
    }));
    let data = FileData {
        id,
        path: &f.path,
        text: lines,
        text_missing: missing,
        pages,
        text_lines,
        cov,
        only: unique.iter().map(|&(line, k)| (line, k + 1)).collect(),
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
    script_to(w, "file", &data)?;
    Ok((paged, pages.unwrap_or(0) as u64))
}
