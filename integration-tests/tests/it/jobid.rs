//! Job ids and leases : a job id names one
//! job, one coordinator at a time drives it, and a stored `job.json` is checked before
//! anything is sized from it. Each test is named after what broke.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use covmerge_integration_tests::fleet::{self, coordinator_run, worker};
use covmerge_integration_tests::{covmerge, gunzip, CorpusJob, FleetCorpus};

use crate::fleet::{file_store, LONG};

/// The corpus of these tests: 10 files of ~120 lines, 4 commits, 2 parts, 4 shards.
fn corpus(seed: u64) -> FleetCorpus {
    FleetCorpus::new(seed)
        .files(10)
        .lines(120)
        .commits(4)
        .parts(2)
        .shards(4)
}

/// A coordinator's arguments: the job's, the broker, the store, the result, the id.
fn coord<'a>(
    j: &'a CorpusJob,
    amqp: &'a str,
    store: &'a str,
    out: &'a Path,
    id: &'a str,
) -> Vec<&'a str> {
    let mut a = j.coord_args(amqp, store, out);
    a.extend_from_slice(&["--job", id]);
    a
}

fn fails(args: &[&str]) -> String {
    let t0 = Instant::now();
    let o = coordinator_run(args, &[], LONG);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success(), "expected a refusal:\n{err}");
    assert!(t0.elapsed() < Duration::from_secs(60), "{err}");
    err
}

fn ok(args: &[&str]) {
    let o = coordinator_run(args, &[], LONG);
    assert!(
        o.status.success(),
        "coordinator failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn done_markers(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".done"))
                .count()
        })
        .unwrap_or(0)
}

/// `coordinator --job X` on corpus A, then on corpus B, exited 0 with A's
/// rows under B's header (B overwrote job.json and reused A's markers and parts).
#[test]
fn reused_job_id_is_refused_not_merged_with_old_data() {
    let a = corpus(301).build();
    let b = a.sibling(302);
    assert_ne!(a.want, b.want);
    let amqp = fleet::amqp();
    let store_dir = a.path("store");
    let store = file_store(&store_dir);
    let _w = worker(a.dir(), 1, &store, &[], &[]);
    let out_a = a.path("a.gz");
    ok(&coord(&a, &amqp, &store, &out_a, "reused-id"));
    assert_eq!(gunzip(&out_a), a.want);
    let spec = store_dir.join("jobs/reused-id/job.json");
    let stored = std::fs::read(&spec).unwrap();

    let out_b = a.path("b.gz");
    let err = fails(&coord(&b, &amqp, &store, &out_b, "reused-id"));
    assert!(
        err.contains("job reused-id already exists in")
            && err.contains(&store)
            && err.contains("--resume"),
        "{err}"
    );
    assert!(!out_b.exists(), "no result for B under A's id");
    assert_eq!(std::fs::read(&spec).unwrap(), stored, "job.json untouched");
    assert!(!store_dir.join("jobs/reused-id/lease.json").exists());

    // The same id with the same inputs is a reused id too.
    let err = fails(&coord(&a, &amqp, &store, &out_b, "reused-id"));
    assert!(err.contains("already exists"), "{err}");

    // B under an id of its own is B.
    ok(&coord(&b, &amqp, &store, &out_b, "reused-id-b"));
    assert_eq!(gunzip(&out_b), b.want);
}

/// Resuming a job with other inputs or settings than the stored ones ran the
/// stored job under the new header.
#[test]
fn resume_with_other_inputs_is_refused() {
    let a = corpus(311).build();
    let b = a.sibling(312);
    let amqp = fleet::amqp();
    let store_dir = a.path("store");
    let store = file_store(&store_dir);
    let _w = worker(a.dir(), 2, &store, &[], &[]);
    let out = a.path("a.gz");
    ok(&coord(&a, &amqp, &store, &out, "resume-other"));
    let spec = store_dir.join("jobs/resume-other/job.json");
    let stored = std::fs::read(&spec).unwrap();

    let out_b = a.path("b.gz");
    let mut r = coord(&b, &amqp, &store, &out_b, "resume-other");
    r.push("--resume");
    let err = fails(&r);
    assert!(
        err.contains("job resume-other was started with other settings: inputs"),
        "{err}"
    );
    let mut r = coord(&a, &amqp, &store, &out_b, "resume-other");
    r.extend_from_slice(&["--resume", "--namespace", "android"]);
    let err = fails(&r);
    assert!(err.contains("namespace is \"upstream\""), "{err}");
    assert!(err.contains("\"android\" on this command line"), "{err}");
    assert!(!out_b.exists());
    assert_eq!(std::fs::read(&spec).unwrap(), stored);

    // The same flags resume; --shards and --date-to may be left out.
    let mut r: Vec<&str> = coord(&a, &amqp, &store, &out_b, "resume-other");
    let i = r.iter().position(|x| *x == "--shards").unwrap();
    r.drain(i..i + 2);
    let i = r.iter().position(|x| *x == "--date-to").unwrap();
    r.drain(i..i + 2);
    r.push("--resume");
    ok(&r);
    assert_eq!(gunzip(&out_b), a.want);
}

/// `coordinator --resume` on a job.json with `shards` 4294967295 aborted on
/// a 103 GB allocation; a job.json that is not JSON, or names another job, is refused.
#[test]
fn job_json_with_huge_shard_count_is_refused() {
    let a = corpus(321).build();
    let amqp = fleet::amqp();
    let store_dir = a.path("store");
    let store = file_store(&store_dir);
    let _w = worker(a.dir(), 3, &store, &[], &[]);
    let out = a.path("a.gz");
    ok(&coord(&a, &amqp, &store, &out, "huge-shards"));
    let spec_path = store_dir.join("jobs/huge-shards/job.json");
    let good: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&spec_path).unwrap()).unwrap();
    let mut r = coord(&a, &amqp, &store, &out, "huge-shards");
    r.push("--resume");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            {
                let mut v = good.clone();
                v["shards"] = 4294967295u32.into();
                serde_json::to_vec(&v).unwrap()
            },
            "shards 4294967295 not in 1..=65536",
        ),
        (
            {
                let mut v = good.clone();
                v["inputs"] = serde_json::json!([]);
                serde_json::to_vec(&v).unwrap()
            },
            "0 inputs",
        ),
        (
            {
                let mut v = good.clone();
                v["job"] = "another-job".into();
                serde_json::to_vec(&v).unwrap()
            },
            "it names job \"another-job\"",
        ),
        (b"\x1f\x8bnot json at all".to_vec(), "not a job spec"),
    ];
    for (body, want) in cases {
        std::fs::write(&spec_path, &body).unwrap();
        let err = fails(&r);
        assert!(
            err.contains("job huge-shards") && err.contains("is refused") && err.contains(want),
            "{want}: {err}"
        );
        assert_eq!(std::fs::read(&spec_path).unwrap(), body, "untouched");
    }
    // `status` refuses it too, rather than sizing anything from it.
    let mut v = good.clone();
    v["shards"] = 4294967295u32.into();
    std::fs::write(&spec_path, serde_json::to_vec(&v).unwrap()).unwrap();
    let o = covmerge(&["status", "--store", &store, "--job", "huge-shards"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("shards 4294967295 not in 1..=65536"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// two coordinators on one job id both ran it (each one's reports
/// went to the other: 60 s instead of 2.7 s, or mixed data with other inputs). The
/// second one, new or `--resume`, now says the job is driven by another coordinator
/// and exits without touching it; the first completes exactly.
#[test]
fn second_coordinator_on_a_live_job_exits() {
    let a = corpus(331).build();
    let b = a.sibling(332);
    let amqp = fleet::amqp();
    let store_dir = a.path("store");
    let store = file_store(&store_dir);
    // No worker yet: the first coordinator waits for its splits until one starts.
    let out = a.path("a.gz");
    let first = fleet::coordinator_spawn(&coord(&a, &amqp, &store, &out, "live-job"));
    let lease = store_dir.join("jobs/live-job/lease.json");
    let spec = store_dir.join("jobs/live-job/job.json");
    wait_for("the first coordinator's lease", LONG, || {
        lease.exists() && spec.exists()
    });
    let out2 = a.path("second.gz");
    let spec_before = std::fs::read(&spec).unwrap();
    // Same inputs, other inputs, and --resume: all refused.
    let mut resume = coord(&a, &amqp, &store, &out2, "live-job");
    resume.push("--resume");
    for args in [
        coord(&a, &amqp, &store, &out2, "live-job"),
        coord(&b, &amqp, &store, &out2, "live-job"),
        resume,
    ] {
        let owner = std::fs::read_to_string(&lease).unwrap();
        let owner: serde_json::Value = serde_json::from_str(&owner).unwrap();
        let err = fails(&args);
        assert!(
            err.contains("job live-job is driven by another coordinator"),
            "{err}"
        );
        let now: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&lease).unwrap()).unwrap();
        assert_eq!(now["owner"], owner["owner"], "the lease is untouched");
        assert_eq!(std::fs::read(&spec).unwrap(), spec_before);
        assert!(!out2.exists());
    }
    let _w = worker(a.dir(), 4, &store, &[], &[]);
    let o = first.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(gunzip(&out), a.want);
    assert!(!lease.exists(), "released when the job ended");
}

/// A coordinator killed mid-job leaves a lease behind, and `--resume` at once was
/// refused for 20 s ("run --resume once its lease is stale"): a cron retry or a
/// Kubernetes restart failed. It now watches the lease, sees no heartbeat, takes it
/// over once stale and completes the job exactly, without the user retrying.
#[test]
fn resume_right_after_a_killed_coordinator_was_refused_until_its_lease_went_stale() {
    let a = corpus(341).build();
    let amqp = fleet::amqp();
    let store_dir = a.path("store");
    let store = file_store(&store_dir);
    let _w = worker(
        a.dir(),
        5,
        &store,
        &[],
        &[("COVMERGE_FAULT_SLEEP", "merge:700")],
    );
    let out = a.path("a.gz");
    let mut args = coord(&a, &amqp, &store, &out, "stale-lease");
    args.extend_from_slice(&["--lease-heartbeat-secs", "1"]);
    let mut c = fleet::Proc::spawn(
        fleet::fleet_cmd(&[&["coordinator", "--quiet"][..], &args[..]].concat()),
        a.path("coord-1.log"),
        "coordinator",
    );
    let parts = store_dir.join("jobs/stale-lease/parts");
    wait_for("a finished shard", LONG, || done_markers(&parts) >= 1);
    c.kill9();
    let lease = store_dir.join("jobs/stale-lease/lease.json");
    assert!(lease.exists());
    let mut r = coord(&a, &amqp, &store, &out, "stale-lease");
    r.push("--resume");
    let t0 = Instant::now();
    let o = coordinator_run(&r, &[("RUST_LOG", "info")], LONG);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("waiting up to"), "{err}");
    assert!(err.contains("took over the job's stale lease"), "{err}");
    // 1 s heartbeats: stale after 3 x 1 s + 5 s, waited once, not for a retry.
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    assert_eq!(gunzip(&out), a.want);
    assert!(!lease.exists());
}

/// A coordinator whose lease another one took over kept going and published: it now
/// stops at once and exits non-zero without a result or a manifest.
#[test]
fn coordinator_whose_lease_was_taken_over_stops_without_publishing() {
    let a = corpus(351).build();
    let amqp = fleet::amqp();
    let store_dir = a.path("store");
    let store = file_store(&store_dir);
    // No worker: the coordinator waits for its splits when its lease is taken.
    let out = a.path("a.gz");
    let man: PathBuf = a.path("manifest.json");
    let mut args = coord(&a, &amqp, &store, &out, "taken-over");
    args.extend_from_slice(&[
        "--lease-heartbeat-secs",
        "1",
        "--manifest",
        man.to_str().unwrap(),
    ]);
    let first = fleet::coordinator_spawn(&args);
    let lease = store_dir.join("jobs/taken-over/lease.json");
    // Taken over once held: after the coordinator's first heartbeat, not between its
    // writing the lease and reading it back (then it is refused at the start, as a
    // second coordinator is: the test failed once so under load).
    wait_for("the lease's first heartbeat", LONG, || {
        std::fs::read(&lease)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["beats"].as_u64())
            .is_some_and(|beats| beats >= 1)
    });
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let intruder = serde_json::json!({
        "owner": "intruder", "host": "elsewhere", "pid": 1, "heartbeat_secs": 5,
        "heartbeat_unix_ms": now_ms, "beats": 0
    });
    std::fs::write(&lease, serde_json::to_vec(&intruder).unwrap()).unwrap();
    let o = first.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("job taken-over: this coordinator's lease was taken over (owner intruder"),
        "{err}"
    );
    assert!(!out.exists() && !man.exists(), "nothing published");
    assert!(!store_dir.join("jobs/taken-over/manifest.json").exists());
    // The other owner's lease is not released by the loser.
    assert!(std::fs::read_to_string(&lease)
        .unwrap()
        .contains("intruder"));
}

/// An input rewritten under the same name between a crash and `--resume` (BigQuery's
/// re-exports reuse `000000000000.csv.gz`): the splits done before kept the old rows,
/// the others read the new ones, and the result matched neither input, exit 0. The
/// job now records each input's identity (size, modification time, inode; a store's
/// ETag or generation) and `--resume` refuses a changed one, naming it, before any
/// task runs again.
#[test]
fn resume_after_an_input_was_rewritten_under_its_name_mixed_old_and_new_rows() {
    let a = corpus(361).build();
    let amqp = fleet::amqp();
    let store_dir = a.path("store");
    let store = file_store(&store_dir);
    // Splits run; merges wait: the job is killed between its phases.
    let w = worker(
        a.dir(),
        6,
        &store,
        &[],
        &[("COVMERGE_FAULT_SLEEP", "merge:60000")],
    );
    let out = a.path("a.gz");
    let mut args = coord(&a, &amqp, &store, &out, "rewritten");
    args.extend_from_slice(&["--lease-heartbeat-secs", "1"]);
    let mut c = fleet::Proc::spawn(
        fleet::fleet_cmd(&[&["coordinator", "--quiet"][..], &args[..]].concat()),
        a.path("coord-1.log"),
        "coordinator",
    );
    w.wait_log("fault point reached", LONG);
    c.kill9();
    drop(w);
    let spec = store_dir.join("jobs/rewritten/job.json");
    let stored: serde_json::Value = serde_json::from_slice(&std::fs::read(&spec).unwrap()).unwrap();
    assert_eq!(
        stored["input_ids"].as_array().map(|v| v.len()),
        Some(a.inputs.len()),
        "{stored}"
    );
    let spec_before = std::fs::read(&spec).unwrap();
    // The first input re-exported: other rows, the same name.
    let other = std::fs::read(&a.inputs[1]).unwrap();
    std::fs::write(&a.inputs[0], other).unwrap();
    let mut r = coord(&a, &amqp, &store, &out, "rewritten");
    r.push("--resume");
    let err = fails(&r);
    assert!(
        err.contains(&format!(
            "--resume: job rewritten: input {} changed since the job started:",
            a.inputs[0]
        )) && err.contains("modified")
            && err.contains("nothing was changed"),
        "{err}"
    );
    assert!(
        !err.contains(&format!("input {} changed", a.inputs[1])),
        "{err}"
    );
    assert_eq!(std::fs::read(&spec).unwrap(), spec_before);
    assert!(!out.exists(), "no result");
}
