//! The directory tree of a result and its numbers: each file's instrumented and covered
//! lines (overall and per manager, straight from its records), summed into every
//! directory above it, with the lowest file coverage below a directory (for the
//! "below X %" filter) and, against an older result, lines gained and lost.
//!
//! Files are summarised as the result streams past ([`Summary`]) and added to a
//! [`TreeBuilder`]: only the directories and their sums stay in memory (sparse, a few
//! numbers per manager with lines below), held within the budget's share of the tree;
//! each file's row (its numbers per manager) goes to a temporary file and is read back
//! directory by directory when the site is written. So memory grows with directories ×
//! managers, not with files × managers. Each file carries each manager's unique lines
//! ([`crate::groups`]), summed up the tree the same sparse way; group columns come
//! after the managers'.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use anyhow::{Context, Result};
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::budget::Budget;
use crate::diff::categories::CatCounts;
use crate::diff::{Counts, FileDiff};
use crate::groups::Groups;
use crate::read::FileCov;

/// Managers by order of first appearance while reading; [`Managers::finish`] sorts them.
#[derive(Default)]
pub struct Managers {
    names: Vec<String>,
    index: FxHashMap<String, u32>,
}

impl Managers {
    /// The manager's index, given on first sight.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        i
    }

    /// About the bytes held.
    fn bytes(&self) -> u64 {
        self.names.iter().map(|n| 2 * n.len() as u64 + 64).sum()
    }

    /// Names sorted (managers by name, then groups in the order of `groups`), and the
    /// new column of each first-appearance index.
    pub fn finish(self, groups: &Groups) -> (Vec<String>, Vec<u32>) {
        let mut order: Vec<u32> = (0..self.names.len() as u32).collect();
        let key = |i: u32| {
            let name = &self.names[i as usize];
            (groups.position(name), name)
        };
        order.sort_by(|&a, &b| key(a).cmp(&key(b)));
        let mut remap = vec![0u32; order.len()];
        for (col, &i) in order.iter().enumerate() {
            remap[i as usize] = col as u32;
        }
        let names = order
            .iter()
            .map(|&i| self.names[i as usize].clone())
            .collect();
        (names, remap)
    }
}

/// One file's numbers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// The file's number in reading order, which names its page.
    pub id: u32,
    /// The file, as a repository path.
    pub path: String,
    /// Its `*` counts.
    pub star: Counts,
    /// (manager, counts), only managers with a record for this file.
    pub mgrs: Vec<(u32, Counts)>,
    /// (manager, lines only it covered), only managers with such lines.
    pub uniq: Vec<(u32, u64)>,
    /// Lines gained against OLD (0 without a diff).
    pub gained: u64,
    /// Lines lost against OLD (0 without a diff).
    pub lost: u64,
    /// Only in the older result of a diff: no page, no current coverage.
    pub deleted: bool,
    /// Against an older result on another base: the lines per category.
    pub cats: Option<CatCounts>,
}

impl Summary {
    /// The numbers of file `f` (number `id`), interning its managers in `m`; `d` its
    /// diff against OLD, `unique` its unique lines ([`crate::groups::unique_lines`]).
    pub fn of(
        id: u32,
        f: &FileCov,
        m: &mut Managers,
        d: Option<&FileDiff>,
        unique: &[(u32, u32)],
    ) -> Self {
        let mgrs: Vec<(u32, Counts)> = f
            .managers
            .iter()
            .map(|(name, l)| (m.intern(name), Counts::of(l)))
            .collect();
        let mut per = vec![0u64; f.managers.len()];
        for &(_, k) in unique {
            per[k as usize] += 1;
        }
        let uniq = per
            .iter()
            .zip(&mgrs)
            .filter(|(&n, _)| n > 0)
            .map(|(&n, &(col, _))| (col, n))
            .collect();
        Summary {
            id,
            path: f.path.clone(),
            star: Counts::of(&f.star),
            mgrs,
            uniq,
            gained: d.map_or(0, |d| d.gained.len() as u64),
            lost: d.map_or(0, |d| d.lost.len() as u64),
            deleted: false,
            cats: None,
        }
    }

    /// A file of the older result that the newer one no longer has.
    pub fn deleted(id: u32, d: &FileDiff) -> Self {
        Summary {
            id,
            path: d.file.clone(),
            lost: d.lost.len() as u64,
            deleted: true,
            ..Summary::default()
        }
    }
}

/// Sums over the files below a directory.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Agg {
    /// `*` counts summed.
    pub star: Counts,
    /// Sparse: (manager, counts) of managers with a record below; by column once the
    /// tree is built.
    pub mgrs: Vec<(u32, Counts)>,
    /// Sparse: (manager, lines only it covered) of managers with such lines below; by
    /// column once the tree is built.
    pub uniq: Vec<(u32, u64)>,
    /// Lowest coverage (covered/instrumented) of an instrumented file below, if any.
    pub min_ratio: Option<f64>,
    /// Lines gained, summed.
    pub gained: u64,
    /// Lines lost, summed.
    pub lost: u64,
    /// Files below it.
    pub files: u64,
    /// Against an older result on another base: the lines per category.
    #[serde(skip)]
    pub cats: Option<CatCounts>,
}

/// A directory: `""` is the root.
#[derive(Debug, Clone, Default)]
pub struct Dir {
    /// The directory's id, its index in [`Tree::dirs`].
    pub id: u32,
    /// Its path (`""`: the root).
    pub path: String,
    /// The directory above it (`None` for the root).
    pub parent: Option<u32>,
    /// Subdirectories (ids), by name.
    pub dirs: Vec<u32>,
    /// Where its files' rows are in the spill (in reading order).
    files: Vec<u64>,
    /// Sums over every file below it.
    pub agg: Agg,
}

impl Dir {
    /// Its last path segment.
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or("")
    }
}

/// A directory while files are added: sums by first-appearance manager index.
struct Building {
    path: String,
    parent: Option<u32>,
    files: Vec<u64>,
    agg: Agg,
    mgrs: FxHashMap<u32, Counts>,
    uniq: FxHashMap<u32, u64>,
}

fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

/// The last segment of `path`.
pub fn file_name(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, f)| f)
}

/// Bytes a directory costs beside its path, and each (directory, manager) sum.
const DIR_BYTES: u64 = 200;
const SUM_BYTES: u64 = 40;

/// Builds the tree as files stream past; file rows go to `spill`.
pub struct TreeBuilder {
    dirs: Vec<Building>,
    index: FxHashMap<String, u32>,
    spill: BufWriter<File>,
    spilled: u64,
    files: u64,
    /// About the bytes held by directories and their sums.
    held: u64,
    budget: Budget,
}

impl TreeBuilder {
    /// Spills file rows to an unnamed temporary file in `dir`.
    pub fn new(dir: &std::path::Path, budget: Budget) -> Result<Self> {
        let f = tempfile::tempfile_in(dir)
            .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
        let mut b = TreeBuilder {
            dirs: Vec::new(),
            index: FxHashMap::default(),
            spill: BufWriter::with_capacity(1 << 20, f),
            spilled: 0,
            files: 0,
            held: 0,
            budget,
        };
        b.dir("");
        Ok(b)
    }

    /// The directory `path` (created with those above it).
    fn dir(&mut self, path: &str) -> u32 {
        if let Some(&i) = self.index.get(path) {
            return i;
        }
        let parent = (!path.is_empty()).then(|| self.dir(parent_of(path)));
        let i = self.dirs.len() as u32;
        self.held += DIR_BYTES + 2 * path.len() as u64;
        self.dirs.push(Building {
            path: path.to_string(),
            parent,
            files: Vec::new(),
            agg: Agg::default(),
            mgrs: FxHashMap::default(),
            uniq: FxHashMap::default(),
        });
        self.index.insert(path.to_string(), i);
        i
    }

    /// Adds a file: its numbers into every directory above it, its row to the spill.
    /// `managers` (the names so far) count against the tree's share too.
    pub fn add(&mut self, s: &Summary, managers: &Managers) -> Result<()> {
        let d = self.dir(parent_of(&s.path));
        let mut up = Some(d);
        while let Some(u) = up {
            let b = &mut self.dirs[u as usize];
            add_to(&mut b.agg, s);
            for (m, c) in &s.mgrs {
                let e = b.mgrs.entry(*m).or_insert_with(|| {
                    self.held += SUM_BYTES;
                    Counts::default()
                });
                e.instrumented += c.instrumented;
                e.covered += c.covered;
            }
            for &(m, n) in &s.uniq {
                *b.uniq.entry(m).or_insert_with(|| {
                    self.held += SUM_BYTES;
                    0
                }) += n;
            }
            up = b.parent;
        }
        self.dirs[d as usize].files.push(self.spilled);
        self.held += 8;
        self.files += 1;
        let rec = encode(s, d);
        self.spill
            .write_all(&rec)
            .context("writing the report's file rows")?;
        self.spilled += rec.len() as u64;
        let held = self.held + managers.bytes();
        if held > self.budget.tree() {
            anyhow::bail!(
                "the report's tree of {} directories and {} managers (with {} files so far) holds about {} MiB, over its share (a quarter) of --memory-budget {}: directories × managers with lines below them is the dimension; give a larger --memory-budget",
                self.dirs.len(),
                managers.names.len(),
                self.files,
                held >> 20,
                self.budget
            );
        }
        Ok(())
    }

    /// The tree: directories numbered by path (the root 0), managers as columns (then
    /// `groups`' columns).
    pub fn build(self, managers: Vec<String>, remap: &[u32], groups: &Groups) -> Result<Tree> {
        let group_cols = managers
            .iter()
            .enumerate()
            .filter_map(|(col, name)| {
                let g = groups.groups.iter().find(|g| g.name == *name)?;
                Some((col as u32, g.glob.clone()))
            })
            .collect();
        let spill = self
            .spill
            .into_inner()
            .map_err(|e| e.into_error())
            .context("writing the report's file rows")?;
        let mut order: Vec<u32> = (0..self.dirs.len() as u32).collect();
        order.sort_by(|&a, &b| self.dirs[a as usize].path.cmp(&self.dirs[b as usize].path));
        let mut id_of = vec![0u32; order.len()];
        for (id, &i) in order.iter().enumerate() {
            id_of[i as usize] = id as u32;
        }
        let mut built: Vec<Option<Building>> = self.dirs.into_iter().map(Some).collect();
        let mut dirs: Vec<Dir> = order
            .iter()
            .enumerate()
            .map(|(id, &i)| {
                let b = built[i as usize].take().unwrap();
                let mut agg = b.agg;
                agg.mgrs = b
                    .mgrs
                    .into_iter()
                    .map(|(m, c)| (remap[m as usize], c))
                    .collect();
                agg.mgrs.sort_unstable_by_key(|x| x.0);
                agg.uniq = b
                    .uniq
                    .into_iter()
                    .map(|(m, n)| (remap[m as usize], n))
                    .collect();
                agg.uniq.sort_unstable_by_key(|x| x.0);
                Dir {
                    id: id as u32,
                    path: b.path,
                    parent: b.parent.map(|p| id_of[p as usize]),
                    dirs: Vec::new(),
                    files: b.files,
                    agg,
                }
            })
            .collect();
        for id in 1..dirs.len() {
            let p = dirs[id].parent.unwrap() as usize;
            dirs[p].dirs.push(id as u32);
        }
        for i in 0..dirs.len() {
            let mut sub = std::mem::take(&mut dirs[i].dirs);
            sub.sort_by(|&a, &b| dirs[a as usize].name().cmp(dirs[b as usize].name()));
            dirs[i].dirs = sub;
        }
        Ok(Tree {
            dirs,
            files: self.files,
            managers,
            groups: group_cols,
            remap: remap.to_vec(),
            id_of,
            spill,
            spilled: self.spilled,
        })
    }
}

fn add_to(a: &mut Agg, s: &Summary) {
    a.star.instrumented += s.star.instrumented;
    a.star.covered += s.star.covered;
    if s.star.instrumented > 0 {
        let r = s.star.covered as f64 / s.star.instrumented as f64;
        a.min_ratio = Some(a.min_ratio.map_or(r, |m| m.min(r)));
    }
    a.gained += s.gained;
    a.lost += s.lost;
    a.files += 1;
    if let Some(c) = &s.cats {
        a.cats.get_or_insert_with(CatCounts::default).add(c);
    }
}

/// A file row in the spill: its length, then the directory and the summary.
fn encode(s: &Summary, dir: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(64 + s.path.len() + s.mgrs.len() * 20);
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&dir.to_le_bytes());
    v.extend_from_slice(&s.id.to_le_bytes());
    v.push(u8::from(s.deleted));
    for n in [s.star.instrumented, s.star.covered, s.gained, s.lost] {
        v.extend_from_slice(&n.to_le_bytes());
    }
    v.extend_from_slice(&(s.mgrs.len() as u32).to_le_bytes());
    for (m, c) in &s.mgrs {
        v.extend_from_slice(&m.to_le_bytes());
        v.extend_from_slice(&c.instrumented.to_le_bytes());
        v.extend_from_slice(&c.covered.to_le_bytes());
    }
    v.extend_from_slice(&(s.uniq.len() as u32).to_le_bytes());
    for (m, n) in &s.uniq {
        v.extend_from_slice(&m.to_le_bytes());
        v.extend_from_slice(&n.to_le_bytes());
    }
    match &s.cats {
        Some(c) => {
            v.push(1);
            for n in c.0 {
                v.extend_from_slice(&n.to_le_bytes());
            }
        }
        None => v.push(0),
    }
    v.extend_from_slice(s.path.as_bytes());
    let n = (v.len() - 4) as u32;
    v[..4].copy_from_slice(&n.to_le_bytes());
    v
}

/// Reads the fields of [`encode`] back in order.
struct Dec<'a>(&'a [u8]);

impl Dec<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (a, b) = self.0.split_at(N);
        self.0 = b;
        a.try_into().unwrap()
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

/// The directory (as numbered while building) and summary of a row.
fn decode(b: &[u8]) -> (u32, Summary) {
    let mut d = Dec(b);
    let dir = d.u32();
    let id = d.u32();
    let deleted = d.take::<1>()[0] != 0;
    let star = Counts {
        instrumented: d.u64(),
        covered: d.u64(),
    };
    let (gained, lost) = (d.u64(), d.u64());
    let n = d.u32() as usize;
    let mgrs = (0..n)
        .map(|_| {
            let m = d.u32();
            (
                m,
                Counts {
                    instrumented: d.u64(),
                    covered: d.u64(),
                },
            )
        })
        .collect();
    let n = d.u32() as usize;
    let uniq = (0..n).map(|_| (d.u32(), d.u64())).collect();
    let cats = (d.take::<1>()[0] != 0).then(|| CatCounts(std::array::from_fn(|_| d.u64())));
    let path = String::from_utf8_lossy(d.0).into_owned();
    let s = Summary {
        id,
        path,
        star,
        mgrs,
        uniq,
        gained,
        lost,
        deleted,
        cats,
    };
    (dir, s)
}

/// The result's directories with sums per directory; the files' rows are on disk.
pub struct Tree {
    /// Indexed by id; 0 is the root.
    pub dirs: Vec<Dir>,
    /// How many files.
    pub files: u64,
    /// Column names: managers (sorted), then groups.
    pub managers: Vec<String>,
    /// The glob of each group column, by column.
    pub groups: Vec<(u32, String)>,
    remap: Vec<u32>,
    /// Directory ids by building order.
    id_of: Vec<u32>,
    spill: File,
    spilled: u64,
}

impl Tree {
    fn row_at(&self, at: u64) -> Result<(u32, Summary)> {
        let mut len = [0u8; 4];
        self.spill
            .read_exact_at(&mut len, at)
            .context("reading the report's file rows")?;
        let mut b = vec![0u8; u32::from_le_bytes(len) as usize];
        self.spill
            .read_exact_at(&mut b, at + 4)
            .context("reading the report's file rows")?;
        let (d, mut s) = decode(&b);
        for (m, _) in &mut s.mgrs {
            *m = self.remap[*m as usize];
        }
        s.mgrs.sort_unstable_by_key(|x| x.0);
        for (m, _) in &mut s.uniq {
            *m = self.remap[*m as usize];
        }
        s.uniq.sort_unstable_by_key(|x| x.0);
        Ok((self.id_of[d as usize], s))
    }

    /// The files of directory `d`, by name.
    pub fn files_of(&self, d: &Dir) -> Result<Vec<Summary>> {
        self.file_order(d)?
            .into_iter()
            .map(|at| self.file_at(at))
            .collect()
    }

    /// Where the rows of the files of directory `d` are, by name (only the names are
    /// held while sorting).
    pub fn file_order(&self, d: &Dir) -> Result<Vec<u64>> {
        let mut v = d
            .files
            .iter()
            .map(|&at| {
                self.row_at(at)
                    .map(|r| (file_name(&r.1.path).to_string(), at))
            })
            .collect::<Result<Vec<_>>>()?;
        v.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(v.into_iter().map(|x| x.1).collect())
    }

    /// The file whose row is at `at` (from [`Tree::file_order`]).
    pub fn file_at(&self, at: u64) -> Result<Summary> {
        self.row_at(at).map(|r| r.1)
    }

    /// Every file in reading order with its directory's id: `f(dir, summary)`.
    pub fn each_file(&self, mut f: impl FnMut(u32, &Summary) -> Result<()>) -> Result<()> {
        let mut at = 0;
        while at < self.spilled {
            let mut len = [0u8; 4];
            self.spill.read_exact_at(&mut len, at)?;
            let (d, s) = self.row_at(at)?;
            f(d, &s)?;
            at += 4 + u32::from_le_bytes(len) as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(instrumented: u64, covered: u64) -> Counts {
        Counts {
            instrumented,
            covered,
        }
    }

    #[test]
    fn sums_go_up_to_every_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let mut m = Managers::default();
        let (b, a) = (m.intern("b"), m.intern("a"));
        let files = vec![
            Summary {
                id: 0,
                path: "fs/ext4/inode.c".into(),
                star: c(10, 5),
                mgrs: vec![(b, c(10, 5)), (a, c(4, 1))],
                ..Summary::default()
            },
            Summary {
                id: 1,
                path: "fs/open.c".into(),
                star: c(4, 4),
                mgrs: vec![(b, c(4, 4))],
                lost: 2,
                ..Summary::default()
            },
            Summary {
                id: 2,
                path: "Makefile.c".into(),
                star: c(0, 0),
                ..Summary::default()
            },
        ];
        let mut tb = TreeBuilder::new(tmp.path(), Budget::default()).unwrap();
        for f in &files {
            tb.add(f, &m).unwrap();
        }
        let (names, remap) = m.finish(&Groups::default());
        assert_eq!(names, vec!["a", "b"]);
        let t = tb.build(names, &remap, &Groups::default()).unwrap();
        let paths: Vec<&str> = t.dirs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, vec!["", "fs", "fs/ext4"]);
        let root = &t.dirs[0];
        assert_eq!(root.agg.star, c(14, 9));
        assert_eq!(root.agg.mgrs, vec![(0, c(4, 1)), (1, c(14, 9))]);
        assert_eq!(root.agg.min_ratio, Some(0.5));
        assert_eq!((root.agg.files, root.agg.lost), (3, 2));
        assert_eq!(root.dirs, vec![1]);
        let rf = t.files_of(root).unwrap();
        assert_eq!(rf.len(), 1);
        assert_eq!(rf[0].path, "Makefile.c");
        let fs = &t.dirs[1];
        assert_eq!((fs.name(), fs.agg.star), ("fs", c(14, 9)));
        assert_eq!(fs.dirs, vec![2]);
        assert_eq!(t.dirs[2].agg.mgrs, vec![(0, c(4, 1)), (1, c(10, 5))]);
        // A file's row comes back from the spill with its managers as columns.
        let inode = &t.files_of(&t.dirs[2]).unwrap()[0];
        assert_eq!(inode.mgrs, vec![(0, c(4, 1)), (1, c(10, 5))]);
        let mut seen = Vec::new();
        t.each_file(|d, s| {
            seen.push((d, s.id));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![(2, 0), (1, 1), (0, 2)]);
    }

    #[test]
    fn more_than_65536_managers_fit_in_the_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let mut m = Managers::default();
        let mgrs: Vec<(u32, Counts)> = (0..70_000)
            .map(|i| (m.intern(&format!("m{i:05}")), c(1, 1)))
            .collect();
        let s = Summary {
            path: "a/b.c".into(),
            star: c(1, 1),
            mgrs,
            ..Summary::default()
        };
        let mut tb = TreeBuilder::new(tmp.path(), Budget::default()).unwrap();
        tb.add(&s, &m).unwrap();
        let (names, remap) = m.finish(&Groups::default());
        let t = tb.build(names, &remap, &Groups::default()).unwrap();
        assert_eq!(t.dirs[0].agg.mgrs.len(), 70_000);
        assert_eq!(t.dirs[0].agg.mgrs[69_999], (69_999, c(1, 1)));
        assert_eq!(t.files_of(&t.dirs[1]).unwrap()[0].mgrs.len(), 70_000);
    }

    #[test]
    fn a_tree_over_its_share_is_refused_naming_the_dimension() {
        let tmp = tempfile::tempdir().unwrap();
        let mut m = Managers::default();
        let mut tb = TreeBuilder::new(tmp.path(), crate::budget::parse("16MiB").unwrap()).unwrap();
        let mut err = None;
        for d in 0..10_000 {
            let mgrs = (0..100)
                .map(|i| (m.intern(&format!("m{}", d * 100 + i)), c(1, 1)))
                .collect();
            let s = Summary {
                path: format!("d{d}/f.c"),
                mgrs,
                ..Summary::default()
            };
            if let Err(e) = tb.add(&s, &m) {
                err = Some(e.to_string());
                break;
            }
        }
        let e = err.expect("refused");
        assert!(
            e.contains("directories × managers") && e.contains("--memory-budget 16 MiB"),
            "{e}"
        );
    }
}
