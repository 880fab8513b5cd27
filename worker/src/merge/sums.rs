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
//!
//! A file merged alone (its pairs outgrew the tables' share) gets a limit
//! ([`ManagerSums::spill_past`]): past it, what is held is written to a temporary
//! file as a *run* sorted by manager and slot (`runs.rs`), and memory starts
//! again empty. Each manager's pairs are then summed over the runs when it is written,
//! in memory proportional to the file's lines, not to its lines × managers (500,000
//! lines × 40 managers held 368 MB).

use rustc_hash::FxHashMap;

use super::hits::{add_sum, ABSENT};
use super::runs::{Rec, RunFile, RunReader};

/// Pairs a manager needs in the log before it may get a dense vector.
const MIN_DENSE: usize = 16;
/// A dense vector spans at most this many slots per pair it holds.
const SPAN: usize = 4;
/// The log is compacted when it has grown by its compacted length plus this.
const LOG_SLACK: usize = 4096;

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
    /// The log's length at which it is compacted next.
    next_compact: usize,
    /// Bytes held past which what is held is spilled (0: never).
    limit: usize,
    /// Whether what is held is over `limit`: to be spilled ([`ManagerSums::spill`]).
    full: bool,
    /// The runs spilled so far.
    spilled: Option<Box<RunFile>>,
}

impl ManagerSums {
    /// Adds `hits` of manager `mgr` to slot `slot`.
    #[inline]
    pub(super) fn add(&mut self, mgr: u32, slot: u32, hits: u64) {
        if let Some(&d) = self.dense_of.get(&mgr) {
            let dense = &mut self.dense[d as usize - 1];
            let held = dense.sums.capacity();
            if dense.add(slot, hits) {
                let grown = dense.sums.capacity() - held;
                if grown != 0 {
                    self.dense_bytes += grown * 8;
                    self.full |= self.limit != 0 && self.approx_bytes() > self.limit;
                }
                return;
            }
        }
        self.log.push((mgr, slot, hits));
        if self.log.len() >= self.next_compact.max(LOG_SLACK) {
            self.compact();
            self.full |= self.limit != 0 && self.approx_bytes() > self.limit;
        }
    }

    /// Whether what is held went over the limit of [`ManagerSums::spill_past`]: the
    /// caller spills it ([`ManagerSums::spill`]) and reports a failure to write.
    #[inline]
    pub(super) fn is_full(&self) -> bool {
        self.full
    }

    /// Spills what is held once it takes more than `limit` bytes (see the module's
    /// documentation).
    pub(super) fn spill_past(&mut self, limit: usize) {
        self.limit = limit.max(1);
        self.set_next_compact();
    }

    /// Runs spilled so far, merged or not.
    #[cfg(test)]
    pub(super) fn runs(&self) -> usize {
        self.spilled.as_ref().map_or(0, |s| s.runs())
    }

    fn set_next_compact(&mut self) {
        let mut next = 2 * self.compacted + LOG_SLACK;
        if self.limit != 0 {
            // The log may not take the limit by itself before it is compacted.
            let room = self.limit.saturating_sub(self.dense_bytes) / 16;
            next = next.min(self.compacted + room.max(LOG_SLACK));
        }
        self.next_compact = next;
    }

    /// Writes every pair held as a run of the temporary file, and holds nothing.
    pub(super) fn spill(&mut self) -> std::io::Result<()> {
        self.compact();
        let file = match &mut self.spilled {
            Some(f) => f,
            None => self.spilled.insert(Box::new(RunFile::new()?)),
        };
        let mut managers: Vec<u32> = self.dense.iter().map(|d| d.mgr).collect();
        managers.extend(self.log.iter().map(|e| e.0));
        managers.sort_unstable();
        managers.dedup();
        // The log is sorted by manager after `compact`: each manager's entries follow
        // the previous one's.
        let (log, dense, dense_of) = (&self.log, &self.dense, &self.dense_of);
        let mut at = 0;
        let recs = managers.iter().flat_map(|&mgr| {
            let mut pairs: Vec<(u32, u64)> = Vec::new();
            if let Some(&d) = dense_of.get(&mgr) {
                let sums = &dense[d as usize - 1].sums;
                pairs.extend(
                    sums.iter()
                        .enumerate()
                        .filter(|(_, &h)| h != ABSENT)
                        .map(|(s, &h)| (s as u32, h)),
                );
            }
            let end = at + log[at..].iter().take_while(|e| e.0 == mgr).count();
            if end > at {
                pairs.extend(log[at..end].iter().map(|e| (e.1, e.2)));
                combine(&mut pairs);
            }
            at = end;
            pairs
                .into_iter()
                .map(move |(slot, sum)| Rec { mgr, slot, sum })
        });
        file.write_run(recs)?;
        self.dense = Vec::new();
        self.dense_of = FxHashMap::default();
        self.log = Vec::new();
        self.compacted = 0;
        self.dense_bytes = 0;
        self.full = false;
        self.set_next_compact();
        Ok(())
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
        // Repeated pairs combined: the room they took is given back, so that what is
        // held is counted, not what was.
        if log.capacity() > 2 * keep + LOG_SLACK {
            log.shrink_to(2 * keep + LOG_SLACK);
        }
        self.compacted = keep;
        self.dense_bytes = self.dense.iter().map(|d| d.sums.capacity() * 8).sum();
        self.set_next_compact();
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
    pub(super) fn finish(mut self) -> std::io::Result<FinishedSums> {
        if self.spilled.is_some() {
            // All of it in the runs, merged into one.
            self.spill()?;
            let reader = self.spilled.take().expect("spilled").finish()?;
            let managers = reader.managers().collect();
            return Ok(FinishedSums {
                sums: ManagerSums::default(),
                runs: Vec::new(),
                managers,
                spilled: Some(reader),
            });
        }
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
        Ok(FinishedSums {
            sums: self,
            runs,
            managers,
            spilled: None,
        })
    }
}

/// [`ManagerSums`] after the last hit: read one manager at a time.
pub(super) struct FinishedSums {
    sums: ManagerSums,
    /// Per manager in the log: its range of the log.
    runs: Vec<(u32, usize, usize)>,
    managers: Vec<u32>,
    /// What was spilled (see [`ManagerSums::spill_past`]): all of the sums, then.
    spilled: Option<RunReader>,
}

impl FinishedSums {
    /// Records of the spilled run, when spilled.
    #[cfg(test)]
    pub(super) fn spilled_records(&self) -> Option<u64> {
        self.spilled.as_ref().map(|s| s.records())
    }

    /// Runs spilled before the last hit.
    pub(super) fn runs_spilled(&self) -> usize {
        self.spilled.as_ref().map_or(0, |s| s.runs())
    }

    /// The managers with at least one pair, by shard index.
    pub(super) fn managers(&self) -> &[u32] {
        &self.managers
    }

    /// Manager `mgr`'s `(line, sum)` pairs in line order, into `out`. `order` is the
    /// file's slots in line order and `slot_lines` each slot's line.
    pub(super) fn pairs(
        &mut self,
        mgr: u32,
        order: &[u32],
        slot_lines: &[u32],
        out: &mut Vec<(u32, u64)>,
    ) -> std::io::Result<()> {
        out.clear();
        if let Some(spilled) = &mut self.spilled {
            return pairs_spilled(spilled, mgr, order, slot_lines, out);
        }
        self.pairs_held(mgr, order, slot_lines, out);
        Ok(())
    }

    /// [`FinishedSums::pairs`] of what is held in memory.
    fn pairs_held(&self, mgr: u32, order: &[u32], slot_lines: &[u32], out: &mut Vec<(u32, u64)>) {
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
            // A slot may be in both the dense vector and the log (logged before the
            // vector could span it).
            combine(out);
        }
    }
}

/// Sorts `pairs` by their first value and sums those that share it.
fn combine(pairs: &mut Vec<(u32, u64)>) {
    pairs.sort_unstable_by_key(|p| p.0);
    pairs.dedup_by(|p, kept| {
        let same = p.0 == kept.0;
        if same {
            kept.1 = add_sum(kept.1, p.1);
        }
        same
    });
}

/// [`FinishedSums::pairs`] of spilled sums (one run, a slot once per manager): by
/// slot, in a vector over the file's slots when they are many, else sorted by line.
fn pairs_spilled(
    runs: &mut RunReader,
    mgr: u32,
    order: &[u32],
    slot_lines: &[u32],
    out: &mut Vec<(u32, u64)>,
) -> std::io::Result<()> {
    let mut got: Vec<(u32, u64)> = Vec::new();
    runs.each(mgr, |s, h| got.push((s, h)))?;
    if got.len().saturating_mul(4) < order.len() {
        out.extend(got.iter().map(|&(s, h)| (slot_lines[s as usize], h)));
        out.sort_unstable_by_key(|p| p.0);
        return Ok(());
    }
    let mut by_slot = vec![ABSENT; slot_lines.len()];
    for (s, h) in got {
        let m = &mut by_slot[s as usize];
        *m = add_sum(*m, h);
    }
    out.extend(
        order
            .iter()
            .filter(|&&s| by_slot[s as usize] != ABSENT)
            .map(|&s| (slot_lines[s as usize], by_slot[s as usize])),
    );
    Ok(())
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
        check_within(hits, slots, 0);
    }

    /// Names of managers `0..n` whose order is not the indexes' (a permutation).
    fn names(n: u32) -> Vec<String> {
        (0..n)
            .map(|m| format!("m{:08}", (m as u64 * 7_919) % n as u64))
            .collect()
    }

    /// [`check`], spilling past `limit` bytes (0: never); the pairs read in the
    /// managers' name order, then again in reverse. Returns the runs spilled.
    fn check_within(hits: &[(u32, u32, u64)], slots: u32, limit: usize) -> usize {
        let most = hits.iter().map(|h| h.0).max().unwrap_or(0) + 1;
        let names = names(most);
        let mut sums = ManagerSums::default();
        if limit != 0 {
            sums.spill_past(limit);
        }
        let mut want: BTreeMap<u32, BTreeMap<u32, u64>> = BTreeMap::new();
        for &(m, s, h) in hits {
            sums.add(m, s, h);
            if sums.is_full() {
                sums.spill().unwrap();
            }
            let e = want.entry(m).or_default().entry(s).or_insert(0);
            *e = e.saturating_add(h).min(ABSENT - 1);
        }
        // Slots in reverse line order: slot s is line `slots - s`.
        let slot_lines: Vec<u32> = (0..slots).map(|s| slots - s).collect();
        let order: Vec<u32> = (0..slots).rev().collect();
        let runs = sums.runs();
        let mut f = sums.finish().unwrap();
        assert_eq!(f.managers(), want.keys().copied().collect::<Vec<_>>());
        let mut by_name: Vec<u32> = want.keys().copied().collect();
        by_name.sort_by_key(|&m| &names[m as usize]);
        let mut got = Vec::new();
        // Any order: each manager is one positioned read.
        let back: Vec<u32> = by_name
            .iter()
            .rev()
            .step_by(by_name.len().div_ceil(40))
            .copied()
            .collect();
        for pass in [by_name, back] {
            for m in pass {
                f.pairs(m, &order, &slot_lines, &mut got).unwrap();
                let mut w: Vec<(u32, u64)> =
                    want[&m].iter().map(|(&s, &h)| (slots - s, h)).collect();
                w.sort_unstable();
                assert_eq!(got, w, "manager {m}");
            }
        }
        runs
    }

    /// A file of many lines × many managers merged alone held every (manager, line)
    /// pair at once (500,000 lines × 40 managers: 368 MB); past its limit the sums
    /// spill runs to a temporary file, and every manager's pairs are the same.
    #[test]
    fn lines_times_managers_of_one_file_were_all_held_at_once() {
        let mut r = Lcg(11);
        for (managers, slots, n, limit) in [
            (40u64, 20_000u64, 400_000, 256 << 10),
            (3, 5_000, 60_000, 64 << 10),
            (2_000, 400, 30_000, 32 << 10),
            (40, 20_000, 60_000, 1),
        ] {
            let hits: Vec<(u32, u32, u64)> = (0..n)
                .map(|_| (r.next(managers) as u32, r.next(slots) as u32, r.next(1000)))
                .collect();
            let runs = check_within(&hits, slots as u32, limit);
            assert!(runs >= 2, "{runs} runs spilled within {limit} bytes");
        }
        // Held within the limit as they are added (the dense vectors' growth too).
        let mut sums = ManagerSums::default();
        sums.spill_past(1 << 20);
        let mut most = 0;
        for s in 0..200_000u32 {
            for m in 0..8 {
                sums.add(m, s, 1);
                most = most.max(sums.approx_bytes());
                if sums.is_full() {
                    sums.spill().unwrap();
                }
            }
        }
        // Counted before each spill, when it went over: a dense vector's last growth
        // may take it past the limit before it is seen.
        assert!(most <= 4 << 20, "held {most} bytes within a 1 MiB limit");
        assert!(sums.runs() >= 4, "{} runs", sums.runs());
    }

    /// 200,000 managers each on one line, every row 20 times over (a helper's
    /// attack): the log's room for the repeats was counted after they were combined,
    /// so a run was spilled every few thousand rows; each run kept an index of 24
    /// bytes per manager in memory, and the repeats were never combined across runs.
    /// Now the log gives back its room, runs carry no index, and past 16 runs they
    /// are merged into one, repeats summed (and indexed once, when written).
    #[test]
    fn repeated_pairs_of_many_managers_grew_memory_and_disk_with_the_rows() {
        let (managers, repeats) = (20_000u32, 100u32);
        let hits: Vec<(u32, u32, u64)> = (0..repeats)
            .flat_map(|r| (0..managers).map(move |m| (m, m % 1_000, 1 + (r % 3) as u64)))
            .collect();
        let runs = check_within(&hits, 1_000, 64 << 10);
        assert!(runs >= 2, "{runs} runs");
        // Memory held: within the limit, whatever the repeats.
        let mut sums = ManagerSums::default();
        sums.spill_past(256 << 10);
        let mut most = 0;
        for &(m, s, h) in &hits {
            sums.add(m, s, h);
            most = most.max(sums.approx_bytes());
            if sums.is_full() {
                sums.spill().unwrap();
            }
        }
        assert!(most <= 1 << 20, "held {most} bytes within 256 KiB");
        // The file holds far fewer records than rows (runs merged as they come,
        // repeats summed), and once finished each distinct pair once.
        let live = sums.spilled.as_ref().unwrap().records();
        assert!(
            live < hits.len() as u64 / 2,
            "{live} records of {} rows",
            hits.len()
        );
        let f = sums.finish().unwrap();
        assert_eq!(f.spilled_records(), Some(managers as u64));
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
        let f = sums.finish().unwrap();
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
