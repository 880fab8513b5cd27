//! Settling a task delivery: ack, retry (requeue, counted toward the delivery limit)
//! or reject (dead-letter now), and requeueing one that is dropped unsettled.

use std::sync::Arc;

use async_trait::async_trait;
use lapin::options::{BasicAckOptions, BasicNackOptions, BasicRejectOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::Acker;
use tracing::{debug, warn};

use super::topology::{REFUSED_BY_HEADER, TASK_EXCHANGE};
use super::Inner;
use crate::{QueueError, Settle};

/// Settles one task delivery; dropped unsettled, it requeues the task.
pub(super) struct AmqpSettle {
    pub(super) acker: Option<Acker>,
    pub(super) runtime: Option<tokio::runtime::Handle>,
    /// To publish a handed-back copy: the queue, the task's routing key and body.
    pub(super) inner: Arc<Inner>,
    pub(super) routing_key: String,
    pub(super) body: Vec<u8>,
}

impl AmqpSettle {
    pub(super) fn stale(&self, op: &str) -> QueueError {
        warn!("{op} of a task from a closed channel not sent: the broker redelivers the task");
        QueueError::Unavailable(format!(
            "{op}: the channel of this delivery is closed; the broker redelivers the task"
        ))
    }
}

impl Drop for AmqpSettle {
    fn drop(&mut self) {
        let Some(acker) = self.acker.take() else {
            return;
        };
        if !acker.usable() {
            return; // Its channel is gone: the broker requeues it by itself.
        }
        let Some(rt) = self.runtime.take() else {
            return;
        };
        debug!("unsettled task delivery dropped; requeueing it");
        rt.spawn(async move {
            let requeue = BasicNackOptions { requeue: true, ..BasicNackOptions::default() };
            if let Err(e) = acker.nack(requeue).await {
                warn!(error = %e, "requeueing a dropped delivery failed; the broker redelivers it when the channel closes");
            }
        });
    }
}

#[async_trait]
impl Settle for AmqpSettle {
    async fn ack(mut self: Box<Self>) -> Result<(), QueueError> {
        let acker = self.acker.take().expect("settled once");
        match acker.ack(BasicAckOptions::default()).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.stale("ack")),
            Err(e) => Err(QueueError::Unavailable(format!("ack: {e}"))),
        }
    }

    async fn retry(mut self: Box<Self>) -> Result<(), QueueError> {
        let acker = self.acker.take().expect("settled once");
        let opts = BasicNackOptions {
            requeue: true,
            ..BasicNackOptions::default()
        };
        match acker.nack(opts).await {
            Ok(true) => Ok(()),
            Ok(false) => {
                // The closed channel already returned it to the queue, which counts
                // toward the delivery limit too: the outcome asked for.
                warn!("retry of a task from a closed channel: the broker redelivers it anyway");
                Ok(())
            }
            Err(e) => Err(QueueError::Unavailable(format!("retry: {e}"))),
        }
    }

    /// A copy goes back to the task exchange with the workers that refused it in a
    /// header (a new message: its delivery count starts again, so a misconfigured
    /// worker does not use up the task's delivery limit), then the delivery is acked.
    /// If the copy cannot be published, the delivery is requeued as by `retry`.
    async fn hand_back(mut self: Box<Self>, refused_by: Vec<String>) -> Result<(), QueueError> {
        let mut headers = FieldTable::default();
        headers.insert(
            REFUSED_BY_HEADER.into(),
            AMQPValue::LongString(refused_by.join(",").into()),
        );
        let published = self
            .inner
            .publish_with(
                "handing a task back",
                TASK_EXCHANGE,
                self.routing_key.clone(),
                &self.body,
                Some(headers),
            )
            .await;
        if let Err(e) = published {
            warn!(error = %e, "cannot publish the handed-back task; requeueing it (counts as a delivery)");
            return self.retry().await;
        }
        let acker = self.acker.take().expect("settled once");
        match acker.ack(BasicAckOptions::default()).await {
            Ok(true) => Ok(()),
            // The original comes back as well: a duplicate, harmless.
            Ok(false) => Err(self.stale("ack of a handed-back task")),
            Err(e) => Err(QueueError::Unavailable(format!("ack: {e}"))),
        }
    }

    async fn reject(mut self: Box<Self>) -> Result<(), QueueError> {
        let acker = self.acker.take().expect("settled once");
        match acker.reject(BasicRejectOptions { requeue: false }).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.stale("reject")),
            Err(e) => Err(QueueError::Unavailable(format!("reject: {e}"))),
        }
    }
}
