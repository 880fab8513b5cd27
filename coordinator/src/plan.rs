use covmerge_proto::input::{
    default_manager, GoModule, InputFormat, InputMeta, InputOptions, JobInputs,
};
use covmerge_proto::job::{HeaderSpec, InputIdentity};
use covmerge_proto::{JobId, JobSpec};
use covmerge_storage::{expand_each_input, is_store_url, open_object};

use crate::JobError;

mod partials;

pub use partials::store_partial_inputs;

/// The header's `Namespace` when `--namespace` is not given.
pub const DEFAULT_NAMESPACE: &str = "upstream";

/// A job as the command line asks for it.
#[derive(Debug, Clone)]
pub struct JobRequest {
    /// The job's id (`coordinator --job`; default: a new id).
    pub job: Option<JobId>,
    /// `--input`: paths and URLs, before listing.
    pub inputs: Vec<String>,
    /// `--source`: `dir:`, `git:` or `store:`.
    pub source: String,
    /// `--base-repo`.
    pub base_repo: String,
    /// `--base-commit` (or the commit `--base-at` resolved to).
    pub base_commit: String,
    /// `--shards` (default: from the input's size).
    pub shards: Option<u32>,
    /// `--max-bad-rows`.
    pub max_bad_rows: u64,
    /// `--namespace` as given (header `Namespace`, `upstream` when not given; it
    /// chooses the rows of inputs with a `namespace` column, refused without it).
    pub namespace: Option<String>,
    /// `--duration` (header `Duration`).
    pub duration: i64,
    /// `--date-to` (header `DateTo`; default: `--base-at`'s date, else today, UTC).
    pub date_to: Option<String>,
    /// `--total-rows` (header `TotalRows`; default: the data rows read).
    pub total_rows: Option<i64>,
    /// `--file-path-prefix` (empty: every file).
    pub file_path_prefix: String,
    /// `--input-format`.
    pub format: InputFormat,
    /// `--go-module MODULE=DIR`.
    pub go_modules: Vec<GoModule>,
    /// `--go-manager INPUT=NAME` and `--go-commit INPUT=COMMIT`: INPUT is an input as
    /// listed or its default manager name.
    pub go_managers: Vec<(String, String)>,
    /// `--go-commit INPUT=COMMIT`, as `go_managers` names INPUT.
    pub go_commits: Vec<(String, String)>,
    /// `--group NAME=GLOB`, in the order given.
    pub groups: Vec<covmerge_proto::group::Group>,
    /// `--partial-out URL`: also write the job's rows as a partial there.
    pub partial_out: Option<String>,
    /// `coordinator --rollup`: only the partial, no base and no result (`base_repo`
    /// and `base_commit` empty, `partial_out` given).
    pub rollup: bool,
}

/// Each input's manager and commit for Go coverage: overrides by input or default name,
/// else the default name and the base commit. An override that names no input is refused.
fn input_metas(req: &JobRequest, inputs: &[String]) -> Result<Vec<InputMeta>, JobError> {
    let names: Vec<String> = inputs.iter().map(|i| default_manager(i)).collect();
    let find = |rules: &[(String, String)], flag: &str| -> Result<Vec<Option<String>>, JobError> {
        let mut out = vec![None; inputs.len()];
        for (key, val) in rules {
            let mut hit = false;
            for (i, input) in inputs.iter().enumerate() {
                if input == key || names[i] == *key {
                    out[i] = Some(val.clone());
                    hit = true;
                }
            }
            if !hit {
                return Err(JobError::Plan(format!(
                    "{flag} {key}={val}: no input is {key:?} or has that default name"
                )));
            }
        }
        Ok(out)
    };
    let managers = find(&req.go_managers, "--go-manager")?;
    // A manager no record can be named after (empty, `*`, a group's NAME, past the
    // cap) is refused up front when given, and when every input is of a format whose
    // rows take their input's manager (Go coverage); otherwise the split of such an
    // input refuses it (contract §6).
    let check =
        |manager: &str| covmerge_proto::group::check_manager(manager.as_bytes(), &req.groups);
    for (key, val) in &req.go_managers {
        check(val).map_err(|why| {
            JobError::Plan(format!("--go-manager {key}={val}: the manager {why}"))
        })?;
    }
    let takes_input_manager =
        covmerge_input::formats::format_of(req.format).is_some_and(|f| f.rows_take_input_manager());
    if takes_input_manager {
        for (i, input) in inputs.iter().enumerate() {
            if managers[i].is_none() {
                check(&names[i]).map_err(|why| {
                    JobError::Plan(format!(
                        "Go input {input}: its manager {:?} (its name) {why}; name it with --go-manager {input}=NAME",
                        names[i]
                    ))
                })?;
            }
        }
    }
    let commits = find(&req.go_commits, "--go-commit")?;
    Ok(inputs
        .iter()
        .enumerate()
        .map(|(i, _)| InputMeta {
            manager: managers[i].clone().unwrap_or_else(|| names[i].clone()),
            commit: commits[i]
                .clone()
                .unwrap_or_else(|| req.base_commit.clone()),
        })
        .collect())
}

/// Rows per shard by default. A merge holds projected sums, not rows, so a shard's
/// memory does not grow with its rows; shards exist for parallelism and retries.
pub const ROWS_PER_SHARD: u64 = 1_000_000;

/// Estimated rows from input bytes: syzkaller's CSV rows are ~180 bytes, ~5 gzipped.
fn estimate_rows(bytes: u64, gz: bool) -> u64 {
    if gz {
        bytes / 5
    } else {
        bytes / 180
    }
}

/// The most shards a job gets by default. Every spill object holds a chunk of every
/// shard, and each chunk is a request of its shard's merge: a quarter's 10 G rows at
/// [`ROWS_PER_SHARD`] made 4,096 shards, 2 KiB chunks and 4·10^7 chunk reads. Past
/// 256 shards (4 each for 64 workers) more shards add requests, not parallelism;
/// `--shards` still goes to [`covmerge_proto::limits`]'s maximum.
pub const MAX_DEFAULT_SHARDS: u32 = 256;

/// The default shard count for inputs of these sizes.
pub fn default_shards(sizes: &[(u64, bool)]) -> u32 {
    let rows: u64 = sizes.iter().map(|&(b, gz)| estimate_rows(b, gz)).sum();
    rows.div_ceil(ROWS_PER_SHARD)
        .clamp(1, u64::from(MAX_DEFAULT_SHARDS)) as u32
}

/// Today's date (UTC) as YYYY-MM-DD.
pub fn today_utc() -> String {
    covmerge_proto::date::today_utc()
}

/// An input given twice (the same path, a link to it, a prefix that lists an object
/// named again) would be counted twice without a word: refused, naming both.
fn refuse_repeated_inputs(inputs: &[String]) -> Result<(), JobError> {
    #[derive(PartialEq, Eq, Hash)]
    enum Id {
        File(u64, u64),
        Url(String),
    }
    let id = |i: &str| -> Id {
        // `file://` URLs (`file://localhost/...`, percent-encoded) are their files.
        let local = covmerge_storage::local::local_path(i);
        #[cfg(unix)]
        if let Some(m) = local.and_then(|p| std::fs::metadata(p).ok()) {
            use std::os::unix::fs::MetadataExt;
            return Id::File(m.dev(), m.ino());
        }
        Id::Url(i.to_string())
    };
    let mut seen: std::collections::HashMap<Id, &str> = std::collections::HashMap::new();
    for i in inputs {
        if let Some(first) = seen.insert(id(i), i) {
            return Err(JobError::Plan(format!(
                "input {i} is the same file as input {first}: its rows would be counted twice"
            )));
        }
    }
    Ok(())
}

/// Lists the inputs, checks they exist, and fixes the job's parameters.
pub async fn plan_job(req: &JobRequest) -> Result<JobSpec, JobError> {
    if req.inputs.is_empty() {
        return Err(JobError::Plan("no --input given".into()));
    }
    if let Err(why) = covmerge_proto::path::path_prefix(req.file_path_prefix.as_bytes()) {
        return Err(JobError::Plan(format!(
            "--file-path-prefix {:?} starts no canonical path, so it matches no file: it {why}",
            req.file_path_prefix
        )));
    }
    let listed = expand_each_input(&partials::as_prefixes(&req.inputs, req.format))
        .await
        .map_err(|e| JobError::Plan(e.to_string()))?;
    // A store prefix holding a partial is one input (contract §10), not its objects.
    let inputs = match req.format {
        InputFormat::Auto | InputFormat::Partial => partials::partial_inputs_of_each(listed)?,
        _ => listed.into_iter().flatten().collect(),
    };
    refuse_repeated_inputs(&inputs)?;
    let (sizes, input_ids, planned) = measure_inputs(req, &inputs).await?;
    partials::refuse_shared_files(&planned, &inputs)?;
    let date_to = req.date_to.clone().unwrap_or_else(today_utc);
    // A roll-up takes the namespace and the shard count of its partials, as
    // `covmerge rollup` does, and their period with its raw rows'.
    let (namespace, rollup) = match req.rollup {
        true => {
            let r = partials::rollup_of(&planned, &inputs, req, &date_to)?;
            (r.namespace.clone(), Some(r))
        }
        false => (req.namespace.clone(), None),
    };
    let shards = req.shards.unwrap_or_else(|| match req.rollup {
        true => partials::rollup_shards(&planned, &sizes),
        false => default_shards(&sizes),
    });
    // With `--partial-out` too: a merge task's partial is fed by the blocks its merge
    // reads, its direct partials' included. A roll-up reads every partial of its
    // namespace directly, whatever its shard count (each row keeps the partial's own
    // version): its splits read only raw rows, and one of partials alone no source.
    if req.rollup && req.source.is_empty() {
        partials::refuse_raw_without_source(&planned, &inputs)?;
    }
    let direct = partials::direct_partials(&planned, shards, namespace.as_deref(), req.rollup);
    let splits = partials::alone(group_splits(&sizes), &direct, inputs.len());
    check_settings(req, &date_to)?;
    let input = JobInputs {
        format: req.format,
        options: InputOptions {
            go_modules: req.go_modules.clone(),
            partial_sha256: None,
        },
        each: input_metas(req, &inputs)?,
    };
    // A fleet's workers run in directories of their own: a relative input or source
    // would name another file on each of them. The job names absolute ones.
    let inputs = inputs.iter().map(|i| absolute_location(i)).collect();
    let source = match req.source.split_once(':') {
        Some((kind @ ("dir" | "git"), path)) => format!("{kind}:{}", absolute_location(path)),
        _ => req.source.clone(),
    };
    Ok(JobSpec {
        job: req.job.clone().unwrap_or_else(JobId::new_random),
        inputs,
        base_repo: req.base_repo.clone(),
        base_commit: req.base_commit.clone(),
        source,
        shards,
        max_bad_rows: req.max_bad_rows,
        file_path_prefix: req.file_path_prefix.clone(),
        header: HeaderSpec {
            namespace: namespace
                .clone()
                .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string()),
            duration: req.duration,
            date_to,
            total_rows: req.total_rows,
        },
        input,
        splits,
        groups: req.groups.clone(),
        // `--namespace` as given: the split tasks read the raw rows of a roll-up as a
        // merge's, and refuse a `namespace` column without it.
        namespace: req.namespace.clone(),
        input_ids,
        partial_out: req.partial_out.as_deref().map(absolute_location),
        direct_partials: direct,
        partial_inputs: partials::planned_shas(&planned),
        rollup,
    })
}

/// Inputs measured at once by [`measure_inputs`] (a partial on a store is a GET and
/// a HEAD of its `partial.json`: latency, not bytes).
const MEASURED_AT_ONCE: usize = 16;

/// Each input's [`measure_input`], up to [`MEASURED_AT_ONCE`] at once, in the inputs'
/// order; the error is the first input's in that order, as one after the other.
#[allow(clippy::type_complexity)]
async fn measure_inputs(
    req: &JobRequest,
    inputs: &[String],
) -> Result<
    (
        Vec<(u64, bool)>,
        Vec<InputIdentity>,
        Vec<Option<partials::PlannedPartial>>,
    ),
    JobError,
> {
    use futures::{StreamExt, TryStreamExt};
    let measured: Vec<_> = futures::stream::iter(inputs.iter().map(|i| measure_input(req, i)))
        .buffered(MEASURED_AT_ONCE)
        .try_collect()
        .await?;
    let mut out = (Vec::new(), Vec::new(), Vec::new());
    for (size, id, partial) in measured {
        out.0.push(size);
        out.1.push(id);
        out.2.push(partial);
    }
    Ok(out)
}

/// One listed input's size (bytes, and whether gzip'd: the default shard count follows
/// them) and identity, and for a partial what its description says. A local input's
/// format is found through the input formats' registry: a directory no directory
/// format claims is refused, and so is one that a directory format claims when
/// `--input-format` names another. A store prefix is a partial's (its `partial.json`
/// is its identity, its shard files its size).
async fn measure_input(
    req: &JobRequest,
    i: &str,
) -> Result<((u64, bool), InputIdentity, Option<partials::PlannedPartial>), JobError> {
    if covmerge_input::formats::is_store_prefix(i) {
        let (text, id) = partials::store_description(i).await?;
        let p = partials::PlannedPartial::of(&text);
        return Ok(((p.bytes().unwrap_or(id.size), false), id, Some(p)));
    }
    if is_store_url(i) {
        let (store, key) = open_object(i).map_err(|e| JobError::Plan(e.to_string()))?;
        let id = store
            .identity(&key)
            .await
            .map_err(|e| JobError::Plan(format!("input {i}: {e}")))?;
        return Ok(((id.size, i.ends_with(".gz")), id, None));
    }
    use covmerge_input::formats::{detect, format_of};
    let found =
        detect(std::path::Path::new(i)).map_err(|e| JobError::Plan(format!("input {i}: {e}")))?;
    let dir = format_of(found.kind).and_then(|f| f.directory());
    if let Some(d) =
        dir.filter(|_| !matches!(req.format, InputFormat::Auto) && req.format != found.kind)
    {
        return Err(JobError::Plan(format!(
            "input {i}: a directory that looks like {}, not {} input: give --input-format {} (or auto)",
            d.looks_like,
            req.format.as_str(),
            found.kind.as_str()
        )));
    }
    let partial = match found.kind {
        InputFormat::Partial => {
            let path = std::path::Path::new(i).join(covmerge_partial::desc::DESCRIPTION);
            let text = std::fs::read(&path)
                .map_err(|e| JobError::Plan(format!("input {}: {e}", path.display())))?;
            Some(partials::PlannedPartial::of(&text))
        }
        _ => None,
    };
    let id = local_identity(std::path::Path::new(i), found.bytes)?;
    Ok(((found.bytes, found.gzip), id, partial))
}

/// Checks the job's settings (after its inputs): `--date-to`, `--shards`,
/// `--namespace`, `--go-module` and `--group`.
fn check_settings(req: &JobRequest, date_to: &str) -> Result<(), JobError> {
    let to = match date_to.parse::<covmerge_proto::date::Date>() {
        Ok(to) => to,
        Err(e) => return Err(JobError::Plan(format!("--date-to {date_to:?}: {e}"))),
    };
    // The header's fields the publish gate checks, refused here rather than by the
    // gate after the whole merge.
    if req.duration < 0 {
        return Err(JobError::Plan(format!(
            "--duration {}: the days the rows span, 0 or more",
            req.duration
        )));
    }
    if let Some(t) = req.total_rows.filter(|&t| t < 0) {
        return Err(JobError::Plan(format!(
            "--total-rows {t}: a count of rows, 0 or more"
        )));
    }
    // A merge's partial covers the --duration days ending at --date-to: refused here
    // rather than by its gate after the whole merge.
    if req.partial_out.is_some() && !req.rollup {
        to.period_start(req.duration).map_err(JobError::Plan)?;
    }
    if req.shards == Some(0) {
        return Err(JobError::Plan("--shards must be at least 1".into()));
    }
    if let Some(n) = req
        .shards
        .filter(|&n| n > covmerge_proto::limits::MAX_SHARDS)
    {
        return Err(JobError::Plan(format!(
            "--shards {n}: at most {} shards",
            covmerge_proto::limits::MAX_SHARDS
        )));
    }
    if let Some(ns) = &req.namespace {
        if ns.is_empty()
            || ns.len() > covmerge_proto::limits::MAX_NAME_BYTES
            || ns.chars().any(char::is_control)
        {
            return Err(JobError::Plan(format!(
                "--namespace {ns:?}: a namespace is 1 to {} bytes without control characters",
                covmerge_proto::limits::MAX_NAME_BYTES
            )));
        }
    }
    if req.go_modules.len() > covmerge_proto::limits::MAX_GO_MODULES {
        return Err(JobError::Plan(format!(
            "{} --go-module rules: at most {}",
            req.go_modules.len(),
            covmerge_proto::limits::MAX_GO_MODULES
        )));
    }
    // Two rules for one MODULE: the one that maps a file would be the first given.
    for (i, r) in req.go_modules.iter().enumerate() {
        if let Some(o) = req.go_modules[..i].iter().find(|o| o.module == r.module) {
            return Err(JobError::Plan(format!(
                "--go-module {}={} and --go-module {}={}: MODULE {:?} is given twice",
                o.module, o.dir, r.module, r.dir, r.module
            )));
        }
    }
    covmerge_proto::group::check_groups(&req.groups)
        .map_err(|why| JobError::Plan(format!("--group: {why}")))
}

/// A local input's identity: its size, modification time (ns) and inode; for a Go
/// coverage directory, the bytes of its files and the newest modification time of
/// the directory and its files (a file added, removed or rewritten changes it).
fn local_identity(path: &std::path::Path, bytes: u64) -> Result<InputIdentity, JobError> {
    let err = |e: std::io::Error| JobError::Plan(format!("input {}: {e}", path.display()));
    let ns = |m: &std::fs::Metadata| {
        m.modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_nanos()).ok())
    };
    let meta = std::fs::metadata(path).map_err(err)?;
    let mut modified_ns = ns(&meta);
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).map_err(err)? {
            let m = entry.map_err(err)?.metadata().map_err(err)?;
            modified_ns = modified_ns.max(ns(&m));
        }
    }
    #[cfg(unix)]
    let inode = {
        use std::os::unix::fs::MetadataExt;
        Some(meta.ino())
    };
    #[cfg(not(unix))]
    let inode = None;
    Ok(InputIdentity {
        size: bytes,
        etag: None,
        version: None,
        modified_ns,
        inode,
    })
}

/// `--resume`: the inputs whose identity differs from the one `stored` recorded
/// (`now`: the same inputs as the command line plans them now), each with the index
/// of its input and what changed. Empty when none did.
pub fn changed_inputs(stored: &JobSpec, now: &JobSpec) -> Vec<(usize, String)> {
    stored
        .inputs
        .iter()
        .zip(stored.input_ids.iter().zip(&now.input_ids))
        .enumerate()
        .filter_map(|(i, (input, (was, is)))| {
            was.changes(is).map(|what| {
                (
                    i,
                    format!("input {input} changed since the job started: {what}"),
                )
            })
        })
        .collect()
}

/// Compressed bytes a split of several inputs reads at most: small inputs are
/// grouped up to it. Each split writes at least one spill object, and each of its
/// shards one chunk that the shard's merge must fetch: a job of 200 small inputs
/// made splits × shards chunk reads, each a round trip to the store.
pub const SPLIT_GROUP_BYTES: u64 = 64 << 20;

/// Splits a job of many small inputs is grouped into, about.
pub const SPLIT_WIDTH: u64 = 32;

/// The first input of each split: consecutive inputs grouped while a group reads at
/// most 1/[`SPLIT_WIDTH`] of the job's bytes (so that the map phase still spreads over
/// that many splits) and at most [`SPLIT_GROUP_BYTES`], with at most
/// [`covmerge_proto::limits::MAX_SPLIT_INPUTS`] + 1 inputs. A job of a few inputs, or
/// of inputs larger than that, keeps one split per input (and the plain layout).
pub fn group_splits(sizes: &[(u64, bool)]) -> Vec<u32> {
    let total: u64 = sizes.iter().map(|s| s.0).sum();
    let target = (total / SPLIT_WIDTH).min(SPLIT_GROUP_BYTES);
    let mut firsts = Vec::new();
    let (mut bytes, mut count) = (0u64, 0usize);
    for (i, &(size, _)) in sizes.iter().enumerate() {
        if i == 0
            || bytes.saturating_add(size) > target
            || count > covmerge_proto::limits::MAX_SPLIT_INPUTS
        {
            firsts.push(i as u32);
            bytes = 0;
            count = 0;
        }
        bytes = bytes.saturating_add(size);
        count += 1;
    }
    if firsts.len() == sizes.len() {
        firsts.clear();
    }
    firsts
}

/// A local path made absolute against this process's directory (lexically: symlinks
/// stay as given); store URLs and absolute paths as they are.
fn absolute_location(location: &str) -> String {
    if is_store_url(location) || location.starts_with('/') || location.is_empty() {
        return location.to_string();
    }
    match std::path::absolute(location) {
        Ok(p) => p.to_string_lossy().into_owned(),
        Err(_) => location.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same partial given twice (its prefix listed, and its `partial.json`
    /// named) would have its rows counted twice: refused as any repeated input, as
    /// `rollup` refuses it.
    #[test]
    fn the_same_store_partial_given_twice_is_refused() {
        let given = [
            "gs://b/day/lines-00000.parquet",
            "gs://b/day/partial.json",
            "gs://b/day/partial.json",
        ]
        .map(String::from)
        .to_vec();
        let inputs = partials::store_partial_inputs(given);
        assert_eq!(inputs, ["gs://b/day/", "gs://b/day/"]);
        let e = refuse_repeated_inputs(&inputs).unwrap_err().to_string();
        assert!(
            e.contains("gs://b/day/") && e.contains("counted twice"),
            "{e}"
        );
    }

    /// A CSV named by URL beside a partial's prefix, under it, was dropped unread
    /// with the partial's own objects (`rows_in` 1 of 2): each `--input`'s listing
    /// now gives its partials on its own, and an input named apart stays one. A
    /// partial named apart inside another is its own input; a partial's table file
    /// named apart is refused.
    #[test]
    fn an_input_named_under_a_partials_prefix_was_dropped_unread() {
        let listing = |names: &[&str]| -> Vec<String> {
            names.iter().map(|n| format!("file:///d/p/{n}")).collect()
        };
        let p = listing(&[
            "extra.csv",
            "inner/partial.json",
            "lines-00000.parquet",
            "partial.json",
        ]);
        let inputs = partials::partial_inputs_of_each(vec![
            p.clone(),
            listing(&["extra.csv"]),
            listing(&["inner/lines-00000.parquet", "inner/partial.json"]),
        ])
        .unwrap();
        assert_eq!(
            inputs,
            [
                "file:///d/p/",
                "file:///d/p/extra.csv",
                "file:///d/p/inner/"
            ]
        );
        refuse_repeated_inputs(&inputs).unwrap();
        let e = partials::partial_inputs_of_each(vec![p, listing(&["lines-00000.parquet"])])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("lines-00000.parquet")
                && e.contains("a file of the partial input file:///d/p/"),
            "{e}"
        );
    }

    #[test]
    fn small_inputs_share_splits_and_large_ones_do_not() {
        // 200 inputs of 50 KB: 1/32 of the bytes is 6 inputs a split.
        let small = vec![(50_000u64, true); 200];
        let g = group_splits(&small);
        assert_eq!(g.len(), 34);
        assert_eq!(&g[..3], &[0, 6, 12]);
        // A few inputs, or inputs over the target, each get a split: the plain layout.
        assert!(group_splits(&[(1000, true), (990, true), (1010, true)]).is_empty());
        assert!(group_splits(&[(100 << 20, true); 500]).is_empty());
        // Many tiny inputs: at most MAX_SPLIT_INPUTS + 1 per split.
        let tiny = vec![(10u64, false); 100_000];
        let g = group_splits(&tiny);
        let max = covmerge_proto::limits::MAX_SPLIT_INPUTS + 1;
        assert!(g.windows(2).all(|w| (w[1] - w[0]) as usize <= max));
        assert_eq!(g.len(), 100_000usize.div_ceil(max));
        // A large job: groups near 1/32 of the total, within 64 MiB.
        let mixed: Vec<(u64, bool)> = (0..2000).map(|i| ((i % 7 + 1) << 20, true)).collect();
        let g = group_splits(&mixed);
        assert!(g.len() >= 32 && g.len() < 2000, "{}", g.len());
        let spec_splits = g.len();
        let mut spec = JobSpec {
            namespace: None,
            job: JobId::parse("j").unwrap(),
            inputs: (0..2000).map(|i| format!("/in/{i}.csv.gz")).collect(),
            base_repo: "r".into(),
            base_commit: "c".into(),
            source: "dir:/s".into(),
            shards: 1,
            max_bad_rows: 0,
            file_path_prefix: String::new(),
            header: HeaderSpec {
                namespace: "n".into(),
                duration: 0,
                date_to: "2026-01-01".into(),
                total_rows: None,
            },
            input: JobInputs::default(),
            splits: g,
            groups: Vec::new(),
            input_ids: Vec::new(),
            partial_out: None,
            partial_inputs: Vec::new(),
            direct_partials: Vec::new(),
            rollup: None,
        };
        assert_eq!(spec.validate(), Ok(()));
        let ranges = spec.split_ranges();
        assert_eq!(ranges.len(), spec_splits);
        assert_eq!(ranges.iter().map(|r| r.len()).sum::<usize>(), 2000);
        spec.splits[1] = 0;
        assert!(spec.validate().is_err(), "not ascending");
    }

    #[test]
    fn shard_count_follows_input_size() {
        assert_eq!(default_shards(&[(1000, false)]), 1);
        assert_eq!(default_shards(&[(54_000_000, true)]), 11);
        assert_eq!(default_shards(&[(u64::MAX / 2, false)]), MAX_DEFAULT_SHARDS);
        // A quarter: 4,000 exports of 250 MB.
        assert_eq!(default_shards(&[(250_000_000, true); 4000]), 256);
    }

    #[test]
    fn date_is_iso() {
        assert!(
            today_utc().parse::<covmerge_proto::date::Date>().is_ok(),
            "{}",
            today_utc()
        );
    }
}
