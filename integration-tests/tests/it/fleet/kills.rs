//! Workers and coordinators killed, drained and resumed, tasks failing and redone: the
//! final result equals the embedded one.

use super::*;

/// Two workers on S3 with inputs listed from a bucket prefix: the result object (and
/// `--out`) decompress to exactly the embedded result. The second worker is a one-core
/// worker (`--split-threads 1`: inflate and parse on the task's thread).
#[test]
fn fleet_on_s3_equals_embedded() {
    let s = FleetCorpus::new(41).build();
    let b = bucket("eq");
    for p in &s.corpus.inputs {
        upload(
            &b,
            &format!("in/{}", p.file_name().unwrap().to_string_lossy()),
            p,
        );
    }
    let store = format!("s3://{b}/fleet");
    let _w1 = worker(s.dir(), 1, &store, &[], &[]);
    let _w2 = worker(s.dir(), 2, &store, &["--split-threads", "1"], &[]);
    let ins = vec![format!("s3://{b}/in/*")];
    let mut a = s.job_args_with(&s.source, &ins);
    let amqp = fleet::amqp();
    let out = format!("s3://{b}/out/result.jsonl.gz");
    let man = s.path("manifest.json");
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
    let got = s.path("got.gz");
    download(&b, "out/result.jsonl.gz", &got);
    assert_eq!(gunzip(&got), s.want, "fleet result differs from embedded");
    let in_store = s.path("in-store.gz");
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
    let s = FleetCorpus::new(43).build();
    let amqp = fleet::amqp();
    for point in ["split", "merge", "upload", "ack"] {
        let store_dir = s.dir().join(format!("store-{point}"));
        let store = file_store(&store_dir);
        let mut doomed = worker(
            s.dir(),
            10,
            &store,
            &[],
            &[("COVMERGE_FAULT_SLEEP", &format!("{point}:60000"))],
        );
        let out = s.dir().join(format!("out-{point}.gz"));
        let a = s.coord_args(&amqp, &store, &out);
        let coord = fleet::coordinator_spawn(&a);
        doomed.wait_log("fault point reached", Duration::from_secs(60));
        doomed.kill9();
        let _healthy = worker(s.dir(), 11, &store, &[], &[]);
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
    let s = FleetCorpus::new(47).build();
    let amqp = fleet::amqp();
    for (grace, pause, finishes) in [("20", "2000", true), ("1", "30000", false)] {
        let store = file_store(&s.dir().join(format!("store-{grace}")));
        let mut w = worker(
            s.dir(),
            20,
            &store,
            &["--grace", grace],
            &[("COVMERGE_FAULT_SLEEP", &format!("merge:{pause}"))],
        );
        let out = s.dir().join(format!("out-{grace}.gz"));
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
        let _w2 = worker(s.dir(), 21, &store, &[], &[]);
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
    let s = FleetCorpus::new(53).build();
    let amqp = fleet::amqp();
    let store_dir = s.path("store");
    let store = file_store(&store_dir);
    let out = s.path("out.gz");
    let man = s.path("manifest.json");
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&[
        "--manifest",
        man.to_str().unwrap(),
        "--job",
        "poison-shard-job",
    ]);
    {
        let _w = worker(
            s.dir(),
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
    let _w = worker(s.dir(), 31, &store, &[], &[]);
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
    let s = FleetCorpus::new(59).build();
    let amqp = fleet::amqp();
    let store = s.file_store();
    let out = s.path("out.gz");
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
    let _w = worker(s.dir(), 40, &store, &[], &[]);
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
    let s = FleetCorpus::new(61).build();
    let amqp = fleet::amqp();
    let store = s.file_store();
    let out = s.path("out.gz");
    let _w1 = worker(s.dir(), 50, &store, &[], &[]);
    let _w2 = worker(s.dir(), 51, &store, &[], &[]);
    let a = s.coord_args(&amqp, &store, &out);
    run_ok(&a, &[("COVMERGE_FAULT_DUPLICATE_TASKS", "1")]);
    assert_eq!(gunzip(&out), s.want);
}

/// The coordinator is killed mid-job and started again with `--resume`: it finishes
/// without redoing finished shards. Meanwhile the broker drops every connection once.
#[test]
fn coordinator_killed_and_resumed_with_a_broker_connection_cut() {
    let s = FleetCorpus::new(67).build();
    let amqp = fleet::amqp();
    let store_dir = s.path("store");
    let store = file_store(&store_dir);
    let out = s.path("out.gz");
    let w = worker(
        s.dir(),
        60,
        &store,
        &[],
        &[("COVMERGE_FAULT_SLEEP", "merge:700")],
    );
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&["--job", "coord-crash-job", "--lease-heartbeat-secs", "1"]);
    let mut c = fleet::Proc::spawn(
        fleet::fleet_cmd(&[&["coordinator", "--quiet"][..], &a[..]].concat()),
        s.path("coord-1.log"),
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
    let s = FleetCorpus::new(71).git().build();
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
    let _w = worker(s.dir(), 70, &store, &[], &[]);
    let source = format!("store:{snapshot}");
    let out = s.path("out.gz");
    let mut a = s.job_args_with(&source, &s.inputs);
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

/// After `--grace` only the task's future was dropped; the blocking split
/// ran on and the process exit waited for it. A worker stopped mid-split now exits
/// within grace + a few seconds, the split's thread notices it was abandoned, the
/// task is handed back, and the job's result is complete and identical.
#[test]
fn grace_hand_back_no_longer_waits_for_blocking_work() {
    let s = FleetCorpus::new(103).build();
    let amqp = fleet::amqp();
    let store = s.file_store();
    let mut w = worker(
        s.dir(),
        120,
        &store,
        &["--grace", "1"],
        // A split's thread, blocked for a minute after its first chunk.
        &[("COVMERGE_FAULT_SLEEP", "split:60000")],
    );
    let out = s.path("out.gz");
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
    let _w2 = worker(s.dir(), 121, &store, &[], &[]);
    let o = coord.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(gunzip(&out), s.want);
}
