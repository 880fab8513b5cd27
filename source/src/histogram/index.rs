//! The index of two middles that the search for a region's rarest, longest common
//! run reads ([`Index::find_lcs`]).

use std::cell::Cell;

use imara_diff::Token;

/// git's `max_chain_length`: a region's run is taken only if its rarest line occurs
/// at most this often in the region's `before`; a line occurring more than one time
/// past it is never tried as an anchor, and a region without such a run goes to Myers.
/// (imara-diff took 63, and counted a line up to 64 times only, so it tried lines of
/// any count as anchors of count 64: its runs and git's differed around the limit.)
const MAX_CHAIN_LEN: u32 = 64;

/// Lines of `after` a block of the range maximum table covers.
const BLOCK: usize = 64;

/// A line of `before` occurring more often than this is taken to be followed, at
/// one of its occurrences, by any line (its successors are not looked through).
const SUCCESSORS_LOOKED_AT: usize = 8;

/// A common run: `before[b..b + len]` equals `after[a..a + len]`.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Lcs {
    pub(super) b: usize,
    pub(super) a: usize,
    pub(super) len: usize,
}

/// The two middles (common prefix and suffix stripped) and what the search reads.
pub(super) struct Index<'a> {
    before: &'a [Token],
    after: &'a [Token],
    /// `positions[starts[t]..starts[t + 1]]`: where token `t` occurs in `before`,
    /// ascending.
    starts: Vec<u32>,
    positions: Vec<u32>,
    /// Per line of `after`: the length of the stretch of `after` around it whose
    /// adjacent pairs all occur adjacent in `before` (an upper bound on any common
    /// run through it).
    stretch: Vec<u32>,
    /// `max_table[k][i]`: the maximum of `stretch` over blocks `i..i + 2^k`.
    max_table: Vec<Vec<u32>>,
    /// Per line of `after` whose line occurs once in `before`: the maximal common run
    /// through the two (on their diagonal), as lines `start..end` of `after` (else
    /// `0..0`). Within a region the run is this one cut at the region's bounds.
    diagonal: Vec<(u32, u32)>,
    /// Per token, where in its positions its last search ended.
    cursors: Vec<Cell<u32>>,
}

impl<'a> Index<'a> {
    pub(super) fn new(before: &'a [Token], after: &'a [Token], num_tokens: u32) -> Self {
        let mut starts = vec![0u32; num_tokens as usize + 1];
        for t in before {
            starts[t.0 as usize + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut positions = vec![0u32; before.len()];
        let mut next = starts.clone();
        for (i, t) in before.iter().enumerate() {
            let slot = &mut next[t.0 as usize];
            positions[*slot as usize] = i as u32;
            *slot += 1;
        }
        drop(next);
        let mut ix = Index {
            before,
            after,
            starts,
            positions,
            stretch: Vec::new(),
            max_table: Vec::new(),
            diagonal: Vec::new(),
            cursors: vec![Cell::new(0); num_tokens as usize],
        };
        ix.stretch = ix.stretches();
        ix.max_table = max_table(&ix.stretch);
        ix.diagonal = ix.diagonals();
        ix
    }

    /// Where `t` occurs in the whole of `before`.
    fn all_positions(&self, t: Token) -> &[u32] {
        let t = t.0 as usize;
        &self.positions[self.starts[t] as usize..self.starts[t + 1] as usize]
    }

    /// Whether `t` is followed by `u` somewhere in `before` (or may be: a line with
    /// many occurrences is taken to be).
    fn pair_in_before(&self, t: Token, u: Token) -> bool {
        let at = self.all_positions(t);
        at.len() > SUCCESSORS_LOOKED_AT
            || at
                .iter()
                .any(|&i| self.before.get(i as usize + 1) == Some(&u))
    }

    fn stretches(&self) -> Vec<u32> {
        let m = self.after.len();
        let mut out = vec![0u32; m];
        let mut start = 0;
        for q in 0..m {
            let joined = q + 1 < m && self.pair_in_before(self.after[q], self.after[q + 1]);
            if !joined {
                out[start..=q].fill((q + 1 - start) as u32);
                start = q + 1;
            }
        }
        out
    }

    /// [`Index::diagonal`]: each run extended once, from its first line of `after`
    /// whose line occurs once in `before`.
    fn diagonals(&self) -> Vec<(u32, u32)> {
        let (before, after) = (self.before, self.after);
        let mut out = vec![(0u32, 0u32); after.len()];
        // The last run found, as its diagonal (`before` index minus `after` index)
        // and its lines of `after`.
        let mut last: Option<(isize, usize, usize)> = None;
        for (q, &t) in after.iter().enumerate() {
            let &[i] = self.all_positions(t) else {
                continue;
            };
            let d = i as isize - q as isize;
            let (start, end) = match last {
                Some((ld, ls, le)) if ld == d && q < le => (ls, le),
                _ => {
                    let (mut s1, mut s2) = (i as usize, q);
                    while s1 > 0 && s2 > 0 && before[s1 - 1] == after[s2 - 1] {
                        s1 -= 1;
                        s2 -= 1;
                    }
                    let (mut e1, mut e2) = (i as usize + 1, q + 1);
                    while e1 < before.len() && e2 < after.len() && before[e1] == after[e2] {
                        e1 += 1;
                        e2 += 1;
                    }
                    last = Some((d, s2, e2));
                    (s2, e2)
                }
            };
            out[q] = (start as u32, end as u32);
        }
        out
    }

    /// The first line of `after[from..to]` whose stretch is over `len`, if any.
    fn next_longer(&self, from: usize, to: usize, len: u32) -> Option<usize> {
        let first_over = |lo: usize, hi: usize| (lo..hi).find(|&q| self.stretch[q] > len);
        let block_end = ((from / BLOCK + 1) * BLOCK).min(to);
        if let Some(q) = first_over(from, block_end) {
            return Some(q);
        }
        if block_end >= to {
            return None;
        }
        // Skip whole blocks whose maximum is at most `len`, the longest jumps first
        // (each jump length is taken at most once), without passing `to`.
        let mut b = block_end / BLOCK;
        for k in (0..self.max_table.len()).rev() {
            let row = &self.max_table[k];
            if b < row.len() && (b + (1 << k)) * BLOCK <= to && row[b] <= len {
                b += 1 << k;
            }
        }
        // Block `b` holds a line over `len`, or what is left before `to` is less
        // than a block.
        first_over(b * BLOCK, ((b + 1) * BLOCK).min(to))
    }

    /// The first positions of `t` in `before[b0..b1]`, ascending: all of them up to
    /// [`MAX_CHAIN_LEN`] `+ 2` (a line occurring more often is never an anchor, and
    /// counts as that many).
    fn occurrences(&self, t: Token, b0: usize, b1: usize) -> &[u32] {
        let all = self.all_positions(t);
        // A region often starts or ends with the middle: no search at that end.
        let lo = if b0 == 0 || all.len() <= 1 {
            usize::from(all.first().is_some_and(|&p| (p as usize) < b0))
        } else {
            self.first_at_or_after(t, all, b0)
        };
        let cap = all.len().min(lo + MAX_CHAIN_LEN as usize + 2);
        let hi = if b1 == self.before.len() {
            cap
        } else {
            lo + all[lo..cap].partition_point(|&p| (p as usize) < b1)
        };
        &all[lo..hi]
    }

    /// The index in `all` (the positions of `t`) of the first position at or after
    /// `b0`, galloping from where the last search for `t` ended (the regions of one
    /// scan, and of the steps after it, start near each other).
    fn first_at_or_after(&self, t: Token, all: &[u32], b0: usize) -> usize {
        let cursor = &self.cursors[t.0 as usize];
        let at = (cursor.get() as usize).min(all.len());
        let below = |i: usize| (all[i] as usize) < b0;
        let found = if at < all.len() && below(at) {
            // Forward: the first at or after `b0` is past `at`.
            let mut step = 1;
            let mut lo = at + 1;
            while lo + step <= all.len() && below(lo + step - 1) {
                lo += step;
                step *= 2;
            }
            let hi = (lo + step).min(all.len());
            lo + all[lo..hi].partition_point(|&p| (p as usize) < b0)
        } else {
            // Backward: it is at `at` or before.
            let mut step = 1;
            let mut hi = at;
            while hi >= step && !below(hi - step) {
                hi -= step;
                step *= 2;
            }
            let lo = hi.saturating_sub(step);
            lo + all[lo..hi].partition_point(|&p| (p as usize) < b0)
        };
        cursor.set(found as u32);
        found
    }

    /// How often `t` occurs in `before[b0..b1]`, counted up to [`MAX_CHAIN_LEN`] `+ 2`.
    fn count(&self, t: Token, b0: usize, b1: usize) -> u32 {
        self.occurrences(t, b0, b1).len() as u32
    }

    /// The common run git's histogram takes in `before[b0..b1]` against
    /// `after[a0..a1]`: `None` where it falls back to Myers, a run of length 0 where
    /// the two have no line in common.
    pub(super) fn find_lcs(&self, b0: usize, b1: usize, a0: usize, a1: usize) -> Option<Lcs> {
        let mut lcs = Lcs::default();
        let mut min_occ = MAX_CHAIN_LEN + 1;
        let mut found_cs = false;
        let mut pos = a0;
        while pos < a1 {
            let t = self.after[pos];
            let c = self.count(t, b0, b1);
            if c != 0 {
                found_cs = true;
                if c <= min_occ {
                    pos = self.update_lcs(pos, t, (b0, b1, a0, a1), &mut lcs, &mut min_occ);
                    if min_occ == 1 {
                        // Only a longer run replaces one whose rarest line occurs once,
                        // and no run through a line is longer than its stretch: the
                        // scan goes on at the next line whose stretch is longer. The
                        // lines skipped are in shorter stretches, whose runs end before
                        // that line, so imara-diff's scan, which jumps to the ends of
                        // runs, reaches it too, finding nothing to take on the way.
                        match self.next_longer(pos, a1, lcs.len as u32) {
                            Some(q) => pos = q,
                            None => break,
                        }
                    }
                    continue;
                }
            }
            pos += 1;
        }
        (!found_cs || min_occ <= MAX_CHAIN_LEN).then_some(lcs)
    }

    /// The runs through line `after_pos` (token `t`) at each of `t`'s occurrences in
    /// the region, as git tries them; returns where its scan goes on.
    fn update_lcs(
        &self,
        after_pos: usize,
        t: Token,
        (b0, b1, a0, a1): (usize, usize, usize, usize),
        lcs: &mut Lcs,
        min_occ: &mut u32,
    ) -> usize {
        let (before, after) = (self.before, self.after);
        let mut next_pos = after_pos + 1;
        let occurrences = self.occurrences(t, b0, b1);
        let count = occurrences.len() as u32;
        let mut iter = occurrences.iter().map(|&p| p as usize);
        let mut at = iter.next().expect("a token counted in the region");
        if count == 1 && self.all_positions(t).len() == 1 {
            // The line occurs once in `before`: its run is the precomputed one, cut at
            // the region's bounds (what extending it line by line reaches), and its
            // count is 1.
            let (gs, ge) = self.diagonal[after_pos];
            let d = at as isize - after_pos as isize;
            let s2 = (gs as usize).max(a0).max((b0 as isize - d).max(0) as usize);
            let e2 = (ge as usize).min(a1).min((b1 as isize - d) as usize);
            if lcs.len < e2 - s2 || *min_occ > 1 {
                *min_occ = 1;
                *lcs = Lcs {
                    b: (s2 as isize + d) as usize,
                    a: s2,
                    len: e2 - s2,
                };
            }
            return next_pos.max(e2);
        }
        'occurrences: loop {
            let mut occ = count;
            let (mut s1, mut s2) = (at, after_pos);
            while s1 > b0 && s2 > a0 && before[s1 - 1] == after[s2 - 1] {
                s1 -= 1;
                s2 -= 1;
                // A count is at least 1 in the region: past 1 nothing lowers it.
                if occ > 1 {
                    occ = occ.min(self.count(before[s1], b0, b1));
                }
            }
            let (mut e1, mut e2) = (at + 1, after_pos + 1);
            while e1 < b1 && e2 < a1 && before[e1] == after[e2] {
                if occ > 1 {
                    occ = occ.min(self.count(before[e1], b0, b1));
                }
                e1 += 1;
                e2 += 1;
            }
            next_pos = next_pos.max(e2);
            let len = e2 - s2;
            if lcs.len < len || *min_occ > occ {
                *min_occ = occ;
                *lcs = Lcs { b: s1, a: s2, len };
            }
            // The next occurrence tried is the first past the run just found, in
            // `before` (git's `while (np <= ae)`). imara-diff 0.2 compares it with the
            // run's end in `after` instead, which skips occurrences that start longer
            // runs: on a file of repeated lines it kept 151 of 200 unchanged lines
            // where git keeps 197.
            loop {
                match iter.next() {
                    Some(p) if p >= e1 => {
                        at = p;
                        break;
                    }
                    Some(_) => {}
                    None => break 'occurrences,
                }
            }
        }
        next_pos
    }
}

/// `max_table[k][i]`: the maximum of `stretch` over blocks `i..i + 2^k` of [`BLOCK`]
/// lines (whole blocks only).
fn max_table(stretch: &[u32]) -> Vec<Vec<u32>> {
    let blocks = stretch.len() / BLOCK;
    let mut table: Vec<Vec<u32>> = Vec::new();
    if blocks == 0 {
        return table;
    }
    table.push(
        stretch
            .chunks_exact(BLOCK)
            .map(|c| c.iter().copied().max().unwrap_or(0))
            .collect(),
    );
    let mut k = 1;
    while (1 << k) <= blocks {
        let prev = &table[k - 1];
        let half = 1 << (k - 1);
        let row = (0..=blocks - (1 << k))
            .map(|i| prev[i].max(prev[i + half]))
            .collect();
        table.push(row);
        k += 1;
    }
    table
}
