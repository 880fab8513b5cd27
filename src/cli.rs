use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use covmerge_coordinator::dashboard::Dashboard;
use covmerge_coordinator::embedded::run_embedded;
use covmerge_coordinator::finish::preflight_outputs;
use covmerge_coordinator::progress::ProgressView;
use covmerge_coordinator::{plan_job, run_job, JobOptions, JobRequest};
use covmerge_proto::output::totals_line;
use covmerge_proto::JobId;
use covmerge_queue::amqp::AmqpQueue;
use covmerge_queue::{Queue, DEFAULT_DELIVERY_LIMIT};
use covmerge_storage::{redact_url, Store};
use covmerge_worker::{run::Executor, run_worker, WorkerConfig};
use tokio::sync::watch;
use tracing::info;

/// Merges syzkaller line coverage from many builds onto one base revision.
#[derive(Parser, Debug)]
#[command(name = "covmerge", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Command,
    /// Log as JSON lines (also COVMERGE_LOG_FORMAT=json). Filter with RUST_LOG.
    #[arg(long, global = true)]
    pub log_json: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a whole merge in this process (nothing to install or start).
    Merge(MergeArgs),
    /// Run one job on the fleet: publish tasks on RabbitMQ, assemble the result.
    Coordinator(CoordinatorArgs),
    /// Serve tasks of any job until SIGTERM/SIGINT.
    Worker(WorkerArgs),
    /// Write a synthetic corpus (sources, git repository, CSV parts) from a seed.
    Gen(GenArgs),
    /// Export file versions from a git repository into a store snapshot (`store:` source).
    Sources(SourcesArgs),
}

#[derive(Args, Debug, Clone)]
pub struct JobArgs {
    /// Input CSV(.gz) files or object-store URLs (a trailing `*` or `/` lists a prefix).
    /// A row over 1 MiB (fields and commas) is a bad row; names must be UTF-8.
    #[arg(long, num_args = 1.., required = true)]
    pub input: Vec<String>,
    /// Where file versions come from: dir:ROOT, git:PATH or store:URL.
    #[arg(long)]
    pub source: String,
    #[arg(long)]
    pub base_repo: String,
    #[arg(long)]
    pub base_commit: String,
    #[arg(long, default_value = "upstream")]
    pub namespace: String,
    /// Days the coverage covers (header field `Duration`).
    #[arg(long, default_value_t = 0)]
    pub duration: i64,
    /// Header field `DateTo` (default: today, UTC).
    #[arg(long)]
    pub date_to: Option<String>,
    /// Header field `TotalRows` (default: the data rows read).
    #[arg(long)]
    pub total_rows: Option<i64>,
    /// Write the manifest (SPEC §7) to this file.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// Number of shards, 1 to 65536 (default: from the input size).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=covmerge_proto::limits::MAX_SHARDS as i64))]
    pub shards: Option<u32>,
    /// Skip and count up to N malformed rows (bad fields, rows over 1 MiB, non-UTF-8
    /// names) instead of failing.
    #[arg(long, default_value_t = 0)]
    pub max_bad_rows: u64,
    /// syzkaller dashboard to notify (key from COVMERGE_DASHBOARD_KEY).
    #[arg(long, requires = "dashboard_client")]
    pub dashboard: Option<String>,
    #[arg(long)]
    pub dashboard_client: Option<String>,
    /// No progress display.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// The result: a local path or an object-store URL.
    #[arg(long)]
    pub out: String,
    /// Parallel task loops, 1 to 1024 (default: the number of cores).
    #[arg(long, value_parser = task_loops)]
    pub workers: Option<usize>,
}

#[derive(Args, Debug)]
pub struct CoordinatorArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// RabbitMQ URL, e.g. amqp://user:pass@host:5672/%2f (the password is never logged).
    #[arg(long, env = "COVMERGE_AMQP")]
    pub amqp: String,
    /// Object store for the job's objects: file:///abs, s3://bucket/prefix, memory:.
    #[arg(long, env = "COVMERGE_STORE")]
    pub store: String,
    /// The result (besides jobs/<id>/result.jsonl.gz in the store).
    #[arg(long)]
    pub out: Option<String>,
    /// Name the job (default: a new id, printed first).
    #[arg(long = "job", id = "job_id")]
    pub job_id: Option<String>,
    /// Continue job ID, re-running only what has no finished output.
    #[arg(long, requires = "job_id")]
    pub resume: bool,
}

#[derive(Args, Debug)]
pub struct WorkerArgs {
    #[arg(long, env = "COVMERGE_AMQP")]
    pub amqp: String,
    #[arg(long, env = "COVMERGE_STORE")]
    pub store: String,
    /// This worker's own source (overrides the one named by the job).
    #[arg(long)]
    pub source: Option<String>,
    /// Seconds a task may still run after SIGTERM before it is handed back.
    #[arg(long, default_value_t = 25)]
    pub grace: u64,
    /// Parallel task loops in this process, 1 to 1024.
    #[arg(long, default_value_t = 1, value_parser = task_loops)]
    pub concurrency: usize,
    /// Parse threads per split task (default: the cores). 1 runs inflate and parse on
    /// one thread, for workers given one core.
    #[arg(long)]
    pub split_threads: Option<usize>,
}

#[derive(Args, Debug)]
pub struct GenArgs {
    /// Output directory.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub spec: covmerge_corpus::CorpusSpec,
}

#[derive(Args, Debug)]
pub struct SourcesArgs {
    /// The git repository to export from.
    #[arg(long)]
    pub git: String,
    /// Store URL of the snapshot (the `store:` source reads it).
    #[arg(long)]
    pub store: String,
    /// Commits to export.
    #[arg(long, num_args = 1.., required = true)]
    pub commit: Vec<String>,
    /// Paths to export (default: every file of each commit).
    #[arg(long, num_args = 1..)]
    pub path: Vec<String>,
}

pub fn init_tracing(cli: &Cli) {
    use tracing_subscriber::EnvFilter;
    let default = match cli.cmd {
        Command::Merge(_) | Command::Gen(_) => "warn",
        _ => "info",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let json = cli.log_json || std::env::var("COVMERGE_LOG_FORMAT").is_ok_and(|v| v == "json");
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        b.json().init();
    } else {
        b.init();
    }
}

/// `--workers` / `--concurrency`: 1 to [`covmerge_proto::limits::MAX_TASK_LOOPS`].
fn task_loops(s: &str) -> Result<usize, String> {
    let max = covmerge_proto::limits::MAX_TASK_LOOPS;
    match s.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected a number of task loops from 1 to {max}")),
    }
}

fn request(a: &JobArgs, job: Option<JobId>) -> JobRequest {
    JobRequest {
        job,
        inputs: a.input.clone(),
        source: a.source.clone(),
        base_repo: a.base_repo.clone(),
        base_commit: a.base_commit.clone(),
        shards: a.shards,
        max_bad_rows: a.max_bad_rows,
        namespace: a.namespace.clone(),
        duration: a.duration,
        date_to: a.date_to.clone(),
        total_rows: a.total_rows,
    }
}

fn dashboard(a: &JobArgs) -> Result<Option<Dashboard>> {
    let Some(url) = &a.dashboard else {
        return Ok(None);
    };
    let client = a
        .dashboard_client
        .as_deref()
        .context("--dashboard needs --dashboard-client")?;
    let key = std::env::var("COVMERGE_DASHBOARD_KEY")
        .context("--dashboard needs the key in the environment variable COVMERGE_DASHBOARD_KEY")?;
    Ok(Some(Dashboard::new(url, client, key)))
}

fn check_source(spec: &str) -> Result<()> {
    if !(spec.starts_with("dir:") || spec.starts_with("git:") || spec.starts_with("store:")) {
        bail!("--source {spec:?}: expected dir:ROOT, git:PATH or store:URL");
    }
    Ok(())
}

pub async fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Command::Merge(m) => merge(m).await,
        Command::Coordinator(c) => coordinator(c).await,
        Command::Worker(w) => worker(w).await,
        Command::Gen(g) => {
            let c = covmerge_corpus::generate(&g.spec, &g.out).context("generating the corpus")?;
            println!(
                "wrote {} rows in {} input part(s) to {}",
                c.rows,
                c.inputs.len(),
                g.out.display()
            );
            println!(
                "base commit {} ({} commits)",
                c.base_commit,
                c.commits.len()
            );
            Ok(())
        }
        Command::Sources(s) => {
            let git = covmerge_worker::source::GitSource::open(&s.git)?;
            let store = Store::open(&s.store)?;
            let paths = if s.path.is_empty() {
                covmerge_worker::source::all_paths(&git, &s.commit)?
            } else {
                s.path.iter().cloned().collect()
            };
            let (blobs, idx) =
                covmerge_worker::source::export_commits(&git, &store, &s.commit, &paths).await?;
            println!(
                "exported {idx} commit index(es), uploaded {blobs} new blob(s) to {}",
                redact_url(&s.store)
            );
            Ok(())
        }
    }
}

async fn merge(m: MergeArgs) -> Result<()> {
    check_source(&m.job.source)?;
    let spec = plan_job(&request(&m.job, None)).await?;
    preflight_outputs(&spec.inputs, Some(&m.out), m.job.manifest.as_deref())?;
    let workers = m.workers.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    let opts = JobOptions {
        out: Some(m.out.clone()),
        manifest: m.job.manifest.clone(),
        result_in_store: false,
        resume: false,
        dashboard: dashboard(&m.job)?,
        cleanup: false,
    };
    // Split tasks run `workers` at a time: share one budget between them.
    let base = WorkerConfig::default();
    let cfg = WorkerConfig {
        split_budget: base.split_budget / workers.max(1),
        ..base
    };
    let outcome = run_embedded(spec, &opts, workers, cfg, !m.job.quiet).await?;
    print_totals(&outcome.manifest);
    Ok(())
}

/// The closing line syz-covermerger prints.
fn print_totals(m: &covmerge_proto::Manifest) {
    println!("{}", totals_line(m.totals.instrumented, m.totals.covered));
}

async fn coordinator(c: CoordinatorArgs) -> Result<()> {
    check_source(&c.job.source)?;
    let job = c
        .job_id
        .as_deref()
        .map(JobId::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let store = Store::open(&c.store)?;
    let spec = if c.resume {
        // The stored spec wins; the request only names the job.
        let mut r = request(&c.job, job.clone());
        r.inputs = vec![];
        covmerge_proto::JobSpec {
            job: job.clone().expect("clap requires --job-id with --resume"),
            inputs: vec![],
            base_repo: r.base_repo,
            base_commit: r.base_commit,
            source: r.source,
            shards: 1,
            max_bad_rows: r.max_bad_rows,
            header: covmerge_proto::job::HeaderSpec {
                namespace: r.namespace,
                duration: r.duration,
                date_to: String::new(),
                total_rows: None,
            },
        }
    } else {
        plan_job(&request(&c.job, job)).await?
    };
    let inputs = if c.resume { &c.job.input } else { &spec.inputs };
    preflight_outputs(inputs, c.out.as_deref(), c.job.manifest.as_deref())?;
    println!("job {}", spec.job);
    let queue: Arc<dyn Queue> =
        Arc::new(AmqpQueue::connect(&c.amqp, DEFAULT_DELIVERY_LIMIT).await?);
    info!(amqp = %redact_url(&c.amqp), store = %store, job = %spec.job, "coordinator started");
    let opts = JobOptions {
        out: c.out.clone(),
        manifest: c.job.manifest.clone(),
        result_in_store: true,
        resume: c.resume,
        dashboard: dashboard(&c.job)?,
        cleanup: true,
    };
    let progress = if c.job.quiet {
        ProgressView::hidden()
    } else {
        ProgressView::terminal(None)
    };
    let outcome = run_job(spec, &opts, queue, store, &progress).await?;
    println!("result {}", outcome.result);
    print_totals(&outcome.manifest);
    Ok(())
}

async fn worker(w: WorkerArgs) -> Result<()> {
    let store = Store::open(&w.store)?;
    let queue: Arc<dyn Queue> =
        Arc::new(AmqpQueue::connect(&w.amqp, DEFAULT_DELIVERY_LIMIT).await?);
    let mut cfg = WorkerConfig {
        source: w.source.clone(),
        grace: Duration::from_secs(w.grace),
        ..WorkerConfig::default()
    };
    cfg.split_budget /= w.concurrency.max(1);
    if let Some(t) = w.split_threads {
        cfg.split_threads = t.max(1);
    }
    let exec = Arc::new(Executor::new(store.clone(), cfg));
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        info!("shutdown requested: no new tasks");
        let _ = tx.send(true);
    });
    info!(amqp = %redact_url(&w.amqp), store = %store, "worker started");
    let mut loops = Vec::new();
    for _ in 0..w.concurrency.max(1) {
        loops.push(tokio::spawn(run_worker(
            queue.clone(),
            exec.clone(),
            rx.clone(),
        )));
    }
    for l in loops {
        l.await.context("worker loop")??;
    }
    info!("worker stopped");
    Ok(())
}
