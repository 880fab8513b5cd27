//! `AmqpQueue` against a real RabbitMQ (3.10+): `amqp://guest:guest@127.0.0.1:5672/%2f`,
//! or `COVMERGE_TEST_AMQP`. These tests fail, rather than skip, when the broker is
//! unreachable.
//!
//! The tests that consume `covmerge.tasks` (shared by every job) or force-close
//! connections hold `BROKER` so that they never run at the same time.

use std::fmt::Write as _;
use std::process::Command;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use covmerge_proto::redact::redact_url;
use covmerge_queue::amqp::{AmqpOptions, AmqpQueue};
use covmerge_queue::{conformance, Delivery, Event, Queue, QueueError, DEFAULT_DELIVERY_LIMIT};

const DEFAULT_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

static BROKER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn broker_url() -> String {
    std::env::var("COVMERGE_TEST_AMQP").unwrap_or_else(|_| DEFAULT_URL.to_string())
}

/// Unique per run, so reruns do not collide with leftovers.
fn run_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{}-{}", std::process::id(), nanos % 1_000_000_000_000)
}

async fn connect(connection_name: &str) -> AmqpQueue {
    let url = broker_url();
    let opts = AmqpOptions {
        connect_timeout: Duration::from_secs(10),
        connection_name: connection_name.to_string(),
        ..AmqpOptions::new(DEFAULT_DELIVERY_LIMIT)
    };
    AmqpQueue::connect_with(&url, opts)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "RabbitMQ at {} is required by these tests: {e}",
                redact_url(&url)
            )
        })
}

async fn within<T>(what: &str, secs: u64, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// The next task whose body starts with `prefix`; acks tasks of other runs.
async fn task_with_prefix(q: &AmqpQueue, prefix: &[u8]) -> Delivery {
    loop {
        let d = q.next_task().await.expect("next_task");
        if d.body.starts_with(prefix) {
            return d;
        }
        d.ack().await.expect("ack a foreign task");
    }
}

fn rabbitmqctl(args: &[&str]) -> String {
    let out = Command::new("rabbitmqctl")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running rabbitmqctl {args:?}: {e}"));
    assert!(
        out.status.success(),
        "rabbitmqctl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Force-closes the broker's connections named `name` (only this test's, so that other
/// users of the broker are not disturbed), like a broker restart does.
fn force_close(name: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listing = rabbitmqctl(&[
            "-q",
            "list_connections",
            "--no-table-headers",
            "pid",
            "client_properties",
        ]);
        let pids: Vec<&str> = listing
            .lines()
            .filter(|l| l.contains(name))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        if !pids.is_empty() {
            for pid in pids {
                rabbitmqctl(&["close_connection", pid, "test"]);
            }
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no connection named {name} in:\n{listing}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The four conformance checks, one after another: they all consume the shared task
/// queue (and ack tasks that are not theirs), so they must not overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_conformance() {
    let _broker = BROKER.lock().await;
    let run = run_id();
    let q = connect(&format!("covmerge-test-conformance-{run}")).await;

    conformance::ack_and_report(&q, &format!("t-ack-{run}")).await;
    conformance::retry_until_dead_letter(&q, &format!("t-retry-{run}"), DEFAULT_DELIVERY_LIMIT)
        .await;
    conformance::reject_dead_letters_now(&q, &format!("t-reject-{run}")).await;
    conformance::dropped_delivery_comes_back(&q, &format!("t-drop-{run}")).await;
    conformance::close_ends_a_waiting_next_event(&q, &format!("t-close-{run}")).await;

    // A report for a job without queues is unroutable.
    let err = q
        .publish_report(&format!("t-nojob-{run}"), b"r".to_vec())
        .await
        .unwrap_err();
    assert!(matches!(err, QueueError::NotAccepted(_)), "{err:?}");

    // The dead letter says why.
    let job = format!("t-reason-{run}");
    q.open_job(&job).await.unwrap();
    q.publish_task(&job, format!("{job}:x").into_bytes())
        .await
        .unwrap();
    let d = within("a task", 20, task_with_prefix(&q, job.as_bytes())).await;
    d.reject().await.unwrap();
    match within("a dead letter", 20, q.next_event(&job))
        .await
        .unwrap()
    {
        Event::DeadLetter { reason, .. } => assert!(reason.contains("rejected"), "{reason}"),
        other => panic!("expected a dead letter, got {other:?}"),
    }
    let body = format!("{job}:again").into_bytes();
    q.publish_task(&job, body.clone()).await.unwrap();
    for attempt in 1..=DEFAULT_DELIVERY_LIMIT + 1 {
        let d = within("a task", 20, task_with_prefix(&q, job.as_bytes())).await;
        assert_eq!((d.body.as_slice(), d.attempt), (body.as_slice(), attempt));
        d.retry().await.unwrap();
    }
    match within("a dead letter", 20, q.next_event(&job))
        .await
        .unwrap()
    {
        Event::DeadLetter { body: b, reason } => {
            assert_eq!(b, body);
            assert!(reason.contains("delivery limit"), "{reason}");
        }
        other => panic!("expected a dead letter, got {other:?}"),
    }
    // Closing a job ends a wait for its events.
    let waiting = tokio::spawn({
        let (q, job) = (q.clone(), job.clone());
        async move { q.next_event(&job).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    q.close_job(&job).await.unwrap();
    let ended = within("next_event to end", 5, waiting).await.unwrap();
    assert!(matches!(ended, Err(QueueError::Closed)), "{ended:?}");
    q.close().await;
    assert!(matches!(
        q.publish_task(&job, vec![]).await,
        Err(QueueError::Closed)
    ));
}

/// A connection closed by the broker: the same `AmqpQueue` reconnects, publishes and
/// consumes again, waiting consumers carry on, and a stale ack is an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_reconnects() {
    let _broker = BROKER.lock().await;
    let run = run_id();
    let name = format!("covmerge-test-reconnect-{run}");
    let q = connect(&name).await;
    let job = format!("t-reconnect-{run}");
    q.open_job(&job).await.unwrap();

    // A delivery held across the connection loss.
    let before = format!("{job}:before").into_bytes();
    q.publish_task(&job, before.clone()).await.unwrap();
    let held = within("the first task", 20, task_with_prefix(&q, job.as_bytes())).await;
    assert_eq!(held.body, before);
    // An event consumer exists before the loss, too.
    q.publish_report(&job, b"r1".to_vec()).await.unwrap();
    assert_eq!(
        within("r1", 20, q.next_event(&job)).await.unwrap(),
        Event::Report(b"r1".to_vec())
    );

    force_close(&name);
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Acking a delivery of the dead channel: an error, not a panic; it comes back.
    assert!(
        held.ack().await.is_err(),
        "ack on a closed channel must fail"
    );

    // Publishing reconnects.
    let after = format!("{job}:after").into_bytes();
    within(
        "publish after reconnect",
        30,
        q.publish_task(&job, after.clone()),
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let d = within(
            "tasks after reconnect",
            20,
            task_with_prefix(&q, job.as_bytes()),
        )
        .await;
        if d.body == before {
            assert!(d.attempt >= 2, "a redelivery counts as an attempt");
        }
        seen.push(d.body.clone());
        d.ack().await.unwrap();
    }
    seen.sort();
    let mut want = vec![after.clone(), before.clone()];
    want.sort();
    assert_eq!(seen, want);

    // Consumers waiting while the connection dies carry on once it is back.
    let waiting_task = tokio::spawn({
        let (q, prefix) = (q.clone(), job.clone().into_bytes());
        async move { task_with_prefix(&q, &prefix).await }
    });
    let waiting_event = tokio::spawn({
        let (q, job) = (q.clone(), job.clone());
        async move { q.next_event(&job).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    force_close(&name);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let late = format!("{job}:late").into_bytes();
    within(
        "publish after the second loss",
        30,
        q.publish_task(&job, late.clone()),
    )
    .await
    .unwrap();
    within(
        "report after the second loss",
        30,
        q.publish_report(&job, b"r2".to_vec()),
    )
    .await
    .unwrap();
    let d = within("the waiting next_task", 30, waiting_task)
        .await
        .unwrap();
    assert_eq!(d.body, late);
    d.ack().await.unwrap();
    let e = within("the waiting next_event", 30, waiting_event)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e, Event::Report(b"r2".to_vec()));

    q.close_job(&job).await.unwrap();
    q.close().await;
}

/// Collects log lines of the current thread.
struct Capture(Arc<StdMutex<String>>);

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut s = self.0.lock().unwrap();
        span.record(&mut Fields(&mut s));
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        values.record(&mut Fields(&mut self.0.lock().unwrap()));
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut s = self.0.lock().unwrap();
        event.record(&mut Fields(&mut s));
        s.push('\n');
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The password of the URL appears in no error, log line, `Debug` or `Display` output.
#[tokio::test]
async fn rabbitmq_password_never_shown() {
    const PASSWORD: &str = "pa55-w0rd-XYZ";
    assert_eq!(
        redact_url(&format!("amqp://covmerge:{PASSWORD}@127.0.0.1:1/%2f")),
        "amqp://127.0.0.1:1/%2f"
    );

    let logs = Arc::new(StdMutex::new(String::new()));
    let _logging = tracing::subscriber::set_default(Capture(logs.clone()));

    // Nothing listens on port 1: fails after its (short) retry budget.
    let url = format!("amqp://covmerge:{PASSWORD}@127.0.0.1:1/%2f");
    let opts = AmqpOptions {
        connect_timeout: Duration::from_secs(1),
        ..AmqpOptions::default()
    };
    let started = Instant::now();
    let err = AmqpQueue::connect_with(&url, opts).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(matches!(err, QueueError::Unavailable(_)), "{err:?}");
    for shown in [err.to_string(), format!("{err:?}")] {
        assert!(!shown.contains(PASSWORD), "{shown}");
        assert!(
            shown.contains("127.0.0.1:1"),
            "the error names the broker: {shown}"
        );
    }

    // A URL that does not parse is not echoed either.
    let err = AmqpQueue::connect(&format!("amqp://covmerge:{PASSWORD}@127.0.0.1:port/%2f"), 1)
        .await
        .unwrap_err();
    assert!(!format!("{err} {err:?}").contains(PASSWORD), "{err}");

    // A live queue: its Debug and Display show the URL without credentials.
    let url = broker_url();
    let password = url::Url::parse(&url)
        .unwrap()
        .password()
        .unwrap_or("")
        .to_string();
    let q = connect("covmerge-test-secrets").await;
    for shown in [format!("{q:?}"), format!("{q}"), q.url().to_string()] {
        assert!(!shown.contains(&format!(":{password}@")), "{shown}");
        assert!(password.is_empty() || !shown.contains(&password), "{shown}");
        assert!(!shown.contains('@'), "{shown}");
    }
    q.close().await;

    let logs = logs.lock().unwrap().clone();
    assert!(
        logs.contains("cannot connect"),
        "the retries were logged: {logs}"
    );
    assert!(!logs.contains(PASSWORD), "{logs}");
    assert!(
        password.is_empty() || !logs.contains(&format!(":{password}@")),
        "{logs}"
    );
}

/// Credentials or a vhost the broker refuses are a configuration error: the connect
/// fails at once (not after the outage budget), is not transient, names the broker
/// and shows no password.
#[tokio::test]
async fn rabbitmq_refused_credentials_and_vhost_fail_fast() {
    const WRONG: &str = "wr0ng-pa55-QRS";
    let good = url::Url::parse(&broker_url()).unwrap();
    let password = good.password().unwrap_or("").to_string();
    let mut bad_password = good.clone();
    bad_password.set_password(Some(WRONG)).unwrap();
    let mut bad_vhost = good.clone();
    bad_vhost.set_path(&format!("/covmerge-no-such-vhost-{}", run_id()));
    for (url, secret) in [(bad_password, WRONG), (bad_vhost, password.as_str())] {
        let opts = AmqpOptions {
            connect_timeout: Duration::from_secs(120),
            ..AmqpOptions::default()
        };
        let started = Instant::now();
        let err = within(
            "a refused connect",
            30,
            AmqpQueue::connect_with(url.as_str(), opts),
        )
        .await
        .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{}: took {:?}",
            redact_url(url.as_str()),
            started.elapsed()
        );
        assert!(matches!(err, QueueError::Config { .. }), "{err:?}");
        assert!(!err.is_transient(), "{err:?}");
        for shown in [err.to_string(), format!("{err:?}")] {
            assert!(secret.is_empty() || !shown.contains(secret), "{shown}");
            assert!(
                shown.contains(url.host_str().unwrap()),
                "names the broker: {shown}"
            );
        }
    }
}

/// A vhost of the test's own (created, guest given every permission, deleted on
/// drop), so that deleting or consuming the shared queues disturbs nobody.
struct Vhost {
    name: String,
    url: String,
}

impl Vhost {
    fn new(tag: &str) -> Vhost {
        let name = format!("covmerge-test-{tag}-{}", run_id());
        rabbitmqctl(&["-q", "add_vhost", &name]);
        let mut url = url::Url::parse(&broker_url()).unwrap();
        let user = url.username().to_string();
        rabbitmqctl(&[
            "-q",
            "set_permissions",
            "-p",
            &name,
            &user,
            ".*",
            ".*",
            ".*",
        ]);
        url.set_path(&format!("/{name}"));
        Vhost {
            name,
            url: url.to_string(),
        }
    }

    async fn connect(&self, connection_name: &str) -> AmqpQueue {
        let opts = AmqpOptions {
            connect_timeout: Duration::from_secs(10),
            connection_name: connection_name.to_string(),
            ..AmqpOptions::new(DEFAULT_DELIVERY_LIMIT)
        };
        AmqpQueue::connect_with(&self.url, opts).await.unwrap()
    }

    fn queues(&self) -> Vec<String> {
        rabbitmqctl(&[
            "-q",
            "list_queues",
            "-p",
            &self.name,
            "--no-table-headers",
            "name",
        ])
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
    }
}

impl Drop for Vhost {
    fn drop(&mut self) {
        let _ = Command::new("rabbitmqctl")
            .args(["-q", "delete_vhost", &self.name])
            .output();
    }
}

/// A misconfigured worker nack-requeued every task it could not run, and
/// each requeue counted toward `x-delivery-limit`: one bad worker used up a task's
/// deliveries. A hand-back is a new message: the task comes back at attempt 1 with
/// the workers that refused it, as often as they hand it back, never dead-lettered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_hand_back_does_not_count_toward_the_delivery_limit() {
    let vh = Vhost::new("handback");
    let q = vh.connect("covmerge-test-handback").await;
    let job = format!("handback-{}", run_id());
    q.open_job(&job).await.unwrap();
    q.publish_task(&job, b"hb-task".to_vec()).await.unwrap();
    let n = DEFAULT_DELIVERY_LIMIT as usize + 3;
    for i in 0..n {
        let d = within("the handed-back task", 20, q.next_task())
            .await
            .unwrap();
        assert_eq!(d.body, b"hb-task");
        assert_eq!(d.attempt, 1, "hand-back {i} counted as a delivery");
        assert_eq!(d.refused_by.len(), i, "{:?}", d.refused_by);
        d.hand_back("w-1").await.unwrap();
    }
    let d = within("the handed-back task", 20, q.next_task())
        .await
        .unwrap();
    assert_eq!(d.refused_by, vec!["w-1".to_string(); n]);
    // An ordinary retry still counts.
    d.retry().await.unwrap();
    let d = within("the retried task", 20, q.next_task()).await.unwrap();
    assert_eq!(d.attempt, 2);
    d.ack().await.unwrap();
    q.close_job(&job).await.unwrap();
    q.close().await;
}

/// A worker backing off after a configuration failure must hold no task
/// (prefetch would otherwise park the next one on it for the whole pause) and say it
/// is not ready; another worker gets the task meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_paused_worker_holds_no_task() {
    let vh = Vhost::new("pause");
    let bad = vh.connect("covmerge-test-pause-bad").await;
    let good = vh.connect("covmerge-test-pause-good").await;
    let job = format!("pause-{}", run_id());
    bad.open_job(&job).await.unwrap();
    bad.publish_task(&job, b"p-1".to_vec()).await.unwrap();
    let d = within("the first task", 20, bad.next_task()).await.unwrap();
    bad.publish_task(&job, b"p-2".to_vec()).await.unwrap();
    bad.pause_tasks(Duration::from_secs(6)).await;
    assert!(bad.consuming().is_err(), "a paused worker is not ready");
    d.hand_back("bad").await.unwrap();
    // Both tasks go to the good worker while the bad one pauses.
    let mut got = Vec::new();
    for _ in 0..2 {
        let d = within("a task on the good worker", 5, good.next_task())
            .await
            .unwrap();
        got.push(d.body.clone());
        d.ack().await.unwrap();
    }
    got.sort();
    assert_eq!(got, vec![b"p-1".to_vec(), b"p-2".to_vec()]);
    // After the pause the bad worker consumes again (and gets the next task).
    good.close().await;
    let started = Instant::now();
    bad.publish_task(&job, b"p-3".to_vec()).await.unwrap();
    let d = within("a task after the pause", 20, bad.next_task())
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "taken during the pause: {:?}",
        started.elapsed()
    );
    assert_eq!(d.body, b"p-3");
    assert!(bad.consuming().is_ok(), "{:?}", bad.consuming());
    d.ack().await.unwrap();
    bad.close_job(&job).await.unwrap();
    bad.close().await;
}

/// With `covmerge.tasks` deleted, workers declared the queue again but
/// not its `job.#` binding, so every task published after (the coordinator's
/// republish) came back `312 NO_ROUTE`. Now the topology is declared whole on
/// NO_ROUTE and when the consumer is cancelled, and the job's coordinator is told
/// (an `Event::TasksLost`) to publish its waiting tasks again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_deleted_task_queue_is_declared_whole_and_announced() {
    let vh = Vhost::new("deleted");
    let worker = vh.connect("covmerge-test-deleted-worker").await;
    let coord = vh.connect("covmerge-test-deleted-coord").await;
    let job = format!("deleted-{}", run_id());
    coord.open_job(&job).await.unwrap();
    coord.publish_task(&job, b"d-1".to_vec()).await.unwrap();
    let d = within("the task", 20, worker.next_task()).await.unwrap();
    d.ack().await.unwrap();
    // The worker waits for its next task while the queue is deleted.
    let waiting = tokio::spawn({
        let worker = worker.clone();
        async move { worker.next_task().await.map(|d| d.body.clone()) }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    rabbitmqctl(&["-q", "delete_queue", "-p", &vh.name, "covmerge.tasks"]);
    // The coordinator hears that the tasks are lost.
    match within("the tasks-lost notice", 30, coord.next_event(&job))
        .await
        .unwrap()
    {
        Event::TasksLost => {}
        other => panic!("expected TasksLost, got {other:?}"),
    }
    // And its republish is routed (not 312 NO_ROUTE) to the worker.
    coord.publish_task(&job, b"d-2".to_vec()).await.unwrap();
    let body = within("the republished task", 30, waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(body, b"d-2");
    // Deleted again with nobody consuming: a publish finds no route, declares the
    // topology again and goes through.
    rabbitmqctl(&["-q", "delete_queue", "-p", &vh.name, "covmerge.tasks"]);
    worker.close().await;
    coord.publish_task(&job, b"d-3".to_vec()).await.unwrap();
    let w2 = vh.connect("covmerge-test-deleted-worker2").await;
    let d = within("the task published after NO_ROUTE", 20, w2.next_task())
        .await
        .unwrap();
    assert_eq!(d.body, b"d-3");
    d.ack().await.unwrap();
    coord.close_job(&job).await.unwrap();
    coord.close().await;
    w2.close().await;
}

/// A job's report and dead-letter queues stayed forever when the job
/// failed. They now expire (`x-expires`) and `close_job` deletes them: none remains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_job_queues_expire_and_are_deleted() {
    let vh = Vhost::new("expire");
    let q = vh.connect("covmerge-test-expire").await;
    let job = format!("expire-{}", run_id());
    q.open_job(&job).await.unwrap();
    let listing = rabbitmqctl(&[
        "-q",
        "list_queues",
        "-p",
        &vh.name,
        "--no-table-headers",
        "name",
        "arguments",
    ]);
    for name in [
        format!("covmerge.reports.{job}"),
        format!("covmerge.dead.{job}"),
    ] {
        let line = listing
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("{name} not declared:\n{listing}"));
        assert!(line.contains("x-expires"), "{line}");
    }
    q.close_job(&job).await.unwrap();
    let left: Vec<String> = vh
        .queues()
        .into_iter()
        .filter(|n| n.contains(&job))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    q.close().await;
}
