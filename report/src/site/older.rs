//! The older result of `report --diff OLD`: on NEW's base, compared line by line
//! ([`crate::diff`]); on another base, through lcov's categories
//! ([`crate::diff::across`]), shown as gained (GBC + GIC + GNC) and lost (LBC + ECB)
//! lines and as one column per category.

use std::sync::Arc;

use anyhow::Result;
use covmerge_source::Source;

use crate::budget::Budget;
use crate::diff::across::{Bases, CatTotals, FileCats};
use crate::diff::{FileDiff, OldSide};
use crate::read::{FileCov, Header};

pub(super) enum Older {
    Same(OldSide),
    Across { old: OldSide, bases: Bases },
}

impl Older {
    /// Opens OLD (`spec`) against NEW's header.
    pub(super) fn open(
        spec: &str,
        rt: &tokio::runtime::Handle,
        new: &Header,
        source: Option<&Arc<dyn Source>>,
        source_spec: Option<&str>,
        budget: Budget,
    ) -> Result<Older> {
        let old = super::read_old(spec, rt, budget)?;
        let old_commit = old.header.commit.clone();
        if old_commit == new.commit {
            return Ok(Older::Same(old));
        }
        let (Some(source), Some(name)) = (source, source_spec) else {
            anyhow::bail!(
                "--diff {spec} is merged onto base commit {old_commit} but the result onto {}: \
                 give --source SRC (dir:, git: or store:) holding both commits, so that their \
                 lines can be matched through the line diff",
                new.commit
            );
        };
        covmerge_source::require_commit(source.as_ref(), name, &old_commit)
            .map_err(|e| anyhow::anyhow!("--diff {spec}: {e}"))?;
        Ok(Older::Across {
            old,
            bases: Bases {
                source: source.clone(),
                source_name: name.to_string(),
                old_commit,
                new_commit: new.commit.clone(),
                diff_limit: budget.line_diff(),
                seen: Default::default(),
            },
        })
    }

    pub(super) fn header(&self) -> &Header {
        match self {
            Older::Same(o) => &o.header,
            Older::Across { old, .. } => &old.header,
        }
    }

    /// NEW's file against OLD's, taking OLD's out.
    pub(super) fn take(&mut self, f: &FileCov) -> Result<(FileDiff, Option<FileCats>)> {
        Ok(match self {
            Older::Same(o) => (o.take(f)?, None),
            Older::Across { old, bases } => {
                let o = old.take_lines(&f.path)?;
                let c = bases.file(&f.path, f.path_problem.is_none(), o.as_ref(), Some(&f.star))?;
                (c.as_diff(), Some(c))
            }
        })
    }

    /// The files only OLD has, in OLD's order; then, across bases, fails when the
    /// source had no text for one side's files ([`Bases::check_sides`]; `new_name`
    /// names the result).
    pub(super) fn rest(
        self,
        new_name: &str,
        each: &mut dyn FnMut(FileDiff, Option<FileCats>) -> Result<()>,
    ) -> Result<()> {
        match self {
            Older::Same(o) => o.deleted(|d| each(d, None))?,
            Older::Across { old, bases } => {
                let old_name = format!("--diff {}", old.name);
                old.rest(|path, ok, o| {
                    let c = bases.file(&path, ok, Some(&o), None)?;
                    each(c.as_diff(), Some(c))
                })?;
                bases.check_sides(&old_name, new_name)?;
            }
        }
        Ok(())
    }
}

/// Category totals, when OLD is on another base.
pub(super) fn totals_of(o: &Older) -> Option<CatTotals> {
    matches!(o, Older::Across { .. }).then(CatTotals::default)
}

#[cfg(test)]
#[path = "older_tests.rs"]
mod tests;
