//! The histogram line diff of git (`xdiff/xhistogram.c`, `git diff --histogram`), in
//! time near linear on long files whose lines are mostly unique.
//!
//! The histogram finds in a region the rarest, then longest, common run of lines,
//! diffs the part before it recursively and loops on the part after it. git (and
//! imara-diff, whose histogram this one replaced) rebuild the histogram of the
//! region's `before` and scan the whole of its `after` at each step. When the run
//! taken is near the start of the region (every run the same length: the first one
//! wins), each step costs the rest of the file and the diff is quadratic: a change
//! every 100 lines of an n-line file visits n²/200 lines. This one takes the same
//! runs, in the same order, with:
//!
//! - the occurrences of a line within a region read from one sorted list of its
//!   positions (two binary searches), instead of a histogram rebuilt per region;
//! - a scan of `after` that stops once no run it could still find would replace the
//!   one it holds: a run whose rarest line occurs once (the rarest there is) is
//!   replaced only by a longer run, and no common run through a line of `after` is
//!   longer than the stretch of `after` around that line whose adjacent pairs of
//!   lines all occur adjacent in `before` ([`index::Index`]'s `stretch`, its maximum over a
//!   range read from a table over blocks).
//!
//! Three things are git's and not imara-diff 0.2's `Algorithm::Histogram`, whose
//! results lost unchanged lines of files with many repeated lines: the whole files are
//! diffed (imara-diff takes off their common prefix and suffix first, and its runs
//! then anchor elsewhere); after a run the next occurrence of a line tried is the
//! first past the run in `before` (imara-diff compared it with the run's end in
//! `after`); and the chain limit is git's 64 (a run is taken if its rarest line occurs
//! at most 64 times in the region, a line of more than 65 is never tried; imara-diff
//! took 63 and counted no line past 64). A region without such a run goes to
//! imara-diff's Myers, as git's goes to its own. `tests` check the flags against a
//! plain rendering of git's algorithm on generated pairs, and against the lines
//! `git diff --histogram` keeps on files of repeated lines. Which of equal lines a
//! hunk keeps is then git's too: the hunks are slid by [`crate::compact`].
//!
//! - `mod.rs` (here): the diff of two files, region after region.
//! - `index.rs`: the index the search for a region's run reads.
//! - `fallback.rs`: the regions given to Myers, in pieces when its preprocessing
//!   would take quadratic time.

use imara_diff::Token;

mod fallback;
mod index;

use index::Index;

/// The removed and added flags of git's histogram diff (`git diff --histogram`) of
/// `before` against `after` (tokens below `num_tokens`), with imara-diff's chain limit
/// and its Myers for the regions the histogram gives up on.
///
/// But for one thing: a region given to Myers whose preprocessing
/// would take more than [`fallback::MAX_PRUNE_STEPS`] is cut into as many pieces a side as make
/// each at most [`fallback::PIECE_LINES`] lines, paired in order, and each pair is given to
/// Myers: a valid diff (an unchanged line is the same text on both sides, in order),
/// found in time linear in the region, where imara-diff's took its square.
pub(crate) fn histogram_flags(
    before: &[Token],
    after: &[Token],
    num_tokens: u32,
) -> (Vec<bool>, Vec<bool>) {
    let mut removed = vec![false; before.len()];
    let mut added = vec![false; after.len()];
    // The whole files, as git diffs them: a common prefix and suffix are not taken
    // off first (imara-diff takes them off, and its runs then anchor elsewhere: a file
    // of repeated lines kept 69 of 132 lines where git keeps 126).
    let (b, a, rm, ad) = (before, after, &mut removed[..], &mut added[..]);
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
        fallback::diff(&b[b0..b1], &a[a0..a1], &mut rm[b0..b1], &mut ad[a0..a1]);
    }
    (removed, added)
}

#[cfg(test)]
mod tests;
