//! One file's per-manager sums, in memory proportional to the (manager, line) pairs
//! that were hit, whatever the file's length and the number of managers.
//!
//! A manager that hits many lines of the file close together gets a *dense* vector
//! indexed by slot (the fast path: plain indexing per entry). Every other hit goes to a
//! *log* of `(manager, slot, sum)` triples that is sorted and combined whenever it has
//! doubled, so it holds at most about twice the distinct pairs. A dense vector never
//! spans more than [`SPAN`] slots per pair it holds: a manager that hit one line at the
//! end of a 100,000-line file costs one triple, where a vector per manager spanning
//! every slot up to the one it hit took 4.7 GB for 6,000 managers.

use rustc_hash::FxHashMap;

/// A slot a manager did not hit in a dense vector. Sums below it are exact: a
/// manager's sum never exceeds its line's `*` sum, which fails the merge past
/// `i64::MAX`.
const ABSENT: u64 = u64::MAX;

/// Pairs a manager needs in the log before it may get a dense vector.
const MIN_DENSE: usize = 16;
/// A dense vector spans at most this many slots per pair it holds.
const SPAN: usize = 4;
/// The log is compacted when it has grown by its compacted length plus this.
const LOG_SLACK: usize = 4096;

fn add_sum(sum: u64, hits: u64) -> u64 {
    if sum == ABSENT {
        hits.min(ABSENT - 1)
    } else {
        sum.saturating_add(hits).min(ABSENT - 1)
    }
}

struct Dense {
    /// The shard's index of the manager.
    mgr: u32,
    /// Slots of `sums` that are not [`ABSENT`].
    held: usize,
    sums: Vec<u64>,
}

impl Dense {
    /// Adds `hits` at `slot` if the vector may span it; `false` if not.
    #[inline]
    fn add(&mut self, slot: u32, hits: u64) -> bool {
        let s = slot as usize;
        if s >= self.sums.len() {
            if s >= SPAN * (self.held + 1) {
                return false;
            }
            self.sums.resize(s + 1, ABSENT);
        }
        let m = &mut self.sums[s];
        if *m == ABSENT {
            self.held += 1;
        }
        *m = add_sum(*m, hits);
        true
    }
}

/// The per-manager sums of one file (managers by the shard's index, lines by slot).
#[derive(Default)]
pub(super) struct ManagerSums {
    /// Per dense manager (by the shard's index): 1 + its index in `dense`. A map, not
    /// a vector by manager index: a file with one dense manager among a shard's
    /// 100,000 would pay for all of them.
    dense_of: FxHashMap<u32, u32>,
    dense: Vec<Dense>,
    /// `(manager, slot, sum)` of what no dense vector holds; sorted by (manager,
    /// slot) and combined up to `compacted`.
    log: Vec<(u32, u32, u64)>,
    compacted: usize,
    /// Bytes of the dense vectors' sums (their capacities), kept as they grow.
    dense_bytes: usize,
}

impl ManagerSums {
    /// Adds `hits` of manager `mgr` to slot `slot`.
    #[inline]
    pub(super) fn add(&mut self, mgr: u32, slot: u32, hits: u64) {
        if let Some(&d) = self.dense_of.get(&mgr) {
            let dense = &mut self.dense[d as usize - 1];
            let held = dense.sums.capacity();
            if dense.add(slot, hits) {
                self.dense_bytes += (dense.sums.capacity() - held) * 8;
                return;
            }
        }
        self.log.push((mgr, slot, hits));
        if self.log.len() >= 2 * self.compacted + LOG_SLACK {
            self.compact();
        }
    }

    /// Sorts and combines the log, moves into dense vectors what they may hold, and
    /// gives a dense vector to each manager with enough pairs in a short span.
    fn compact(&mut self) {
        let log = &mut self.log;
        log.sort_unstable_by_key(|&(m, s, _)| (m, s));
        log.dedup_by(|e, kept| {
            let same = (e.0, e.1) == (kept.0, kept.1);
            if same {
                kept.2 = add_sum(kept.2, e.2);
            }
            same
        });
        let mut keep = 0;
        let mut i = 0;
        while i < log.len() {
            let mgr = log[i].0;
            let end = i + log[i..].iter().take_while(|e| e.0 == mgr).count();
            let d = self.dense_of.get(&mgr).copied().unwrap_or(0);
            let last = log[end - 1].1 as usize;
            if d == 0 && end - i >= MIN_DENSE && last < SPAN * (end - i) {
                let mut sums = vec![ABSENT; last + 1];
                for &(_, s, h) in &log[i..end] {
                    sums[s as usize] = h;
                }
                self.dense.push(Dense {
                    mgr,
                    held: end - i,
                    sums,
                });
                self.dense_of.insert(mgr, self.dense.len() as u32);
            } else {
                for j in i..end {
                    let e = log[j];
                    if d == 0 || !self.dense[d as usize - 1].add(e.1, e.2) {
                        log[keep] = e;
                        keep += 1;
                    }
                }
            }
            i = end;
        }
        log.truncate(keep);
        self.compacted = keep;
        self.dense_bytes = self.dense.iter().map(|d| d.sums.capacity() * 8).sum();
    }

    /// An estimate of the memory held, from capacities (constant time).
    pub(super) fn approx_bytes(&self) -> usize {
        self.dense_bytes
            + self.dense.capacity() * std::mem::size_of::<Dense>()
            + self.dense_of.capacity() * 9
            + self.log.capacity() * std::mem::size_of::<(u32, u32, u64)>()
    }

    /// The managers (shard indexes) with at least one pair, and a reader of each one's
    /// pairs.
    pub(super) fn finish(mut self) -> FinishedSums {
        self.compact();
        let mut runs: Vec<(u32, usize, usize)> = Vec::new();
        let mut i = 0;
        while i < self.log.len() {
            let mgr = self.log[i].0;
            let end = i + self.log[i..].iter().take_while(|e| e.0 == mgr).count();
            runs.push((mgr, i, end));
            i = end;
        }
        let mut managers: Vec<u32> = runs
            .iter()
            .map(|r| r.0)
            .chain(self.dense.iter().map(|d| d.mgr))
            .collect();
        managers.sort_unstable();
        managers.dedup();
        FinishedSums {
            sums: self,
            runs,
            managers,
        }
    }
}

/// [`ManagerSums`] after the last hit: read one manager at a time.
pub(super) struct FinishedSums {
    sums: ManagerSums,
    /// Per manager in the log: its range of the log.
    runs: Vec<(u32, usize, usize)>,
    managers: Vec<u32>,
}

impl FinishedSums {
    /// The managers with at least one pair, by shard index.
    pub(super) fn managers(&self) -> &[u32] {
        &self.managers
    }

    /// Manager `mgr`'s `(line, sum)` pairs in line order, into `out`. `order` is the
    /// file's slots in line order and `slot_lines` each slot's line.
    pub(super) fn pairs(
        &self,
        mgr: u32,
        order: &[u32],
        slot_lines: &[u32],
        out: &mut Vec<(u32, u64)>,
    ) {
        out.clear();
        let d = self.sums.dense_of.get(&mgr).copied().unwrap_or(0);
        let mut sorted = true;
        if d != 0 {
            let sums = &self.sums.dense[d as usize - 1].sums;
            if 2 * sums.len() >= order.len() {
                // Spanning much of the file: walk the slots in line order.
                for &s in order {
                    if let Some(&h) = sums.get(s as usize).filter(|&&h| h != ABSENT) {
                        out.push((slot_lines[s as usize], h));
                    }
                }
            } else {
                for (s, &h) in sums.iter().enumerate() {
                    if h != ABSENT {
                        out.push((slot_lines[s], h));
                    }
                }
                sorted = false;
            }
        }
        if let Ok(r) = self.runs.binary_search_by_key(&mgr, |r| r.0) {
            let (_, start, end) = self.runs[r];
            sorted &= out.is_empty() && end - start <= 1;
            out.extend(
                self.sums.log[start..end]
                    .iter()
                    .map(|&(_, s, h)| (slot_lines[s as usize], h)),
            );
        }
        if !sorted {
            out.sort_unstable_by_key(|p| p.0);
            // A slot may be in both the dense vector and the log (logged before the
            // vector could span it).
            out.dedup_by(|p, kept| {
                let same = p.0 == kept.0;
                if same {
                    kept.1 = add_sum(kept.1, p.1);
                }
                same
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A small deterministic generator (no dependency for a test).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    /// Adds `hits`, checks every manager's pairs against a plain map.
    fn check(hits: &[(u32, u32, u64)], slots: u32) {
        let mut sums = ManagerSums::default();
        let mut want: BTreeMap<u32, BTreeMap<u32, u64>> = BTreeMap::new();
        for &(m, s, h) in hits {
            sums.add(m, s, h);
            let e = want.entry(m).or_default().entry(s).or_insert(0);
            *e = e.saturating_add(h).min(ABSENT - 1);
        }
        // Slots in reverse line order: slot s is line `slots - s`.
        let slot_lines: Vec<u32> = (0..slots).map(|s| slots - s).collect();
        let order: Vec<u32> = (0..slots).rev().collect();
        let f = sums.finish();
        assert_eq!(f.managers(), want.keys().copied().collect::<Vec<_>>());
        let mut got = Vec::new();
        for (&m, w) in &want {
            f.pairs(m, &order, &slot_lines, &mut got);
            let mut w: Vec<(u32, u64)> = w.iter().map(|(&s, &h)| (slots - s, h)).collect();
            w.sort_unstable();
            assert_eq!(got, w, "manager {m}");
        }
    }

    #[test]
    fn sums_are_exact_whether_dense_or_logged() {
        let mut r = Lcg(7);
        for (managers, slots, n) in [(3, 50, 20_000), (2_000, 400, 30_000), (40, 20_000, 60_000)] {
            let hits: Vec<(u32, u32, u64)> = (0..n)
                .map(|_| (r.next(managers) as u32, r.next(slots) as u32, r.next(1000)))
                .collect();
            check(&hits, slots as u32);
        }
        // Dense first, then far slots that the vector may not span, then near ones.
        let mut hits: Vec<(u32, u32, u64)> = Vec::new();
        for round in 0..3u64 {
            for s in 0..10_000u32 {
                hits.push((0, s % 40, round + 1));
                hits.push((1, 9_999 - (s % 7), 1));
            }
            hits.push((0, 9_999, 5));
        }
        check(&hits, 10_000);
        // Saturation at the largest sum.
        check(&[(0, 1, u64::MAX - 3), (0, 1, 10), (0, 1, 10)], 2);
    }

    #[test]
    fn managers_on_the_last_line_of_a_long_file_hold_an_entry_each() {
        let slots = 100_000u32;
        let mut sums = ManagerSums::default();
        for s in 0..slots {
            sums.add(0, s, 1);
        }
        for m in 1..6_001u32 {
            sums.add(m, slots - 1, 1);
        }
        let dense_slots: usize = sums.dense.iter().map(|d| d.sums.len()).sum();
        assert!(dense_slots <= slots as usize, "{dense_slots} dense slots");
        // What the merge counts against its tables' share: every slot and triple held.
        let held = dense_slots * 8 + sums.log.len() * 16;
        assert!(
            (held..2 * held + (1 << 16)).contains(&sums.approx_bytes()),
            "{} bytes counted for {held} held",
            sums.approx_bytes()
        );
        assert!(
            sums.log.len() <= 2 * 6_000 + LOG_SLACK,
            "{}",
            sums.log.len()
        );
        let f = sums.finish();
        assert_eq!(f.managers().len(), 6_001);
        check(
            &(0..slots)
                .map(|s| (0, s, 1))
                .chain((1..600).map(|m| (m, slots - 1, 1)))
                .collect::<Vec<_>>(),
            slots,
        );
    }
}
