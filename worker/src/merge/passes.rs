//! A shard whose tables outgrow their share of the memory budget (many distinct
//! paths, or large accumulators) is merged in passes, each over a range of its paths
//! in byte order: a pass reads every chunk again but interns and accumulates only the
//! paths of its range (and the strings their entries use), then writes them. A part's
//! files are in path order, so the passes' outputs end to end are the one-pass output,
//! byte for byte, and their counts add up to the one-pass counts (every count is some
//! file's).
//!
//! The ranges are cut from a sample of the paths a pass had seen when it went over,
//! each weighted by what it held, into parts of about equal weight, estimated as if
//! the paths seen were spread like all those of the range. With input sorted by path
//! they were its first paths only: every range but the last holds a fraction of a
//! share, and the last all the paths not seen. So after a pass, the ranges after it
//! of the same cut are joined while, by what that pass held against what its paths
//! held when cut, they hold at most 5/8 of the share together; the last range is
//! estimated to hold what the others do not. A range that still goes over is cut
//! again: each cut leaves out of each new range a path its parent held, so the
//! cutting ends (a range cut from a joined one is not joined by another cut's
//! estimate). A range whose one path goes over alone is merged without a limit (its
//! output is that large), but for its function names, which may be many more than
//! its lines: past the share they are counted in passes, each over the names of one
//! hash bucket, keeping each line's best name across them.

/// Paths `lo <= p < hi` in byte order (`None`: no bound on that side).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct PathRange {
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
}

impl PathRange {
    /// Every path.
    pub(super) fn all() -> Self {
        PathRange::default()
    }

    /// Whether this is every path.
    #[inline]
    pub(super) fn is_all(&self) -> bool {
        self.lo.is_none() && self.hi.is_none()
    }

    /// `p` only.
    pub(super) fn only(p: &[u8]) -> Self {
        PathRange {
            lo: Some(p.to_vec()),
            hi: Some(successor(p)),
        }
    }

    /// Whether `p` is in the range.
    #[inline]
    pub(super) fn contains(&self, p: &[u8]) -> bool {
        self.lo.as_deref().is_none_or(|lo| p >= lo) && self.hi.as_deref().is_none_or(|hi| p < hi)
    }

    /// Whether no path is in the range.
    pub(super) fn is_empty(&self) -> bool {
        matches!((&self.lo, &self.hi), (Some(lo), Some(hi)) if lo >= hi)
    }

    /// The paths of the range before `p`, and those after (`p` in the range).
    pub(super) fn around(&self, p: &[u8]) -> (PathRange, PathRange) {
        (
            PathRange {
                lo: self.lo.clone(),
                hi: Some(p.to_vec()),
            },
            PathRange {
                lo: Some(successor(p)),
                hi: self.hi.clone(),
            },
        )
    }

    /// This range and `next`, which starts where this one ends, as one range.
    pub(super) fn join(&self, next: &PathRange) -> Option<PathRange> {
        (self.hi.is_some() && self.hi == next.lo).then(|| PathRange {
            lo: self.lo.clone(),
            hi: next.hi.clone(),
        })
    }

    /// Cuts the range into about `parts` ranges (at least two, in path order) of
    /// about equal weight by `sample`: paths of the range, each with the bytes it
    /// stands for. Each range leaves out a path of the sample. With fewer than two
    /// distinct paths there is no cut: the range itself. Each range comes with the
    /// weight of the sample in it.
    pub(super) fn split(
        &self,
        mut sample: Vec<(Vec<u8>, u64)>,
        parts: usize,
    ) -> Vec<(PathRange, u64)> {
        sample.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        sample.dedup_by(|a, kept| {
            let same = a.0 == kept.0;
            if same {
                kept.1 += a.1;
            }
            same
        });
        if sample.len() < 2 {
            let w = sample.iter().map(|s| s.1).sum();
            return vec![(self.clone(), w)];
        }
        let parts = parts.max(2) as u128;
        let total: u128 = sample.iter().map(|s| u128::from(s.1)).sum();
        // A cut before sample `i` once the weight before it reaches the next
        // `k/parts` of the total, or when `i` alone weighs a part (it then starts a
        // range, and the next cut ends it); never before the first: each range leaves
        // a sampled path out.
        let mut cuts: Vec<(&[u8], u64)> = Vec::new();
        let (mut before, mut current, mut k) = (0u128, 0u128, 1u128);
        for (i, (path, w)) in sample.iter().enumerate() {
            let w = u128::from(*w);
            let due = k < parts && before * parts >= total * k;
            let heavy = current > 0 && w * parts >= total;
            if i > 0 && (due || heavy) {
                cuts.push((path, current as u64));
                current = 0;
                while k < parts && before * parts >= total * k {
                    k += 1;
                }
            }
            before += w;
            current += w;
        }
        if cuts.is_empty() {
            // The last path weighs more than the rest together: it alone.
            let last = &sample[sample.len() - 1];
            current = u128::from(last.1);
            cuts.push((&last.0, (total - current) as u64));
        }
        let mut ranges = Vec::with_capacity(cuts.len() + 1);
        let mut lo = self.lo.clone();
        for (c, w) in cuts {
            ranges.push((
                PathRange {
                    lo,
                    hi: Some(c.to_vec()),
                },
                w,
            ));
            lo = Some(c.to_vec());
        }
        ranges.push((
            PathRange {
                lo,
                hi: self.hi.clone(),
            },
            current as u64,
        ));
        ranges
    }
}

/// A range of paths still to merge, and how.
pub(super) struct Todo {
    pub(super) range: PathRange,
    pub(super) how: How,
}

/// How a range is merged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum How {
    /// With its tables within their share. A range cut from a sample (`seen > 0`):
    /// the bytes its sampled paths held in the pass that cut it, and the cut's number;
    /// for the last range of the cut, `tail`: the bytes the whole cut range was
    /// estimated to hold, and those its sample held. `fresh`: it may be joined by the
    /// estimate of another cut (not when cut from a range joined so).
    Bounded {
        seen: u64,
        cut: u32,
        tail: Option<(u64, u64)>,
        fresh: bool,
    },
    /// One path whose tables alone outgrow the share: merged without a limit. When
    /// its function names are what is large, they are counted in `k` passes, each
    /// over the names whose hash is `j` modulo `k` (other names are absent for naming
    /// only: the sums are the same in each), and the best name of each line is kept
    /// across the passes.
    Alone { k: u32, j: u32 },
}

impl Todo {
    pub(super) fn bounded(range: PathRange) -> Self {
        Todo {
            range,
            how: How::Bounded {
                seen: 0,
                cut: 0,
                tail: None,
                fresh: false,
            },
        }
    }
}

/// What a range cut from a sample is estimated to hold at the end of its pass, by
/// `growth` (bytes at the end per byte seen when cut).
fn estimate(seen: u64, tail: Option<(u64, u64)>, growth: f64) -> f64 {
    let own = seen as f64 * growth;
    match tail {
        None => own,
        // The last range of a cut holds what the others do not: with input sorted by
        // path, every path after the last one the cutting pass had seen.
        Some((whole, sampled)) => {
            own.max(whole as f64 - sampled.saturating_sub(seen) as f64 * growth)
        }
    }
}

/// Joins to `t` the ranges after it of the same cut while they are estimated to hold
/// together at most 5/8 of `limit`, by the growth of the last pass over a range of a
/// cut. A cut's ranges are of about equal *estimated* weight, estimated as if the
/// paths the cutting pass had seen were spread like all those of the range; with
/// input sorted by path they were the first ones only, and all but the last range
/// hold a fraction of a share each: joined, they take as many passes as the paths
/// need. Returns whether any was joined.
pub(super) fn coalesce(
    t: &mut Todo,
    todo: &mut Vec<Todo>,
    growth: Option<(u32, f64)>,
    limit: usize,
) -> bool {
    let How::Bounded {
        mut seen,
        cut,
        mut tail,
        fresh,
    } = t.how
    else {
        return false;
    };
    let Some((of, g)) = growth else {
        return false;
    };
    if seen == 0 || !(of == cut || fresh) {
        return false;
    }
    let cap = limit as f64 * 5.0 / 8.0;
    let mut joined = false;
    while let Some(next) = todo.last() {
        let How::Bounded {
            seen: s,
            cut: c,
            tail: tl,
            ..
        } = next.how
        else {
            break;
        };
        if c != cut || s == 0 || tail.is_some() || estimate(seen + s, tl, g) > cap {
            break;
        }
        let Some(r) = t.range.join(&next.range) else {
            break;
        };
        t.range = r;
        (seen, tail, joined) = (seen + s, tl, true);
        todo.pop();
    }
    t.how = How::Bounded {
        seen,
        cut,
        tail,
        fresh,
    };
    joined
}

/// The least path after `p`.
fn successor(p: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(p.len() + 1);
    s.extend_from_slice(p);
    s.push(0);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| format!("d{}/p{i}.c", i % 7).into_bytes())
            .collect()
    }

    fn unweighed(ranges: Vec<(PathRange, u64)>) -> Vec<PathRange> {
        ranges.into_iter().map(|r| r.0).collect()
    }

    /// The ranges of a split cover the range's paths once each, in order.
    fn assert_partition(range: &PathRange, ranges: &[PathRange], all: &[Vec<u8>]) {
        for p in all.iter().filter(|p| range.contains(p)) {
            let n = ranges.iter().filter(|r| r.contains(p)).count();
            assert_eq!(n, 1, "{} is in {n} ranges", String::from_utf8_lossy(p));
        }
        for p in all.iter().filter(|p| !range.contains(p)) {
            assert!(ranges.iter().all(|r| !r.contains(p)));
        }
        for w in ranges.windows(2) {
            assert_eq!(w[0].hi, w[1].lo, "adjacent");
            assert!(!w[0].is_empty() && !w[1].is_empty());
        }
        assert_eq!(ranges.first().unwrap().lo, range.lo);
        assert_eq!(ranges.last().unwrap().hi, range.hi);
    }

    #[test]
    fn a_split_covers_its_range_once_in_parts_of_about_equal_weight() {
        let all = paths(10_000);
        let sample: Vec<(Vec<u8>, u64)> = all.iter().step_by(3).map(|p| (p.clone(), 3)).collect();
        let weighed = PathRange::all().split(sample.clone(), 8);
        // Each range with the sample's weight in it.
        for (r, w) in &weighed {
            let want: u64 = sample
                .iter()
                .filter(|s| r.contains(&s.0))
                .map(|s| s.1)
                .sum();
            assert_eq!(*w, want, "{r:?}");
        }
        let ranges = unweighed(weighed);
        assert_eq!(ranges.len(), 8);
        assert_partition(&PathRange::all(), &ranges, &all);
        for r in &ranges {
            let n = all.iter().filter(|p| r.contains(p)).count();
            assert!((1_100..1_400).contains(&n), "{n} paths in {r:?}");
        }
        // A sub-range splits within itself.
        let inner = ranges[3].clone();
        let sample: Vec<(Vec<u8>, u64)> = all
            .iter()
            .filter(|p| inner.contains(p))
            .map(|p| (p.clone(), 1))
            .collect();
        let sub = unweighed(inner.split(sample, 3));
        assert_eq!(sub.len(), 3);
        assert_partition(&inner, &sub, &all);
    }

    #[test]
    fn weights_move_the_cuts_and_every_range_leaves_out_a_sampled_path() {
        let all = paths(100);
        let mut sorted = all.clone();
        sorted.sort();
        // One heavy path in the middle: it gets a range of its own or nearly.
        let heavy = sorted[50].clone();
        let sample: Vec<(Vec<u8>, u64)> = all
            .iter()
            .map(|p| (p.clone(), if *p == heavy { 1_000 } else { 1 }))
            .collect();
        let ranges = unweighed(PathRange::all().split(sample.clone(), 4));
        assert_partition(&PathRange::all(), &ranges, &all);
        let with_heavy = ranges.iter().find(|r| r.contains(&heavy)).unwrap();
        let n = all.iter().filter(|p| with_heavy.contains(p)).count();
        assert!(n <= 2, "{n} paths share the heavy one's range");
        for r in &ranges {
            assert!(sample.iter().any(|(p, _)| !r.contains(p)));
        }
        // The last path outweighs the rest: it is cut off alone.
        let last = sorted[99].clone();
        let sample: Vec<(Vec<u8>, u64)> = all
            .iter()
            .map(|p| (p.clone(), if *p == last { 1_000 } else { 1 }))
            .collect();
        let weighed = PathRange::all().split(sample, 2);
        assert_eq!(weighed[0].1, 99);
        assert_eq!(weighed[1].1, 1_000);
        let ranges = unweighed(weighed);
        assert_eq!(ranges.len(), 2);
        assert_partition(&PathRange::all(), &ranges, &all);
        assert_eq!(
            ranges[1],
            PathRange {
                lo: Some(last),
                hi: None
            }
        );
    }

    #[test]
    fn one_path_is_not_cut_and_is_isolated_by_around_and_only() {
        let r = PathRange::all();
        assert_eq!(
            r.split(vec![(b"a.c".to_vec(), 5), (b"a.c".to_vec(), 5)], 4),
            vec![(r.clone(), 10)]
        );
        let (below, above) = r.around(b"m.c");
        let only = PathRange::only(b"m.c");
        for p in [&b"a.c"[..], b"m", b"m.c", b"m.c\0", b"m.c/x", b"z"] {
            let n = [&below, &only, &above]
                .iter()
                .filter(|r| r.contains(p))
                .count();
            assert_eq!(n, 1, "{}", String::from_utf8_lossy(p));
        }
        assert!(only.contains(b"m.c") && !only.contains(b"m.c\0"));
        assert!(PathRange::only(b"a").around(b"a").0.is_empty());
        assert!(PathRange::only(b"a").around(b"a").1.is_empty());
        assert!(!below.is_empty() && !above.is_empty() && r.is_all() && !only.is_all());
    }
}
