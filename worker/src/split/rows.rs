//! The map phase for inputs whose format decodes its own rows (Go coverage: a
//! `GOCOVERDIR` directory or a text profile, see [`crate::input::formats`]): each
//! row, recorded under the input's manager and build commit unless it names its own,
//! is partitioned into the same per-shard spill chunks as CSV rows: everything
//! downstream is unchanged.

use covmerge_proto::{
    input::InputSpec,
    shard_hash::shard_of,
    wire::{BadRow, SplitOutcome},
    ShardId,
};

use super::{flush_tables, Emit, SplitError, SplitSettings};
use crate::input::formats::{LineRow, ReadError, RowSource, Stopped};
use crate::spill::{EntryTable, RawKey, StringTable};

/// Splits one input read by its format's [`RowSource`]. Rows counted: `rows_in` =
/// rows produced (a summed row counts the rows it sums) plus bad lines, `rows_bad` =
/// bad lines.
pub(crate) fn split_rows(
    name: &str,
    src: Box<dyn RowSource>,
    spec: &InputSpec,
    settings: SplitSettings,
    emit: &Emit<'_>,
) -> Result<SplitOutcome, SplitError> {
    let manager = if spec.manager.is_empty() {
        crate::input::go::default_manager(name)
    } else {
        spec.manager.clone()
    };
    // Every row of the input is the manager's: a name that cannot be a record's own
    // refuses the input, not its rows one by one.
    if let Err(why) = covmerge_proto::group::check_manager(manager.as_bytes(), &settings.groups) {
        return Err(SplitError::Read(ReadError::Input {
            input: name.to_string(),
            problem: format!(
                "its manager {manager:?} {why}; name it with --go-manager {name}=NAME"
            ),
        }));
    }
    let max_bad = settings.max_bad_rows;
    let mut rows = Rows::new(&manager, &spec.commit, settings, emit);
    // The sink's own error (a spill write), kept while the format stops reading.
    let mut failed = None;
    let read = src.read_rows(max_bad, &mut |row: &LineRow<'_>| {
        rows.add(row).map_err(|e| {
            failed = Some(e);
            Stopped
        })
    });
    let bad = match (read, failed) {
        (_, Some(e)) => return Err(e),
        (Err(e), None) => return Err(SplitError::Read(e)),
        (Ok(bad), None) => bad,
    };
    let mut outcome = SplitOutcome::default();
    outcome.counts.rows_in = rows.count + bad.count;
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
    rows.finish()?;
    Ok(outcome)
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
}

impl<'a> Rows<'a> {
    fn new(manager: &'a str, commit: &'a str, settings: SplitSettings, emit: &'a Emit<'a>) -> Self {
        let n = settings.shards.max(1);
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
        }
    }

    fn add(&mut self, row: &LineRow<'_>) -> Result<(), SplitError> {
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
        let key = RawKey {
            file,
            commit: self
                .strings
                .intern(row.commit.unwrap_or(self.commit).as_bytes()),
            func: self.strings.intern(row.func.as_bytes()),
            manager: self
                .strings
                .intern(row.manager.unwrap_or(self.manager).as_bytes()),
            sl: row.line,
        };
        self.tables[shard.index()].add(key, row.hits, row.rows);
        self.count += row.rows;
        self.added += 1;
        if self.added.is_multiple_of(4096) {
            let held = self.strings.approx_bytes()
                + self.tables.iter().map(|t| t.approx_bytes()).sum::<usize>();
            if held > self.settings.memory_budget {
                self.flush()?;
            }
        }
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
