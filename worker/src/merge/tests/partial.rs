//! A partial's rows (contract §10) as spill entries (`split/rows.rs`) merge like the
//! raw rows they sum: the same part byte for byte and the same counts (but
//! `diffs_capped`), in one pass, in passes over ranges of paths and in name passes,
//! alone or mixed with raw rows.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use covmerge_proto::group::Group;

use super::{merge, MemSource};
use crate::input::formats::{BadLines, LineRow, ReadError, RowKind, RowSink, RowSource};
use crate::source::{FileVersion, Source};
use crate::split::{rows::split_rows, split_input, Flush, SplitError, SplitSettings};

/// One raw row: path, commit, function, manager, line, hits.
type Raw = (String, String, String, String, u32, u64);

/// A partial's tables, summed from raw rows (versions: the blob ids of the source).
#[derive(Default)]
struct Tables {
    lines: BTreeMap<(String, String, String, u32), (u64, u64)>,
    funcs: BTreeMap<(String, String, u32, String), u64>,
    versions: BTreeMap<(String, String), String>,
    paths: BTreeMap<String, (u64, u64, u64)>,
}

impl Tables {
    fn of(rows: &[Raw], src: &MemSource) -> Tables {
        let mut t = Tables::default();
        for (p, c, f, m, l, h) in rows {
            let e = t.paths.entry(p.clone()).or_default();
            if *l == 0 {
                e.0 += 1;
                continue;
            }
            let Some(v) = src.get(c.as_bytes(), p.as_bytes()).unwrap() else {
                e.1 += 1;
                e.2 += h;
                continue;
            };
            let v = v.id.hex();
            let s = t
                .lines
                .entry((p.clone(), v.clone(), m.clone(), *l))
                .or_default();
            s.0 += h;
            s.1 += 1;
            if !f.is_empty() {
                *t.funcs
                    .entry((p.clone(), v.clone(), *l, f.clone()))
                    .or_default() += 1;
            }
            let commit = t
                .versions
                .entry((p.clone(), v))
                .or_insert_with(|| c.clone());
            if c < commit {
                commit.clone_from(c);
            }
        }
        t
    }
}

impl RowSource for Tables {
    fn read_rows(self: Box<Self>, _: u64, sink: &mut RowSink<'_>) -> Result<BadLines, ReadError> {
        let commit = |p: &String, v: &String| self.versions[&(p.clone(), v.clone())].as_str();
        let row = |file, func, line, hits, rows, kind| LineRow {
            file,
            func,
            line,
            hits,
            rows,
            manager: None,
            commit: None,
            kind,
        };
        for ((p, v, m, l), (h, r)) in &self.lines {
            sink(&LineRow {
                manager: Some(m),
                commit: Some(commit(p, v)),
                ..row(p.as_str(), "", *l, *h, *r, RowKind::Hits)
            })?;
        }
        for ((p, v, l, f), r) in &self.funcs {
            sink(&LineRow {
                commit: Some(commit(p, v)),
                ..row(p.as_str(), f.as_str(), *l, 0, *r, RowKind::Votes)
            })?;
        }
        for (p, &(r0, rv, hv)) in &self.paths {
            sink(&row(p.as_str(), "", 0, 0, r0, RowKind::WithoutLine))?;
            if rv > 0 {
                sink(&row(p.as_str(), "", 1, hv, rv, RowKind::WithoutVersion))?;
            }
        }
        Ok(BadLines::default())
    }
}

fn settings() -> SplitSettings {
    SplitSettings {
        shards: 1,
        max_bad_rows: 0,
        memory_budget: 32 << 10,
        threads: 1,
        ..Default::default()
    }
}

/// The spill chunks of raw rows (as CSV) and of the partial of `partial`.
fn chunks_of(raw: &[Raw], partial: &[Raw], src: &MemSource) -> (Vec<Bytes>, u64) {
    let got = Mutex::new(Vec::new());
    let emit = |f: Flush| -> Result<(), SplitError> {
        got.lock().unwrap().push(Bytes::from(f.bytes));
        Ok(())
    };
    let mut csv =
        String::from("kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\n");
    for (p, c, f, m, l, h) in raw {
        writeln!(csv, "r,{c},{p},{f},{m},{l},{h}").unwrap();
    }
    let o = split_input("in.csv", csv.as_bytes(), settings(), &emit).unwrap();
    assert_eq!(o.counts.rows_bad, 0, "{:?}", o.bad_rows);
    let spec = Default::default();
    let tables = Box::new(Tables::of(partial, src));
    let p = split_rows("p", tables, &spec, None, settings(), &emit).unwrap();
    let rows_in = o.counts.rows_in + p.counts.rows_in;
    (got.into_inner().unwrap(), rows_in)
}

/// A source at commits c1 (the base), c2, c3 (c3 holds c1's versions: one version,
/// two commits) and rows over them and a commit that holds nothing (c9): live,
/// changed, deleted and out-of-prefix files, lines past the end, line 0, names tied
/// on a line, several managers; and one file of many names (name passes).
fn corpus() -> (MemSource, Vec<Raw>) {
    let base: String = (0..40).map(|i| format!("int x{i};\n")).collect();
    let changed: String = (0..40)
        .map(|i| {
            if i % 9 == 4 {
                format!("int y{i};\n")
            } else {
                format!("int x{i};\n")
            }
        })
        .collect();
    let mut files = HashMap::new();
    let mut put = |c: &str, p: &str, t: &str| {
        files.insert(
            (c.as_bytes().to_vec(), p.as_bytes().to_vec()),
            Arc::new(FileVersion::new(t.as_bytes().to_vec())),
        );
    };
    let mut paths = Vec::new();
    for k in 0..600usize {
        let p = match k % 6 {
            0 => format!("src/gone/f{k}.c"),
            1 => format!("other/f{k}.c"),
            _ => format!("src/d{}/f{k}.c", k % 7),
        };
        if k % 6 != 0 {
            put("c1", &p, &base);
            put("c3", &p, &base);
        }
        put("c2", &p, if k % 2 == 0 { &changed } else { &base });
        paths.push(p);
    }
    put("c1", "src/m.c", &base);
    let mut rows = Vec::new();
    let mut x = 7u64;
    let mut next = |n: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    for p in &paths {
        for _ in 0..(2 + next(12)) {
            let c = ["c1", "c2", "c3", "c9"][next(4) as usize];
            let f = ["", "f", "g", "h", "tie_b", "tie_a"][next(6) as usize];
            let m = format!("m{}", next(3));
            let l = if next(20) == 0 {
                0
            } else {
                1 + next(45) as u32
            };
            rows.push((p.clone(), c.into(), f.into(), m, l, next(5)));
        }
    }
    // Ties on one line, across two rows of one manager and commit each.
    for (f, m) in [
        ("tie_b", "m0"),
        ("tie_a", "m1"),
        ("tie_b", "m2"),
        ("tie_a", "m2"),
    ] {
        rows.push(("src/d2/f2.c".into(), "c1".into(), f.into(), m.into(), 3, 1));
    }
    for i in 0..6_000 {
        let l = 1 + i % 30;
        let m = format!("m{}", i % 2);
        rows.push(("src/m.c".into(), "c1".into(), format!("name_{i}"), m, l, 1));
    }
    (MemSource(files), rows)
}

/// The raw rows, the partial of them all, and half of each, merged in one pass, in
/// range passes and in name passes: one part, one set of counts.
#[test]
fn a_partials_entries_merge_like_their_raw_rows() {
    let (src, rows) = corpus();
    let groups = [Group::parse("all=m*").unwrap()];
    let (half_a, half_b) = rows.split_at(rows.len() / 2);
    let inputs = [
        ("raw", chunks_of(&rows, &[], &src)),
        ("partial", chunks_of(&[], &rows, &src)),
        ("mixed", chunks_of(half_a, half_b, &src)),
    ];
    let rows_in = inputs[0].1 .1;
    assert_eq!(rows_in, rows.len() as u64);
    let want = merge(&inputs[0].1 .0, &src, "src/", &groups, usize::MAX);
    assert!(want.counts.rows_deleted > 0 && want.counts.rows_outside_prefix > 0);
    assert!(want.counts.rows_lost > 0 && want.counts.rows_without_line > 0);
    for (name, (chunks, n)) in &inputs {
        assert_eq!(*n, rows_in, "{name}: rows read");
        for tables in [usize::MAX, 1 << 20, 256 << 10] {
            let mut got = merge(chunks, &src, "src/", &groups, tables);
            if tables < usize::MAX {
                assert!(got.passes > 2, "{name} {tables}: {} passes", got.passes);
            }
            got.counts.diffs_capped = want.counts.diffs_capped;
            assert_eq!(got.counts, want.counts, "{name} {tables}");
            assert_eq!(got.records, want.records, "{name} {tables}");
            assert!(got.gz == want.gz, "{name} {tables}: the parts differ");
            assert_eq!(got.base_lines, want.base_lines, "{name} {tables}");
        }
    }
}
