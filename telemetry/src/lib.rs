//! `covmerge-telemetry`: what a running worker or coordinator tells its operators.
//!
//! - [`metrics()`]: the process's Prometheus metrics (one registry per process, all
//!   names prefixed `covmerge_`), updated by the worker loop and the coordinator.
//! - [`serve`]: `--listen ADDR` — an HTTP/1.1 server with `/metrics` (OpenMetrics
//!   text), `/healthz` (the process answers) and `/readyz` (the broker connection is
//!   up and, for a worker, the task consumer is open; 503 while draining after
//!   SIGTERM, so that a load balancer or Kubernetes stops counting the pod).
//!
//! - [`Progress`]: live counters an embedded run's progress line reads from its
//!   in-process workers.
//!
//! Counters count what *this process* did: a task executed twice (a redelivery after a
//! worker died mid-task) is counted twice, by whichever workers ran it. Summed over a
//! fleet without such faults they equal the manifest's totals.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use tokio::net::TcpListener;
use tracing::{debug, info, warn};

/// Live counters of this process's task loops, for a progress display.
#[derive(Debug, Default)]
pub struct Progress {
    /// Data rows read by splits so far.
    pub rows_read: AtomicU64,
    /// Shards merged so far.
    pub shards_merged: AtomicU64,
}

/// Labels `kind` (split, merge) and `outcome`.
pub type TaskLabels = [(&'static str, &'static str); 2];
/// Label `kind`.
pub type KindLabel = [(&'static str, &'static str); 1];
/// Labels `job_id` and `state` (pending, running, done, failed); not `job`, which
/// Prometheus reserves for the scrape job.
pub type JobStateLabels = [(&'static str, String); 2];

/// Task outcomes counted by `covmerge_tasks_total{outcome}`.
pub mod outcome {
    /// Executed, output written and reported.
    pub const DONE: &str = "done";
    /// Its marker existed: reported again, not redone.
    pub const ALREADY_DONE: &str = "already_done";
    /// Failed in a way a retry may cure (including storage outages): handed back.
    pub const RETRIED: &str = "retried";
    /// Failed for good (bad input, refused by admission): rejected, dead-lettered.
    pub const FAILED: &str = "failed";
    /// Undecodable or out of bounds: rejected at once (poison).
    pub const POISON: &str = "poison";
    /// Still running when the grace period after SIGTERM ended: handed back.
    pub const HANDED_BACK: &str = "handed_back";
    /// This worker could not run it (its own configuration: store, credentials,
    /// source): handed back to another worker, not counted against the task.
    pub const MISCONFIGURED: &str = "misconfigured";
}

/// Every metric of a covmerge process.
pub struct Metrics {
    registry: Registry,
    /// `covmerge_tasks_total{kind,outcome}`.
    pub tasks: Family<TaskLabels, Counter>,
    /// `covmerge_task_duration_seconds{kind}`: executions (not re-reports).
    pub task_duration: Family<KindLabel, Histogram>,
    /// `covmerge_tasks_in_flight`: tasks this worker is executing now.
    pub in_flight: Gauge,
    /// `covmerge_task_redeliveries_total`: deliveries with attempt > 1.
    pub redeliveries: Counter,
    /// `covmerge_dead_letters_total`: rejected by a worker (it dead-letters them), or
    /// seen dead-lettered by a coordinator.
    pub dead_letters: Counter,
    /// `covmerge_rows_read_total`: data rows read by splits.
    pub rows_read: Counter,
    /// `covmerge_rows_bad_total`: malformed rows skipped by splits.
    pub rows_bad: Counter,
    /// `covmerge_rows_merged_total`: rows projected onto the base by merges.
    pub rows_merged: Counter,
    /// `covmerge_rows_lost_total`: rows whose line could not be projected.
    pub rows_lost: Counter,
    /// `covmerge_rows_without_line_total`: rows with `sl` < 1.
    pub rows_without_line: Counter,
    /// `covmerge_rows_deleted_total`: rows of files deleted at the base.
    pub rows_deleted: Counter,
    /// `covmerge_bytes_read_total{what}`: input (decompressed CSV), chunk.
    pub bytes_read: Family<KindLabel, Counter>,
    /// `covmerge_bytes_written_total{what}`: chunk, part.
    pub bytes_written: Family<KindLabel, Counter>,
    /// `covmerge_job_tasks{job_id,state}`: a coordinator's tasks of the current phase.
    pub job_tasks: Family<JobStateLabels, Gauge>,
    /// `covmerge_job_rows_read{job_id}` (coordinator): rows of finished splits.
    pub job_rows_read: Family<[(&'static str, String); 1], Gauge>,
    /// `covmerge_up`-style readiness as a metric: 1 ready, 0 not.
    pub ready: Gauge,
    /// `covmerge_worker_config_failures`: tasks this worker handed back in a row
    /// because of its configuration (0 after any task it could run); it exits at
    /// `--max-config-failures`.
    pub config_failures: Gauge,
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("covmerge");
        let m = Metrics::unregistered();
        m.register_tasks(&mut registry);
        m.register_rows(&mut registry);
        m.register_bytes_and_state(&mut registry);
        m.start_series(&mut registry);
        Metrics { registry, ..m }
    }

    /// Every metric, registered nowhere yet.
    fn unregistered() -> Self {
        Metrics {
            registry: Registry::default(),
            tasks: Family::default(),
            task_duration: Family::new_with_constructor(|| {
                // 50 ms to ~27 min.
                Histogram::new(exponential_buckets(0.05, 2.0, 16))
            }),
            in_flight: Gauge::default(),
            redeliveries: Counter::default(),
            dead_letters: Counter::default(),
            rows_read: Counter::default(),
            rows_bad: Counter::default(),
            rows_merged: Counter::default(),
            rows_lost: Counter::default(),
            rows_without_line: Counter::default(),
            rows_deleted: Counter::default(),
            bytes_read: Family::default(),
            bytes_written: Family::default(),
            job_tasks: Family::default(),
            job_rows_read: Family::default(),
            ready: Gauge::default(),
            config_failures: Gauge::default(),
        }
    }

    /// Registers the metrics of tasks: settled, their duration, in flight,
    /// redelivered, dead-lettered.
    fn register_tasks(&self, r: &mut Registry) {
        let m = self;
        r.register(
            "tasks",
            "Tasks settled by this worker, by kind and outcome",
            m.tasks.clone(),
        );
        r.register_with_unit(
            "task_duration",
            "Time to execute a task (read, compute, write outputs)",
            Unit::Seconds,
            m.task_duration.clone(),
        );
        r.register(
            "tasks_in_flight",
            "Tasks being executed now",
            m.in_flight.clone(),
        );
        r.register(
            "task_redeliveries",
            "Task deliveries that were redeliveries (attempt > 1)",
            m.redeliveries.clone(),
        );
        r.register(
            "dead_letters",
            "Tasks dead-lettered (rejected by this worker, or seen by this coordinator)",
            m.dead_letters.clone(),
        );
    }

    /// Registers the metrics of rows: read, bad, merged, lost, without a line, of
    /// deleted files.
    fn register_rows(&self, r: &mut Registry) {
        let m = self;
        r.register("rows_read", "Data rows read by splits", m.rows_read.clone());
        r.register(
            "rows_bad",
            "Malformed rows skipped by splits",
            m.rows_bad.clone(),
        );
        r.register(
            "rows_merged",
            "Rows projected onto the base revision by merges",
            m.rows_merged.clone(),
        );
        r.register(
            "rows_lost",
            "Rows whose line could not be projected (version missing, line changed)",
            m.rows_lost.clone(),
        );
        r.register(
            "rows_without_line",
            "Rows without line information (sl < 1)",
            m.rows_without_line.clone(),
        );
        r.register(
            "rows_deleted",
            "Rows of files that do not exist at the base revision",
            m.rows_deleted.clone(),
        );
    }

    /// Registers the metrics of bytes read and written, of the job's tasks and rows,
    /// and of the process's state.
    fn register_bytes_and_state(&self, r: &mut Registry) {
        let m = self;
        r.register_with_unit(
            "read",
            "Bytes read: input (decompressed CSV) by splits, chunk by merges",
            Unit::Bytes,
            m.bytes_read.clone(),
        );
        r.register_with_unit(
            "written",
            "Bytes written to the store: chunk by splits, part by merges",
            Unit::Bytes,
            m.bytes_written.clone(),
        );
        r.register(
            "job_tasks",
            "A coordinator's tasks of the job's current phase, by state",
            m.job_tasks.clone(),
        );
        r.register(
            "job_rows_read",
            "Rows read by the job's finished splits (coordinator)",
            m.job_rows_read.clone(),
        );
        r.register(
            "ready",
            "1 when the process is ready (broker connected, consuming, not draining)",
            m.ready.clone(),
        );
        r.register(
            "worker_config_failures",
            "Tasks handed back in a row because this worker's configuration is wrong",
            m.config_failures.clone(),
        );
    }

    /// Creates the series that exist from the start, and registers the build's.
    fn start_series(&self, r: &mut Registry) {
        let m = self;
        let build: Family<KindLabel, Gauge> = Family::default();
        build
            .get_or_create(&[("version", env!("CARGO_PKG_VERSION"))])
            .set(1);
        // Series that exist from the start, so that dashboards and rate() see zeros
        // rather than nothing before the first task.
        for kind in ["split", "merge"] {
            let _ = m.task_duration.get_or_create(&[("kind", kind)]);
        }
        let _ = m.bytes_read.get_or_create(&[("what", "input")]);
        let _ = m.bytes_read.get_or_create(&[("what", "chunk")]);
        let _ = m.bytes_written.get_or_create(&[("what", "chunk")]);
        let _ = m.bytes_written.get_or_create(&[("what", "part")]);
        // A gauge rather than an OpenMetrics `info`: the classic text format (promtool,
        // older scrapers) has no info type.
        r.register("build_info", "covmerge version (value 1)", build);
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        encode(&mut s, &self.registry).expect("writing to a String cannot fail");
        s
    }

    /// The same metrics in Prometheus's classic text format (0.0.4), for clients that
    /// do not ask for OpenMetrics (curl, promtool, older scrapers): counters' HELP and
    /// TYPE lines name the `_total` series, and there are no UNIT or EOF lines.
    pub fn encode_classic(&self) -> String {
        let open = self.encode();
        let mut counters = std::collections::HashSet::new();
        for line in open.lines() {
            if let Some(name) = line
                .strip_prefix("# TYPE ")
                .and_then(|l| l.strip_suffix(" counter"))
            {
                counters.insert(name.to_string());
            }
        }
        let mut out = String::with_capacity(open.len());
        for line in open.lines() {
            if line.starts_with("# UNIT ") || line == "# EOF" {
                continue;
            }
            let meta = ["# HELP ", "# TYPE "]
                .into_iter()
                .find(|p| line.starts_with(p));
            match meta {
                Some(p) => {
                    let rest = &line[p.len()..];
                    let name = rest.split(' ').next().unwrap_or_default();
                    if counters.contains(name) {
                        out.push_str(&format!("{p}{name}_total{}", &rest[name.len()..]));
                    } else {
                        out.push_str(line);
                    }
                }
                None => out.push_str(line),
            }
            out.push('\n');
        }
        out
    }

    /// Counts a settled task.
    pub fn task(&self, kind: &'static str, outcome: &'static str) {
        self.tasks
            .get_or_create(&[("kind", kind), ("outcome", outcome)])
            .inc();
    }

    /// Counts `n` bytes read, labelled `what` (`input`, `chunk`).
    pub fn bytes_read(&self, what: &'static str, n: u64) {
        self.bytes_read.get_or_create(&[("what", what)]).inc_by(n);
    }

    /// Counts `n` bytes written, labelled `what` (`chunk`, `part`).
    pub fn bytes_written(&self, what: &'static str, n: u64) {
        self.bytes_written
            .get_or_create(&[("what", what)])
            .inc_by(n);
    }

    /// Sets a coordinator's task counts for `job`.
    pub fn job_tasks(&self, job: &str, pending: u64, running: u64, done: u64, failed: u64) {
        for (state, n) in [
            ("pending", pending),
            ("running", running),
            ("done", done),
            ("failed", failed),
        ] {
            self.job_tasks
                .get_or_create(&[("job_id", job.to_string()), ("state", state.to_string())])
                .set(n as i64);
        }
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// This process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// What `/readyz` answers.
pub struct Health {
    draining: AtomicBool,
    /// Whether the broker side is ready, and if not why (e.g. "broker disconnected").
    check: Mutex<Option<ReadyCheck>>,
}

/// A readiness probe of a dependency: `Err(why)` when not ready.
pub type ReadyCheck = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

impl Default for Health {
    fn default() -> Self {
        Health {
            draining: AtomicBool::new(false),
            check: Mutex::new(None),
        }
    }
}

impl Health {
    /// A health state, not ready ("starting") until a probe is set with [`Health::set_check`].
    pub fn new() -> Arc<Self> {
        Arc::new(Health::default())
    }

    /// Sets the probe of the broker (and consumer).
    pub fn set_check(&self, check: ReadyCheck) {
        *self.check.lock().unwrap() = Some(check);
    }

    /// SIGTERM: not ready from now on.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// `Ok` when ready, else why not.
    pub fn ready(&self) -> Result<(), String> {
        let r = if self.draining.load(Ordering::SeqCst) {
            Err("draining after SIGTERM".to_string())
        } else {
            match self.check.lock().unwrap().as_ref() {
                Some(c) => c(),
                None => Err("starting".to_string()),
            }
        };
        metrics().ready.set(r.is_ok() as i64);
        r
    }
}

/// The content type of `/metrics` for clients that accept OpenMetrics (Prometheus).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of `/metrics` otherwise.
pub const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

fn respond(req: &Request<hyper::body::Incoming>, health: &Health) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: String| {
        Response::builder()
            .status(status)
            .header("content-type", "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from(body)))
            .expect("valid response")
    };
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".into());
    }
    match req.uri().path() {
        "/metrics" => {
            // Refresh the readiness gauge before the scrape.
            let _ = health.ready();
            let open = req.headers().get_all("accept").iter().any(|v| {
                v.to_str()
                    .is_ok_and(|v| v.contains("application/openmetrics-text"))
            });
            let (ctype, body) = if open {
                (OPENMETRICS, metrics().encode())
            } else {
                (CLASSIC, metrics().encode_classic())
            };
            Response::builder()
                .header("content-type", ctype)
                .body(Full::new(Bytes::from(body)))
                .expect("valid response")
        }
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        "/readyz" => match health.ready() {
            Ok(()) => text(StatusCode::OK, "ready\n".into()),
            Err(why) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n"),
            ),
        },
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics, /healthz, /readyz\n".into(),
        ),
    }
}

/// Binds `addr` and serves the endpoints in the background; returns the bound address
/// (port 0 picks a free one). Fails only if the address cannot be bound.
pub async fn serve(addr: &str, health: Arc<Health>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("--listen {addr}: cannot bind: {e}")))?;
    let local = listener.local_addr()?;
    info!(addr = %local, "serving /metrics, /healthz, /readyz");
    tokio::spawn(async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    warn!(error = %e, "--listen: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let health = health.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let resp = respond(&req, &health);
                    async move { Ok::<_, std::convert::Infallible>(resp) }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, svc)
                    .await
                {
                    debug!(%peer, error = %e, "--listen: connection ended with an error");
                }
            });
        }
    });
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_names_and_types() {
        let m = metrics();
        m.task("merge", outcome::DONE);
        m.rows_merged.inc_by(7);
        m.bytes_written("part", 10);
        m.job_tasks("j1", 1, 2, 3, 0);
        let text = m.encode();
        for want in [
            "# TYPE covmerge_tasks counter",
            "covmerge_tasks_total{kind=\"merge\",outcome=\"done\"} 1",
            "covmerge_rows_merged_total 7",
            "covmerge_written_bytes_total{what=\"part\"} 10",
            "covmerge_job_tasks{job_id=\"j1\",state=\"running\"} 2",
            "# TYPE covmerge_task_duration_seconds histogram",
            "covmerge_build_info{version=\"",
            "# EOF",
        ] {
            assert!(text.contains(want), "{want:?} missing from:\n{text}");
        }
        let classic = m.encode_classic();
        assert!(classic.contains("# TYPE covmerge_tasks_total counter\n"));
        assert!(classic.contains("# HELP covmerge_rows_merged_total Rows"));
        assert!(!classic.contains("# EOF") && !classic.contains("# UNIT"));
        assert!(classic.contains("# TYPE covmerge_task_duration_seconds histogram\n"));
    }

    #[tokio::test]
    async fn readyz_follows_the_check_and_draining() {
        let health = Health::new();
        assert_eq!(health.ready(), Err("starting".into()));
        let up = Arc::new(AtomicBool::new(false));
        let u = up.clone();
        health.set_check(Box::new(move || {
            if u.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err("broker disconnected".into())
            }
        }));
        assert!(health.ready().is_err());
        up.store(true, Ordering::SeqCst);
        assert!(health.ready().is_ok());
        health.start_draining();
        assert_eq!(health.ready(), Err("draining after SIGTERM".into()));
    }
}
