//! The map phase for inputs whose format decodes its own rows (Go coverage: a
//! `GOCOVERDIR` directory or a text profile; partials, see [`crate::input::formats`]):
//! each row, recorded under the input's manager and build commit unless it names its
//! own, is partitioned into the same per-shard spill chunks as CSV rows.
//!
//! A partial's rows of other kinds ([`RowKind`]) become spill entries that no raw row
//! makes (a raw row's manager is never empty): an empty manager marks them, and the
//! merge tells them apart (`merge/pass/block.rs`).
//!
//! | row | entry (file, commit, func, manager, sl) -> (hits, rows) | rows read |
//! |---|---|---|
//! | `Hits` | (file, commit, "", manager, line) -> (hits, rows) | rows |
//! | `Votes` | (file, commit, func, "", line) -> (0, rows) | none |
//! | `WithoutLine` | (file, "", "", "", 0) -> (0, rows) | rows |
//! | `WithoutVersion` | (file, "", "", "", 1) -> (hits, rows) | rows |

use covmerge_proto::{
    input::InputSpec,
    manifest::NamespaceTally,
    shard_hash::shard_of,
    wire::{BadRow, SplitOutcome},
    ShardId,
};

use super::{flush_tables, Emit, SplitError, SplitSettings};
use crate::input::formats::{InputNamespace, LineRow, ReadError, RowKind, RowSource, Stopped};
use crate::spill::{EntryTable, RawKey, StringTable};

/// Splits one input read by its format's [`RowSource`], in a job of `--namespace`
/// `namespace`. Rows counted: `rows_in` = rows produced (a summed row counts the rows
/// it sums; votes count none) plus bad lines, `rows_bad` = bad lines. An input that
/// says its namespace (a partial) must be of the job's, and adds what it counted of
/// other namespaces.
pub(crate) fn split_rows(
    name: &str,
    src: Box<dyn RowSource>,
    spec: &InputSpec,
    namespace: Option<&str>,
    settings: SplitSettings,
    emit: &Emit<'_>,
) -> Result<SplitOutcome, SplitError> {
    let refuse = |problem: String| {
        SplitError::Read(ReadError::Input {
            input: name.to_string(),
            problem,
        })
    };
    let tally = match src.namespace() {
        Some(ns) => Some(namespace_of(ns, namespace).map_err(refuse)?),
        None => None,
    };
    let manager = if spec.manager.is_empty() {
        crate::input::go::default_manager(name)
    } else {
        spec.manager.clone()
    };
    let max_bad = settings.max_bad_rows;
    let mut rows = Rows::new(&manager, &spec.commit, settings, emit);
    // The sink's own error (a spill write, a refused manager), kept while the format
    // stops reading.
    let mut failed = None;
    let read = src.read_rows(max_bad, &mut |row: &LineRow<'_>| {
        rows.add(row).map_err(|e| {
            failed = Some(e);
            Stopped
        })
    });
    let bad = match (read, failed) {
        (_, Some(Refused::Manager { name: m, why, own })) => {
            return Err(refuse(if own {
                format!("its rows' manager {m:?} {why}")
            } else {
                format!("its manager {m:?} {why}; name it with --go-manager {name}=NAME")
            }))
        }
        (_, Some(Refused::Split(e))) => return Err(e),
        (Err(e), None) => return Err(SplitError::Read(e)),
        (Ok(bad), None) => bad,
    };
    let mut outcome = SplitOutcome::default();
    outcome.counts.rows_in = rows.count.saturating_add(bad.count);
    outcome.counts.rows_bad = bad.count;
    outcome.bad_rows = bad
        .samples
        .into_iter()
        .map(|(line, problem)| BadRow {
            input: name.to_string(),
            line,
            problem,
        })
        .collect();
    if let Some(mut tally) = tally {
        // Rows of an input with the column that name the job's namespace: all it read.
        if tally.column {
            tally.matched = outcome.counts.rows_in;
        }
        outcome.namespaces = tally;
    }
    rows.finish()?;
    Ok(outcome)
}

/// What an input of namespace `ns` adds to the job's tally, or why a job of
/// `--namespace` `job` (`None`: not given) refuses it: its namespace must be the
/// job's, and without `--namespace` only a partial made without one (no namespace, no
/// column) is read, as an input with a `namespace` column is refused (contract §2).
fn namespace_of(ns: &InputNamespace, job: Option<&str>) -> Result<NamespaceTally, String> {
    match job {
        Some(j) if ns.name != j => Err(format!(
            "its rows are of namespace {:?}, the job's --namespace is {j:?}",
            ns.name
        )),
        None if !ns.name.is_empty() || ns.column => Err(format!(
            "its rows are of namespace {:?}, and the job has no --namespace: give --namespace {:?}",
            ns.name, ns.name
        )),
        _ => Ok(NamespaceTally {
            column: ns.column,
            matched: 0,
            others: ns.others.clone(),
        }),
    }
}

/// Why a row stopped the reading.
enum Refused {
    /// A manager that cannot be a record's own (`own`: named by the rows, not the
    /// input's).
    Manager {
        name: String,
        why: String,
        own: bool,
    },
    Split(SplitError),
}

impl From<SplitError> for Refused {
    fn from(e: SplitError) -> Self {
        Refused::Split(e)
    }
}

/// The rows of one input as its format hands them over, partitioned into per-shard
/// tables that are flushed as chunks whenever they hold more than the split's budget:
/// the input's rows never exist all at once.
struct Rows<'a> {
    manager: &'a str,
    commit: &'a str,
    settings: SplitSettings,
    emit: &'a Emit<'a>,
    strings: StringTable,
    tables: Vec<EntryTable>,
    /// The last file's path, its id in `strings` and its shard.
    last_file: Option<(String, u32, ShardId)>,
    /// Input rows added (a summed row counts the rows it sums).
    count: u64,
    /// Calls of [`Rows::add`], whose every 4096th checks the budget.
    added: u64,
    /// The strings' bytes at the last check of the budget: strings grown by an eighth
    /// of it since are checked at once (4096 rows of 1 MiB names would hold 4 GiB).
    strings_checked: usize,
    /// The last manager checked (a name of the rows or the input's): the rows of a
    /// partial come sorted by manager within each file version.
    checked: Option<String>,
    /// The job's groups, whose NAMEs no manager may take.
    groups: crate::input::Groups,
}

impl<'a> Rows<'a> {
    fn new(manager: &'a str, commit: &'a str, settings: SplitSettings, emit: &'a Emit<'a>) -> Self {
        let n = settings.shards.max(1);
        let groups = settings.groups.clone();
        Rows {
            manager,
            commit,
            settings,
            emit,
            strings: StringTable::new(),
            tables: (0..n).map(|_| EntryTable::new()).collect(),
            last_file: None,
            count: 0,
            added: 0,
            strings_checked: 0,
            checked: None,
            groups,
        }
    }

    fn add(&mut self, row: &LineRow<'_>) -> Result<(), Refused> {
        let file = row.file;
        let (file, shard) = match &self.last_file {
            Some((f, id, s)) if f == file => (*id, *s),
            _ => {
                let id = self.strings.intern(file.as_bytes());
                let s = shard_of(file.as_bytes(), self.settings.shards.max(1));
                self.last_file = Some((file.to_string(), id, s));
                (id, s)
            }
        };
        let (commit, func, manager, sl, hits) = match row.kind {
            RowKind::Hits => {
                let manager = row.manager.unwrap_or(self.manager);
                self.check_manager(manager, row.manager.is_some())?;
                let commit = row.commit.unwrap_or(self.commit);
                (commit, row.func, manager, row.line, row.hits)
            }
            RowKind::Votes => {
                let commit = row.commit.unwrap_or(self.commit);
                (commit, row.func, "", row.line, 0)
            }
            RowKind::WithoutLine => ("", "", "", 0, 0),
            RowKind::WithoutVersion => ("", "", "", 1, row.hits),
        };
        let key = RawKey {
            file,
            commit: self.strings.intern(commit.as_bytes()),
            func: self.strings.intern(func.as_bytes()),
            manager: self.strings.intern(manager.as_bytes()),
            sl,
        };
        self.tables[shard.index()].add(key, hits, row.rows);
        if row.kind != RowKind::Votes {
            self.count = self.count.saturating_add(row.rows);
        }
        self.added += 1;
        let strings = self.strings.approx_bytes();
        let grown = strings.saturating_sub(self.strings_checked) > self.settings.memory_budget / 8;
        if self.added.is_multiple_of(4096) || grown {
            self.strings_checked = strings;
            let held = strings + self.tables.iter().map(|t| t.approx_bytes()).sum::<usize>();
            if held > self.settings.memory_budget {
                self.flush()?;
                self.strings_checked = self.strings.approx_bytes();
            }
        }
        Ok(())
    }

    /// Checks that `manager` can be a record's own (not empty, not `*`, not a group's
    /// NAME, contract §6): every row of it is the manager's, so a name that cannot be
    /// refuses the input, not its rows one by one.
    fn check_manager(&mut self, manager: &str, own: bool) -> Result<(), Refused> {
        if self.checked.as_deref() == Some(manager) {
            return Ok(());
        }
        if let Err(why) = covmerge_proto::group::check_manager(manager.as_bytes(), &self.groups) {
            return Err(Refused::Manager {
                name: manager.to_string(),
                why: why.to_string(),
                own,
            });
        }
        self.checked = Some(manager.to_string());
        Ok(())
    }

    /// Writes every table's rows as chunks and forgets the strings.
    fn flush(&mut self) -> Result<(), SplitError> {
        let r = flush_tables(&mut self.tables, &mut self.strings, self.emit);
        self.strings = StringTable::new();
        self.last_file = None;
        r
    }

    fn finish(mut self) -> Result<(), SplitError> {
        self.flush()
    }
}
