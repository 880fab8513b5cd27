//! `covmerge report` and `covmerge diff`: argument structs and handlers,
//! kept out of cli.rs. The work is in the `covmerge-report` crate.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use covmerge_proto::output::totals_line;
use covmerge_report::budget::{self, Budget};
use covmerge_report::diff::categories::{same_base_counts, CatCounts, FailOn};
use covmerge_report::read::{is_not_contiguous, Files};

#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// The result (a local path or an object-store URL).
    pub result: String,
    /// Where the source text comes from: dir:ROOT, git:PATH or store:URL (without it,
    /// file pages show hits and functions but no text).
    #[arg(long)]
    pub source: Option<String>,
    /// The directory to write the site to (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// An older result: mark lines gained and lost (on another base commit: lcov's
    /// categories, matched through the line diff; needs --source).
    #[arg(long, value_name = "OLD")]
    pub diff: Option<String>,
    /// Threads writing file pages (default: the cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The result's manifest (a path or a store URL): the groups it lists
    /// (`merge --group`) are shown as group columns and never count as managers for
    /// unique lines. Without it every record is a manager's.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<String>,
    /// Memory the report may hold (e.g. 256MiB, 1GiB); the longest result line read is
    /// a quarter of it.
    #[arg(long, value_name = "BYTES", default_value = "256MiB", value_parser = budget::parse)]
    pub memory_budget: Budget,
}

#[derive(Args, Debug)]
pub(crate) struct DiffArgs {
    /// The older result.
    pub old: String,
    /// The newer result (on another base commit: give --source).
    pub new: String,
    /// Write the JSON lines here instead of to standard output (then a summary is
    /// printed).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Memory the diff may hold (e.g. 256MiB, 1GiB); the longest result line read is
    /// a quarter of it.
    #[arg(long, value_name = "BYTES", default_value = "256MiB", value_parser = budget::parse)]
    pub memory_budget: Budget,
    /// Where both bases' texts come from (dir:ROOT, git:PATH or store:URL): needed
    /// when OLD and NEW are on different base commits, to match their lines.
    #[arg(long)]
    pub source: Option<String>,
    /// Exit 3 when a file has at least N lines in category CAT (CBC, LBC, GBC, UBC,
    /// ECB, EUB, GIC, UIC, GNC, UNC, DCB, DUB, or lost = LBC+ECB), naming the files on
    /// standard error. Repeatable.
    #[arg(long = "fail-on", value_name = "CAT>=N", value_parser = parse_fail_on)]
    pub fail_on: Vec<FailOn>,
}

fn parse_fail_on(s: &str) -> Result<FailOn, String> {
    FailOn::parse(s)
}

/// `report --out DIR` must not overwrite or hold what it reads, nor write through a
/// symlink: the result, the `--diff` result and the manifest (local paths or `file://`
/// URLs) must not lie inside DIR (the site would overwrite its own pages' input, and a
/// second run would rewrite it), nor be a file of DIR under another name (a hard
/// link: `index.html` would truncate it); the source root (`dir:`, `git:`, a `file://`
/// `store:`) must not be DIR, inside it, or hold it; and DIR must hold no symlink (one
/// at `index.html` or at `data/` would make the site write outside DIR). A store URL
/// is another place and is not checked.
fn check_report_out(a: &ReportArgs) -> Result<()> {
    use covmerge_storage::local::local_path;
    use std::os::unix::fs::MetadataExt;
    let out = &a.out;
    let shown = out.display();
    // DIR, absolute with its symlinks followed, as far as it exists (the rest is
    // created under it).
    let out_abs = absolute(out).with_context(|| format!("--out {shown}"))?;
    let mut inputs: Vec<(String, PathBuf)> = Vec::new();
    for (name, spec) in [
        ("the result", Some(&a.result)),
        ("the --diff result", a.diff.as_ref()),
        ("the --manifest", a.manifest.as_ref()),
    ] {
        if let Some(p) = spec.and_then(|s| local_path(s)) {
            inputs.push((format!("{name} {}", spec.unwrap()), p));
        }
    }
    for (name, p) in &inputs {
        let Ok(abs) = absolute(p) else { continue };
        if abs.starts_with(&out_abs) {
            anyhow::bail!(
                "--out {shown} holds {name}: the site is written there and would overwrite or delete what it reads; give another directory"
            );
        }
    }
    if let Some(spec) = &a.source {
        let root = match covmerge_source::SourceSpec::parse(spec) {
            Ok(covmerge_source::SourceSpec::Dir(r) | covmerge_source::SourceSpec::Git(r)) => {
                Some(PathBuf::from(r))
            }
            Ok(covmerge_source::SourceSpec::Store(u)) => {
                local_path(u).filter(|_| u.starts_with("file:"))
            }
            Err(_) => None,
        };
        if let Some(root) = root.and_then(|r| absolute(&r).ok()) {
            if root.starts_with(&out_abs) || out_abs.starts_with(&root) {
                anyhow::bail!(
                    "--out {shown} and the source {spec} overlap ({} and {}): the site would                      be written into the source texts it reads, or over them; give a                      directory outside the source",
                    out_abs.display(),
                    root.display()
                );
            }
        }
    }
    // What DIR already holds: no symlink, no other name of an input.
    let ids: Vec<(u64, u64, &String)> = inputs
        .iter()
        .filter_map(|(n, p)| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino(), n)))
        .collect();
    let mut stack = match std::fs::symlink_metadata(out) {
        Ok(m) if m.is_dir() => vec![out.clone()],
        Ok(m) if m.file_type().is_symlink() => vec![out_abs.clone()],
        Ok(_) => anyhow::bail!("--out {shown}: not a directory"),
        Err(_) => Vec::new(),
    };
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d)
            .with_context(|| format!("--out {shown}: reading {}", d.display()))?;
        for e in entries {
            let e = e.with_context(|| format!("--out {shown}: reading {}", d.display()))?;
            let p = e.path();
            let m = std::fs::symlink_metadata(&p)
                .with_context(|| format!("--out {shown}: reading {}", p.display()))?;
            if m.file_type().is_symlink() {
                anyhow::bail!(
                    "--out {shown} holds a symlink, {}: the site would be written through                      it, outside {shown}; remove it or give another directory",
                    p.display()
                );
            }
            if m.is_dir() {
                stack.push(p);
            } else if let Some((_, _, name)) = ids
                .iter()
                .find(|(dev, ino, _)| *dev == m.dev() && *ino == m.ino())
            {
                anyhow::bail!(
                    "--out {shown} holds {name} under the name {}: writing the site would overwrite it; give another directory",
                    p.display()
                );
            }
        }
    }
    Ok(())
}

/// `path` absolute with its symlinks followed, as far as it exists; the components
/// that do not exist yet are appended as written (`..` among them is refused).
fn absolute(path: &std::path::Path) -> Result<PathBuf> {
    let path = std::path::absolute(path)?;
    let mut missing = Vec::new();
    let mut p = path.as_path();
    loop {
        if let Ok(c) = p.canonicalize() {
            let mut c = c;
            for m in missing.iter().rev() {
                c.push(m);
            }
            return Ok(c);
        }
        if p.ends_with("..") {
            anyhow::bail!(
                "{}: `..` after a directory that does not exist yet",
                path.display()
            );
        }
        let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
            anyhow::bail!("{}: no existing directory above it", path.display());
        };
        missing.push(name.to_os_string());
        p = parent;
    }
}

pub(crate) async fn report(a: ReportArgs) -> Result<()> {
    check_report_out(&a)?;
    let opts = covmerge_report::Options {
        result: a.result,
        source: a.source,
        out: a.out,
        diff: a.diff,
        threads: a.threads,
        manifest: a.manifest,
        budget: a.memory_budget,
    };
    let rt = tokio::runtime::Handle::current();
    let o = opts.clone();
    let stats = tokio::task::spawn_blocking(move || covmerge_report::generate(&o, &rt))
        .await
        .context("report thread")??;
    let groups = match stats.groups {
        0 => String::new(),
        n => format!(", {n} groups"),
    };
    crate::outln!(
        "wrote {} files, {} directories, {} managers{groups} to {} in {:.2} s",
        stats.files,
        stats.dirs,
        stats.managers,
        opts.out.join("index.html").display(),
        stats.elapsed.as_secs_f64()
    );
    crate::outln!("{} files written, {} bytes", stats.written, stats.bytes);
    let parts: Vec<String> = stats
        .first_page
        .iter()
        .map(|(p, n)| format!("{p} {n}"))
        .collect();
    crate::outln!(
        "first page: {} bytes ({})",
        stats.first_page_bytes(),
        parts.join(", ")
    );
    if stats.bad_paths > 0 {
        crate::outln!(
            "{} file(s) with a path that is not canonical: numbers shown, source text not read (see the warnings)",
            stats.bad_paths
        );
    }
    if stats.sources_missing > 0 {
        crate::outln!(
            "{} file(s) without source text (see their pages)",
            stats.sources_missing
        );
    }
    Ok(())
}

/// `diff --out` must not overwrite what it reads (as `merge` refuses an `--out` that
/// is an input): the same path, a symlink or a hard link to OLD or NEW.
fn check_diff_out(a: &DiffArgs) -> Result<()> {
    let Some(out) = &a.out else { return Ok(()) };
    for (name, input) in [("OLD", &a.old), ("NEW", &a.new)] {
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

/// What `diff` found: the same-base totals or the categories across bases.
enum Found {
    Same(covmerge_report::diff::Totals),
    Across(covmerge_report::diff::across::CatTotals),
}

pub(crate) async fn diff(a: DiffArgs) -> Result<()> {
    check_diff_out(&a)?;
    let rt = tokio::runtime::Handle::current();
    let (found, reached, out) = tokio::task::spawn_blocking(move || -> Result<_> {
        let b = a.memory_budget;
        let old_commit = Files::open(&a.old, &rt, false, b)?.header().commit.clone();
        let new_commit = Files::open(&a.new, &rt, false, b)?.header().commit.clone();
        // Files reaching a --fail-on threshold.
        let mut reached: Vec<String> = Vec::new();
        let fail_on = a.fail_on.clone();
        let check = |reached: &mut Vec<String>, path: &str, c: &CatCounts| {
            for f in &fail_on {
                if let Some(n) = f.reached(c) {
                    reached.push(format!("{path}: {} {n} (>= {})", f.name(), f.at_least));
                }
            }
        };
        let mut spool = Spool::new()?;
        let found = if old_commit == new_commit {
            let old = covmerge_report::site::read_old(&a.old, &rt, b)?;
            // A result written with a file's records apart is read again grouped.
            let mut new = Files::open(&a.new, &rt, false, b)?;
            let mut each = |d: &covmerge_report::diff::FileDiff| {
                check(&mut reached, &d.file, &same_base_counts(d))
            };
            let t = match covmerge_report::diff::write_jsonl_each(
                &a.old,
                old,
                &mut new,
                &mut spool.w,
                &mut each,
            ) {
                Err(e) if is_not_contiguous(&e) => {
                    spool = Spool::new()?;
                    reached.clear();
                    let old = covmerge_report::site::read_old(&a.old, &rt, b)?;
                    let mut new = Files::open(&a.new, &rt, true, b)?;
                    let mut each = |d: &covmerge_report::diff::FileDiff| {
                        check(&mut reached, &d.file, &same_base_counts(d))
                    };
                    covmerge_report::diff::write_jsonl_each(
                        &a.old,
                        old,
                        &mut new,
                        &mut spool.w,
                        &mut each,
                    )?
                }
                r => r?,
            };
            Found::Same(t)
        } else {
            use covmerge_report::diff::across::{self, Bases};
            let Some(spec) = &a.source else {
                anyhow::bail!(
                    "{} is merged onto base commit {old_commit} but {} onto {new_commit}: give \
                     --source SRC (dir:, git: or store:) holding both commits, so that their \
                     lines can be matched through the line diff",
                    a.old,
                    a.new
                );
            };
            let source = covmerge_report::budget::open_source(b, spec)?;
            for c in [&old_commit, &new_commit] {
                covmerge_source::require_commit(source.as_ref(), spec, c)?;
            }
            let bases = Bases {
                source,
                source_name: spec.clone(),
                old_commit,
                new_commit,
                diff_limit: b.line_diff(),
                seen: Default::default(),
            };
            let run = |grouped: bool, spool: &mut Spool, reached: &mut Vec<String>| {
                let old = covmerge_report::site::read_old(&a.old, &rt, b)?;
                let mut new = Files::open(&a.new, &rt, grouped, b)?;
                let mut each = |f: &across::FileCats| check(reached, &f.file, &f.categories);
                across::write_jsonl(&bases, old, &mut new, &mut spool.w, &mut each)
            };
            let t = match run(false, &mut spool, &mut reached) {
                Err(e) if is_not_contiguous(&e) => {
                    spool = Spool::new()?;
                    reached.clear();
                    run(true, &mut spool, &mut reached)?
                }
                r => r?,
            };
            Found::Across(t)
        };
        match &a.out {
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
        Ok((found, reached, a.out))
    })
    .await
    .context("diff thread")??;
    if let Some(p) = out {
        match found {
            Found::Same(totals) => {
                crate::outln!(
                    "{}: {} files changed, {} added, {} deleted, {} unchanged",
                    p.display(),
                    totals.files_changed,
                    totals.files_added,
                    totals.files_deleted,
                    totals.files_unchanged
                );
                crate::outln!(
                    "lines gained {}, lost {}; instrumented +{} -{}",
                    totals.gained,
                    totals.lost,
                    totals.instrumented_added,
                    totals.instrumented_removed
                );
                crate::outln!(
                    "old {}",
                    totals_line(totals.old.instrumented, totals.old.covered)
                );
                crate::outln!(
                    "new {}",
                    totals_line(totals.new.instrumented, totals.new.covered)
                );
            }
            Found::Across(t) => {
                crate::outln!(
                    "{}: {} files changed, {} added, {} deleted, {} unchanged, {} without source text{}",
                    p.display(),
                    t.files_changed,
                    t.files_added,
                    t.files_deleted,
                    t.files_unchanged,
                    t.files_without_text,
                    if t.diffs_capped > 0 {
                        format!(
                            ", {} too large to diff (prefix and suffix only; raise --memory-budget)",
                            t.diffs_capped
                        )
                    } else {
                        String::new()
                    }
                );
                let cats: Vec<String> = covmerge_report::diff::categories::ALL
                    .iter()
                    .filter(|&&c| t.categories.get(c) > 0)
                    .map(|&c| format!("{} {}", c.name(), t.categories.get(c)))
                    .collect();
                crate::outln!("lines: {}", cats.join(", "));
                crate::outln!("old {}", totals_line(t.old.instrumented, t.old.covered));
                crate::outln!("new {}", totals_line(t.new.instrumented, t.new.covered));
            }
        }
    }
    if !reached.is_empty() {
        for r in &reached {
            crate::log::err_line(&format!("covmerge: --fail-on reached: {r}"));
        }
        crate::log::err_line(&format!(
            "covmerge: {} file threshold(s) reached: exit status 3",
            reached.len()
        ));
        crate::log::finish(crate::log::FINISH_WAIT);
        std::process::exit(3);
    }
    Ok(())
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
