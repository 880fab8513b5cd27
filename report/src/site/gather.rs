//! What the site's reader gathers while the result's files stream to the page
//! writers: each file's place in the tree and in the diff against the older result,
//! then, after the last file, the tree, its data scripts and the pages.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};

use anyhow::Result;

use super::older::{self, Older};
use super::{data, page_writer, pages, FileJob, Job, Options, Shared, Stats};
use crate::diff::across::CatTotals;
use crate::groups::{unique_lines, Groups};
use crate::read::{FileCov, Files, Header};
use crate::tree::{Managers, Summary, TreeBuilder};

pub(super) struct Gather {
    old: Option<Older>,
    /// OLD's base commit, when there is an OLD.
    old_base: Option<String>,
    groups: Groups,
    /// Files seen so far (each file's id is its rank).
    n_files: u32,
    /// The first file id of each group script.
    firsts: Vec<u32>,
    managers: Managers,
    tree: TreeBuilder,
    /// Against an OLD on the same base: the totals of the line diff.
    dtotals: crate::diff::Totals,
    /// Against an OLD on another base: the category totals.
    ctotals: Option<CatTotals>,
    bad_paths: u64,
}

impl Gather {
    pub(super) fn new(opts: &Options, old: Option<Older>, groups: Groups) -> Result<Gather> {
        Ok(Gather {
            ctotals: old.as_ref().and_then(older::totals_of),
            old_base: old.as_ref().map(|o| o.header().commit.clone()),
            old,
            groups,
            n_files: 0,
            firsts: Vec::new(),
            managers: Managers::default(),
            tree: TreeBuilder::new(&opts.out, opts.budget)?,
            dtotals: Default::default(),
            bad_paths: 0,
        })
    }

    /// Streams `files` to `threads` page writers, in groups, gathering each file.
    pub(super) fn stream(
        &mut self,
        files: &mut Files,
        shared: &Arc<Shared>,
        threads: usize,
    ) -> Result<()> {
        let (tx, rx) = sync_channel::<Job>(threads);
        let rx = Arc::new(Mutex::new(rx));
        std::thread::scope(|s| -> Result<()> {
            for _ in 0..threads {
                let (rx, shared) = (rx.clone(), shared.clone());
                s.spawn(move || page_writer(&rx, &shared));
            }
            let r = self.read_all(files, shared, &tx);
            drop(tx);
            r
        })
    }

    /// Reads every file, sending the groups as they fill; stops early (without an
    /// error of its own) when a page writer failed.
    fn read_all(&mut self, files: &mut Files, shared: &Shared, tx: &SyncSender<Job>) -> Result<()> {
        let mut job = Job::new(0);
        while let Some(f) = files.next_file()? {
            let fj = self.file_job(f)?;
            if job.files.is_empty() {
                self.firsts.push(fj.id);
            }
            job.bytes += fj.bytes();
            job.files.push(fj);
            if (job.files.len() >= data::GROUP_FILES || job.bytes >= data::GROUP_BYTES)
                && !shared.send(&mut job, tx)
            {
                return Ok(());
            }
        }
        if !job.files.is_empty() {
            shared.send(&mut job, tx);
        }
        Ok(())
    }

    /// One file of the result: its diff against OLD, its unique lines, its place in
    /// the tree.
    fn file_job(&mut self, f: FileCov) -> Result<FileJob> {
        let id = self.n_files;
        self.n_files += 1;
        self.bad_paths += u64::from(f.path_problem.is_some());
        let (diff, cats) = match self.old.as_mut() {
            Some(o) => {
                let (d, c) = o.take(&f)?;
                (Some(d), c)
            }
            None => (None, None),
        };
        if let Some(d) = &diff {
            self.dtotals.add(d);
        }
        let unique = unique_lines(&f, &self.groups);
        let mut summary = Summary::of(id, &f, &mut self.managers, diff.as_ref(), &unique);
        if let (Some(c), Some(t)) = (&cats, &mut self.ctotals) {
            t.add(c);
            summary.cats = Some(c.categories);
        }
        self.tree.add(&summary, &self.managers)?;
        Ok(FileJob {
            id,
            file: f,
            diff,
            unique,
            cats: cats.map(|c| c.lines),
        })
    }

    /// After the last file: OLD's files that NEW lacks, then the tree, its data
    /// scripts and the pages; what was written.
    pub(super) fn finish(
        mut self,
        opts: &Options,
        header: &Header,
        shared: &Shared,
    ) -> Result<Stats> {
        let mut stats = Stats {
            files: self.n_files as u64,
            bad_paths: self.bad_paths,
            ..Stats::default()
        };
        let diff = self.old_files_only(opts)?;
        let cats = self.ctotals.map(|t| (self.old_base.unwrap_or_default(), t));
        let (names, remap) = self.managers.finish(&self.groups);
        let tree = self.tree.build(names, &remap, &self.groups)?;
        let written = data::write_tree(
            &opts.out,
            header,
            &tree,
            diff.as_ref(),
            cats.as_ref(),
            &self.firsts,
        )?;
        let pages = pages::write_pages(&opts.out, header, &tree, diff.as_ref(), cats.as_ref())?;
        stats.dirs = tree.dirs.len() as u64;
        stats.groups = tree.groups.len() as u64;
        stats.managers = tree.managers.len() as u64 - stats.groups;
        stats.sources_missing = shared.missing.load(std::sync::atomic::Ordering::Relaxed);
        stats.bytes = shared.bytes.load(std::sync::atomic::Ordering::Relaxed) + written + pages;
        // meta, groups, paths, each directory; index, file, 3 assets.
        stats.written =
            shared.written.load(std::sync::atomic::Ordering::Relaxed) + 3 + stats.dirs + 5;
        stats.first_page = first_page(&opts.out);
        Ok(stats)
    }

    /// The files only OLD has, added to the tree as deleted; the diff's name and
    /// totals, when there is an OLD.
    fn old_files_only(&mut self, opts: &Options) -> Result<Option<(String, crate::diff::Totals)>> {
        let Some(o) = self.old.take() else {
            return Ok(None);
        };
        o.rest(&opts.result, &mut |d, c| {
            self.dtotals.add(&d);
            let id = self.n_files;
            self.n_files += 1;
            let mut s = Summary::deleted(id, &d);
            if let (Some(c), Some(t)) = (c, &mut self.ctotals) {
                t.add(&c);
                s.cats = Some(c.categories);
            }
            self.tree.add(&s, &self.managers)
        })?;
        Ok(Some((
            opts.diff.clone().unwrap_or_default(),
            self.dtotals.clone(),
        )))
    }
}

impl FileJob {
    /// The bytes the file holds in flight: its records, its diff's and categories'
    /// lines, its unique lines.
    fn bytes(&self) -> u64 {
        self.file.bytes()
            + self.diff.as_ref().map_or(0, |d| {
                4 * (d.gained.len()
                    + d.lost.len()
                    + d.instrumented_added.len()
                    + d.instrumented_removed.len()) as u64
            })
            + 8 * self.unique.len() as u64
            + self
                .cats
                .as_ref()
                .map_or(0, |c| 4 * c.0.iter().map(|v| v.len() as u64).sum::<u64>())
    }
}

/// The first page and everything it loads up front, with their sizes.
fn first_page(out: &std::path::Path) -> Vec<(String, u64)> {
    [
        "index.html",
        "assets/app.js",
        "assets/style.css",
        "data/meta.js",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([data::script_path("d", 0)])
    .map(|p| {
        let n = std::fs::metadata(out.join(&p)).map_or(0, |m| m.len());
        (p, n)
    })
    .collect()
}
