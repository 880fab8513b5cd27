//! `covmerge rollup`: partials summed into one (contract §10), written to a local
//! directory or a store URL with `partial.json` last.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use covmerge_partial::Partial;

use crate::cli::RollupArgs;

pub(crate) async fn run(r: RollupArgs) -> Result<()> {
    let mut inputs = Vec::with_capacity(r.input.len());
    for i in &r.input {
        if covmerge_storage::is_store_url(i) && !i.starts_with("file://") {
            bail!(
                "--input {}: rollup reads partials in local directories; copy it here first (e.g. gsutil -m cp -r, aws s3 sync)",
                covmerge_storage::redact_url(i)
            );
        }
        let dir = PathBuf::from(i.strip_prefix("file://").unwrap_or(i));
        if !dir.join("partial.json").is_file() {
            bail!(
                "--input {i}: not a partial (no partial.json); raw rows become a partial with `covmerge merge --partial-out`"
            );
        }
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
        covmerge_storage::redact_url(&r.partial_out),
        d.date_from,
        d.date_to,
        d.counts.rows_in,
        d.shard_count
    );
    Ok(())
}
