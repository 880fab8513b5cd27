//! Reports and tasks lost, the broker and the store gone for a while: the job waits,
//! reconciles from the store, and finishes exactly.

use super::*;

/// A lost report hung the coordinator (the worker acknowledged the task
/// anyway and nothing resent it). Now (a) the coordinator settles tasks from the
/// store's markers periodically, and (b) a report the broker refused hands the task
/// back, and its redelivery reports it again from the marker instead of redoing it.
#[test]
fn lost_report_no_longer_hangs_the_coordinator() {
    let s = FleetCorpus::new(89).build();
    let amqp = fleet::amqp();
    // (a) Every report lost: only the store's markers tell the coordinator.
    let store = file_store(&s.path("store-lost"));
    let _w = worker(
        s.dir(),
        92,
        &store,
        &[],
        &[("COVMERGE_FAULT_LOSE_REPORTS", "1")],
    );
    let out = s.path("out-lost.gz");
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
    let store_dir = s.path("store-fail");
    let store = file_store(&store_dir);
    let w = worker(
        s.dir(),
        93,
        &store,
        &[],
        &[("COVMERGE_FAULT_FAIL_REPORTS", "1")],
    );
    let out = s.path("out-fail.gz");
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&["--reconcile-secs", "3600"]);
    run_ok(&a, &[]);
    assert_eq!(gunzip(&out), s.want);
    let log = w.log_text();
    assert!(log.contains("reporting it again"), "{log}");
    // 3 splits and 6 shards, each done once: reported again, not redone.
    assert_eq!(log.matches("part written").count(), 6, "{log}");
}

/// Found when two test suites shared one vhost: a task removed from the queue by
/// someone else (here: the queue purged) was never published again, and the
/// coordinator waited forever. After `--republish-secs` of silence it publishes the
/// tasks it still waits for again.
#[test]
fn tasks_lost_from_the_queue_no_longer_hang_the_coordinator() {
    let s = FleetCorpus::new(97).build();
    let amqp = fleet::amqp();
    let store = s.file_store();
    let out = s.path("out.gz");
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&["--republish-secs", "3", "--reconcile-secs", "1"]);
    let coord = fleet::coordinator_spawn(&a);
    // No worker yet: the three split tasks wait in the queue until they are purged.
    wait_tasks_ready(3, "the split tasks were never published");
    let purged = std::process::Command::new("rabbitmqctl")
        .args(["-q", "purge_queue", "-p", &fleet::vhost(), "covmerge.tasks"])
        .output()
        .unwrap();
    // (Not asserting an empty queue here: a republish may already follow the purge.)
    assert!(purged.status.success());
    let _w = worker(s.dir(), 94, &store, &[], &[]);
    let o = coord.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("publishing the waiting tasks again"), "{err}");
    assert_eq!(gunzip(&out), s.want);
}

/// With every connection to RabbitMQ cut for 60 s mid-job, the coordinator
/// gave up ("cannot connect to RabbitMQ … within 60s"). A 70 s outage now costs 70 s;
/// with a budget shorter than the outage, the coordinator exits naming the job as
/// resumable, and `--resume` finishes it.
#[test]
fn broker_outage_of_70s_no_longer_kills_the_job() {
    use covmerge_integration_tests::relay::Relay;
    let s = FleetCorpus::new(97).build();
    let relay = Relay::start(&fleet::amqp_addr());
    let via = fleet::amqp_via(&relay.addr());
    let store_dir = s.path("store");
    let store = file_store(&store_dir);
    let w = fleet::worker_on(
        &via,
        s.dir(),
        100,
        &store,
        &[],
        &[("COVMERGE_FAULT_SLEEP", "merge:700")],
    );
    let out = s.path("out.gz");
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
    assert!(
        o.status.success(),
        "coordinator:\n{}\nworker:\n{}",
        String::from_utf8_lossy(&o.stderr),
        w.log_text()
    );
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
    let store_dir = s.path("store-2");
    let store = file_store(&store_dir);
    // One task at a time: after the first shard's marker the next takes a second, so
    // the cut always comes first (two shards at once could both report before it, and
    // the job then finished: a flake on a busy machine).
    let w = worker(
        s.dir(),
        101,
        &store,
        &["--concurrency", "1"],
        &[("COVMERGE_FAULT_SLEEP", "merge:1000")],
    );
    let out = s.path("out-2.gz");
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

/// A 30 s S3 outage spent a shard's 5 deliveries in 25 s, and a 12 s
/// outage during result assembly failed `put_multipart`. Store operations now retry
/// within a budget of minutes: a 35 s outage mid-merge and a 12 s outage during
/// assembly cost time, not the job. When a task does fail, the coordinator names the
/// worker's error, not just the delivery limit.
#[test]
fn storage_outages_of_35s_mid_merge_and_12s_in_assembly_no_longer_fail_the_job() {
    use covmerge_integration_tests::relay::Relay;
    let s = FleetCorpus::new(101).build();
    let b = bucket("outage");
    let to_workers = Relay::start(&fleet::s3_addr());
    let to_coord = Relay::start(&fleet::s3_addr());
    let wep = format!("http://{}", to_workers.addr());
    let cep = format!("http://{}", to_coord.addr());
    let store = format!("s3://{b}/fleet");
    let w = worker(
        s.dir(),
        110,
        &store,
        &[],
        &[
            ("AWS_ENDPOINT_URL", &wep),
            ("COVMERGE_FAULT_SLEEP", "merge:300"),
        ],
    );
    let amqp = fleet::amqp();
    let out = s.path("out.gz");
    let man = s.path("manifest.json");
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&["--manifest", man.to_str().unwrap()]);
    let c = fleet::Proc::spawn(
        {
            let mut cmd = fleet::fleet_cmd(&[&["coordinator", "--quiet"][..], &a[..]].concat());
            cmd.env("AWS_ENDPOINT_URL", &cep)
                .env("COVMERGE_FAULT_SLEEP", "assemble:1500");
            cmd
        },
        s.path("coord.log"),
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
    let store = file_store(&s.path("store-fail"));
    let _w = worker(
        s.dir(),
        111,
        &store,
        &[],
        &[("COVMERGE_FAULT_FAIL_SHARD", "1")],
    );
    let out = s.path("out-fail.gz");
    let a = s.coord_args(&amqp, &store, &out);
    let o = coordinator_run(&a, &[], LONG);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("shard 00001") && err.contains("last error: injected failure of shard 00001"),
        "{err}"
    );
}

/// Shards merged twice during a stall reported `attempts` 1 in the
/// manifest. A worker stalls mid-shard and loses its broker connection; another
/// worker merges the shard again; the stalled one finishes later too. The manifest
/// counts both executions of that shard.
#[test]
fn manifest_attempts_no_longer_undercount_a_shard_merged_twice() {
    use covmerge_integration_tests::relay::Relay;
    let s = FleetCorpus::new(107).build();
    let relay = Relay::start(&fleet::amqp_addr());
    let via = fleet::amqp_via(&relay.addr());
    let store_dir = s.path("store");
    let store = file_store(&store_dir);
    let stalled = fleet::worker_on(
        &via,
        s.dir(),
        130,
        &store,
        &[],
        &[("COVMERGE_FAULT_SLEEP", "merge:40000")],
    );
    let amqp = fleet::amqp();
    let out = s.path("out.gz");
    let man = s.path("manifest.json");
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&["--manifest", man.to_str().unwrap(), "--job", "stall-job"]);
    let coord = fleet::coordinator_spawn(&a);
    stalled.wait_log("fault point reached", Duration::from_secs(60));
    // The stalled worker's connection drops: the broker gives its shard to another.
    relay.cut();
    let _healthy = worker(s.dir(), 131, &store, &[], &[]);
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
