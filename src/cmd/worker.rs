//! `covmerge worker`: serve tasks of any job until SIGTERM/SIGINT.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use covmerge_queue::Queue;
use covmerge_storage::redact_url;
use covmerge_worker::run::budget::Shares;
use covmerge_worker::run::{serve::serve, Executor, WorkerConfig};
use tracing::info;

use crate::cli::WorkerArgs;

pub(crate) async fn run(w: WorkerArgs) -> Result<()> {
    let store = w.outages.store(&w.store)?;
    let health = w.listen.start().await?;
    let amqp = w.outages.queue(&w.amqp, "covmerge worker").await?;
    let probe = amqp.clone();
    health.set_check(Box::new(move || probe.consuming()));
    let queue: Arc<dyn Queue> = Arc::new(amqp);
    let mut cfg = WorkerConfig {
        source: w.source.clone(),
        grace: Duration::from_secs(w.grace),
        max_config_failures: Some(w.max_config_failures),
        memory_budget: Shares::budget_or_default(
            w.memory_budget,
            covmerge_proto::memory::DEFAULT_WORKER_BUDGET,
            w.concurrency,
        ),
        ..WorkerConfig::default()
    }
    .shared_by(w.concurrency, w.concurrency)
    .map_err(anyhow::Error::msg)?;
    if let Some(t) = w.split_threads {
        cfg.split_threads = t.max(1);
    }
    let exec = Arc::new(Executor::new(store.clone(), cfg));
    info!(amqp = %redact_url(&w.amqp), store = %store, worker = %exec.config().worker_id, "worker started");
    let shutdown = async move {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        info!("shutdown requested: no new tasks");
        health.start_draining();
    };
    serve(queue, exec, w.concurrency, shutdown)
        .await
        .context("worker loop")?;
    info!("worker stopped");
    Ok(())
}
