//! One shard of a partial written alone (a merge task's share of a job's partial):
//! byte for byte the files a builder of the whole partial writes for that shard, with
//! the counts of that shard's rows; and the special rows a partial read back gives.

mod common;

use common::{build, random_rows, shard_files, Rng};
use covmerge_partial::{
    add_partial_counts, Builder, Description, PartialCounts, RawRow, ShardFiles,
};
use covmerge_proto::shard_hash::shard_of;

/// Builds each shard of `n` alone from the rows of `rows` that are of it (limit
/// `limit`): the shards' files and the sum of their counts.
fn by_shard(
    rows: &[common::Row],
    n: u32,
    limit: usize,
    dir: &std::path::Path,
) -> (Vec<ShardFiles>, PartialCounts) {
    let mut files = Vec::new();
    let mut counts = PartialCounts::default();
    for j in 0..n {
        let mut b = Builder::for_shard(j, n, limit, dir).unwrap();
        for r in rows.iter().filter(|r| !r.bad && r.other_ns.is_none()) {
            if shard_of(r.path.as_bytes(), n).0 != j {
                continue;
            }
            b.add(&RawRow {
                path: &r.path,
                commit: &r.commit,
                version: r.version.as_deref(),
                manager: &r.manager,
                func_name: &r.func,
                line: r.line,
                hits: r.hits,
                rows: 1,
            })
            .unwrap();
        }
        let own = dir.join(format!("shard-{j}"));
        let s = b.finish_shard(&own).unwrap();
        // Each shard in its own directory (as each merge task writes), gathered.
        std::fs::create_dir_all(dir.join("shards")).unwrap();
        for e in std::fs::read_dir(&own).unwrap() {
            let p = e.unwrap().path();
            std::fs::rename(&p, dir.join("shards").join(p.file_name().unwrap())).unwrap();
        }
        add_partial_counts(&mut counts, &s.counts);
        files.push(s.files);
    }
    (files, counts)
}

#[test]
fn a_shard_written_alone_is_the_whole_partials_shard_byte_for_byte() {
    for seed in 0..6u64 {
        let mut rng = Rng(0xabc ^ ((seed + 1) * 0x9e37_79b9));
        let n = 400 + rng.below(1200) as usize;
        let rows = random_rows(&mut rng, n);
        for n in [1u32, 3, 7] {
            let tmp = tempfile::tempdir().unwrap();
            let all = tmp.path().join("all");
            let want: Description = build(&rows, &all, n, "2026-01-01", "2026-01-01", usize::MAX);
            // Unlimited, and with runs spilled every few rows.
            for limit in [usize::MAX, 1500] {
                let work = tmp.path().join(format!("w{limit}"));
                std::fs::create_dir_all(&work).unwrap();
                let (got, counts) = by_shard(&rows, n, limit, &work);
                assert_eq!(got, want.shards, "seed {seed}, {n} shards, limit {limit}");
                let w = &want.counts;
                assert_eq!(counts.rows_in + w.rows_bad, w.rows_in, "seed {seed}");
                assert_eq!(counts.rows_without_line, w.rows_without_line);
                assert_eq!(counts.rows_without_version, w.rows_without_version);
                assert_eq!(counts.hits_without_version, w.hits_without_version);
                let a = shard_files(&all);
                let b = shard_files(&work.join("shards"));
                assert_eq!(a, b, "seed {seed}, {n} shards, limit {limit}");
            }
        }
    }
}

#[test]
fn a_shard_builder_refuses_a_path_of_another_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let path = "fs/ext4/inode.c";
    let j = shard_of(path.as_bytes(), 3).0;
    let mut b = Builder::for_shard((j + 1) % 3, 3, usize::MAX, tmp.path()).unwrap();
    let e = b.add_without_line(path, 1).unwrap_err().to_string();
    assert!(
        e.contains("fs/ext4/inode.c") && e.contains("not of shard"),
        "{e}"
    );
    let b = Builder::for_shard(j, 3, usize::MAX, tmp.path()).unwrap();
    let e = b.finish(&tmp.path().join("x")).unwrap_err().to_string();
    assert!(e.contains("finish_shard"), "{e}");
}

#[test]
fn votes_paths_and_rows_without_version_are_the_rows_they_stand_for() {
    // A partial of raw rows, and one built from its tables' rows as special rows,
    // hold the same tables.
    let tmp = tempfile::tempdir().unwrap();
    let v = common::blob(7);
    let raw = |b: &mut Builder| {
        for (line, func, hits) in [(3, "f", 5), (3, "g", 0), (4, "", 1), (0, "f", 9)] {
            b.add(&RawRow {
                path: "a.c",
                commit: "c1",
                version: Some(&v),
                manager: "m",
                func_name: func,
                line,
                hits,
                rows: 1,
            })
            .unwrap();
        }
        b.add(&RawRow {
            path: "a.c",
            commit: "c2",
            version: None,
            manager: "m",
            func_name: "",
            line: 2,
            hits: 4,
            rows: 2,
        })
        .unwrap();
    };
    let mut a = Builder::for_shard(0, 1, usize::MAX, tmp.path()).unwrap();
    raw(&mut a);
    a.add_without_line("b.c", 0).unwrap();
    let a = a.finish_shard(&tmp.path().join("a")).unwrap();

    let mut b = Builder::for_shard(0, 1, usize::MAX, tmp.path()).unwrap();
    for (line, hits) in [(3, 5), (4, 1)] {
        b.add(&RawRow {
            path: "a.c",
            commit: "c1",
            version: Some(&v),
            manager: "m",
            func_name: "",
            line,
            hits,
            rows: if line == 3 { 2 } else { 1 },
        })
        .unwrap();
    }
    b.add_vote("a.c", &v, "c1", 3, "f", 1).unwrap();
    b.add_vote("a.c", &v, "c1", 3, "g", 1).unwrap();
    b.add_without_line("a.c", 1).unwrap();
    b.add_without_version("a.c", 2, 4).unwrap();
    b.add_without_line("b.c", 0).unwrap();
    let b = b.finish_shard(&tmp.path().join("b")).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.counts.rows_in, 6);
    assert_eq!(a.files.paths.rows, 2);
}
