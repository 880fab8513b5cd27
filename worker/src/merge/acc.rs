//! What one file of a shard accumulates ([`FileAcc`]), and what it holds.

use rustc_hash::FxHashMap;

use super::sums::ManagerSums;

/// Base lines the line-to-slot vector may span per slot, and at least.
const SLOT_SPAN: usize = 8;
const MIN_SLOT_SPAN: usize = 1 << 16;

/// Where a file of the shard stands: a live one has its sums; one outside
/// `--file-path-prefix` or absent at the base costs a tag, not an accumulator (a
/// shard of 3 million distinct paths held one for each).
pub(super) enum FileState {
    /// Outside the range of paths of its pass (see `passes.rs`): merged in another.
    Skipped,
    OutOfScope,
    Deleted,
    Live(Box<FileAcc>),
}

/// What one file of the shard accumulates: projected sums only, never raw rows, so a
/// shard's memory is bounded by its output (lines × managers), however many rows or
/// builds its files have.
///
/// Each projected line gets a *slot* the first time it is hit; the sums are vectors
/// indexed by slot, so an entry costs one lookup in the small line-to-slot table (the
/// file's instrumented lines) and then plain indexing, where a table keyed by
/// (manager, line) was hit at random for every entry. The per-manager sums take
/// memory in proportion to the (manager, line) pairs hit ([`ManagerSums`]), not lines
/// × managers.
pub(super) struct FileAcc {
    /// Per base line: its slot (`u32::MAX`: none yet). A vector, not a hash map: the
    /// lines are those of the base version, and a lookup per entry was a tenth of the
    /// merge (BENCHMARKS.md). It spans at most [`SLOT_SPAN`] lines per slot (and
    /// [`MIN_SLOT_SPAN`]); lines past that go to `far`: one row at the end of each of
    /// 200 files of a million lines held 4 bytes per line of them all.
    pub(super) slot_of: Vec<u32>,
    pub(super) far: FxHashMap<u32, u32>,
    /// Per slot: its base line, the `*` sum, and the first function name seen there
    /// with its row count (`u32::MAX`: none yet).
    pub(super) lines: Vec<u32>,
    pub(super) star: Vec<u64>,
    pub(super) name: Vec<(u32, u64)>,
    /// (line, function) row counts of the names after a slot's first.
    pub(super) other_names: FxHashMap<(u32, u32), u64>,
    /// Per manager (by the shard's manager index) and slot: its sum.
    pub(super) per_mgr: ManagerSums,
    /// What [`FileAcc::approx_bytes`] was when last counted into its pass's total.
    pub(super) counted: usize,
    /// Lines of the file's base version (contract §3), reported with the part so that
    /// the publish gate can check every record line against it.
    pub(super) base_lines: u32,
}

impl FileAcc {
    pub(super) fn new() -> Self {
        FileAcc {
            slot_of: Vec::new(),
            far: FxHashMap::default(),
            lines: Vec::new(),
            star: Vec::new(),
            name: Vec::new(),
            other_names: FxHashMap::default(),
            per_mgr: ManagerSums::default(),
            counted: 0,
            base_lines: 0,
        }
    }

    /// An estimate of the memory held (the accumulator, its vectors and maps, with a
    /// hash map's control byte per bucket), from capacities: constant time.
    pub(super) fn approx_bytes(&self) -> usize {
        std::mem::size_of::<FileAcc>()
            + self.slot_of.capacity() * 4
            + self.far.capacity() * 9
            + self.lines.capacity() * 4
            + self.star.capacity() * 8
            + self.name.capacity() * 16
            + self.other_names.capacity() * 17
            + self.per_mgr.approx_bytes()
    }

    /// Adds `hits` of `rows` rows of manager `mgr` (the shard's index) and function
    /// `func` (`None`: the empty name) to base line `line`.
    #[inline]
    pub(super) fn add(&mut self, line: u32, mgr: usize, func: Option<u32>, hits: u64, rows: u64) {
        let slot = self.slot(line);
        self.star[slot] = self.star[slot].saturating_add(hits);
        self.per_mgr.add(mgr as u32, slot as u32, hits);
        if let Some(func) = func {
            self.vote(slot, line, func, rows);
        }
    }

    /// Adds `rows` rows naming function `func` to base line `line`, and nothing else
    /// (a partial's votes: their hits and managers come in other entries).
    #[inline]
    pub(super) fn add_votes(&mut self, line: u32, func: u32, rows: u64) {
        let slot = self.slot(line);
        self.vote(slot, line, func, rows);
    }

    /// The slot of base line `line`, given it the first time.
    #[inline]
    fn slot(&mut self, line: u32) -> usize {
        let at = line as usize;
        // Once a line is in `far` the vector never grows again: a line is in one of
        // the two, never both (it would get a second slot).
        if at >= self.slot_of.len()
            && self.far.is_empty()
            && at < (SLOT_SPAN * (self.lines.len() + 1)).max(MIN_SLOT_SPAN)
        {
            self.slot_of.resize(at + 1, u32::MAX);
        }
        let next = self.lines.len() as u32;
        let entry = match self.slot_of.get_mut(at) {
            Some(s) => s,
            None => self.far.entry(line).or_insert(u32::MAX),
        };
        let mut slot = *entry;
        if slot == u32::MAX {
            slot = next;
            *entry = slot;
            self.lines.push(line);
            self.star.push(0);
            self.name.push((u32::MAX, 0));
        }
        slot as usize
    }

    /// Counts `rows` rows naming `func` on the line of `slot` (`line`).
    #[inline]
    fn vote(&mut self, slot: usize, line: u32, func: u32, rows: u64) {
        let first = &mut self.name[slot];
        if first.0 == func {
            first.1 = first.1.saturating_add(rows);
        } else if first.0 == u32::MAX {
            *first = (func, rows);
        } else {
            let n = self.other_names.entry((line, func)).or_insert(0);
            *n = n.saturating_add(rows);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines past the vector's span go to a map; a line never gets two slots,
    /// whichever order the lines come in.
    #[test]
    fn a_line_has_one_slot_whether_in_the_vector_or_far() {
        for far_first in [true, false] {
            let mut acc = FileAcc::new();
            let hit = |acc: &mut FileAcc, l: u32| acc.add(l, 0, None, 1, 1);
            if far_first {
                hit(&mut acc, 5_000_000);
            }
            for l in 1..70_000u32 {
                hit(&mut acc, l);
            }
            hit(&mut acc, 5_000_000);
            for l in (1..70_000u32).rev() {
                hit(&mut acc, l);
            }
            if far_first {
                assert!(acc.slot_of.is_empty(), "no vector once a line is far");
            } else {
                assert!(acc.slot_of.len() >= 70_000 && acc.far.len() == 1);
            }
            let mut lines = acc.lines.clone();
            lines.sort_unstable();
            lines.dedup();
            assert_eq!(lines.len(), acc.lines.len(), "a line with two slots");
            assert_eq!(acc.lines.len(), 70_000);
            let far_hits = if far_first { 2 } else { 1 };
            for (s, &l) in acc.lines.iter().enumerate() {
                let want = if l == 5_000_000 { far_hits } else { 2 };
                assert_eq!(acc.star[s], want, "line {l}");
            }
        }
    }
}
