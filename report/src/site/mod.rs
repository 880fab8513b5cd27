//! Writes the static site of `covmerge report`.
//!
//! Layout of DIR (every link relative, so it opens from disk and from a bucket):
//! - `index.html`: totals and the tree, its top level rendered in the page;
//! - `file.html#ID`: one page for every file, filled from the file's data script;
//! - `assets/`: the script and style sheet (embedded in the binary, no CDN);
//! - `data/meta.js`: header, managers, totals; `data/d/B/ID.js`: one directory's
//!   children (B = ID/1000); `data/f/B/G.js`: the lines, hits and source text of the
//!   files of group G (up to 64 files; `data/groups.js` gives each group's first file
//!   id); `data/t/ID/P.js`: page P of a source text over 10,000 lines;
//!   `data/paths.js`: every path, loaded only when the path filter is used.
//!
//! Data files are scripts calling `covmerge.meta/dir/file/paths(...)` with JSON, not
//! JSON files: browsers refuse `fetch()` on `file://` but load `<script src>`. The
//! first page loads index.html, the assets, meta.js and the root's directory script;
//! everything else is loaded when a directory is expanded or a file opened.
//!
//! Files stream from the result, in groups, into a pool of threads that read the
//! source and write each group's script; the files read but not yet written are held
//! within the budget's share ([`Budget::in_flight`]). Each file's numbers go to the
//! [`TreeBuilder`], which keeps only directory sums in memory.

mod data;
mod older;
mod pages;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use covmerge_source::Source;

use crate::budget::Budget;
use crate::diff::categories::CatLines;
use crate::diff::{FileDiff, OldSide};
use crate::groups::{unique_lines, Groups};
use crate::read::{self, FileCov, Files};
use crate::tree::{Managers, Summary, TreeBuilder};

pub(crate) const APP_JS: &str = include_str!("app.js");
pub(crate) const FILE_JS: &str = include_str!("file.js");
pub(crate) const STYLE_CSS: &str = include_str!("style.css");

/// What to generate.
#[derive(Debug, Clone)]
pub struct Options {
    /// The result: a local path or a store URL.
    pub result: String,
    /// `dir:`, `git:` or `store:`; without it, file pages show hits without text.
    pub source: Option<String>,
    /// The output directory (created if missing).
    pub out: PathBuf,
    /// An older result: mark lines gained and lost (on another base: lcov's categories,
    /// which need `source`).
    pub diff: Option<String>,
    /// Threads that write file pages (default: the cores).
    pub threads: Option<usize>,
    /// The result's manifest: names its groups (`merge --group`), which are then
    /// shown as group columns and never count as managers for unique lines.
    pub manifest: Option<String>,
    /// The memory budget (`--memory-budget`).
    pub budget: Budget,
}

/// What was generated.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// File pages written.
    pub files: u64,
    /// Directories of the tree.
    pub dirs: u64,
    /// Managers with a column.
    pub managers: u64,
    /// Group columns (`merge --group`, named by the manifest).
    pub groups: u64,
    /// Files whose source text was not found (or could not be read).
    pub sources_missing: u64,
    /// Files whose path is not canonical: kept with their numbers, their text never
    /// asked of the source (each named in a warning).
    pub bad_paths: u64,
    /// Bytes written in all.
    pub bytes: u64,
    /// Files written in all (pages, scripts, assets).
    pub written: u64,
    /// The first page and everything it loads up front, with their sizes.
    pub first_page: Vec<(String, u64)>,
    /// Wall time of the generation.
    pub elapsed: Duration,
}

impl Stats {
    /// Bytes of the first page and everything it loads before a click.
    pub fn first_page_bytes(&self) -> u64 {
        self.first_page.iter().map(|(_, n)| n).sum()
    }
}

/// Generates the site. Runs on a blocking thread (store sources and results are read
/// through `rt`).
pub fn generate(opts: &Options, rt: &tokio::runtime::Handle) -> Result<Stats> {
    let t0 = Instant::now();
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating the report directory {}", opts.out.display()))?;
    let source = match &opts.source {
        Some(s) => Some(crate::budget::open_source(opts.budget, s)?),
        None => None,
    };
    // covmerge writes each file's records together; a result written otherwise is read
    // again, grouped in memory.
    let mut stats = match run(opts, rt, false, source.clone()) {
        Err(e) if read::is_not_contiguous(&e) => {
            // Pages of the streamed attempt are rewritten; its stray text pages go.
            let _ = std::fs::remove_dir_all(opts.out.join("data/t"));
            run(opts, rt, true, source)?
        }
        r => r?,
    };
    stats.elapsed = t0.elapsed();
    Ok(stats)
}

/// Reads the older result of a diff, grouping it if it is not contiguous.
pub fn read_old(spec: &str, rt: &tokio::runtime::Handle, budget: Budget) -> Result<OldSide> {
    match OldSide::read(Files::open(spec, rt, false, budget)?, budget) {
        Err(e) if read::is_not_contiguous(&e) => {
            OldSide::read(Files::open(spec, rt, true, budget)?, budget)
        }
        r => r,
    }
}

/// One group of files to write, and the bytes they hold.
struct Job {
    group: u32,
    files: Vec<FileJob>,
    bytes: u64,
}

/// One file to write.
struct FileJob {
    id: u32,
    file: FileCov,
    diff: Option<FileDiff>,
    /// Lines covered by one manager only, with its index in the file's managers.
    unique: Vec<(u32, u32)>,
    /// On another base: the lines per category.
    cats: Option<CatLines>,
}

/// The bytes of files read but not yet written, held within a share of the budget:
/// the reader waits while a group would pass it (unless nothing is in flight).
struct Flight {
    held: Mutex<u64>,
    freed: Condvar,
    cap: u64,
}

impl Flight {
    fn acquire(&self, n: u64) {
        let mut h = self.held.lock().unwrap();
        while *h > 0 && *h + n > self.cap {
            h = self.freed.wait(h).unwrap();
        }
        *h += n;
    }

    fn release(&self, n: u64) {
        *self.held.lock().unwrap() -= n;
        self.freed.notify_all();
    }
}

/// What the page writers share.
struct Shared {
    out: PathBuf,
    commit: String,
    source: Option<Arc<dyn Source>>,
    diff: bool,
    groups: Groups,
    budget: Budget,
    flight: Flight,
    bytes: std::sync::atomic::AtomicU64,
    written: std::sync::atomic::AtomicU64,
    missing: std::sync::atomic::AtomicU64,
    error: Mutex<Option<anyhow::Error>>,
}

fn run(
    opts: &Options,
    rt: &tokio::runtime::Handle,
    grouped: bool,
    source: Option<Arc<dyn Source>>,
) -> Result<Stats> {
    let mut files = Files::open(&opts.result, rt, grouped, opts.budget)?;
    let header = files.header().clone();
    let groups = match &opts.manifest {
        Some(m) => Groups::from_manifest(m, &opts.result, &header, rt)?,
        None => Groups::default(),
    };
    let mut old = match &opts.diff {
        Some(d) => Some(older::Older::open(
            d,
            rt,
            &header,
            source.as_ref(),
            opts.source.as_deref(),
            opts.budget,
        )?),
        None => None,
    };
    let mut ctotals = old.as_ref().and_then(older::totals_of);
    let old_base = old.as_ref().map(|o| o.header().commit.clone());
    let shared = Arc::new(Shared {
        out: opts.out.clone(),
        commit: header.commit.clone(),
        source,
        diff: old.is_some(),
        groups: groups.clone(),
        budget: opts.budget,
        flight: Flight {
            held: Mutex::new(0),
            freed: Condvar::new(),
            cap: opts.budget.in_flight(),
        },
        bytes: Default::default(),
        written: Default::default(),
        missing: Default::default(),
        error: Mutex::new(None),
    });
    let threads = opts.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    let (tx, rx) = sync_channel::<Job>(threads.max(1));
    let rx = Arc::new(Mutex::new(rx));
    let mut n_files = 0u32;
    // The first file id of each group script.
    let mut firsts: Vec<u32> = Vec::new();
    let mut managers = Managers::default();
    let mut tree = TreeBuilder::new(&opts.out, opts.budget)?;
    let mut dtotals = crate::diff::Totals::default();
    let mut bad_paths = 0;
    let read_result = std::thread::scope(|s| -> Result<()> {
        for _ in 0..threads.max(1) {
            let (rx, shared) = (rx.clone(), shared.clone());
            s.spawn(move || page_writer(&rx, &shared));
        }
        let r = (|| -> Result<()> {
            let mut job = Job {
                group: 0,
                files: Vec::new(),
                bytes: 0,
            };
            let send = |job: &mut Job| -> bool {
                let full = std::mem::replace(
                    job,
                    Job {
                        group: job.group + 1,
                        files: Vec::new(),
                        bytes: 0,
                    },
                );
                shared.flight.acquire(full.bytes);
                let n = full.bytes;
                if shared.error.lock().unwrap().is_some() || tx.send(full).is_err() {
                    shared.flight.release(n);
                    return false; // a writer failed: its error is reported below
                }
                true
            };
            while let Some(f) = files.next_file()? {
                let id = n_files;
                n_files += 1;
                bad_paths += u64::from(f.path_problem.is_some());
                let (diff, cats) = match old.as_mut() {
                    Some(o) => {
                        let (d, c) = o.take(&f)?;
                        (Some(d), c)
                    }
                    None => (None, None),
                };
                if let Some(d) = &diff {
                    dtotals.add(d);
                }
                let unique = unique_lines(&f, &groups);
                let mut summary = Summary::of(id, &f, &mut managers, diff.as_ref(), &unique);
                if let (Some(c), Some(t)) = (&cats, &mut ctotals) {
                    t.add(c);
                    summary.cats = Some(c.categories);
                }
                tree.add(&summary, &managers)?;
                let cats = cats.map(|c| c.lines);
                if job.files.is_empty() {
                    firsts.push(id);
                }
                job.bytes += f.bytes()
                    + diff.as_ref().map_or(0, |d| {
                        4 * (d.gained.len()
                            + d.lost.len()
                            + d.instrumented_added.len()
                            + d.instrumented_removed.len()) as u64
                    })
                    + 8 * unique.len() as u64
                    + cats
                        .as_ref()
                        .map_or(0, |c| 4 * c.0.iter().map(|v| v.len() as u64).sum::<u64>());
                job.files.push(FileJob {
                    id,
                    file: f,
                    diff,
                    unique,
                    cats,
                });
                if (job.files.len() >= data::GROUP_FILES || job.bytes >= data::GROUP_BYTES)
                    && !send(&mut job)
                {
                    return Ok(());
                }
            }
            if !job.files.is_empty() {
                send(&mut job);
            }
            Ok(())
        })();
        drop(tx);
        r
    });
    read_result?;
    if let Some(e) = shared.error.lock().unwrap().take() {
        return Err(e);
    }
    let mut stats = Stats {
        files: n_files as u64,
        bad_paths,
        ..Stats::default()
    };
    let mut diff = None;
    if let Some(o) = old {
        o.rest(&opts.result, &mut |d, c| {
            dtotals.add(&d);
            let id = n_files;
            n_files += 1;
            let mut s = Summary::deleted(id, &d);
            if let (Some(c), Some(t)) = (c, &mut ctotals) {
                t.add(&c);
                s.cats = Some(c.categories);
            }
            tree.add(&s, &managers)
        })?;
        diff = Some((opts.diff.clone().unwrap_or_default(), dtotals));
    }
    let cats = ctotals.map(|t| (old_base.unwrap_or_default(), t));
    let (names, remap) = managers.finish(&groups);
    let tree = tree.build(names, &remap, &groups)?;
    let written = data::write_tree(
        &opts.out,
        &header,
        &tree,
        diff.as_ref(),
        cats.as_ref(),
        &firsts,
    )?;
    let pages = pages::write_pages(&opts.out, &header, &tree, diff.as_ref(), cats.as_ref())?;
    stats.dirs = tree.dirs.len() as u64;
    stats.groups = tree.groups.len() as u64;
    stats.managers = tree.managers.len() as u64 - stats.groups;
    stats.sources_missing = shared.missing.load(std::sync::atomic::Ordering::Relaxed);
    stats.bytes = shared.bytes.load(std::sync::atomic::Ordering::Relaxed) + written + pages;
    // meta, groups, paths, each directory; index, file, 3 assets.
    stats.written = shared.written.load(std::sync::atomic::Ordering::Relaxed) + 3 + stats.dirs + 5;
    stats.first_page = [
        "index.html",
        "assets/app.js",
        "assets/style.css",
        "data/meta.js",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([data::script_path("d", 0)])
    .map(|p| {
        let n = std::fs::metadata(opts.out.join(&p)).map_or(0, |m| m.len());
        (p, n)
    })
    .collect();
    Ok(stats)
}

fn page_writer(rx: &Mutex<Receiver<Job>>, shared: &Shared) {
    loop {
        let job = match rx.lock().unwrap().recv() {
            Ok(j) => j,
            Err(_) => return,
        };
        if shared.error.lock().unwrap().is_none() {
            if let Err(e) = write_group(shared, &job) {
                shared.error.lock().unwrap().get_or_insert(e);
            }
        }
        // Drained after an error too: the reader stops at the next send.
        let n = job.bytes;
        drop(job);
        shared.flight.release(n);
    }
}

/// The source text of a file, or why the page shows none.
fn text_of(shared: &Shared, f: &FileCov) -> Result<Arc<covmerge_source::FileVersion>, String> {
    let src = match (&shared.source, &f.path_problem) {
        (_, Some(_)) => {
            return Err(
                "not a canonical path relative to the source root: not read from the source"
                    .to_string(),
            )
        }
        (None, None) => return Err("no --source given".to_string()),
        (Some(src), None) => src,
    };
    match src.get(shared.commit.as_bytes(), f.path.as_bytes()) {
        Ok(Some(v)) if v.data.len() as u64 > shared.budget.text() => Err(format!(
            "the text is {} MiB, over the largest shown (a quarter of --memory-budget {})",
            v.data.len() >> 20,
            shared.budget
        )),
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(format!("not found at {} in the source", shared.commit)),
        Err(e) => Err(e.to_string()),
    }
}

/// Writes a group's script, file by file, and the text pages of its tall files.
fn write_group(shared: &Shared, job: &Job) -> Result<()> {
    use std::sync::atomic::Ordering::Relaxed;
    let rel = data::script_path("f", job.group);
    let p = shared.out.join(&rel);
    std::fs::create_dir_all(p.parent().unwrap())
        .with_context(|| format!("creating {}", p.parent().unwrap().display()))?;
    let f = std::fs::File::create(&p).with_context(|| format!("writing {}", p.display()))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
    let mut pages = 0;
    for fj in &job.files {
        let text = text_of(shared, &fj.file);
        if text.is_err() {
            shared.missing.fetch_add(1, Relaxed);
        }
        let (paged, n) =
            data::file_script(&mut w, &shared.out, fj, text, shared.diff, &shared.groups)
                .with_context(|| format!("writing {}", p.display()))?;
        shared.bytes.fetch_add(paged, Relaxed);
        pages += n;
    }
    let f = w
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("writing {}", p.display()))?;
    shared
        .bytes
        .fetch_add(f.metadata().map_or(0, |m| m.len()), Relaxed);
    shared.written.fetch_add(1 + pages, Relaxed);
    Ok(())
}

/// Writes `rel` under `out`, creating its directory.
pub(crate) fn write(out: &Path, rel: &str, bytes: &[u8]) -> Result<()> {
    let p = out.join(rel);
    if let Err(e) = std::fs::write(&p, bytes) {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(e).with_context(|| format!("writing {}", p.display()));
        }
        std::fs::create_dir_all(p.parent().unwrap())
            .with_context(|| format!("creating {}", p.parent().unwrap().display()))?;
        std::fs::write(&p, bytes).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
