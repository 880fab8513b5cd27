//! The broker objects covmerge uses and their declaration: the exchanges and quorum
//! queues of the module doc of [`super`], their arguments (delivery limit,
//! dead-lettering), the per-job queue names and routing keys, and the check that a
//! job name can become one.

use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, ExchangeKind};

use crate::QueueError;

/// Exchange tasks are published to (topic, routing key `job.<job>`).
pub const TASK_EXCHANGE: &str = "covmerge.tasks";
/// The quorum queue all workers consume.
pub const TASK_QUEUE: &str = "covmerge.tasks";
/// Dead-letter exchange of the task queue (topic; dead letters keep `job.<job>`).
pub const DEAD_EXCHANGE: &str = "covmerge.dead";
/// Catch-all dead-letter queue for operators (bound with `#`).
pub const DEAD_QUEUE: &str = "covmerge.dead";
/// Exchange reports are published to (direct, routing key `<job>`).
pub const REPORT_EXCHANGE: &str = "covmerge.reports";
/// Fanout exchange bound to every job's report queue: a notice to every coordinator
/// (the task queue was deleted and declared again: publish the waiting tasks now).
pub const CONTROL_EXCHANGE: &str = "covmerge.control";
/// Header of a message on [`CONTROL_EXCHANGE`] saying what happened.
pub(super) const CONTROL_HEADER: &str = "x-covmerge-control";
/// [`CONTROL_HEADER`]'s value: the tasks of the task queue were lost.
pub(super) const TASKS_LOST: &str = "tasks-lost";
/// Header of a task handed back by workers that could not run it (their ids,
/// comma-separated).
pub(super) const REFUSED_BY_HEADER: &str = "x-covmerge-refused-by";
/// A job's report and dead-letter queues expire this long after their last use (no
/// consumer, no declaration): the coordinator deletes them when the job ends either
/// way, this removes those of a coordinator that died and was never resumed.
pub const JOB_QUEUE_EXPIRY_MS: i32 = 3 * 24 * 3600 * 1000;

/// Job names become queue names and routing keys.
pub(super) fn check_job(job: &str) -> Result<(), QueueError> {
    let ok = !job.is_empty()
        && job.len() <= 200
        && !job.contains(['*', '#'])
        && !job.chars().any(char::is_control);
    if ok {
        Ok(())
    } else {
        Err(QueueError::NotAccepted(format!("invalid job name {job:?}")))
    }
}

pub(super) fn report_queue(job: &str) -> String {
    format!("{REPORT_EXCHANGE}.{job}")
}

pub(super) fn dead_queue(job: &str) -> String {
    format!("{DEAD_QUEUE}.{job}")
}

pub(super) fn task_key(job: &str) -> String {
    format!("job.{job}")
}

pub(super) fn quorum_args() -> FieldTable {
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("quorum".into()),
    );
    args
}

/// A job's queues: quorum, expiring after [`JOB_QUEUE_EXPIRY_MS`] unused.
pub(super) fn job_queue_args() -> FieldTable {
    let mut args = quorum_args();
    args.insert("x-expires".into(), AMQPValue::LongInt(JOB_QUEUE_EXPIRY_MS));
    args
}

pub(super) fn task_queue_args(limit: u32) -> FieldTable {
    let mut args = quorum_args();
    args.insert(
        "x-delivery-limit".into(),
        AMQPValue::LongInt(limit.min(i32::MAX as u32) as i32),
    );
    args.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString(DEAD_EXCHANGE.into()),
    );
    args
}

pub(super) fn durable_queue() -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    }
}

pub(super) fn durable_exchange() -> ExchangeDeclareOptions {
    ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    }
}

pub(super) async fn declare_topology(ch: &Channel, limit: u32) -> lapin::Result<()> {
    let ex = |name: &str, kind: ExchangeKind| {
        ch.exchange_declare(name.into(), kind, durable_exchange(), FieldTable::default())
    };
    ex(TASK_EXCHANGE, ExchangeKind::Topic).await?;
    ex(DEAD_EXCHANGE, ExchangeKind::Topic).await?;
    ex(REPORT_EXCHANGE, ExchangeKind::Direct).await?;
    ex(CONTROL_EXCHANGE, ExchangeKind::Fanout).await?;
    ch.queue_declare(DEAD_QUEUE.into(), durable_queue(), quorum_args())
        .await?;
    ch.queue_bind(
        DEAD_QUEUE.into(),
        DEAD_EXCHANGE.into(),
        "#".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    ch.queue_declare(TASK_QUEUE.into(), durable_queue(), task_queue_args(limit))
        .await?;
    // `job.#` rather than `job.*`: job ids may contain dots.
    ch.queue_bind(
        TASK_QUEUE.into(),
        TASK_EXCHANGE.into(),
        "job.#".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    Ok(())
}

pub(super) async fn declare_job(ch: &Channel, job: &str) -> lapin::Result<()> {
    let dead = dead_queue(job);
    let reports = report_queue(job);
    ch.queue_declare(dead.as_str().into(), durable_queue(), job_queue_args())
        .await?;
    ch.queue_bind(
        dead.as_str().into(),
        DEAD_EXCHANGE.into(),
        task_key(job).into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    ch.queue_declare(reports.as_str().into(), durable_queue(), job_queue_args())
        .await?;
    ch.queue_bind(
        reports.as_str().into(),
        REPORT_EXCHANGE.into(),
        job.into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    ch.queue_bind(
        reports.as_str().into(),
        CONTROL_EXCHANGE.into(),
        "".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names() {
        assert!(check_job("j-1_a.b").is_ok());
        assert!(check_job("").is_err());
        assert!(check_job("a#").is_err());
        assert!(check_job("a*b").is_err());
        assert!(check_job(&"x".repeat(201)).is_err());
    }
}
