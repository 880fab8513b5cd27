//! The connection to the broker: one [`Link`] (connection + confirm-mode publisher
//! channel) at a time, reconnected with [`RetryPolicy::reconnect`] within the outage
//! budget; the one retry helper of broker operations ([`Inner::with_link`]) and what
//! is built on it (operations on a fresh channel, confirmed publishes); the
//! classification of broker errors (transient, refused, configuration) and the
//! scrubbing of the password from everything shown.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use covmerge_proto::retry::{BackoffBuilder, ExponentialBuilder, RetryPolicy, Retryable};
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::protocol::{AMQPErrorKind, AMQPHardError, AMQPSoftError};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ErrorKind};
use tracing::{info, warn};

use super::topology::{declare_job, declare_topology, TASK_EXCHANGE};
use super::Inner;
use crate::QueueError;

/// AMQP's reply code of a mandatory message that no queue is bound for.
const NO_ROUTE: u16 = 312;
/// How long a publish waits for the broker's confirm before giving the connection up.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);
/// One connection attempt (TCP + AMQP handshake + topology) at most.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);

pub(super) struct Link {
    pub(super) generation: u64,
    pub(super) conn: Connection,
    /// Confirm-mode channel shared by all publishes.
    pub(super) publisher: Channel,
}

impl Link {
    pub(super) fn healthy(&self) -> bool {
        self.conn.status().connected() && self.publisher.status().connected()
    }
}

/// Pauses of [`RetryPolicy::reconnect`] within a wall-clock budget, for a loop that is
/// not one operation (a consumer that keeps stopping).
pub(super) struct Backoff {
    delays: <ExponentialBuilder as BackoffBuilder>::Backoff,
    deadline: Instant,
}

impl Backoff {
    pub(super) fn new(budget: Duration) -> Self {
        Backoff {
            delays: RetryPolicy::reconnect(budget).builder().build(),
            deadline: Instant::now() + budget,
        }
    }

    /// Sleeps before the next attempt; `false` when the budget is spent.
    pub(super) async fn wait(&mut self) -> bool {
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
pub(super) enum OpFailure {
    /// The broker or the connection failed: retried (after reconnecting if the
    /// connection broke) unless it is a channel-level refusal ([`is_permanent`]).
    Broker(lapin::Error),
    /// The connection cannot be trusted (no confirm in time, say): reconnect and retry.
    Suspect(String),
    /// Worth another try on the same connection (the topology was just declared
    /// again after a message found no route).
    Again(String),
    /// Returned as is: a refused message, the queue closed, reconnecting gave up.
    Final(QueueError),
}

impl From<lapin::Error> for OpFailure {
    fn from(e: lapin::Error) -> Self {
        OpFailure::Broker(e)
    }
}

impl OpFailure {
    pub(super) fn retryable(&self) -> bool {
        match self {
            OpFailure::Broker(e) => !is_permanent(e),
            OpFailure::Suspect(_) | OpFailure::Again(_) => true,
            OpFailure::Final(_) => false,
        }
    }
}

/// A broker error that says the setup is wrong: credentials or a vhost refused
/// (ACCESS_REFUSED, NOT_ALLOWED, INVALID_PATH), a declaration with other arguments
/// (PRECONDITION_FAILED), no common protocol or auth mechanism. Reported as
/// [`QueueError::Config`].
pub(super) fn is_config_error(e: &lapin::Error) -> bool {
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
pub(super) fn is_permanent(e: &lapin::Error) -> bool {
    e.is_amqp_soft_error() || is_config_error(e)
}

pub(super) fn short(s: String) -> Result<ShortString, QueueError> {
    ShortString::try_new(s).map_err(|e| QueueError::NotAccepted(format!("name too long: {e}")))
}

impl Inner {
    /// `msg` with the password removed.
    pub(super) fn scrub(&self, msg: &dyn fmt::Display) -> String {
        let mut s = msg.to_string();
        for h in &self.secret.hide {
            s = s.replace(h.as_str(), "***");
        }
        s
    }

    /// The error of a broker failure that is not retried (any more): a configuration
    /// error, or the broker unavailable.
    pub(super) fn failed(&self, what: &str, e: &lapin::Error) -> QueueError {
        if is_config_error(e) {
            QueueError::Config {
                what: format!("{what} ({})", self.redacted),
                reason: self.scrub(e),
            }
        } else {
            QueueError::Unavailable(format!("{what} ({}): {}", self.redacted, self.scrub(e)))
        }
    }

    pub(super) fn check_open(&self) -> Result<(), QueueError> {
        if self.closed.load(Ordering::SeqCst) {
            Err(QueueError::Closed)
        } else {
            Ok(())
        }
    }

    /// The current connection, reconnecting (with backoff) if it is gone.
    pub(super) async fn link(&self) -> Result<Arc<Link>, QueueError> {
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
    pub(super) async fn invalidate(&self, generation: u64) {
        let mut guard = self.link.lock().await;
        if guard.as_ref().is_some_and(|l| l.generation == generation) {
            *self.current.lock().unwrap() = None;
            let old = guard.take().expect("checked");
            tokio::spawn(async move {
                let _ = old.conn.close(200, "reconnecting".into()).await;
            });
        }
    }

    pub(super) async fn connect_with_backoff(&self) -> Result<Link, QueueError> {
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

    /// Declares the whole topology (exchanges, queues, bindings) and the queues of the
    /// jobs this process opened, on a channel of its own: on every (re)connect, and
    /// when a message found no route (a queue or binding deleted under us).
    pub(super) async fn declare_all(&self, conn: &Connection) -> lapin::Result<()> {
        let setup = conn.create_channel().await?;
        declare_topology(&setup, self.opts.delivery_limit).await?;
        let jobs: Vec<String> = self.open_jobs.lock().unwrap().iter().cloned().collect();
        for job in &jobs {
            declare_job(&setup, job).await?;
        }
        let _ = setup.close(200, "topology declared".into()).await;
        Ok(())
    }

    pub(super) async fn connect_once(&self) -> lapin::Result<Link> {
        let props = ConnectionProperties::default()
            .with_connection_name(self.opts.connection_name.as_str().into());
        let conn = Connection::connect_uri(self.secret.uri.clone(), props).await?;
        self.declare_all(&conn).await?;
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
    pub(super) fn describe(&self, f: &OpFailure) -> String {
        match f {
            OpFailure::Broker(e) => self.scrub(e),
            OpFailure::Suspect(why) | OpFailure::Again(why) => why.clone(),
            OpFailure::Final(e) => self.scrub(e),
        }
    }

    /// The one retry loop of broker operations: runs `op` on the current connection
    /// (reconnecting first if it is gone) and retries as [`RetryPolicy::broker_operation`]
    /// says while the failure is [`OpFailure::retryable`], reconnecting when the
    /// connection broke or cannot be trusted.
    pub(super) async fn with_link<T, F, Fut>(&self, what: &str, op: F) -> Result<T, QueueError>
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
                    OpFailure::Again(_) => {
                        QueueError::NotAccepted(format!("{what} ({}): {err}", self.redacted))
                    }
                }
            })
    }

    /// Runs `f` on a fresh channel, retrying after a broken connection.
    pub(super) async fn on_channel<T, F, Fut>(&self, what: &str, f: F) -> Result<T, QueueError>
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
    pub(super) async fn publish(
        &self,
        what: &str,
        exchange: &str,
        key: String,
        body: &[u8],
    ) -> Result<(), QueueError> {
        self.publish_with(what, exchange, key, body, None).await
    }

    /// [`Inner::publish`] with headers. A task (or control message) that finds no
    /// route (`312 NO_ROUTE`: the task queue or its binding was deleted) declares the
    /// whole topology again and is published again at once.
    pub(super) async fn publish_with(
        &self,
        what: &str,
        exchange: &str,
        key: String,
        body: &[u8],
        headers: Option<FieldTable>,
    ) -> Result<(), QueueError> {
        let key = &short(key)?;
        let headers = &headers;
        self.with_link(what, |link| async move {
            let mut props = BasicProperties::default().with_delivery_mode(2);
            if let Some(h) = headers {
                props = props.with_headers(h.clone());
            }
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
                        props,
                    )
                    .await?
                    .await
            })
            .await;
            match res {
                Ok(Ok(Confirmation::Ack(None))) => Ok(()),
                Ok(Ok(Confirmation::Ack(Some(ret)) | Confirmation::Nack(Some(ret))))
                    if ret.reply_code == NO_ROUTE && exchange == TASK_EXCHANGE =>
                {
                    // The task queue or its binding is gone (a report without a route
                    // means its job is closed: no redeclaring brings that back).
                    warn!(exchange, key = %key, "{what}: no route (312 NO_ROUTE); declaring the topology again");
                    self.declare_all(&link.conn).await?;
                    Err(OpFailure::Again(format!(
                        "{what} to {exchange} with key {key} returned: {} {}",
                        ret.reply_code, ret.reply_text
                    )))
                }
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
}
