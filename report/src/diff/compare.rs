//! `covmerge diff`: two results compared, on one base ([`super::write_jsonl_each`]) or
//! across bases ([`super::across::write_jsonl`]); the JSON lines written to a file or
//! to standard output, and the files reaching a `--fail-on` threshold named.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use covmerge_proto::output::totals_line;

use super::across::{self, Bases, CatTotals};
use super::categories::{same_base_counts, CatCounts, FailOn, ALL};
use super::{FileDiff, Totals};
use crate::budget::Budget;
use crate::read::{is_not_contiguous, Files};
use crate::site::read_old;

/// What to compare.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// The older result (a local path or a store URL).
    pub old: String,
    /// The newer result.
    pub new: String,
    /// Where the JSON lines go (standard output without it).
    pub out: Option<PathBuf>,
    /// The memory budget (`--memory-budget`).
    pub budget: Budget,
    /// Where both bases' texts come from, for results on different base commits.
    pub source: Option<String>,
    /// The `--fail-on` thresholds.
    pub fail_on: Vec<FailOn>,
}

/// What the comparison found: the same-base totals or the categories across bases.
#[derive(Debug, Clone)]
pub enum Found {
    /// Both results on one base commit.
    Same(Totals),
    /// On different base commits, matched through the line diff.
    Across(CatTotals),
}

/// A finished comparison.
#[derive(Debug, Clone)]
pub struct Compared {
    /// What it found.
    pub found: Found,
    /// Each file reaching a `--fail-on` threshold, as `path: CAT N (>= AT)`.
    pub reached: Vec<String>,
    /// Where the JSON lines were written (`None`: standard output).
    pub out: Option<PathBuf>,
}

/// Compares `opts.old` with `opts.new` and writes the JSON lines. Runs on a blocking
/// thread (store results and sources are read through `rt`).
pub fn compare(opts: &DiffOptions, rt: &tokio::runtime::Handle) -> Result<Compared> {
    let b = opts.budget;
    let old_commit = Files::open(&opts.old, rt, false, b)?
        .header()
        .commit
        .clone();
    let new_commit = Files::open(&opts.new, rt, false, b)?
        .header()
        .commit
        .clone();
    let mut reached: Vec<String> = Vec::new();
    let mut spool = Spool::new()?;
    let found = if old_commit == new_commit {
        Found::Same(same_base(opts, rt, &mut spool, &mut reached)?)
    } else {
        let bases = bases(opts, old_commit, new_commit)?;
        Found::Across(across_bases(opts, rt, &bases, &mut spool, &mut reached)?)
    };
    match &opts.out {
        Some(p) => {
            let mut write = || -> std::io::Result<()> {
                let mut f = covmerge_storage::local::OutputFile::create(p)?;
                spool.copy_to(&mut f)?;
                f.commit()
            };
            write().with_context(|| format!("writing {}", p.display()))?
        }
        None => spool.copy_to(&mut std::io::stdout().lock())?,
    }
    Ok(Compared {
        found,
        reached,
        out: opts.out.clone(),
    })
}

/// `diff --out` must not overwrite what it reads (as `merge` refuses an `--out` that
/// is an input): the same path, a symlink or a hard link to OLD or NEW.
pub fn check_out(opts: &DiffOptions) -> Result<()> {
    let Some(out) = &opts.out else { return Ok(()) };
    for (name, input) in [("OLD", &opts.old), ("NEW", &opts.new)] {
        let out_s = out.display().to_string();
        if covmerge_storage::local::same_location(&out_s, input) {
            anyhow::bail!(
                "--out {} is the {name} result {input}: it would be overwritten",
                out.display()
            );
        }
    }
    Ok(())
}

/// Notes each threshold of `fail_on` that `path`'s counts reach.
fn note(fail_on: &[FailOn], reached: &mut Vec<String>, path: &str, c: &CatCounts) {
    for f in fail_on {
        if let Some(n) = f.reached(c) {
            reached.push(format!("{path}: {} {n} (>= {})", f.name(), f.at_least));
        }
    }
}

/// Runs `pass` over NEW as it streams, and again over NEW read grouped if its files'
/// records are apart (the output and the thresholds reached start over).
fn streamed_or_grouped<T>(
    spool: &mut Spool,
    reached: &mut Vec<String>,
    mut pass: impl FnMut(bool, &mut Spool, &mut Vec<String>) -> Result<T>,
) -> Result<T> {
    match pass(false, spool, reached) {
        Err(e) if is_not_contiguous(&e) => {
            *spool = Spool::new()?;
            reached.clear();
            pass(true, spool, reached)
        }
        r => r,
    }
}

/// Both results on one base: line by line.
fn same_base(
    opts: &DiffOptions,
    rt: &tokio::runtime::Handle,
    spool: &mut Spool,
    reached: &mut Vec<String>,
) -> Result<Totals> {
    let b = opts.budget;
    streamed_or_grouped(spool, reached, |grouped, spool, reached| {
        let old = read_old(&opts.old, rt, b)?;
        let mut new = Files::open(&opts.new, rt, grouped, b)?;
        let mut each = |d: &FileDiff| note(&opts.fail_on, reached, &d.file, &same_base_counts(d));
        super::write_jsonl_each(&opts.old, old, &mut new, &mut spool.w, &mut each)
    })
}

/// The two bases of results on different commits, with the source holding both.
fn bases(opts: &DiffOptions, old_commit: String, new_commit: String) -> Result<Bases> {
    let Some(spec) = &opts.source else {
        anyhow::bail!(
            "{} is merged onto base commit {old_commit} but {} onto {new_commit}: give \
             --source SRC (dir:, git: or store:) holding both commits, so that their \
             lines can be matched through the line diff",
            opts.old,
            opts.new
        );
    };
    let source = crate::budget::open_source(opts.budget, spec)?;
    for (side, result, c) in [
        ("OLD", &opts.old, &old_commit),
        ("NEW", &opts.new, &new_commit),
    ] {
        covmerge_source::require_commit(source.as_ref(), spec, c)
            .map_err(|e| anyhow::anyhow!("{side} {result}: {e}"))?;
    }
    Ok(Bases {
        source,
        source_name: spec.clone(),
        old_commit,
        new_commit,
        diff_limit: opts.budget.line_diff(),
        seen: Default::default(),
    })
}

/// Results on different bases: lcov's categories, matched through the line diff.
fn across_bases(
    opts: &DiffOptions,
    rt: &tokio::runtime::Handle,
    bases: &Bases,
    spool: &mut Spool,
    reached: &mut Vec<String>,
) -> Result<CatTotals> {
    let b = opts.budget;
    streamed_or_grouped(spool, reached, |grouped, spool, reached| {
        let old = read_old(&opts.old, rt, b)?;
        let mut new = Files::open(&opts.new, rt, grouped, b)?;
        let mut each = |f: &across::FileCats| note(&opts.fail_on, reached, &f.file, &f.categories);
        across::write_jsonl(bases, old, &mut new, &mut spool.w, &mut each)
    })
}

impl Compared {
    /// The summary printed when the JSON lines went to a file (none otherwise: they
    /// went to standard output).
    pub fn summary(&self) -> Vec<String> {
        match &self.out {
            Some(p) => self.found.summary(p),
            None => Vec::new(),
        }
    }
}

impl Found {
    fn summary(&self, p: &Path) -> Vec<String> {
        match self {
            Found::Same(totals) => vec![
                format!(
                    "{}: {} files changed, {} added, {} deleted, {} unchanged",
                    p.display(),
                    totals.files_changed,
                    totals.files_added,
                    totals.files_deleted,
                    totals.files_unchanged
                ),
                format!(
                    "lines gained {}, lost {}; instrumented +{} -{}",
                    totals.gained,
                    totals.lost,
                    totals.instrumented_added,
                    totals.instrumented_removed
                ),
                format!(
                    "old {}",
                    totals_line(totals.old.instrumented, totals.old.covered)
                ),
                format!(
                    "new {}",
                    totals_line(totals.new.instrumented, totals.new.covered)
                ),
            ],
            Found::Across(t) => {
                let capped = if t.diffs_capped > 0 {
                    format!(
                        ", {} too large to diff (prefix and suffix only; raise --memory-budget)",
                        t.diffs_capped
                    )
                } else {
                    String::new()
                };
                let cats: Vec<String> = ALL
                    .iter()
                    .filter(|&&c| t.categories.get(c) > 0)
                    .map(|&c| format!("{} {}", c.name(), t.categories.get(c)))
                    .collect();
                vec![
                    format!(
                        "{}: {} files changed, {} added, {} deleted, {} unchanged, {} without source text{capped}",
                        p.display(),
                        t.files_changed,
                        t.files_added,
                        t.files_deleted,
                        t.files_unchanged,
                        t.files_without_text,
                    ),
                    format!("lines: {}", cats.join(", ")),
                    format!("old {}", totals_line(t.old.instrumented, t.old.covered)),
                    format!("new {}", totals_line(t.new.instrumented, t.new.covered)),
                ]
            }
        }
    }
}

/// The diff's output, written to an unnamed temporary file first: a result read
/// again grouped starts it over, and it may be far larger than memory should hold.
struct Spool {
    w: std::io::BufWriter<std::fs::File>,
}

impl Spool {
    fn new() -> Result<Spool> {
        let f = tempfile::tempfile().context("creating a temporary file for the diff")?;
        Ok(Spool {
            w: std::io::BufWriter::with_capacity(1 << 20, f),
        })
    }

    fn copy_to(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        use std::io::{Seek, SeekFrom};
        self.w.flush()?;
        let f = self.w.get_mut();
        f.seek(SeekFrom::Start(0))?;
        std::io::copy(f, out)?;
        out.flush()
    }
}
