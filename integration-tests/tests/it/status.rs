//! `covmerge status`: a fleet job's progress read from the store, during the job,
//! after its coordinator crashed, and after it completed.

use std::path::Path;
use std::time::{Duration, Instant};

use covmerge_integration_tests::fleet::{self, coordinator_run, fleet_cmd, worker, Proc};
use covmerge_integration_tests::{covmerge, gunzip, CorpusJob, FleetCorpus};
use serde_json::Value;

fn status(store: &str, job: &str) -> Value {
    let o = covmerge(&["status", "--store", store, "--job", job, "--json"]);
    assert!(
        o.status.success(),
        "status failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `status --json` until the job is in its reduce phase (a map phase before it).
fn wait_for_reduce(store: &str, job: &str) -> Value {
    let t0 = Instant::now();
    loop {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "never reached the reduce phase"
        );
        let o = covmerge(&["status", "--store", store, "--job", job, "--json"]);
        if o.status.success() {
            let s: Value = serde_json::from_slice(&o.stdout).unwrap();
            if s["phase"] == "reduce" {
                return s;
            }
            assert_eq!(s["phase"], "map", "{s}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The job's coordinator arguments with `--job` and `extra`.
fn coord_args<'a>(
    s: &'a CorpusJob,
    amqp: &'a str,
    store: &'a str,
    job: &'a str,
    out: &'a Path,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut a = s.job_args();
    a.extend_from_slice(&["--amqp", amqp, "--store", store, "--job", job]);
    a.extend_from_slice(extra);
    a.extend_from_slice(&["--out", out.to_str().unwrap()]);
    a
}

/// Status while the job is in its reduce phase: every split done, every row read.
fn assert_during(store: &str, job: &str, rows: u64) {
    let during = wait_for_reduce(store, job);
    assert_eq!(during["splits"]["done"], 2, "{during}");
    assert_eq!(during["splits"]["total"], 2);
    assert_eq!(during["merges"]["total"], 4);
    assert_eq!(during["rows_read"].as_u64().unwrap(), rows, "{during}");
}

/// Status after the coordinator crashed: where the job stood, as JSON and as text.
fn assert_crashed(store: &str, job: &str, rows: u64) {
    let crashed = status(store, job);
    assert!(
        matches!(crashed["phase"].as_str(), Some("reduce" | "assembling")),
        "{crashed}"
    );
    assert_eq!(crashed["rows_read"].as_u64().unwrap(), rows);
    assert!(crashed["elapsed_secs"].as_u64().is_some());
    let text = covmerge(&["status", "--store", store, "--job", job]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("splits   2/2 done"), "{text}");
}

/// Status after the job completed: the end and the result.
fn assert_complete(store: &str, job: &str, out: &Path, rows: u64) {
    let end = status(store, job);
    assert_eq!(end["phase"], "complete", "{end}");
    assert_eq!(end["merges"]["done"], 4);
    assert_eq!(end["merges"]["failed"], 0);
    assert_eq!(end["result"], out.display().to_string(), "{end}");
    assert!(end["eta_secs"].is_null());
    let merged = end["rows_merged"].as_u64().unwrap();
    assert!(merged > 0 && merged <= rows, "{end}");
}

#[test]
fn status_follows_a_job_through_a_coordinator_crash_to_the_end() {
    let s = FleetCorpus::new(77)
        .lines(80)
        .commits(3)
        .managers(2)
        .parts(2)
        .shards(4)
        .build();
    let rows = s.corpus.rows;
    let store_dir = s.path("store");
    std::fs::create_dir_all(&store_dir).unwrap();
    let store = format!("file://{}", store_dir.display());
    let job = format!("status-{}", std::process::id());
    // Unknown jobs are an error naming the job.
    let o = covmerge(&["status", "--store", &store, "--job", &job]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains(&job));

    // Each merge pauses 1.5 s: the job sits in its reduce phase long enough to look.
    let w = worker(
        s.dir(),
        1,
        &store,
        &[],
        &[("COVMERGE_FAULT_SLEEP", "merge:1500")],
    );
    let amqp = fleet::amqp();
    let out = s.path("fleet.gz");
    let mut a = vec!["coordinator", "--quiet"];
    a.extend(coord_args(
        &s,
        &amqp,
        &store,
        &job,
        &out,
        &["--lease-heartbeat-secs", "1"],
    ));
    let mut coord = Proc::spawn(fleet_cmd(&a), s.path("coord.log"), "coordinator");
    assert_during(&store, &job, rows);

    // The coordinator crashes; the store still tells where the job stands.
    coord.kill9();
    assert_crashed(&store, &job, rows);

    // Resumed once the crashed coordinator's lease is stale (1 s heartbeats: 3 × 1 s
    // + 5 s), the job completes; status shows the end and the result.
    std::thread::sleep(Duration::from_secs(9));
    let a = coord_args(&s, &amqp, &store, &job, &out, &["--resume"]);
    let o = coordinator_run(&a, &[], Duration::from_secs(180));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    drop(w);
    assert_eq!(gunzip(&out), s.want);
    assert_complete(&store, &job, &out, rows);
}
