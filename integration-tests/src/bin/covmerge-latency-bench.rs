//! The fleet against a distant bucket: one fleet job (a coordinator and `--workers`
//! worker processes on RabbitMQ) on an S3 store (moto) or a GCS store
//! (fake-gcs-server, `--store-kind gcs`) reached through a relay that holds
//! each request for `--latency-ms` (0 and 20 by default), printing wall time, the store
//! requests by method and kind, and whether every run's result is the same.
//!
//! Needs RabbitMQ (`--amqp`) and the S3 server of the tests (`deploy/dev/start-s3.sh`,
//! `COVMERGE_TEST_S3_ENDPOINT`) or the GCS emulator (`deploy/dev/start-gcs.sh`,
//! `COVMERGE_TEST_GCS_ENDPOINT`).
//!
//! ```sh
//! cargo build --release --workspace
//! target/release/covmerge-latency-bench --parts 200 --files 40 --lines 400 [--latency-ms 0,20]
//! ```

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use covmerge_corpus::{generate, Corpus, CorpusSpec};
use covmerge_integration_tests::fleet::{bucket, fleet_cmd, s3_addr};
use covmerge_integration_tests::gcs;
use covmerge_integration_tests::measure::covmerge_beside_this_exe;
use covmerge_integration_tests::relay::Relay;

#[derive(Parser, Debug)]
struct Args {
    /// Where the corpus is generated.
    #[arg(long, default_value = "/tmp/covmerge-latency")]
    dir: PathBuf,
    #[command(flatten)]
    spec: CorpusSpec,
    /// Latencies to run at, in milliseconds per request.
    #[arg(long, value_delimiter = ',', default_value = "0,20")]
    latency_ms: Vec<u64>,
    /// The store behind the relay: `s3` (moto) or `gcs` (fake-gcs-server).
    #[arg(long, default_value = "s3")]
    store_kind: String,
    /// `RUST_LOG` of the coordinator and workers (their logs go to this one's stderr).
    #[arg(long, default_value = "warn")]
    rust_log: String,
    /// Worker processes.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Flags for each worker, e.g. "--concurrency 2".
    #[arg(long, default_value = "")]
    worker_flags: String,
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    amqp: String,
    /// The covmerge binary (default: next to this one).
    #[arg(long)]
    covmerge: Option<PathBuf>,
    /// Extra flags for the coordinator (e.g. `--shards 16`).
    #[arg(last = true)]
    extra: Vec<String>,
}

/// A relay holding each request `ms` in front of the store of `--store-kind`, and a
/// new bucket's jobs prefix behind it.
fn store_behind_relay(a: &Args, ms: u64) -> (Relay, String) {
    let gcs_kind = match a.store_kind.as_str() {
        "s3" => false,
        "gcs" => true,
        k => panic!("--store-kind {k}: s3 or gcs"),
    };
    let upstream = if gcs_kind {
        gcs::endpoint()
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string()
    } else {
        s3_addr()
    };
    let relay = Relay::start(&upstream);
    relay.set_latency(Duration::from_millis(ms));
    if gcs_kind {
        relay.rewrite_host(&upstream);
    }
    let store = if gcs_kind {
        format!("gs://{}/jobs", gcs::bucket("latency"))
    } else {
        format!("s3://{}/jobs", bucket("latency"))
    };
    (relay, store)
}

/// How the fleet's processes are started: the binary, with the store reached
/// through a relay.
struct Fleet<'a> {
    bin: &'a Path,
    endpoint: String,
    gcs_credentials: PathBuf,
    rust_log: &'a str,
}

impl Fleet<'_> {
    /// `covmerge ARGS` with the fleet's environment, the store through the relay.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(self.bin);
        let base = fleet_cmd(args);
        c.args(base.get_args())
            .envs(
                base.get_envs()
                    .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
            )
            .env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("GOOGLE_SERVICE_ACCOUNT", &self.gcs_credentials)
            .env("RUST_LOG", self.rust_log)
            .stdout(Stdio::null());
        c
    }
}

/// Runs the job on `store` with `--workers` workers into `out`; returns when it
/// started and its wall time in seconds.
fn run_job(a: &Args, fleet: &Fleet, corpus: &Corpus, store: &str, out: &Path) -> (Instant, f64) {
    let mut workers: Vec<Child> = (0..a.workers)
        .map(|_| {
            let mut args = vec!["worker", "--amqp", &a.amqp, "--store", store];
            args.extend(a.worker_flags.split_whitespace());
            fleet.cmd(&args).spawn().expect("worker")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let source = format!("dir:{}", corpus.sources.display());
    let mut args = vec![
        "coordinator",
        "--quiet",
        "--amqp",
        &a.amqp,
        "--store",
        store,
        "--source",
        &source,
        "--base-repo",
        &corpus.base_repo,
        "--base-commit",
        &corpus.base_commit,
        "--date-to",
        "2024-04-08",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(a.extra.iter().map(String::as_str));
    args.push("--input");
    let ins: Vec<String> = corpus
        .inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    args.extend(ins.iter().map(String::as_str));
    let t0 = Instant::now();
    let st = fleet.cmd(&args).status().expect("coordinator");
    let wall = t0.elapsed().as_secs_f64();
    assert!(st.success(), "coordinator failed");
    for w in &workers {
        unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
    }
    for w in &mut workers {
        let _ = w.wait();
    }
    (t0, wall)
}

/// Writes the relay's requests in order, timed from `t0`, to `path`.
fn write_timeline(relay: &Relay, t0: Instant, path: &Path) {
    let lines: Vec<String> = relay
        .timeline()
        .into_iter()
        .map(|(t, line)| format!("{:9.3} {line}", t.duration_since(t0).as_secs_f64()))
        .collect();
    std::fs::write(path, lines.join("\n")).expect("timeline");
    eprintln!("requests in order: {}", path.display());
}

fn main() {
    let a = Args::parse();
    let bin = a.covmerge.clone().unwrap_or_else(covmerge_beside_this_exe);
    let spec = CorpusSpec {
        no_git: true,
        ..a.spec.clone()
    };
    let corpus = generate(&spec, &a.dir.join("corpus")).expect("corpus");
    eprintln!(
        "corpus: {} rows in {} inputs",
        corpus.rows,
        corpus.inputs.len()
    );
    println!(
        "| latency ms | wall s | requests | MB up / down | KB per request | by kind | result |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut first: Option<Vec<u8>> = None;
    for &ms in &a.latency_ms {
        let (relay, store) = store_behind_relay(&a, ms);
        let endpoint = format!("http://{}", relay.addr());
        let fleet = Fleet {
            bin: &bin,
            gcs_credentials: gcs::credentials_at(&a.dir, &endpoint),
            endpoint,
            rust_log: &a.rust_log,
        };
        let out = a.dir.join(format!("out-{ms}.jsonl.gz"));
        let (t0, wall) = run_job(&a, &fleet, &corpus, &store, &out);
        write_timeline(&relay, t0, &a.dir.join(format!("requests-{ms}.txt")));
        let reqs = relay.requests();
        let total: u64 = reqs.values().sum();
        let kinds: Vec<String> = reqs.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let same = match &first {
            None => {
                first = Some(covmerge_integration_tests::gunzip(&out));
                "first"
            }
            Some(f) if *f == covmerge_integration_tests::gunzip(&out) => "identical",
            Some(_) => "DIFFERENT",
        };
        let (up, down) = relay.bytes();
        println!(
            "| {ms} | {wall:.2} | {total} | {:.1} / {:.1} | {:.1} | {} | {same} |",
            up as f64 / 1e6,
            down as f64 / 1e6,
            (up + down) as f64 / 1e3 / total.max(1) as f64,
            kinds.join(", ")
        );
    }
}
