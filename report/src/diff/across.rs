//! Coverage changes between two results on different base commits, in lcov's
//! categories ([`super::categories`]), file by file.
//!
//! OLD's `*` records are held on disk by [`OldSide`] (only an index of paths stays in
//! memory, within the memory budget); NEW streams past, and for each of its files
//! OLD's record is read back, the file's text at both bases is asked of the source,
//! and its lines classified. So one file's lines and texts are held at a time,
//! whatever the size of the results. Files only OLD has come last, in OLD's order.
//!
//! Which text a file has at each base decides how its lines relate:
//! - the same blob at both: every line unchanged;
//! - both present: the line map of contract §3 (OLD's text onto NEW's); a pair whose
//!   diff would hold more than its share of the memory budget is mapped by its common
//!   prefix and suffix only (`"text":"capped"`, counted in `diffs_capped`, warned);
//! - absent at one base (a file added or deleted between them, or renamed: renames
//!   are not followed, a renamed file is deleted under its old path and new under its
//!   new one, for every kind of source): nothing in common, so OLD's lines are DCB/DUB
//!   and NEW's GNC/UNC. A file only one result has is still compared with its text at
//!   the other base: a file NEW no longer instruments at all but whose code stayed has
//!   its lines in ECB/EUB, not DCB/DUB.
//! - a file a result has but whose text the source lacks at that result's base (or
//!   whose path is not canonical) is counted in `files_without_text`, named in a
//!   warning, and treated as having nothing in common.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Result;
use covmerge_source::project::line_map_within;
use covmerge_source::{FileVersion, Source};
use serde::Serialize;

use super::categories::{classify, CatCounts, CatLines, Relation};
use super::{side, Counts, FileDiff, OldSide, Side, Status};
use crate::read::{Files, LineHits};

/// How a file's text changed between the bases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Text {
    /// The same blob at both bases.
    Same,
    /// Present at both, different.
    Changed,
    /// Present at both, different, and too large to diff within the memory budget:
    /// only the common prefix and suffix of the texts are unchanged lines.
    Capped,
    /// Absent at OLD's base.
    Added,
    /// Absent at NEW's base.
    Deleted,
    /// A result has the file but the source has no text for it there (or its path is
    /// not canonical).
    Unknown,
}

/// One file's categories.
#[derive(Debug, Clone, Serialize)]
pub struct FileCats {
    /// The file's path.
    pub file: String,
    /// In both results, only in NEW (added) or only in OLD (deleted); changed unless every line is CBC or UBC.
    pub status: Status,
    /// How its text changed between the bases.
    pub text: Text,
    /// Instrumented and covered lines in OLD.
    pub old: Counts,
    /// Instrumented and covered lines in NEW.
    pub new: Counts,
    /// Lines per category.
    pub categories: CatCounts,
    /// The lines of each category (NEW's line numbers; OLD's for DCB and DUB).
    pub lines: CatLines,
}

impl FileCats {
    /// The same-base view of the report: *gained* GBC + GIC + GNC, *lost* LBC + ECB
    /// (lines at NEW's base both), instrumented added GIC + UIC + GNC + UNC and
    /// removed ECB + EUB (DCB and DUB are not at NEW's base).
    pub fn as_diff(&self) -> FileDiff {
        use super::categories::Category::*;
        let union = |cs: &[super::categories::Category]| {
            let mut v: Vec<u32> = cs
                .iter()
                .flat_map(|&c| self.lines.get(c).iter().copied())
                .collect();
            v.sort_unstable();
            v
        };
        FileDiff {
            file: self.file.clone(),
            status: self.status,
            old: self.old,
            new: self.new,
            gained: union(&[Gbc, Gic, Gnc]),
            lost: union(&[Lbc, Ecb]),
            instrumented_added: union(&[Gic, Uic, Gnc, Unc]),
            instrumented_removed: union(&[Ecb, Eub]),
        }
    }
}

/// Sums over all files.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CatTotals {
    /// Files in both results whose coverage changed.
    pub files_changed: u64,
    /// Files whose lines are all CBC or UBC.
    pub files_unchanged: u64,
    /// Files only NEW has.
    pub files_added: u64,
    /// Files only OLD has.
    pub files_deleted: u64,
    /// Files a result has whose text the source lacks at its base.
    pub files_without_text: u64,
    /// Files whose texts were too large to diff within the memory budget (mapped by
    /// their common prefix and suffix only).
    pub diffs_capped: u64,
    /// Instrumented and covered lines in OLD, over all files.
    pub old: Counts,
    /// Instrumented and covered lines in NEW, over all files.
    pub new: Counts,
    /// Lines per category, over all files.
    pub categories: CatCounts,
}

impl CatTotals {
    /// Adds one file.
    pub fn add(&mut self, f: &FileCats) {
        match f.status {
            Status::Added => self.files_added += 1,
            Status::Deleted => self.files_deleted += 1,
            Status::Changed => self.files_changed += 1,
            Status::Unchanged => self.files_unchanged += 1,
        }
        self.files_without_text += u64::from(f.text == Text::Unknown);
        self.diffs_capped += u64::from(f.text == Text::Capped);
        self.old.add(f.old);
        self.new.add(f.new);
        self.categories.add(&f.categories);
    }
}

/// Reads files' texts at OLD's and NEW's bases.
pub struct Bases {
    /// Where the texts come from.
    pub source: Arc<dyn Source>,
    /// The source as the user named it (dir:, git: or store:), for errors.
    pub source_name: String,
    /// OLD's base commit.
    pub old_commit: String,
    /// NEW's base commit.
    pub new_commit: String,
    /// The most one line diff may hold ([`crate::budget::Budget::line_diff`]).
    pub diff_limit: u64,
    /// Per side, the files asked for and those without text ([`Bases::check_sides`]).
    pub seen: Seen,
}

/// What [`Bases::file`] found of each side's files: how many a result holds (with a
/// canonical path) and how many of those the source has no text for at that result's
/// base.
#[derive(Debug, Default)]
pub struct Seen {
    old: [AtomicU64; 2],
    new: [AtomicU64; 2],
}

impl Seen {
    fn count(side: &[AtomicU64; 2], missing: bool) {
        side[0].fetch_add(1, Ordering::Relaxed);
        side[1].fetch_add(u64::from(missing), Ordering::Relaxed);
    }
}

impl Bases {
    /// Called once every file is classified: fails when the source has no text at all
    /// for one side's files at its base. A result holds only files its merge found at
    /// its base (a file absent there is dropped), so such a source does not hold that
    /// base as the result's merge saw it (an empty `ROOT/<commit>/`, a snapshot of
    /// another commit): every line would be DCB/DUB and GNC/UNC, nothing lost, and
    /// `--fail-on` would pass on a broken source. `old_name` / `new_name` name the
    /// results.
    pub fn check_sides(&self, old_name: &str, new_name: &str) -> Result<()> {
        let sides = [
            ("OLD", old_name, &self.old_commit, &self.seen.old),
            ("NEW", new_name, &self.new_commit, &self.seen.new),
        ];
        for (side, name, commit, seen) in sides {
            let files = seen[0].load(Ordering::Relaxed);
            let missing = seen[1].load(Ordering::Relaxed);
            if files > 0 && missing == files {
                anyhow::bail!(
                    "{side} {name}: none of its {files} file(s) has text at its base commit {commit} in the source {}: the source does not hold that base as the result's merge saw it (an empty or wrong ROOT/{commit}/, a snapshot of another commit); its lines would all be compared as deleted and new",
                    covmerge_proto::redact::redact_url(&self.source_name)
                );
            }
        }
        Ok(())
    }

    fn get(&self, commit: &str, path: &str) -> Result<Option<Arc<FileVersion>>> {
        Ok(self.source.get(commit.as_bytes(), path.as_bytes())?)
    }

    /// Classifies one file: `old` / `new` are its `*` lines in each result (`None`:
    /// that result has no such file); `canonical`: its path may be asked of the source.
    pub fn file(
        &self,
        path: &str,
        canonical: bool,
        old: Option<&LineHits>,
        new: Option<&LineHits>,
    ) -> Result<FileCats> {
        let (ov, nv) = if canonical {
            (
                self.get(&self.old_commit, path)?,
                self.get(&self.new_commit, path)?,
            )
        } else {
            (None, None)
        };
        // A line past the end of its base text is not a line of that base: the result
        // is not one of it (a merge never writes one, contract §6).
        for (side, commit, lh, v) in [
            ("OLD", &self.old_commit, old, &ov),
            ("NEW", &self.new_commit, new, &nv),
        ] {
            if let (Some(lh), Some(v)) = (lh, v) {
                let n = v.lines().count();
                if let Some(&last) = lh.lines.last().filter(|&&l| l as usize > n) {
                    anyhow::bail!(
                        "{side}: {path}: line {last} is past the end of its text at {commit} ({n} lines): the result is not one of that base"
                    );
                }
            }
        }
        let unknown =
            !canonical || (old.is_some() && ov.is_none()) || (new.is_some() && nv.is_none());
        if canonical {
            if old.is_some() {
                Seen::count(&self.seen.old, ov.is_none());
            }
            if new.is_some() {
                Seen::count(&self.seen.new, nv.is_none());
            }
        }
        let map;
        let (text, rel) = match (&ov, &nv) {
            _ if unknown => (Text::Unknown, Relation::Disjoint),
            (Some(o), Some(n)) if o.id == n.id => (Text::Same, Relation::Same),
            (Some(o), Some(n)) => {
                map = line_map_within(o, n, self.diff_limit);
                if map.capped {
                    tracing::warn!(
                        "{path}: its texts at the two bases ({} and {} bytes) are too large to diff within a quarter of --memory-budget: only their common prefix and suffix are matched",
                        o.data.len(),
                        n.data.len()
                    );
                    (Text::Capped, Relation::Map(&map))
                } else {
                    (Text::Changed, Relation::Map(&map))
                }
            }
            (None, _) => (Text::Added, Relation::Disjoint),
            (Some(_), None) => (Text::Deleted, Relation::Disjoint),
        };
        if text == Text::Unknown {
            tracing::warn!(
                "{path}: no source text at {} (the base of {}): its lines are compared as deleted and new",
                if old.is_some() && ov.is_none() { &self.old_commit } else { &self.new_commit },
                if old.is_some() && ov.is_none() { "OLD" } else { "NEW" },
            );
        }
        let empty = LineHits::default();
        let (o, n) = (old.unwrap_or(&empty), new.unwrap_or(&empty));
        let lines = classify(o, n, rel);
        let status = match (old, new) {
            (None, _) => Status::Added,
            (_, None) => Status::Deleted,
            _ if lines.only_unchanged() => Status::Unchanged,
            _ => Status::Changed,
        };
        Ok(FileCats {
            file: path.to_string(),
            status,
            text,
            old: Counts::of(o),
            new: Counts::of(n),
            categories: lines.counts(),
            lines,
        })
    }
}

/// `covmerge diff OLD NEW --source SRC` across bases: writes the JSON lines (a header,
/// one `{"file":..}` line per file whose coverage changed, `{"totals":..}`), calls
/// `each` with every file's categories (written or not) and returns the totals.
pub fn write_jsonl(
    bases: &Bases,
    mut old: OldSide,
    new: &mut Files,
    out: &mut dyn Write,
    each: &mut dyn FnMut(&FileCats),
) -> Result<CatTotals> {
    #[derive(Serialize)]
    struct Head<'a> {
        old: Side<'a>,
        new: Side<'a>,
    }
    let head = Head {
        old: side(&old.name, &old.header),
        new: side(new.name(), new.header()),
    };
    serde_json::to_writer(&mut *out, &head)?;
    out.write_all(b"\n")?;
    let mut totals = CatTotals::default();
    let mut emit = |f: &FileCats, out: &mut dyn Write| -> Result<()> {
        totals.add(f);
        each(f);
        if f.status != Status::Unchanged {
            serde_json::to_writer(&mut *out, f)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    };
    while let Some(f) = new.next_file()? {
        let o = old.take_lines(&f.path)?;
        let c = bases.file(&f.path, f.path_problem.is_none(), o.as_ref(), Some(&f.star))?;
        emit(&c, out)?;
    }
    let old_name = old.name.clone();
    old.rest(|path, ok, o| emit(&bases.file(&path, ok, Some(&o), None)?, out))?;
    bases.check_sides(&old_name, new.name())?;
    #[derive(Serialize)]
    struct Last<'a> {
        totals: &'a CatTotals,
    }
    serde_json::to_writer(&mut *out, &Last { totals: &totals })?;
    out.write_all(b"\n")?;
    Ok(totals)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pair over the diff's limit is said to be capped and counted; its common
    /// prefix and suffix still relate OLD's lines to NEW's, the lines between do not.
    #[test]
    fn a_pair_too_large_to_diff_is_capped_and_counted() {
        let d = tempfile::tempdir().unwrap();
        for (commit, text) in [("c1", "a\nb\nc\nd\ne\n"), ("c2", "a\nX\nb\nd\ne\n")] {
            std::fs::create_dir_all(d.path().join(commit)).unwrap();
            std::fs::write(d.path().join(commit).join("f.c"), text).unwrap();
        }
        let source: Arc<dyn Source> =
            covmerge_source::open_source(&format!("dir:{}", d.path().display())).unwrap();
        let lh = |v: &[(u32, u64)]| LineHits {
            lines: v.iter().map(|x| x.0).collect(),
            hits: v.iter().map(|x| x.1).collect(),
        };
        let (old, new) = (lh(&[(1, 1), (2, 1), (5, 1)]), lh(&[(1, 1), (3, 1), (5, 1)]));
        let bases = |diff_limit| Bases {
            source: source.clone(),
            source_name: "dir:test".into(),
            old_commit: "c1".into(),
            new_commit: "c2".into(),
            diff_limit,
            seen: Seen::default(),
        };
        let exact = bases(u64::MAX)
            .file("f.c", true, Some(&old), Some(&new))
            .unwrap();
        let capped = bases(0).file("f.c", true, Some(&old), Some(&new)).unwrap();
        assert_eq!((exact.text, capped.text), (Text::Changed, Text::Capped));
        use super::super::categories::Category::*;
        // Exact: b is unchanged (OLD 2 is NEW 3), so CBC. Capped: only a and e relate.
        assert_eq!(exact.lines.get(Cbc), &[1, 3, 5]);
        assert_eq!(capped.lines.get(Cbc), &[1, 5]);
        assert_eq!(capped.lines.get(Dcb), &[2]);
        assert_eq!(capped.lines.get(Gnc), &[3]);
        let mut t = CatTotals::default();
        t.add(&exact);
        t.add(&capped);
        assert_eq!(t.diffs_capped, 1);
    }
}
