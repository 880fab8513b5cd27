//! Forged and poison queue messages, and what a task may name: refused, dead-lettered,
//! never a crash or a file outside the job; secrets in no log.

use super::*;

/// A message that is not a task (garbage, or another protocol version) is
/// dead-lettered to its job without crashing the worker, which keeps serving.
#[test]
fn poison_messages_are_dead_lettered_and_the_worker_survives() {
    use covmerge_proto::wire;
    use covmerge_queue::{amqp::AmqpQueue, Event, Queue, DEFAULT_DELIVERY_LIMIT};

    let s = FleetCorpus::new(73).build();
    let store = s.file_store();
    let mut w = worker(s.dir(), 80, &store, &[], &[]);
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
    let out = s.path("out.gz");
    let a = s.coord_args(&amqp, &store, &out);
    run_ok(&a, &[]);
    assert_eq!(gunzip(&out), s.want);
    w.signal(libc::SIGTERM);
    assert_eq!(w.wait_exit(Duration::from_secs(30)), Some(0));
}

/// A 98-byte split task with `shards` = 4294967295 aborted every worker
/// that took it (a 103 GB allocation) and went back to the queue for the next one. It
/// is dead-lettered now, and the worker keeps serving.
#[test]
fn forged_task_with_4294967295_shards_no_longer_kills_the_worker() {
    use covmerge_proto::wire::{self, SplitTask, Task};
    use covmerge_proto::{JobId, SplitId};
    use covmerge_queue::{amqp::AmqpQueue, Event, Queue, DEFAULT_DELIVERY_LIMIT};

    let s = FleetCorpus::new(79).build();
    let store = s.file_store();
    let w = worker(s.dir(), 90, &store, &[], &[]);
    let job = format!("forged-shards-{}", std::process::id());
    rt().block_on(async {
        let q = AmqpQueue::connect(&fleet::amqp(), DEFAULT_DELIVERY_LIMIT)
            .await
            .unwrap();
        q.open_job(&job).await.unwrap();
        let task = Task::Split(SplitTask {
            namespace: None,
            job: JobId::parse(&job).unwrap(),
            split: SplitId(0),
            input: s.inputs[0].clone(),
            shards: u32::MAX,
            max_bad_rows: 0,
            read: Default::default(),
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
    let out = s.path("out.gz");
    run_ok(&s.coord_args(&amqp, &store, &out), &[]);
    assert_eq!(gunzip(&out), s.want);
    w.signal(libc::SIGTERM);
    assert_eq!(w.wait_exit(Duration::from_secs(30)), Some(0));
}

/// Publishes `task` to `job`, waits for a worker's refusal of it and its dead letter;
/// returns the refusal's message.
async fn refusal(
    q: &covmerge_queue::amqp::AmqpQueue,
    job: &str,
    task: &covmerge_proto::wire::Task,
) -> String {
    use covmerge_proto::wire::{self, FailureKind, ReportStatus, TaskReport};
    use covmerge_queue::{Event, Queue};
    q.publish_task(job, wire::encode(task).unwrap())
        .await
        .unwrap();
    let (mut refused, mut dead) = (None, false);
    while refused.is_none() || !dead {
        match next_event(q, job).await {
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
    refused.unwrap()
}

/// A split task of `input` under the job id `../../x` is dead-lettered to `job`, as is.
async fn assert_escaping_job_id_is_poison(
    q: &covmerge_queue::amqp::AmqpQueue,
    job: &str,
    input: &str,
) {
    use covmerge_proto::wire;
    use covmerge_queue::{Event, Queue};
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
            input: input.into(),
            shards: 6,
            max_bad_rows: 0,
        },
    })
    .unwrap();
    q.publish_task(job, escape.clone()).await.unwrap();
    match next_event(q, job).await {
        Event::DeadLetter { body, .. } => assert_eq!(body, escape),
        other => panic!("expected a dead letter, got {other:?}"),
    }
}

/// Whoever could publish a task could make a worker read any local file
/// (a split of `/etc/passwd` was read up to the header check), and a job id `../../x`
/// was decoded without its check. A worker now reads only the inputs the job was
/// created with, and a bad job id makes the message poison.
#[test]
fn forged_split_task_cannot_read_files_outside_its_job() {
    use covmerge_proto::wire::{SplitTask, Task};
    use covmerge_proto::{JobId, SplitId};
    use covmerge_queue::{amqp::AmqpQueue, Queue, DEFAULT_DELIVERY_LIMIT};

    let s = FleetCorpus::new(83).build();
    let store = s.file_store();
    let amqp = fleet::amqp();
    let out = s.path("out.gz");
    let mut a = s.coord_args(&amqp, &store, &out);
    let job = format!("forged-input-{}", std::process::id());
    a.extend_from_slice(&["--job", &job]);
    let w = worker(s.dir(), 91, &store, &[], &[]);
    // A real job: its spec (and inputs) are in the store.
    run_ok(&a, &[]);
    assert_eq!(gunzip(&out), s.want);
    rt().block_on(async {
        let q = AmqpQueue::connect(&amqp, DEFAULT_DELIVERY_LIMIT)
            .await
            .unwrap();
        q.open_job(&job).await.unwrap();
        // The job's split 0: each forgery changes one thing.
        let split0 = SplitTask {
            namespace: None,
            job: JobId::parse(&job).unwrap(),
            split: SplitId(0),
            input: s.inputs[0].clone(),
            shards: 6,
            max_bad_rows: 0,
            read: Default::default(),
            more: Vec::new(),
        };
        let forged = Task::Split(SplitTask {
            input: "/etc/passwd".into(),
            ..split0.clone()
        });
        let refused = refusal(&q, &job, &forged).await;
        assert!(refused.contains("refused"), "{refused}");
        assert!(
            !refused.contains("column") && !refused.contains("passwd"),
            "the file was not read: {refused}"
        );
        // The job's own input with Go settings the job was not created with (a module
        // mapped outside the repository): refused too, before anything is read.
        let forged_go = Task::Split(SplitTask {
            read: covmerge_proto::input::InputSpec {
                options: covmerge_proto::input::InputOptions {
                    partial_sha256: None,
                    go_modules: vec![covmerge_proto::input::GoModule {
                        module: "example.com/m".into(),
                        dir: "../../etc".into(),
                    }],
                },
                ..Default::default()
            },
            ..split0.clone()
        });
        let refused_go = refusal(&q, &job, &forged_go).await;
        assert!(
            refused_go.contains("settings are not those of job"),
            "{refused_go}"
        );
        // A merge task of the job with groups the job was not created with (its
        // records would differ from the job's): refused before anything is read.
        // The job's merge task of shard 0, no chunks: each forgery changes one thing.
        let merge0 = covmerge_proto::wire::MergeTask {
            job: JobId::parse(&job).unwrap(),
            shard: covmerge_proto::ShardId(0),
            base_commit: s.corpus.base_commit.clone(),
            source: s.source.clone(),
            chunks: Vec::new(),
            file_path_prefix: String::new(),
            groups: Vec::new(),
            partials: Vec::new(),
            rollup: false,
        };
        let forged_groups = Task::Merge(covmerge_proto::wire::MergeTask {
            groups: vec![covmerge_proto::group::Group::parse("all=*").unwrap()],
            ..merge0.clone()
        });
        let refused_groups = refusal(&q, &job, &forged_groups).await;
        assert!(
            refused_groups.contains("its groups are not those of job"),
            "{refused_groups}"
        );
        // A roll-up's task (no base: only the shard's partial files) for this merge
        // job: refused, its shard would have no part.
        let forged_rollup = Task::Merge(covmerge_proto::wire::MergeTask {
            base_commit: String::new(),
            rollup: true,
            ..merge0.clone()
        });
        let refused_rollup = refusal(&q, &job, &forged_rollup).await;
        assert!(refused_rollup.contains("not a roll-up"), "{refused_rollup}");
        // The job's own split of another namespace's rows: it was run, and a split
        // whose input held none of the job's namespace was merged into it.
        let forged_ns = Task::Split(SplitTask {
            namespace: Some("android".into()),
            ..split0
        });
        let refused_ns = refusal(&q, &job, &forged_ns).await;
        assert!(
            refused_ns.contains("settings are not those of job"),
            "{refused_ns}"
        );
        // A merge task of the job with chunks its splits did not plan for its shard
        // (one split's chunk named twice, another's left out, was merged): refused.
        let forged_chunks = Task::Merge(merge0);
        let refused_chunks = refusal(&q, &job, &forged_chunks).await;
        assert!(
            refused_chunks.contains("its chunks are not those the job's splits wrote"),
            "{refused_chunks}"
        );
        // The same task with a job id that escapes the job's prefix.
        assert_escaping_job_id_is_poison(&q, &job, &s.inputs[0]).await;
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

/// A split reporting a chunk for a shard the job does not have had the
/// chunk dropped without a count, and the job "completed" without those rows. The
/// test plays the worker: it reports such a chunk, and the job fails naming it.
#[test]
fn chunk_for_an_out_of_range_shard_no_longer_dropped_silently() {
    use covmerge_proto::wire::{self, ReportStatus, SplitOutcome, Task, TaskReport};
    use covmerge_proto::{Attempt, ShardId};
    use covmerge_queue::{amqp::AmqpQueue, Queue, DEFAULT_DELIVERY_LIMIT};

    let s = FleetCorpus::new(109).build();
    let amqp = fleet::amqp();
    let store = s.file_store();
    let out = s.path("out.gz");
    let a = s.coord_args(&amqp, &store, &out);
    let coord = fleet::coordinator_spawn(&a);
    rt().block_on(async {
        let q = AmqpQueue::connect(&amqp, DEFAULT_DELIVERY_LIMIT)
            .await
            .unwrap();
        for _ in 0..s.inputs.len() {
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
            let outcome = SplitOutcome {
                chunks: vec![(ShardId(99), chunk)],
                ..SplitOutcome::default()
            };
            // A report settles a split with its marker's outcome: the marker first, as
            // a worker writes it.
            let marker = s
                .path("store")
                .join(covmerge_proto::layout::split_done(&t.job, t.split));
            std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
            std::fs::write(&marker, wire::encode(&outcome).unwrap()).unwrap();
            let report = TaskReport {
                job: t.job.clone(),
                task: covmerge_proto::TaskRef::Split(t.split),
                attempt: Attempt(1),
                status: ReportStatus::Split(outcome),
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

/// A report is a message anyone who can reach the broker can send. A forged report of
/// split 0 (no chunks, no rows), sent before any worker ran, settled the split; its
/// worker's real report was then a duplicate, and the job published a result without
/// that input's rows, exit 0, the manifest's totals agreeing with themselves. A report
/// now settles a task with its `.done` marker's outcome, and without one is ignored.
#[test]
fn a_forged_split_report_left_an_inputs_rows_out_of_the_result() {
    use covmerge_proto::wire::{self, ReportStatus, SplitOutcome, TaskReport};
    use covmerge_proto::{Attempt, JobId, SplitId, TaskRef};
    use covmerge_queue::{amqp::AmqpQueue, Queue, DEFAULT_DELIVERY_LIMIT};

    let s = FleetCorpus::new(110).build();
    let amqp = fleet::amqp();
    let store = s.file_store();
    let out = s.path("out.gz");
    let job = format!("forged-report-{}", std::process::id());
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&["--job", &job]);
    let coord = fleet::coordinator_spawn(&a);
    // Its split tasks published: its queue of reports is there.
    wait_tasks_ready(s.inputs.len(), "no split tasks");
    rt().block_on(async {
        let q = AmqpQueue::connect(&amqp, DEFAULT_DELIVERY_LIMIT)
            .await
            .unwrap();
        let report = TaskReport {
            job: JobId::parse(&job).unwrap(),
            task: TaskRef::Split(SplitId(0)),
            attempt: Attempt(1),
            status: ReportStatus::Split(SplitOutcome::default()),
        };
        q.publish_report(&job, wire::encode(&report).unwrap())
            .await
            .unwrap();
    });
    let w = worker(s.dir(), 81, &store, &[], &[]);
    let o = coord.join().unwrap();
    w.signal(libc::SIGTERM);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        gunzip(&out) == s.want,
        "the fleet's result is not the embedded merge's"
    );
}

/// `worker --help` printed the password of `COVMERGE_AMQP`, malformed AMQP
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
    let s = FleetCorpus::local(113).build();
    let out = s.path("out.gz");
    let dash = format!("http://u:{PW}@127.0.0.1:9/");
    let mut a = vec!["merge", "--quiet"];
    a.extend(s.job_args());
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
