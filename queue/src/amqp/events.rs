//! Consuming: the task consumer of a worker and, per job, the report and dead-letter
//! consumers of its coordinator, fed into one event stream per job; restarting them
//! when they stop; and what the broker's headers say about a delivery (its attempt
//! number from `x-delivery-count`, why it was dead-lettered from `x-death`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use covmerge_proto::retry::RetryPolicy;
use futures::StreamExt;
use lapin::message::Delivery as LapinDelivery;
use lapin::options::{BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Acker, Channel, Consumer};
use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::link::Backoff;
use super::settle::AmqpSettle;
use super::topology::{
    dead_queue, declare_job, declare_topology, report_queue, CONTROL_EXCHANGE, CONTROL_HEADER,
    REFUSED_BY_HEADER, TASKS_LOST, TASK_QUEUE,
};
use super::Inner;
use crate::{Delivery, Event, QueueError};

/// Prefetch of a coordinator's report and dead-letter consumers (per consumer).
const EVENT_PREFETCH: u16 = 64;

pub(super) struct TaskConsumer {
    pub(super) channel: Channel,
    pub(super) consumer: Consumer,
    pub(super) opened: Instant,
}

/// A job's reports and dead letters, fed by two consumers on one channel.
pub(super) struct JobEvents {
    pub(super) tx: mpsc::UnboundedSender<EventMsg>,
    pub(super) rx: Mutex<mpsc::UnboundedReceiver<EventMsg>>,
    pub(super) consumers: StdMutex<Option<EventConsumers>>,
    pub(super) seq: AtomicU64,
    /// Set by [`JobEvents::shut`]: a waiter must not consume again.
    pub(super) closed: AtomicBool,
}

pub(super) enum EventMsg {
    Item(Event, Acker),
    /// The consumers of this sequence number stopped (channel closed or cancelled).
    Stopped(u64),
    /// The job was closed (or the whole queue): waiting `next_event` calls end.
    Closed,
}

impl JobEvents {
    /// Stops the consumers and wakes whoever waits for an event.
    pub(super) async fn shut(&self) {
        // First wake the waiter and tell it not to consume again: otherwise, seeing its
        // consumers stop below, it would consume the queues about to be deleted.
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.tx.send(EventMsg::Closed);
        let consumers = self.consumers.lock().unwrap().take();
        if let Some(c) = consumers {
            // Close the channel before its consumers are dropped: the broker then
            // cancels them itself. Dropped first, they send basic.cancel, and a
            // cancel-ok arriving after the queue is deleted is an unexpected frame to
            // lapin, which then fails the whole connection.
            let _ = c.channel.close(200, "job closed".into()).await;
            drop(c);
        }
    }
}

pub(super) struct EventConsumers {
    pub(super) seq: u64,
    pub(super) channel: Channel,
    pub(super) forwarders: Vec<JoinHandle<()>>,
}

impl Drop for EventConsumers {
    fn drop(&mut self) {
        // Dropping the forwarders drops the consumers; dropping the last handle of the
        // channel closes it, and the broker requeues whatever was not acknowledged.
        for f in &self.forwarders {
            f.abort();
        }
    }
}

pub(super) fn header<'a>(d: &'a LapinDelivery, key: &str) -> Option<&'a AMQPValue> {
    d.properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get(key))
}

pub(super) fn as_int(v: &AMQPValue) -> Option<i64> {
    match v {
        AMQPValue::ShortShortInt(n) => Some(i64::from(*n)),
        AMQPValue::ShortShortUInt(n) => Some(i64::from(*n)),
        AMQPValue::ShortInt(n) => Some(i64::from(*n)),
        AMQPValue::ShortUInt(n) => Some(i64::from(*n)),
        AMQPValue::LongInt(n) => Some(i64::from(*n)),
        AMQPValue::LongUInt(n) => Some(i64::from(*n)),
        AMQPValue::LongLongInt(n) => Some(*n),
        AMQPValue::Timestamp(n) => i64::try_from(*n).ok(),
        _ => None,
    }
}

pub(super) fn as_text(v: &AMQPValue) -> Option<String> {
    match v {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_string()),
        _ => None,
    }
}

/// 1 on the first delivery; quorum queues count redeliveries in `x-delivery-count`.
pub(super) fn attempt_of(d: &LapinDelivery) -> u32 {
    let count = header(d, "x-delivery-count").and_then(as_int).unwrap_or(0);
    u32::try_from(count.max(0))
        .unwrap_or(u32::MAX - 1)
        .saturating_add(1)
}

/// Why a task was dead-lettered, from the `x-death` (or `x-first-death-*`) headers.
pub(super) fn death_reason(d: &LapinDelivery, limit: u32) -> String {
    let latest = header(d, "x-death").and_then(|v| match v {
        AMQPValue::FieldArray(a) => a.as_slice().first().and_then(|e| match e {
            AMQPValue::FieldTable(t) => Some(t.clone()),
            _ => None,
        }),
        _ => None,
    });
    let (reason, queue) = match &latest {
        Some(t) => (
            t.inner().get("reason").and_then(as_text),
            t.inner().get("queue").and_then(as_text),
        ),
        None => (None, None),
    };
    let reason = reason.or_else(|| header(d, "x-first-death-reason").and_then(as_text));
    let queue = queue.or_else(|| header(d, "x-first-death-queue").and_then(as_text));
    let text = match reason.as_deref() {
        Some("delivery_limit") => format!("delivery limit {limit} exceeded"),
        Some("rejected") => "rejected by a worker".to_string(),
        Some(other) => other.to_string(),
        None => return "dead-lettered (no x-death header)".to_string(),
    };
    match queue {
        Some(q) => format!("{text} (queue {q})"),
        None => text,
    }
}

/// The workers that handed a task back, from its [`REFUSED_BY_HEADER`].
pub(super) fn refused_by(d: &LapinDelivery) -> Vec<String> {
    header(d, REFUSED_BY_HEADER)
        .and_then(as_text)
        .map(|s| {
            s.split(',')
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

impl Inner {
    /// What is left of a pause of [`Queue::pause_tasks`], if one is on.
    pub(super) fn pause_left(&self) -> Option<Duration> {
        let until = (*self.paused_until.lock().unwrap())?;
        let left = until.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// [`Queue::pause_tasks`]: cancels the task consumer (its channel stays open, so a
    /// delivery in hand can still be settled) and keeps it closed for `pause`.
    pub(super) async fn pause_tasks(&self, pause: Duration) {
        *self.paused_until.lock().unwrap() = Some(Instant::now() + pause);
        let current = self.task_channel.lock().unwrap().clone();
        if let Some((channel, tag)) = current {
            self.self_cancelled.store(true, Ordering::SeqCst);
            if let Err(e) = channel
                .basic_cancel(tag.as_str().into(), BasicCancelOptions::default())
                .await
            {
                debug!(error = %e, "cancelling the task consumer for a pause");
            }
        }
    }

    /// Tells every coordinator (through [`CONTROL_EXCHANGE`], bound to each job's
    /// report queue) that the task queue lost its tasks.
    async fn announce_tasks_lost(&self) {
        let mut headers = FieldTable::default();
        headers.insert(
            CONTROL_HEADER.into(),
            AMQPValue::LongString(TASKS_LOST.into()),
        );
        match self
            .publish_with(
                "announcing lost tasks",
                CONTROL_EXCHANGE,
                String::new(),
                b"",
                Some(headers),
            )
            .await
        {
            Ok(()) => {
                warn!(url = %self.redacted, "told the coordinators to publish their waiting tasks again")
            }
            // No coordinator has a job open: nobody waits for a task.
            Err(QueueError::NotAccepted(_)) => debug!("no coordinator to tell about lost tasks"),
            Err(e) => warn!(error = %e, "cannot tell the coordinators about lost tasks"),
        }
    }

    /// [`Queue::next_task`]: the next task, (re)opening the task consumer as needed.
    pub(super) async fn next_task(self: &Arc<Self>) -> Result<Delivery, QueueError> {
        let inner = self;
        let mut guard = inner.tasks.lock().await;
        let mut backoff: Option<Backoff> = None;
        // The broker cancelled the consumer (its queue deleted): once consuming again
        // (the topology declared anew), the coordinators must republish.
        let mut lost = false;
        loop {
            inner.check_open()?;
            if let Some(left) = inner.pause_left() {
                *guard = None;
                *inner.task_channel.lock().unwrap() = None;
                tokio::time::sleep(left).await;
                continue;
            }
            let alive = guard
                .as_ref()
                .is_some_and(|tc| tc.channel.status().connected());
            if !alive {
                *guard = None;
                *inner.task_channel.lock().unwrap() = None;
                let tc = inner.open_task_consumer().await?;
                inner.self_cancelled.store(false, Ordering::SeqCst);
                *inner.task_channel.lock().unwrap() =
                    Some((tc.channel.clone(), tc.consumer.tag().to_string()));
                *guard = Some(tc);
                if std::mem::take(&mut lost) {
                    inner.announce_tasks_lost().await;
                }
            }
            let tc = guard.as_mut().expect("just set");
            let opened = tc.opened;
            let stopped = match tc.consumer.next().await {
                Some(Ok(d)) => {
                    let attempt = attempt_of(&d);
                    let refused = refused_by(&d);
                    let settle = AmqpSettle {
                        acker: Some(d.acker.clone()),
                        runtime: tokio::runtime::Handle::try_current().ok(),
                        inner: inner.clone(),
                        routing_key: d.routing_key.to_string(),
                        body: d.data.clone(),
                    };
                    return Ok(
                        Delivery::new(d.data, attempt, Box::new(settle)).with_refused_by(refused)
                    );
                }
                Some(Err(e)) => format!("failed: {}", inner.scrub(&e)),
                None => "cancelled".to_string(),
            };
            *guard = None;
            if inner.self_cancelled.swap(false, Ordering::SeqCst) {
                debug!("task consumer paused");
                continue;
            }
            if stopped == "cancelled" {
                // Only the broker cancels a consumer of ours: its queue was deleted.
                lost = true;
            }
            warn!(url = %inner.redacted, "task consumer {stopped}; consuming again");
            if opened.elapsed() > Duration::from_secs(10) {
                backoff = None; // It worked for a while: a new incident.
            }
            // A consumer that keeps dying while the connection looks fine (the queue
            // deleted and redeclared, say) must not spin.
            let b = backoff.get_or_insert_with(|| Backoff::new(inner.opts.connect_timeout));
            if !b.wait().await {
                return Err(QueueError::Unavailable(format!(
                    "the task consumer keeps stopping ({})",
                    inner.redacted
                )));
            }
        }
    }

    /// [`Queue::next_event`]: the next event of `job`, (re)opening its consumers as
    /// needed.
    pub(super) async fn next_event(&self, job: &str) -> Result<Event, QueueError> {
        let inner = self;
        if inner.closed_jobs.lock().unwrap().contains(job) {
            return Err(QueueError::Closed);
        }
        let events = inner.job_events(job);
        let mut rx = events.rx.lock().await;
        loop {
            inner.check_open()?;
            if events.closed.load(Ordering::SeqCst) {
                return Err(QueueError::Closed);
            }
            let alive = events
                .consumers
                .lock()
                .unwrap()
                .as_ref()
                .is_some_and(|c| c.channel.status().connected());
            if !alive {
                events.consumers.lock().unwrap().take();
                let opened = inner.open_event_consumers(job, &events).await;
                // The job may have been closed meanwhile (its queues are then deleted).
                if events.closed.load(Ordering::SeqCst) {
                    if let Ok(c) = opened {
                        let _ = c.channel.close(200, "job closed".into()).await;
                    }
                    return Err(QueueError::Closed);
                }
                *events.consumers.lock().unwrap() = Some(opened?);
            }
            match rx.recv().await {
                Some(EventMsg::Item(event, acker)) => {
                    match acker.ack(BasicAckOptions::default()).await {
                        Ok(true) => return Ok(event),
                        // Its channel closed: the broker delivers it again.
                        Ok(false) => debug!(job, "skipping an event from a closed channel"),
                        Err(e) => {
                            warn!(job, error = %e, "acking an event failed; it will be redelivered")
                        }
                    }
                }
                Some(EventMsg::Stopped(seq)) => {
                    let current = {
                        let mut c = events.consumers.lock().unwrap();
                        let current = c.as_ref().is_some_and(|c| c.seq == seq);
                        if current {
                            c.take();
                        }
                        current
                    };
                    if current {
                        warn!(url = %inner.redacted, job, "job event consumers stopped; consuming again");
                        // Consumers that keep stopping must not spin.
                        let reconnect = RetryPolicy::reconnect(inner.opts.connect_timeout);
                        tokio::time::sleep(reconnect.delay(2)).await;
                    }
                }
                Some(EventMsg::Closed) | None => return Err(QueueError::Closed),
            }
        }
    }

    pub(super) async fn open_task_consumer(&self) -> Result<TaskConsumer, QueueError> {
        let tc = self
            .with_link("consuming tasks", |link| async move {
                let channel = link.conn.create_channel().await?;
                channel
                    .basic_qos(self.opts.prefetch, BasicQosOptions::default())
                    .await?;
                // Recreates the whole topology (exchanges, queues and their bindings)
                // if any of it was deleted under us: a task queue declared again without
                // its `job.#` binding would route no task.
                declare_topology(&channel, self.opts.delivery_limit).await?;
                let consumer = channel
                    .basic_consume(
                        TASK_QUEUE.into(),
                        "".into(),
                        BasicConsumeOptions::default(),
                        FieldTable::default(),
                    )
                    .await?;
                Ok(TaskConsumer {
                    channel,
                    consumer,
                    opened: Instant::now(),
                })
            })
            .await?;
        debug!(url = %self.redacted, prefetch = self.opts.prefetch, "consuming {TASK_QUEUE}");
        Ok(tc)
    }

    pub(super) async fn open_event_consumers(
        &self,
        job: &str,
        events: &JobEvents,
    ) -> Result<EventConsumers, QueueError> {
        let seq = events.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let limit = self.opts.delivery_limit;
        let (reports, dead) = (&report_queue(job), &dead_queue(job));
        let what = format!("consuming the events of job {job}");
        let (channel, report_consumer, dead_consumer) = self
            .with_link(&what, |link| async move {
                let channel = link.conn.create_channel().await?;
                channel
                    .basic_qos(EVENT_PREFETCH, BasicQosOptions::default())
                    .await?;
                declare_job(&channel, job).await?;
                let consume = |queue: &str| {
                    channel.basic_consume(
                        queue.into(),
                        "".into(),
                        BasicConsumeOptions::default(),
                        FieldTable::default(),
                    )
                };
                let report_consumer = consume(reports).await?;
                let dead_consumer = consume(dead).await?;
                Ok((channel, report_consumer, dead_consumer))
            })
            .await?;
        let forwarders = vec![
            forward(report_consumer, events.tx.clone(), seq, |d| {
                match header(&d, CONTROL_HEADER).and_then(as_text).as_deref() {
                    Some(TASKS_LOST) => Event::TasksLost,
                    _ => Event::Report(d.data),
                }
            }),
            forward(dead_consumer, events.tx.clone(), seq, move |d| {
                let reason = death_reason(&d, limit);
                Event::DeadLetter {
                    body: d.data,
                    reason,
                }
            }),
        ];
        debug!(url = %self.redacted, job, "consuming the job's reports and dead letters");
        Ok(EventConsumers {
            seq,
            channel,
            forwarders,
        })
    }

    pub(super) fn job_events(&self, job: &str) -> Arc<JobEvents> {
        self.jobs
            .lock()
            .unwrap()
            .entry(job.to_string())
            .or_insert_with(|| {
                let (tx, rx) = mpsc::unbounded_channel();
                Arc::new(JobEvents {
                    tx,
                    rx: Mutex::new(rx),
                    consumers: StdMutex::new(None),
                    seq: AtomicU64::new(0),
                    closed: AtomicBool::new(false),
                })
            })
            .clone()
    }
}

/// Feeds a consumer's deliveries into a job's event stream until it stops.
pub(super) fn forward(
    mut consumer: Consumer,
    tx: mpsc::UnboundedSender<EventMsg>,
    seq: u64,
    to_event: impl Fn(LapinDelivery) -> Event + Send + 'static,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let queue = consumer.queue();
        while let Some(next) = consumer.next().await {
            match next {
                Ok(d) => {
                    let acker = d.acker.clone();
                    if tx.send(EventMsg::Item(to_event(d), acker)).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    // lapin's errors do not contain the URL (nor its password).
                    warn!(queue = %queue, error = %e, "event consumer failed");
                    break;
                }
            }
        }
        let _ = tx.send(EventMsg::Stopped(seq));
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::BasicProperties;

    #[test]
    fn attempts_and_reasons() {
        let mut d = LapinDelivery::mock(1, "".into(), "".into(), false, b"x".to_vec());
        assert_eq!(attempt_of(&d), 1);
        assert_eq!(death_reason(&d, 4), "dead-lettered (no x-death header)");
        let mut death = FieldTable::default();
        death.insert(
            "reason".into(),
            AMQPValue::LongString("delivery_limit".into()),
        );
        death.insert(
            "queue".into(),
            AMQPValue::LongString("covmerge.tasks".into()),
        );
        let mut h = FieldTable::default();
        h.insert("x-delivery-count".into(), AMQPValue::LongLongInt(2));
        h.insert(
            "x-death".into(),
            AMQPValue::FieldArray(vec![AMQPValue::FieldTable(death)].into()),
        );
        d.properties = BasicProperties::default().with_headers(h);
        assert_eq!(attempt_of(&d), 3);
        assert_eq!(
            death_reason(&d, 4),
            "delivery limit 4 exceeded (queue covmerge.tasks)"
        );
    }
}
