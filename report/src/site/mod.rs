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

mod check;
mod data;
mod gather;
mod older;
mod pages;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use covmerge_source::Source;

pub use check::check_out;
use gather::Gather;

use crate::budget::Budget;
use crate::diff::categories::CatLines;
use crate::diff::{FileDiff, OldSide};
use crate::groups::Groups;
use crate::read::{self, FileCov, Files};

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

    /// What `covmerge report` prints of a site written to `out`.
    pub fn summary(&self, out: &Path) -> Vec<String> {
        let groups = match self.groups {
            0 => String::new(),
            n => format!(", {n} groups"),
        };
        let parts: Vec<String> = self
            .first_page
            .iter()
            .map(|(p, n)| format!("{p} {n}"))
            .collect();
        let mut lines = vec![
            format!(
                "wrote {} files, {} directories, {} managers{groups} to {} in {:.2} s",
                self.files,
                self.dirs,
                self.managers,
                out.join("index.html").display(),
                self.elapsed.as_secs_f64()
            ),
            format!("{} files written, {} bytes", self.written, self.bytes),
            format!(
                "first page: {} bytes ({})",
                self.first_page_bytes(),
                parts.join(", ")
            ),
        ];
        if self.bad_paths > 0 {
            lines.push(format!(
                "{} file(s) with a path that is not canonical: numbers shown, source text not read (see the warnings)",
                self.bad_paths
            ));
        }
        if self.sources_missing > 0 {
            lines.push(format!(
                "{} file(s) without source text (see their pages)",
                self.sources_missing
            ));
        }
        lines
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

impl Job {
    fn new(group: u32) -> Job {
        Job {
            group,
            files: Vec::new(),
            bytes: 0,
        }
    }
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
    let old = match &opts.diff {
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
    let shared = Arc::new(Shared::new(opts, &header, source, old.is_some(), &groups));
    let mut gather = Gather::new(opts, old, groups)?;
    gather.stream(&mut files, &shared, threads(opts))?;
    if let Some(e) = shared.error.lock().unwrap().take() {
        return Err(e);
    }
    gather.finish(opts, &header, &shared)
}

/// Page writers: `--threads`, or one per core.
fn threads(opts: &Options) -> usize {
    let n = opts.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    n.max(1)
}

impl Shared {
    fn new(
        opts: &Options,
        header: &read::Header,
        source: Option<Arc<dyn Source>>,
        diff: bool,
        groups: &Groups,
    ) -> Shared {
        Shared {
            out: opts.out.clone(),
            commit: header.commit.clone(),
            source,
            diff,
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
        }
    }

    /// Hands a full group to the page writers (waiting while the files in flight
    /// would pass their share) and starts the next; false when a writer failed (its
    /// error is reported by the caller).
    fn send(&self, job: &mut Job, tx: &SyncSender<Job>) -> bool {
        let full = std::mem::replace(job, Job::new(job.group + 1));
        self.flight.acquire(full.bytes);
        let n = full.bytes;
        if self.error.lock().unwrap().is_some() || tx.send(full).is_err() {
            self.flight.release(n);
            return false;
        }
        true
    }
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
