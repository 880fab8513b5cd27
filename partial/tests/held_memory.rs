//! What a builder holding many versions, managers and functions allocates: within
//! its limit as it counts it, and within about twice the limit as the allocator does
//! (alone in its test binary, so that no other test's allocations count).

use std::sync::atomic::Ordering;

use covmerge_partial::{Builder, RawRow};

mod common;
use common::held_rows as rows;

mod counting;
use counting::{NOW, PEAK};

#[test]
fn many_versions_managers_and_functions_stay_within_the_limit() {
    // 3 paths × 60 versions × 40 managers, a few hundred thousand rows: far more sums
    // than the limit holds.
    let rows = rows(7, 60, 40);
    let tmp = tempfile::tempdir().unwrap();
    let limit = 2 << 20;
    let base = NOW.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let mut b = Builder::for_shard(0, 1, limit, tmp.path()).unwrap();
    let mut most = 0;
    for (path, version, commit, manager, func, line, hits) in &rows {
        b.add(&RawRow {
            path,
            commit,
            version: Some(version),
            manager,
            func_name: func,
            line: *line,
            hits: *hits,
            rows: 1,
        })
        .unwrap();
        most = most.max(b.held_bytes());
    }
    assert!(b.runs() > 1, "the rows should not fit: {} runs", b.runs());
    assert!(most <= limit + 1024, "held {most} bytes, limit {limit}");
    // What was allocated while adding (the builder, a run's writer and its row
    // group): within twice the limit. Other tests of this binary run beside, so the
    // peak is of all; they hold little.
    let peak = PEAK.load(Ordering::Relaxed) - base;
    assert!(
        peak <= 2 * limit + (4 << 20),
        "peak {peak} bytes, limit {limit}"
    );
    drop(b);
}
