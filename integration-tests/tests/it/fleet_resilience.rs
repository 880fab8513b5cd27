//! A fleet that one bad worker or one deleted queue cannot break. Each test
//! runs in a RabbitMQ vhost of its own (its workers serve only its jobs) on `file://`
//! stores, and is named after what broke.

use std::path::Path;
use std::time::{Duration, Instant};

use covmerge_integration_tests::fleet::{coordinator_spawn_env, worker_on, Proc, Vhost};
use covmerge_integration_tests::gunzip;

use covmerge_integration_tests::FleetCorpus;

use crate::fleet::{file_store, run_ok, LONG};

/// The address a process started with `--listen 127.0.0.1:0` printed.
fn listen_addr(p: &Proc) -> String {
    p.wait_log("listening on ", Duration::from_secs(30));
    let log = p.log_text();
    let line = log
        .lines()
        .find(|l| l.starts_with("listening on "))
        .unwrap();
    line.trim_start_matches("listening on ").trim().to_string()
}

fn http_status(addr: &str, path: &str) -> String {
    let o = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("curl");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The vhost holds no job's report or dead-letter queue.
fn assert_no_job_queues_left(vh: &Vhost) {
    let left: Vec<String> = vh
        .queues()
        .into_iter()
        .filter(|q| q.starts_with("covmerge.reports.") || q.starts_with("covmerge.dead."))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A `file://` store in `dir` without the job: a worker's wrong bucket.
fn wrong_bucket(dir: &Path) -> String {
    let wrong_dir = dir.join("wrong-bucket");
    std::fs::create_dir_all(&wrong_dir).unwrap();
    file_store(&wrong_dir)
}

/// Two good workers and one whose store is the wrong bucket (a `file://`
/// root without the job) failed the job in under a second ("job … is unknown"). The
/// misconfigured worker now hands each task back to the others: the job completes,
/// exactly, on the good workers.
#[test]
fn one_misconfigured_worker_does_not_fail_the_job() {
    let s = FleetCorpus::new(231).unlocked().build();
    let vh = Vhost::new("misconf");
    let dir = s.dir();
    let store = file_store(&dir.join("store"));
    let wrong = wrong_bucket(dir);
    // The bad worker first, so that it is sure to be offered tasks.
    let bad = worker_on(
        &vh.url,
        dir,
        1,
        &wrong,
        &["--max-config-failures", "3"],
        &[],
    );
    let _good1 = worker_on(&vh.url, dir, 2, &store, &[], &[]);
    let _good2 = worker_on(&vh.url, dir, 3, &store, &[], &[]);
    let out = dir.join("out.gz");
    run_ok(&s.coord_args(&vh.url, &store, &out), &[]);
    assert_eq!(gunzip(&out), s.want);
    let log = bad.log_text();
    assert!(log.contains("handing it back to another worker"), "{log}");
    assert!(log.contains("is unknown"), "{log}");
    assert_no_job_queues_left(&vh);
}

/// The misconfigured worker said `/readyz` ready and took every task it
/// was offered. Now it is not ready while it backs off, exits non-zero after
/// `--max-config-failures` tasks in a row, and the tasks it handed back (more often
/// than their delivery limit would allow) still complete the job on a good worker.
#[test]
fn misconfigured_worker_goes_unready_and_exits() {
    let s = FleetCorpus::new(232).unlocked().build();
    let vh = Vhost::new("unready");
    let dir = s.dir();
    let store = file_store(&dir.join("store"));
    let wrong = wrong_bucket(dir);
    let mut bad = worker_on(
        &vh.url,
        dir,
        1,
        &wrong,
        &["--max-config-failures", "3", "--listen", "127.0.0.1:0"],
        &[],
    );
    let addr = listen_addr(&bad);
    // The endpoints listen before the broker answers: ready once it has.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while http_status(&addr, "/readyz") != "200" {
        assert!(
            std::time::Instant::now() < deadline,
            "never ready before the job"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = dir.join("out.gz");
    let args: Vec<String> = s
        .coord_args(&vh.url, &store, &out)
        .iter()
        .map(|a| a.to_string())
        .collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let coord = coordinator_spawn_env(&a, &[], LONG);
    bad.wait_log("handing it back to another worker", Duration::from_secs(60));
    assert_eq!(
        http_status(&addr, "/readyz"),
        "503",
        "not ready while backing off"
    );
    let metrics = std::process::Command::new("curl")
        .args(["-s", &format!("http://{addr}/metrics")])
        .output()
        .unwrap();
    let metrics = String::from_utf8_lossy(&metrics.stdout);
    assert!(
        metrics.contains("covmerge_worker_config_failures 1")
            || metrics.contains("covmerge_worker_config_failures 2"),
        "{metrics}"
    );
    let code = bad.wait_exit(Duration::from_secs(60));
    assert!(matches!(code, Some(c) if c != 0), "exit code {code:?}");
    let log = bad.log_text();
    assert!(log.contains("exiting so that it is replaced"), "{log}");
    // The orchestrator's replacement is configured right: the job completes.
    let _good = worker_on(&vh.url, dir, 2, &store, &[], &[]);
    let o = coord.join().unwrap();
    assert!(
        o.status.success(),
        "coordinator failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(gunzip(&out), s.want);
}

/// The other side: a task that really is bad still fails its job. A task
/// that no worker can run (its job's spec is in no worker's store) fails after
/// three different workers tried, and the workers stay up; bad input fails the job
/// at once, as before, and leaves no queue behind.
#[test]
fn a_task_no_worker_can_run_and_bad_input_still_fail_the_job() {
    use covmerge_proto::wire::{self, ReportStatus, SplitTask, Task, TaskReport};
    use covmerge_proto::{JobId, SplitId};
    use covmerge_queue::{amqp::AmqpQueue, Event, Queue, DEFAULT_DELIVERY_LIMIT};

    let s = FleetCorpus::new(233).unlocked().build();
    let vh = Vhost::new("badtask");
    let dir = s.dir();
    let store = file_store(&dir.join("store"));
    let mut workers: Vec<Proc> = (1..=3)
        .map(|n| worker_on(&vh.url, dir, n, &store, &[], &[]))
        .collect();
    let job = format!("no-spec-{}", std::process::id());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let failure = rt.block_on(async {
        let q = AmqpQueue::connect(&vh.url, DEFAULT_DELIVERY_LIMIT)
            .await
            .unwrap();
        q.open_job(&job).await.unwrap();
        let task = Task::Split(SplitTask {
            namespace: None,
            job: JobId::parse(&job).unwrap(),
            split: SplitId(0),
            input: s.inputs[0].clone(),
            shards: 6,
            max_bad_rows: 0,
            read: Default::default(),
            more: Vec::new(),
        });
        q.publish_task(&job, wire::encode(&task).unwrap())
            .await
            .unwrap();
        let (mut failed, mut dead) = (None, false);
        while failed.is_none() || !dead {
            let e = tokio::time::timeout(Duration::from_secs(60), q.next_event(&job))
                .await
                .expect("the task fails within a minute")
                .unwrap();
            match e {
                Event::Report(b) => {
                    let r: TaskReport = wire::decode(&b).unwrap();
                    if let ReportStatus::Failed(f) = r.status {
                        failed = Some(f.message);
                    }
                }
                Event::DeadLetter { .. } => dead = true,
                Event::TasksLost => {}
            }
        }
        q.close_job(&job).await.unwrap();
        failed.unwrap()
    });
    assert!(
        failure.contains("3 worker(s) could not run it"),
        "{failure}"
    );
    for w in &mut workers {
        assert!(w.child.try_wait().unwrap().is_none(), "{} exited", w.name);
    }
    // Bad input: fails at once, not after being handed around.
    let bad_input = dir.join("bad.csv");
    std::fs::write(&bad_input, "this is,not\na coverage,csv\n").unwrap();
    let out = dir.join("out.gz");
    let bad = bad_input.display().to_string();
    let mut a = s.coord_args(&vh.url, &store, &out);
    let pos = a.iter().position(|x| *x == "--input").unwrap();
    a.insert(pos + 1, &bad);
    let started = Instant::now();
    let o = covmerge_integration_tests::fleet::coordinator_run(&a, &[], LONG);
    assert!(!o.status.success());
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.csv"), "{err}");
    assert_no_job_queues_left(&vh);
    // The workers still serve real work.
    run_ok(&s.coord_args(&vh.url, &store, &out), &[]);
    assert_eq!(gunzip(&out), s.want);
    assert_no_job_queues_left(&vh);
}

/// Deleting `covmerge.tasks` mid-job failed the job: the workers declared
/// the queue again without its `job.#` binding, and the coordinator's republish (after
/// `--republish-secs`, 15 minutes) came back `312 NO_ROUTE`. Now the whole topology
/// is declared again and the coordinator republishes at once: the job completes,
/// exactly, without `--resume` and with the default `--republish-secs`.
#[test]
fn deleting_the_task_queue_mid_job_does_not_fail_it() {
    let s = FleetCorpus::new(234).unlocked().build();
    let vh = Vhost::new("deleted");
    let dir = s.dir();
    let store = file_store(&dir.join("store"));
    let w = worker_on(
        &vh.url,
        dir,
        1,
        &store,
        &[],
        &[("COVMERGE_FAULT_SLEEP", "merge:1500")],
    );
    let out = dir.join("out.gz");
    let args: Vec<String> = s
        .coord_args(&vh.url, &store, &out)
        .iter()
        .map(|a| a.to_string())
        .collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = Instant::now();
    let coord = coordinator_spawn_env(&a, &[], LONG);
    // Mid-merge-phase: one part written, five merges waiting in the queue.
    w.wait_log("part written", Duration::from_secs(90));
    vh.delete_queue("covmerge.tasks");
    let o = coord.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "coordinator failed:\n{err}");
    assert!(err.contains("the task queue was deleted"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(120));
    assert_eq!(gunzip(&out), s.want);
    assert!(vh.queues().contains(&"covmerge.tasks".to_string()));
    assert_no_job_queues_left(&vh);
}

/// A moto S3 server of this test's own that checks credentials (the shared one takes
/// any): every request signed with a key its IAM does not know is answered 403
/// `InvalidAccessKeyId`.
struct AuthS3 {
    child: std::process::Child,
    endpoint: String,
}

impl AuthS3 {
    fn start(dir: &std::path::Path) -> AuthS3 {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let log = std::fs::File::create(dir.join("moto-auth.log")).unwrap();
        let child = std::process::Command::new("python3")
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "0")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("python3 -m moto.server (deploy/dev/start-s3.sh installs moto)");
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(t0.elapsed() < Duration::from_secs(60), "moto did not start");
            std::thread::sleep(Duration::from_millis(200));
        }
        AuthS3 {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for AuthS3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A worker whose S3 credentials are refused (403 `InvalidAccessKeyId`, from moto with
/// authentication on) is misconfigured like one on the wrong bucket: it hands its
/// tasks back at once (a refusal is not an outage to retry for the budget; see
/// storage/tests/refused_credentials.rs), and the job completes exactly on the two
/// good workers, with the refused worker's secret in no log line.
///
/// The refused worker alone talks to the authenticating moto (the same bucket name,
/// another endpoint): moto's own signature check rejects object_store's listings (it
/// signs `%2F` in the query differently), so the good side cannot run against it.
#[test]
fn worker_with_refused_s3_credentials_does_not_fail_the_job() {
    use covmerge_integration_tests::fleet::bucket;
    let s = FleetCorpus::new(235).unlocked().build();
    let vh = Vhost::new("s3refused");
    let dir = s.dir();
    let auth = AuthS3::start(dir);
    let store = format!("s3://{}/jobs", bucket("refused"));
    // The refused worker first, so that it is sure to be offered tasks.
    let bad = worker_on(
        &vh.url,
        dir,
        1,
        &store,
        &["--max-config-failures", "5"],
        &[
            ("AWS_ENDPOINT_URL", auth.endpoint.as_str()),
            ("AWS_ACCESS_KEY_ID", "AKIAREFUSED000000000"),
            ("AWS_SECRET_ACCESS_KEY", "not-the-secret"),
        ],
    );
    let _good1 = worker_on(&vh.url, dir, 2, &store, &[], &[]);
    let _good2 = worker_on(&vh.url, dir, 3, &store, &[], &[]);
    let out = dir.join("out.gz");
    let t0 = Instant::now();
    run_ok(&s.coord_args(&vh.url, &store, &out), &[]);
    let took = t0.elapsed();
    assert_eq!(gunzip(&out), s.want);
    let log = bad.log_text();
    assert!(log.contains("handing it back to another worker"), "{log}");
    assert!(log.contains("InvalidAccessKeyId"), "{log}");
    assert!(
        !log.contains("not-the-secret"),
        "the secret is logged: {log}"
    );
    assert!(
        took < Duration::from_secs(90),
        "the job took {took:?}: the refusal was retried as an outage"
    );
    assert_no_job_queues_left(&vh);
}

/// A job whose `--source` no worker can open (a mistyped path) took the fleet
/// down: every worker counted the failure against its own configuration and exited
/// after `--max-config-failures`, and with fewer than three workers no task reached
/// three refusers, so the coordinator waited forever. Now the job's source failing
/// to open is not counted against a worker: the task is handed around until its
/// hand-backs run out, the job fails naming the source and the workers, and both
/// workers are still up and serve the next job.
#[test]
fn a_job_source_no_worker_can_open_no_longer_kills_the_fleet() {
    let s = FleetCorpus::new(236).unlocked().build();
    let vh = Vhost::new("badsrc");
    let dir = s.dir();
    let store = file_store(&dir.join("store"));
    let mut workers: Vec<Proc> = (1..=2)
        .map(|n| worker_on(&vh.url, dir, n, &store, &[], &[]))
        .collect();
    let missing = dir.join("no-such-source");
    let bad_source = format!("dir:{}", missing.display());
    let out = dir.join("out.gz");
    let mut a = s.job_args_with(&bad_source, &s.inputs);
    a.extend_from_slice(&["--amqp", &vh.url, "--store", &store]);
    let out_s = out.display().to_string();
    a.extend_from_slice(&["--out", &out_s]);
    let started = Instant::now();
    let o = covmerge_integration_tests::fleet::coordinator_run(&a, &[], Duration::from_secs(120));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    // Each failed task names the source and both workers that tried it.
    assert!(
        err.lines()
            .any(|l| l.contains("no-such-source") && l.contains("2 worker(s) could not run it")),
        "{err}"
    );
    for w in &mut workers {
        assert!(
            w.child.try_wait().unwrap().is_none(),
            "{} exited:\n{}",
            w.name,
            w.log_text()
        );
        let log = w.log_text();
        assert!(!log.contains("exiting so that it is replaced"), "{log}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "{:?}",
        started.elapsed()
    );
    assert_no_job_queues_left(&vh);
    // The same two workers run the job with its right source.
    run_ok(&s.coord_args(&vh.url, &store, &out), &[]);
    assert_eq!(gunzip(&out), s.want);
}
