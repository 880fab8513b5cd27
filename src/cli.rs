//! The command line as clap sees it: every subcommand's arguments with their help text
//! (the contract's §5 in flags), and the value parsers they share. What each command
//! does is in `cmd/`, one file per subcommand.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use covmerge_proto::date::Date;
use covmerge_proto::input::{GoModule, InputFormat};
use covmerge_report::budget::{self, Budget};
use covmerge_report::diff::categories::FailOn;
use covmerge_report::diff::compare::DiffOptions;

/// Merges syzkaller line coverage from many builds onto one base revision.
#[derive(Parser, Debug)]
#[command(name = "covmerge", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub cmd: Command,
    /// Log as JSON lines (also COVMERGE_LOG_FORMAT=json). Filter with RUST_LOG.
    #[arg(long, global = true)]
    pub log_json: bool,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
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
    Report(ReportArgs),
    /// Lines gained and lost between two results on the same base (JSON lines).
    Diff(DiffArgs),
    /// Sum partials (contract §10) into one: days into a month, months into a quarter;
    /// raw rows are made a partial on the way, one per namespace with {namespace}.
    Rollup(RollupArgs),
}

impl Command {
    /// The log level without RUST_LOG: `warn` for the one-shot commands that print
    /// their own summary, `info` for the others.
    pub(crate) fn default_log_level(&self) -> &'static str {
        match self {
            Command::Merge(_) | Command::Gen(_) => "warn",
            _ => "info",
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct RollupArgs {
    /// What to sum: partials (local directories holding partial.json) and raw rows
    /// (CSV(.gz) files or object-store URLs, Go coverage: any input a merge takes),
    /// which are made a partial on the way (they need --source).
    #[arg(long, num_args = 1.., required = true)]
    pub input: Vec<String>,
    /// Where the roll-up goes: a local directory, file://, s3:// or gs:// (empty, absent
    /// or holding a partial or a cut write's table files, which are replaced; partial.json
    /// is written last). With
    /// {namespace} in it, one partial per namespace of the inputs (rows of a shared
    /// table read once), each where {namespace} is its name.
    #[arg(long, value_name = "URL")]
    pub partial_out: String,
    /// Shards of the roll-up (default: the largest of the partial inputs' and of what
    /// a merge of the raw inputs would take).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=covmerge_proto::limits::MAX_SHARDS as i64))]
    pub shards: Option<u32>,
    /// The namespace of the roll-up: partials must be of it, and of raw rows with a
    /// `namespace` column only those naming it are read (default: the partials' one;
    /// raw rows with the column need it, or {namespace} in --partial-out).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Where the files of raw rows come from (dir:ROOT, git:PATH or store:URL), to find
    /// each row's version: SRC for every namespace, NS=SRC for namespace NS alone
    /// (repeatable, one per namespace). Not needed for partials.
    #[arg(long, value_name = "[NS=]SRC")]
    pub source: Vec<String>,
    /// The last day of the raw rows' period (default: today, UTC), as merge's.
    #[arg(long, value_name = "DATE", value_parser = date_arg)]
    pub date_to: Option<Date>,
    /// Days of the raw rows' period, ending at --date-to (0: one day), as merge's.
    #[arg(long, default_value_t = 0)]
    pub duration: i64,
    /// Skip and count up to N malformed raw rows (of all namespaces together) instead
    /// of failing, as merge does.
    #[arg(long, default_value_t = 0)]
    pub max_bad_rows: u64,
    /// Memory the roll-up may hold, e.g. 256MiB, 1GiB (at least 16MiB; default
    /// 256MiB): of raw rows, past it spill chunks and sorted runs go to $TMPDIR; of
    /// partials, one row group (up to 6 MiB) is held per input file open at once, and
    /// past the budget the inputs are rolled up in levels through $TMPDIR (an input
    /// that alone opens more files than the budget holds, say 3 shards into 1 at
    /// 16MiB, is refused naming --shards and --memory-budget).
    #[arg(long, value_name = "BYTES", value_parser = covmerge_proto::memory::parse_budget)]
    pub memory_budget: Option<u64>,
    /// What the raw inputs hold, for every one (`auto`: found from each one).
    #[arg(long, default_value = "auto", value_parser = input_format())]
    pub input_format: InputFormat,
    /// Go import paths under MODULE are repository paths under DIR (as merge's).
    #[arg(long, value_name = "MODULE=DIR", value_parser = go_module)]
    pub go_module: Vec<GoModule>,
    /// The manager a Go input's rows are recorded under (as merge's).
    #[arg(long, value_name = "INPUT=NAME", value_parser = key_value)]
    pub go_manager: Vec<(String, String)>,
    /// The commit a Go input was built from: required for each Go input (a roll-up
    /// has no base commit to default to).
    #[arg(long, value_name = "INPUT=COMMIT", value_parser = key_value)]
    pub go_commit: Vec<(String, String)>,
}

#[derive(Args, Debug)]
pub(crate) struct StatusArgs {
    /// The job's store (as given to the coordinator).
    #[arg(long, env = "COVMERGE_STORE", hide_env_values = true)]
    pub store: String,
    /// The job id the coordinator printed.
    #[arg(long = "job")]
    pub job: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Seconds a store read keeps retrying transient errors (storage unreachable,
    /// throttled, 5xx) before status gives up (a question asked by hand: shorter
    /// than a fleet's 300).
    #[arg(long, env = "COVMERGE_STORE_OUTAGE_BUDGET", default_value_t = 30)]
    pub store_outage_budget: u64,
}

#[derive(Args, Debug)]
pub(crate) struct NotifyArgs {
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
pub(crate) struct JobArgs {
    /// Input CSV(.gz) files or object-store URLs (a trailing `*` or `/` lists a prefix).
    /// A row over 1 MiB (fields and commas) is a bad row; names must be UTF-8.
    #[arg(long, num_args = 1.., required = true)]
    pub input: Vec<String>,
    /// Where file versions come from: dir:ROOT, git:PATH or store:URL (a roll-up of
    /// partials alone, `coordinator --rollup`, reads none).
    #[arg(long)]
    pub source: Option<String>,
    /// The base's repository (the result's header).
    #[arg(long, required = true)]
    pub base_repo: Option<String>,
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
    /// The dashboard namespace (header `Namespace`; default: upstream). Inputs with a
    /// `namespace` column (syzkaller's shared table) need it: only the rows naming it
    /// exactly are merged, the others counted in the manifest.
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
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
    /// names, a manager empty, `*`, a group's NAME or over 1 KiB) instead of failing.
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
    /// What the inputs hold, for every input (`auto`: found from each one).
    #[arg(long, default_value = "auto", value_parser = input_format())]
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
    /// Per file, an extra record with Manager NAME whose hits per line are the sums
    /// over the managers matching GLOB (`*` any run, `?` one character), instrumented
    /// where any of them is (repeatable; NAME must not be `*`: a row whose manager is
    /// NAME is a bad row).
    #[arg(long, value_name = "NAME=GLOB", value_parser = group)]
    pub group: Vec<covmerge_proto::group::Group>,
    /// Also write the job's rows as a partial (contract §10) in URL: a local
    /// directory, file://, s3:// or gs://. It must be empty, absent or hold a partial
    /// (which is replaced); its partial.json is written last. {namespace} in URL is
    /// --namespace (required then).
    #[arg(long, value_name = "URL")]
    pub partial_out: Option<String>,
}

fn group(s: &str) -> Result<covmerge_proto::group::Group, String> {
    covmerge_proto::group::Group::parse(s)
}

/// `--input-format`'s values, each with its help, as [`InputFormat`] lists them.
fn input_format() -> impl clap::builder::TypedValueParser<Value = InputFormat> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let values = InputFormat::ALL.map(|f| PossibleValue::new(f.as_str()).help(f.describe()));
    PossibleValuesParser::new(values).map(|s| InputFormat::parse(&s).expect("a listed value"))
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
#[command(mut_arg("source", |a| a.required(true)))]
pub(crate) struct MergeArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// The result: a local path or an object-store URL (optional with --dashboard).
    #[arg(long, required_unless_present = "dashboard")]
    pub out: Option<String>,
    /// Parallel task loops, 1 to 1024 (default: the number of cores).
    #[arg(long, value_parser = task_loops)]
    pub workers: Option<usize>,
    /// Memory the job's caches and task loops share, e.g. 256MiB, 1GiB (at least
    /// 16MiB; default 256MiB, more when --workers asks for more task loops than it
    /// holds at 4MiB each). Past their shares they read again, flush earlier or hold less.
    #[arg(long, value_name = "BYTES", value_parser = covmerge_proto::memory::parse_budget)]
    pub memory_budget: Option<u64>,
}

#[derive(Args, Debug)]
// A roll-up job has no base: the base flags are required only without --rollup.
#[command(mut_arg("base_repo", |a| a.required(false).required_unless_present("rollup")))]
#[command(mut_arg("base_commit", |a| a.required_unless_present("rollup")))]
// A roll-up of partials alone reads no source; one of raw rows is refused without it.
#[command(mut_arg("source", |a| a.required_unless_present("rollup")))]
pub(crate) struct CoordinatorArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// A roll-up job (contract §10): the inputs (raw rows, partials) only summed into
    /// the partial of --partial-out, what `covmerge rollup` writes for them at the same
    /// --shards, no base and no result. Its period is its partials' with, for raw rows,
    /// --duration days ending at --date-to; its namespace and shards default to its
    /// partials' (a --partial-out with {namespace} needs --namespace: one partial per
    /// namespace is `covmerge rollup`'s).
    #[arg(
        long,
        requires = "partial_out",
        conflicts_with_all = [
            "out", "base_repo", "base_commit", "base_at", "branch", "file_path_prefix",
            "group", "total_rows", "dashboard", "dashboard_client",
        ],
    )]
    pub rollup: bool,
    #[command(flatten)]
    pub fleet: FleetArgs,
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
}

/// What the fleet's processes (coordinator, worker) share: the broker, the store, how
/// long they ride out outages of either, and the operations endpoints.
#[derive(Args, Debug, Clone)]
pub(crate) struct FleetArgs {
    /// RabbitMQ URL, e.g. amqp://user:pass@host:5672/%2f (the password is never logged).
    #[arg(long, env = "COVMERGE_AMQP", hide_env_values = true)]
    pub amqp: String,
    /// Object store for the job's objects: file:///abs, s3://bucket/prefix, memory:.
    #[arg(long, env = "COVMERGE_STORE", hide_env_values = true)]
    pub store: String,
    #[command(flatten)]
    pub outages: OutageArgs,
    #[command(flatten)]
    pub listen: ListenArgs,
}

/// The operations endpoints.
#[derive(Args, Debug, Clone)]
pub(crate) struct ListenArgs {
    /// Serve /metrics (Prometheus), /healthz and /readyz over HTTP on ADDR, e.g.
    /// 0.0.0.0:9464 (default: off).
    #[arg(long, env = "COVMERGE_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
}

/// How long the fleet rides out outages of its infrastructure.
#[derive(Args, Debug, Clone)]
pub(crate) struct OutageArgs {
    /// Seconds to keep reconnecting to RabbitMQ (broker restart, upgrade, network
    /// blip) before giving up; a coordinator then exits with the job resumable.
    #[arg(long, env = "COVMERGE_BROKER_OUTAGE_BUDGET", default_value_t = 600)]
    pub broker_outage_budget: u64,
    /// Seconds a store operation keeps retrying transient errors (storage
    /// unreachable, throttled, 5xx) before the task is handed back.
    #[arg(long, env = "COVMERGE_STORE_OUTAGE_BUDGET", default_value_t = 300)]
    pub store_outage_budget: u64,
}

#[derive(Args, Debug)]
pub(crate) struct WorkerArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
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
    /// Memory this worker's caches and task loops share, e.g. 384MiB, 1GiB (at least
    /// 16MiB; default 384MiB, which fits a 512 MiB container limit, more when
    /// --concurrency asks for more task loops than it holds at 4MiB each).
    #[arg(long, value_name = "BYTES", env = "COVMERGE_MEMORY_BUDGET", value_parser = covmerge_proto::memory::parse_budget)]
    pub memory_budget: Option<u64>,
    /// Tasks in a row this worker may fail to run because of its own configuration
    /// (store refused or not the coordinators', source unreadable) before it exits
    /// non-zero to be replaced. Each such task goes back to another worker, and the
    /// worker takes no task (and is not ready) for 2, 4, 8, ... s.
    #[arg(long, env = "COVMERGE_MAX_CONFIG_FAILURES", default_value_t = covmerge_worker::run::DEFAULT_MAX_CONFIG_FAILURES, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_config_failures: u32,
}

#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// The result (a local path or an object-store URL).
    pub result: String,
    /// Where the source text comes from: dir:ROOT, git:PATH or store:URL (without it,
    /// file pages show hits and functions but no text).
    #[arg(long)]
    pub source: Option<String>,
    /// The directory to write the site to (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// An older result: mark lines gained and lost (on another base commit: lcov's
    /// categories, matched through the line diff; needs --source).
    #[arg(long, value_name = "OLD")]
    pub diff: Option<String>,
    /// Threads writing file pages (default: the cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The result's manifest (a path or a store URL): the groups it lists
    /// (`merge --group`) are shown as group columns and never count as managers for
    /// unique lines. Without it every record is a manager's.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<String>,
    /// Memory the report may hold (e.g. 256MiB, 1GiB); the longest result line read is
    /// a quarter of it.
    #[arg(long, value_name = "BYTES", default_value_t = Budget::default(), value_parser = budget::parse)]
    pub memory_budget: Budget,
}

#[derive(Args, Debug)]
pub(crate) struct DiffArgs {
    /// The older result.
    pub old: String,
    /// The newer result (on another base commit: give --source).
    pub new: String,
    /// Write the JSON lines here instead of to standard output (then a summary is
    /// printed).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Memory the diff may hold (e.g. 256MiB, 1GiB); the longest result line read is
    /// a quarter of it.
    #[arg(long, value_name = "BYTES", default_value_t = Budget::default(), value_parser = budget::parse)]
    pub memory_budget: Budget,
    /// Where both bases' texts come from (dir:ROOT, git:PATH or store:URL): needed
    /// when OLD and NEW are on different base commits, to match their lines.
    #[arg(long)]
    pub source: Option<String>,
    /// Exit 3 when a file has at least N lines in category CAT (CBC, LBC, GBC, UBC,
    /// ECB, EUB, GIC, UIC, GNC, UNC, DCB, DUB, or lost = LBC+ECB), naming the files on
    /// standard error. Repeatable.
    #[arg(long = "fail-on", value_name = "CAT>=N", value_parser = parse_fail_on)]
    pub fail_on: Vec<FailOn>,
}

fn parse_fail_on(s: &str) -> Result<FailOn, String> {
    FailOn::parse(s)
}

impl From<ReportArgs> for covmerge_report::Options {
    fn from(a: ReportArgs) -> Self {
        covmerge_report::Options {
            result: a.result,
            source: a.source,
            out: a.out,
            diff: a.diff,
            threads: a.threads,
            manifest: a.manifest,
            budget: a.memory_budget,
        }
    }
}

impl From<DiffArgs> for DiffOptions {
    fn from(a: DiffArgs) -> Self {
        DiffOptions {
            old: a.old,
            new: a.new,
            out: a.out,
            budget: a.memory_budget,
            source: a.source,
            fail_on: a.fail_on,
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct GenArgs {
    /// Output directory.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub spec: covmerge_corpus::CorpusSpec,
}

#[derive(Args, Debug)]
pub(crate) struct SourcesArgs {
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

/// `--workers` / `--concurrency`: 1 to [`covmerge_proto::limits::MAX_TASK_LOOPS`].
fn task_loops(s: &str) -> Result<usize, String> {
    let max = covmerge_proto::limits::MAX_TASK_LOOPS;
    match s.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected a number of task loops from 1 to {max}")),
    }
}

/// Every date flag goes through the one calendar parser ([`Date`]).
fn date_arg(s: &str) -> Result<Date, String> {
    s.parse::<Date>()
        .map_err(|e| format!("{e} (a calendar date, YYYY-MM-DD)"))
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
