//! The regions of the histogram that imara-diff's gives to Myers (every common line
//! occurring more than its chain limit), diffed by imara-diff's Myers: whole, or in
//! pieces when its preprocessing would take the square of the region.

use imara_diff::{Algorithm, Diff, Token};

/// Steps imara-diff's Myers may spend pruning a region before it diffs it, past
/// which the region is diffed in pieces (see [`prune_scan_steps`]): ~60-90 ms.
pub(super) const MAX_PRUNE_STEPS: u64 = 1 << 26;

/// Lines a side of a piece of a region diffed in pieces: pruning one takes at most
/// about [`MAX_PRUNE_STEPS`].
pub(super) const PIECE_LINES: usize = 1 << 13;

/// The steps imara-diff 0.2's Myers spends in its preprocessing of `before` against
/// `after`: for each line very common in the other file (`sqrt(len)` times or more),
/// `should_prune_common_line` scans back over the lines before it that are absent
/// from the other file or very common there, down to the 100th line of the region
/// (its window's start is `WINDOW_SIZE`, not `pos - WINDOW_SIZE`), so a long run of
/// such lines costs the square of its length (80,000 lines, every other blank and the
/// rest in one file only: 12 s). Counted here in linear time, the way it computes
/// which lines are which.
pub(super) fn prune_scan_steps(before: &[Token], after: &[Token]) -> u64 {
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

/// Diffs a region that imara-diff's histogram gives to Myers, `before` against
/// `after`, into the flags given: by Myers whole, or, when its preprocessing would
/// take more than [`MAX_PRUNE_STEPS`], in as many pieces a side as make each at most
/// [`PIECE_LINES`] lines, paired in order.
pub(super) fn diff(before: &[Token], after: &[Token], removed: &mut [bool], added: &mut [bool]) {
    let (b, a, rm, ad) = (before, after, removed, added);
    if prune_scan_steps(b, a) <= MAX_PRUNE_STEPS {
        myers(b, a, rm, ad);
        return;
    }
    let (nb, na) = (b.len(), a.len());
    let k = nb.max(na).div_ceil(PIECE_LINES);
    for i in 0..k {
        let (pb0, pb1) = (nb * i / k, nb * (i + 1) / k);
        let (pa0, pa1) = (na * i / k, na * (i + 1) / k);
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
