//! Soak benchmark of one long-lived worker: one `covmerge worker`
//! process serves N small jobs in a row, alternating between `dir:` and `git:`
//! sources that rotate over K distinct paths (each path is a distinct source to the
//! worker, as different jobs' sources are), and prints the worker's RSS after each
//! job, then after it has been idle. A worker whose source cache is bounded holds
//! what one job needs, whatever N.
//!
//! The corpus is built over a real git history ([`covmerge_integration_tests::history`],
//! by default this repository's) so that the `git:` and `dir:` sources hold the same
//! files. RabbitMQ: a vhost of the benchmark's own on the broker of `--amqp`.
//!
//! ```sh
//! cargo build --release --bin covmerge --bin covmerge-soak
//! target/release/covmerge-soak --jobs 100 --rotate 8
//! ```

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use covmerge_integration_tests::history::{build, HistorySpec};
use covmerge_integration_tests::measure::covmerge_beside_this_exe;

#[derive(Parser, Debug)]
struct Args {
    /// Jobs the worker serves.
    #[arg(long, default_value_t = 30)]
    jobs: usize,
    /// Distinct paths per source kind the jobs rotate over.
    #[arg(long, default_value_t = 8)]
    rotate: usize,
    /// The git repository of the history (default: this workspace's).
    #[arg(long)]
    repo: Option<PathBuf>,
    /// First-parent commits of the history.
    #[arg(long, default_value_t = 30)]
    commits: usize,
    /// Where the corpus, the sources and the store go.
    #[arg(long, default_value = "/tmp/covmerge-soak")]
    dir: PathBuf,
    /// Broker (its vhost is replaced by one of the benchmark's own).
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    amqp: String,
    /// Seconds to stay idle at the end before the last RSS reading.
    #[arg(long, default_value_t = 25)]
    idle: u64,
    /// The covmerge binary (default: next to this one).
    #[arg(long)]
    covmerge: Option<PathBuf>,
    /// Extra flags for the worker.
    #[arg(long, default_value = "--split-threads 1")]
    worker_flags: String,
}

fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn ctl(args: &[&str]) {
    let o = Command::new("rabbitmqctl")
        .args(args)
        .output()
        .expect("rabbitmqctl");
    assert!(
        o.status.success(),
        "rabbitmqctl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn main() {
    let a = Args::parse();
    let bin = a.covmerge.clone().unwrap_or_else(covmerge_beside_this_exe);
    let repo = a
        .repo
        .clone()
        .unwrap_or_else(covmerge_integration_tests::root);
    let repo = std::fs::canonicalize(&repo).unwrap();
    std::fs::create_dir_all(&a.dir).unwrap();
    let corpus = build(
        &HistorySpec {
            repo: repo.clone(),
            commits: a.commits,
            managers: 4,
            share: 0.3,
            instrumented: 0.5,
            parts: 1,
            exts: vec![".rs".into(), ".c".into(), ".h".into()],
            head: "HEAD".into(),
            variant: 0,
        },
        &a.dir.join("corpus"),
    );
    eprintln!(
        "corpus: {} rows, {} versions, base {}",
        corpus.rows, corpus.versions, corpus.base_commit
    );
    // K distinct paths per kind (symlinks: distinct sources to the worker).
    let links = a.dir.join("sources");
    let _ = std::fs::remove_dir_all(&links);
    std::fs::create_dir_all(&links).unwrap();
    let mut sources = Vec::new();
    for k in 0..a.rotate.max(1) {
        let d = links.join(format!("dir-{k}"));
        std::os::unix::fs::symlink(std::fs::canonicalize(&corpus.sources).unwrap(), &d).unwrap();
        let g = links.join(format!("git-{k}"));
        std::os::unix::fs::symlink(&repo, &g).unwrap();
        sources.push((
            format!("dir:{}", d.display()),
            format!("git:{}", g.display()),
        ));
    }
    let vhost = format!("covmerge-soak-{}", std::process::id());
    ctl(&["-q", "add_vhost", &vhost]);
    ctl(&[
        "-q",
        "set_permissions",
        "-p",
        &vhost,
        "guest",
        ".*",
        ".*",
        ".*",
    ]);
    let base = a.amqp.rsplit_once('/').map(|(b, _)| b).unwrap_or(&a.amqp);
    let amqp = format!("{base}/{vhost}");
    let store_dir = a.dir.join("store");
    let _ = std::fs::remove_dir_all(&store_dir);
    std::fs::create_dir_all(&store_dir).unwrap();
    let store = format!("file://{}", store_dir.display());
    let log = std::fs::File::create(a.dir.join("worker.log")).unwrap();
    let mut worker = Command::new(&bin)
        .args(["worker", "--amqp", &amqp, "--store", &store])
        .args(a.worker_flags.split_whitespace())
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("worker");
    std::thread::sleep(Duration::from_secs(2));
    let pid = worker.id();
    println!("job\tsource\tseconds\tworker_rss_mb");
    println!("-\t(started)\t-\t{:.1}", rss_mb(pid));
    let input = corpus.inputs[0].display().to_string();
    let mut failed = 0;
    for i in 0..a.jobs {
        let (d, g) = &sources[(i / 2) % sources.len()];
        let source = if i % 2 == 0 { d } else { g };
        let out = a.dir.join("out.jsonl.gz");
        let t0 = Instant::now();
        let o = Command::new(&bin)
            .args(["coordinator", "--quiet", "--amqp", &amqp, "--store", &store])
            .args(["--source", source, "--base-repo", "git://soak.invalid/repo"])
            .args(["--base-commit", &corpus.base_commit, "--shards", "4"])
            .args(["--date-to", "2024-04-08", "--out"])
            .arg(&out)
            .args(["--input", &input])
            .output()
            .expect("coordinator");
        if !o.status.success() {
            failed += 1;
            eprintln!("job {i} failed: {}", String::from_utf8_lossy(&o.stderr));
        }
        println!(
            "{i}\t{source}\t{:.1}\t{:.1}",
            t0.elapsed().as_secs_f64(),
            rss_mb(pid)
        );
    }
    std::thread::sleep(Duration::from_secs(a.idle));
    println!("-\t(idle {}s)\t-\t{:.1}", a.idle, rss_mb(pid));
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let _ = worker.wait();
    let _ = Command::new("rabbitmqctl")
        .args(["-q", "delete_vhost", &vhost])
        .output();
    if failed > 0 {
        eprintln!("{failed} job(s) failed");
        std::process::exit(1);
    }
}
