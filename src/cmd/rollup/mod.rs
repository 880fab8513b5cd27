//! `covmerge rollup`: partials summed into one (contract §10), raw rows made a partial
//! on the way, written to a local directory or a store URL with `partial.json` last;
//! with `{namespace}` in `--partial-out`, one partial per namespace of one read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use covmerge_coordinator::{plan_job, JobRequest};
use covmerge_partial::{Description, Partial};
use covmerge_proto::input::{InputFormat, InputSpec};
use covmerge_proto::JobSpec;
use covmerge_worker::stages::Router;

use crate::cli::RollupArgs;

pub(crate) mod names;
mod raw;

use names::Sources;
use raw::RawSettings;

/// The default `--memory-budget` of a roll-up, as merge's.
const DEFAULT_BUDGET: u64 = 256 << 20;

/// The name of a partial's description.
const DESCRIPTION: &str = "partial.json";

/// A partial given as an input.
struct PartialInput {
    input: String,
    dir: PathBuf,
    real: PathBuf,
    namespace: String,
    shards: u32,
    /// The description's `rows_bad`.
    rows_bad: u64,
    /// Its files' identities: two inputs sharing one are the same partial's files
    /// (a directory of links to another's).
    files: Vec<((u64, u64), PathBuf)>,
}

/// `covmerge rollup`: SIGINT, SIGTERM, SIGHUP or SIGQUIT removes its scratch
/// directory (the raw rows' spills and partials, the roll-up's levels) and exits as
/// `merge` does; a partial being published is left as a killed one is (no
/// `partial.json`: not a partial).
pub(crate) async fn run(r: RollupArgs) -> Result<()> {
    tokio::select! {
        done = roll(r) => done,
        (name, code) = super::interrupted() => {
            covmerge_storage::local::remove_registered();
            crate::log::err_line(&format!("covmerge: interrupted by {name}: temporary files removed"));
            crate::log::finish(crate::log::FINISH_WAIT);
            std::process::exit(code);
        }
    }
}

async fn roll(r: RollupArgs) -> Result<()> {
    let templated = names::template(&r.partial_out)?;
    // `{namespace}` filled where it is known; routed by namespace, each partial's
    // location is checked once the namespaces are (before any is written).
    if !templated || r.namespace.is_some() {
        let url = match &r.namespace {
            Some(ns) if templated => names::fill(&r.partial_out, ns)?,
            _ => r.partial_out.clone(),
        };
        apart(&r, &[url.as_str()])?;
    }
    let sources = Sources::parse(&r.source)?;
    // Rows routed by namespace: `{namespace}` names where each one's partial goes.
    let routed = templated && r.namespace.is_none();
    if !templated {
        // Before anything is read: an output among the inputs.
        covmerge_coordinator::check_apart(&r.partial_out, &r.input)?;
    }
    let (partials, raw) = classify(&r).await?;
    // Raw rows get the bad rows the partials leave of --max-bad-rows.
    let mut r = r;
    let partials_bad = partials_bad_rows(&partials, r.max_bad_rows)?;
    r.max_bad_rows -= partials_bad;
    if !raw.is_empty() && sources.all.is_none() && sources.per.is_empty() {
        bail!(
            "--input {}: raw rows (not a partial: no partial.json) need --source to find each row's version",
            covmerge_storage::shown_url(&raw[0])
        );
    }
    // What each output namespace sums: its partial inputs, its raw rows.
    let mut by_ns = group_partials(&partials, routed)?;
    // Not routed: the namespace of the roll-up (raw rows without the column are its).
    let single = r
        .namespace
        .clone()
        .or_else(|| partials.first().map(|p| p.namespace.clone()))
        .unwrap_or_default();
    // Claimed, and the directories of processes killed before swept: a roll-up killed
    // here leaves its runs to the next covmerge.
    let (work, _owner) = crate::scratch::sweep_and_make("covmerge-rollup-")
        .map_err(anyhow::Error::msg)
        .context("a temporary directory for the roll-up")?;
    let _cleanup = covmerge_storage::local::on_interrupt(work.path());
    covmerge_storage::local::set_scratch_root(work.path());
    let mut shards = r.shards;
    let mut built: Vec<(String, PathBuf, Description)> = Vec::new();
    if !raw.is_empty() {
        let spec = plan_raw(&r, &raw, &sources).await?;
        let n = shards.unwrap_or_else(|| {
            partials
                .iter()
                .map(|p| p.shards)
                .chain([spec.shards])
                .max()
                .unwrap_or(1)
        });
        shards = Some(n);
        let bad = (partials_bad, routed);
        // Namespaces of partial inputs alone count the raw rows as a merge would.
        let partial_only: Vec<String> = by_ns.keys().cloned().collect();
        let names = (single.as_str(), partial_only);
        built = read_raw(&r, &spec, n, bad, names, &sources, work.path()).await?;
        // A roll-up killed here leaves its raw rows' partials in its scratch directory.
        covmerge_fault::pause_async("rollup").await;
        for (ns, _, _) in &built {
            by_ns.entry(ns.clone()).or_default();
        }
    }
    if by_ns.is_empty() {
        bail!("the inputs hold no row of any namespace: no partial to write");
    }
    let known: Vec<String> = by_ns.keys().cloned().collect();
    sources.check_known(&known)?;
    let (outs, made) = places(&r, templated, &known, &partials).await?;
    let budget = r.memory_budget.unwrap_or(DEFAULT_BUDGET) as usize;
    let rolled = Rolled {
        built: &built,
        known: &known,
        work: work.path(),
        shards,
        budget,
    };
    let done = roll_and_publish(by_ns, outs, &rolled).await;
    if done.is_err() {
        // A refused roll-up leaves no directory made for its outputs (a namespace's
        // partial already published keeps its own: it is not empty).
        for d in &made {
            let _ = std::fs::remove_dir(d);
        }
    }
    done
}

/// What every namespace's roll-up shares.
struct Rolled<'a> {
    /// Partials made of the raw rows, by namespace.
    built: &'a [(String, PathBuf, Description)],
    known: &'a [String],
    work: &'a Path,
    shards: Option<u32>,
    /// `--memory-budget`: the roll-up's open row groups and footers are held within
    /// it; past it, inputs are rolled up in levels.
    budget: usize,
}

/// Rolls up each namespace's inputs (`by_ns`) and publishes its partial at its
/// `outs` location, in order.
async fn roll_and_publish(
    by_ns: BTreeMap<String, Vec<PathBuf>>,
    outs: Vec<String>,
    r: &Rolled<'_>,
) -> Result<()> {
    let (shards, budget) = (r.shards, r.budget);
    for ((ns, dirs), url) in by_ns.into_iter().zip(outs) {
        let raw_dir = r
            .built
            .iter()
            .find(|b| b.0 == ns)
            .map(|b| (b.1.clone(), &b.2));
        let (dir, d) = match (raw_dir, dirs.is_empty()) {
            (Some((dir, d)), true) => (dir, d.clone()),
            (raw_dir, _) => {
                let mut inputs = dirs;
                inputs.extend(raw_dir.map(|(d, _)| d));
                let out = r.work.join(format!("rolled-{}", outs_index(r.known, &ns)));
                let out2 = out.clone();
                let scratch = r.work.to_owned();
                let (d, fan) = tokio::task::spawn_blocking(move || {
                    covmerge_partial::rollup_within(&inputs, &out2, shards, budget, &scratch)
                })
                .await
                .context("the roll-up")??;
                if fan.intermediate > 0 {
                    tracing::info!(
                        namespace = %ns,
                        open_at_most = fan.max_open,
                        intermediate = fan.intermediate,
                        "more partial files than --memory-budget holds open: rolled up in levels"
                    );
                }
                (out, d)
            }
        };
        covmerge_coordinator::publish_local_partial(&dir, &d, &url).await?;
        crate::outln!(
            "partial {} {}..{}: {} rows in {} shards",
            covmerge_storage::shown_url(&url),
            d.date_from,
            d.date_to,
            d.counts.rows_in,
            d.shard_count
        );
    }
    Ok(())
}

/// The partial inputs by namespace, refused when routed and a namespace cannot fill
/// `{namespace}`, or when not routed and they are of two namespaces.
fn group_partials(
    partials: &[PartialInput],
    routed: bool,
) -> Result<BTreeMap<String, Vec<PathBuf>>> {
    let mut by_ns: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for p in partials {
        if routed {
            if let Some(why) = names::unsafe_segment(p.namespace.as_bytes()) {
                bail!(
                    "--input {}: a partial of namespace {:?}, which cannot fill {} in --partial-out: {why}",
                    p.input,
                    p.namespace,
                    names::PLACEHOLDER
                );
            }
        }
        by_ns
            .entry(p.namespace.clone())
            .or_default()
            .push(p.dir.clone());
    }
    if !routed && by_ns.len() > 1 {
        let mut it = partials.iter();
        let a = it.next().expect("two namespaces");
        let b = it.find(|p| p.namespace != a.namespace).expect("two");
        bail!(
            "partials of two namespaces: {:?} ({}) and {:?} ({}); a partial holds one namespace: give {} in --partial-out for one partial each",
            a.namespace,
            a.input,
            b.namespace,
            b.input,
            names::PLACEHOLDER
        );
    }
    Ok(by_ns)
}

/// The position of `ns` among the namespaces written (names a scratch directory).
fn outs_index(known: &[String], ns: &str) -> usize {
    known.iter().position(|k| k == ns).unwrap_or(0)
}

/// The partials' bad rows, which count against `--max-bad-rows` (`max`) as a merge
/// counts them (and as the fleet's roll-up does); past it, refused naming the partial.
/// Counted per namespace, as a roll-up of each namespace alone counts them: a bad row
/// that names no namespace is in every namespace's partial of its read, and counted
/// once. The most of any namespace is returned.
fn partials_bad_rows(partials: &[PartialInput], max: u64) -> Result<u64> {
    let mut bad: BTreeMap<&str, u64> = BTreeMap::new();
    for p in partials {
        let n = bad.entry(p.namespace.as_str()).or_default();
        *n = n.saturating_add(p.rows_bad);
        if *n > max {
            bail!(
                "--input {}: {} bad rows counted in the partial (its rows_bad), {} with the inputs of namespace {:?} before it: more than --max-bad-rows {max}",
                p.input,
                p.rows_bad,
                *n,
                p.namespace
            );
        }
    }
    Ok(bad.values().copied().max().unwrap_or(0))
}

/// Sorts the inputs into partials (local directories holding `partial.json`, checked
/// as the roll-up reads them) and raw rows (anything else, read as a merge reads it).
async fn classify(r: &RollupArgs) -> Result<(Vec<PartialInput>, Vec<String>)> {
    let mut partials: Vec<PartialInput> = Vec::new();
    let mut raw = Vec::new();
    for i in &listed_partials(&r.input).await? {
        refuse_store_partial(i).await?;
        let Some(dir) = local_dir(i).filter(|d| d.join("partial.json").is_file()) else {
            raw.push(i.clone());
            continue;
        };
        // Each input's directory as the file system names it: the same partial twice
        // (or through a link) would be summed twice.
        let real = dir.canonicalize().with_context(|| format!("--input {i}"))?;
        if let Some(first) = partials.iter().find(|p| p.real == real) {
            bail!(
                "--input {i} is the same partial as --input {}: its rows would be counted twice",
                first.input
            );
        }
        let p = Partial::open(&dir).with_context(|| format!("--input {i}"))?;
        let d = p.description();
        let files = Partial::file_identities(&dir, d);
        for (id, path) in &files {
            if let Some(first) = partials.iter().find(|p| p.files.iter().any(|f| f.0 == *id)) {
                bail!(
                    "--input {i} is the same partial as --input {}: {} is a link to one of its files, so its rows would be counted twice",
                    first.input,
                    path.display()
                );
            }
        }
        if let Some(ns) = &r.namespace {
            if &d.namespace != ns {
                bail!(
                    "--input {i}: a partial of namespace {:?}, not --namespace {ns:?}",
                    d.namespace
                );
            }
        }
        partials.push(PartialInput {
            input: i.clone(),
            namespace: d.namespace.clone(),
            shards: d.shard_count,
            rows_bad: d.counts.rows_bad,
            dir,
            real,
            files,
        });
    }
    Ok((partials, raw))
}

/// `inputs` with each `file://` listing (a trailing `/` or `*`) that lists a partial's
/// `partial.json` replaced by what it lists, each prefix holding `partial.json` one
/// input (as a merge reads such a listing, contract §10) and its other objects none.
/// Read whole as raw rows, a listing of day partials needed `--source` and gave the
/// roll-up today's period and one shard.
async fn listed_partials(inputs: &[String]) -> Result<Vec<String>> {
    let marker = format!("/{DESCRIPTION}");
    let mut out = Vec::new();
    for i in inputs {
        let listing = i.starts_with("file://") && (i.ends_with('/') || i.ends_with('*'));
        if !listing || local_dir(i).is_some_and(|d| d.join(DESCRIPTION).is_file()) {
            out.push(i.clone());
            continue;
        }
        let objects = covmerge_storage::expand_inputs(std::slice::from_ref(i))
            .await
            .with_context(|| format!("--input {}", covmerge_storage::shown_url(i)))?;
        if !objects.iter().any(|o| o.ends_with(&marker)) {
            out.push(i.clone());
            continue;
        }
        out.extend(covmerge_coordinator::plan::store_partial_inputs(objects));
    }
    Ok(out)
}

/// Refuses an output that is one of the partial inputs: it would be replaced while read.
fn check_not_an_input(url: &str, partials: &[PartialInput]) -> Result<()> {
    let out = local_dir(url).and_then(|d| d.canonicalize().ok());
    if let Some(p) = partials.iter().find(|p| Some(&p.real) == out.as_ref()) {
        bail!(
            "--partial-out {url} is --input {}: give a new location",
            p.input
        );
    }
    Ok(())
}

/// The raw inputs planned as a merge plans them: listed, each one's format, manager
/// and commit, and the shard count a merge of them would take.
async fn plan_raw(r: &RollupArgs, raw: &[String], sources: &Sources) -> Result<JobSpec> {
    let req = JobRequest {
        job: None,
        inputs: raw.to_vec(),
        source: sources.all.clone().unwrap_or_default(),
        base_repo: String::new(),
        base_commit: String::new(),
        shards: r.shards,
        max_bad_rows: r.max_bad_rows,
        namespace: r.namespace.clone(),
        duration: r.duration,
        date_to: r.date_to.map(|d| d.to_string()),
        total_rows: None,
        file_path_prefix: String::new(),
        format: r.input_format,
        go_modules: r.go_module.clone(),
        go_managers: r.go_manager.clone(),
        go_commits: r.go_commit.clone(),
        groups: Vec::new(),
        partial_out: None,
        rollup: false,
    };
    let spec = plan_job(&req).await?;
    refuse_go_without_commit(&spec, r.input_format)?;
    Ok(spec)
}

/// Refuses a Go input of a roll-up (`covmerge rollup`, `coordinator --rollup`) given
/// no `--go-commit`: there is no base commit to default to.
pub(crate) fn refuse_go_without_commit(spec: &JobSpec, format: InputFormat) -> Result<()> {
    for (i, input) in spec.inputs.iter().enumerate() {
        if spec.input_spec(i).commit.is_empty() && takes_input_commit(input, format) {
            bail!(
                "--input {input}: Go coverage names no commit, and a roll-up has no base commit to default to: give --go-commit INPUT=COMMIT (INPUT: the input as given, or its name without extension)"
            );
        }
    }
    Ok(())
}

/// Whether `input`'s rows are recorded under its own commit (Go coverage).
fn takes_input_commit(input: &str, format: InputFormat) -> bool {
    use covmerge_input::formats::{detect, format_of};
    let kind = match format {
        InputFormat::Auto if !covmerge_storage::is_store_url(input) => {
            match detect(std::path::Path::new(input)) {
                Ok(d) => d.kind,
                Err(_) => return false,
            }
        }
        f => f,
    };
    format_of(kind).is_some_and(|f| f.rows_take_input_manager())
}

/// Reads the raw rows of `spec` once and makes their partials (one per namespace when
/// `routed`, else the one of `single`) in `work`, each row's version from its
/// namespace's source.
async fn read_raw(
    r: &RollupArgs,
    spec: &JobSpec,
    n: u32,
    (partials_bad, routed): (u64, bool),
    (single, partial_only): (&str, Vec<String>),
    sources: &Sources,
    work: &std::path::Path,
) -> Result<Vec<(String, PathBuf, Description)>> {
    let (from, to) = period(&spec.header.date_to, r.duration)?;
    let settings = RawSettings {
        shards: n,
        max_bad_rows: r.max_bad_rows,
        partials_bad,
        budget: r.memory_budget.unwrap_or(DEFAULT_BUDGET) as usize,
        threads: std::thread::available_parallelism().map_or(2, |c| c.get()),
        date_from: from,
        date_to: to,
    };
    let inputs: Vec<(String, InputSpec)> = spec
        .inputs
        .iter()
        .enumerate()
        .map(|(i, input)| (input.clone(), spec.input_spec(i)))
        .collect();
    let router = routed.then(|| {
        let (max, why) = names::max_namespaces(settings.budget, settings.threads, n);
        Router::new(max, why, Box::new(|ns: &[u8]| names::check_routed(ns)))
    });
    let namespace = r.namespace.clone();
    let single = single.to_owned();
    let sources = sources.clone();
    let work = work.to_owned();
    let rt = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || -> Result<_> {
        let spill = work.join("spill");
        std::fs::create_dir_all(&spill).with_context(|| spill.display().to_string())?;
        let read = raw::read(&inputs, namespace.as_deref(), router, &settings, &rt, &spill)?;
        let namespaces =
            read.namespaces(Some(single.as_str()).filter(|_| !routed), &partial_only)?;
        // Every namespace of raw rows has its source before any partial is made; one
        // without raw rows looks up no version (any source serves).
        let any = namespaces
            .iter()
            .filter(|ns| ns.has_rows())
            .find_map(|ns| sources.of(&ns.name))
            .map(str::to_owned);
        let mut plan = Vec::with_capacity(namespaces.len());
        for ns in namespaces {
            let src = sources.of(&ns.name).map(str::to_owned);
            let src = if ns.has_rows() { src } else { src.or_else(|| any.clone()) };
            let Some(src) = src else {
                bail!(
                    "raw rows of namespace {:?}: no --source for them: give --source {}=SRC, or a --source for every namespace",
                    ns.name,
                    ns.name
                );
            };
            plan.push((ns, src));
        }
        let mut out = Vec::with_capacity(plan.len());
        for (i, (ns, src)) in plan.into_iter().enumerate() {
            let source = covmerge_source::open_source(&src)
                .with_context(|| format!("--source {}", covmerge_storage::redact_url(&src)))?;
            let dir = work.join(format!("raw-{i:05}"));
            let d = read.build(&ns, &*source, &settings, &dir)?;
            out.push((ns.name.clone(), dir, d));
        }
        Ok(out)
    })
    .await
    .context("reading the raw rows")?
}

/// Where each of the `known` namespaces' partial goes (`--partial-out`, filled when
/// `templated`): checked apart from the inputs, the sources and each other, then
/// preflighted, before any is written; and the directories preflighting made for
/// them, deepest first. A later namespace's refusal leaves no directory made for an
/// earlier one.
async fn places(
    r: &RollupArgs,
    templated: bool,
    known: &[String],
    partials: &[PartialInput],
) -> Result<(Vec<String>, Vec<PathBuf>)> {
    let mut outs = Vec::with_capacity(known.len());
    for ns in known {
        let url = if templated {
            names::fill(&r.partial_out, ns)?
        } else {
            r.partial_out.clone()
        };
        check_not_an_input(&url, partials)?;
        outs.push(url);
    }
    apart(r, &outs.iter().map(String::as_str).collect::<Vec<_>>())?;
    let mut made: Vec<PathBuf> = outs
        .iter()
        .flat_map(|u| covmerge_coordinator::missing_dirs(u))
        .collect();
    made.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for url in &outs {
        if let Err(e) = covmerge_coordinator::preflight_partial_out(url, &r.input).await {
            for d in &made {
                let _ = std::fs::remove_dir(d);
            }
            return Err(e.into());
        }
    }
    Ok((outs, made))
}

/// Before any partial is written: `urls` (`--partial-out`, filled for each namespace)
/// apart from the sources and from each other (two namespaces' partials in one place,
/// through a link, would leave one of them).
fn apart(r: &RollupArgs, urls: &[&str]) -> Result<()> {
    let sources: Vec<&str> = r.source.iter().map(String::as_str).collect();
    let outs: Vec<(&str, &str)> = urls.iter().map(|u| ("--partial-out", *u)).collect();
    covmerge_coordinator::check_outputs_apart(&sources, &outs, &[])?;
    Ok(())
}

/// The period of `--duration` days ending at `date_to` (one day at least), as a
/// merge's partial has it.
fn period(date_to: &str, duration: i64) -> Result<(String, String)> {
    let to: covmerge_proto::date::Date = date_to
        .parse()
        .map_err(|e| anyhow::anyhow!("--date-to {date_to:?}: {e}"))?;
    let from = to.period_start(duration).map_err(anyhow::Error::msg)?;
    Ok((from.to_string(), to.to_string()))
}

/// The local directory `location` names (a path or a `file://` URL), if it is one.
fn local_dir(location: &str) -> Option<PathBuf> {
    if covmerge_storage::is_store_url(location) && !location.starts_with("file://") {
        return None;
    }
    // `…/partial.json` names its directory's partial, as it does for a merge.
    let l = location.strip_prefix("file://").unwrap_or(location);
    Some(PathBuf::from(l.strip_suffix("/partial.json").unwrap_or(l)))
}

/// Refuses a partial in an `s3://` or `gs://` store: a roll-up reads partials from
/// local directories. Read as raw rows, its rows were summed with today's period in
/// place of its own, and the same partial given twice was counted twice.
async fn refuse_store_partial(input: &str) -> Result<()> {
    if !covmerge_storage::is_store_url(input) || input.starts_with("file://") {
        return Ok(());
    }
    let prefix = input.strip_suffix("partial.json").unwrap_or(input);
    let prefix = if prefix.ends_with('/') {
        prefix.to_owned()
    } else {
        format!("{prefix}/")
    };
    let held = match covmerge_storage::Store::open(&prefix) {
        Ok(store) => store.exists("partial.json").await.unwrap_or(false),
        Err(_) => false,
    };
    if held || input.ends_with("/partial.json") {
        bail!(
            "--input {}: a partial in a store; `covmerge rollup` reads partials from local directories: roll it up on the fleet (`coordinator --rollup`, which reads it where it is) or copy it to a local directory",
            covmerge_storage::shown_url(input)
        );
    }
    Ok(())
}
