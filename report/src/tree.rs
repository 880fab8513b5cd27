//! The directory tree of a result and its numbers: each file's instrumented and covered
//! lines (overall and per manager, straight from its records), summed into every
//! directory above it, with the lowest file coverage below a directory (for the
//! "below X %" filter) and, against an older result, lines gained and lost.
//!
//! Files are summarised as the result streams past ([`Summary`], a few numbers per file
//! and manager); the tree is built once all are in.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::diff::categories::CatCounts;
use crate::diff::{Counts, FileDiff};
use crate::read::FileCov;

/// Managers by order of first appearance while reading; [`Managers::finish`] sorts them.
#[derive(Default)]
pub struct Managers {
    names: Vec<String>,
    index: FxHashMap<String, u16>,
}

impl Managers {
    pub fn intern(&mut self, name: &str) -> anyhow::Result<u16> {
        if let Some(&i) = self.index.get(name) {
            return Ok(i);
        }
        let i = u16::try_from(self.names.len())
            .map_err(|_| anyhow::anyhow!("more than 65536 managers in one result"))?;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        Ok(i)
    }

    /// Names sorted, and the new column of each first-appearance index.
    pub fn finish(self) -> (Vec<String>, Vec<u16>) {
        let mut order: Vec<u16> = (0..self.names.len() as u16).collect();
        order.sort_by(|&a, &b| self.names[a as usize].cmp(&self.names[b as usize]));
        let mut remap = vec![0u16; order.len()];
        for (col, &i) in order.iter().enumerate() {
            remap[i as usize] = col as u16;
        }
        let names = order
            .iter()
            .map(|&i| self.names[i as usize].clone())
            .collect();
        (names, remap)
    }
}

/// One file's numbers.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub id: u32,
    pub path: String,
    pub star: Counts,
    /// (manager, counts), only managers with a record for this file.
    pub mgrs: Vec<(u16, Counts)>,
    pub gained: u64,
    pub lost: u64,
    /// Only in the older result of a diff: no page, no current coverage.
    pub deleted: bool,
    /// Against an older result on another base: the lines per category.
    pub cats: Option<CatCounts>,
}

impl Summary {
    pub fn of(
        id: u32,
        f: &FileCov,
        m: &mut Managers,
        d: Option<&FileDiff>,
    ) -> anyhow::Result<Self> {
        let mut mgrs = Vec::with_capacity(f.managers.len());
        for (name, l) in &f.managers {
            mgrs.push((m.intern(name)?, Counts::of(l)));
        }
        Ok(Summary {
            id,
            path: f.path.clone(),
            star: Counts::of(&f.star),
            mgrs,
            gained: d.map_or(0, |d| d.gained.len() as u64),
            lost: d.map_or(0, |d| d.lost.len() as u64),
            deleted: false,
            cats: None,
        })
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
    pub star: Counts,
    /// Dense, one per manager column.
    pub mgrs: Vec<Counts>,
    /// Lowest coverage (covered/instrumented) of an instrumented file below, if any.
    pub min_ratio: Option<f64>,
    pub gained: u64,
    pub lost: u64,
    pub files: u64,
    /// Against an older result on another base: the lines per category.
    #[serde(skip)]
    pub cats: Option<CatCounts>,
}

impl Agg {
    fn add(&mut self, s: &Summary) {
        self.star.instrumented += s.star.instrumented;
        self.star.covered += s.star.covered;
        for (m, c) in &s.mgrs {
            let t = &mut self.mgrs[*m as usize];
            t.instrumented += c.instrumented;
            t.covered += c.covered;
        }
        if s.star.instrumented > 0 {
            let r = s.star.covered as f64 / s.star.instrumented as f64;
            self.min_ratio = Some(self.min_ratio.map_or(r, |m| m.min(r)));
        }
        self.gained += s.gained;
        self.lost += s.lost;
        self.files += 1;
        if let Some(c) = &s.cats {
            self.cats.get_or_insert_with(CatCounts::default).add(c);
        }
    }
}

/// A directory: `""` is the root.
#[derive(Debug, Clone, Default)]
pub struct Dir {
    pub id: u32,
    pub path: String,
    pub parent: Option<u32>,
    /// Subdirectories (ids) and files (indexes into [`Tree::files`]), by name.
    pub dirs: Vec<u32>,
    pub files: Vec<usize>,
    pub agg: Agg,
}

impl Dir {
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or("")
    }
}

pub struct Tree {
    /// Indexed by id; 0 is the root.
    pub dirs: Vec<Dir>,
    pub files: Vec<Summary>,
    /// The directory of each file (aligned with `files`).
    pub file_dir: Vec<u32>,
    pub managers: Vec<String>,
}

fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

pub fn file_name(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, f)| f)
}

impl Tree {
    /// Builds the tree; `remap` turns first-appearance manager indexes into columns.
    pub fn build(mut files: Vec<Summary>, managers: Vec<String>, remap: &[u16]) -> Tree {
        for f in &mut files {
            for (m, _) in &mut f.mgrs {
                *m = remap[*m as usize];
            }
        }
        // Every directory that holds a file, and all above it, sorted by path.
        let mut paths: BTreeMap<&str, u32> = BTreeMap::new();
        paths.insert("", 0);
        for f in &files {
            let mut d = parent_of(&f.path);
            while !d.is_empty() && !paths.contains_key(d) {
                paths.insert(d, 0);
                d = parent_of(d);
            }
        }
        for (i, id) in paths.values_mut().enumerate() {
            *id = i as u32;
        }
        let n_mgr = managers.len();
        let mut dirs: Vec<Dir> = paths
            .iter()
            .map(|(p, &id)| Dir {
                id,
                path: p.to_string(),
                parent: (!p.is_empty()).then(|| paths[parent_of(p)]),
                agg: Agg {
                    mgrs: vec![Counts::default(); n_mgr],
                    ..Agg::default()
                },
                ..Dir::default()
            })
            .collect();
        // BTreeMap order: a directory's children come in name order ('/' sorts before
        // most name characters, so compare names, not paths).
        for id in 1..dirs.len() {
            let p = dirs[id].parent.unwrap() as usize;
            dirs[p].dirs.push(id as u32);
        }
        let mut file_dir = Vec::with_capacity(files.len());
        for (i, f) in files.iter().enumerate() {
            let d = paths[parent_of(&f.path)];
            file_dir.push(d);
            dirs[d as usize].files.push(i);
            let mut up = Some(d);
            while let Some(u) = up {
                dirs[u as usize].agg.add(f);
                up = dirs[u as usize].parent;
            }
        }
        for i in 0..dirs.len() {
            let mut sub = std::mem::take(&mut dirs[i].dirs);
            sub.sort_by(|&a, &b| dirs[a as usize].name().cmp(dirs[b as usize].name()));
            dirs[i].dirs = sub;
            dirs[i]
                .files
                .sort_by(|&a, &b| file_name(&files[a].path).cmp(file_name(&files[b].path)));
        }
        Tree {
            dirs,
            files,
            file_dir,
            managers,
        }
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
        let mut m = Managers::default();
        let (b, a) = (m.intern("b").unwrap(), m.intern("a").unwrap());
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
        let (names, remap) = m.finish();
        assert_eq!(names, vec!["a", "b"]);
        let t = Tree::build(files, names, &remap);
        let paths: Vec<&str> = t.dirs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, vec!["", "fs", "fs/ext4"]);
        let root = &t.dirs[0];
        assert_eq!(root.agg.star, c(14, 9));
        assert_eq!(root.agg.mgrs, vec![c(4, 1), c(14, 9)]);
        assert_eq!(root.agg.min_ratio, Some(0.5));
        assert_eq!((root.agg.files, root.agg.lost), (3, 2));
        assert_eq!(root.dirs, vec![1]);
        assert_eq!(root.files, vec![2]);
        let fs = &t.dirs[1];
        assert_eq!((fs.name(), fs.agg.star), ("fs", c(14, 9)));
        assert_eq!(fs.dirs, vec![2]);
        assert_eq!(t.dirs[2].agg.mgrs, vec![c(4, 1), c(10, 5)]);
        assert_eq!(t.file_dir, vec![2, 1, 0]);
    }
}
