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
//! file as a *run* of `(slot, sum)` pairs sorted by manager and slot, and memory starts
//! again empty. Each manager's pairs are then summed over the runs when it is written,
//! in memory proportional to the file's lines, not to its lines × managers (500,000
//! lines × 40 managers held 368 MB).

use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

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
/// Bytes a spilled pair takes: its slot and its sum.
const PAIR_BYTES: u64 = 12;

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
    /// The log's length at which it is compacted next.
    next_compact: usize,
    /// Bytes held past which what is held is spilled (0: never).
    limit: usize,
    /// The runs spilled so far.
    spilled: Option<Box<Spilled>>,
}

/// Runs of pairs in a temporary file: each sorted by manager, then slot.
struct Spilled {
    file: BufWriter<std::fs::File>,
    /// Pairs written to the file so far.
    written: u64,
    /// Per run, per manager (ascending): `(manager, first pair, end pair)`.
    runs: Vec<Vec<(u32, u64, u64)>>,
    /// The first error writing the file: reported by [`ManagerSums::finish`].
    failed: Option<std::io::Error>,
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
                    if self.limit != 0 && self.approx_bytes() > self.limit {
                        self.compact();
                        self.spill();
                    }
                }
                return;
            }
        }
        self.log.push((mgr, slot, hits));
        if self.log.len() >= self.next_compact.max(LOG_SLACK) {
            self.compact();
            if self.limit != 0 && self.approx_bytes() > self.limit {
                self.spill();
            }
        }
    }

    /// Spills what is held once it takes more than `limit` bytes (see the module's
    /// documentation).
    pub(super) fn spill_past(&mut self, limit: usize) {
        self.limit = limit.max(1);
        self.set_next_compact();
    }

    /// Runs spilled so far.
    #[cfg(test)]
    pub(super) fn runs(&self) -> usize {
        self.spilled.as_ref().map_or(0, |s| s.runs.len())
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
    fn spill(&mut self) {
        let spilled = self.spilled.get_or_insert_with(|| {
            let (file, failed) = match tempfile::tempfile() {
                Ok(f) => (f, None),
                // Reported by `finish`; the pairs written until then are lost with it.
                Err(e) => (tempfile_placeholder(), Some(e)),
            };
            Box::new(Spilled {
                file: BufWriter::with_capacity(256 << 10, file),
                written: 0,
                runs: Vec::new(),
                failed,
            })
        });
        let mut index = Vec::new();
        let mut managers: Vec<u32> = self.dense.iter().map(|d| d.mgr).collect();
        managers.extend(self.log.iter().map(|e| e.0));
        managers.sort_unstable();
        managers.dedup();
        // The log is sorted by (manager, slot) after `compact`.
        let mut at = 0;
        let mut pairs: Vec<(u32, u64)> = Vec::new();
        for mgr in managers {
            pairs.clear();
            if let Some(&d) = self.dense_of.get(&mgr) {
                let sums = &self.dense[d as usize - 1].sums;
                pairs.extend(
                    sums.iter()
                        .enumerate()
                        .filter(|(_, &h)| h != ABSENT)
                        .map(|(s, &h)| (s as u32, h)),
                );
            }
            let end = at + self.log[at..].iter().take_while(|e| e.0 == mgr).count();
            if end > at {
                pairs.extend(self.log[at..end].iter().map(|e| (e.1, e.2)));
                pairs.sort_unstable_by_key(|p| p.0);
                pairs.dedup_by(|p, kept| {
                    let same = p.0 == kept.0;
                    if same {
                        kept.1 = add_sum(kept.1, p.1);
                    }
                    same
                });
            }
            at = end;
            let start = spilled.written;
            for &(s, h) in &pairs {
                let mut rec = [0u8; PAIR_BYTES as usize];
                rec[..4].copy_from_slice(&s.to_le_bytes());
                rec[4..].copy_from_slice(&h.to_le_bytes());
                if spilled.failed.is_none() {
                    if let Err(e) = spilled.file.write_all(&rec) {
                        spilled.failed = Some(e);
                    }
                }
            }
            spilled.written += pairs.len() as u64;
            index.push((mgr, start, spilled.written));
        }
        spilled.runs.push(index);
        self.dense = Vec::new();
        self.dense_of = FxHashMap::default();
        self.log = Vec::new();
        self.compacted = 0;
        self.dense_bytes = 0;
        self.set_next_compact();
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
        self.compact();
        let spilled = match self.spilled.take() {
            None => None,
            Some(mut s) => {
                if let Some(e) = s.failed.take() {
                    return Err(e);
                }
                let file = s.file.into_inner().map_err(|e| e.into_error())?;
                Some(Runs { file, runs: s.runs })
            }
        };
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
            .chain(
                spilled
                    .iter()
                    .flat_map(|s| s.runs.iter().flatten().map(|r| r.0)),
            )
            .collect();
        managers.sort_unstable();
        managers.dedup();
        Ok(FinishedSums {
            sums: self,
            runs,
            managers,
            spilled,
        })
    }
}

/// A file never written to: where a temporary file could not be created, the error
/// is kept and nothing is written.
fn tempfile_placeholder() -> std::fs::File {
    std::fs::File::open("/dev/null").expect("/dev/null opens")
}

/// The spilled runs, once written.
struct Runs {
    file: std::fs::File,
    /// Per run, per manager (ascending): `(manager, first pair, end pair)`.
    runs: Vec<Vec<(u32, u64, u64)>>,
}

impl Runs {
    /// Calls `f(slot, sum)` for every pair of manager `mgr` in every run.
    fn each(&self, mgr: u32, mut f: impl FnMut(u32, u64)) -> std::io::Result<()> {
        let mut buf = vec![0u8; 64 << 10];
        let per = buf.len() as u64 / PAIR_BYTES;
        for run in &self.runs {
            let Ok(i) = run.binary_search_by_key(&mgr, |r| r.0) else {
                continue;
            };
            let (_, mut at, end) = run[i];
            while at < end {
                let n = (end - at).min(per);
                let b = &mut buf[..(n * PAIR_BYTES) as usize];
                self.file.read_exact_at(b, at * PAIR_BYTES)?;
                for rec in b.chunks_exact(PAIR_BYTES as usize) {
                    let s = u32::from_le_bytes(rec[..4].try_into().expect("4 bytes"));
                    let h = u64::from_le_bytes(rec[4..].try_into().expect("8 bytes"));
                    f(s, h);
                }
                at += n;
            }
        }
        Ok(())
    }

    /// Pairs of manager `mgr` over all runs.
    fn count(&self, mgr: u32) -> u64 {
        self.runs
            .iter()
            .filter_map(|run| {
                let i = run.binary_search_by_key(&mgr, |r| r.0).ok()?;
                Some(run[i].2 - run[i].1)
            })
            .sum()
    }
}

/// [`ManagerSums`] after the last hit: read one manager at a time.
pub(super) struct FinishedSums {
    sums: ManagerSums,
    /// Per manager in the log: its range of the log.
    runs: Vec<(u32, usize, usize)>,
    managers: Vec<u32>,
    /// What was spilled (see [`ManagerSums::spill_past`]).
    spilled: Option<Runs>,
}

impl FinishedSums {
    /// Runs spilled before the last hit.
    pub(super) fn runs_spilled(&self) -> usize {
        self.spilled.as_ref().map_or(0, |s| s.runs.len())
    }

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
    ) -> std::io::Result<()> {
        out.clear();
        if let Some(spilled) = &self.spilled {
            return self.pairs_spilled(spilled, mgr, order, slot_lines, out);
        }
        self.pairs_held(mgr, order, slot_lines, out);
        Ok(())
    }

    /// [`FinishedSums::pairs`] of sums partly spilled: summed over the runs and what
    /// is held, by slot, in a vector over the file's slots when they are many, else
    /// sorted.
    fn pairs_spilled(
        &self,
        spilled: &Runs,
        mgr: u32,
        order: &[u32],
        slot_lines: &[u32],
        out: &mut Vec<(u32, u64)>,
    ) -> std::io::Result<()> {
        let mut held = Vec::new();
        self.pairs_held(mgr, order, slot_lines, &mut held);
        let many = spilled.count(mgr) + held.len() as u64;
        if many.saturating_mul(4) < order.len() as u64 {
            out.extend(held);
            spilled.each(mgr, |s, h| out.push((slot_lines[s as usize], h)))?;
            out.sort_unstable_by_key(|p| p.0);
            out.dedup_by(|p, kept| {
                let same = p.0 == kept.0;
                if same {
                    kept.1 = add_sum(kept.1, p.1);
                }
                same
            });
            return Ok(());
        }
        let mut by_slot = vec![ABSENT; slot_lines.len()];
        let mut add = |s: u32, h: u64| {
            let m = &mut by_slot[s as usize];
            *m = add_sum(*m, h);
        };
        spilled.each(mgr, &mut add)?;
        // What is held is by line: back to slots through the order.
        let mut i = 0;
        for (line, h) in held {
            while slot_lines[order[i] as usize] != line {
                i += 1;
            }
            add(order[i], h);
        }
        out.extend(
            order
                .iter()
                .filter(|&&s| by_slot[s as usize] != ABSENT)
                .map(|&s| (slot_lines[s as usize], by_slot[s as usize])),
        );
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
        check_within(hits, slots, 0);
    }

    /// [`check`], spilling past `limit` bytes (0: never).
    fn check_within(hits: &[(u32, u32, u64)], slots: u32, limit: usize) -> usize {
        let mut sums = ManagerSums::default();
        if limit != 0 {
            sums.spill_past(limit);
        }
        let mut want: BTreeMap<u32, BTreeMap<u32, u64>> = BTreeMap::new();
        for &(m, s, h) in hits {
            sums.add(m, s, h);
            let e = want.entry(m).or_default().entry(s).or_insert(0);
            *e = e.saturating_add(h).min(ABSENT - 1);
        }
        // Slots in reverse line order: slot s is line `slots - s`.
        let slot_lines: Vec<u32> = (0..slots).map(|s| slots - s).collect();
        let order: Vec<u32> = (0..slots).rev().collect();
        let runs = sums.runs();
        let f = sums.finish().unwrap();
        assert_eq!(f.managers(), want.keys().copied().collect::<Vec<_>>());
        let mut got = Vec::new();
        for (&m, w) in &want {
            f.pairs(m, &order, &slot_lines, &mut got).unwrap();
            let mut w: Vec<(u32, u64)> = w.iter().map(|(&s, &h)| (slots - s, h)).collect();
            w.sort_unstable();
            assert_eq!(got, w, "manager {m}");
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
            }
            most = most.max(sums.approx_bytes());
        }
        assert!(most <= 2 << 20, "held {most} bytes within a 1 MiB limit");
        assert!(sums.runs() >= 4, "{} runs", sums.runs());
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
