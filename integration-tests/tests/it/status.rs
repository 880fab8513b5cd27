//! `covmerge status`: a fleet job's progress read from the store, during the job,
//! after its coordinator crashed, and after it completed.

use std::time::{Duration, Instant};

use covmerge_integration_tests::fleet::{self, coordinator_run, fleet_cmd, worker, Proc};
use covmerge_integration_tests::{covmerge, gunzip, merge_ok};
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

#[test]
fn status_follows_a_job_through_a_coordinator_crash_to_the_end() {
    let _g = fleet::lock();
    let tmp = tempfile::tempdir().unwrap();
    let spec = covmerge_corpus::CorpusSpec {
        seed: 77,
        files: 12,
        lines: 80,
        commits: 3,
        managers: 2,
        parts: 2,
        no_git: true,
        ..covmerge_corpus::CorpusSpec::default()
    };
    let c = covmerge_corpus::generate(&spec, &tmp.path().join("corpus")).unwrap();
    let src = format!("dir:{}", c.sources.display());
    let ins: Vec<String> = c.inputs.iter().map(|p| p.display().to_string()).collect();
    let mut job_args = vec![
        "--source",
        &src,
        "--base-repo",
        &c.base_repo,
        "--base-commit",
        &c.base_commit,
        "--shards",
        "4",
        "--date-to",
        "2024-04-08",
        "--input",
    ];
    job_args.extend(ins.iter().map(|s| s.as_str()));
    let embedded = tmp.path().join("embedded.gz");
    let mut a = job_args.clone();
    a.extend_from_slice(&["--out", embedded.to_str().unwrap()]);
    merge_ok(&a);

    let store_dir = tmp.path().join("store");
    std::fs::create_dir_all(&store_dir).unwrap();
    let store = format!("file://{}", store_dir.display());
    let job = format!("status-{}", std::process::id());
    // Unknown jobs are an error naming the job.
    let o = covmerge(&["status", "--store", &store, "--job", &job]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains(&job));

    // Each merge pauses 1.5 s: the job sits in its reduce phase long enough to look.
    let w = worker(
        tmp.path(),
        1,
        &store,
        &[],
        &[("COVMERGE_FAULT_SLEEP", "merge:1500")],
    );
    let amqp = fleet::amqp();
    let out = tmp.path().join("fleet.gz");
    let mut a = vec!["coordinator", "--quiet"];
    a.extend(job_args.iter().copied());
    a.extend_from_slice(&[
        "--amqp",
        &amqp,
        "--store",
        &store,
        "--job",
        &job,
        "--out",
        out.to_str().unwrap(),
        "--lease-heartbeat-secs",
        "1",
    ]);
    let mut coord = Proc::spawn(fleet_cmd(&a), tmp.path().join("coord.log"), "coordinator");
    let t0 = Instant::now();
    let during = loop {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "never reached the reduce phase"
        );
        let o = covmerge(&["status", "--store", &store, "--job", &job, "--json"]);
        if o.status.success() {
            let s: Value = serde_json::from_slice(&o.stdout).unwrap();
            if s["phase"] == "reduce" {
                break s;
            }
            assert_eq!(s["phase"], "map", "{s}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(during["splits"]["done"], 2, "{during}");
    assert_eq!(during["splits"]["total"], 2);
    assert_eq!(during["merges"]["total"], 4);
    assert_eq!(during["rows_read"].as_u64().unwrap(), c.rows, "{during}");

    // The coordinator crashes; the store still tells where the job stands.
    coord.kill9();
    let crashed = status(&store, &job);
    assert!(
        matches!(crashed["phase"].as_str(), Some("reduce" | "assembling")),
        "{crashed}"
    );
    assert_eq!(crashed["rows_read"].as_u64().unwrap(), c.rows);
    assert!(crashed["elapsed_secs"].as_u64().is_some());
    let text = covmerge(&["status", "--store", &store, "--job", &job]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("splits   2/2 done"), "{text}");

    // Resumed once the crashed coordinator's lease is stale (1 s heartbeats: 3 × 1 s
    // + 5 s), the job completes; status shows the end and the result.
    std::thread::sleep(Duration::from_secs(9));
    let mut a = job_args.clone();
    a.extend_from_slice(&[
        "--amqp",
        &amqp,
        "--store",
        &store,
        "--job",
        &job,
        "--resume",
        "--out",
        out.to_str().unwrap(),
    ]);
    let o = coordinator_run(&a, &[], Duration::from_secs(180));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    drop(w);
    assert_eq!(gunzip(&out), gunzip(&embedded));
    let end = status(&store, &job);
    assert_eq!(end["phase"], "complete", "{end}");
    assert_eq!(end["merges"]["done"], 4);
    assert_eq!(end["merges"]["failed"], 0);
    assert_eq!(end["result"], out.display().to_string(), "{end}");
    assert!(end["eta_secs"].is_null());
    let merged = end["rows_merged"].as_u64().unwrap();
    assert!(merged > 0 && merged <= c.rows, "{end}");
}
