use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::Notify;

use crate::{Delivery, Event, Queue, QueueError, Settle, DEFAULT_DELIVERY_LIMIT};

/// The in-process queue: same semantics as RabbitMQ's quorum queue for covmerge's
/// purposes — redelivery of unsettled tasks (also when a `Delivery` is dropped), a
/// delivery limit, dead letters routed to the job's coordinator.
#[derive(Clone)]
pub struct MemoryQueue {
    inner: Arc<Inner>,
}

struct Inner {
    limit: u32,
    state: Mutex<State>,
    task_ready: Notify,
    event_ready: Notify,
}

#[derive(Default)]
struct State {
    tasks: VecDeque<(String, Vec<u8>, u32, Vec<String>)>,
    events: HashMap<String, VecDeque<Event>>,
}

impl Default for MemoryQueue {
    fn default() -> Self {
        Self::new(DEFAULT_DELIVERY_LIMIT)
    }
}

impl MemoryQueue {
    /// An empty queue that dead-letters a task rather than deliver it more than `delivery_limit` times.
    pub fn new(delivery_limit: u32) -> Self {
        MemoryQueue {
            inner: Arc::new(Inner {
                limit: delivery_limit,
                state: Mutex::default(),
                task_ready: Notify::new(),
                event_ready: Notify::new(),
            }),
        }
    }
}

impl Inner {
    fn requeue(&self, job: String, body: Vec<u8>, attempt: u32) {
        if attempt > self.limit {
            self.dead(job, body, format!("delivery limit {} exceeded", self.limit));
            return;
        }
        self.state
            .lock()
            .unwrap()
            .tasks
            .push_back((job, body, attempt + 1, Vec::new()));
        self.task_ready.notify_one();
    }

    /// Back to the queue as it was delivered: not counted as a delivery.
    fn hand_back(&self, job: String, body: Vec<u8>, attempt: u32, refused_by: Vec<String>) {
        self.state
            .lock()
            .unwrap()
            .tasks
            .push_back((job, body, attempt, refused_by));
        self.task_ready.notify_one();
    }

    fn dead(&self, job: String, body: Vec<u8>, reason: String) {
        self.state
            .lock()
            .unwrap()
            .events
            .entry(job)
            .or_default()
            .push_back(Event::DeadLetter { body, reason });
        self.event_ready.notify_waiters();
    }
}

struct MemSettle {
    inner: Arc<Inner>,
    job: String,
    body: Option<Vec<u8>>,
    attempt: u32,
}

impl Drop for MemSettle {
    // An unsettled delivery (the worker task died) comes back, like a closed channel.
    fn drop(&mut self) {
        if let Some(body) = self.body.take() {
            self.inner
                .requeue(std::mem::take(&mut self.job), body, self.attempt);
        }
    }
}

#[async_trait]
impl Settle for MemSettle {
    async fn ack(mut self: Box<Self>) -> Result<(), QueueError> {
        self.body = None;
        Ok(())
    }
    async fn retry(self: Box<Self>) -> Result<(), QueueError> {
        Ok(()) // Drop requeues.
    }
    async fn hand_back(mut self: Box<Self>, refused_by: Vec<String>) -> Result<(), QueueError> {
        if let Some(body) = self.body.take() {
            let job = std::mem::take(&mut self.job);
            self.inner.hand_back(job, body, self.attempt, refused_by);
        }
        Ok(())
    }
    async fn reject(mut self: Box<Self>) -> Result<(), QueueError> {
        if let Some(body) = self.body.take() {
            self.inner.dead(
                std::mem::take(&mut self.job),
                body,
                "rejected by a worker".into(),
            );
        }
        Ok(())
    }
}

#[async_trait]
impl Queue for MemoryQueue {
    async fn open_job(&self, job: &str) -> Result<(), QueueError> {
        self.inner
            .state
            .lock()
            .unwrap()
            .events
            .entry(job.to_string())
            .or_default();
        Ok(())
    }

    async fn publish_task(&self, job: &str, body: Vec<u8>) -> Result<(), QueueError> {
        self.inner
            .state
            .lock()
            .unwrap()
            .tasks
            .push_back((job.to_string(), body, 1, Vec::new()));
        self.inner.task_ready.notify_one();
        Ok(())
    }

    async fn next_task(&self) -> Result<Delivery, QueueError> {
        loop {
            let notified = self.inner.task_ready.notified();
            let next = self.inner.state.lock().unwrap().tasks.pop_front();
            if let Some((job, body, attempt, refused_by)) = next {
                let settle = MemSettle {
                    inner: self.inner.clone(),
                    job,
                    body: Some(body.clone()),
                    attempt,
                };
                return Ok(
                    Delivery::new(body, attempt, Box::new(settle)).with_refused_by(refused_by)
                );
            }
            notified.await;
        }
    }

    async fn publish_report(&self, job: &str, body: Vec<u8>) -> Result<(), QueueError> {
        let mut st = self.inner.state.lock().unwrap();
        let Some(q) = st.events.get_mut(job) else {
            return Err(QueueError::NotAccepted(format!(
                "no coordinator queue for job {job}"
            )));
        };
        q.push_back(Event::Report(body));
        drop(st);
        self.inner.event_ready.notify_waiters();
        Ok(())
    }

    async fn next_event(&self, job: &str) -> Result<Event, QueueError> {
        loop {
            let notified = self.inner.event_ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.inner.state.lock().unwrap().events.get_mut(job) {
                // Closed (or never opened): nothing will ever arrive.
                None => return Err(QueueError::Closed),
                Some(q) => {
                    if let Some(e) = q.pop_front() {
                        return Ok(e);
                    }
                }
            }
            notified.await;
        }
    }

    async fn close_job(&self, job: &str) -> Result<(), QueueError> {
        self.inner.state.lock().unwrap().events.remove(job);
        // Wake any waiter of this job so that it sees the job closed.
        self.inner.event_ready.notify_waiters();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance;

    #[tokio::test]
    async fn memory_queue_conformance() {
        let q = MemoryQueue::new(3);
        conformance::ack_and_report(&q, "j-ack").await;
        conformance::retry_until_dead_letter(&q, "j-retry", 3).await;
        conformance::reject_dead_letters_now(&q, "j-reject").await;
        conformance::dropped_delivery_comes_back(&q, "j-drop").await;
        conformance::close_ends_a_waiting_next_event(&q, "j-close").await;
    }
}
