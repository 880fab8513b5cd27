//! DuckDB's `read_parquet` reads a partial as it is: its column types, and its
//! per-(path, line) sums equal the crate's; the SQL example of contract §10 runs.
//! The interpreter with Python's `duckdb` comes from `COVMERGE_TEST_DUCKDB_PYTHON`
//! (`deploy/dev/install-duckdb.sh` installs it and prints its path).

mod common;

use std::collections::BTreeMap;
use std::process::Command;

use common::{build, random_rows, Rng};
use covmerge_partial::Partial;

fn python() -> String {
    let py = std::env::var("COVMERGE_TEST_DUCKDB_PYTHON").unwrap_or_default();
    if !py.is_empty() {
        return py;
    }
    panic!(
        "COVMERGE_TEST_DUCKDB_PYTHON is not set: run deploy/dev/install-duckdb.sh and set \
             it to the python3 it prints (deploy/dev/test.sh does both)"
    )
}

fn duckdb(script: &str, dir: &std::path::Path) -> String {
    let out = Command::new(python())
        .arg("-c")
        .arg(script)
        .arg(dir)
        .output()
        .expect("run the DuckDB interpreter");
    assert!(
        out.status.success(),
        "duckdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn duckdb_reads_a_partial_and_its_sums_are_the_crates() {
    let rows = random_rows(&mut Rng(42), 5000);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    build(&rows, &dir, 3, "2026-12-04", "2026-12-04", usize::MAX);
    let c = Partial::open(&dir).unwrap().content().unwrap();

    // The types a SQL user sees.
    let types = duckdb(
        "import duckdb, sys\n\
         d = sys.argv[1]\n\
         for t in ['lines', 'funcs', 'versions', 'paths']:\n\
         \x20   for r in duckdb.sql(f\"DESCRIBE SELECT * FROM read_parquet('{d}/{t}-*.parquet')\").fetchall():\n\
         \x20       print(t, r[0], r[1])\n",
        &dir,
    );
    for want in [
        "lines path VARCHAR",
        "lines version VARCHAR",
        "lines manager VARCHAR",
        "lines line UINTEGER",
        "lines hits UBIGINT",
        "lines rows UBIGINT",
        "funcs func_name VARCHAR",
        "versions commit VARCHAR",
        "paths rows_without_version UBIGINT",
    ] {
        assert!(types.lines().any(|l| l == want), "no {want:?} in:\n{types}");
    }

    // Per (path, line) over every version and manager: hits and rows.
    let got = duckdb(
        "import duckdb, sys\n\
         d = sys.argv[1]\n\
         q = f\"SELECT path, line, sum(hits)::VARCHAR, sum(rows)::VARCHAR FROM read_parquet('{d}/lines-*.parquet') GROUP BY ALL ORDER BY ALL\"\n\
         for r in duckdb.sql(q).fetchall():\n\
         \x20   print('\\t'.join(str(x) for x in r))\n",
        &dir,
    );
    let mut want: BTreeMap<(String, u32), (u128, u128)> = BTreeMap::new();
    for l in &c.lines {
        let e = want.entry((l.path.clone(), l.line)).or_default();
        e.0 += l.hits as u128;
        e.1 += l.rows as u128;
    }
    let mut got_map = BTreeMap::new();
    for line in got.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 4, "{line}");
        got_map.insert(
            (f[0].to_owned(), f[1].parse::<u32>().unwrap()),
            (f[2].parse::<u128>().unwrap(), f[3].parse::<u128>().unwrap()),
        );
    }
    assert!(want.len() > 20, "a real test: {} keys", want.len());
    assert!(
        want.values().any(|v| v.0 > u64::MAX as u128),
        "sums past 2^64 compared"
    );
    assert_eq!(got_map, want);

    // The example of contract §10: coverage of one file per version, with the commit
    // that holds each version.
    let got = duckdb(
        "import duckdb, sys\n\
         d = sys.argv[1]\n\
         q = f\"\"\"\n\
         SELECT l.version, any_value(v.commit) AS commit, count(DISTINCT l.line) AS lines,\n\
         \x20      count(DISTINCT l.line) FILTER (WHERE l.hits > 0) AS covered\n\
         FROM read_parquet('{d}/lines-*.parquet') l\n\
         JOIN read_parquet('{d}/versions-*.parquet') v USING (path, version)\n\
         WHERE l.path = 'fs/ext4/inode.c'\n\
         GROUP BY l.version ORDER BY l.version\"\"\"\n\
         for r in duckdb.sql(q).fetchall():\n\
         \x20   print('\\t'.join(str(x) for x in r))\n",
        &dir,
    );
    let mut want: BTreeMap<String, (String, BTreeMap<u32, bool>)> = BTreeMap::new();
    let commits: BTreeMap<(&str, &str), &str> = c
        .versions
        .iter()
        .map(|v| ((v.path.as_str(), v.version.as_str()), v.commit.as_str()))
        .collect();
    for l in c.lines.iter().filter(|l| l.path == "fs/ext4/inode.c") {
        let e = want.entry(l.version.clone()).or_insert_with(|| {
            (
                commits[&(l.path.as_str(), l.version.as_str())].to_owned(),
                BTreeMap::new(),
            )
        });
        *e.1.entry(l.line).or_default() |= l.hits > 0;
    }
    let want: Vec<String> = want
        .into_iter()
        .map(|(v, (c, lines))| {
            let covered = lines.values().filter(|&&h| h).count();
            format!("{v}\t{c}\t{}\t{covered}", lines.len())
        })
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got.lines().collect::<Vec<_>>(), want);
}
