//! A builder's sums held within its limit as it counts them, whatever the limit: all in
//! memory, a few runs spilled or many, the same files.

use std::path::Path;

use covmerge_partial::{Builder, RawRow};

mod common;
use common::{held_rows as rows, HeldRow as Row};

/// Builds shard 0 of 1 of `rows` within `limit`, checking what the builder counts
/// after every row; returns the files' bytes.
fn build(rows: &[Row], limit: usize, dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut b = Builder::for_shard(0, 1, limit, dir).unwrap();
    let mut most = 0;
    for (path, version, commit, manager, func, line, hits) in rows {
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
    // The names of one row past the limit at most.
    assert!(
        most <= limit.saturating_add(1024),
        "held {most} bytes, limit {limit} (rows {})",
        rows.len()
    );
    let out = tempfile::tempdir_in(dir).unwrap();
    let out = out.path();
    b.finish_shard(out).unwrap();
    let mut files: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn sums_in_memory_or_in_runs_write_the_same_files_within_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    for seed in [1u64, 2] {
        let rows = rows(seed, 4, 12);
        // Unlimited (no run), a few runs, many runs (a limit without a table of
        // recent keys).
        let want = build(&rows, usize::MAX, tmp.path());
        for limit in [256 << 10, 96 << 10, 16_000] {
            let got = build(&rows, limit, tmp.path());
            assert_eq!(got.len(), want.len());
            for (a, b) in got.iter().zip(&want) {
                assert!(a == b, "seed {seed}, limit {limit}: {} differs", a.0);
            }
        }
    }
}
