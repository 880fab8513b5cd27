//! `covmerge report` and `covmerge diff`: argument structs and handlers,
//! kept out of cli.rs. The work is in the `covmerge-report` crate.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use covmerge_proto::output::totals_line;
use covmerge_report::budget::{self, Budget};
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
    /// An older result on the same base commit: mark lines gained and lost.
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
    /// The newer result, on the same base commit.
    pub new: String,
    /// Write the JSON lines here instead of to standard output (then a summary is
    /// printed).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Memory the diff may hold (e.g. 256MiB, 1GiB); the longest result line read is
    /// a quarter of it.
    #[arg(long, value_name = "BYTES", default_value = "256MiB", value_parser = budget::parse)]
    pub memory_budget: Budget,
}

pub(crate) async fn report(a: ReportArgs) -> Result<()> {
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

pub(crate) async fn diff(a: DiffArgs) -> Result<()> {
    check_diff_out(&a)?;
    let rt = tokio::runtime::Handle::current();
    let (totals, out) = tokio::task::spawn_blocking(move || -> Result<_> {
        let b = a.memory_budget;
        let old = covmerge_report::site::read_old(&a.old, &rt, b)?;
        // Into an unnamed temporary file, not memory: a result written with a file's
        // records apart is read again grouped, and the output can be large.
        let spill = tempfile::tempfile().context("creating a temporary file for the diff")?;
        let mut buf = std::io::BufWriter::new(spill);
        let mut new = Files::open(&a.new, &rt, false, b)?;
        let t = match covmerge_report::diff::write_jsonl(&a.old, old, &mut new, &mut buf) {
            Err(e) if is_not_contiguous(&e) => {
                buf.flush()?;
                buf.get_mut().set_len(0)?;
                std::io::Seek::rewind(buf.get_mut())?;
                let old = covmerge_report::site::read_old(&a.old, &rt, b)?;
                let mut new = Files::open(&a.new, &rt, true, b)?;
                covmerge_report::diff::write_jsonl(&a.old, old, &mut new, &mut buf)?
            }
            r => r?,
        };
        let mut spill = buf.into_inner().map_err(|e| e.into_error())?;
        std::io::Seek::rewind(&mut spill)?;
        match &a.out {
            Some(p) => {
                let mut write = || -> std::io::Result<()> {
                    let mut f = covmerge_storage::local::OutputFile::create(p)?;
                    std::io::copy(&mut spill, &mut f)?;
                    f.commit()
                };
                write().with_context(|| format!("writing {}", p.display()))?
            }
            None => {
                std::io::copy(&mut spill, &mut std::io::stdout().lock())?;
            }
        }
        Ok((t, a.out))
    })
    .await
    .context("diff thread")??;
    if let Some(p) = out {
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
    Ok(())
}
