//! RabbitMQ implementation of [`Queue`]: durable quorum queues, publisher confirms,
//! broker-side dead-lettering, and reconnects.
//!
//! Topology (declared idempotently, with identical arguments, by every process that
//! connects — coordinators and workers alike):
//!
//! - topic exchange `covmerge.tasks` → quorum queue `covmerge.tasks`
//!   (`x-delivery-limit`, `x-dead-letter-exchange=covmerge.dead`), bound with `job.#`;
//!   tasks are published with routing key `job.<job>`.
//! - topic exchange `covmerge.dead` → catch-all quorum queue `covmerge.dead` (`#`, for
//!   operators) and, per job, quorum queue `covmerge.dead.<job>` bound with `job.<job>`
//!   (dead-lettered tasks keep their routing key).
//! - direct exchange `covmerge.reports` → per job quorum queue `covmerge.reports.<job>`
//!   bound with `<job>`.
//! - fanout exchange `covmerge.control` → every job's report queue: a worker whose
//!   task consumer the broker cancelled (the task queue deleted) declares everything
//!   again and says so there, and each coordinator publishes its waiting tasks again.
//! - a job's two queues expire after [`JOB_QUEUE_EXPIRY_MS`] unused, and its
//!   coordinator deletes them when the job ends, complete or failed.
//!
//! Every publish is persistent, `mandatory` and confirmed: it returns only once the
//! broker has acknowledged it, and an unroutable or nacked message is
//! [`QueueError::NotAccepted`]. If the connection breaks, the next operation (and any
//! waiting [`Queue::next_task`] / [`Queue::next_event`]) reconnects with exponential
//! backoff, redeclares the topology and the consumers, and carries on.
//!
//! The password of the broker URL never appears in logs, errors or `Debug` output:
//! everything that names the broker uses [`redact_url`], the one redaction of every URL.
//!
//! Layout: this module holds the [`AmqpQueue`] handle, its options and the [`Queue`]
//! implementation; `topology` the broker objects and their names, `link` the
//! connection, reconnects and the one retry helper, `events` the consumers and the
//! `x-death` headers, `settle` the ack / retry / reject of a task delivery.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use covmerge_proto::redact::redact_url;
use lapin::options::QueueDeleteOptions;
use lapin::uri::AMQPUri;
use lapin::Channel;
use tokio::sync::Mutex;
use tracing::{debug, info};

use crate::{Delivery, Event, Queue, QueueError, DEFAULT_DELIVERY_LIMIT};

/// Consumers of tasks and of a job's events; what the broker's headers say.
mod events;
/// The connection, reconnects, the retry helper, publishing.
mod link;
/// Settling a task delivery.
mod settle;
/// Exchanges, queues, their arguments and names.
mod topology;

use events::{JobEvents, TaskConsumer};
use link::Link;
use topology::{check_job, dead_queue, declare_job, report_queue, task_key};
pub use topology::{
    CONTROL_EXCHANGE, DEAD_EXCHANGE, DEAD_QUEUE, JOB_QUEUE_EXPIRY_MS, REPORT_EXCHANGE,
    TASK_EXCHANGE, TASK_QUEUE,
};

/// Default of [`AmqpOptions::connect_timeout`]: a broker restart, upgrade or network
/// blip of a few minutes costs time, not the job.
pub const DEFAULT_OUTAGE_BUDGET: Duration = Duration::from_secs(600);

/// Checks the broker URL strictly before lapin sees it: only `amqp://` with a host.
/// lapin's own parser accepts `amqp:/user:pw@host/vh` (one slash) and connects to
/// localhost with the rest as the vhost name, password included.
///
/// `amqps://` is refused: lapin is built here without a TLS feature, and then connects
/// to an `amqps://` URL in plain text, sending the login and password unencrypted to
/// whatever listens on the port. A broker across an untrusted network is reached
/// through a TLS tunnel (stunnel, a sidecar) that covmerge sees as `amqp://`.
fn check_url(url: &str) -> Result<(), String> {
    if url.starts_with("amqps://") {
        return Err(
            "amqps:// is not supported: this build has no TLS for AMQP, and would \
                    send the password in plain text; reach a remote broker through a TLS \
                    tunnel and give its local end as amqp://"
                .into(),
        );
    }
    if !url.starts_with("amqp://") {
        return Err("expected amqp://user:password@host:port/vhost".into());
    }
    match url::Url::parse(url) {
        Ok(u) if u.host_str().is_some_and(|h| !h.is_empty()) => {
            if u.query().is_some() || u.fragment().is_some() {
                // lapin reads only a few query options; anything else is a typo.
                let known = u.query_pairs().all(|(k, _)| {
                    matches!(
                        k.as_ref(),
                        "heartbeat"
                            | "channel_max"
                            | "frame_max"
                            | "auth_mechanism"
                            | "connection_timeout"
                    )
                });
                if !known || u.fragment().is_some() {
                    return Err("unsupported query or fragment".into());
                }
            }
            if u.path_segments().is_some_and(|s| s.count() > 1) {
                return Err("the path must be one vhost name (use %2f for /)".into());
            }
            Ok(())
        }
        Ok(_) => Err("no host".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Settings of an [`AmqpQueue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmqpOptions {
    /// `x-delivery-limit` of the task queue. Must be the same in every process that
    /// declares the queue (the broker refuses a declaration with other arguments).
    pub delivery_limit: u32,
    /// Unacknowledged tasks a worker holds at once (`basic.qos`).
    pub prefetch: u16,
    /// Total time spent (re)connecting, with backoff, before an operation fails with
    /// [`QueueError::Unavailable`].
    pub connect_timeout: Duration,
    /// Connection name shown by the broker's management tools.
    pub connection_name: String,
}

impl Default for AmqpOptions {
    fn default() -> Self {
        AmqpOptions {
            delivery_limit: DEFAULT_DELIVERY_LIMIT,
            prefetch: 1,
            connect_timeout: DEFAULT_OUTAGE_BUDGET,
            connection_name: "covmerge".to_string(),
        }
    }
}

impl AmqpOptions {
    /// Default options with the given delivery limit.
    pub fn new(delivery_limit: u32) -> Self {
        AmqpOptions {
            delivery_limit,
            ..AmqpOptions::default()
        }
    }
}

/// A [`Queue`] on RabbitMQ. Cheap to clone (clones share the connection).
#[derive(Clone)]
pub struct AmqpQueue {
    inner: Arc<Inner>,
}

impl fmt::Debug for AmqpQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AmqpQueue")
            .field("url", &self.inner.redacted)
            .field("options", &self.inner.opts)
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish()
    }
}

impl fmt::Display for AmqpQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RabbitMQ at {}", self.inner.redacted)
    }
}

/// The parsed broker URL. Holds the password: deliberately neither `Debug` nor
/// `Display`.
struct Secret {
    uri: AMQPUri,
    /// Strings scrubbed from every message that reaches a log or an error.
    hide: Vec<String>,
}

struct Inner {
    secret: Secret,
    redacted: String,
    opts: AmqpOptions,
    /// The current connection; the lock is held while (re)connecting so that only one
    /// caller connects and the others wait for it.
    link: Mutex<Option<Arc<Link>>>,
    generation: AtomicU64,
    closed: AtomicBool,
    /// The worker side's task consumer; the lock is held by the `next_task` waiting.
    tasks: Mutex<Option<TaskConsumer>>,
    /// The coordinator side: event streams of the jobs `next_event` was called for.
    jobs: StdMutex<HashMap<String, Arc<JobEvents>>>,
    /// Jobs opened by this process and not closed: redeclared after a reconnect.
    open_jobs: StdMutex<HashSet<String>>,
    /// Jobs closed by this process: waiting for their events ends at once.
    closed_jobs: StdMutex<HashSet<String>>,
    /// The current connection as last seen, for [`AmqpQueue::connected`] (which must
    /// not wait for the `link` lock held while reconnecting).
    current: StdMutex<Option<Arc<Link>>>,
    /// The task consumer's channel and tag, for [`AmqpQueue::consuming`] and
    /// [`Queue::pause_tasks`].
    task_channel: StdMutex<Option<(Channel, String)>>,
    /// Until when the task consumer is paused ([`Queue::pause_tasks`]).
    paused_until: StdMutex<Option<std::time::Instant>>,
    /// The task consumer was cancelled by this process (a pause), not by the broker.
    self_cancelled: AtomicBool,
}

impl AmqpQueue {
    /// Connects (retrying with backoff for up to [`DEFAULT_OUTAGE_BUDGET`], so a worker
    /// started before the broker still comes up) and declares the shared topology.
    pub async fn connect(url: &str, delivery_limit: u32) -> Result<AmqpQueue, QueueError> {
        Self::connect_with(url, AmqpOptions::new(delivery_limit)).await
    }

    /// [`AmqpQueue::connect`] with explicit options.
    pub async fn connect_with(url: &str, opts: AmqpOptions) -> Result<AmqpQueue, QueueError> {
        let redacted = redact_url(url);
        let invalid = |reason: String| QueueError::Config {
            what: format!("invalid AMQP URL {redacted}"),
            reason,
        };
        check_url(url).map_err(invalid)?;
        // The parser's message quotes the URL: do not pass it on.
        let uri = AMQPUri::from_str(url).map_err(|_| invalid("lapin cannot parse it".into()))?;
        let mut hide = Vec::new();
        let password = uri.authority.userinfo.password.clone();
        if !password.is_empty() {
            hide.push(password.clone());
            if let Ok(u) = url::Url::parse(url) {
                if let Some(p) = u.password() {
                    if p != password {
                        hide.push(p.to_string());
                    }
                }
            }
        }
        if opts.prefetch == 0 {
            return Err(QueueError::Config {
                what: format!("AMQP options for {redacted}"),
                reason: "prefetch must be at least 1".into(),
            });
        }
        let q = AmqpQueue {
            inner: Arc::new(Inner {
                secret: Secret { uri, hide },
                redacted,
                opts,
                link: Mutex::new(None),
                generation: AtomicU64::new(0),
                closed: AtomicBool::new(false),
                tasks: Mutex::new(None),
                jobs: StdMutex::new(HashMap::new()),
                open_jobs: StdMutex::new(HashSet::new()),
                closed_jobs: StdMutex::new(HashSet::new()),
                current: StdMutex::new(None),
                task_channel: StdMutex::new(None),
                paused_until: StdMutex::new(None),
                self_cancelled: AtomicBool::new(false),
            }),
        };
        q.inner.link().await?;
        Ok(q)
    }

    /// The broker URL without credentials.
    pub fn url(&self) -> &str {
        &self.inner.redacted
    }

    /// The options this queue was created with.
    pub fn options(&self) -> &AmqpOptions {
        &self.inner.opts
    }

    /// `Ok` while the connection to the broker is up (never waits); else why not.
    pub fn connected(&self) -> Result<(), String> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err("queue closed".into());
        }
        match self.inner.current.lock().unwrap().as_ref() {
            Some(l) if l.healthy() => Ok(()),
            Some(_) => Err(format!("connection to {} lost", self.inner.redacted)),
            None => Err(format!("not connected to {}", self.inner.redacted)),
        }
    }

    /// `Ok` while connected and the task consumer (a worker's) is open and not paused.
    pub fn consuming(&self) -> Result<(), String> {
        self.connected()?;
        if let Some(left) = self.inner.pause_left() {
            return Err(format!(
                "not taking tasks for {}s (backing off after a configuration failure)",
                left.as_secs()
            ));
        }
        match self.inner.task_channel.lock().unwrap().as_ref() {
            Some((c, _)) if c.status().connected() => Ok(()),
            _ => Err(format!("not consuming {TASK_QUEUE}")),
        }
    }

    /// Closes the connection; every later (or waiting) operation fails with
    /// [`QueueError::Closed`]. Unacknowledged deliveries go back to the broker.
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        let jobs: Vec<_> = self.inner.jobs.lock().unwrap().drain().collect();
        for (_, events) in jobs {
            events.shut().await;
        }
        let link = self.inner.link.lock().await.take();
        if let Some(link) = link {
            if let Err(e) = link.conn.close(200, "closing".into()).await {
                debug!(error = %self.inner.scrub(&e), "closing the connection");
            }
        }
        info!(url = %self.inner.redacted, "closed the RabbitMQ connection");
    }
}

#[async_trait]
impl Queue for AmqpQueue {
    async fn open_job(&self, job: &str) -> Result<(), QueueError> {
        check_job(job)?;
        let inner = &self.inner;
        inner.open_jobs.lock().unwrap().insert(job.to_string());
        inner.closed_jobs.lock().unwrap().remove(job);
        inner
            .on_channel(
                &format!("declaring the queues of job {job}"),
                |ch| async move { declare_job(&ch, job).await },
            )
            .await?;
        debug!(job, "opened job queues");
        Ok(())
    }

    async fn publish_task(&self, job: &str, body: Vec<u8>) -> Result<(), QueueError> {
        check_job(job)?;
        self.inner
            .publish("publishing a task", TASK_EXCHANGE, task_key(job), &body)
            .await
    }

    async fn next_task(&self) -> Result<Delivery, QueueError> {
        self.inner.next_task().await
    }

    async fn publish_report(&self, job: &str, body: Vec<u8>) -> Result<(), QueueError> {
        check_job(job)?;
        self.inner
            .publish(
                "publishing a report",
                REPORT_EXCHANGE,
                job.to_string(),
                &body,
            )
            .await
    }

    async fn next_event(&self, job: &str) -> Result<Event, QueueError> {
        check_job(job)?;
        self.inner.next_event(job).await
    }

    async fn pause_tasks(&self, pause: Duration) {
        self.inner.pause_tasks(pause).await
    }

    async fn close_job(&self, job: &str) -> Result<(), QueueError> {
        check_job(job)?;
        let inner = &self.inner;
        inner.open_jobs.lock().unwrap().remove(job);
        inner.closed_jobs.lock().unwrap().insert(job.to_string());
        let events = inner.jobs.lock().unwrap().remove(job);
        if let Some(events) = events {
            events.shut().await;
        }
        inner
            .on_channel(
                &format!("deleting the queues of job {job}"),
                |ch| async move {
                    for q in [report_queue(job), dead_queue(job)] {
                        ch.queue_delete(q.as_str().into(), QueueDeleteOptions::default())
                            .await?;
                    }
                    Ok(())
                },
            )
            .await?;
        debug!(job, "deleted job queues");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_url_and_options_are_configuration_errors() {
        let err = AmqpQueue::connect("amqp://u:s3cret@host:notaport/%2f", 1)
            .await
            .unwrap_err();
        assert!(matches!(err, QueueError::Config { .. }), "{err:?}");
        assert!(!err.is_transient());
        let opts = AmqpOptions {
            prefetch: 0,
            ..AmqpOptions::default()
        };
        let err = AmqpQueue::connect_with("amqp://u:s3cret@127.0.0.1:1/%2f", opts)
            .await
            .unwrap_err();
        assert!(matches!(err, QueueError::Config { .. }), "{err:?}");
        assert!(!err.to_string().contains("s3cret"), "{err}");
        assert!(QueueError::Unavailable("x".into()).is_transient());
        assert!(!QueueError::Closed.is_transient());
        assert!(!QueueError::NotAccepted("x".into()).is_transient());
    }

    #[tokio::test]
    async fn bad_url_is_not_echoed() {
        for url in [
            "amqp://u:s3cret@host:notaport/%2f",
            "u:s3cret@host:5679",
            "amqp:u:s3cret@host/vh",
            "amqp:/u:s3cret@host/vh",
            "http://u:s3cret@host/vh",
            "amqp://u:s3cret@host/a/b",
        ] {
            let err = AmqpQueue::connect(url, 1).await.unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains("invalid AMQP URL"), "{url}: {msg}");
            assert!(!msg.contains("s3cret"), "{url}: {msg}");
        }
    }

    /// Without a TLS feature lapin took `amqps://` for plain AMQP: the password went
    /// over the wire unencrypted, and the job ran. It is refused before any connection.
    #[tokio::test]
    async fn amqps_is_refused_not_sent_in_plain_text() {
        // A listener that records whether anything connected.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let url = format!("amqps://u:s3cret@127.0.0.1:{port}/%2f");
        let err = AmqpQueue::connect(&url, 1).await.unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, QueueError::Config { .. }), "{err:?}");
        assert!(msg.contains("amqps:// is not supported"), "{msg}");
        assert!(!msg.contains("s3cret"), "{msg}");
        assert!(
            l.accept().is_err(),
            "nothing may connect to the broker's port"
        );
    }
}
