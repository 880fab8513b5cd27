//! `--listen` endpoints against real tools: a real Prometheus server scrapes two
//! workers and a coordinator during a fleet job, and its HTTP API must show counters
//! that add up to the job's manifest; promtool accepts the exposition.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use covmerge_corpus::{generate, CorpusSpec};
use covmerge_integration_tests::fleet::{self, amqp, coordinator_spawn, worker, Proc};

/// The address a process printed after `listening on `.
fn listen_addr(p: &Proc) -> String {
    p.wait_log("listening on ", Duration::from_secs(30));
    let log = p.log_text();
    let rest = &log[log.find("listening on ").unwrap() + "listening on ".len()..];
    rest.split_whitespace().next().unwrap().to_string()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn curl(url: &str) -> String {
    let o = Command::new("curl")
        .args(["-fsS", "--max-time", "10", url])
        .output()
        .expect("curl");
    assert!(
        o.status.success(),
        "{url}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Status code of a GET.
fn status(url: &str) -> String {
    let o = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", url])
        .output()
        .expect("curl");
    String::from_utf8(o.stdout).unwrap()
}

/// The scalar value of a PromQL query (None while it has no result).
fn query(prom: &str, q: &str) -> Option<f64> {
    let o = Command::new("curl")
        .args([
            "-fsS",
            "--max-time",
            "10",
            &format!("http://{prom}/api/v1/query"),
            "--data-urlencode",
            &format!("query={q}"),
        ])
        .output()
        .expect("curl");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
    assert_eq!(v["status"], "success", "{q}: {v}");
    let r = v["data"]["result"].as_array()?.first()?.clone();
    r["value"][1].as_str()?.parse().ok()
}

/// Waits until `q` equals `want` (Prometheus scrapes every second).
fn eventually(prom: &str, q: &str, want: f64) {
    let t0 = Instant::now();
    let mut last = None;
    while t0.elapsed() < Duration::from_secs(60) {
        last = query(prom, q);
        if last == Some(want) {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("{q}: {last:?}, want {want}");
}

fn start_prometheus(dir: &Path, targets: &[String]) -> (Proc, String) {
    let port = free_port();
    let list = targets
        .iter()
        .map(|t| format!("'{t}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let cfg = dir.join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: covmerge\n    static_configs:\n      - targets: [{list}]\n"
        ),
    )
    .unwrap();
    let addr = format!("127.0.0.1:{port}");
    let mut c = Command::new("prometheus");
    c.arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .stdout(Stdio::null());
    let p = Proc::spawn(c, dir.join("prometheus.log"), "prometheus");
    p.wait_log(
        "Server is ready to receive web requests",
        Duration::from_secs(60),
    );
    // Service discovery hands targets to the scrapers after up to 5 s, and a scrape
    // loop starts at an offset within the interval: wait until every target was tried
    // (one not listening yet is "down").
    let t0 = Instant::now();
    loop {
        let v: serde_json::Value =
            serde_json::from_str(&curl(&format!("http://{addr}/api/v1/targets"))).unwrap();
        let tried = v["data"]["activeTargets"]
            .as_array()
            .map_or(0, |a| a.iter().filter(|t| t["health"] != "unknown").count());
        if tried == targets.len() {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "targets: {v}");
        std::thread::sleep(Duration::from_millis(200));
    }
    (p, addr)
}

/// Two workers and a coordinator scraped by Prometheus during a job: after it, the
/// workers' counters summed by Prometheus equal the manifest (rows read, rows merged,
/// tasks done), the coordinator's per-job gauges were seen, and /readyz follows the
/// broker and SIGTERM.
#[test]
fn prometheus_scrapes_a_fleet_and_counters_add_up_to_the_manifest() {
    let _g = fleet::lock();
    let tmp = tempfile::tempdir().unwrap();
    let spec = CorpusSpec {
        seed: 77,
        files: 12,
        lines: 150,
        commits: 5,
        managers: 3,
        parts: 3,
        no_git: true,
        ..CorpusSpec::default()
    };
    let corpus = generate(&spec, &tmp.path().join("corpus")).unwrap();
    let store = format!("file://{}", tmp.path().join("store").display());
    // Merges pause 2.5 s each so that the job lasts a few scrapes.
    let slow = [("COVMERGE_FAULT_SLEEP", "merge:2500")];
    let listen = ["--listen", "127.0.0.1:0"];
    let w1 = worker(tmp.path(), 1, &store, &listen, &slow);
    let w2 = worker(
        tmp.path(),
        2,
        &store,
        &[&listen[..], &["--split-threads", "1"]].concat(),
        &slow,
    );
    let (a1, a2) = (listen_addr(&w1), listen_addr(&w2));
    for a in [&a1, &a2] {
        assert_eq!(status(&format!("http://{a}/healthz")), "200");
        assert_eq!(
            status(&format!("http://{a}/readyz")),
            "200",
            "worker {a} consuming"
        );
    }
    let coord_addr = format!("127.0.0.1:{}", free_port());
    let (_prom, prom) = start_prometheus(tmp.path(), &[a1.clone(), a2.clone(), coord_addr.clone()]);
    for a in [&a1, &a2] {
        eventually(&prom, &format!("up{{instance=\"{a}\"}}"), 1.0);
    }

    let manifest_path = tmp.path().join("manifest.json");
    let out = tmp.path().join("out.jsonl.gz");
    let source = format!("dir:{}", corpus.sources.display());
    let amqp = amqp();
    let mut args: Vec<String> = [
        "--source",
        &source,
        "--base-repo",
        &corpus.base_repo,
        "--base-commit",
        &corpus.base_commit,
        "--shards",
        "4",
        "--amqp",
        &amqp,
        "--store",
        &store,
        "--out",
        out.to_str().unwrap(),
        "--manifest",
        manifest_path.to_str().unwrap(),
        "--listen",
        &coord_addr,
        "--input",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(corpus.inputs.iter().map(|p| p.display().to_string()));
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let coord = coordinator_spawn(&a);
    // While the job runs, Prometheus sees the coordinator's tasks of the job.
    let t0 = Instant::now();
    let mut scraped = false;
    while !coord.is_finished() && t0.elapsed() < Duration::from_secs(120) {
        scraped |= query(&prom, "count(covmerge_job_tasks)").is_some_and(|v| v >= 4.0);
        std::thread::sleep(Duration::from_millis(200));
    }
    let o = coord.join().unwrap();
    assert!(
        o.status.success(),
        "coordinator: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let up = query(&prom, &format!("up{{instance=\"{coord_addr}\"}}"));
    assert!(
        scraped,
        "the coordinator's job gauges were never scraped (up: {up:?}); targets: {}\ncoordinator: {}",
        curl(&format!("http://{prom}/api/v1/targets")),
        String::from_utf8_lossy(&o.stderr)
    );
    let job = String::from_utf8(o.stdout).unwrap();
    let job_id = job.lines().next().unwrap().strip_prefix("job ").unwrap();
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let totals = &m["totals"];
    let n = |k: &str| totals[k].as_u64().unwrap() as f64;
    assert!(n("rows_merged") > 0.0);
    let workers = "job=\"covmerge\",instance=~\"".to_string() + &a1 + "|" + &a2 + "\"";
    eventually(
        &prom,
        &format!("sum(covmerge_rows_read_total{{{workers}}})"),
        n("rows_in"),
    );
    eventually(
        &prom,
        &format!("sum(covmerge_rows_merged_total{{{workers}}})"),
        n("rows_merged"),
    );
    eventually(
        &prom,
        &format!("sum(covmerge_rows_lost_total{{{workers}}})"),
        n("rows_lost"),
    );
    let splits = corpus.inputs.len() as f64;
    eventually(
        &prom,
        &format!("sum(covmerge_tasks_total{{{workers},kind=\"split\",outcome=\"done\"}})"),
        splits,
    );
    eventually(
        &prom,
        &format!("sum(covmerge_tasks_total{{{workers},kind=\"merge\",outcome=\"done\"}})"),
        m["shards"].as_array().unwrap().len() as f64,
    );
    eventually(
        &prom,
        &format!("sum(covmerge_task_duration_seconds_count{{{workers}}})"),
        splits + 4.0,
    );
    // Both workers did some of the work.
    for a in [&a1, &a2] {
        let q = format!("sum(covmerge_tasks_total{{instance=\"{a}\",outcome=\"done\"}})");
        assert!(query(&prom, &q).unwrap_or(0.0) >= 1.0, "{q}");
    }
    let seen = |state: &str| {
        query(
            &prom,
            &format!(
                "max_over_time(covmerge_job_tasks{{job_id=\"{job_id}\",state=\"{state}\"}}[5m])"
            ),
        )
    };
    // The coordinator exits as soon as the job is done, so its last scrape may predate
    // the last shards; what it showed must be a plausible state of this job.
    let done = seen("done").unwrap();
    assert!((1.0..=4.0).contains(&done), "done {done}");
    assert!(seen("running").unwrap() >= 1.0);
    assert_eq!(seen("failed"), Some(0.0));
    // Three processes reported their build (the coordinator's series is stale now).
    eventually(
        &prom,
        "count(count_over_time(covmerge_build_info[5m]))",
        3.0,
    );
    eventually(&prom, "sum(covmerge_tasks_in_flight)", 0.0);

    // promtool accepts the exposition.
    let text = curl(&format!("http://{a1}/metrics"));
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    use std::io::Write;
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let o = check.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "promtool check metrics:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );

    // SIGTERM: an idle worker stops at once and cleanly.
    let mut w1 = w1;
    w1.signal(libc::SIGTERM);
    assert_eq!(w1.wait_exit(Duration::from_secs(30)), Some(0));
    drop(w2);
}
