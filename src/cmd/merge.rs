//! `covmerge merge`: a whole job in this process (embedded mode).

use anyhow::Result;
use covmerge_coordinator::finish::preflight_outputs;
use covmerge_coordinator::plan_job;
use covmerge_proto::output::totals_line;

use super::{interrupted, say};
use crate::cli::MergeArgs;
use crate::embedded::Embedded;
use crate::job::{check_base, check_outputs, check_source};

pub(crate) async fn run(m: MergeArgs) -> Result<()> {
    if let Some(s) = &m.job.source {
        check_source(s)?;
    }
    let spec = plan_job(&m.job.request(None, false)?).await?;
    check_base(&spec.source, &spec.base_commit, true).await?;
    preflight_outputs(&spec.inputs, m.out.as_deref(), m.job.manifest.as_deref())?;
    // As given, `{namespace}` filled (the spec's is made absolute: `-` is a stream).
    let partial_out = match &m.job.partial_out {
        Some(p) => Some(crate::job::partial_out_of(
            p,
            m.job.namespace.as_deref(),
            false,
        )?),
        None => None,
    };
    check_outputs(
        m.job.source.as_deref(),
        m.out.as_deref(),
        m.job.manifest.as_deref(),
        partial_out.as_deref(),
        None,
        &m.job.input,
    )?;
    // The directories `--partial-out` makes: a job that fails leaves none of them
    // (empty), as a refused one does.
    let mut made = Vec::new();
    if let Some(p) = &spec.partial_out {
        let inputs: Vec<String> = m.job.input.iter().chain(&spec.inputs).cloned().collect();
        made = covmerge_coordinator::missing_dirs(p);
        covmerge_coordinator::preflight_partial_out(p, &inputs).await?;
    }
    let remove_made = || {
        for d in &made {
            let _ = std::fs::remove_dir(d);
        }
    };
    let embedded = Embedded::new(&m, &spec).inspect_err(|_| remove_made())?;
    let to_stderr = embedded.summary_to_stderr;
    let outcome = tokio::select! {
        r = embedded.run(spec) => r.inspect_err(|_| remove_made())?,
        (name, code) = interrupted() => {
            // Spills, parts and a result not yet renamed into place: nothing of this
            // run is left behind, and nothing half-written is published.
            covmerge_storage::local::remove_registered();
            remove_made();
            let what = covmerge_coordinator::finish::published()
                .unwrap_or_else(|| "no result published".into());
            crate::log::err_line(&format!("covmerge: interrupted by {name}: temporary files removed, {what}"));
            crate::log::finish(crate::log::FINISH_WAIT);
            std::process::exit(code);
        }
    };
    say(
        to_stderr,
        &totals_line(
            outcome.manifest.totals.instrumented,
            outcome.manifest.totals.covered,
        ),
    );
    if let Some(n) = outcome.dashboard_rows {
        say(to_stderr, &format!("created {n} DB rows"));
    }
    Ok(())
}
