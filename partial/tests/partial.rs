//! Partials: write/read round trip against a model of the sums, roll-ups of random
//! groupings equal to the partial of all rows, and refused files (contract §10).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{build, random_rows, shard_files, Rng, Row};
use covmerge_partial::{rollup, Content, Partial, PartialError};

/// The sums a partial of `rows` must hold, computed the plain way.
#[derive(Debug, Default, PartialEq)]
struct Model {
    lines: BTreeMap<(String, String, String, u32), (u64, u64)>,
    funcs: BTreeMap<(String, String, u32, String), u64>,
    versions: BTreeMap<(String, String), String>,
    paths: BTreeMap<String, (u64, u64, u64)>,
    rows_in: u64,
    rows_bad: u64,
    others: BTreeMap<String, u64>,
}

fn model(rows: &[Row]) -> Model {
    let mut m = Model::default();
    for r in rows {
        if r.bad {
            m.rows_in += 1;
            m.rows_bad += 1;
            continue;
        }
        if let Some(ns) = &r.other_ns {
            *m.others.entry(ns.clone()).or_default() += 1;
            continue;
        }
        m.rows_in += 1;
        let p = m.paths.entry(r.path.clone()).or_default();
        if r.line == 0 {
            p.0 += 1;
            continue;
        }
        let Some(v) = &r.version else {
            p.1 += 1;
            p.2 = p.2.saturating_add(r.hits);
            continue;
        };
        let l = m
            .lines
            .entry((r.path.clone(), v.clone(), r.manager.clone(), r.line))
            .or_default();
        l.0 = l.0.saturating_add(r.hits);
        l.1 += 1;
        if !r.func.is_empty() {
            *m.funcs
                .entry((r.path.clone(), v.clone(), r.line, r.func.clone()))
                .or_default() += 1;
        }
        let c = m
            .versions
            .entry((r.path.clone(), v.clone()))
            .or_insert_with(|| r.commit.clone());
        if r.commit < *c {
            c.clone_from(&r.commit);
        }
    }
    m
}

fn model_of(c: &Content) -> Model {
    let mut m = Model::default();
    for l in &c.lines {
        let old = m.lines.insert(
            (l.path.clone(), l.version.clone(), l.manager.clone(), l.line),
            (l.hits, l.rows),
        );
        assert!(old.is_none(), "a key twice: {l:?}");
    }
    for f in &c.funcs {
        m.funcs.insert(
            (
                f.path.clone(),
                f.version.clone(),
                f.line,
                f.func_name.clone(),
            ),
            f.rows,
        );
    }
    for v in &c.versions {
        m.versions
            .insert((v.path.clone(), v.version.clone()), v.commit.clone());
    }
    for p in &c.paths {
        m.paths.insert(
            p.path.clone(),
            (
                p.rows_without_line,
                p.rows_without_version,
                p.hits_without_version,
            ),
        );
    }
    m
}

#[test]
fn round_trip_holds_the_sums_of_the_rows() {
    for (seed, shards, limit) in [(1u64, 1u32, usize::MAX), (2, 4, usize::MAX), (3, 7, 3000)] {
        let rows = random_rows(&mut Rng(seed * 7 + 1), 1500);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        let d = build(&rows, &dir, shards, "2026-12-04", "2026-12-04", limit);
        let want = model(&rows);
        let p = Partial::open(&dir).unwrap();
        assert_eq!(p.description(), &d);
        assert_eq!(d.shard_count, shards);
        let c = p.content().unwrap();
        let mut got = model_of(&c);
        got.rows_in = d.counts.rows_in;
        got.rows_bad = d.counts.rows_bad;
        got.others = d.other_namespaces.listed.clone();
        let unlisted: u64 = want.others.values().skip(16).sum();
        assert_eq!(d.other_namespaces.unlisted_rows, unlisted);
        let mut want_listed = want.others.clone();
        while want_listed.len() > 16 {
            want_listed.pop_last();
        }
        let want = Model {
            others: want_listed,
            ..want
        };
        assert_eq!(got.lines, want.lines, "seed {seed}");
        assert_eq!(got.funcs, want.funcs, "seed {seed}");
        assert_eq!(got.versions, want.versions, "seed {seed}");
        assert_eq!(got.paths, want.paths, "seed {seed}");
        assert_eq!(
            (got.rows_in, got.rows_bad, &got.others),
            (want.rows_in, want.rows_bad, &want.others),
            "seed {seed}"
        );
        // Saturated sums are there (three rows of 2^63 − 1 on one key at least once).
        assert!(
            c.lines.iter().any(|l| l.hits == u64::MAX),
            "seed {seed}: no saturated key"
        );
        // Each file's rows are in its shard and in key order: checked by the reader;
        // the description's redundant totals agree with the tables.
        let wl: u64 = c.paths.iter().map(|p| p.rows_without_line).sum();
        assert_eq!(d.counts.rows_without_line, wl);
        assert!(d.counts.namespace_column);
        assert_eq!(d.date_from, "2026-12-04");
    }
}

/// Splits `rows` into `k` random groups (some possibly empty).
fn groups(rng: &mut Rng, rows: &[Row], k: usize) -> Vec<Vec<Row>> {
    let mut g = vec![Vec::new(); k];
    for r in rows {
        g[rng.below(k as u64) as usize].push(r.clone());
    }
    g
}

/// Rolls `parts` up in a random tree: random pairs or triples at a time, in random
/// order, each into random shard counts, until one is left; the last into `shards`.
fn random_tree(rng: &mut Rng, mut parts: Vec<PathBuf>, work: &Path, shards: u32) -> PathBuf {
    let mut k = 0;
    while parts.len() > 1 {
        let take = (2 + rng.below(2) as usize).min(parts.len());
        let mut chosen = Vec::new();
        for _ in 0..take {
            let i = rng.below(parts.len() as u64) as usize;
            chosen.push(parts.swap_remove(i));
        }
        let out = work.join(format!("roll-{k}"));
        k += 1;
        let n = if parts.is_empty() {
            Some(shards)
        } else {
            [None, Some(1), Some(2), Some(3), Some(5), Some(8)][rng.below(6) as usize]
        };
        rollup(&chosen, &out, n).unwrap();
        parts.push(out);
    }
    let last = parts.pop().unwrap();
    if Partial::open(&last).unwrap().description().shard_count == shards {
        return last;
    }
    let out = work.join("final");
    rollup(&[last], &out, Some(shards)).unwrap();
    out
}

#[test]
fn rollups_of_any_grouping_equal_the_partial_of_all_rows() {
    for seed in 0..10u64 {
        let mut rng = Rng(0x5eed ^ ((seed + 1) * 0x9e37_79b9));
        let n = 300 + rng.below(1500) as usize;
        let rows = random_rows(&mut rng, n);
        let tmp = tempfile::tempdir().unwrap();
        let all = tmp.path().join("all");
        let want = build(&rows, &all, 4, "2026-10-01", "2026-12-31", usize::MAX);
        let k = 1 + rng.below(7) as usize;
        let mut parts = Vec::new();
        let mut days = Vec::new();
        for (i, g) in groups(&mut rng, &rows, k).iter().enumerate() {
            let dir = tmp.path().join(format!("day-{i}"));
            let shards = [1u32, 2, 3, 4, 8][rng.below(5) as usize];
            let day = format!("2026-{:02}-{:02}", 10 + rng.below(3), 1 + rng.below(28));
            let limit = if rng.below(3) == 0 { 2000 } else { usize::MAX };
            build(g, &dir, shards, &day, &day, limit);
            days.push(day);
            parts.push(dir);
        }
        let got_dir = random_tree(&mut rng, parts, tmp.path(), 4);
        let got = Partial::open(&got_dir).unwrap().description().clone();
        // The period spans the inputs' days.
        days.sort();
        assert_eq!(got.date_from, days[0], "seed {seed}");
        assert_eq!(&got.date_to, days.last().unwrap(), "seed {seed}");
        // Apart from the dates, the same description (counts, sizes, SHA-256s)...
        let same_dates = covmerge_partial::Description {
            date_from: want.date_from.clone(),
            date_to: want.date_to.clone(),
            ..got.clone()
        };
        assert_eq!(same_dates, want, "seed {seed} ({k} groups)");
        // ...and byte-identical shard files.
        let (a, b) = (shard_files(&all), shard_files(&got_dir));
        assert_eq!(a.len(), 16);
        assert_eq!(
            a.iter().map(|x| &x.0).collect::<Vec<_>>(),
            b.iter().map(|x| &x.0).collect::<Vec<_>>()
        );
        for ((name, x), (_, y)) in a.iter().zip(&b) {
            assert!(x == y, "seed {seed}: {name} differs");
        }
    }
}

fn flip_byte(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    let i = at.min(b.len() - 1);
    b[i] ^= 0x55;
    std::fs::write(path, b).unwrap();
}

fn corrupt_err(r: Result<Content, PartialError>) -> String {
    match r {
        Err(e @ PartialError::Corrupt { .. }) => e.to_string(),
        other => panic!("expected a corrupt file, got {other:?}"),
    }
}

#[test]
fn corrupt_truncated_or_swapped_shards_are_refused_naming_them() {
    let rows = random_rows(&mut Rng(99), 2000);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    build(&rows, &dir, 3, "2026-12-04", "2026-12-04", usize::MAX);
    let fresh = |name: &str| {
        let d = tmp.path().join(name);
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), d.join(e.file_name())).unwrap();
        }
        d
    };
    // A flipped byte.
    let d = fresh("flip");
    flip_byte(&d.join("lines-00001.parquet"), 100);
    let e = corrupt_err(Partial::open(&d).unwrap().content());
    assert!(
        e.contains("lines-00001.parquet") && e.contains("SHA-256"),
        "{e}"
    );
    // The roll-up refuses it too, naming it.
    let out = tmp.path().join("out-flip");
    let e = rollup(std::slice::from_ref(&d), &out, None).unwrap_err();
    assert!(e.to_string().contains("lines-00001.parquet"), "{e}");
    // What it had written is gone: the same directory can be used again.
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);

    // Truncated.
    let d = fresh("trunc");
    let f = d.join("funcs-00002.parquet");
    let b = std::fs::read(&f).unwrap();
    std::fs::write(&f, &b[..b.len() - 10]).unwrap();
    let e = corrupt_err(Partial::open(&d).unwrap().content());
    assert!(
        e.contains("funcs-00002.parquet") && e.contains("bytes"),
        "{e}"
    );
    // Two shards' files swapped.
    let d = fresh("swap");
    let (a, b) = (d.join("paths-00000.parquet"), d.join("paths-00001.parquet"));
    let t = d.join("t");
    std::fs::rename(&a, &t).unwrap();
    std::fs::rename(&b, &a).unwrap();
    std::fs::rename(&t, &b).unwrap();
    let e = corrupt_err(Partial::open(&d).unwrap().content());
    assert!(e.contains("paths-00000.parquet"), "{e}");
    // A damaged file whose description was made to match: Parquet's own checks, or
    // the shard's, name it.
    let d = fresh("forged");
    let f = d.join("lines-00000.parquet");
    let mut b = std::fs::read(&f).unwrap();
    let n = b.len();
    b[n - 8..n - 4].copy_from_slice(&[0xff, 0xff, 0xff, 0x7f]); // footer length
    std::fs::write(&f, &b).unwrap();
    let desc_path = d.join("partial.json");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&desc_path).unwrap()).unwrap();
    {
        use sha2::Digest;
        v["shards"][0]["lines"]["sha256"] = hex::encode(sha2::Sha256::digest(&b)).into();
    }
    std::fs::write(&desc_path, serde_json::to_vec(&v).unwrap()).unwrap();
    let e = corrupt_err(Partial::open(&d).unwrap().content());
    assert!(e.contains("lines-00000.parquet"), "{e}");
    // A shard file of another shard, with a description made to match: its paths are
    // not of the shard.
    let d = fresh("moved");
    let (a, b) = (
        d.join("versions-00000.parquet"),
        d.join("versions-00001.parquet"),
    );
    std::fs::copy(&b, &a).unwrap();
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("partial.json")).unwrap()).unwrap();
    let moved = v["shards"][1]["versions"].clone();
    v["shards"][0]["versions"]["sha256"] = moved["sha256"].clone();
    v["shards"][0]["versions"]["bytes"] = moved["bytes"].clone();
    v["shards"][0]["versions"]["rows"] = moved["rows"].clone();
    std::fs::write(d.join("partial.json"), serde_json::to_vec(&v).unwrap()).unwrap();
    let e = corrupt_err(Partial::open(&d).unwrap().content());
    assert!(
        e.contains("versions-00000.parquet") && e.contains("belongs to shard 1"),
        "{e}"
    );
    // A reader stops at its first error.
    let p = Partial::open(&d).unwrap();
    let mut rows = p.versions(0).unwrap();
    assert!(rows.next().unwrap().is_err());
    assert!(rows.next().is_none());
    // A count that does not match the shards.
    let d = fresh("count");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("partial.json")).unwrap()).unwrap();
    v["counts"]["rows_in"] = (v["counts"]["rows_in"].as_u64().unwrap() + 1).into();
    std::fs::write(d.join("partial.json"), serde_json::to_vec(&v).unwrap()).unwrap();
    let e = corrupt_err(Partial::open(&d).unwrap().content());
    assert!(e.contains("partial.json") && e.contains("rows_in"), "{e}");
    let e = rollup(
        std::slice::from_ref(&d),
        &tmp.path().join("out-count"),
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("rows_in"), "{e}");
}

#[test]
fn an_unknown_format_version_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    build(
        &random_rows(&mut Rng(5), 50),
        &dir,
        1,
        "2026-12-04",
        "2026-12-04",
        usize::MAX,
    );
    let p = dir.join("partial.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    v["format_version"] = 2.into();
    v["shards"] = "whatever a later version holds".into();
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    let e = Partial::open(&dir).unwrap_err();
    assert!(matches!(e, PartialError::Version { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("partial.json") && msg.contains("version 2"),
        "{msg}"
    );
}

#[test]
fn a_rollup_refuses_two_namespaces_naming_both() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    build(
        &random_rows(&mut Rng(6), 50),
        &a,
        2,
        "2026-12-01",
        "2026-12-01",
        usize::MAX,
    );
    build(
        &random_rows(&mut Rng(7), 50),
        &b,
        2,
        "2026-12-02",
        "2026-12-02",
        usize::MAX,
    );
    let p = b.join("partial.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    v["namespace"] = "android".into();
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    let out = tmp.path().join("out");
    let e = rollup(&[a, b], &out, None).unwrap_err().to_string();
    assert!(
        e.contains("\"upstream\"") && e.contains("\"android\""),
        "{e}"
    );
    assert!(!out.exists(), "nothing written");
    // A non-empty output directory is refused too.
    let out = tmp.path().join("a");
    let e = rollup(&[tmp.path().join("a")], &out, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("must be empty"), "{e}");
}
