//! How a sum of hits adds more: saturating below [`ABSENT`], the sentinel of a slot
//! no row hit, so that no sum is ever taken for it. Sums in memory (`sums.rs`) and in
//! the runs spilled to disk (`runs.rs`) add this way.

/// A slot a manager did not hit in a dense vector. Sums below it are exact: a
/// manager's sum never exceeds its line's `*` sum, which fails the merge past
/// `i64::MAX`.
pub(super) const ABSENT: u64 = u64::MAX;

/// `sum` (or [`ABSENT`]: none yet) plus `hits`, below [`ABSENT`].
pub(super) fn add_sum(sum: u64, hits: u64) -> u64 {
    if sum == ABSENT {
        hits.min(ABSENT - 1)
    } else {
        sum.saturating_add(hits).min(ABSENT - 1)
    }
}
