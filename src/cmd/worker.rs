//! `covmerge worker`: serve tasks of any job until SIGTERM/SIGINT.

use std::sync::Arc;

use anyhow::{Context, Result};
use covmerge_queue::Queue;
use covmerge_storage::redact_url;
use covmerge_worker::run::{serve::serve, Executor};
use tracing::info;

use crate::cli::WorkerArgs;

pub(crate) async fn run(w: WorkerArgs) -> Result<()> {
    let store = w.fleet.store()?;
    let health = w.fleet.listen.start().await?;
    let amqp = w.fleet.queue("covmerge worker").await?;
    let probe = amqp.clone();
    health.set_check(Box::new(move || probe.consuming()));
    let queue: Arc<dyn Queue> = Arc::new(amqp);
    let mut cfg = w.config()?;
    // Tasks' scratch directories in one the worker owns: a worker killed mid-task
    // (a pre-empted spot instance restarted on the same disk) leaves them to the next
    // covmerge's sweep.
    let (scratch, _owner) = crate::scratch::sweep_and_make("covmerge-worker-")
        .map_err(anyhow::Error::msg)
        .context("the worker's scratch directory")?;
    cfg.scratch = Some(scratch.path().to_owned());
    covmerge_storage::local::set_scratch_root(scratch.path());
    let exec = Arc::new(Executor::new(store.clone(), cfg));
    info!(amqp = %redact_url(&w.fleet.amqp), store = %store, worker = %exec.config().worker_id, "worker started");
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
