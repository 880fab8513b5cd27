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
//!   lines all occur adjacent in `before` ([`index::Index`]'s `stretch`, its maximum over a
//!   range read from a table over blocks).
//!
//! Where imara-diff's histogram falls back to Myers (every common line of a region
//! occurring more than 63 times in its `before`) this runs imara-diff's Myers on the
//! same region. `tests` check the flags against imara-diff's on generated pairs.
//!
//! - `mod.rs` (here): the diff of two middles, region after region.
//! - `index.rs`: the index the search for a region's run reads.
//! - `fallback.rs`: the regions given to Myers, in pieces when its preprocessing
//!   would take quadratic time.

use imara_diff::{Algorithm, Diff, Token};

mod fallback;
mod index;

use index::Index;

/// The removed and added flags of imara-diff's `Diff::compute(Algorithm::Histogram)`
/// of `before` against `after` (tokens below `num_tokens`).
///
/// But for one thing: a region imara-diff would give to Myers whose preprocessing
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
        fallback::diff(&b[b0..b1], &a[a0..a1], &mut rm[b0..b1], &mut ad[a0..a1]);
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
mod tests;
