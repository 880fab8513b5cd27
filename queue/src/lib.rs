//! `covmerge-queue` moves tasks from the coordinator to workers and reports back, with
//! at-least-once delivery: a task is acknowledged only after its output is durable, a
//! delivery that is neither acknowledged nor rejected (the worker died) comes back, a
//! task that keeps failing is dead-lettered to its job's coordinator after a delivery
//! limit, and a task that can never succeed is dead-lettered at once.
//!
//! Two implementations behind one interface: [`memory::MemoryQueue`] (embedded mode,
//! one process) and [`amqp::AmqpQueue`] (RabbitMQ quorum queues). The queue moves
//! opaque bytes: it knows nothing of the messages' meaning.

use async_trait::async_trait;

/// RabbitMQ: durable quorum queues, confirms, dead-lettering, reconnects.
pub mod amqp;
/// Checks every implementation must pass (tests only: the `conformance` feature).
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
/// The in-process queue used by embedded mode and tests.
pub mod memory;

/// Deliveries after which a failing task is dead-lettered (RabbitMQ `x-delivery-limit`:
/// the first delivery plus this many redeliveries).
pub const DEFAULT_DELIVERY_LIMIT: u32 = 4;

/// Queue failures.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The broker cannot be reached or the connection broke; reconnecting may help.
    #[error("broker unavailable: {0}")]
    Unavailable(String),
    /// The broker refused a message (unroutable, nacked): the publisher must not
    /// assume it was delivered.
    #[error("message not accepted by the broker: {0}")]
    NotAccepted(String),
    /// The queue was closed (shutdown).
    #[error("queue closed")]
    Closed,
    /// The setup is wrong and reconnecting will not help: an invalid broker URL or
    /// options, credentials or a vhost the broker refuses, a declaration the broker
    /// refuses (PRECONDITION_FAILED: a queue declared with other arguments). `what`
    /// names the broker (without credentials) and the operation.
    #[error("configuration error: {what}: {reason}")]
    Config {
        /// The broker (without credentials) and the operation.
        what: String,
        /// What the broker or the client said.
        reason: String,
    },
}

impl QueueError {
    /// Whether trying again later may succeed: only for [`QueueError::Unavailable`]. A
    /// refused message, a closed queue and a configuration error stay as they are.
    pub fn is_transient(&self) -> bool {
        matches!(self, QueueError::Unavailable(_))
    }
}

/// What happened to a task, seen by its job's coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A worker's report (an encoded `TaskReport`).
    Report(Vec<u8>),
    /// A task that was dead-lettered: the body as published, and why.
    DeadLetter {
        /// The task's encoded body, as published.
        body: Vec<u8>,
        /// Why the broker dead-lettered it (rejected, delivery limit, ...).
        reason: String,
    },
    /// The task queue was deleted (and declared again) under the fleet: the tasks it
    /// held are gone, and every task still waited for must be published again now.
    TasksLost,
}

/// How a delivery ends.
#[async_trait]
pub trait Settle: Send {
    /// Done: remove it from the queue.
    async fn ack(self: Box<Self>) -> Result<(), QueueError>;
    /// Failed, may succeed later: deliver it again (counts toward the delivery limit).
    async fn retry(self: Box<Self>) -> Result<(), QueueError>;
    /// Can never succeed (poison): dead-letter it now.
    async fn reject(self: Box<Self>) -> Result<(), QueueError>;
    /// The worker, not the task, is at fault (its configuration): give the task to
    /// another worker *without* counting toward the delivery limit, remembering that
    /// the workers `refused_by` could not run it (see [`Delivery::refused_by`]).
    /// Implementations that cannot do that requeue it like [`Settle::retry`].
    async fn hand_back(self: Box<Self>, refused_by: Vec<String>) -> Result<(), QueueError> {
        let _ = refused_by;
        self.retry().await
    }
}

/// One delivered task.
pub struct Delivery {
    /// The encoded task.
    pub body: Vec<u8>,
    /// 1 on the first delivery, 2 on the first redelivery, ...
    pub attempt: u32,
    /// Ids of the workers that handed this task back because they could not run it
    /// (their configuration), oldest first; a worker id may appear more than once.
    pub refused_by: Vec<String>,
    settle: Box<dyn Settle>,
}

impl Delivery {
    /// A delivery of `body`, its `attempt`-th, settled through `settle`.
    pub fn new(body: Vec<u8>, attempt: u32, settle: Box<dyn Settle>) -> Self {
        Delivery {
            body,
            attempt,
            refused_by: Vec::new(),
            settle,
        }
    }
    /// The delivery with the workers that handed it back before.
    pub fn with_refused_by(mut self, refused_by: Vec<String>) -> Self {
        self.refused_by = refused_by;
        self
    }
    /// Done: removes it from the queue.
    pub async fn ack(self) -> Result<(), QueueError> {
        self.settle.ack().await
    }
    /// Failed, may succeed later: delivers it again (counts toward the delivery limit).
    pub async fn retry(self) -> Result<(), QueueError> {
        self.settle.retry().await
    }
    /// Can never succeed (poison): dead-letters it now.
    pub async fn reject(self) -> Result<(), QueueError> {
        self.settle.reject().await
    }
    /// Hands the task back for another worker, not counted toward the delivery limit;
    /// `worker` is added to [`Delivery::refused_by`].
    pub async fn hand_back(self, worker: &str) -> Result<(), QueueError> {
        let mut refused_by = self.refused_by;
        refused_by.push(worker.to_string());
        self.settle.hand_back(refused_by).await
    }
}

/// The work queue shared by a coordinator and its workers.
#[async_trait]
pub trait Queue: Send + Sync {
    /// Creates whatever the job needs (its report and dead-letter queues). Idempotent:
    /// a resumed coordinator calls it again and finds what the first one left.
    async fn open_job(&self, job: &str) -> Result<(), QueueError>;
    /// Publishes a task for `job`; returns only once the broker has it durably.
    async fn publish_task(&self, job: &str, body: Vec<u8>) -> Result<(), QueueError>;
    /// The next task for any job (workers). Waits until one arrives.
    async fn next_task(&self) -> Result<Delivery, QueueError>;
    /// Sends a report to `job`'s coordinator; returns once the broker has it.
    async fn publish_report(&self, job: &str, body: Vec<u8>) -> Result<(), QueueError>;
    /// The next report or dead letter of `job` (coordinator). Waits until one arrives.
    async fn next_event(&self, job: &str) -> Result<Event, QueueError>;
    /// Removes the job's queues once it is finished (complete or failed).
    async fn close_job(&self, job: &str) -> Result<(), QueueError>;
    /// Stops receiving tasks for `pause` (a worker backing off after a configuration
    /// failure): no task is held by this process meanwhile, so other workers get them.
    /// Returns at once; deliveries already in hand stay valid, and
    /// [`Queue::next_task`] waits for the pause to end. The default does nothing (a
    /// queue that never holds tasks ahead of `next_task`).
    async fn pause_tasks(&self, pause: std::time::Duration) {
        let _ = pause;
    }
}
