//! What `merge` and `coordinator` share: their job flags made a job request (one
//! conversion, [`JobArgs::request`]), the dashboard they notify, and the source and
//! base commit checked before any work.

use anyhow::{bail, Context, Result};
use covmerge_coordinator::dashboard::Dashboard;
use covmerge_coordinator::JobRequest;
use covmerge_proto::JobId;
use covmerge_storage::redact_url;
use tracing::{info, warn};

use crate::cli::JobArgs;

impl JobArgs {
    /// The job request these flags make (`job`: `--job`'s id, if given); the base
    /// commit is `--base-commit`, or looked up for `--base-at`; a roll-up (`rollup`)
    /// has none.
    pub(crate) fn request(&self, job: Option<JobId>, rollup: bool) -> Result<JobRequest> {
        // Refused here, not by the job spec's check in the first task.
        if !rollup && self.base_repo.as_deref().is_some_and(str::is_empty) {
            bail!("--base-repo is empty: give the base's repository");
        }
        Ok(JobRequest {
            job,
            inputs: self.input.clone(),
            source: self.source.clone().unwrap_or_default(),
            base_repo: self.base_repo.clone().unwrap_or_default(),
            base_commit: if rollup {
                String::new()
            } else {
                base_commit(self)?
            },
            shards: self.shards,
            max_bad_rows: self.max_bad_rows,
            namespace: self.namespace.clone(),
            duration: self.duration,
            date_to: self.date_to.or(self.base_at).map(|d| d.to_string()),
            total_rows: self.total_rows,
            file_path_prefix: self.file_path_prefix.clone().unwrap_or_default(),
            format: self.input_format,
            go_modules: self.go_module.clone(),
            go_managers: self.go_manager.clone(),
            go_commits: self.go_commit.clone(),
            groups: self.group.clone(),
            partial_out: self
                .partial_out
                .as_deref()
                .map(|u| partial_out_of(u, self.namespace.as_deref(), rollup))
                .transpose()?,
            rollup,
        })
    }

    /// The dashboard to notify (`--dashboard`, `--dashboard-client` and the key from
    /// the environment).
    pub(crate) fn dashboard(&self) -> Result<Option<Dashboard>> {
        let Some(url) = &self.dashboard else {
            return Ok(None);
        };
        check_dashboard_url(url)?;
        let client = self
            .dashboard_client
            .as_deref()
            .context("--dashboard needs --dashboard-client")?;
        Ok(Some(Dashboard::new(url, client, dashboard_key()?)))
    }
}

/// A merge's `--partial-out`: `{namespace}` in it is the job's `--namespace` (a merge
/// writes one namespace's partial; `covmerge rollup` writes one per namespace, a
/// roll-up job on the fleet (`rollup`) one).
pub(crate) fn partial_out_of(url: &str, namespace: Option<&str>, rollup: bool) -> Result<String> {
    use crate::cmd::rollup::names;
    if !names::template(url)? {
        return Ok(url.to_owned());
    }
    match namespace {
        Some(ns) => names::fill(url, ns),
        None if rollup => bail!(
            "--partial-out {}: {} without --namespace: a roll-up job on the fleet writes the partial of one namespace; give --namespace NS, or run covmerge rollup (in one process) for one partial per namespace",
            covmerge_storage::shown_url(url),
            names::PLACEHOLDER
        ),
        None => bail!(
            "--partial-out {}: {} needs --namespace (a merge writes the partial of one namespace; covmerge rollup writes one per namespace of its inputs)",
            covmerge_storage::shown_url(url),
            names::PLACEHOLDER
        ),
    }
}

/// The dashboard's key: only from the environment, never a flag (contract §8).
pub(crate) fn dashboard_key() -> Result<String> {
    std::env::var("COVMERGE_DASHBOARD_KEY")
        .context("--dashboard needs the key in the environment variable COVMERGE_DASHBOARD_KEY")
}

/// `--base-commit`, or the commit `--base-at`/`--branch` name in the `git:` source.
fn base_commit(a: &JobArgs) -> Result<String> {
    if let Some(c) = &a.base_commit {
        return Ok(c.clone());
    }
    let date = a
        .base_at
        .context("--base-commit or --base-at is required")?;
    let source = a.source.as_deref().unwrap_or_default();
    let Some(path) = source.strip_prefix("git:") else {
        bail!("--base-at needs a git: source to find the commit in (got --source {source})");
    };
    let until = date.end_of_day_utc();
    let git = covmerge_source::GitSource::open(path)?;
    let c = git.commit_at(a.branch.as_deref(), until)?;
    info!(base_at = %date, branch = a.branch.as_deref().unwrap_or("HEAD"), commit = %c, "base commit chosen");
    Ok(c)
}

/// Before any work: the outputs named, apart from each other and from the source
/// ([`covmerge_coordinator::check_outputs_apart`]); `partial_out` with `{namespace}`
/// filled, `store` a fleet's `--store`.
pub(crate) fn check_outputs(
    source: Option<&str>,
    out: Option<&str>,
    manifest: Option<&std::path::Path>,
    partial_out: Option<&str>,
    store: Option<&str>,
    inputs: &[String],
) -> Result<()> {
    let manifest = manifest.map(|m| m.to_string_lossy());
    let outputs: Vec<(&str, &str)> = [
        ("--out", out),
        ("--manifest", manifest.as_deref()),
        ("--partial-out", partial_out),
    ]
    .into_iter()
    .filter_map(|(f, d)| d.map(|d| (f, d)))
    .collect();
    let sources: Vec<&str> = source.into_iter().collect();
    // A result or manifest under a listed input prefix is read by the next run.
    for (flag, dest) in outputs.iter().filter(|(f, _)| *f != "--partial-out") {
        if !covmerge_coordinator::is_stream(dest) {
            covmerge_coordinator::check_apart_as(flag, dest, inputs)?;
        }
    }
    // A fleet's store is written under its `jobs/` prefix only (a `store:` source may
    // be a snapshot beside it).
    let jobs = store.map(|s| format!("{}/jobs", s.trim_end_matches('/')));
    let stores: Vec<(&str, &str)> = jobs.iter().map(|j| ("--store", j.as_str())).collect();
    Ok(covmerge_coordinator::check_outputs_apart(
        &sources, &outputs, &stores,
    )?)
}

/// The same parse `open_source` does, before any work.
pub(crate) fn check_source(spec: &str) -> Result<()> {
    covmerge_source::SourceSpec::parse(spec)
        .map(|_| ())
        .with_context(|| format!("--source {spec:?}"))
}

/// Before any work: the source holds the base commit. A base it lacks would make every
/// file look deleted, and an empty result would be published as complete. `strict`
/// (`merge`): the source must open here. A fleet coordinator may not see a source its
/// workers see (a `dir:` on their disks); it checks what it can open, and each merge task
/// checks again on its worker.
pub(crate) async fn check_base(spec: &str, commit: &str, strict: bool) -> Result<()> {
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

/// Checks a `--dashboard` URL: `http://` or `https://` with a host, a valid port and no
/// query or fragment, as the HTTP client will parse it (anything else failed with its
/// bare "builder error", after the merge). Checked here, not by the argument parser,
/// whose refusal would echo the value, credentials included.
pub(crate) fn check_dashboard_url(s: &str) -> anyhow::Result<()> {
    let shown = if s.contains("://") {
        covmerge_storage::redact_url(s)
    } else {
        // No URL: what follows a last `@` and precedes a query is shown.
        let (user, host) = s.rsplit_once('@').map_or(("", s), |(_, h)| ("***@", h));
        let (host, query) = match host.find(['?', '#']) {
            Some(q) => (&host[..q], "?***"),
            None => (host, ""),
        };
        format!("{user}{host}{query}")
    };
    let u = url::Url::parse(s).map_err(|e| {
        anyhow::anyhow!(
            "--dashboard {shown:?} is not a URL ({e}): give http://HOST[:PORT] or https://..."
        )
    })?;
    if !matches!(u.scheme(), "http" | "https") {
        anyhow::bail!(
            "--dashboard {shown:?}: the dashboard is called over http:// or https://, not {}://",
            u.scheme()
        );
    }
    if u.host_str().is_none_or(str::is_empty) {
        anyhow::bail!("--dashboard {shown:?} names no host");
    }
    if u.query().is_some() || u.fragment().is_some() {
        anyhow::bail!(
            "--dashboard {shown:?}: a dashboard URL has no query or fragment (the calls go to URL/api)"
        );
    }
    Ok(())
}
