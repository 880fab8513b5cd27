//! A builder's `lines` and `funcs` sums as flat entries: appended as rows come, summed
//! per key by sorting when their vector is full, their memory counted by capacity.
//!
//! A `funcs` key (version, line, function) comes once per manager of a file's run of
//! entries, the managers' lines one after the other: the entries of the version being
//! fed are found by line ([`ByLine`]), so that such a run adds one entry per line. A
//! `lines` key comes once per commit of a version at most (a day's keys mostly once):
//! finding it again cost a cache miss per row for a fifth of them, and the sort sums
//! them instead.

use crate::bucket::{buckets_of, sort_by_bucket};
use crate::sorted::{FuncAcc, LineAcc};

/// Bytes of a `lines` and of a `funcs` entry.
const LINE_BYTES: usize = std::mem::size_of::<LineAcc>();
const FUNC_BYTES: usize = std::mem::size_of::<FuncAcc>();

/// Entries a vector of entries grows by (when the limit has room), and shrinks to
/// beside its entries.
const MIN_GROW: usize = 1024;

/// Entries a full vector takes past the limit (a limit too small for any).
const FEW: usize = 4;

/// Lines of a version [`ByLine`] finds entries of at most (later lines' votes are
/// appended, and summed by the sort); fewer for a small limit (one for 256 bytes of
/// it), none below 64 KiB.
const BY_LINE: usize = 1 << 16;

/// A slot of [`ByLine`]: the function and index of the last `funcs` entry of a line,
/// valid while its stamp is the table's.
#[derive(Clone, Copy, Default)]
struct LineSlot {
    stamp: u32,
    func: u32,
    at: u32,
}

/// The last `funcs` entry of each line of the version being fed (`pv`), by line.
/// Changing version, or moving the entries, takes a new stamp: every slot is stale
/// at once.
#[derive(Default)]
struct ByLine {
    pv: u32,
    stamp: u32,
    slots: Vec<LineSlot>,
    /// Lines it holds at most (0: none).
    max: usize,
}

impl ByLine {
    fn forget(&mut self) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            // A stamp used before (after 2^32 changes): clear the slots instead.
            self.slots.fill(LineSlot::default());
            self.stamp = 1;
        }
    }

    /// The stamp and slot of `line` of version `pv` (a stale slot is free), or none
    /// past the lines it holds.
    fn slot(&mut self, pv: u32, line: u32) -> Option<(u32, &mut LineSlot)> {
        let i = line as usize;
        if i >= self.max {
            return None;
        }
        if pv != self.pv {
            self.pv = pv;
            self.forget();
        }
        if i >= self.slots.len() {
            let n = (i + 1).next_power_of_two().max(1024).min(self.max);
            self.slots.resize(n, LineSlot::default());
        }
        Some((self.stamp, &mut self.slots[i]))
    }

    fn bytes(&self) -> usize {
        std::mem::size_of::<LineSlot>() * self.slots.capacity()
    }
}

/// The entries, several of a key until [`Entries::compact`] sums them.
#[derive(Default)]
pub(crate) struct Entries {
    pub(crate) lines: Vec<LineAcc>,
    pub(crate) funcs: Vec<FuncAcc>,
    /// The `funcs` entries of the version being fed, by line.
    by_line: ByLine,
}

impl Entries {
    /// Entries of a builder of `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        let max = if limit < 64 << 10 {
            0
        } else {
            (limit / 256).min(BY_LINE)
        };
        Entries {
            by_line: ByLine {
                pv: u32::MAX,
                stamp: 1,
                max,
                ..ByLine::default()
            },
            ..Entries::default()
        }
    }

    /// Adds a `lines` entry.
    pub(crate) fn push_line(&mut self, e: LineAcc) {
        self.lines.push(e);
    }

    /// Adds a `funcs` entry (to its line's last entry when it is of the same version
    /// and function).
    pub(crate) fn push_func(&mut self, e: FuncAcc) {
        let at = self.funcs.len() as u32;
        let Some((stamp, slot)) = self.by_line.slot(e.pv, e.line) else {
            self.funcs.push(e);
            return;
        };
        if slot.stamp == stamp && slot.func == e.func {
            // The entry's own key checked too.
            if let Some(held) = self
                .funcs
                .get_mut(slot.at as usize)
                .filter(|h| (h.pv, h.line, h.func) == (e.pv, e.line, e.func))
            {
                held.rows = held.rows.saturating_add(e.rows);
                return;
            }
        }
        *slot = LineSlot {
            stamp,
            func: e.func,
            at,
        };
        self.funcs.push(e);
    }

    /// Whether a vector is full (the next push would grow it).
    pub(crate) fn full(&self) -> bool {
        self.lines.len() == self.lines.capacity() || self.funcs.len() == self.funcs.capacity()
    }

    /// Bytes held: the vectors by capacity, the table of lines.
    pub(crate) fn bytes(&self) -> usize {
        LINE_BYTES * self.lines.capacity()
            + FUNC_BYTES * self.funcs.capacity()
            + self.by_line.bytes()
    }

    /// Bytes of the entries themselves.
    pub(crate) fn used(&self) -> usize {
        LINE_BYTES * self.lines.len() + FUNC_BYTES * self.funcs.len()
    }

    /// Grows the full vectors within `room` bytes, each by half of it at most (so that
    /// neither starves the other); returns whether both have room.
    pub(crate) fn grow(&mut self, room: usize) -> bool {
        let mut half = room / 2;
        let lines = grow(&mut self.lines, &mut half, LINE_BYTES);
        half += room / 2;
        lines && grow(&mut self.funcs, &mut half, FUNC_BYTES)
    }

    /// Sums the entries of each key of a full vector into one (sorted by ids), and
    /// shrinks the vectors to their entries.
    pub(crate) fn compact(&mut self) {
        // Only a full vector: the other has room still.
        if self.lines.len() == self.lines.capacity() {
            let n = buckets_of(&self.lines, |e| e.pv);
            sort_by_bucket(&mut self.lines, n, |e| e.pv, |e| (e.manager, e.line));
            dedup_lines(&mut self.lines);
        }
        if self.funcs.len() == self.funcs.capacity() {
            let n = buckets_of(&self.funcs, |e| e.pv);
            sort_by_bucket(&mut self.funcs, n, |e| e.pv, |e| (e.line, e.func));
            dedup_funcs(&mut self.funcs);
        }
        self.lines.shrink_to(self.lines.len() + FEW);
        self.funcs.shrink_to(self.funcs.len() + FEW);
        self.forget_places();
    }

    /// Makes room for a few more entries in each vector, whatever the limit.
    pub(crate) fn room_for_one(&mut self) {
        if self.lines.len() == self.lines.capacity() {
            self.lines.reserve_exact(FEW);
        }
        if self.funcs.len() == self.funcs.capacity() {
            self.funcs.reserve_exact(FEW);
        }
    }

    /// Forgets where the entries of lines are (they moved).
    pub(crate) fn forget_places(&mut self) {
        self.by_line.forget();
    }
}

/// Grows `v` when full by its size (at least [`MIN_GROW`] entries of `size` bytes), or
/// what `room` (bytes) allows of it; returns whether it has room now.
fn grow<T>(v: &mut Vec<T>, room: &mut usize, size: usize) -> bool {
    if v.len() < v.capacity() {
        return true;
    }
    let add = v.capacity().max(MIN_GROW).min(*room / size);
    // Growing by little would copy the whole vector for it.
    if add == 0 || (add < MIN_GROW && v.capacity() >= MIN_GROW) {
        return false;
    }
    v.reserve_exact(add);
    *room -= add * size;
    true
}

/// Sums adjacent entries of one key into the first (the entries sorted by key).
pub(crate) fn dedup_lines(lines: &mut Vec<LineAcc>) {
    lines.dedup_by(|later, kept| {
        let same = (later.pv, later.manager, later.line) == (kept.pv, kept.manager, kept.line);
        if same {
            kept.hits = kept.hits.saturating_add(later.hits);
            kept.rows = kept.rows.saturating_add(later.rows);
        }
        same
    });
}

/// [`dedup_lines`] of `funcs` entries.
pub(crate) fn dedup_funcs(funcs: &mut Vec<FuncAcc>) {
    funcs.dedup_by(|later, kept| {
        let same = (later.pv, later.line, later.func) == (kept.pv, kept.line, kept.func);
        if same {
            kept.rows = kept.rows.saturating_add(later.rows);
        }
        same
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vote(pv: u32, line: u32, func: u32, rows: u64) -> FuncAcc {
        FuncAcc {
            pv,
            line,
            func,
            rows,
        }
    }

    fn sums(e: &Entries) -> Vec<(u32, u32, u32, u64)> {
        let mut v: Vec<_> = e
            .funcs
            .iter()
            .map(|f| (f.pv, f.line, f.func, f.rows))
            .collect();
        v.sort_unstable();
        let mut out: Vec<(u32, u32, u32, u64)> = Vec::new();
        for (pv, line, func, rows) in v {
            match out.last_mut() {
                Some(l) if (l.0, l.1, l.2) == (pv, line, func) => l.3 += rows,
                _ => out.push((pv, line, func, rows)),
            }
        }
        out
    }

    /// Votes of one version's lines, manager after manager, add one entry per line;
    /// another function on a line, another version, a line past the table and entries
    /// moved each add entries of their own, and the sums stay exact.
    #[test]
    fn votes_of_a_versions_managers_sum_per_line() {
        let mut e = Entries::new(1 << 20);
        for _manager in 0..4 {
            for line in 1..=100 {
                e.push_func(vote(7, line, 1, 2));
            }
        }
        assert_eq!(e.funcs.len(), 100);
        assert!(e.funcs.iter().all(|f| f.rows == 8));
        // Another function on line 5: its own entry, and line 5's first entry is not
        // found again after it (its sum is still exact).
        e.push_func(vote(7, 5, 2, 1));
        e.push_func(vote(7, 5, 1, 1));
        assert_eq!(e.funcs.len(), 102);
        // Another version, then this one again: new entries (the sort sums them).
        e.push_func(vote(8, 1, 1, 1));
        e.push_func(vote(7, 1, 1, 1));
        assert_eq!(e.funcs.len(), 104);
        // Lines past what the table holds (4,096 at this limit): appended.
        let past = (1 << 20) / 256;
        e.push_func(vote(7, past as u32, 1, 1));
        e.push_func(vote(7, past as u32, 1, 1));
        assert_eq!(e.funcs.len(), 106);
        // Entries moved: nothing found where it was.
        e.forget_places();
        e.push_func(vote(7, 2, 1, 1));
        assert_eq!(e.funcs.len(), 107);
        let s = sums(&e);
        assert!(s.contains(&(7, 1, 1, 9)), "{s:?}");
        assert!(s.contains(&(7, 2, 1, 9)), "{s:?}");
        assert!(s.contains(&(7, 5, 1, 9)), "{s:?}");
        assert!(s.contains(&(7, 5, 2, 1)), "{s:?}");
        assert!(s.contains(&(8, 1, 1, 1)), "{s:?}");
        assert!(s.contains(&(7, past as u32, 1, 2)), "{s:?}");
        // A limit below 64 KiB: no table, every vote appended.
        let mut small = Entries::new(1 << 15);
        small.push_func(vote(1, 1, 1, 1));
        small.push_func(vote(1, 1, 1, 1));
        assert_eq!(small.funcs.len(), 2);
        assert_eq!(small.bytes(), FUNC_BYTES * small.funcs.capacity());
    }

    /// A limit whose table holds fewer lines than the 1,024 it grows by at least
    /// (128 KiB: 512 lines) panicked on its first vote (`clamp` with min > max).
    #[test]
    fn a_limit_under_256_kib_panicked_growing_the_table_of_lines() {
        let mut e = Entries::new(128 << 10);
        e.push_func(vote(1, 511, 1, 1));
        e.push_func(vote(1, 511, 1, 1));
        e.push_func(vote(1, 512, 1, 1));
        assert_eq!(e.funcs.len(), 2);
        assert_eq!(e.by_line.slots.len(), 512);
    }

    /// The stamp wraps after 2^32 changes of version: the slots are cleared, so that a
    /// slot of a stamp used before is not taken for a current one.
    #[test]
    fn a_stamp_that_wraps_clears_the_slots() {
        let mut e = Entries::new(1 << 20);
        e.push_func(vote(1, 3, 1, 1));
        // A slot of stamp 1, as if from 2^32 changes ago.
        e.by_line.slots[5] = LineSlot {
            stamp: 1,
            func: 1,
            at: 0,
        };
        e.by_line.stamp = u32::MAX;
        e.push_func(vote(2, 3, 1, 1)); // the stamp wraps to 1: slots cleared
        assert_eq!(e.by_line.stamp, 1);
        assert_eq!(e.by_line.slots[5].stamp, 0);
        assert_eq!((e.by_line.slots[3].stamp, e.by_line.slots[3].at), (1, 1));
        assert_eq!(e.funcs.len(), 2);
    }
}
