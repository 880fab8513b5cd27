//! `covmerge merge`: a whole job in this process (embedded mode).

use anyhow::Result;
use covmerge_coordinator::finish::preflight_outputs;
use covmerge_coordinator::{plan_job, JobOptions};
use covmerge_proto::output::totals_line;
use covmerge_worker::run::budget::Shares;
use covmerge_worker::WorkerConfig;

use super::job::{check_base, check_source, dashboard, request};
use super::{interrupted, say};
use crate::cli::MergeArgs;
use crate::embedded::run_embedded;

pub(crate) async fn run(m: MergeArgs) -> Result<()> {
    check_source(&m.job.source)?;
    let spec = plan_job(&request(&m.job, None)?).await?;
    check_base(&spec.source, &spec.base_commit, true).await?;
    preflight_outputs(&spec.inputs, m.out.as_deref(), m.job.manifest.as_deref())?;
    let workers = m.workers.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    let opts = JobOptions {
        out: m.out.clone(),
        manifest: m.job.manifest.clone(),
        result_in_store: false,
        dashboard: dashboard(&m.job)?,
        cleanup: false,
        reconcile_every: None,
        republish_after: None,
        lease: None,
    };
    // Split tasks run `workers` at a time: they share one budget, and the cores.
    let cfg = WorkerConfig {
        memory_budget: Shares::budget_or_default(
            m.memory_budget,
            covmerge_proto::memory::DEFAULT_MERGE_BUDGET,
            workers,
        ),
        ..WorkerConfig::default()
    }
    .shared_by(workers, spec.split_ranges().len())
    .map_err(anyhow::Error::msg)?;
    // The result or the manifest on standard output: the summary goes to stderr.
    let on_stdout = |o: &str| covmerge_storage::local::same_location(o, "-");
    let to_stderr = m.out.as_deref().is_some_and(on_stdout)
        || m.job
            .manifest
            .as_deref()
            .is_some_and(|p| on_stdout(&p.to_string_lossy()));
    let job = run_embedded(spec, &opts, workers, cfg, !m.job.quiet);
    let outcome = tokio::select! {
        r = job => r?,
        (name, code) = interrupted() => {
            // Spills, parts and a result not yet renamed into place: nothing of this
            // run is left behind, and nothing half-written is published.
            covmerge_storage::local::remove_registered();
            crate::log::err_line(&format!("covmerge: interrupted by {name}: temporary files removed, no result published"));
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
