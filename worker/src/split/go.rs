//! The map phase for Go coverage: an input (a `GOCOVERDIR` directory or a text
//! profile) is decoded into one row per source line (see [`crate::input::go`]), recorded
//! under the input's manager and build commit, and partitioned into the same per-shard
//! spill chunks as CSV rows: everything downstream is unchanged.

use std::io::BufRead;
use std::path::Path;

use covmerge_proto::{
    job::GoInput,
    shard_hash::shard_of,
    wire::{BadRow, SplitOutcome},
    ShardId,
};

use super::{flush_tables, Emit, SplitError, SplitSettings};
use crate::input::go::{covdata, text, ModuleMap};
use crate::spill::{EntryTable, RawKey, StringTable};

/// Where a Go input's bytes come from.
pub(crate) enum GoSource<'a> {
    /// A local `GOCOVERDIR` directory.
    Dir(&'a Path),
    /// A (decompressed) text profile.
    Text(Box<dyn BufRead + 'a>),
}

/// Splits one Go input. Rows counted: `rows_in` = lines produced plus malformed
/// profile lines, `rows_bad` = malformed profile lines.
pub(crate) fn split_go(
    name: &str,
    src: GoSource<'_>,
    go: &GoInput,
    settings: SplitSettings,
    emit: &Emit<'_>,
) -> Result<SplitOutcome, SplitError> {
    let modules = ModuleMap::new(&go.modules);
    let mut outcome = SplitOutcome::default();
    let blocks = match src {
        GoSource::Dir(dir) => covdata::read_dir(dir)?.0,
        GoSource::Text(r) => {
            let prof = text::read_profile(name, r, settings.max_bad_rows)?;
            outcome.counts.rows_in += prof.bad;
            outcome.counts.rows_bad += prof.bad;
            outcome.bad_rows = prof
                .bad_samples
                .iter()
                .map(|(line, problem)| BadRow {
                    input: name.to_string(),
                    line: *line,
                    problem: problem.clone(),
                })
                .collect();
            prof.blocks
        }
    };
    let manager = if go.manager.is_empty() {
        crate::input::go::default_manager(name)
    } else {
        go.manager.clone()
    };
    // Every row of the input is the manager's: a name that cannot be a record's own
    // refuses the input, not its rows one by one.
    if let Err(why) = covmerge_proto::group::check_manager(manager.as_bytes(), &settings.groups) {
        return Err(crate::input::go::GoError::Input {
            input: name.to_string(),
            problem: format!(
                "its manager {manager:?} {why}; name it with --go-manager {name}=NAME"
            ),
        }
        .into());
    }
    let mut rows = Rows::new(&manager, &go.commit, settings, emit);
    blocks.for_each_line(name, &modules, |file, func, line, hits| {
        rows.add(file, func, line, hits)
    })?;
    outcome.counts.rows_in += rows.count;
    rows.finish()?;
    Ok(outcome)
}

/// The rows of one Go input as they are swept from its blocks, partitioned into
/// per-shard tables that are flushed as chunks whenever they hold more than the
/// split's budget: a block's lines never exist all at once.
struct Rows<'a> {
    manager: &'a str,
    commit: &'a str,
    settings: SplitSettings,
    emit: &'a Emit<'a>,
    strings: StringTable,
    tables: Vec<EntryTable>,
    /// The last file's path, its id in `strings` and its shard.
    last_file: Option<(String, u32, ShardId)>,
    /// Rows added.
    count: u64,
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
        }
    }

    fn add(&mut self, file: &str, func: &str, line: u32, hits: u64) -> Result<(), SplitError> {
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
            commit: self.strings.intern(self.commit.as_bytes()),
            func: self.strings.intern(func.as_bytes()),
            manager: self.strings.intern(self.manager.as_bytes()),
            sl: line,
        };
        self.tables[shard.index()].add(key, hits, 1);
        self.count += 1;
        if self.count.is_multiple_of(4096) {
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
