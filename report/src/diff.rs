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

use std::io::Write;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::read::{FileCov, Files, Header, LineHits};

/// Instrumented and covered lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub instrumented: u64,
    pub covered: u64,
}

impl Counts {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Added,
    Deleted,
    Changed,
    Unchanged,
}

/// What changed in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileDiff {
    pub file: String,
    pub status: Status,
    pub old: Counts,
    pub new: Counts,
    pub gained: Vec<u32>,
    pub lost: Vec<u32>,
    pub instrumented_added: Vec<u32>,
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
    pub files_changed: u64,
    pub files_unchanged: u64,
    pub files_added: u64,
    pub files_deleted: u64,
    pub gained: u64,
    pub lost: u64,
    pub instrumented_added: u64,
    pub instrumented_removed: u64,
    pub old: Counts,
    pub new: Counts,
}

impl Totals {
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

/// OLD's `*` lines per file, held in memory while NEW streams past.
pub struct OldSide {
    pub header: Header,
    files: FxHashMap<String, (usize, LineHits)>,
}

impl OldSide {
    /// Reads OLD whole (only its `*` records are kept).
    pub fn read(mut r: Files) -> anyhow::Result<OldSide> {
        let mut files = FxHashMap::default();
        while let Some(f) = r.next_file()? {
            let n = files.len();
            files.insert(f.path, (n, f.star));
        }
        Ok(OldSide {
            header: r.header().clone(),
            files,
        })
    }

    /// From files already read (tests, grouped results).
    pub fn from_files(header: Header, list: Vec<FileCov>) -> OldSide {
        let files = list
            .into_iter()
            .enumerate()
            .map(|(i, f)| (f.path, (i, f.star)))
            .collect();
        OldSide { header, files }
    }

    /// Compares NEW's file with OLD's, taking OLD's out.
    pub fn take(&mut self, new: &FileCov) -> FileDiff {
        let old = self.files.remove(&new.path).map(|(_, l)| l);
        diff_file(&new.path, old.as_ref(), Some(&new.star))
    }

    /// What is left once NEW is read: the deleted files, in OLD's order.
    pub fn deleted(self) -> Vec<FileDiff> {
        let mut rest: Vec<(String, (usize, LineHits))> = self.files.into_iter().collect();
        rest.sort_by_key(|(_, (i, _))| *i);
        rest.iter()
            .map(|(p, (_, l))| diff_file(p, Some(l), None))
            .collect()
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
        emit(&old.take(&f), out)?;
    }
    for d in old.deleted() {
        emit(&d, out)?;
    }
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
