//! `covmerge sources`: export file versions from git into a store snapshot.

use anyhow::{bail, Context, Result};
use covmerge_storage::{redact_url, Store};

use crate::cli::SourcesArgs;

/// Exports the commits' files (or the given paths) and their indexes.
pub(crate) async fn run(s: SourcesArgs) -> Result<()> {
    let git = covmerge_source::GitSource::open(&s.git)?;
    // An index for a commit the repository lacks (a revspec, an abbreviation, a tag or
    // a missing id) would be an empty snapshot that a merge reads as "every file
    // deleted".
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
                bail!("--path {p:?} is not a canonical path relative to the repository root: it {why}");
            }
        }
        s.path.iter().cloned().collect()
    };
    let (blobs, idx) = covmerge_source::export_commits(&git, &store, &s.commit, &paths).await?;
    crate::outln!(
        "exported {idx} commit index(es), uploaded {blobs} new blob(s) to {}",
        redact_url(&s.store)
    );
    Ok(())
}
