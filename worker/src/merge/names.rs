//! The best function name of each line (contract §3.5): the most frequent non-empty
//! name, ties to the smallest; across name passes (see `passes.rs`), the best of the
//! passes' bests.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::acc::FileState;
use super::pass::Tables;
use crate::spill::StringTable;

/// Per line, the best function name so far (contract §3.5): its row count and name,
/// each distinct name held once and shared by its lines (20 names of 1 MB over 800
/// lines were 800 copies: 829 MB).
#[derive(Default)]
pub(super) struct BestNames {
    pub(super) lines: FxHashMap<u32, (u64, Arc<[u8]>)>,
    names: FxHashSet<Arc<[u8]>>,
}

impl BestNames {
    /// `name`, shared with the lines that hold it already.
    fn shared(&mut self, name: &[u8]) -> Arc<[u8]> {
        if let Some(a) = self.names.get(name) {
            return a.clone();
        }
        let a: Arc<[u8]> = Arc::from(name);
        self.names.insert(a.clone());
        a
    }

    /// Forgets the names no line holds any more, once they outnumber the lines.
    fn prune(&mut self) {
        if self.names.len() > 2 * self.lines.len() + 64 {
            self.names.retain(|a| Arc::strong_count(a) > 1);
        }
    }
}

/// Whether a name counted `n` times beats `best` (count, name) on its line (contract
/// §3.5): the most frequent non-empty name; ties go to the smallest name.
#[inline]
fn beats(n: u64, name: &[u8], best: (u64, &[u8])) -> bool {
    n > best.0 || (n == best.0 && name < best.1)
}

/// Per line of a file, its best function name (row count, string id) of those
/// counted: a slot's first name and the others.
pub(super) fn line_names(
    slot_lines: &[u32],
    name: &[(u32, u64)],
    other_names: &FxHashMap<(u32, u32), u64>,
    strings: &StringTable,
) -> FxHashMap<u32, (u64, u32)> {
    let mut best: FxHashMap<u32, (u64, u32)> = FxHashMap::default();
    let firsts = slot_lines
        .iter()
        .zip(name)
        .filter(|(_, (func, _))| *func != u32::MAX)
        .map(|(&line, &(func, n))| ((line, func), n));
    for ((line, func), n) in firsts.chain(other_names.iter().map(|(&k, &n)| (k, n))) {
        let e = best.entry(line).or_insert((n, func));
        if beats(n, strings.get(func), (e.0, strings.get(e.1))) {
            *e = (n, func);
        }
    }
    best
}

/// Adds the best names of one name pass (`lines`, by string id) to those of the
/// others: each pass counts other names, so the best of all is the best of the
/// passes' bests.
pub(super) fn add_names(
    best: &mut BestNames,
    lines: FxHashMap<u32, (u64, u32)>,
    strings: &StringTable,
) {
    for (line, (n, func)) in lines {
        let name = strings.get(func);
        let wins = match best.lines.get(&line) {
            Some(b) => beats(n, name, (b.0, &b.1)),
            None => true,
        };
        if wins {
            let shared = best.shared(name);
            best.lines.insert(line, (n, shared));
        }
    }
    best.prune();
}

impl Tables {
    /// Adds the best function names of each line of the pass's file (a pass over one
    /// path) to `best`.
    pub(super) fn best_names(&self, best: &mut BestNames) {
        for (_, state) in &self.files {
            if let FileState::Live(acc) = state {
                let lines = line_names(&acc.lines, &acc.name, &acc.other_names, &self.strings);
                add_names(best, lines, &self.strings);
            }
        }
    }
}
