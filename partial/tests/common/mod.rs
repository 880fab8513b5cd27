//! Random rows and helpers shared by the tests.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::path::{Path, PathBuf};

use covmerge_partial::{Builder, Description, RawRow};
use covmerge_proto::date::Date;

/// A small deterministic generator (xorshift64*), so failures reproduce from the seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One owned input row.
#[derive(Debug, Clone)]
pub struct Row {
    pub path: String,
    pub commit: String,
    pub version: Option<String>,
    pub manager: String,
    pub func: String,
    pub line: u32,
    pub hits: u64,
    /// `Some(ns)`: a row of another namespace; `bad`: a malformed row.
    pub other_ns: Option<String>,
    pub bad: bool,
}

pub fn blob(i: u64) -> String {
    format!(
        "{:040x}",
        i.wrapping_mul(0x9e37_79b9_7f4a_7c15) as u128 * 7919
    )
}

/// `n` random rows over few paths, versions, managers, lines and functions (so keys
/// repeat), with rows without line, without version, bad rows and other namespaces.
pub fn random_rows(rng: &mut Rng, n: usize) -> Vec<Row> {
    let paths = [
        "fs/ext4/inode.c",
        "mm/slab.c",
        "kernel/fork.c",
        "a/b/ç.c",
        "net/core/dev.c",
    ];
    let mut rows = Vec::with_capacity(n);
    for _ in 0..n {
        let path = paths[rng.below(paths.len() as u64) as usize].to_owned();
        let c = rng.below(6);
        // Commits 0..6 hold versions by (path, commit / 2): two commits per version;
        // commit 5 holds no file.
        let version = (c != 5).then(|| blob(c / 2 * 31 + path.len() as u64));
        let hits = match rng.below(20) {
            0 => u64::MAX / 2,
            1..=5 => 0,
            _ => rng.below(1000),
        };
        rows.push(Row {
            path,
            commit: format!("commit{c}"),
            version,
            manager: format!("ci-{}", rng.below(3)),
            func: match rng.below(4) {
                0 => String::new(),
                1 => "f_b".into(),
                _ => format!("f_{}", rng.below(3)),
            },
            line: if rng.below(15) == 0 {
                0
            } else {
                1 + rng.below(12) as u32
            },
            hits,
            other_ns: match rng.below(25) {
                0 => Some(format!("ns{}", rng.below(20))),
                _ => None,
            },
            bad: rng.below(40) == 0,
        });
    }
    rows
}

pub fn date(s: &str) -> Date {
    s.parse().unwrap()
}

/// A partial of `rows` in `dir`.
pub fn build(
    rows: &[Row],
    dir: &Path,
    shards: u32,
    from: &str,
    to: &str,
    limit: usize,
) -> Description {
    let mut b = Builder::new(
        "upstream",
        date(from),
        date(to),
        shards,
        limit,
        dir.parent().unwrap(),
    )
    .unwrap();
    for r in rows {
        if r.bad {
            b.add_bad(1);
            continue;
        }
        if let Some(ns) = &r.other_ns {
            b.saw_namespace_column();
            b.add_other_namespace(ns.as_bytes(), 1);
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
    b.finish(dir).unwrap()
}

/// The shard files of a partial, by name, with their bytes.
pub fn shard_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .map(|p: PathBuf| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// One row: (path, version, commit, manager, function, line, hits).
pub type HeldRow = (String, String, String, String, String, u32, u64);

/// Rows of `versions` versions of each of a few paths, `managers` managers and many
/// functions: most (version, manager)s hit runs of lines close together, in any order
/// within a run, some hit a few lines far apart.
pub fn held_rows(seed: u64, versions: u64, managers: u64) -> Vec<HeldRow> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for p in 0..3u64 {
        for v in 0..versions {
            let version = blob(p * 1000 + v);
            let commit = format!("c{:03}", rng.below(50));
            for m in 0..managers {
                let manager = format!("m{m:04}");
                let path = format!("p{p}.c");
                let first = 1 + rng.below(300) as u32;
                let n = match rng.below(4) {
                    0 => 3,
                    _ => 20 + rng.below(200) as u32,
                };
                let scattered = rng.below(5) == 0;
                for i in 0..n {
                    let line = if scattered {
                        1 + rng.below(100_000) as u32
                    } else {
                        // Runs of lines, not in order, some twice.
                        first + (i * 7 % n) + rng.below(2) as u32
                    };
                    let func = format!("f{}", line / 10 + rng.below(2) as u32);
                    let hits = rng.below(1000);
                    out.push((
                        path.clone(),
                        version.clone(),
                        commit.clone(),
                        manager.clone(),
                        func,
                        line,
                        hits,
                    ));
                }
            }
        }
    }
    out
}
