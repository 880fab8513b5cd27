//! `covmerge coordinator`: one job on the fleet.

use std::sync::Arc;

use anyhow::Result;
use covmerge_coordinator::finish::{preflight_outputs, preflight_store};
use covmerge_coordinator::progress::ProgressView;
use covmerge_coordinator::{run_job, JobError};
use covmerge_queue::Queue;
use covmerge_storage::redact_url;
use tracing::info;

use covmerge_proto::output::totals_line;

use super::{say, summary_to_stderr};
use crate::cli::CoordinatorArgs;
use crate::job::{check_outputs, check_source};

pub(crate) async fn run(c: CoordinatorArgs) -> Result<()> {
    if let Some(s) = &c.job.source {
        check_source(s)?;
    }
    preflight_store(&c.fleet.store, &c.job.input)?;
    // `{namespace}` filled: the template itself names no location (opening it made a
    // directory named `{namespace}`).
    let partial_out = match &c.job.partial_out {
        Some(p) => Some(crate::job::partial_out_of(
            p,
            c.job.namespace.as_deref(),
            c.rollup,
        )?),
        None => None,
    };
    check_outputs(
        c.job.source.as_deref(),
        c.out.as_deref(),
        c.job.manifest.as_deref(),
        partial_out.as_deref(),
        Some(&c.fleet.store),
        &c.job.input,
    )?;
    let job = c.job_id()?;
    let store = c.fleet.store()?;
    let start = c.start(job).await?;
    preflight_outputs(
        c.inputs(&start),
        c.out.as_deref(),
        c.job.manifest.as_deref(),
    )?;
    if let Some(p) = &partial_out {
        // The inputs as given (a listed prefix) and as planned (its objects, or a
        // resumed job's).
        let inputs: Vec<String> = c
            .job
            .input
            .iter()
            .chain(c.inputs(&start))
            .cloned()
            .collect();
        covmerge_coordinator::preflight_partial_out(p, &inputs).await?;
    }
    let job = start.job().clone();
    // A result or manifest on standard output (`-`) is all it holds.
    let to_stderr = summary_to_stderr(c.out.as_deref(), c.job.manifest.as_deref());
    say(to_stderr, &format!("job {job}"));
    let health = c.fleet.listen.start().await?;
    let amqp = c.fleet.queue("covmerge coordinator").await?;
    let probe = amqp.clone();
    health.set_check(Box::new(move || probe.connected()));
    let queue: Arc<dyn Queue> = Arc::new(amqp);
    info!(amqp = %redact_url(&c.fleet.amqp), store = %store, job = %job, "coordinator started");
    let opts = c.job_options()?;
    let progress = if c.job.quiet {
        ProgressView::hidden()
    } else {
        ProgressView::fleet_terminal()
    };
    let outcome = run_job(start, &opts, queue, store, &progress)
        .await
        .map_err(|e| match e {
            // The broker or the store was gone for longer than its budget: everything
            // finished so far is in the store, and the job goes on where it stopped.
            JobError::Queue(_) | JobError::Store(_) => anyhow::anyhow!(
                "{e}\njob {job} is resumable: run the same coordinator command with --job {job} --resume"
            ),
            e => e.into(),
        })?;
    match (&outcome.manifest.partial, c.rollup) {
        (Some(p), true) => say(
            to_stderr,
            &format!(
                "partial {} {}..{}: {} rows in {} shards",
                p.url, p.date_from, p.date_to, p.rows_in, p.shard_count
            ),
        ),
        _ => {
            say(to_stderr, &format!("result {}", outcome.result));
            let t = &outcome.manifest.totals;
            say(to_stderr, &totals_line(t.instrumented, t.covered));
        }
    }
    if let Some(n) = outcome.dashboard_rows {
        say(to_stderr, &format!("created {n} DB rows"));
    }
    Ok(())
}
