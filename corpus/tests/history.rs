//! The history mode (`days`): deterministic bytes, the daily edit share, and each
//! day's rows naming only commits of that day or before; and the single-set mode's
//! bytes, pinned so that the history mode's changes cannot move them.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use covmerge_corpus::{generate, Corpus, CorpusSpec};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "covmerge-corpus-history-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// All files under `dir` but the git repository, relative path -> bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.ends_with("git.git") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn text(p: &Path) -> String {
    let raw = fs::read(p).unwrap();
    let mut s = String::new();
    flate2::read::MultiGzDecoder::new(&raw[..])
        .read_to_string(&mut s)
        .unwrap();
    s
}

fn small(days: usize) -> CorpusSpec {
    CorpusSpec {
        seed: 7,
        files: 8,
        lines: 60,
        managers: 3,
        parts: 2,
        days,
        change_share: 0.2,
        ..Default::default()
    }
}

#[test]
fn history_same_seed_same_bytes() {
    let a = TempDir::new("a");
    let b = TempDir::new("b");
    let ca = generate(&small(6), &a.0).unwrap();
    let cb = generate(&small(6), &b.0).unwrap();
    assert_eq!(ca.commits, cb.commits);
    assert_eq!(ca.days.len(), 6);
    let ta = tree(&a.0);
    assert!(
        ta.contains_key("day-005/input-01.csv.gz"),
        "{:?}",
        ta.keys()
    );
    assert_eq!(ta, tree(&b.0));
    // Another seed gives other rows; a second run in place replaces the first.
    let other = generate(
        &CorpusSpec {
            seed: 8,
            ..small(6)
        },
        &b.0,
    )
    .unwrap();
    assert_ne!(other.commits, ca.commits);
    assert_ne!(
        tree(&b.0)["day-003/input-00.csv.gz"],
        ta["day-003/input-00.csv.gz"]
    );
    generate(&small(4), &b.0).unwrap();
    let t4 = tree(&b.0);
    assert!(
        !t4.keys().any(|k| k.starts_with("day-004/")),
        "stale day left"
    );
}

#[test]
fn history_changes_about_change_share_of_files_per_day() {
    let dir = TempDir::new("share");
    let spec = CorpusSpec {
        seed: 3,
        files: 120,
        lines: 30,
        managers: 1,
        instrumented_share: 0.05,
        no_git: true,
        no_edge_cases: true,
        days: 40,
        change_share: 0.1,
        ..Default::default()
    };
    let c = generate(&spec, &dir.0).unwrap();
    let src = |d: usize| dir.0.join("sources").join(&c.commits[d]);
    let mut shares = Vec::new();
    for d in 1..c.commits.len() {
        let paths: Vec<String> = tree(&src(d - 1)).into_keys().collect();
        let (before, now) = (tree(&src(d - 1)), tree(&src(d)));
        let changed = paths
            .iter()
            .filter(|p| now.get(*p).is_some_and(|t| *t != before[*p]))
            .count();
        shares.push(changed as f64 / paths.len() as f64);
    }
    let mean = shares.iter().sum::<f64>() / shares.len() as f64;
    assert!(
        (0.07..=0.13).contains(&mean),
        "mean share {mean}: {shares:?}"
    );
    assert!(shares.iter().all(|&s| s > 0.0), "a day without an edit");
}

/// Day d's rows: (commit index or None, date of the timestamp).
fn day_rows(c: &Corpus, d: usize) -> Vec<(Option<usize>, String)> {
    let mut out = Vec::new();
    for p in &c.days[d].inputs {
        for l in text(p).lines().skip(1) {
            if l.starts_with("timestamp,") {
                continue;
            }
            let cols: Vec<&str> = l.split(',').collect();
            assert_eq!(cols.len(), 18, "{l}");
            let commit = c.commits.iter().position(|x| x == cols[8]);
            out.push((commit, cols[0][..10].to_string()));
        }
    }
    out
}

#[test]
fn history_days_name_only_commits_up_to_the_day() {
    let dir = TempDir::new("commits");
    let spec = CorpusSpec {
        days: 12,
        manager_commit_share: 0.6,
        ..small(12)
    };
    let c = generate(&spec, &dir.0).unwrap();
    assert_eq!(c.commits.len(), 12);
    assert_eq!(c.base_commit, c.commits[11]);
    assert_eq!(c.days[11].date, "2024-09-30");
    assert_eq!(c.days[0].date, "2024-09-19");
    let mut total = 0;
    let mut lagging = 0;
    for d in 0..12 {
        assert_eq!(c.days[d].commit, c.commits[d]);
        let rows = day_rows(&c, d);
        assert_eq!(rows.len() as u64, c.days[d].rows, "day {d}");
        total += rows.len() as u64;
        let mut unknown = 0;
        for (commit, date) in &rows {
            assert_eq!(*date, c.days[d].date, "day {d}");
            match commit {
                Some(i) => {
                    assert!(*i <= d, "day {d} names commit {i}");
                    // Only the last day's edge cases name a commit past the lag.
                    assert!(d == 11 || i + spec.lag_days >= d, "day {d}, commit {i}");
                    lagging += usize::from(*i < d);
                }
                None => unknown += 1,
            }
        }
        assert_eq!(unknown, if d == 11 { 3 } else { 0 }, "day {d}");
        assert!(
            rows.iter().any(|r| r.0 == Some(d)),
            "day {d} built its commit"
        );
    }
    assert!(lagging > 0, "no manager lagged");
    assert_eq!(total, c.rows);
    let all: Vec<PathBuf> = c.days.iter().flat_map(|d| d.inputs.clone()).collect();
    assert_eq!(all, c.inputs);

    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.0.join("corpus.json")).unwrap()).unwrap();
    assert_eq!(json["days"].as_array().unwrap().len(), 12);
    assert_eq!(json["days"][3]["date"], c.days[3].date.as_str());
    assert_eq!(json["days"][3]["inputs"][1], "day-003/input-01.csv.gz");
    assert_eq!(json["spec"]["days"], 12);
    assert_eq!(json["spec"]["date_to"], "2024-09-30");
}

/// FNV-1a over every (path, bytes) of a tree, in path order; gzip files by their
/// decompressed bytes (another deflate library may compress them otherwise).
fn digest(t: &BTreeMap<String, Vec<u8>>) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for (k, v) in t {
        let mut plain = Vec::new();
        let v = if k.ends_with(".gz") {
            flate2::read::MultiGzDecoder::new(&v[..])
                .read_to_end(&mut plain)
                .unwrap();
            &plain
        } else {
            v
        };
        for b in k.bytes().chain([0]).chain(v.iter().copied()).chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01B3);
        }
    }
    h
}

/// The single-set mode wrote these bytes before the history mode existed (checked
/// against that build's `covmerge gen` output with `diff -r`): the history mode's
/// changes to the shared steps must not move them.
#[test]
fn single_set_mode_bytes_are_pinned() {
    let dir = TempDir::new("pinned");
    let spec = CorpusSpec {
        seed: 42,
        files: 6,
        lines: 60,
        commits: 4,
        managers: 3,
        parts: 3,
        no_git: true,
        ..Default::default()
    };
    generate(&spec, &dir.0).unwrap();
    let t = tree(&dir.0);
    assert!(!t.contains_key("day-000/input-00.csv.gz"));
    assert_eq!(digest(&t), PINNED, "{:x}", digest(&t));
}

const PINNED: u64 = 0x45bf_5549_133f_8b86;
