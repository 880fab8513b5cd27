//! The histogram line diff, result for result imara-diff's `Algorithm::Histogram`
//! (0.2), in time near linear on long files whose lines are mostly unique.
//!
//! imara-diff's histogram (as git's) finds in a region the rarest, then longest,
//! common run of lines, diffs the part before it recursively and loops on the part
//! after it, rebuilding the histogram of the region's `before` and scanning the
//! whole of its `after` at each step. When the run it takes is near the start of the
//! region (every run the same length: the first one wins), each step costs the rest
//! of the file and the diff is quadratic: a change every 100 lines of an n-line file
//! visits n²/200 lines. This one takes the same runs, in the same order, with:
//!
//! - the occurrences of a line within a region read from one sorted list of its
//!   positions (two binary searches), instead of a histogram rebuilt per region;
//! - a scan of `after` that stops once no run it could still find would replace the
//!   one it holds: a run whose rarest line occurs once (the rarest there is) is
//!   replaced only by a longer run, and no common run through a line of `after` is
//!   longer than the stretch of `after` around that line whose adjacent pairs of
//!   lines all occur adjacent in `before` ([`Index::stretch`], its maximum over a
//!   range read from a table over blocks).
//!
//! Where imara-diff's histogram falls back to Myers (every common line of a region
//! occurring more than 63 times in its `before`) this runs imara-diff's Myers on the
//! same region. `tests` check the flags against imara-diff's on generated pairs.

use std::cell::Cell;

use imara_diff::{Algorithm, Diff, Token};

/// A line occurring more often than this in a region is not an anchor of the
/// histogram there (imara-diff keeps the first 64 positions of a line and counts up
/// to 64).
const MAX_CHAIN_LEN: u32 = 63;

/// Lines of `after` a block of the range maximum table covers.
const BLOCK: usize = 64;

/// A line of `before` occurring more often than this is taken to be followed, at
/// one of its occurrences, by any line (its successors are not looked through).
const SUCCESSORS_LOOKED_AT: usize = 8;

/// A common run: `before[b..b + len]` equals `after[a..a + len]`.
#[derive(Debug, Default, Clone, Copy)]
struct Lcs {
    b: usize,
    a: usize,
    len: usize,
}

/// The two middles (common prefix and suffix stripped) and what the search reads.
struct Index<'a> {
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
    fn new(before: &'a [Token], after: &'a [Token], num_tokens: u32) -> Self {
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

    /// The positions of `t` in `before[b0..b1]` as imara-diff's histogram of that
    /// region holds them: the first 64, ascending.
    fn occurrences(&self, t: Token, b0: usize, b1: usize) -> &[u32] {
        let all = self.all_positions(t);
        // A region often starts or ends with the middle: no search at that end.
        let lo = if b0 == 0 || all.len() <= 1 {
            usize::from(all.first().is_some_and(|&p| (p as usize) < b0))
        } else {
            self.first_at_or_after(t, all, b0)
        };
        let cap = all.len().min(lo + MAX_CHAIN_LEN as usize + 1);
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

    /// How often `t` occurs in `before[b0..b1]`, counted up to 64.
    fn count(&self, t: Token, b0: usize, b1: usize) -> u32 {
        self.occurrences(t, b0, b1).len() as u32
    }

    /// The common run imara-diff's histogram takes in `before[b0..b1]` against
    /// `after[a0..a1]`: `None` where it falls back to Myers, a run of length 0 where
    /// the two have no line in common.
    fn find_lcs(&self, b0: usize, b1: usize, a0: usize, a1: usize) -> Option<Lcs> {
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
    /// the region, as imara-diff tries them; returns where its scan goes on.
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
            // imara-diff (as git) skips the occurrences up to the run's end, comparing
            // a position in `before` with one in `after`, each within its region.
            loop {
                match iter.next() {
                    Some(p) if p - b0 > e2 - a0 => {
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

/// Steps imara-diff's Myers may spend pruning a region before it diffs it, past
/// which the region is diffed in pieces (see [`prune_scan_steps`]): ~60-90 ms.
const MAX_PRUNE_STEPS: u64 = 1 << 26;

/// Lines a side of a piece of a region diffed in pieces: pruning one takes at most
/// about [`MAX_PRUNE_STEPS`].
const PIECE_LINES: usize = 1 << 13;

/// The steps imara-diff 0.2's Myers spends in its preprocessing of `before` against
/// `after`: for each line very common in the other file (`sqrt(len)` times or more),
/// `should_prune_common_line` scans back over the lines before it that are absent
/// from the other file or very common there, down to the 100th line of the region
/// (its window's start is `WINDOW_SIZE`, not `pos - WINDOW_SIZE`), so a long run of
/// such lines costs the square of its length (80,000 lines, every other blank and the
/// rest in one file only: 12 s). Counted here in linear time, the way it computes
/// which lines are which.
fn prune_scan_steps(before: &[Token], after: &[Token]) -> u64 {
    // imara-diff's `util::sqrt`, its limit of "very common".
    let sqrt = |n: usize| -> u32 { 1 << ((usize::BITS - n.leading_zeros()) / 2) };
    let count = |file: &[Token]| {
        let mut n: Vec<u32> = Vec::new();
        for t in file {
            let i = t.0 as usize;
            if i >= n.len() {
                n.resize(i + 1, 0);
            }
            n[i] += 1;
        }
        n
    };
    let (in_before, in_after) = (count(before), count(after));
    // One file's lines against the other's counts: the scan's steps over them.
    let steps = |file: &[Token], other: &[u32], limit: u32| -> u64 {
        let limit = limit.min(1024);
        let mut total = 0u64;
        // Where the scan back from the current line stops: past the last line found
        // a few times in the other file.
        let mut last_some: Option<usize> = None;
        for (pos, t) in file.iter().enumerate() {
            let n = other.get(t.0 as usize).copied().unwrap_or(0);
            if n == 0 {
                continue;
            }
            if n < limit {
                last_some = Some(pos);
                continue;
            }
            let start = if pos > 100 { 100 } else { 0 };
            let from = last_some.map_or(start, |s| (s + 1).max(start));
            total += pos.saturating_sub(from) as u64;
        }
        total
    };
    steps(before, &in_after, sqrt(before.len())) + steps(after, &in_before, sqrt(after.len()))
}

/// imara-diff's Myers on `before` against `after` into the flags given (a region of
/// the histogram with no common prefix or suffix, so imara-diff's stripping of them
/// leaves it whole, as its histogram's fallback runs it).
fn myers(before: &[Token], after: &[Token], removed: &mut [bool], added: &mut [bool]) {
    let mut d = Diff::default();
    d.compute_with(Algorithm::Myers, before, after, 0);
    for (i, r) in removed.iter_mut().enumerate() {
        *r = d.is_removed(i as u32);
    }
    for (j, a) in added.iter_mut().enumerate() {
        *a = d.is_added(j as u32);
    }
}

/// The removed and added flags of imara-diff's `Diff::compute(Algorithm::Histogram)`
/// of `before` against `after` (tokens below `num_tokens`).
///
/// But for one thing: a region imara-diff would give to Myers whose preprocessing
/// would take more than [`MAX_PRUNE_STEPS`] is cut into as many pieces a side as make
/// each at most [`PIECE_LINES`] lines, paired in order, and each pair is given to
/// Myers: a valid diff (an unchanged line is the same text on both sides, in order),
/// found in time linear in the region, where imara-diff's took its square.
pub(crate) fn histogram_flags(
    before: &[Token],
    after: &[Token],
    num_tokens: u32,
) -> (Vec<bool>, Vec<bool>) {
    let mut removed = vec![false; before.len()];
    let mut added = vec![false; after.len()];
    let prefix = before.iter().zip(after).take_while(|(x, y)| x == y).count();
    let suffix = before[prefix..]
        .iter()
        .rev()
        .zip(after[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (b, a) = (
        &before[prefix..before.len() - suffix],
        &after[prefix..after.len() - suffix],
    );
    let rm = &mut removed[prefix..before.len() - suffix];
    let ad = &mut added[prefix..after.len() - suffix];
    if b.is_empty() || a.is_empty() {
        rm.fill(true);
        ad.fill(true);
        return (removed, added);
    }
    let ix = Index::new(b, a, num_tokens);
    // Regions left to diff (imara-diff recurses into the part before a run and loops
    // on the part after it; the regions are disjoint, so the order does not matter).
    let mut todo: Vec<[u32; 4]> = vec![[0, b.len() as u32, 0, a.len() as u32]];
    // Regions imara-diff diffs by Myers (run once the index is dropped).
    let mut fallbacks: Vec<[usize; 4]> = Vec::new();
    while let Some([b0, b1, a0, a1]) = todo.pop() {
        let (mut b0, b1, mut a0, a1) = (b0 as usize, b1 as usize, a0 as usize, a1 as usize);
        loop {
            if b0 == b1 {
                ad[a0..a1].fill(true);
                break;
            }
            if a0 == a1 {
                rm[b0..b1].fill(true);
                break;
            }
            match ix.find_lcs(b0, b1, a0, a1) {
                Some(l) if l.len == 0 => {
                    rm[b0..b1].fill(true);
                    ad[a0..a1].fill(true);
                    break;
                }
                Some(l) => {
                    if l.b == b0 || l.a == a0 {
                        rm[b0..l.b].fill(true);
                        ad[a0..l.a].fill(true);
                    } else {
                        todo.push([b0 as u32, l.b as u32, a0 as u32, l.a as u32]);
                    }
                    b0 = l.b + l.len;
                    a0 = l.a + l.len;
                }
                None => {
                    fallbacks.push([b0, b1, a0, a1]);
                    break;
                }
            }
        }
    }
    // Myers's own memory is not held beside the index's.
    drop(ix);
    for [b0, b1, a0, a1] in fallbacks {
        if prune_scan_steps(&b[b0..b1], &a[a0..a1]) <= MAX_PRUNE_STEPS {
            myers(&b[b0..b1], &a[a0..a1], &mut rm[b0..b1], &mut ad[a0..a1]);
            continue;
        }
        let (nb, na) = (b1 - b0, a1 - a0);
        let k = nb.max(na).div_ceil(PIECE_LINES);
        for i in 0..k {
            let (pb0, pb1) = (b0 + nb * i / k, b0 + nb * (i + 1) / k);
            let (pa0, pa1) = (a0 + na * i / k, a0 + na * (i + 1) / k);
            if pb0 == pb1 || pa0 == pa1 {
                rm[pb0..pb1].fill(true);
                ad[pa0..pa1].fill(true);
                continue;
            }
            myers(
                &b[pb0..pb1],
                &a[pa0..pa1],
                &mut rm[pb0..pb1],
                &mut ad[pa0..pa1],
            );
        }
    }
    (removed, added)
}

/// An imara-diff `Diff` whose flags are `removed` and `added` (to post-process it):
/// imara-diff's Myers of stand-in tokens, one per unchanged pair, shared by the
/// pair and by nothing else, and two more for the removed and the added lines. Each
/// removed or added stand-in occurs in one version only, which Myers marks changed
/// before searching; what is left is the same sequence on both sides, which it
/// strips whole.
pub(crate) fn diff_of_flags(removed: Vec<bool>, added: Vec<bool>) -> Diff {
    let stand_ins = |flags: &[bool], changed: u32| -> Vec<Token> {
        let mut next = 2u32;
        flags
            .iter()
            .map(|&f| {
                if f {
                    Token(changed)
                } else {
                    next += 1;
                    Token(next - 1)
                }
            })
            .collect()
    };
    let before = stand_ins(&removed, 0);
    let after = stand_ins(&added, 1);
    drop((removed, added));
    let mut d = Diff::default();
    d.compute_with(Algorithm::Myers, &before, &after, 0);
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use imara_diff::InternedInput;

    fn imara(input: &InternedInput<u32>) -> (Vec<bool>, Vec<bool>) {
        let d = Diff::compute(Algorithm::Histogram, input);
        let r = (0..input.before.len() as u32)
            .map(|i| d.is_removed(i))
            .collect();
        let a = (0..input.after.len() as u32)
            .map(|i| d.is_added(i))
            .collect();
        (r, a)
    }

    fn input(x: &[u32], y: &[u32]) -> InternedInput<u32> {
        let mut i = InternedInput::default();
        i.update_before(x.iter().copied());
        i.update_after(y.iter().copied());
        i
    }

    fn ours(input: &InternedInput<u32>) -> (Vec<bool>, Vec<bool>) {
        histogram_flags(&input.before, &input.after, input.interner.num_tokens())
    }

    /// A xorshift generator: the pairs are the same at every run.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// An edited copy of `base`: lines changed, inserted, deleted and moved.
    fn edit(rng: &mut Rng, base: &[u32], alphabet: u64, edits: usize) -> Vec<u32> {
        let mut v = base.to_vec();
        for _ in 0..edits {
            let at = rng.below(v.len() as u64 + 1) as usize;
            match rng.below(5) {
                0 if at < v.len() => v[at] = rng.below(alphabet) as u32,
                1 if at < v.len() => {
                    v.remove(at);
                }
                2 => {
                    let len = 1 + rng.below(6) as usize;
                    let end = (at + len).min(v.len());
                    let block: Vec<u32> = v.drain(at.min(end)..end).collect();
                    let to = rng.below(v.len() as u64 + 1) as usize;
                    v.splice(to..to, block);
                }
                _ => v.insert(at, rng.below(alphabet) as u32),
            }
        }
        v
    }

    /// The flags equal imara-diff's histogram on pairs of every kind: distinct lines,
    /// a few repeated lines, small alphabets (Myers fallbacks), runs of equal length.
    /// imara-diff 0.2's preprocessing scan, step by step (its loops, counting).
    fn scan_steps_by_walking(before: &[Token], after: &[Token]) -> u64 {
        let sqrt = |n: usize| -> u32 { 1 << ((usize::BITS - n.leading_zeros()) / 2) };
        let count = |f: &[Token], t: Token| f.iter().filter(|x| **x == t).count() as u32;
        let mut total = 0;
        for (file, other) in [(before, after), (after, before)] {
            let limit = sqrt(file.len()).min(1024);
            // 0: absent from the other file, 1: a few times, 2: very common.
            let status: Vec<u8> = file
                .iter()
                .map(|&t| match count(other, t) {
                    0 => 0,
                    n if n >= limit => 2,
                    _ => 1,
                })
                .collect();
            for pos in 0..file.len() {
                if status[pos] != 2 {
                    continue;
                }
                let start = if pos > 100 { 100 } else { 0 };
                for st in status[start..pos].iter().rev() {
                    if *st == 1 {
                        break;
                    }
                    total += 1;
                }
            }
        }
        total
    }

    #[test]
    fn the_prune_scan_is_counted_as_imara_diff_walks_it() {
        let mut r = Rng(99);
        for round in 0..40 {
            let n = 50 + r.below(1_500) as usize;
            let kinds = 2 + round % 7;
            let gen = |r: &mut Rng, side: u32| -> Vec<Token> {
                (0..n)
                    .map(|_| match r.below(kinds) {
                        // Blank: very common on both sides.
                        0 | 1 => Token(0),
                        // A line of both files, a few times.
                        2 => Token(1 + r.below(40) as u32),
                        // A line of this file only.
                        _ => Token(1_000 + side * 100_000 + r.below(50_000) as u32),
                    })
                    .collect()
            };
            let (b, a) = (gen(&mut r, 0), gen(&mut r, 1));
            assert_eq!(
                prune_scan_steps(&b, &a),
                scan_steps_by_walking(&b, &a),
                "round {round}"
            );
        }
    }

    /// A region of 80,000 lines, every other one blank and the rest in one file only:
    /// imara-diff's Myers pruned it in 12 s (quadratic). It is diffed in pieces now,
    /// in linear time, a valid diff that keeps the blanks it can; at a tenth of the
    /// size it is still diffed whole, as imara-diff diffs it.
    #[test]
    fn frequent_and_one_sided_lines_took_the_myers_fallback_quadratic_time() {
        let pair = |n: usize| {
            let side = |tag: u32| -> Vec<u32> {
                (0..n as u32)
                    .map(|i| if i % 2 == 1 { 0 } else { tag + i })
                    .collect()
            };
            input(&side(1_000_000), &side(3_000_000))
        };
        let big = pair(80_000);
        assert!(prune_scan_steps(&big.before, &big.after) > MAX_PRUNE_STEPS);
        let (r, a) = ours(&big);
        // Valid: the unchanged lines of both sides pair in order, with the same text.
        let kept = |side: &[Token], changed: &[bool]| -> Vec<Token> {
            side.iter()
                .zip(changed)
                .filter(|x| !*x.1)
                .map(|x| *x.0)
                .collect()
        };
        let (kept_b, kept_a) = (kept(&big.before, &r), kept(&big.after, &a));
        assert_eq!(kept_b, kept_a);
        assert!(kept_b.len() > 30_000, "{} blanks kept", kept_b.len());
        let small = pair(8_000);
        assert_eq!(ours(&small), imara(&small), "8,000 lines: diffed");
    }

    #[test]
    fn flags_equal_imara_diff_histogram_on_generated_pairs() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut checked = 0;
        for case in 0..800 {
            let len = [0, 1, 2, 5, 20, 60, 200, 400][case % 8];
            let alphabet = [2, 3, 10, 60, 500, 1 << 30][(case / 8) % 6];
            let base: Vec<u32> = (0..len)
                .map(|i| {
                    if alphabet == 1 << 30 {
                        i as u32
                    } else {
                        rng.below(alphabet) as u32
                    }
                })
                .collect();
            let edits = rng.below(len as u64 / 4 + 3) as usize;
            let other = edit(&mut rng, &base, alphabet.min(1 << 20) * 2, edits);
            for (x, y) in [(&base, &other), (&other, &base)] {
                let input = input(x, y);
                assert_eq!(ours(&input), imara(&input), "case {case}: {x:?} onto {y:?}");
                checked += 1;
            }
        }
        assert_eq!(checked, 1_600);
    }

    /// Distinct lines, one changed every `gap`: every run the same length, where the
    /// scan stops early (the case imara-diff is quadratic on), and gaps that vary.
    #[test]
    fn flags_equal_imara_diff_with_evenly_and_unevenly_spaced_changes() {
        for (n, gap) in [(5_000u32, 100u32), (3_000, 7), (2_000, 1), (4_000, 250)] {
            let base: Vec<u32> = (0..n).collect();
            let even: Vec<u32> = (0..n)
                .map(|i| if i % gap == 0 { n + i } else { i })
                .collect();
            let uneven: Vec<u32> = (0..n)
                .map(|i| {
                    if (i * i) % (3 * gap + 1) == 0 {
                        n + i
                    } else {
                        i
                    }
                })
                .collect();
            for other in [even, uneven] {
                for (x, y) in [(&base, &other), (&other, &base)] {
                    let input = input(x, y);
                    assert_eq!(ours(&input), imara(&input), "n {n} gap {gap}");
                }
            }
        }
    }

    /// A line occurring about as often as the histogram counts (64) in a region:
    /// anchored up to 63 occurrences, a fallback to Myers from 64.
    #[test]
    fn flags_equal_imara_diff_around_the_chain_limit() {
        for k in 60..=68u32 {
            for (gap, other_gap) in [(1, 1), (1, 2), (3, 1), (2, 5)] {
                // Line 0 `k` times between distinct lines, against line 0 fewer times
                // between other distinct lines: line 0 is all they have in common.
                let spaced = |copies: u32, gap: u32, first: u32| -> Vec<u32> {
                    (0..copies)
                        .flat_map(|i| {
                            std::iter::once(0).chain((0..gap).map(move |g| first + i * 8 + g))
                        })
                        .collect()
                };
                let base = spaced(k, gap, 1_000);
                let other = spaced(k - 7, other_gap, 100_000);
                for (x, y) in [(&base, &other), (&other, &base)] {
                    let input = input(x, y);
                    assert_eq!(ours(&input), imara(&input), "k {k} gaps {gap} {other_gap}");
                }
            }
        }
    }

    /// A `Diff` made from flags has those flags, whatever they are.
    #[test]
    fn a_diff_of_flags_has_those_flags() {
        let mut rng = Rng(7);
        for case in 0..2_000 {
            let (n, m) = (rng.below(40) as usize, rng.below(40) as usize);
            let density = 1 + rng.below(4);
            let mut removed: Vec<bool> = (0..n).map(|_| rng.below(density + 1) == 0).collect();
            let mut added: Vec<bool> = (0..m).map(|_| rng.below(density + 1) == 0).collect();
            // As many unchanged lines on each side.
            let kept = |f: &[bool]| f.iter().filter(|&&x| !x).count();
            while kept(&removed) > kept(&added) {
                let i = removed.iter().position(|&x| !x).unwrap();
                removed[i] = true;
            }
            while kept(&added) > kept(&removed) {
                let i = added.iter().position(|&x| !x).unwrap();
                added[i] = true;
            }
            let d = diff_of_flags(removed.clone(), added.clone());
            let r: Vec<bool> = (0..n as u32).map(|i| d.is_removed(i)).collect();
            let a: Vec<bool> = (0..m as u32).map(|i| d.is_added(i)).collect();
            assert_eq!((r, a), (removed, added), "case {case}");
        }
    }
}
