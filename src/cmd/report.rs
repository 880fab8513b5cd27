//! `covmerge report` and `covmerge diff`: the work is the `covmerge-report` crate's
//! (`site`, `diff::compare`); here it runs on a blocking thread and its summary is
//! printed.

use anyhow::{Context, Result};
use covmerge_report::diff::compare::{self, DiffOptions};

use crate::cli::{DiffArgs, ReportArgs};

pub(crate) async fn report(a: ReportArgs) -> Result<()> {
    let opts = covmerge_report::Options::from(a);
    covmerge_report::site::check_out(&opts)?;
    let rt = tokio::runtime::Handle::current();
    let o = opts.clone();
    let stats = tokio::task::spawn_blocking(move || covmerge_report::generate(&o, &rt))
        .await
        .context("report thread")??;
    for line in stats.summary(&opts.out) {
        crate::outln!("{line}");
    }
    Ok(())
}

/// Exits with status 3 when a file reaches a `--fail-on` threshold.
pub(crate) async fn diff(a: DiffArgs) -> Result<()> {
    let opts = DiffOptions::from(a);
    compare::check_out(&opts)?;
    // The JSON lines must not go over the texts the source reads.
    if let (Some(src), Some(out)) = (&opts.source, &opts.out) {
        let out = out.to_string_lossy();
        covmerge_coordinator::check_outputs_apart(&[src.as_str()], &[("--out", &out)], &[])?;
    }
    let rt = tokio::runtime::Handle::current();
    let compared = tokio::task::spawn_blocking(move || compare::compare(&opts, &rt))
        .await
        .context("diff thread")??;
    for line in compared.summary() {
        crate::outln!("{line}");
    }
    if !compared.reached.is_empty() {
        for r in &compared.reached {
            crate::log::err_line(&format!("covmerge: --fail-on reached: {r}"));
        }
        crate::log::err_line(&format!(
            "covmerge: {} file threshold(s) reached: exit status 3",
            compared.reached.len()
        ));
        crate::log::finish(crate::log::FINISH_WAIT);
        std::process::exit(3);
    }
    Ok(())
}
