//! The fleet's settings, made once from the flags: what the coordinator and the
//! worker share (the broker, the store, the outage budgets, the operations
//! endpoints), the worker's configuration, and how a coordinator's job starts.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use covmerge_coordinator::{plan_job, JobOptions, ResumeCheck, Start};
use covmerge_proto::JobId;
use covmerge_queue::amqp::{AmqpOptions, AmqpQueue};
use covmerge_queue::DEFAULT_DELIVERY_LIMIT;
use covmerge_storage::Store;
use covmerge_telemetry::Health;
use covmerge_worker::run::{FleetWorker, WorkerConfig};

use crate::cli::{CoordinatorArgs, FleetArgs, ListenArgs, OutageArgs, WorkerArgs};
use crate::job::check_base;

impl FleetArgs {
    /// The store, retrying within the store outage budget.
    pub(crate) fn store(&self) -> Result<Store> {
        self.outages.store(&self.store)
    }

    /// The broker, reconnecting within the broker outage budget; `name` names the
    /// connection.
    pub(crate) async fn queue(&self, name: &str) -> Result<AmqpQueue> {
        self.outages.queue(&self.amqp, name).await
    }
}

impl WorkerArgs {
    /// The worker process's configuration.
    pub(crate) fn config(&self) -> Result<WorkerConfig> {
        WorkerConfig::fleet(FleetWorker {
            source: self.source.clone(),
            grace: Duration::from_secs(self.grace),
            max_config_failures: self.max_config_failures,
            memory_budget: self.memory_budget,
            concurrency: self.concurrency,
            split_threads: self.split_threads,
        })
        .map_err(anyhow::Error::msg)
    }
}

impl CoordinatorArgs {
    /// `--job`, parsed.
    pub(crate) fn job_id(&self) -> Result<Option<JobId>> {
        self.job_id
            .as_deref()
            .map(JobId::parse)
            .transpose()
            .map_err(anyhow::Error::msg)
    }

    /// How the job starts: a new one planned from the flags (its base checked in
    /// the source, where the coordinator can open it), or `--resume` with the spec
    /// the flags plan, to compare with the stored one.
    pub(crate) async fn start(&self, job: Option<JobId>) -> Result<Start> {
        let start = match (self.resume, job) {
            // The command line must ask for the stored job: it is planned as a new one
            // would be, and the two specs compared before anything is touched.
            (true, Some(job)) => Start::Resume {
                job: job.clone(),
                check: Some(Box::new(ResumeCheck {
                    spec: plan_job(&self.job.request(Some(job), self.rollup)?).await?,
                    shards_given: self.job.shards.is_some(),
                    date_to_given: self.job.date_to.is_some() || self.job.base_at.is_some(),
                })),
            },
            (true, None) => bail!("--resume needs --job"),
            (false, job) => Start::New(Box::new(
                plan_job(&self.job.request(job, self.rollup)?).await?,
            )),
        };
        match &start {
            // A roll-up has no base; a Go input has no base commit to default to.
            Start::New(spec) if self.rollup => {
                crate::cmd::rollup::refuse_go_without_commit(spec, self.job.input_format)?
            }
            Start::New(spec) => check_base(&spec.source, &spec.base_commit, false).await?,
            Start::Resume { .. } => {}
        }
        Ok(start)
    }

    /// The inputs of the job `start` names, to check the outputs against.
    pub(crate) fn inputs<'a>(&'a self, start: &'a Start) -> &'a [String] {
        match start {
            Start::New(spec) => &spec.inputs,
            Start::Resume { check, .. } => match check {
                Some(rc) => &rc.spec.inputs,
                None => &self.job.input,
            },
        }
    }

    /// The job's options: a fleet job's, with this coordinator's intervals.
    pub(crate) fn job_options(&self) -> Result<JobOptions> {
        Ok(JobOptions::fleet(
            self.out.clone(),
            self.job.manifest.clone(),
            self.job.dashboard()?,
            Duration::from_secs(self.reconcile_secs),
            Duration::from_secs(self.republish_secs),
            Duration::from_secs(self.lease_heartbeat_secs),
        ))
    }
}

impl ListenArgs {
    /// Starts the endpoints if asked; the returned health is not ready until a check
    /// is set.
    pub(crate) async fn start(&self) -> Result<Arc<Health>> {
        let health = Health::new();
        if let Some(addr) = &self.listen {
            let bound = covmerge_telemetry::serve(addr, health.clone()).await?;
            // Tests and scripts bind port 0 and read the port from here.
            crate::log::err_line(&format!("listening on {bound}"));
        }
        Ok(health)
    }
}

impl OutageArgs {
    pub(crate) async fn queue(&self, url: &str, name: &str) -> Result<AmqpQueue> {
        let opts = AmqpOptions {
            connect_timeout: Duration::from_secs(self.broker_outage_budget),
            connection_name: name.to_string(),
            ..AmqpOptions::new(DEFAULT_DELIVERY_LIMIT)
        };
        Ok(AmqpQueue::connect_with(url, opts).await?)
    }

    pub(crate) fn store(&self, url: &str) -> Result<Store> {
        Ok(Store::open(url)?.with_retry_budget(Duration::from_secs(self.store_outage_budget)))
    }
}
