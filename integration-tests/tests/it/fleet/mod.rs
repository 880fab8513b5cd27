//! Fleet mode (coordinator + worker processes) against the real RabbitMQ and an S3
//! server, with faults injected: every final result must equal the embedded one. Each
//! scenario's corpus is a `FleetCorpus`; the functions they share are here, the
//! scenarios by kind in `kills.rs`, `forged.rs` and `outages.rs`.

use covmerge_integration_tests::fleet::{self, bucket, coordinator_run, download, upload, worker};
use covmerge_integration_tests::{gunzip, manifest, merge_ok, FleetCorpus};
use std::path::{Path, PathBuf};
use std::time::Duration;

mod forged;
mod groups;
mod kills;
mod outages;
mod partial;
mod partial_gcs;
mod rollup;
mod sources;

pub(crate) const LONG: Duration = Duration::from_secs(180);

/// Modification times of the `.done` markers in `dir`, by name.
pub(crate) fn marker_times(dir: &Path) -> Vec<(PathBuf, std::time::SystemTime)> {
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

/// A runtime for talking to the broker directly from a test.
pub(crate) fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The next event of `job`, within 30 s.
pub(crate) async fn next_event(
    q: &covmerge_queue::amqp::AmqpQueue,
    job: &str,
) -> covmerge_queue::Event {
    use covmerge_queue::Queue;
    tokio::time::timeout(Duration::from_secs(30), q.next_event(job))
        .await
        .expect("an event within 30 s")
        .unwrap()
}

/// Messages ready in the shared task queue, as RabbitMQ counts them.
pub(crate) fn tasks_ready() -> usize {
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

/// Waits until the shared task queue holds at least `n` ready tasks (a coordinator's
/// published, its job's queues declared), failing after [`LONG`] with `what`.
pub(crate) fn wait_tasks_ready(n: usize, what: &str) {
    let t0 = std::time::Instant::now();
    while tasks_ready() < n {
        assert!(t0.elapsed() < LONG, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `dir` holds at least `n` `.done` markers.
pub(crate) fn wait_markers(dir: &Path, n: usize, what: &fleet::Proc) {
    let t0 = std::time::Instant::now();
    while !(dir.is_dir() && marker_times(dir).len() >= n) {
        assert!(t0.elapsed() < LONG, "no progress: {}", what.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
}
