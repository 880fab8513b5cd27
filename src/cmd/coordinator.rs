//! `covmerge coordinator`: one job on the fleet.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use covmerge_coordinator::finish::preflight_outputs;
use covmerge_coordinator::progress::ProgressView;
use covmerge_coordinator::{plan_job, run_job, JobError, JobOptions, ResumeCheck, Start};
use covmerge_proto::JobId;
use covmerge_queue::Queue;
use covmerge_storage::redact_url;
use tracing::info;

use super::job::{check_base, check_source, dashboard, request};
use super::{print_rows, print_totals};
use crate::cli::CoordinatorArgs;

pub(crate) async fn run(c: CoordinatorArgs) -> Result<()> {
    check_source(&c.job.source)?;
    covmerge_coordinator::finish::preflight_store(&c.store, &c.job.input)?;
    let job = c
        .job_id
        .as_deref()
        .map(JobId::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let store = c.outages.store(&c.store)?;
    let start = match (c.resume, job) {
        // The command line must ask for the stored job: it is planned as a new one
        // would be, and the two specs compared before anything is touched.
        (true, Some(job)) => Start::Resume {
            job: job.clone(),
            check: Some(Box::new(ResumeCheck {
                spec: plan_job(&request(&c.job, Some(job))?).await?,
                shards_given: c.job.shards.is_some(),
                date_to_given: c.job.date_to.is_some() || c.job.base_at.is_some(),
            })),
        },
        (true, None) => bail!("--resume needs --job"),
        (false, job) => Start::New(Box::new(plan_job(&request(&c.job, job)?).await?)),
    };
    if let Start::New(spec) = &start {
        check_base(&spec.source, &spec.base_commit, false).await?;
    }
    let inputs = match &start {
        Start::New(spec) => &spec.inputs,
        Start::Resume { check, .. } => match check {
            Some(rc) => &rc.spec.inputs,
            None => &c.job.input,
        },
    };
    preflight_outputs(inputs, c.out.as_deref(), c.job.manifest.as_deref())?;
    let job = start.job().clone();
    crate::outln!("job {job}");
    let health = c.listen.start().await?;
    let amqp = c.outages.queue(&c.amqp, "covmerge coordinator").await?;
    let probe = amqp.clone();
    health.set_check(Box::new(move || probe.connected()));
    let queue: Arc<dyn Queue> = Arc::new(amqp);
    info!(amqp = %redact_url(&c.amqp), store = %store, job = %job, "coordinator started");
    let opts = JobOptions {
        out: c.out.clone(),
        manifest: c.job.manifest.clone(),
        result_in_store: true,
        dashboard: dashboard(&c.job)?,
        cleanup: true,
        reconcile_every: Some(Duration::from_secs(c.reconcile_secs)),
        republish_after: Some(Duration::from_secs(c.republish_secs)),
        lease: Some(Duration::from_secs(c.lease_heartbeat_secs)),
    };
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
    crate::outln!("result {}", outcome.result);
    print_totals(&outcome.manifest);
    print_rows(outcome.dashboard_rows);
    Ok(())
}
