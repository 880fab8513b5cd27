//! Fleet mode (coordinator + worker processes) against the real RabbitMQ and an S3
//! server, with faults injected: every final result must equal the embedded one.
//!
//! (Long by design: each test is one fault scenario with its own setup and assertions,
//! and they share the helpers at the top and the fleet lock.)

use std::path::{Path, PathBuf};
use std::time::Duration;

use covmerge_corpus::{generate, Corpus, CorpusSpec};
use covmerge_integration_tests::fleet::{self, bucket, coordinator_run, download, upload, worker};
use covmerge_integration_tests::{gunzip, manifest, merge_ok};

const SHARDS: &str = "6";
pub(crate) const LONG: Duration = Duration::from_secs(180);

pub(crate) struct Setup {
    pub(crate) tmp: tempfile::TempDir,
    pub(crate) corpus: Corpus,
    /// The corpus' inputs and `dir:` source, as job arguments.
    pub(crate) ins: Vec<String>,
    pub(crate) source: String,
    /// The embedded merge's decompressed result.
    pub(crate) want: Vec<u8>,
}

fn inputs(c: &Corpus) -> Vec<String> {
    c.inputs.iter().map(|p| p.display().to_string()).collect()
}

fn src(c: &Corpus) -> String {
    format!("dir:{}", c.sources.display())
}

pub(crate) fn job_args<'a>(c: &'a Corpus, source: &'a str, ins: &'a [String]) -> Vec<&'a str> {
    let mut a = vec![
        "--source",
        source,
        "--base-repo",
        &c.base_repo,
        "--base-commit",
        &c.base_commit,
        "--shards",
        SHARDS,
        "--date-to",
        "2024-04-08",
        "--input",
    ];
    a.extend(ins.iter().map(|s| s.as_str()));
    a
}

impl Setup {
    /// A coordinator's arguments for this corpus: the job's, then the broker, the
    /// store and the result.
    pub(crate) fn coord_args<'a>(
        &'a self,
        amqp: &'a str,
        store: &'a str,
        out: &'a Path,
    ) -> Vec<&'a str> {
        let mut a = job_args(&self.corpus, &self.source, &self.ins);
        let out = out.to_str().unwrap();
        a.extend_from_slice(&["--amqp", amqp, "--store", store, "--out", out]);
        a
    }
}

pub(crate) fn setup(seed: u64, git: bool) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let spec = CorpusSpec {
        seed,
        files: 12,
        lines: 150,
        commits: 5,
        managers: 3,
        parts: 3,
        no_git: !git,
        ..CorpusSpec::default()
    };
    let corpus = generate(&spec, &tmp.path().join("corpus")).unwrap();
    let out = tmp.path().join("embedded.jsonl.gz");
    let ins = inputs(&corpus);
    let source = src(&corpus);
    let mut a = job_args(&corpus, &source, &ins);
    a.extend_from_slice(&["--out", out.to_str().unwrap()]);
    merge_ok(&a);
    let want = gunzip(&out);
    Setup {
        tmp,
        corpus,
        ins,
        source,
        want,
    }
}

/// Modification times of the `.done` markers in `dir`, by name.
fn marker_times(dir: &Path) -> Vec<(PathBuf, std::time::SystemTime)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".done"))
        .map(|p| {
            let t = std::fs::metadata(&p).unwrap().modified().unwrap();
            (p, t)
        })
        .collect();
    v.sort();
    v
}

pub(crate) fn file_store(dir: &Path) -> String {
    format!("file://{}", dir.display())
}

pub(crate) fn run_ok(args: &[&str], env: &[(&str, &str)]) -> String {
    let o = coordinator_run(args, env, LONG);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "coordinator failed:\n{err}");
    String::from_utf8(o.stdout).unwrap()
}

pub(crate) fn job_id(stdout: &str) -> String {
    stdout
        .lines()
        .next()
        .unwrap()
        .strip_prefix("job ")
        .expect("job id printed first")
        .to_string()
}

/// Two workers on S3 with inputs listed from a bucket prefix: the result object (and
/// `--out`) decompress to exactly the embedded result. The second worker is a one-core
/// worker (`--split-threads 1`: inflate and parse on the task's thread).
#[test]
fn fleet_on_s3_equals_embedded() {
    let _g = fleet::lock();
    let s = setup(41, false);
    let b = bucket("eq");
    for p in &s.corpus.inputs {
        upload(
            &b,
            &format!("in/{}", p.file_name().unwrap().to_string_lossy()),
            p,
        );
    }
    let store = format!("s3://{b}/fleet");
    let _w1 = worker(s.tmp.path(), 1, &store, &[], &[]);
    let _w2 = worker(s.tmp.path(), 2, &store, &["--split-threads", "1"], &[]);
    let ins = vec![format!("s3://{b}/in/*")];
    let mut a = job_args(&s.corpus, &s.source, &ins);
    let amqp = fleet::amqp();
    let out = format!("s3://{b}/out/result.jsonl.gz");
    let man = s.tmp.path().join("manifest.json");
    a.extend_from_slice(&[
        "--amqp",
        &amqp,
        "--store",
        &store,
        "--out",
        &out,
        "--manifest",
        man.to_str().unwrap(),
    ]);
    let stdout = run_ok(&a, &[]);
    let job = job_id(&stdout);
    assert!(stdout.contains("total instrumented("));
    let got = s.tmp.path().join("got.gz");
    download(&b, "out/result.jsonl.gz", &got);
    assert_eq!(gunzip(&got), s.want, "fleet result differs from embedded");
    let in_store = s.tmp.path().join("in-store.gz");
    download(&b, &format!("fleet/jobs/{job}/result.jsonl.gz"), &in_store);
    assert_eq!(gunzip(&in_store), s.want);
    let m = manifest(&man);
    assert_eq!(m["status"], "complete");
    assert_eq!(m["shards"].as_array().unwrap().len(), 6);
    assert_eq!(m["totals"]["rows_in"].as_u64().unwrap(), s.corpus.rows);
}

/// SIGKILL a worker at each dangerous point (mid-split, mid-merge, between part upload
/// and marker, between report and ack); another worker finishes; same result.
#[test]
fn sigkill_at_any_point_loses_nothing() {
    let _g = fleet::lock();
    let s = setup(43, false);
    let amqp = fleet::amqp();
    for point in ["split", "merge", "upload", "ack"] {
        let store_dir = s.tmp.path().join(format!("store-{point}"));
        let store = file_store(&store_dir);
        let mut doomed = worker(
            s.tmp.path(),
            10,
            &store,
            &[],
            &[("COVMERGE_FAULT_SLEEP", &format!("{point}:60000"))],
        );
        let out = s.tmp.path().join(format!("out-{point}.gz"));
        let a = s.coord_args(&amqp, &store, &out);
        let coord = fleet::coordinator_spawn(&a);
        doomed.wait_log("fault point reached", Duration::from_secs(60));
        doomed.kill9();
        let _healthy = worker(s.tmp.path(), 11, &store, &[], &[]);
        let o = coord.join().unwrap();
        assert!(
            o.status.success(),
            "{point}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(gunzip(&out), s.want, "killed at {point}: result differs");
    }
}

/// SIGTERM: a worker finishes its task within the grace period and exits 0; with a
/// grace too short it hands the task back and exits 0; the job completes either way.
#[test]
fn sigterm_drains_or_hands_back() {
    let _g = fleet::lock();
    let s = setup(47, false);
    let amqp = fleet::amqp();
    for (grace, pause, finishes) in [("20", "2000", true), ("1", "30000", false)] {
        let store = file_store(&s.tmp.path().join(format!("store-{grace}")));
        let mut w = worker(
            s.tmp.path(),
            20,
            &store,
            &["--grace", grace],
            &[("COVMERGE_FAULT_SLEEP", &format!("merge:{pause}"))],
        );
        let out = s.tmp.path().join(format!("out-{grace}.gz"));
        let a = s.coord_args(&amqp, &store, &out);
        let coord = fleet::coordinator_spawn(&a);
        w.wait_log("fault point reached", Duration::from_secs(60));
        w.signal(libc::SIGTERM);
        let code = w.wait_exit(Duration::from_secs(40));
        assert_eq!(
            code,
            Some(0),
            "worker exit after SIGTERM; log:\n{}",
            w.log_text()
        );
        let log = w.log_text();
        if finishes {
            assert!(
                log.contains("part written"),
                "the current shard was finished:\n{log}"
            );
            assert!(!log.contains("handing the task back"));
        } else {
            assert!(log.contains("handing the task back"), "{log}");
        }
        let _w2 = worker(s.tmp.path(), 21, &store, &[], &[]);
        let o = coord.join().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(gunzip(&out), s.want);
    }
}

/// A shard that keeps failing is retried with backoff up to the delivery limit, then
/// dead-lettered; the coordinator names it and fails without a result; `--resume`
/// re-runs only that shard and completes.
#[test]
fn failing_shard_is_dead_lettered_then_resume_completes() {
    let _g = fleet::lock();
    let s = setup(53, false);
    let amqp = fleet::amqp();
    let store_dir = s.tmp.path().join("store");
    let store = file_store(&store_dir);
    let out = s.tmp.path().join("out.gz");
    let man = s.tmp.path().join("manifest.json");
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&[
        "--manifest",
        man.to_str().unwrap(),
        "--job",
        "poison-shard-job",
    ]);
    {
        let _w = worker(
            s.tmp.path(),
            30,
            &store,
            &[],
            &[("COVMERGE_FAULT_FAIL_SHARD", "2")],
        );
        let o = coordinator_run(&a, &[], LONG);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        assert!(
            err.contains("shard 00002") && err.contains("dead-lettered"),
            "{err}"
        );
        assert!(!out.exists(), "no result on failure");
        let m = manifest(&man);
        assert_eq!(m["status"], "failed");
        assert_eq!(m["failed"][0]["task"], "shard 00002");
        assert!(
            _w.log_text().matches("will be retried").count() >= 3,
            "retried before dead-lettering"
        );
    }
    let before = marker_times(&store_dir.join("jobs/poison-shard-job/parts"));
    let _w = worker(s.tmp.path(), 31, &store, &[], &[]);
    let mut r = a.clone();
    r.push("--resume");
    run_ok(&r, &[]);
    assert_eq!(gunzip(&out), s.want);
    assert_eq!(before.len(), 5, "the five healthy shards had finished");
    let after: Vec<_> = marker_times(&store_dir.join("jobs/poison-shard-job/parts"))
        .into_iter()
        .filter(|(p, _)| before.iter().any(|(q, _)| q == p))
        .collect();
    assert_eq!(before, after, "finished shards were not redone");
}

/// A bad row fails its split permanently (dead-lettered at once, named with input and
/// line); after the input is fixed, `--resume` completes the same job.
#[test]
fn poison_input_reported_then_fixed_and_resumed() {
    let _g = fleet::lock();
    let s = setup(59, false);
    let amqp = fleet::amqp();
    let store = file_store(&s.tmp.path().join("store"));
    let out = s.tmp.path().join("out.gz");
    // Break input 2: append a row with a non-numeric line (plain CSV in the same dir).
    let bad: PathBuf = s.corpus.inputs[1].clone();
    let good_bytes = std::fs::read(&bad).unwrap();
    let mut text = String::from_utf8(gunzip(&bad)).unwrap();
    text.push_str(&format!(
        "x,1,1,amd64,b,m,{},master,{},a.c,f,NaN,0,1,0,1,false,1\n",
        s.corpus.base_repo, s.corpus.base_commit
    ));
    std::fs::write(&bad, text.as_bytes()).unwrap();
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&["--job", "poison-input-job"]);
    let _w = worker(s.tmp.path(), 40, &store, &[], &[]);
    let o = coordinator_run(&a, &[], LONG);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("split 00001")
            && err.contains(&format!("{}:", bad.display()))
            && err.contains("`sl`"),
        "{err}"
    );
    assert!(!out.exists());
    std::fs::write(&bad, good_bytes).unwrap();
    let mut r = a.clone();
    r.push("--resume");
    run_ok(&r, &[]);
    assert_eq!(gunzip(&out), s.want);
}

/// Every task published twice: the duplicates are harmless.
#[test]
fn duplicate_tasks_are_harmless() {
    let _g = fleet::lock();
    let s = setup(61, false);
    let amqp = fleet::amqp();
    let store = file_store(&s.tmp.path().join("store"));
    let out = s.tmp.path().join("out.gz");
    let _w1 = worker(s.tmp.path(), 50, &store, &[], &[]);
    let _w2 = worker(s.tmp.path(), 51, &store, &[], &[]);
    let a = s.coord_args(&amqp, &store, &out);
    run_ok(&a, &[("COVMERGE_FAULT_DUPLICATE_TASKS", "1")]);
    assert_eq!(gunzip(&out), s.want);
}

/// The coordinator is killed mid-job and started again with `--resume`: it finishes
/// without redoing finished shards. Meanwhile the broker drops every connection once.
#[test]
fn coordinator_killed_and_resumed_with_a_broker_connection_cut() {
    let _g = fleet::lock();
    let s = setup(67, false);
    let amqp = fleet::amqp();
    let store_dir = s.tmp.path().join("store");
    let store = file_store(&store_dir);
    let out = s.tmp.path().join("out.gz");
    let w = worker(
        s.tmp.path(),
        60,
        &store,
        &[],
        &[("COVMERGE_FAULT_SLEEP", "merge:700")],
    );
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&["--job", "coord-crash-job", "--lease-heartbeat-secs", "1"]);
    let mut c = fleet::Proc::spawn(
        fleet::fleet_cmd(&[&["coordinator", "--quiet"][..], &a[..]].concat()),
        s.tmp.path().join("coord-1.log"),
        "coordinator",
    );
    let parts = store_dir.join("jobs/coord-crash-job/parts");
    let done = |n: usize| parts.is_dir() && marker_times(&parts).len() >= n;
    let t0 = std::time::Instant::now();
    while !done(2) {
        assert!(t0.elapsed() < LONG, "no progress: {}", w.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    c.kill9();
    let finished = marker_times(&parts);
    // Cut every broker connection (the worker's too): both sides reconnect.
    let cut = std::process::Command::new("rabbitmqctl")
        .args([
            "-q",
            "close_all_connections",
            "-p",
            &fleet::vhost(),
            "covmerge test: connection cut",
        ])
        .output()
        .unwrap();
    assert!(
        cut.status.success(),
        "{}",
        String::from_utf8_lossy(&cut.stderr)
    );
    // The killed coordinator's lease goes stale (1 s heartbeats: 3 × 1 s + 5 s).
    std::thread::sleep(Duration::from_secs(9));
    let mut r = a.clone();
    r.push("--resume");
    run_ok(&r, &[]);
    assert_eq!(gunzip(&out), s.want);
    for (p, t) in finished {
        assert_eq!(
            std::fs::metadata(&p).unwrap().modified().unwrap(),
            t,
            "{} was redone",
            p.display()
        );
    }
    assert!(
        w.log_text().contains("reconnect") || w.log_text().contains("Reconnect"),
        "the worker reconnected:\n{}",
        w.log_text()
    );
}

/// A worker with no repository at all merges from a content-addressed snapshot in S3
/// exported by `covmerge sources`.
#[test]
fn stateless_workers_use_the_store_source() {
    let _g = fleet::lock();
    let s = setup(71, true);
    let amqp = fleet::amqp();
    let b = bucket("src");
    let snapshot = format!("s3://{b}/sources");
    let git = s.corpus.git.clone().unwrap();
    let mut export = vec![
        "sources",
        "--git",
        git.to_str().unwrap(),
        "--store",
        &snapshot,
        "--commit",
    ];
    export.extend(s.corpus.commits.iter().map(|c| c.as_str()));
    let o = fleet::fleet_cmd(&export).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Exporting again uploads nothing new.
    let again = fleet::fleet_cmd(&export).output().unwrap();
    assert!(String::from_utf8_lossy(&again.stdout)
        .contains("exported 0 commit index(es), uploaded 0 new blob(s)"));
    // No local repository or source tree from here on.
    std::fs::remove_dir_all(&git).unwrap();
    std::fs::remove_dir_all(&s.corpus.sources).unwrap();
    let store = format!("s3://{b}/fleet");
    let _w = worker(s.tmp.path(), 70, &store, &[], &[]);
    let source = format!("store:{snapshot}");
    let out = s.tmp.path().join("out.gz");
    let mut a = job_args(&s.corpus, &source, &s.ins);
    a.extend_from_slice(&[
        "--amqp",
        &amqp,
        "--store",
        &store,
        "--out",
        out.to_str().unwrap(),
    ]);
    run_ok(&a, &[]);
    assert_eq!(gunzip(&out), s.want);
}

/// A message that is not a task (garbage, or another protocol version) is
/// dead-lettered to its job without crashing the worker, which keeps serving.
#[test]
fn poison_messages_are_dead_lettered_and_the_worker_survives() {
    use covmerge_proto::wire;
    use covmerge_queue::{amqp::AmqpQueue, Event, Queue, DEFAULT_DELIVERY_LIMIT};

    let _g = fleet::lock();
    let s = setup(73, false);
    let store = file_store(&s.tmp.path().join("store"));
    let mut w = worker(s.tmp.path(), 80, &store, &[], &[]);
    let job = format!("poison-msg-{}", std::process::id());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let q = AmqpQueue::connect(&fleet::amqp(), DEFAULT_DELIVERY_LIMIT)
            .await
            .unwrap();
        q.open_job(&job).await.unwrap();
        // Garbage, then a well-formed envelope of an unknown protocol version.
        #[derive(serde::Serialize)]
        struct Env {
            version: u16,
            body: u8,
        }
        let future = rmp_serde::to_vec_named(&Env {
            version: wire::PROTOCOL_VERSION + 1,
            body: 0,
        })
        .unwrap();
        for body in [b"\xc1 not msgpack".to_vec(), future.clone()] {
            q.publish_task(&job, body.clone()).await.unwrap();
            let ev = tokio::time::timeout(Duration::from_secs(30), q.next_event(&job))
                .await
                .expect("dead letter");
            match ev.unwrap() {
                Event::DeadLetter { body: b, .. } => assert_eq!(b, body),
                other => panic!("expected a dead letter, got {other:?}"),
            }
        }
        q.close_job(&job).await.unwrap();
    });
    assert!(
        w.child.try_wait().unwrap().is_none(),
        "the worker is still running"
    );
    assert!(
        w.log_text().matches("poison message").count() >= 2,
        "{}",
        w.log_text()
    );
    // It still serves real work.
    let amqp = fleet::amqp();
    let out = s.tmp.path().join("out.gz");
    let a = s.coord_args(&amqp, &store, &out);
    run_ok(&a, &[]);
    assert_eq!(gunzip(&out), s.want);
    w.signal(libc::SIGTERM);
    assert_eq!(w.wait_exit(Duration::from_secs(30)), Some(0));
}

/// A runtime for talking to the broker directly from a test.
fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The next event of `job`, within 30 s.
async fn next_event(q: &covmerge_queue::amqp::AmqpQueue, job: &str) -> covmerge_queue::Event {
    use covmerge_queue::Queue;
    tokio::time::timeout(Duration::from_secs(30), q.next_event(job))
        .await
        .expect("an event within 30 s")
        .unwrap()
}

/// Issue 9.1: a 98-byte split task with `shards` = 4294967295 aborted every worker
/// that took it (a 103 GB allocation) and went back to the queue for the next one. It
/// is dead-lettered now, and the worker keeps serving.
#[test]
fn forged_task_with_4294967295_shards_no_longer_kills_the_worker() {
    use covmerge_proto::wire::{self, SplitTask, Task};
    use covmerge_proto::{JobId, SplitId};
    use covmerge_queue::{amqp::AmqpQueue, Event, Queue, DEFAULT_DELIVERY_LIMIT};

    let _g = fleet::lock();
    let s = setup(79, false);
    let store = file_store(&s.tmp.path().join("store"));
    let w = worker(s.tmp.path(), 90, &store, &[], &[]);
    let job = format!("forged-shards-{}", std::process::id());
    rt().block_on(async {
        let q = AmqpQueue::connect(&fleet::amqp(), DEFAULT_DELIVERY_LIMIT)
            .await
            .unwrap();
        q.open_job(&job).await.unwrap();
        let task = Task::Split(SplitTask {
            job: JobId::parse(&job).unwrap(),
            split: SplitId(0),
            input: s.ins[0].clone(),
            shards: u32::MAX,
            max_bad_rows: 0,
            go: Default::default(),
            more: Vec::new(),
        });
        let body = wire::encode(&task).unwrap();
        q.publish_task(&job, body.clone()).await.unwrap();
        match next_event(&q, &job).await {
            Event::DeadLetter { body: b, reason } => {
                assert_eq!(b, body);
                assert!(reason.contains("rejected"), "{reason}");
            }
            other => panic!("expected a dead letter, got {other:?}"),
        }
        q.close_job(&job).await.unwrap();
    });
    let mut w = w;
    assert!(
        w.child.try_wait().unwrap().is_none(),
        "the worker survived:\n{}",
        w.log_text()
    );
    assert!(w.log_text().contains("invalid task"), "{}", w.log_text());
    // And it still serves real work.
    let amqp = fleet::amqp();
    let out = s.tmp.path().join("out.gz");
    run_ok(&s.coord_args(&amqp, &store, &out), &[]);
    assert_eq!(gunzip(&out), s.want);
    w.signal(libc::SIGTERM);
    assert_eq!(w.wait_exit(Duration::from_secs(30)), Some(0));
}

/// Issue 9.2: whoever could publish a task could make a worker read any local file
/// (a split of `/etc/passwd` was read up to the header check), and a job id `../../x`
/// was decoded without its check. A worker now reads only the inputs the job was
/// created with, and a bad job id makes the message poison.
#[test]
fn forged_split_task_cannot_read_files_outside_its_job() {
    use covmerge_proto::wire::{self, FailureKind, ReportStatus, SplitTask, Task, TaskReport};
    use covmerge_proto::{JobId, SplitId};
    use covmerge_queue::{amqp::AmqpQueue, Event, Queue, DEFAULT_DELIVERY_LIMIT};

    let _g = fleet::lock();
    let s = setup(83, false);
    let store = file_store(&s.tmp.path().join("store"));
    let amqp = fleet::amqp();
    let out = s.tmp.path().join("out.gz");
    let mut a = s.coord_args(&amqp, &store, &out);
    let job = format!("forged-input-{}", std::process::id());
    a.extend_from_slice(&["--job", &job]);
    let w = worker(s.tmp.path(), 91, &store, &[], &[]);
    // A real job: its spec (and inputs) are in the store.
    run_ok(&a, &[]);
    assert_eq!(gunzip(&out), s.want);
    rt().block_on(async {
        let q = AmqpQueue::connect(&amqp, DEFAULT_DELIVERY_LIMIT)
            .await
            .unwrap();
        q.open_job(&job).await.unwrap();
        let forged = Task::Split(SplitTask {
            job: JobId::parse(&job).unwrap(),
            split: SplitId(0),
            input: "/etc/passwd".into(),
            shards: 6,
            max_bad_rows: 0,
            go: Default::default(),
            more: Vec::new(),
        });
        q.publish_task(&job, wire::encode(&forged).unwrap())
            .await
            .unwrap();
        let (mut refused, mut dead) = (None, false);
        while refused.is_none() || !dead {
            match next_event(&q, &job).await {
                Event::Report(b) => {
                    let r: TaskReport = wire::decode(&b).unwrap();
                    if let ReportStatus::Failed(f) = r.status {
                        assert_eq!(f.kind, FailureKind::Refused, "{f}");
                        refused = Some(f.message);
                    }
                }
                Event::DeadLetter { .. } => dead = true,
                Event::TasksLost => {}
            }
        }
        let refused = refused.unwrap();
        assert!(refused.contains("refused"), "{refused}");
        assert!(
            !refused.contains("column") && !refused.contains("passwd"),
            "the file was not read: {refused}"
        );
        // The job's own input with Go settings the job was not created with (a module
        // mapped outside the repository): refused too, before anything is read.
        let forged_go = Task::Split(SplitTask {
            job: JobId::parse(&job).unwrap(),
            split: SplitId(0),
            input: s.ins[0].clone(),
            shards: 6,
            max_bad_rows: 0,
            go: covmerge_proto::job::GoInput {
                modules: vec![covmerge_proto::job::GoModule {
                    module: "example.com/m".into(),
                    dir: "../../etc".into(),
                }],
                ..Default::default()
            },
            more: Vec::new(),
        });
        q.publish_task(&job, wire::encode(&forged_go).unwrap())
            .await
            .unwrap();
        let (mut refused_go, mut dead_go) = (None, false);
        while refused_go.is_none() || !dead_go {
            match next_event(&q, &job).await {
                Event::Report(b) => {
                    let r: TaskReport = wire::decode(&b).unwrap();
                    if let ReportStatus::Failed(f) = r.status {
                        assert_eq!(f.kind, FailureKind::Refused, "{f}");
                        refused_go = Some(f.message);
                    }
                }
                Event::DeadLetter { .. } => dead_go = true,
                Event::TasksLost => {}
            }
        }
        let refused_go = refused_go.unwrap();
        assert!(
            refused_go.contains("settings are not those of job"),
            "{refused_go}"
        );
        // The same task with a job id that escapes the job's prefix.
        #[derive(serde::Serialize)]
        struct Env<T> {
            version: u16,
            body: T,
        }
        #[derive(serde::Serialize)]
        enum FakeTask {
            Split {
                job: String,
                split: u32,
                input: String,
                shards: u32,
                max_bad_rows: u64,
            },
        }
        let escape = rmp_serde::to_vec_named(&Env {
            version: wire::PROTOCOL_VERSION,
            body: FakeTask::Split {
                job: "../../x".into(),
                split: 0,
                input: s.ins[0].clone(),
                shards: 6,
                max_bad_rows: 0,
            },
        })
        .unwrap();
        q.publish_task(&job, escape.clone()).await.unwrap();
        match next_event(&q, &job).await {
            Event::DeadLetter { body, .. } => assert_eq!(body, escape),
            other => panic!("expected a dead letter, got {other:?}"),
        }
        q.close_job(&job).await.unwrap();
    });
    let log = w.log_text();
    assert!(
        log.contains("poison message") && log.contains("job id"),
        "{log}"
    );
    assert!(
        !log.contains("spill/00000") || !log.contains("../../x"),
        "{log}"
    );
}

/// Issue 9.3: a lost report hung the coordinator (the worker acknowledged the task
/// anyway and nothing resent it). Now (a) the coordinator settles tasks from the
/// store's markers periodically, and (b) a report the broker refused hands the task
/// back, and its redelivery reports it again from the marker instead of redoing it.
#[test]
fn lost_report_no_longer_hangs_the_coordinator() {
    let _g = fleet::lock();
    let s = setup(89, false);
    let amqp = fleet::amqp();
    // (a) Every report lost: only the store's markers tell the coordinator.
    let store = file_store(&s.tmp.path().join("store-lost"));
    let _w = worker(
        s.tmp.path(),
        92,
        &store,
        &[],
        &[("COVMERGE_FAULT_LOSE_REPORTS", "1")],
    );
    let out = s.tmp.path().join("out-lost.gz");
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&["--reconcile-secs", "2"]);
    let o = coordinator_run(&a, &[], LONG);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("settled from its marker"), "{err}");
    assert_eq!(gunzip(&out), s.want);
    drop(_w);
    // (b) The first report of each task refused: handed back and reported again; no
    // reconciliation within the test's time.
    let store_dir = s.tmp.path().join("store-fail");
    let store = file_store(&store_dir);
    let w = worker(
        s.tmp.path(),
        93,
        &store,
        &[],
        &[("COVMERGE_FAULT_FAIL_REPORTS", "1")],
    );
    let out = s.tmp.path().join("out-fail.gz");
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&["--reconcile-secs", "3600"]);
    run_ok(&a, &[]);
    assert_eq!(gunzip(&out), s.want);
    let log = w.log_text();
    assert!(log.contains("reporting it again"), "{log}");
    // 3 splits and 6 shards, each done once: reported again, not redone.
    assert_eq!(log.matches("part written").count(), 6, "{log}");
}

/// Messages ready in the shared task queue, as RabbitMQ counts them.
fn tasks_ready() -> usize {
    let o = std::process::Command::new("rabbitmqctl")
        .args([
            "-q",
            "list_queues",
            "-p",
            &fleet::vhost(),
            "name",
            "messages_ready",
        ])
        .output()
        .expect("rabbitmqctl");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .find(|(name, _)| *name == "covmerge.tasks")
        .and_then(|(_, n)| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Found when two test suites shared one vhost: a task removed from the queue by
/// someone else (here: the queue purged) was never published again, and the
/// coordinator waited forever. After `--republish-secs` of silence it publishes the
/// tasks it still waits for again.
#[test]
fn tasks_lost_from_the_queue_no_longer_hang_the_coordinator() {
    let _g = fleet::lock();
    let s = setup(97, false);
    let amqp = fleet::amqp();
    let store = file_store(&s.tmp.path().join("store"));
    let out = s.tmp.path().join("out.gz");
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&["--republish-secs", "3", "--reconcile-secs", "1"]);
    let coord = fleet::coordinator_spawn(&a);
    // No worker yet: the three split tasks wait in the queue until they are purged.
    let t0 = std::time::Instant::now();
    while tasks_ready() < 3 {
        assert!(t0.elapsed() < LONG, "the split tasks were never published");
        std::thread::sleep(Duration::from_millis(100));
    }
    let purged = std::process::Command::new("rabbitmqctl")
        .args(["-q", "purge_queue", "-p", &fleet::vhost(), "covmerge.tasks"])
        .output()
        .unwrap();
    // (Not asserting an empty queue here: a republish may already follow the purge.)
    assert!(purged.status.success());
    let _w = worker(s.tmp.path(), 94, &store, &[], &[]);
    let o = coord.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("publishing the waiting tasks again"), "{err}");
    assert_eq!(gunzip(&out), s.want);
}

/// Waits until `dir` holds at least `n` `.done` markers.
fn wait_markers(dir: &Path, n: usize, what: &fleet::Proc) {
    let t0 = std::time::Instant::now();
    while !(dir.is_dir() && marker_times(dir).len() >= n) {
        assert!(t0.elapsed() < LONG, "no progress: {}", what.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 9.5: with every connection to RabbitMQ cut for 60 s mid-job, the coordinator
/// gave up ("cannot connect to RabbitMQ … within 60s"). A 70 s outage now costs 70 s;
/// with a budget shorter than the outage, the coordinator exits naming the job as
/// resumable, and `--resume` finishes it.
#[test]
fn broker_outage_of_70s_no_longer_kills_the_job() {
    use covmerge_integration_tests::relay::Relay;
    let _g = fleet::lock();
    let s = setup(97, false);
    let relay = Relay::start(&fleet::amqp_addr());
    let via = fleet::amqp_via(&relay.addr());
    let store_dir = s.tmp.path().join("store");
    let store = file_store(&store_dir);
    let w = fleet::worker_on(
        &via,
        s.tmp.path(),
        100,
        &store,
        &[],
        &[("COVMERGE_FAULT_SLEEP", "merge:700")],
    );
    let out = s.tmp.path().join("out.gz");
    let mut a = s.coord_args(&via, &store, &out);
    a.extend_from_slice(&["--job", "broker-outage-job"]);
    let coord = fleet::coordinator_spawn_env(&a, &[], Duration::from_secs(400));
    wait_markers(&store_dir.join("jobs/broker-outage-job/parts"), 1, &w);
    relay.cut();
    let cut_at = std::time::Instant::now();
    std::thread::sleep(Duration::from_secs(70));
    assert!(
        relay.refused.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "both sides kept trying"
    );
    relay.restore();
    let o = coord.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(gunzip(&out), s.want);
    eprintln!(
        "job finished {:?} after a 70 s broker outage began",
        cut_at.elapsed()
    );
    assert!(
        w.log_text().contains("reconnected to RabbitMQ"),
        "{}",
        w.log_text()
    );
    drop(w);

    // A budget shorter than the outage: a clear exit, the job resumable.
    let store_dir = s.tmp.path().join("store-2");
    let store = file_store(&store_dir);
    let w = worker(
        s.tmp.path(),
        101,
        &store,
        &[],
        &[("COVMERGE_FAULT_SLEEP", "merge:1000")],
    );
    let out = s.tmp.path().join("out-2.gz");
    let mut a = s.coord_args(&via, &store, &out);
    a.extend_from_slice(&[
        "--job",
        "broker-outage-job-2",
        "--broker-outage-budget",
        "5",
    ]);
    let coord = fleet::coordinator_spawn_env(&a, &[], Duration::from_secs(120));
    wait_markers(&store_dir.join("jobs/broker-outage-job-2/parts"), 1, &w);
    relay.cut();
    let o = coord.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("job broker-outage-job-2 is resumable") && err.contains("--resume"),
        "{err}"
    );
    assert!(!out.exists());
    relay.restore();
    let amqp = fleet::amqp();
    let mut r = s.coord_args(&amqp, &store, &out);
    r.extend_from_slice(&["--job", "broker-outage-job-2", "--resume"]);
    run_ok(&r, &[]);
    assert_eq!(gunzip(&out), s.want);
}

/// Issue 9.4: a 30 s S3 outage spent a shard's 5 deliveries in 25 s, and a 12 s
/// outage during result assembly failed `put_multipart`. Store operations now retry
/// within a budget of minutes: a 35 s outage mid-merge and a 12 s outage during
/// assembly cost time, not the job. When a task does fail, the coordinator names the
/// worker's error, not just the delivery limit.
#[test]
fn storage_outages_of_35s_mid_merge_and_12s_in_assembly_no_longer_fail_the_job() {
    use covmerge_integration_tests::relay::Relay;
    let _g = fleet::lock();
    let s = setup(101, false);
    let b = bucket("outage");
    let to_workers = Relay::start(&fleet::s3_addr());
    let to_coord = Relay::start(&fleet::s3_addr());
    let wep = format!("http://{}", to_workers.addr());
    let cep = format!("http://{}", to_coord.addr());
    let store = format!("s3://{b}/fleet");
    let w = worker(
        s.tmp.path(),
        110,
        &store,
        &[],
        &[
            ("AWS_ENDPOINT_URL", &wep),
            ("COVMERGE_FAULT_SLEEP", "merge:300"),
        ],
    );
    let amqp = fleet::amqp();
    let out = s.tmp.path().join("out.gz");
    let man = s.tmp.path().join("manifest.json");
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&["--manifest", man.to_str().unwrap()]);
    let c = fleet::Proc::spawn(
        {
            let mut cmd = fleet::fleet_cmd(&[&["coordinator", "--quiet"][..], &a[..]].concat());
            cmd.env("AWS_ENDPOINT_URL", &cep)
                .env("COVMERGE_FAULT_SLEEP", "assemble:1500");
            cmd
        },
        s.tmp.path().join("coord.log"),
        "coordinator",
    );
    let mut c = c;
    w.wait_log("fault point reached", LONG);
    to_workers.cut();
    std::thread::sleep(Duration::from_secs(35));
    to_workers.restore();
    c.wait_log("fault point reached", LONG);
    to_coord.cut();
    std::thread::sleep(Duration::from_secs(12));
    to_coord.restore();
    assert_eq!(c.wait_exit(LONG), Some(0), "{}", c.log_text());
    assert_eq!(gunzip(&out), s.want);
    assert!(w.log_text().contains("store operation failed; retrying"));
    assert!(
        c.log_text().contains("store reachable again"),
        "{}",
        c.log_text()
    );
    assert!(
        !w.log_text().contains("will be retried"),
        "no delivery spent:\n{}",
        w.log_text()
    );
    let m = manifest(&man);
    assert!(m["shards"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["attempts"] == 1));
    drop(w);

    // A shard that keeps failing: the failure names the worker's error.
    let store = file_store(&s.tmp.path().join("store-fail"));
    let _w = worker(
        s.tmp.path(),
        111,
        &store,
        &[],
        &[("COVMERGE_FAULT_FAIL_SHARD", "1")],
    );
    let out = s.tmp.path().join("out-fail.gz");
    let a = s.coord_args(&amqp, &store, &out);
    let o = coordinator_run(&a, &[], LONG);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("shard 00001") && err.contains("last error: injected failure of shard 00001"),
        "{err}"
    );
}

/// Issue 9.6: after `--grace` only the task's future was dropped; the blocking split
/// ran on and the process exit waited for it. A worker stopped mid-split now exits
/// within grace + a few seconds, the split's thread notices it was abandoned, the
/// task is handed back, and the job's result is complete and identical.
#[test]
fn grace_hand_back_no_longer_waits_for_blocking_work() {
    let _g = fleet::lock();
    let s = setup(103, false);
    let amqp = fleet::amqp();
    let store = file_store(&s.tmp.path().join("store"));
    let mut w = worker(
        s.tmp.path(),
        120,
        &store,
        &["--grace", "1"],
        // A split's thread, blocked for a minute after its first chunk.
        &[("COVMERGE_FAULT_SLEEP", "split:60000")],
    );
    let out = s.tmp.path().join("out.gz");
    let a = s.coord_args(&amqp, &store, &out);
    let coord = fleet::coordinator_spawn(&a);
    w.wait_log("fault point reached", Duration::from_secs(60));
    let t0 = std::time::Instant::now();
    w.signal(libc::SIGTERM);
    let code = w.wait_exit(Duration::from_secs(30));
    let took = t0.elapsed();
    eprintln!("worker exited {took:?} after SIGTERM with --grace 1");
    assert_eq!(code, Some(0), "{}", w.log_text());
    assert!(took < Duration::from_secs(1 + 5), "exit took {took:?}");
    assert!(
        w.log_text().contains("handing the task back"),
        "{}",
        w.log_text()
    );
    let _w2 = worker(s.tmp.path(), 121, &store, &[], &[]);
    let o = coord.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(gunzip(&out), s.want);
}

/// Issue 9.7: shards merged twice during a stall reported `attempts` 1 in the
/// manifest. A worker stalls mid-shard and loses its broker connection; another
/// worker merges the shard again; the stalled one finishes later too. The manifest
/// counts both executions of that shard.
#[test]
fn manifest_attempts_no_longer_undercount_a_shard_merged_twice() {
    use covmerge_integration_tests::relay::Relay;
    let _g = fleet::lock();
    let s = setup(107, false);
    let relay = Relay::start(&fleet::amqp_addr());
    let via = fleet::amqp_via(&relay.addr());
    let store_dir = s.tmp.path().join("store");
    let store = file_store(&store_dir);
    let stalled = fleet::worker_on(
        &via,
        s.tmp.path(),
        130,
        &store,
        &[],
        &[("COVMERGE_FAULT_SLEEP", "merge:40000")],
    );
    let amqp = fleet::amqp();
    let out = s.tmp.path().join("out.gz");
    let man = s.tmp.path().join("manifest.json");
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&["--manifest", man.to_str().unwrap(), "--job", "stall-job"]);
    let coord = fleet::coordinator_spawn(&a);
    stalled.wait_log("fault point reached", Duration::from_secs(60));
    // The stalled worker's connection drops: the broker gives its shard to another.
    relay.cut();
    let _healthy = worker(s.tmp.path(), 131, &store, &[], &[]);
    let o = coord.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(gunzip(&out), s.want);
    let m = manifest(&man);
    let attempts: Vec<u64> = m["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["attempts"].as_u64().unwrap())
        .collect();
    assert_eq!(
        attempts.iter().filter(|&&n| n == 2).count(),
        1,
        "the stalled shard ran twice, the others once: {attempts:?}"
    );
    assert!(attempts.iter().all(|&n| n == 1 || n == 2), "{attempts:?}");
}

/// Issue 9.9: a split reporting a chunk for a shard the job does not have had the
/// chunk dropped without a count, and the job "completed" without those rows. The
/// test plays the worker: it reports such a chunk, and the job fails naming it.
#[test]
fn chunk_for_an_out_of_range_shard_no_longer_dropped_silently() {
    use covmerge_proto::wire::{self, ReportStatus, SplitOutcome, Task, TaskReport};
    use covmerge_proto::{Attempt, ShardId};
    use covmerge_queue::{amqp::AmqpQueue, Queue, DEFAULT_DELIVERY_LIMIT};

    let _g = fleet::lock();
    let s = setup(109, false);
    let amqp = fleet::amqp();
    let store = file_store(&s.tmp.path().join("store"));
    let out = s.tmp.path().join("out.gz");
    let a = s.coord_args(&amqp, &store, &out);
    let coord = fleet::coordinator_spawn(&a);
    rt().block_on(async {
        let q = AmqpQueue::connect(&amqp, DEFAULT_DELIVERY_LIMIT)
            .await
            .unwrap();
        for _ in 0..s.ins.len() {
            let d = tokio::time::timeout(Duration::from_secs(60), q.next_task())
                .await
                .expect("a split task")
                .unwrap();
            let Task::Split(t) = wire::decode::<Task>(&d.body).unwrap() else {
                panic!("splits come first");
            };
            let key = format!("jobs/{}/spill/{}/x/00000.cms", t.job, t.split);
            let chunk = wire::ChunkRef {
                key,
                start: 0,
                len: 1,
            };
            let report = TaskReport {
                job: t.job.clone(),
                task: covmerge_proto::TaskRef::Split(t.split),
                attempt: Attempt(1),
                status: ReportStatus::Split(SplitOutcome {
                    chunks: vec![(ShardId(99), chunk)],
                    ..SplitOutcome::default()
                }),
            };
            q.publish_report(t.job.as_str(), wire::encode(&report).unwrap())
                .await
                .unwrap();
            d.ack().await.unwrap();
        }
    });
    let o = coord.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("split 00000") && err.contains("shard 00099") && err.contains("6 shards"),
        "{err}"
    );
    assert!(!out.exists());
}

/// Issue 9.8: `worker --help` printed the password of `COVMERGE_AMQP`, malformed AMQP
/// URLs were echoed with their password (`amqp:/user:PW@host/vh` even went to the
/// broker as a vhost name), `--dashboard http://u:PW@host` was logged as given, and
/// an unparsable store URL came back whole in the error.
#[test]
fn secrets_no_longer_reach_help_logs_or_errors() {
    use std::process::{Command, Stdio};
    const PW: &str = "Pw9SecretXyz";
    let help = Command::new(covmerge_integration_tests::bin())
        .args(["worker", "--help"])
        .env(
            "COVMERGE_AMQP",
            format!("amqp://user:{PW}@127.0.0.1:5672/%2f"),
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("--amqp") && !text.contains(PW), "{text}");

    let bad_urls = [
        format!("user:{PW}@127.0.0.1:5679"),
        format!("amqp:user:{PW}@127.0.0.1/vh"),
        format!("amqp:/user:{PW}@127.0.0.1/vh"),
        format!("amqp://user:{PW}@127.0.0.1:notaport/%2f"),
    ];
    for url in &bad_urls {
        let mut c = fleet::fleet_cmd(&["worker", "--amqp", url, "--store", "memory:"]);
        let child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        let o = child.wait_with_output().unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!o.status.success(), "{url}: {all}");
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{url}: refused at once"
        );
        assert!(all.contains("invalid AMQP URL"), "{url}: {all}");
        assert!(!all.contains(PW), "{url}: {all}");
    }

    let o = fleet::fleet_cmd(&[
        "worker",
        "--amqp",
        &fleet::amqp(),
        "--store",
        &format!("s3://k:{PW}@bucket:badport/x"),
    ])
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && !err.contains(PW), "{err}");

    // A dashboard that is down: its URL is logged without the password.
    let s = setup(113, false);
    let out = s.tmp.path().join("out.gz");
    let dash = format!("http://u:{PW}@127.0.0.1:9/");
    let mut a = vec!["merge", "--quiet"];
    a.extend(job_args(&s.corpus, &s.source, &s.ins));
    a.extend_from_slice(&[
        "--out",
        out.to_str().unwrap(),
        "--dashboard",
        &dash,
        "--dashboard-client",
        "ci",
    ]);
    let o = Command::new(covmerge_integration_tests::bin())
        .args(&a)
        .env("RUST_LOG", "info")
        .env("COVMERGE_DASHBOARD_KEY", "dashkey")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("127.0.0.1:9"), "the dashboard is named: {err}");
    assert!(!err.contains(PW), "{err}");
}
