//! `covmerge rollup`: partials summed into one (contract §10), written to a local
//! directory or a store URL with `partial.json` last.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use covmerge_partial::Partial;

use crate::cli::RollupArgs;

pub(crate) async fn run(r: RollupArgs) -> Result<()> {
    let mut inputs = Vec::with_capacity(r.input.len());
    // Each input's directory as the file system names it: the same partial twice
    // (or through a link) would be summed twice, and an output that is an input
    // would be replaced while read.
    let mut seen: Vec<(PathBuf, &str)> = Vec::new();
    let out_dir = local_dir(&r.partial_out).and_then(|d| d.canonicalize().ok());
    for i in &r.input {
        if covmerge_storage::is_store_url(i) && !i.starts_with("file://") {
            bail!(
                "--input {}: rollup reads partials in local directories; copy it here first (e.g. gsutil -m cp -r, aws s3 sync)",
                covmerge_storage::redact_url(i)
            );
        }
        let dir = local_dir(i).expect("a store URL was refused above");
        if !dir.join("partial.json").is_file() {
            bail!(
                "--input {i}: not a partial (no partial.json); raw rows become a partial with `covmerge merge --partial-out`"
            );
        }
        let real = dir.canonicalize().with_context(|| format!("--input {i}"))?;
        if let Some((_, first)) = seen.iter().find(|(d, _)| *d == real) {
            bail!("--input {i} is the same partial as --input {first}: its rows would be counted twice");
        }
        if out_dir.as_ref() == Some(&real) {
            bail!(
                "--partial-out {} is --input {i}: give a new location",
                r.partial_out
            );
        }
        seen.push((real, i));
        let p = Partial::open(&dir).with_context(|| format!("--input {i}"))?;
        if let Some(ns) = &r.namespace {
            if &p.description().namespace != ns {
                bail!(
                    "--input {i}: a partial of namespace {:?}, not --namespace {ns:?}",
                    p.description().namespace
                );
            }
        }
        inputs.push(dir);
    }
    covmerge_coordinator::preflight_partial_out(&r.partial_out).await?;
    let shards = r.shards;
    let work = tempfile::Builder::new()
        .prefix("covmerge-rollup-")
        .tempdir()
        .context("a temporary directory for the roll-up")?;
    let out = work.path().join("partial");
    let out2 = out.clone();
    let d = tokio::task::spawn_blocking(move || covmerge_partial::rollup(&inputs, &out2, shards))
        .await
        .context("the roll-up")??;
    covmerge_coordinator::publish_local_partial(&out, &d, &r.partial_out).await?;
    crate::outln!(
        "partial {} {}..{}: {} rows in {} shards",
        covmerge_storage::shown_url(&r.partial_out),
        d.date_from,
        d.date_to,
        d.counts.rows_in,
        d.shard_count
    );
    Ok(())
}

/// The local directory `location` names (a path or a `file://` URL), if it is one.
fn local_dir(location: &str) -> Option<PathBuf> {
    if covmerge_storage::is_store_url(location) && !location.starts_with("file://") {
        return None;
    }
    Some(PathBuf::from(
        location.strip_prefix("file://").unwrap_or(location),
    ))
}
