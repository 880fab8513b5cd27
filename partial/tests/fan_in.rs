//! A roll-up within a memory budget (`rollup_within`): past the files the budget holds
//! open, the inputs are rolled up level by level, and the result is the one-step
//! roll-up's, byte for byte.

mod common;

use std::path::PathBuf;

use common::{build, random_rows, shard_files, Rng};
use covmerge_partial::{
    rollup, rollup_shard_within, rollup_within, shards_for, Partial, PartialError, OPEN_FILE_BYTES,
};

/// `days` day partials of random rows and shard counts, in `dir`.
fn day_partials(dir: &std::path::Path, days: usize, seed: u64) -> Vec<PathBuf> {
    let mut rng = Rng(seed);
    (0..days)
        .map(|i| {
            let n = 40 + rng.below(200) as usize;
            let rows = random_rows(&mut rng, n);
            let p = dir.join(format!("day-{i}"));
            let shards = [1u32, 2, 4, 8][rng.below(4) as usize];
            let day = format!("2026-11-{:02}", 1 + i % 28);
            build(&rows, &p, shards, &day, &day, usize::MAX);
            p
        })
        .collect()
}

#[test]
fn a_rollup_past_the_budget_goes_in_levels_and_gives_the_same_files() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs = day_partials(tmp.path(), 23, 7);
    let once = tmp.path().join("once");
    let want = rollup(&inputs, &once, Some(4)).unwrap();
    for max_open in [2usize, 3, 5, 40] {
        let out = tmp.path().join(format!("within-{max_open}"));
        let scratch = tmp.path().join(format!("scratch-{max_open}"));
        std::fs::create_dir_all(&scratch).unwrap();
        let (got, fan) =
            rollup_within(&inputs, &out, Some(4), max_open * OPEN_FILE_BYTES, &scratch).unwrap();
        assert_eq!(fan.max_open, max_open);
        // 23 inputs of 1, 2, 4 or 8 shards into 4: one or two files open each.
        if max_open < 23 {
            assert!(fan.intermediate >= 23 / max_open, "{fan:?}");
        } else {
            assert_eq!(fan.intermediate, 0, "{fan:?}");
        }
        assert_eq!(got, want, "max_open {max_open}");
        assert_eq!(shard_files(&out), shard_files(&once), "max_open {max_open}");
        // The intermediate partials are gone.
        assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
    }
}

#[test]
fn an_input_that_alone_opens_more_files_than_the_budget_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let rows = random_rows(&mut Rng(3), 300);
    let p = tmp.path().join("eight");
    build(&rows, &p, 8, "2026-11-01", "2026-11-01", usize::MAX);
    // 8 shards into 7: each output shard reads all 8 files; the budget holds 4.
    let err = rollup_within(
        std::slice::from_ref(&p),
        &tmp.path().join("out"),
        Some(7),
        4 * OPEN_FILE_BYTES,
        tmp.path(),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("eight") && msg.contains("8 shards") && msg.contains("open 8 files"),
        "{msg}"
    );
    assert!(!tmp.path().join("out").join("partial.json").exists());
    // Into 4 (a divisor of 8): two files each, within the budget.
    let (d, fan) = rollup_within(
        &[p],
        &tmp.path().join("out4"),
        Some(4),
        4 * OPEN_FILE_BYTES,
        tmp.path(),
    )
    .unwrap();
    assert_eq!((d.shard_count, fan.intermediate), (4, 0));
}

#[test]
fn two_namespaces_in_different_groups_are_refused_naming_the_inputs() {
    let tmp = tempfile::tempdir().unwrap();
    let mut inputs = day_partials(tmp.path(), 5, 11);
    let other = tmp.path().join("other-ns");
    let rows = random_rows(&mut Rng(5), 100);
    build(&rows, &other, 2, "2026-11-09", "2026-11-09", usize::MAX);
    let mut d = Partial::open(&other).unwrap().description().clone();
    d.namespace = "android".into();
    std::fs::write(other.join("partial.json"), d.to_json()).unwrap();
    inputs.push(other);
    let err = rollup_within(
        &inputs,
        &tmp.path().join("out"),
        Some(2),
        2 * OPEN_FILE_BYTES,
        tmp.path(),
    )
    .unwrap_err();
    assert!(matches!(err, PartialError::Namespaces { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("day-0") && msg.contains("other-ns"), "{msg}");
}

/// Shard by shard (`coordinator --rollup` of partials): each shard rolled up alone,
/// from only the input files that can hold its rows (the others removed), within any
/// budget, is the whole roll-up's shard, byte for byte, and counts its rows.
#[test]
fn each_shard_rolled_up_alone_from_its_files_is_the_rollups_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs = day_partials(tmp.path(), 13, 11);
    // Into 4, an input opens 1 or 2 files; into 3, as many as its shards (up to 8).
    for (n, budgets) in [(4u32, [2usize, 3, 64]), (3, [8, 9, 64])] {
        let once = tmp.path().join(format!("once-{n}"));
        let want = rollup(&inputs, &once, Some(n)).unwrap();
        let want_files = shard_files(&once);
        for max_open in budgets {
            let mut rows = want.counts.rows_bad;
            for j in 0..n {
                // Only the files of the shards that map to j are kept.
                let parts: Vec<Partial> = inputs
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let d = tmp.path().join(format!("only-{n}-{max_open}-{j}-{i}"));
                        std::fs::create_dir_all(&d).unwrap();
                        let full = Partial::open(p).unwrap();
                        let desc = full.description();
                        std::fs::copy(p.join("partial.json"), d.join("partial.json")).unwrap();
                        for s in shards_for(desc.shard_count, n, j) {
                            let f = &desc.shards[s as usize];
                            for e in [&f.lines, &f.funcs, &f.versions, &f.paths] {
                                std::fs::copy(p.join(&e.name), d.join(&e.name)).unwrap();
                            }
                        }
                        Partial::open(&d).unwrap()
                    })
                    .collect();
                let out = tmp.path().join(format!("shard-{n}-{max_open}-{j}"));
                let scratch = tmp.path().join(format!("scratch-{n}-{max_open}-{j}"));
                std::fs::create_dir_all(&scratch).unwrap();
                let budget = max_open * OPEN_FILE_BYTES;
                let (got, fan) = rollup_shard_within(&parts, &out, n, j, budget, &scratch).unwrap();
                if max_open == 64 {
                    assert_eq!(fan.intermediate, 0, "{fan:?}");
                } else {
                    assert!(fan.intermediate > 0, "{fan:?}");
                }
                assert_eq!(got.files, want.shards[j as usize], "{n} {max_open} {j}");
                let mine: Vec<_> = want_files
                    .iter()
                    .filter(|(name, _)| name.ends_with(&format!("-{j:05}.parquet")))
                    .cloned()
                    .collect();
                assert_eq!(shard_files(&out), mine, "{n} {max_open} {j}");
                assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
                rows += got.counts.rows_in;
            }
            assert_eq!(rows, want.counts.rows_in, "{n} {max_open}");
        }
    }
}
