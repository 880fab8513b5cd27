//! `--listen` endpoints against real tools: a real Prometheus server scrapes two
//! workers and a coordinator during a fleet job, and its HTTP API must show counters
//! that add up to the job's manifest; promtool accepts the exposition.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use covmerge_integration_tests::fleet::{amqp, coordinator_spawn, worker, Proc};
use covmerge_integration_tests::{manifest, FleetCorpus};

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

/// A worker with `--listen`, merges paused 2.5 s each (the job lasts a few scrapes);
/// returns it and its address.
fn listening_worker(dir: &Path, n: usize, store: &str, extra: &[&str]) -> (Proc, String) {
    let slow = [("COVMERGE_FAULT_SLEEP", "merge:2500")];
    let args = [&["--listen", "127.0.0.1:0"][..], extra].concat();
    let w = worker(dir, n, store, &args, &slow);
    let a = listen_addr(&w);
    (w, a)
}

/// The workers at `addrs` are healthy and ready (consuming).
fn assert_ready(addrs: &[&str]) {
    for a in addrs {
        assert_eq!(status(&format!("http://{a}/healthz")), "200");
        assert_eq!(
            status(&format!("http://{a}/readyz")),
            "200",
            "worker {a} consuming"
        );
    }
}

/// Runs the job's coordinator (listening on `coord_addr`) to its end; returns its
/// output and whether Prometheus saw its tasks of the job while it ran.
fn run_scraped_job(prom: &str, args: &[&str]) -> (std::process::Output, bool) {
    let coord = coordinator_spawn(args);
    let t0 = Instant::now();
    let mut scraped = false;
    while !coord.is_finished() && t0.elapsed() < Duration::from_secs(120) {
        scraped |= query(prom, "count(covmerge_job_tasks)").is_some_and(|v| v >= 4.0);
        std::thread::sleep(Duration::from_millis(200));
    }
    let o = coord.join().unwrap();
    assert!(
        o.status.success(),
        "coordinator: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (o, scraped)
}

/// The workers' counters (instances `a1`, `a2`) summed by Prometheus equal the
/// manifest's totals and tasks; both workers did some of the work.
fn assert_counters_add_up(prom: &str, a1: &str, a2: &str, m: &serde_json::Value, splits: f64) {
    let totals = &m["totals"];
    let n = |k: &str| totals[k].as_u64().unwrap() as f64;
    assert!(n("rows_merged") > 0.0);
    let workers = "job=\"covmerge\",instance=~\"".to_string() + a1 + "|" + a2 + "\"";
    let sum = |metric: &str, want: f64| {
        eventually(prom, &format!("sum({metric}{{{workers}}})"), want);
    };
    sum("covmerge_rows_read_total", n("rows_in"));
    sum("covmerge_rows_merged_total", n("rows_merged"));
    sum("covmerge_rows_lost_total", n("rows_lost"));
    eventually(
        prom,
        &format!("sum(covmerge_tasks_total{{{workers},kind=\"split\",outcome=\"done\"}})"),
        splits,
    );
    eventually(
        prom,
        &format!("sum(covmerge_tasks_total{{{workers},kind=\"merge\",outcome=\"done\"}})"),
        m["shards"].as_array().unwrap().len() as f64,
    );
    sum("covmerge_task_duration_seconds_count", splits + 4.0);
    for a in [a1, a2] {
        let q = format!("sum(covmerge_tasks_total{{instance=\"{a}\",outcome=\"done\"}})");
        assert!(query(prom, &q).unwrap_or(0.0) >= 1.0, "{q}");
    }
}

/// The coordinator's per-job gauges of `job_id` were seen, in a plausible state; three
/// processes reported their build; nothing is in flight any more.
fn assert_job_gauges(prom: &str, job_id: &str) {
    let seen = |state: &str| {
        query(
            prom,
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
    eventually(prom, "count(count_over_time(covmerge_build_info[5m]))", 3.0);
    eventually(prom, "sum(covmerge_tasks_in_flight)", 0.0);
}

/// promtool accepts the exposition of `http://addr/metrics`.
fn assert_promtool_accepts(addr: &str) {
    use std::io::Write;
    let text = curl(&format!("http://{addr}/metrics"));
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
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
}

/// Two workers and a coordinator scraped by Prometheus during a job: after it, the
/// workers' counters summed by Prometheus equal the manifest (rows read, rows merged,
/// tasks done), the coordinator's per-job gauges were seen, and /readyz follows the
/// broker and SIGTERM.
#[test]
fn prometheus_scrapes_a_fleet_and_counters_add_up_to_the_manifest() {
    let s = FleetCorpus::new(77).shards(4).build();
    let store = s.file_store();
    let (w1, a1) = listening_worker(s.dir(), 1, &store, &[]);
    let (w2, a2) = listening_worker(s.dir(), 2, &store, &["--split-threads", "1"]);
    assert_ready(&[&a1, &a2]);
    let coord_addr = format!("127.0.0.1:{}", free_port());
    let (_prom, prom) = start_prometheus(s.dir(), &[a1.clone(), a2.clone(), coord_addr.clone()]);
    for a in [&a1, &a2] {
        eventually(&prom, &format!("up{{instance=\"{a}\"}}"), 1.0);
    }

    let manifest_path = s.path("manifest.json");
    let out = s.path("out.jsonl.gz");
    let amqp = amqp();
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&[
        "--manifest",
        manifest_path.to_str().unwrap(),
        "--listen",
        &coord_addr,
    ]);
    // While the job runs, Prometheus sees the coordinator's tasks of the job.
    let (o, scraped) = run_scraped_job(&prom, &a);
    let up = query(&prom, &format!("up{{instance=\"{coord_addr}\"}}"));
    assert!(
        scraped,
        "the coordinator's job gauges were never scraped (up: {up:?}); targets: {}\ncoordinator: {}",
        curl(&format!("http://{prom}/api/v1/targets")),
        String::from_utf8_lossy(&o.stderr)
    );
    let job = String::from_utf8(o.stdout).unwrap();
    let job_id = job.lines().next().unwrap().strip_prefix("job ").unwrap();
    let m = manifest(&manifest_path);
    assert_counters_add_up(&prom, &a1, &a2, &m, s.corpus.inputs.len() as f64);
    assert_job_gauges(&prom, job_id);
    assert_promtool_accepts(&a1);

    // SIGTERM: an idle worker stops at once and cleanly.
    let mut w1 = w1;
    w1.signal(libc::SIGTERM);
    assert_eq!(w1.wait_exit(Duration::from_secs(30)), Some(0));
    drop(w2);
}
