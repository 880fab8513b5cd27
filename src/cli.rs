//! The command line: clap's argument types for every subcommand, and the handlers that
//! turn them into calls of the library crates (plan and run a job, serve tasks, notify,
//! status, gen, sources); `report` and `diff` are in `report_cmd.rs`, embedded mode in
//! `embedded.rs`.
//!
//! (Over 600 lines because the arguments are: each flag carries its contract §5 help text,
//! and the handlers are a few lines each.)

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use covmerge_coordinator::dashboard::Dashboard;
use covmerge_coordinator::finish::preflight_outputs;
use covmerge_coordinator::progress::ProgressView;
use covmerge_coordinator::{
    plan_job, run_job, JobError, JobOptions, JobRequest, ResumeCheck, Start,
};
use covmerge_proto::date::Date;
use covmerge_proto::job::{GoModule, InputFormat};
use covmerge_proto::output::totals_line;
use covmerge_proto::JobId;
use covmerge_queue::amqp::{AmqpOptions, AmqpQueue};
use covmerge_queue::{Queue, DEFAULT_DELIVERY_LIMIT};
use covmerge_storage::{redact_url, Store};
use covmerge_telemetry::Health;
use covmerge_worker::{run::Executor, run_worker, WorkerConfig};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::embedded::run_embedded;

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
    /// Send a written result to the dashboard again (contract §8) without merging again.
    Notify(NotifyArgs),
    /// Where a fleet job stands: phase, tasks, rows, elapsed time and an ETA, read from
    /// the store (works while the job runs and after its coordinator crashed).
    Status(StatusArgs),
    /// A static HTML coverage report of a result (tree, file pages, per manager).
    Report(crate::report_cmd::ReportArgs),
    /// Lines gained and lost between two results on the same base (JSON lines).
    Diff(crate::report_cmd::DiffArgs),
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The job's store (as given to the coordinator).
    #[arg(long, env = "COVMERGE_STORE", hide_env_values = true)]
    pub store: String,
    /// The job id the coordinator printed.
    #[arg(long = "job")]
    pub job: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct NotifyArgs {
    /// syzkaller dashboard (key from COVMERGE_DASHBOARD_KEY).
    #[arg(long)]
    pub dashboard: String,
    #[arg(long)]
    pub dashboard_client: String,
    /// The upload location create_upload_url gave, where the result already is: only
    /// save_coverage is called again.
    #[arg(long, conflicts_with_all = ["result", "job_id"])]
    pub upload: Option<String>,
    /// A result file or object: a new upload location is asked for, the result copied
    /// there, then save_coverage.
    #[arg(long, conflicts_with = "job_id")]
    pub result: Option<String>,
    /// A fleet job: its manifest under --store says where its result is.
    #[arg(long = "job", id = "job_id", requires = "store")]
    pub job_id: Option<String>,
    #[arg(long, env = "COVMERGE_STORE")]
    pub store: Option<String>,
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
    /// The base revision.
    #[arg(long, required_unless_present = "base_at", conflicts_with = "base_at")]
    pub base_commit: Option<String>,
    /// The base is the last commit on --branch at or before DATE 23:59:59 UTC
    /// (YYYY-MM-DD; needs a git: source), as syz-bq.sh picks it. --date-to defaults to DATE.
    #[arg(long, value_name = "DATE", value_parser = date_arg)]
    pub base_at: Option<Date>,
    /// Branch for --base-at (default: the repository's HEAD).
    #[arg(long, requires = "base_at")]
    pub branch: Option<String>,
    /// Merge only files whose path starts with P (rows of others are counted in the
    /// manifest's rows_outside_prefix).
    #[arg(long, value_name = "P")]
    pub file_path_prefix: Option<String>,
    #[arg(long, default_value = "upstream")]
    pub namespace: String,
    /// Days the coverage covers (header field `Duration`).
    #[arg(long, default_value_t = 0)]
    pub duration: i64,
    /// Header field `DateTo` (default: --base-at's DATE, else today, UTC).
    #[arg(long, value_name = "DATE", value_parser = date_arg)]
    pub date_to: Option<Date>,
    /// Header field `TotalRows` (default: the data rows read).
    #[arg(long)]
    pub total_rows: Option<i64>,
    /// Write the manifest (contract §7) to this file.
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
    /// What the inputs hold: auto (a directory with covmeta.* files is Go covdata, a
    /// file starting `mode: ` a Go text profile, else CSV), csv, go-text, go-covdata.
    #[arg(long, default_value = "auto", value_parser = input_format)]
    pub input_format: InputFormat,
    /// Go import paths under MODULE are repository paths under DIR (`.`: the root).
    #[arg(long, value_name = "MODULE=DIR", value_parser = go_module)]
    pub go_module: Vec<GoModule>,
    /// The manager a Go input's rows are recorded under (default: the input's name
    /// without extension). INPUT is the input as given or that default name.
    #[arg(long, value_name = "INPUT=NAME", value_parser = key_value)]
    pub go_manager: Vec<(String, String)>,
    /// The commit a Go input was built from (default: --base-commit); its lines are
    /// projected onto the base like CSV rows.
    #[arg(long, value_name = "INPUT=COMMIT", value_parser = key_value)]
    pub go_commit: Vec<(String, String)>,
}

fn input_format(s: &str) -> Result<InputFormat, String> {
    InputFormat::parse(s).ok_or_else(|| "expected auto, csv, go-text or go-covdata".into())
}

fn go_module(s: &str) -> Result<GoModule, String> {
    covmerge_input::go::parse_module_rule(s)
}

fn key_value(s: &str) -> Result<(String, String), String> {
    match s.rsplit_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?}: expected INPUT=VALUE")),
    }
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// The result: a local path or an object-store URL (optional with --dashboard).
    #[arg(long, required_unless_present = "dashboard")]
    pub out: Option<String>,
    /// Parallel task loops, 1 to 1024 (default: the number of cores).
    #[arg(long, value_parser = task_loops)]
    pub workers: Option<usize>,
}

#[derive(Args, Debug)]
pub struct CoordinatorArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// RabbitMQ URL, e.g. amqp://user:pass@host:5672/%2f (the password is never logged).
    #[arg(long, env = "COVMERGE_AMQP", hide_env_values = true)]
    pub amqp: String,
    /// Object store for the job's objects: file:///abs, s3://bucket/prefix, memory:.
    #[arg(long, env = "COVMERGE_STORE", hide_env_values = true)]
    pub store: String,
    #[command(flatten)]
    pub outages: OutageArgs,
    /// Seconds between looks in the store for tasks whose report never arrived.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub reconcile_secs: u64,
    /// Publish every task still waited for again after this many seconds in which no
    /// task settled and no report arrived (a task message lost outside covmerge, e.g. a
    /// purged queue, would otherwise be waited for forever; duplicates are harmless).
    #[arg(long, default_value_t = 900, value_parser = clap::value_parser!(u64).range(1..))]
    pub republish_secs: u64,
    /// The result (besides jobs/<id>/result.jsonl.gz in the store).
    #[arg(long)]
    pub out: Option<String>,
    /// Name the job (default: a new id, printed first).
    #[arg(long = "job", id = "job_id")]
    pub job_id: Option<String>,
    /// Continue job ID, re-running only what has no finished output. The job flags
    /// must be the ones that started it (--shards and --date-to may be left out).
    #[arg(long, requires = "job_id")]
    pub resume: bool,
    /// Seconds between heartbeats of the job's lease (one coordinator per job): a lease
    /// with no heartbeat for 3 intervals + 5 s is stale, and --resume takes it over.
    #[arg(long, env = "COVMERGE_LEASE_HEARTBEAT_SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub lease_heartbeat_secs: u64,
    #[command(flatten)]
    pub listen: ListenArgs,
}

/// The operations endpoints.
#[derive(Args, Debug, Clone)]
pub struct ListenArgs {
    /// Serve /metrics (Prometheus), /healthz and /readyz over HTTP on ADDR, e.g.
    /// 0.0.0.0:9464 (default: off).
    #[arg(long, env = "COVMERGE_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
}

impl ListenArgs {
    /// Starts the endpoints if asked; the returned health is not ready until a check
    /// is set.
    async fn start(&self) -> Result<Arc<Health>> {
        let health = Health::new();
        if let Some(addr) = &self.listen {
            let bound = covmerge_telemetry::serve(addr, health.clone()).await?;
            // Tests and scripts bind port 0 and read the port from here.
            crate::log::err_line(&format!("listening on {bound}"));
        }
        Ok(health)
    }
}

/// How long the fleet rides out outages of its infrastructure.
#[derive(Args, Debug, Clone)]
pub struct OutageArgs {
    /// Seconds to keep reconnecting to RabbitMQ (broker restart, upgrade, network
    /// blip) before giving up; a coordinator then exits with the job resumable.
    #[arg(long, env = "COVMERGE_BROKER_OUTAGE_BUDGET", default_value_t = 600)]
    pub broker_outage_budget: u64,
    /// Seconds a store operation keeps retrying transient errors (storage
    /// unreachable, throttled, 5xx) before the task is handed back.
    #[arg(long, env = "COVMERGE_STORE_OUTAGE_BUDGET", default_value_t = 300)]
    pub store_outage_budget: u64,
}

impl OutageArgs {
    async fn queue(&self, url: &str, name: &str) -> Result<AmqpQueue> {
        let opts = AmqpOptions {
            connect_timeout: Duration::from_secs(self.broker_outage_budget),
            connection_name: name.to_string(),
            ..AmqpOptions::new(DEFAULT_DELIVERY_LIMIT)
        };
        Ok(AmqpQueue::connect_with(url, opts).await?)
    }

    fn store(&self, url: &str) -> Result<Store> {
        Ok(Store::open(url)?.with_retry_budget(Duration::from_secs(self.store_outage_budget)))
    }
}

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// RabbitMQ URL, e.g. amqp://user:pass@host:5672/%2f (the password is never logged).
    #[arg(long, env = "COVMERGE_AMQP", hide_env_values = true)]
    pub amqp: String,
    /// Object store for the job's objects: file:///abs, s3://bucket/prefix, memory:.
    #[arg(long, env = "COVMERGE_STORE", hide_env_values = true)]
    pub store: String,
    #[command(flatten)]
    pub outages: OutageArgs,
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
    /// Tasks in a row this worker may fail to run because of its own configuration
    /// (store refused or not the coordinators', source unreadable) before it exits
    /// non-zero to be replaced. Each such task goes back to another worker, and the
    /// worker takes no task (and is not ready) for 2, 4, 8, ... s.
    #[arg(long, env = "COVMERGE_MAX_CONFIG_FAILURES", default_value_t = covmerge_worker::run::DEFAULT_MAX_CONFIG_FAILURES, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_config_failures: u32,
    #[command(flatten)]
    pub listen: ListenArgs,
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
        .with_writer(|| crate::log::LogWriter)
        .log_internal_errors(false);
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

fn request(a: &JobArgs, job: Option<JobId>) -> Result<JobRequest> {
    Ok(JobRequest {
        job,
        inputs: a.input.clone(),
        source: a.source.clone(),
        base_repo: a.base_repo.clone(),
        base_commit: base_commit(a)?,
        shards: a.shards,
        max_bad_rows: a.max_bad_rows,
        namespace: a.namespace.clone(),
        duration: a.duration,
        date_to: a.date_to.or(a.base_at).map(|d| d.to_string()),
        total_rows: a.total_rows,
        file_path_prefix: a.file_path_prefix.clone().unwrap_or_default(),
        format: a.input_format,
        go_modules: a.go_module.clone(),
        go_managers: a.go_manager.clone(),
        go_commits: a.go_commit.clone(),
    })
}

/// `--base-commit`, or the commit `--base-at`/`--branch` name in the `git:` source.
fn base_commit(a: &JobArgs) -> Result<String> {
    if let Some(c) = &a.base_commit {
        return Ok(c.clone());
    }
    let date = a
        .base_at
        .context("--base-commit or --base-at is required")?;
    let Some(path) = a.source.strip_prefix("git:") else {
        bail!(
            "--base-at needs a git: source to find the commit in (got --source {})",
            a.source
        );
    };
    let until = date.end_of_day_utc();
    let git = covmerge_source::GitSource::open(path)?;
    let c = git.commit_at(a.branch.as_deref(), until)?;
    info!(base_at = %date, branch = a.branch.as_deref().unwrap_or("HEAD"), commit = %c, "base commit chosen");
    Ok(c)
}

/// Every date flag goes through the one calendar parser ([`Date`]).
fn date_arg(s: &str) -> Result<Date, String> {
    s.parse::<Date>()
        .map_err(|e| format!("{e} (a calendar date, YYYY-MM-DD)"))
}

fn dashboard(a: &JobArgs) -> Result<Option<Dashboard>> {
    let Some(url) = &a.dashboard else {
        return Ok(None);
    };
    let client = a
        .dashboard_client
        .as_deref()
        .context("--dashboard needs --dashboard-client")?;
    Ok(Some(Dashboard::new(url, client, dashboard_key()?)))
}

/// The same parse `open_source` does, before any work.
fn check_source(spec: &str) -> Result<()> {
    covmerge_source::SourceSpec::parse(spec)
        .map(|_| ())
        .with_context(|| format!("--source {spec:?}"))
}

/// Before any work: the source holds the base commit. A base it lacks would make every
/// file look deleted, and an empty result would be published as complete. `strict`
/// (`merge`): the source must open here. A fleet coordinator may not see a source its
/// workers see (a `dir:` on their disks); it checks what it can open, and each merge task
/// checks again on its worker.
async fn check_base(spec: &str, commit: &str, strict: bool) -> Result<()> {
    let (spec, commit) = (spec.to_string(), commit.to_string());
    tokio::task::spawn_blocking(move || -> Result<()> {
        let source = match covmerge_source::open_source(&spec) {
            Ok(s) => s,
            Err(e) if !strict => {
                warn!(source = %redact_url(&spec), error = %e, "cannot open the source here to check the base commit; each worker checks it");
                return Ok(());
            }
            Err(e) => return Err(anyhow::Error::new(e).context(format!("--source {}", redact_url(&spec)))),
        };
        covmerge_source::require_commit(&*source, &redact_url(&spec), &commit)?;
        Ok(())
    })
    .await
    .context("checking the base commit")?
}

pub async fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Command::Merge(m) => merge(m).await,
        Command::Coordinator(c) => coordinator(c).await,
        Command::Worker(w) => worker(w).await,
        Command::Notify(n) => notify(n).await,
        Command::Report(r) => crate::report_cmd::report(r).await,
        Command::Diff(d) => crate::report_cmd::diff(d).await,
        Command::Status(st) => {
            let job = JobId::parse(&st.job).map_err(anyhow::Error::msg)?;
            let store = Store::open(&st.store)?;
            let status = covmerge_coordinator::status::job_status(&store, &job).await?;
            if st.json {
                crate::outln!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                crate::out!("{status}");
            }
            Ok(())
        }
        Command::Gen(g) => {
            let c = covmerge_corpus::generate(&g.spec, &g.out).context("generating the corpus")?;
            crate::outln!(
                "wrote {} rows in {} input part(s) to {}",
                c.rows,
                c.inputs.len(),
                g.out.display()
            );
            crate::outln!(
                "base commit {} ({} commits)",
                c.base_commit,
                c.commits.len()
            );
            Ok(())
        }
        Command::Sources(s) => {
            let git = covmerge_source::GitSource::open(&s.git)?;
            // An index for a commit the repository lacks (a revspec, an abbreviation,
            // a tag or a missing id) would be an empty snapshot that a merge reads as
            // "every file deleted".
            for c in &s.commit {
                covmerge_source::require_commit(&git, &format!("git:{}", s.git), c)
                    .with_context(|| format!("--commit {c}"))?;
            }
            let store = Store::open(&s.store)?;
            let paths = if s.path.is_empty() {
                covmerge_source::all_paths(&git, &s.commit)?
            } else {
                for p in &s.path {
                    if let Err(why) = covmerge_proto::path::canonical_path(p.as_bytes()) {
                        bail!(
                            "--path {p:?} is not a canonical path relative to the repository root: it {why}"
                        );
                    }
                }
                s.path.iter().cloned().collect()
            };
            let (blobs, idx) =
                covmerge_source::export_commits(&git, &store, &s.commit, &paths).await?;
            crate::outln!(
                "exported {idx} commit index(es), uploaded {blobs} new blob(s) to {}",
                redact_url(&s.store)
            );
            Ok(())
        }
    }
}

async fn merge(m: MergeArgs) -> Result<()> {
    check_source(&m.job.source)?;
    let spec = plan_job(&request(&m.job, None)?).await?;
    check_base(&spec.source, &spec.base_commit, true).await?;
    preflight_outputs(&spec.inputs, m.out.as_deref(), m.job.manifest.as_deref())?;
    let workers = m.workers.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    let opts = JobOptions {
        out: m.out.clone(),
        manifest: m.job.manifest.clone(),
        result_in_store: false,
        dashboard: dashboard(&m.job)?,
        cleanup: false,
        reconcile_every: None,
        republish_after: None,
        lease: None,
    };
    // Split tasks run `workers` at a time: share one budget between them, and the
    // cores too. With as many inputs as task loops, each split inflates and parses on
    // its own thread: no hand-offs, one set of tables per core (BENCHMARKS.md, issue
    // 12: 12-15 % less CPU than two parse threads per split). Fewer inputs than cores
    // get parse threads for the idle ones.
    let base = WorkerConfig::default();
    let at_once = workers.min(spec.split_ranges().len()).max(1);
    let cfg = WorkerConfig {
        split_budget: base.split_budget / workers.max(1),
        split_threads: (base.split_threads / at_once).max(1),
        ..base
    };
    // The result or the manifest on standard output: the summary goes to stderr.
    let on_stdout = |o: &str| covmerge_storage::local::same_location(o, "-");
    let to_stderr = m.out.as_deref().is_some_and(on_stdout)
        || m.job
            .manifest
            .as_deref()
            .is_some_and(|p| on_stdout(&p.to_string_lossy()));
    let job = run_embedded(spec, &opts, workers, cfg, !m.job.quiet);
    let outcome = tokio::select! {
        r = job => r?,
        (name, code) = interrupted() => {
            // Spills, parts and a result not yet renamed into place: nothing of this
            // run is left behind, and nothing half-written is published.
            covmerge_storage::local::remove_registered();
            crate::log::err_line(&format!("covmerge: interrupted by {name}: temporary files removed, no result published"));
            crate::log::finish(crate::log::FINISH_WAIT);
            std::process::exit(code);
        }
    };
    say(
        to_stderr,
        &totals_line(
            outcome.manifest.totals.instrumented,
            outcome.manifest.totals.covered,
        ),
    );
    if let Some(n) = outcome.dashboard_rows {
        say(to_stderr, &format!("created {n} DB rows"));
    }
    Ok(())
}

/// A summary line on standard output, or on standard error when the result itself
/// goes to standard output (`--out -`). A closed stdout loses the line, not the job:
/// the result is already written.
fn say(to_stderr: bool, line: &str) {
    if to_stderr {
        crate::log::err_line(line);
    } else {
        crate::outln!("{line}");
    }
}

/// Resolves at SIGINT, SIGTERM, SIGHUP or SIGQUIT with the signal's name and the exit status a shell
/// gives a process it killed (128 + the signal number: 130, 143).
async fn interrupted() -> (&'static str, i32) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term), Ok(mut hup), Ok(mut quit)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
        signal(SignalKind::quit()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => ("SIGINT", 130),
        _ = term.recv() => ("SIGTERM", 143),
        // A dropped ssh session.
        _ = hup.recv() => ("SIGHUP", 129),
        _ = quit.recv() => ("SIGQUIT", 131),
    }
}

/// syz-covermerger's report of `save_coverage`.
fn print_rows(rows: Option<i64>) {
    if let Some(n) = rows {
        crate::outln!("created {n} DB rows");
    }
}

fn dashboard_key() -> Result<String> {
    std::env::var("COVMERGE_DASHBOARD_KEY")
        .context("--dashboard needs the key in the environment variable COVMERGE_DASHBOARD_KEY")
}

/// `covmerge notify`: save_coverage again for a result that is already written.
async fn notify(n: NotifyArgs) -> Result<()> {
    use covmerge_coordinator::dashboard::upload_object_url;
    use covmerge_storage::{is_store_url, open_object};
    let d = Dashboard::new(&n.dashboard, &n.dashboard_client, dashboard_key()?);
    let (upload, result) = if let Some(u) = n.upload {
        (Some(u), None)
    } else if let Some(r) = n.result {
        (None, Some(r))
    } else if let Some(job) = &n.job_id {
        let job = JobId::parse(job).map_err(anyhow::Error::msg)?;
        let store = Store::open(n.store.as_deref().context("--job needs --store")?)?;
        let m: covmerge_proto::Manifest =
            serde_json::from_slice(&store.get(&covmerge_proto::layout::manifest(&job)).await?)
                .with_context(|| format!("job {job}: manifest in {store}"))?;
        if m.status != covmerge_proto::manifest::JobStatus::Complete {
            bail!("job {job} is {}: it has no result to send", m.status);
        }
        match m.dashboard_upload {
            Some(u) => (Some(u), None),
            None => (
                None,
                Some(format!("{store}/{}", covmerge_proto::layout::result(&job))),
            ),
        }
    } else {
        bail!("notify needs --upload, --result or --job");
    };
    let upload = match (upload, result) {
        (Some(u), _) => {
            covmerge_coordinator::dashboard::check_upload(&u).map_err(anyhow::Error::msg)?;
            u
        }
        (None, Some(src)) => {
            let (s, sk) = if is_store_url(&src) {
                open_object(&src)?
            } else {
                let p = std::fs::canonicalize(&src).with_context(|| format!("result {src}"))?;
                let parent = p.parent().context("result path")?;
                let name = p.file_name().context("result path")?.to_string_lossy();
                (
                    Store::open(&format!("file://{}", parent.display()))?,
                    name.to_string(),
                )
            };
            let u = d.create_upload_url().await.map_err(anyhow::Error::msg)?;
            let obj = upload_object_url(&u);
            let (dst, k) = open_object(&obj)?;
            dst.copy_from(&k, &s, &sk).await?;
            info!(object = %obj, "result copied for the dashboard");
            u
        }
        (None, None) => unreachable!(),
    };
    let rows = d
        .save_coverage(&upload)
        .await
        .map_err(|e| anyhow::anyhow!("{e}\nthe result stays at {}", upload_object_url(&upload)))?;
    print_rows(Some(rows));
    Ok(())
}

/// The closing line syz-covermerger prints.
fn print_totals(m: &covmerge_proto::Manifest) {
    crate::outln!("{}", totals_line(m.totals.instrumented, m.totals.covered));
}

async fn coordinator(c: CoordinatorArgs) -> Result<()> {
    check_source(&c.job.source)?;
    covmerge_coordinator::finish::preflight_store(&c.store, &c.job.input)?;
    let job = c
        .job_id
        .as_deref()
        .map(JobId::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let store = c.outages.store(&c.store)?;
    let start = match (c.resume, job) {
        // The command line must ask for the stored job: it is planned as a new one
        // would be, and the two specs compared before anything is touched.
        (true, Some(job)) => Start::Resume {
            job: job.clone(),
            check: Some(Box::new(ResumeCheck {
                spec: plan_job(&request(&c.job, Some(job))?).await?,
                shards_given: c.job.shards.is_some(),
                date_to_given: c.job.date_to.is_some() || c.job.base_at.is_some(),
            })),
        },
        (true, None) => bail!("--resume needs --job"),
        (false, job) => Start::New(Box::new(plan_job(&request(&c.job, job)?).await?)),
    };
    if let Start::New(spec) = &start {
        check_base(&spec.source, &spec.base_commit, false).await?;
    }
    let inputs = match &start {
        Start::New(spec) => &spec.inputs,
        Start::Resume { check, .. } => match check {
            Some(rc) => &rc.spec.inputs,
            None => &c.job.input,
        },
    };
    preflight_outputs(inputs, c.out.as_deref(), c.job.manifest.as_deref())?;
    let job = start.job().clone();
    crate::outln!("job {job}");
    let health = c.listen.start().await?;
    let amqp = c.outages.queue(&c.amqp, "covmerge coordinator").await?;
    let probe = amqp.clone();
    health.set_check(Box::new(move || probe.connected()));
    let queue: Arc<dyn Queue> = Arc::new(amqp);
    info!(amqp = %redact_url(&c.amqp), store = %store, job = %job, "coordinator started");
    let opts = JobOptions {
        out: c.out.clone(),
        manifest: c.job.manifest.clone(),
        result_in_store: true,
        dashboard: dashboard(&c.job)?,
        cleanup: true,
        reconcile_every: Some(Duration::from_secs(c.reconcile_secs)),
        republish_after: Some(Duration::from_secs(c.republish_secs)),
        lease: Some(Duration::from_secs(c.lease_heartbeat_secs)),
    };
    let progress = if c.job.quiet {
        ProgressView::hidden()
    } else {
        ProgressView::fleet_terminal()
    };
    let outcome = run_job(start, &opts, queue, store, &progress)
        .await
        .map_err(|e| match e {
            // The broker or the store was gone for longer than its budget: everything
            // finished so far is in the store, and the job goes on where it stopped.
            JobError::Queue(_) | JobError::Store(_) => anyhow::anyhow!(
                "{e}\njob {job} is resumable: run the same coordinator command with --job {job} --resume"
            ),
            e => e.into(),
        })?;
    crate::outln!("result {}", outcome.result);
    print_totals(&outcome.manifest);
    print_rows(outcome.dashboard_rows);
    Ok(())
}

async fn worker(w: WorkerArgs) -> Result<()> {
    let store = w.outages.store(&w.store)?;
    let health = w.listen.start().await?;
    let amqp = w.outages.queue(&w.amqp, "covmerge worker").await?;
    let probe = amqp.clone();
    health.set_check(Box::new(move || probe.consuming()));
    let queue: Arc<dyn Queue> = Arc::new(amqp);
    let mut cfg = WorkerConfig {
        source: w.source.clone(),
        grace: Duration::from_secs(w.grace),
        max_config_failures: Some(w.max_config_failures),
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
        health.start_draining();
        let _ = tx.send(true);
    });
    info!(amqp = %redact_url(&w.amqp), store = %store, worker = %exec.config().worker_id, "worker started");
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..w.concurrency.max(1) {
        loops.spawn(run_worker(queue.clone(), exec.clone(), rx.clone()));
    }
    // The first loop to fail ends the process (a misconfigured worker exits non-zero
    // even while its other loops wait for tasks).
    while let Some(l) = loops.join_next().await {
        l.context("worker loop")??;
    }
    info!("worker stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn date_flags_refuse_impossible_dates() {
        use clap::Parser;
        let base = [
            "covmerge",
            "merge",
            "--input",
            "x.csv",
            "--source",
            "dir:/s",
            "--base-repo",
            "r",
            "--out",
            "o",
        ];
        for (flag, bad) in [
            ("--date-to", "2024-99-99"),
            ("--date-to", "2026-02-30"),
            ("--base-at", "2026-02-30"),
            ("--base-at", "2024-4-8"),
        ] {
            let mut args = base.to_vec();
            if flag == "--date-to" {
                args.extend(["--base-commit", "c"]);
            }
            args.extend([flag, bad]);
            let err = super::Cli::try_parse_from(&args).err();
            let err = err.unwrap_or_else(|| panic!("{flag} {bad} was accepted"));
            assert!(err.to_string().contains(bad), "{err}");
        }
        let mut args = base.to_vec();
        args.extend(["--base-at", "2024-02-29"]);
        super::Cli::try_parse_from(&args).unwrap();
    }
}
