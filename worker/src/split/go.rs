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
use crate::input::go::{covdata, text, GoLine, ModuleMap};
use crate::spill::{EntryTable, RawKey, StringTable};

/// Where a Go input's bytes come from.
pub enum GoSource<'a> {
    /// A local `GOCOVERDIR` directory.
    Dir(&'a Path),
    /// A (decompressed) text profile.
    Text(Box<dyn BufRead + 'a>),
}

/// Splits one Go input. Rows counted: `rows_in` = lines produced plus malformed
/// profile lines, `rows_bad` = malformed profile lines.
pub fn split_go(
    name: &str,
    src: GoSource<'_>,
    go: &GoInput,
    settings: SplitSettings,
    emit: &Emit<'_>,
) -> Result<SplitOutcome, SplitError> {
    let modules = ModuleMap::new(&go.modules);
    let mut outcome = SplitOutcome::default();
    let lines = match src {
        GoSource::Dir(dir) => {
            let (blocks, _) = covdata::read_dir(dir)?;
            blocks.lines(name, &modules)?
        }
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
            prof.blocks.lines(name, &modules)?
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
    outcome.counts.rows_in += lines.len() as u64;
    emit_lines(&lines, &manager, &go.commit, &settings, emit)?;
    Ok(outcome)
}

/// Partitions rows into per-shard chunks, flushing when over the memory budget.
fn emit_lines(
    lines: &[GoLine],
    manager: &str,
    commit: &str,
    settings: &SplitSettings,
    emit: &Emit<'_>,
) -> Result<(), SplitError> {
    let n = settings.shards.max(1);
    let mut strings = StringTable::new();
    let mut tables: Vec<EntryTable> = (0..n).map(|_| EntryTable::new()).collect();
    let flush = |tables: &mut Vec<EntryTable>, strings: &mut StringTable| {
        let r = flush_tables(tables, strings, emit);
        *strings = StringTable::new();
        r
    };
    let mut last_file: Option<(&str, u32, ShardId)> = None;
    for (i, l) in lines.iter().enumerate() {
        let (file, shard) = match last_file {
            Some((f, id, s)) if f == l.file => (id, s),
            _ => {
                let id = strings.intern(l.file.as_bytes());
                let s = shard_of(l.file.as_bytes(), n);
                last_file = Some((&l.file, id, s));
                (id, s)
            }
        };
        let key = RawKey {
            file,
            commit: strings.intern(commit.as_bytes()),
            func: strings.intern(l.func.as_bytes()),
            manager: strings.intern(manager.as_bytes()),
            sl: l.line,
        };
        tables[shard.index()].add(key, l.hits, 1);
        if i % 4096 == 4095 {
            let held =
                strings.approx_bytes() + tables.iter().map(|t| t.approx_bytes()).sum::<usize>();
            if held > settings.memory_budget {
                flush(&mut tables, &mut strings)?;
                last_file = None;
            }
        }
    }
    flush(&mut tables, &mut strings)
}
