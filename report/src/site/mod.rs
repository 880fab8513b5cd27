//! Writes the static site of `covmerge report`.
//!
//! Layout of DIR (every link relative, so it opens from disk and from a bucket):
//! - `index.html`: totals and the tree, its top level rendered in the page;
//! - `file.html#ID`: one page for every file, filled from the file's data script;
//! - `assets/`: the script and style sheet (embedded in the binary, no CDN);
//! - `data/meta.js`: header, managers, totals; `data/d/B/ID.js`: one directory's
//!   children; `data/f/B/ID.js`: one file's lines, hits and source text (B = ID/1000);
//!   `data/paths.js`: every path, loaded only when the path filter is used.
//!
//! Data files are scripts calling `covmerge.meta/dir/file/paths(...)` with JSON, not
//! JSON files: browsers refuse `fetch()` on `file://` but load `<script src>`. The
//! first page loads index.html, the assets, meta.js and the root's directory script;
//! everything else is loaded when a directory is expanded or a file opened.
//!
//! Files stream from the result into a pool of threads that read the source and write
//! each file's script; only a [`Summary`] per file stays in memory.

mod data;
mod older;
mod pages;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use covmerge_source::Source;

use crate::diff::categories::CatLines;
use crate::diff::{FileDiff, OldSide};
use crate::read::{self, FileCov, Files};
use crate::tree::{Managers, Summary, Tree};

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
}

/// What was generated.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub files: u64,
    pub dirs: u64,
    pub managers: u64,
    /// Files whose source text was not found (or could not be read).
    pub sources_missing: u64,
    /// Files whose path is not canonical: kept with their numbers, their text never
    /// asked of the source (each named in a warning).
    pub bad_paths: u64,
    /// Bytes written in all.
    pub bytes: u64,
    /// The first page and everything it loads up front, with their sizes.
    pub first_page: Vec<(String, u64)>,
    pub elapsed: Duration,
}

impl Stats {
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
        Some(s) => Some(covmerge_source::open_source(s)?),
        None => None,
    };
    // covmerge writes each file's records together; a result written otherwise is read
    // again, grouped in memory.
    let mut stats = match run(opts, rt, false, source.clone()) {
        Err(e) if read::is_not_contiguous(&e) => run(opts, rt, true, source)?,
        r => r?,
    };
    stats.elapsed = t0.elapsed();
    Ok(stats)
}

/// Reads the older result of a diff, grouping it if it is not contiguous.
pub fn read_old(spec: &str, rt: &tokio::runtime::Handle) -> Result<OldSide> {
    match OldSide::read(Files::open(spec, rt, false)?) {
        Err(e) if read::is_not_contiguous(&e) => OldSide::read(Files::open(spec, rt, true)?),
        r => r,
    }
}

/// One file page to write.
struct Job {
    id: u32,
    file: FileCov,
    diff: Option<FileDiff>,
    /// On another base: the lines per category.
    cats: Option<CatLines>,
}

/// What the page writers share.
struct Shared {
    out: PathBuf,
    commit: String,
    source: Option<Arc<dyn Source>>,
    diff: bool,
    bytes: std::sync::atomic::AtomicU64,
    missing: std::sync::atomic::AtomicU64,
    error: Mutex<Option<anyhow::Error>>,
}

fn run(
    opts: &Options,
    rt: &tokio::runtime::Handle,
    grouped: bool,
    source: Option<Arc<dyn Source>>,
) -> Result<Stats> {
    let mut files = Files::open(&opts.result, rt, grouped)?;
    let header = files.header().clone();
    let mut old = match &opts.diff {
        Some(d) => Some(older::Older::open(
            d,
            rt,
            &header,
            source.as_ref(),
            opts.source.as_deref(),
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
        bytes: Default::default(),
        missing: Default::default(),
        error: Mutex::new(None),
    });
    let threads = opts.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    let (tx, rx) = sync_channel::<Job>(256);
    let rx = Arc::new(Mutex::new(rx));
    let mut summaries = Vec::new();
    let mut managers = Managers::default();
    let mut dtotals = crate::diff::Totals::default();
    let mut bad_paths = 0;
    let read_result = std::thread::scope(|s| -> Result<()> {
        for _ in 0..threads.max(1) {
            let (rx, shared) = (rx.clone(), shared.clone());
            s.spawn(move || page_writer(&rx, &shared));
        }
        let r = (|| -> Result<()> {
            while let Some(f) = files.next_file()? {
                let id = summaries.len() as u32;
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
                let mut summary = Summary::of(id, &f, &mut managers, diff.as_ref())?;
                if let (Some(c), Some(t)) = (&cats, &mut ctotals) {
                    t.add(c);
                    summary.cats = Some(c.categories);
                }
                summaries.push(summary);
                let cats = cats.map(|c| c.lines);
                if shared.error.lock().unwrap().is_some()
                    || tx
                        .send(Job {
                            id,
                            file: f,
                            diff,
                            cats,
                        })
                        .is_err()
                {
                    break; // a writer failed: its error is reported below
                }
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
        files: summaries.len() as u64,
        bad_paths,
        ..Stats::default()
    };
    let mut diff = None;
    if let Some(o) = old {
        o.rest(&mut |d, c| {
            dtotals.add(&d);
            let id = summaries.len() as u32;
            let mut s = Summary::deleted(id, &d);
            if let (Some(c), Some(t)) = (c, &mut ctotals) {
                t.add(&c);
                s.cats = Some(c.categories);
            }
            summaries.push(s);
        })?;
        diff = Some((opts.diff.clone().unwrap_or_default(), dtotals));
    }
    let cats = ctotals.map(|t| (old_base.unwrap_or_default(), t));
    let (names, remap) = managers.finish();
    let tree = Tree::build(summaries, names, &remap);
    let written = data::write_tree(&opts.out, &header, &tree, diff.as_ref(), cats.as_ref())?;
    let pages = pages::write_pages(&opts.out, &header, &tree, diff.as_ref(), cats.as_ref())?;
    stats.dirs = tree.dirs.len() as u64;
    stats.managers = tree.managers.len() as u64;
    stats.sources_missing = shared.missing.load(std::sync::atomic::Ordering::Relaxed);
    stats.bytes = shared.bytes.load(std::sync::atomic::Ordering::Relaxed) + written + pages;
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
        if shared.error.lock().unwrap().is_some() {
            continue; // drain: the reader stops at the next send
        }
        if let Err(e) = write_file_page(shared, &job) {
            shared.error.lock().unwrap().get_or_insert(e);
        }
    }
}

fn write_file_page(shared: &Shared, job: &Job) -> Result<()> {
    use std::sync::atomic::Ordering::Relaxed;
    let text = match (&shared.source, &job.file.path_problem) {
        (_, Some(_)) => Err(
            "not a canonical path relative to the source root: not read from the source"
                .to_string(),
        ),
        (None, None) => Err("no --source given".to_string()),
        (Some(src), None) => match src.get(shared.commit.as_bytes(), job.file.path.as_bytes()) {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err(format!("not found at {} in the source", shared.commit)),
            Err(e) => Err(e.to_string()),
        },
    };
    if text.is_err() {
        shared.missing.fetch_add(1, Relaxed);
    }
    let bytes = data::file_script(
        job.id,
        &job.file,
        text,
        job.diff.as_ref(),
        shared.diff,
        job.cats.as_ref(),
    )?;
    let n = bytes.len() as u64;
    write(&shared.out, &data::script_path("f", job.id), &bytes)?;
    shared.bytes.fetch_add(n, Relaxed);
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
