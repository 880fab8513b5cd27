//! Coverage gained and lost between two results on the same base commit.
//!
//! Only the overall (`*`) record of each file is compared, line by line. On a line:
//! - *gained*: covered (hits > 0) in NEW, not covered in OLD (uncovered or not
//!   instrumented there);
//! - *lost*: covered in OLD, not covered in NEW;
//! - *instrumented added* / *removed*: instrumented in NEW only / in OLD only.
//!
//! So for every file and for the totals, `new.covered - old.covered = gained - lost` and
//! `new.instrumented - old.instrumented = instrumented_added - instrumented_removed`:
//! the month-to-month change is explained line by line. Hit counts that change while a
//! line stays covered are not a change.
//!
//! A file is *added* when only NEW has it and *deleted* when only OLD has it. Renames are
//! not detected: a renamed file is a deletion (its covered lines lost) and an addition
//! (its covered lines gained). Both results must be on the same base commit, else the
//! line numbers do not refer to the same text: [`check_same_base`] says how to re-merge.
//!
//! Output ([`write_jsonl`]): JSON lines, a `{"old":..,"new":..}` header, one `{"file":..}`
//! line per file with a change, and a closing `{"totals":..}` line.

pub mod across;
pub mod categories;
pub mod compare;

use std::io::Write;

use anyhow::Context;
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::budget::Budget;
use crate::read::{FileCov, Files, Header, LineHits};

/// Instrumented and covered lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Instrumented lines (in the record, 0 hits included).
    pub instrumented: u64,
    /// Lines with hits above 0.
    pub covered: u64,
}

impl Counts {
    /// The counts of one record's lines.
    pub fn of(l: &LineHits) -> Counts {
        Counts {
            instrumented: l.instrumented(),
            covered: l.covered(),
        }
    }

    fn add(&mut self, o: Counts) {
        self.instrumented += o.instrumented;
        self.covered += o.covered;
    }
}

/// How a file changed between OLD and NEW.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Only in NEW.
    Added,
    /// Only in OLD.
    Deleted,
    /// In both, with some line gained, lost, added or removed.
    Changed,
    /// In both, the same lines instrumented and covered.
    Unchanged,
}

/// What changed in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileDiff {
    /// The file, as a repository path.
    pub file: String,
    /// How it changed.
    pub status: Status,
    /// OLD's `*` counts.
    pub old: Counts,
    /// NEW's `*` counts.
    pub new: Counts,
    /// Lines covered in NEW and not in OLD (uninstrumented there, or 0 hits), ascending.
    pub gained: Vec<u32>,
    /// Lines covered in OLD and not in NEW, ascending.
    pub lost: Vec<u32>,
    /// Lines instrumented in NEW only, ascending.
    pub instrumented_added: Vec<u32>,
    /// Lines instrumented in OLD only, ascending.
    pub instrumented_removed: Vec<u32>,
}

/// Compares one file's `*` lines; `None` where the result has no such file.
pub fn diff_file(path: &str, old: Option<&LineHits>, new: Option<&LineHits>) -> FileDiff {
    let empty = LineHits::default();
    let (o, n) = (old.unwrap_or(&empty), new.unwrap_or(&empty));
    let mut d = FileDiff {
        file: path.to_string(),
        status: Status::Unchanged,
        old: Counts::of(o),
        new: Counts::of(n),
        gained: vec![],
        lost: vec![],
        instrumented_added: vec![],
        instrumented_removed: vec![],
    };
    // Merge-walk both ascending line lists.
    let (mut i, mut j) = (0, 0);
    while i < o.lines.len() || j < n.lines.len() {
        let ol = o.lines.get(i).copied().unwrap_or(u32::MAX);
        let nl = n.lines.get(j).copied().unwrap_or(u32::MAX);
        let (line, oh, nh) = if ol == nl {
            i += 1;
            j += 1;
            (ol, Some(o.hits[i - 1]), Some(n.hits[j - 1]))
        } else if ol < nl {
            i += 1;
            d.instrumented_removed.push(ol);
            (ol, Some(o.hits[i - 1]), None)
        } else {
            j += 1;
            d.instrumented_added.push(nl);
            (nl, None, Some(n.hits[j - 1]))
        };
        let was = oh.is_some_and(|h| h > 0);
        let is = nh.is_some_and(|h| h > 0);
        if is && !was {
            d.gained.push(line);
        } else if was && !is {
            d.lost.push(line);
        }
    }
    d.status = match (old, new) {
        (None, Some(_)) => Status::Added,
        (Some(_), None) => Status::Deleted,
        _ if d.gained.is_empty()
            && d.lost.is_empty()
            && d.instrumented_added.is_empty()
            && d.instrumented_removed.is_empty() =>
        {
            Status::Unchanged
        }
        _ => Status::Changed,
    };
    d
}

/// Sums over all files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Files in both results that changed.
    pub files_changed: u64,
    /// Files in both results, unchanged.
    pub files_unchanged: u64,
    /// Files only in NEW.
    pub files_added: u64,
    /// Files only in OLD.
    pub files_deleted: u64,
    /// Lines gained in all files.
    pub gained: u64,
    /// Lines lost in all files.
    pub lost: u64,
    /// Lines instrumented in NEW only, in all files.
    pub instrumented_added: u64,
    /// Lines instrumented in OLD only, in all files.
    pub instrumented_removed: u64,
    /// OLD's `*` counts over all files.
    pub old: Counts,
    /// NEW's `*` counts over all files.
    pub new: Counts,
}

impl Totals {
    /// Counts one file's diff.
    pub fn add(&mut self, d: &FileDiff) {
        match d.status {
            Status::Added => self.files_added += 1,
            Status::Deleted => self.files_deleted += 1,
            Status::Changed => self.files_changed += 1,
            Status::Unchanged => self.files_unchanged += 1,
        }
        self.gained += d.gained.len() as u64;
        self.lost += d.lost.len() as u64;
        self.instrumented_added += d.instrumented_added.len() as u64;
        self.instrumented_removed += d.instrumented_removed.len() as u64;
        self.old.add(d.old);
        self.new.add(d.new);
    }
}

/// Refuses two results on different base commits, saying how to make them comparable.
pub fn check_same_base(
    old_name: &str,
    old: &Header,
    new_name: &str,
    new: &Header,
) -> anyhow::Result<()> {
    if old.commit == new.commit {
        return Ok(());
    }
    anyhow::bail!(
        "{old_name} is merged onto base commit {} but {new_name} onto {}: line numbers of \
         different bases do not refer to the same text, so the two cannot be compared. \
         Merge the older period again onto the newer base (its inputs, same --source) with \
         `covmerge merge ... --base-commit {}`, then diff that result against {new_name}",
        old.commit,
        new.commit,
        new.commit
    )
}

/// OLD's `*` lines per file while NEW streams past: the lines and hits go to an
/// unnamed temporary file, only each path and where its lines are stay in memory
/// (within half the budget), so memory grows with OLD's files, not its lines.
pub struct OldSide {
    /// OLD's header line.
    pub header: Header,
    /// OLD's name as given (its path or URL).
    pub name: String,
    /// path -> (order in OLD, where its lines are, path is canonical).
    files: FxHashMap<String, (usize, u64, bool)>,
    spill: std::fs::File,
}

/// Writes OLD's files' `*` lines to a spill as they are read.
struct OldWriter {
    files: FxHashMap<String, (usize, u64, bool)>,
    w: std::io::BufWriter<std::fs::File>,
    at: u64,
    held: u64,
    budget: Budget,
}

impl OldWriter {
    fn new(budget: Budget) -> anyhow::Result<Self> {
        let f = tempfile::tempfile().context("creating a temporary file for the older result")?;
        Ok(OldWriter {
            files: FxHashMap::default(),
            w: std::io::BufWriter::with_capacity(1 << 20, f),
            at: 0,
            held: 0,
            budget,
        })
    }

    fn add(&mut self, path: String, canonical: bool, l: &LineHits) -> anyhow::Result<()> {
        let n = l.lines.len();
        let mut b = Vec::with_capacity(8 + n * 12);
        b.extend_from_slice(&(n as u64).to_le_bytes());
        for x in &l.lines {
            b.extend_from_slice(&x.to_le_bytes());
        }
        for h in &l.hits {
            b.extend_from_slice(&h.to_le_bytes());
        }
        self.w
            .write_all(&b)
            .context("writing the older result's lines")?;
        self.held += 2 * path.len() as u64 + 64;
        if self.held > self.budget.old_side() {
            anyhow::bail!(
                "the older result's {} files so far take about {} MiB of paths, over half of --memory-budget {}: files is the dimension; give a larger --memory-budget",
                self.files.len(),
                self.held >> 20,
                self.budget
            );
        }
        let i = self.files.len();
        self.files.insert(path, (i, self.at, canonical));
        self.at += b.len() as u64;
        Ok(())
    }

    fn finish(self, header: Header, name: String) -> anyhow::Result<OldSide> {
        let spill = self
            .w
            .into_inner()
            .map_err(|e| e.into_error())
            .context("writing the older result's lines")?;
        Ok(OldSide {
            header,
            name,
            files: self.files,
            spill,
        })
    }
}

impl OldSide {
    /// Reads OLD whole (only its `*` records are kept, on disk).
    pub fn read(mut r: Files, budget: Budget) -> anyhow::Result<OldSide> {
        let mut w = OldWriter::new(budget)?;
        while let Some(f) = r.next_file()? {
            let canonical = f.path_problem.is_none();
            w.add(f.path, canonical, &f.star)?;
        }
        w.finish(r.header().clone(), r.name().to_string())
    }

    /// From files already read (tests).
    pub fn from_files(header: Header, list: Vec<FileCov>) -> anyhow::Result<OldSide> {
        let mut w = OldWriter::new(Budget::default())?;
        for f in list {
            let canonical = f.path_problem.is_none();
            w.add(f.path, canonical, &f.star)?;
        }
        w.finish(header, "OLD".to_string())
    }

    fn lines_at(&self, at: u64) -> anyhow::Result<LineHits> {
        use std::os::unix::fs::FileExt;
        let what = "reading the older result's lines";
        let mut n = [0u8; 8];
        self.spill.read_exact_at(&mut n, at).context(what)?;
        let n = u64::from_le_bytes(n) as usize;
        let mut b = vec![0u8; n * 12];
        self.spill.read_exact_at(&mut b, at + 8).context(what)?;
        let (l, h) = b.split_at(n * 4);
        Ok(LineHits {
            lines: l
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            hits: h
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        })
    }

    /// Compares NEW's file with OLD's, taking OLD's out.
    pub fn take(&mut self, new: &FileCov) -> anyhow::Result<FileDiff> {
        let old = self.take_lines(&new.path)?;
        Ok(diff_file(&new.path, old.as_ref(), Some(&new.star)))
    }

    /// OLD's lines of `path`, taken out (`None`: OLD has no such file).
    pub fn take_lines(&mut self, path: &str) -> anyhow::Result<Option<LineHits>> {
        match self.files.remove(path) {
            Some((_, at, _)) => Ok(Some(self.lines_at(at)?)),
            None => Ok(None),
        }
    }

    /// What is left once NEW is read: the deleted files, in OLD's order, one at a time.
    pub fn deleted(self, mut f: impl FnMut(FileDiff) -> anyhow::Result<()>) -> anyhow::Result<()> {
        self.rest(|p, _, l| f(diff_file(&p, Some(&l), None)))
    }

    /// The files not taken, in OLD's order, one at a time: (path, path is canonical,
    /// its lines read back).
    pub fn rest(
        self,
        mut f: impl FnMut(String, bool, LineHits) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let mut rest: Vec<(usize, u64, bool, String)> = Vec::with_capacity(self.files.len());
        for (p, (i, at, ok)) in &self.files {
            rest.push((*i, *at, *ok, p.clone()));
        }
        rest.sort_unstable_by_key(|r| r.0);
        for (_, at, ok, p) in rest {
            let l = self.lines_at(at)?;
            f(p, ok, l)?;
        }
        Ok(())
    }
}

#[derive(Serialize)]
struct Side<'a> {
    result: &'a str,
    commit: &'a str,
    repo: &'a str,
    date_to: &'a str,
    duration: i64,
}

fn side<'a>(name: &'a str, h: &'a Header) -> Side<'a> {
    Side {
        result: name,
        commit: &h.commit,
        repo: &h.repo,
        date_to: &h.date_to,
        duration: h.duration,
    }
}

/// `covmerge diff OLD NEW`: writes the JSON lines and returns the totals. Files without
/// a change are counted, not written.
pub fn write_jsonl(
    old_name: &str,
    old: OldSide,
    new: &mut Files,
    out: &mut dyn Write,
) -> anyhow::Result<Totals> {
    write_jsonl_each(old_name, old, new, out, &mut |_| {})
}

/// [`write_jsonl`], calling `each` with every file's diff (written or not).
pub fn write_jsonl_each(
    old_name: &str,
    mut old: OldSide,
    new: &mut Files,
    out: &mut dyn Write,
    each: &mut dyn FnMut(&FileDiff),
) -> anyhow::Result<Totals> {
    check_same_base(old_name, &old.header, new.name(), new.header())?;
    #[derive(Serialize)]
    struct Head<'a> {
        old: Side<'a>,
        new: Side<'a>,
    }
    let head = Head {
        old: side(old_name, &old.header),
        new: side(new.name(), new.header()),
    };
    serde_json::to_writer(&mut *out, &head)?;
    out.write_all(b"\n")?;
    let mut totals = Totals::default();
    let mut emit = |d: &FileDiff, out: &mut dyn Write| -> anyhow::Result<()> {
        totals.add(d);
        each(d);
        if d.status != Status::Unchanged {
            serde_json::to_writer(&mut *out, d)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    };
    while let Some(f) = new.next_file()? {
        emit(&old.take(&f)?, out)?;
    }
    old.deleted(|d| emit(&d, out))?;
    #[derive(Serialize)]
    struct Last<'a> {
        totals: &'a Totals,
    }
    serde_json::to_writer(&mut *out, &Last { totals: &totals })?;
    out.write_all(b"\n")?;
    Ok(totals)
}

#[cfg(test)]
mod tests;
