//! `covmerge gen`: a synthetic corpus from a seed.

use anyhow::{Context, Result};

use crate::cli::GenArgs;

/// Writes the corpus and says what it holds.
pub(crate) fn run(g: GenArgs) -> Result<()> {
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
    if let (Some(first), Some(last)) = (c.days.first(), c.days.last()) {
        crate::outln!(
            "{} days, {} to {}, in day-DDD/ (listed in corpus.json)",
            c.days.len(),
            first.date,
            last.date
        );
    }
    Ok(())
}
