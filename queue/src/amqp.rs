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
//!
//! Every publish is persistent, `mandatory` and confirmed: it returns only once the
//! broker has acknowledged it, and an unroutable or nacked message is
//! [`QueueError::NotAccepted`]. If the connection breaks, the next operation (and any
//! waiting [`Queue::next_task`] / [`Queue::next_event`]) reconnects with exponential
//! backoff, redeclares the topology and the consumers, and carries on.
//!
//! The password of the broker URL never appears in logs, errors or `Debug` output:
//! everything that names the broker uses [`redact`].

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use covmerge_proto::retry::{BackoffBuilder, ExponentialBuilder, RetryPolicy, Retryable};
use futures::StreamExt;
use lapin::message::Delivery as LapinDelivery;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions,
    BasicRejectOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::protocol::{AMQPErrorKind, AMQPHardError, AMQPSoftError};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::uri::AMQPUri;
use lapin::{
    Acker, BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, Consumer,
    ErrorKind, ExchangeKind,
};
use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::{Delivery, Event, Queue, QueueError, Settle, DEFAULT_DELIVERY_LIMIT};

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

/// Prefetch of a coordinator's report and dead-letter consumers (per consumer).
const EVENT_PREFETCH: u16 = 64;
/// How long a publish waits for the broker's confirm before giving the connection up.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);
/// One connection attempt (TCP + AMQP handshake + topology) at most.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);

/// The broker URL without its user info (user name and password), for logs and
/// errors: the same redaction as every other URL ([`covmerge_proto::redact`]).
pub fn redact(url: &str) -> String {
    covmerge_proto::redact::redact_url(url)
}

/// Default of [`AmqpOptions::connect_timeout`]: a broker restart, upgrade or network
/// blip of a few minutes costs time, not the job.
pub const DEFAULT_OUTAGE_BUDGET: Duration = Duration::from_secs(600);

/// Checks the broker URL strictly before lapin sees it: only `amqp://` and
/// `amqps://` with a host. lapin's own parser accepts `amqp:/user:pw@host/vh` (one
/// slash) and connects to localhost with the rest as the vhost name, password
/// included.
fn check_url(url: &str) -> Result<(), String> {
    let scheme_ok = url.starts_with("amqp://") || url.starts_with("amqps://");
    if !scheme_ok {
        return Err("expected amqp://user:password@host:port/vhost or amqps://...".into());
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
    /// The task consumer's channel, for [`AmqpQueue::consuming`].
    task_channel: StdMutex<Option<Channel>>,
}

struct Link {
    generation: u64,
    conn: Connection,
    /// Confirm-mode channel shared by all publishes.
    publisher: Channel,
}

impl Link {
    fn healthy(&self) -> bool {
        self.conn.status().connected() && self.publisher.status().connected()
    }
}

struct TaskConsumer {
    channel: Channel,
    consumer: Consumer,
    opened: Instant,
}

/// A job's reports and dead letters, fed by two consumers on one channel.
struct JobEvents {
    tx: mpsc::UnboundedSender<EventMsg>,
    rx: Mutex<mpsc::UnboundedReceiver<EventMsg>>,
    consumers: StdMutex<Option<EventConsumers>>,
    seq: AtomicU64,
    /// Set by [`JobEvents::shut`]: a waiter must not consume again.
    closed: AtomicBool,
}

enum EventMsg {
    Item(Event, Acker),
    /// The consumers of this sequence number stopped (channel closed or cancelled).
    Stopped(u64),
    /// The job was closed (or the whole queue): waiting `next_event` calls end.
    Closed,
}

impl JobEvents {
    /// Stops the consumers and wakes whoever waits for an event.
    async fn shut(&self) {
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

struct EventConsumers {
    seq: u64,
    channel: Channel,
    forwarders: Vec<JoinHandle<()>>,
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

/// Pauses of [`RetryPolicy::reconnect`] within a wall-clock budget, for a loop that is
/// not one operation (a consumer that keeps stopping).
struct Backoff {
    delays: <ExponentialBuilder as BackoffBuilder>::Backoff,
    deadline: Instant,
}

impl Backoff {
    fn new(budget: Duration) -> Self {
        Backoff {
            delays: RetryPolicy::reconnect(budget).builder().build(),
            deadline: Instant::now() + budget,
        }
    }

    /// Sleeps before the next attempt; `false` when the budget is spent.
    async fn wait(&mut self) -> bool {
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        match self.delays.next() {
            Some(d) if !remaining.is_zero() => {
                tokio::time::sleep(d.min(remaining)).await;
                true
            }
            _ => false,
        }
    }
}

/// Why one attempt of a broker operation failed (see [`Inner::with_link`]).
enum OpFailure {
    /// The broker or the connection failed: retried (after reconnecting if the
    /// connection broke) unless it is a channel-level refusal ([`is_permanent`]).
    Broker(lapin::Error),
    /// The connection cannot be trusted (no confirm in time, say): reconnect and retry.
    Suspect(String),
    /// Returned as is: a refused message, the queue closed, reconnecting gave up.
    Final(QueueError),
}

impl From<lapin::Error> for OpFailure {
    fn from(e: lapin::Error) -> Self {
        OpFailure::Broker(e)
    }
}

impl OpFailure {
    fn retryable(&self) -> bool {
        match self {
            OpFailure::Broker(e) => !is_permanent(e),
            OpFailure::Suspect(_) => true,
            OpFailure::Final(_) => false,
        }
    }
}

/// A broker error that says the setup is wrong: credentials or a vhost refused
/// (ACCESS_REFUSED, NOT_ALLOWED, INVALID_PATH), a declaration with other arguments
/// (PRECONDITION_FAILED), no common protocol or auth mechanism. Reported as
/// [`QueueError::Config`].
fn is_config_error(e: &lapin::Error) -> bool {
    match e.kind() {
        ErrorKind::ProtocolError(a) => matches!(
            a.kind(),
            AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED | AMQPSoftError::PRECONDITIONFAILED)
                | AMQPErrorKind::Hard(AMQPHardError::NOTALLOWED | AMQPHardError::INVALIDPATH)
        ),
        ErrorKind::AuthProviderError(_) | ErrorKind::InvalidProtocolVersion(_) => true,
        _ => false,
    }
}

/// A broker error that reconnecting will not cure: a configuration error, or another
/// channel-level refusal of the operation (NOT_FOUND, RESOURCE_LOCKED).
fn is_permanent(e: &lapin::Error) -> bool {
    e.is_amqp_soft_error() || is_config_error(e)
}

fn short(s: String) -> Result<ShortString, QueueError> {
    ShortString::try_new(s).map_err(|e| QueueError::NotAccepted(format!("name too long: {e}")))
}

/// Job names become queue names and routing keys.
fn check_job(job: &str) -> Result<(), QueueError> {
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

fn report_queue(job: &str) -> String {
    format!("{REPORT_EXCHANGE}.{job}")
}

fn dead_queue(job: &str) -> String {
    format!("{DEAD_QUEUE}.{job}")
}

fn task_key(job: &str) -> String {
    format!("job.{job}")
}

fn quorum_args() -> FieldTable {
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("quorum".into()),
    );
    args
}

fn task_queue_args(limit: u32) -> FieldTable {
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

fn durable_queue() -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    }
}

fn durable_exchange() -> ExchangeDeclareOptions {
    ExchangeDeclareOptions {
        durable: true,
        ..ExchangeDeclareOptions::default()
    }
}

async fn declare_topology(ch: &Channel, limit: u32) -> lapin::Result<()> {
    let ex = |name: &str, kind: ExchangeKind| {
        ch.exchange_declare(name.into(), kind, durable_exchange(), FieldTable::default())
    };
    ex(TASK_EXCHANGE, ExchangeKind::Topic).await?;
    ex(DEAD_EXCHANGE, ExchangeKind::Topic).await?;
    ex(REPORT_EXCHANGE, ExchangeKind::Direct).await?;
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

async fn declare_job(ch: &Channel, job: &str) -> lapin::Result<()> {
    let dead = dead_queue(job);
    let reports = report_queue(job);
    ch.queue_declare(dead.as_str().into(), durable_queue(), quorum_args())
        .await?;
    ch.queue_bind(
        dead.as_str().into(),
        DEAD_EXCHANGE.into(),
        task_key(job).into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    ch.queue_declare(reports.as_str().into(), durable_queue(), quorum_args())
        .await?;
    ch.queue_bind(
        reports.as_str().into(),
        REPORT_EXCHANGE.into(),
        job.into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    Ok(())
}

fn header<'a>(d: &'a LapinDelivery, key: &str) -> Option<&'a AMQPValue> {
    d.properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get(key))
}

fn as_int(v: &AMQPValue) -> Option<i64> {
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

fn as_text(v: &AMQPValue) -> Option<String> {
    match v {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_string()),
        _ => None,
    }
}

/// 1 on the first delivery; quorum queues count redeliveries in `x-delivery-count`.
fn attempt_of(d: &LapinDelivery) -> u32 {
    let count = header(d, "x-delivery-count").and_then(as_int).unwrap_or(0);
    u32::try_from(count.max(0))
        .unwrap_or(u32::MAX - 1)
        .saturating_add(1)
}

/// Why a task was dead-lettered, from the `x-death` (or `x-first-death-*`) headers.
fn death_reason(d: &LapinDelivery, limit: u32) -> String {
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

impl AmqpQueue {
    /// Connects (retrying with backoff for up to [`DEFAULT_OUTAGE_BUDGET`], so a worker
    /// started before the broker still comes up) and declares the shared topology.
    pub async fn connect(url: &str, delivery_limit: u32) -> Result<AmqpQueue, QueueError> {
        Self::connect_with(url, AmqpOptions::new(delivery_limit)).await
    }

    /// [`AmqpQueue::connect`] with explicit options.
    pub async fn connect_with(url: &str, opts: AmqpOptions) -> Result<AmqpQueue, QueueError> {
        let redacted = redact(url);
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

    /// `Ok` while connected and the task consumer (a worker's) is open.
    pub fn consuming(&self) -> Result<(), String> {
        self.connected()?;
        match self.inner.task_channel.lock().unwrap().as_ref() {
            Some(c) if c.status().connected() => Ok(()),
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

impl Inner {
    /// `msg` with the password removed.
    fn scrub(&self, msg: &dyn fmt::Display) -> String {
        let mut s = msg.to_string();
        for h in &self.secret.hide {
            s = s.replace(h.as_str(), "***");
        }
        s
    }

    /// The error of a broker failure that is not retried (any more): a configuration
    /// error, or the broker unavailable.
    fn failed(&self, what: &str, e: &lapin::Error) -> QueueError {
        if is_config_error(e) {
            QueueError::Config {
                what: format!("{what} ({})", self.redacted),
                reason: self.scrub(e),
            }
        } else {
            QueueError::Unavailable(format!("{what} ({}): {}", self.redacted, self.scrub(e)))
        }
    }

    fn check_open(&self) -> Result<(), QueueError> {
        if self.closed.load(Ordering::SeqCst) {
            Err(QueueError::Closed)
        } else {
            Ok(())
        }
    }

    /// The current connection, reconnecting (with backoff) if it is gone.
    async fn link(&self) -> Result<Arc<Link>, QueueError> {
        self.check_open()?;
        let mut guard = self.link.lock().await;
        self.check_open()?;
        if let Some(link) = guard.as_ref() {
            if link.healthy() {
                return Ok(link.clone());
            }
            warn!(url = %self.redacted, "RabbitMQ connection lost; reconnecting");
            let old = guard.take().expect("checked");
            tokio::spawn(async move {
                let _ = old.conn.close(200, "reconnecting".into()).await;
            });
        }
        *self.current.lock().unwrap() = None;
        let link = Arc::new(self.connect_with_backoff().await?);
        *guard = Some(link.clone());
        *self.current.lock().unwrap() = Some(link.clone());
        Ok(link)
    }

    /// Drops the connection of generation `generation` (if it is still the current
    /// one) so that the next operation reconnects.
    async fn invalidate(&self, generation: u64) {
        let mut guard = self.link.lock().await;
        if guard.as_ref().is_some_and(|l| l.generation == generation) {
            *self.current.lock().unwrap() = None;
            let old = guard.take().expect("checked");
            tokio::spawn(async move {
                let _ = old.conn.close(200, "reconnecting".into()).await;
            });
        }
    }

    async fn connect_with_backoff(&self) -> Result<Link, QueueError> {
        let budget = self.opts.connect_timeout;
        let deadline = Instant::now() + budget;
        let tries = &AtomicU32::new(0);
        let this = self;
        let attempt = move || async move {
            this.check_open().map_err(OpFailure::Final)?;
            tries.fetch_add(1, Ordering::Relaxed);
            let limit = deadline
                .saturating_duration_since(Instant::now())
                .clamp(Duration::from_millis(50), ATTEMPT_TIMEOUT);
            match tokio::time::timeout(limit, this.connect_once()).await {
                Ok(Ok(link)) => Ok(link),
                Ok(Err(e)) => Err(OpFailure::Broker(e)),
                Err(_) => Err(OpFailure::Suspect(format!(
                    "attempt timed out after {limit:?}"
                ))),
            }
        };
        let res = attempt
            .retry(RetryPolicy::reconnect(budget).builder())
            .sleep(tokio::time::sleep)
            .when(OpFailure::retryable)
            .adjust(|_, wait| {
                let remaining = deadline.saturating_duration_since(Instant::now());
                wait.filter(|_| !remaining.is_zero())
                    .map(|w| w.min(remaining))
            })
            .notify(|f, _| {
                warn!(url = %self.redacted, attempt = tries.load(Ordering::Relaxed), error = %self.describe(f), "cannot connect to RabbitMQ; retrying");
            })
            .await;
        match res {
            Ok(link) => {
                let reconnect = link.generation > 1;
                info!(
                    url = %self.redacted,
                    generation = link.generation,
                    attempts = tries.load(Ordering::Relaxed),
                    "{} RabbitMQ",
                    if reconnect { "reconnected to" } else { "connected to" }
                );
                Ok(link)
            }
            Err(OpFailure::Final(e)) => Err(e),
            Err(OpFailure::Broker(e)) if is_permanent(&e) => {
                warn!(url = %self.redacted, error = %self.scrub(&e), "RabbitMQ refused the setup");
                Err(self.failed("RabbitMQ refused the setup", &e))
            }
            Err(f) => {
                let err = self.describe(&f);
                warn!(url = %self.redacted, attempt = tries.load(Ordering::Relaxed), error = %err, "cannot connect to RabbitMQ; giving up");
                Err(QueueError::Unavailable(format!(
                    "cannot connect to RabbitMQ at {} within {budget:?} ({} attempts): {err}",
                    self.redacted,
                    tries.load(Ordering::Relaxed)
                )))
            }
        }
    }

    async fn connect_once(&self) -> lapin::Result<Link> {
        let props = ConnectionProperties::default()
            .with_connection_name(self.opts.connection_name.as_str().into());
        let conn = Connection::connect_uri(self.secret.uri.clone(), props).await?;
        let setup = conn.create_channel().await?;
        declare_topology(&setup, self.opts.delivery_limit).await?;
        let jobs: Vec<String> = self.open_jobs.lock().unwrap().iter().cloned().collect();
        for job in &jobs {
            declare_job(&setup, job).await?;
        }
        let _ = setup.close(200, "topology declared".into()).await;
        let publisher = conn.create_channel().await?;
        publisher
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(Link {
            generation,
            conn,
            publisher,
        })
    }

    /// `f`'s failure, for logs and errors (without the password).
    fn describe(&self, f: &OpFailure) -> String {
        match f {
            OpFailure::Broker(e) => self.scrub(e),
            OpFailure::Suspect(why) => why.clone(),
            OpFailure::Final(e) => self.scrub(e),
        }
    }

    /// The one retry loop of broker operations: runs `op` on the current connection
    /// (reconnecting first if it is gone) and retries as [`RetryPolicy::broker_operation`]
    /// says while the failure is [`OpFailure::retryable`], reconnecting when the
    /// connection broke or cannot be trusted.
    async fn with_link<T, F, Fut>(&self, what: &str, op: F) -> Result<T, QueueError>
    where
        F: Fn(Arc<Link>) -> Fut,
        Fut: Future<Output = Result<T, OpFailure>>,
    {
        let (this, op) = (self, &op);
        let attempt = move || async move {
            let link = this.link().await.map_err(OpFailure::Final)?;
            match op(link.clone()).await {
                Ok(v) => Ok(v),
                Err(f) => {
                    let suspect = matches!(f, OpFailure::Suspect(_));
                    if f.retryable() && (suspect || !link.healthy()) {
                        this.invalidate(link.generation).await;
                    }
                    Err(f)
                }
            }
        };
        attempt
            .retry(RetryPolicy::broker_operation().builder())
            .sleep(tokio::time::sleep)
            .when(OpFailure::retryable)
            .notify(|f, _| {
                warn!(url = %self.redacted, error = %self.describe(f), "{what} failed; retrying");
            })
            .await
            .map_err(|f| {
                let err = self.describe(&f);
                warn!(url = %self.redacted, error = %err, "{what} failed");
                match f {
                    OpFailure::Final(e) => e,
                    OpFailure::Broker(e) => self.failed(what, &e),
                    OpFailure::Suspect(_) => {
                        QueueError::Unavailable(format!("{what} ({}): {err}", self.redacted))
                    }
                }
            })
    }

    /// Runs `f` on a fresh channel, retrying after a broken connection.
    async fn on_channel<T, F, Fut>(&self, what: &str, f: F) -> Result<T, QueueError>
    where
        F: Fn(Channel) -> Fut,
        Fut: Future<Output = lapin::Result<T>>,
    {
        let f = &f;
        self.with_link(what, |link| async move {
            let ch = link.conn.create_channel().await?;
            let out = f(ch.clone()).await?;
            let _ = ch.close(200, "done".into()).await;
            Ok(out)
        })
        .await
    }

    /// Publishes persistent, mandatory and confirmed; retries after a broken connection.
    async fn publish(
        &self,
        what: &str,
        exchange: &str,
        key: String,
        body: &[u8],
    ) -> Result<(), QueueError> {
        let key = &short(key)?;
        self.with_link(what, |link| async move {
            let res = tokio::time::timeout(CONFIRM_TIMEOUT, async {
                link.publisher
                    .basic_publish(
                        exchange.into(),
                        key.clone(),
                        BasicPublishOptions {
                            mandatory: true,
                            ..BasicPublishOptions::default()
                        },
                        body,
                        BasicProperties::default().with_delivery_mode(2),
                    )
                    .await?
                    .await
            })
            .await;
            match res {
                Ok(Ok(Confirmation::Ack(None))) => Ok(()),
                Ok(Ok(Confirmation::Ack(Some(ret)) | Confirmation::Nack(Some(ret)))) => {
                    Err(OpFailure::Final(QueueError::NotAccepted(format!(
                        "{what} to {exchange} with key {key} returned: {} {}",
                        ret.reply_code, ret.reply_text
                    ))))
                }
                Ok(Ok(Confirmation::Nack(None))) => Err(OpFailure::Final(QueueError::NotAccepted(
                    format!("{what} to {exchange} with key {key} nacked by the broker"),
                ))),
                // Cannot happen on a confirm channel; do not trust this channel.
                Ok(Ok(Confirmation::NotRequested)) => {
                    Err(OpFailure::Suspect("publish not confirmed".into()))
                }
                // Permissions or arguments the broker refuses: no retry helps.
                Ok(Err(e)) if is_config_error(&e) => Err(OpFailure::Broker(e)),
                // Even another channel-level refusal (NOT_FOUND: an exchange deleted
                // under us) is retried: reconnecting redeclares the topology.
                Ok(Err(e)) => Err(OpFailure::Suspect(self.scrub(&e))),
                Err(_) => Err(OpFailure::Suspect(format!(
                    "no confirm within {CONFIRM_TIMEOUT:?}"
                ))),
            }
        })
        .await
    }

    async fn open_task_consumer(&self) -> Result<TaskConsumer, QueueError> {
        let tc = self
            .with_link("consuming tasks", |link| async move {
                let channel = link.conn.create_channel().await?;
                channel
                    .basic_qos(self.opts.prefetch, BasicQosOptions::default())
                    .await?;
                // Recreates the queue if it was deleted under us.
                channel
                    .queue_declare(
                        TASK_QUEUE.into(),
                        durable_queue(),
                        task_queue_args(self.opts.delivery_limit),
                    )
                    .await?;
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

    async fn open_event_consumers(
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
                Event::Report(d.data)
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

    fn job_events(&self, job: &str) -> Arc<JobEvents> {
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
fn forward(
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

/// Settles one task delivery; dropped unsettled, it requeues the task.
struct AmqpSettle {
    acker: Option<Acker>,
    runtime: Option<tokio::runtime::Handle>,
}

impl AmqpSettle {
    fn stale(&self, op: &str) -> QueueError {
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

    async fn reject(mut self: Box<Self>) -> Result<(), QueueError> {
        let acker = self.acker.take().expect("settled once");
        match acker.reject(BasicRejectOptions { requeue: false }).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.stale("reject")),
            Err(e) => Err(QueueError::Unavailable(format!("reject: {e}"))),
        }
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
        let inner = &self.inner;
        let mut guard = inner.tasks.lock().await;
        let mut backoff: Option<Backoff> = None;
        loop {
            inner.check_open()?;
            let alive = guard
                .as_ref()
                .is_some_and(|tc| tc.channel.status().connected());
            if !alive {
                *guard = None;
                *inner.task_channel.lock().unwrap() = None;
                let tc = inner.open_task_consumer().await?;
                *inner.task_channel.lock().unwrap() = Some(tc.channel.clone());
                *guard = Some(tc);
            }
            let tc = guard.as_mut().expect("just set");
            let stopped = match tc.consumer.next().await {
                Some(Ok(d)) => {
                    let attempt = attempt_of(&d);
                    let settle = AmqpSettle {
                        acker: Some(d.acker.clone()),
                        runtime: tokio::runtime::Handle::try_current().ok(),
                    };
                    return Ok(Delivery::new(d.data, attempt, Box::new(settle)));
                }
                Some(Err(e)) => format!("failed: {}", inner.scrub(&e)),
                None => "cancelled".to_string(),
            };
            warn!(url = %inner.redacted, "task consumer {stopped}; consuming again");
            if tc.opened.elapsed() > Duration::from_secs(10) {
                backoff = None; // It worked for a while: a new incident.
            }
            *guard = None;
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
        let inner = &self.inner;
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

    #[test]
    fn redact_drops_user_info() {
        assert_eq!(
            redact("amqp://guest:s3cret@host:5672/%2f"),
            "amqp://host:5672/%2f"
        );
        assert_eq!(redact("amqps://user@host/vh"), "amqps://host/vh");
        assert_eq!(redact("amqp://host"), "amqp://host");
        assert!(!redact("not a url with s3cret").contains("s3cret"));
    }

    #[test]
    fn job_names() {
        assert!(check_job("j-1_a.b").is_ok());
        assert!(check_job("").is_err());
        assert!(check_job("a#").is_err());
        assert!(check_job("a*b").is_err());
        assert!(check_job(&"x".repeat(201)).is_err());
    }

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
}
