//! A second merge of contract §2–§4, plain and slow, that the property tests compare
//! covmerge with. It shares no code with the project's merge engine: rows are read with
//! the `csv` crate, file versions come from the `dir:` layout `ROOT/<commit>/<path>`,
//! and lines are projected through `git diff --no-index` instead of imara-diff.
//!
//! The diff mirrors the choice documented in `source/src/project.rs`: the
//! histogram algorithm with git's indent heuristic. A line of the version maps to the
//! base only outside every hunk of `git diff -U0` (an unchanged run); the lines of
//! hunks, and `sl` beyond the end of the version, map to nothing.
//!
//! Known difference: imara-diff trims the common prefix and suffix before its
//! histogram diff, git does not, so on some ambiguous inputs they align differently
//! (version `c x } x` against base `b } c x`: covmerge maps 3→2 and 4→4, git 1→3 and
//! 2→4). The corpora of the property tests do not contain such a case.
//!
//! The result is [`Oracle::canon`], the value [`crate::canon`] makes of a result file,
//! and [`Oracle::counts`], the manifest counters the oracle can know.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use serde_json::{json, Map, Value};

/// The columns contract §2 requires.
const REQUIRED: [&str; 7] = [
    "kernel_repo",
    "kernel_commit",
    "file_path",
    "func_name",
    "manager",
    "sl",
    "hit_count",
];

/// One data row, with the columns the merge uses.
#[derive(Debug, Clone)]
pub struct Row {
    /// `kernel_commit`.
    pub commit: String,
    /// `file_path`.
    pub path: String,
    /// `func_name`.
    pub func: String,
    /// `manager`.
    pub manager: String,
    /// `sl`.
    pub sl: u64,
    /// `hit_count`.
    pub hits: u64,
}

/// What the oracle computed.
#[derive(Debug, Clone, PartialEq)]
pub struct Oracle {
    /// `{"files": ..., "totals": ...}`, the shape of [`crate::canon`].
    pub canon: Value,
    /// `rows_in`, `rows_without_line`, `rows_lost`, `hits_lost`, `rows_merged`,
    /// `rows_deleted`, `files`, `files_deleted`, `instrumented`, `covered`.
    pub counts: Value,
}

/// Merges `inputs` (CSV, gzip or not) with file versions from the `dir:` layout
/// `root/<commit>/<path>` onto `base_commit`.
pub fn merge(inputs: &[PathBuf], root: &Path, base_commit: &str) -> Oracle {
    let rows = read_rows(inputs);
    let rows_in = rows.len() as u64;
    let mut by_file: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for r in rows {
        by_file.entry(r.path.clone()).or_default().push(r);
    }

    let mut files = Map::new();
    let (mut files_deleted, mut rows_deleted) = (0u64, 0u64);
    let (mut without_line, mut lost, mut hits_lost, mut merged) = (0u64, 0u64, 0u64, 0u64);
    let (mut instrumented, mut covered) = (0u64, 0u64);
    for (path, rows) in &by_file {
        // contract §3.1: a file missing at the base is deleted; its rows go nowhere.
        let Some(base) = load(root, base_commit, path) else {
            files_deleted += 1;
            rows_deleted += rows.len() as u64;
            continue;
        };
        // One line map per version of this file (the commit names the version).
        let mut maps: BTreeMap<&str, Option<Vec<Option<u64>>>> = BTreeMap::new();
        // manager → base line → hits; "*" is every manager.
        let mut hits: BTreeMap<String, BTreeMap<u64, u64>> = BTreeMap::new();
        hits.insert("*".to_string(), BTreeMap::new());
        // base line → func_name → rows
        let mut names: BTreeMap<u64, BTreeMap<String, u64>> = BTreeMap::new();
        for r in rows {
            if r.sl == 0 {
                without_line += 1;
                continue;
            }
            let map = maps.entry(&r.commit).or_insert_with(|| {
                load(root, &r.commit, path).map(|version| line_map(&version, &base))
            });
            let target = map
                .as_ref()
                .and_then(|m| m.get(r.sl as usize - 1).copied().flatten());
            let Some(line) = target else {
                lost += 1;
                hits_lost += r.hits;
                continue;
            };
            merged += 1;
            for mgr in ["*", r.manager.as_str()] {
                let h = hits
                    .entry(mgr.to_string())
                    .or_default()
                    .entry(line)
                    .or_insert(0);
                *h = h.checked_add(r.hits).expect("hit sum overflows u64");
            }
            *names
                .entry(line)
                .or_default()
                .entry(r.func.clone())
                .or_insert(0) += 1;
        }

        // contract §3.5: the most frequent non-empty name; a tie goes to the smallest
        // (the names are visited in ascending order, so only a larger count replaces).
        let mut funcs: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for (line, counts) in &names {
            let mut best: Option<(&String, u64)> = None;
            for (name, &n) in counts {
                if name.is_empty() {
                    continue;
                }
                if best.is_none_or(|(_, m)| n > m) {
                    best = Some((name, n));
                }
            }
            if let Some((name, _)) = best {
                funcs.entry(name.clone()).or_default().push(*line);
            }
        }

        let star = &hits["*"];
        instrumented += star.len() as u64;
        covered += star.values().filter(|&&h| h > 0).count() as u64;
        let managers: Map<String, Value> = hits
            .iter()
            .map(|(mgr, lines)| {
                let lines: Map<String, Value> = lines
                    .iter()
                    .map(|(l, h)| (l.to_string(), json!(h)))
                    .collect();
                (mgr.clone(), Value::Object(lines))
            })
            .collect();
        let funcs: Map<String, Value> = funcs.into_iter().map(|(f, l)| (f, json!(l))).collect();
        files.insert(path.clone(), json!({"managers": managers, "funcs": funcs}));
    }
    let canon = json!({
        "files": files,
        "totals": {"instrumented": instrumented, "covered": covered},
    });
    let counts = json!({
        "rows_in": rows_in,
        "rows_without_line": without_line,
        "rows_lost": lost,
        "hits_lost": hits_lost,
        "rows_merged": merged,
        "rows_deleted": rows_deleted,
        "files": files.len(),
        "files_deleted": files_deleted,
        "instrumented": instrumented,
        "covered": covered,
    });
    Oracle { canon, counts }
}

/// The data rows of `inputs`, in order. Panics on anything that is not a well-formed
/// input: the oracle checks well-formed corpora, bad input has its own tests.
pub fn read_rows(inputs: &[PathBuf]) -> Vec<Row> {
    let mut rows = Vec::new();
    for input in inputs {
        let name = input.display();
        let raw = std::fs::read(input).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut text = Vec::new();
        if raw.starts_with(&[0x1f, 0x8b]) {
            flate2::read::MultiGzDecoder::new(&raw[..])
                .read_to_end(&mut text)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        } else {
            text = raw;
        }
        let mut reader = csv::Reader::from_reader(&text[..]);
        let header = reader
            .headers()
            .unwrap_or_else(|e| panic!("{name}: header: {e}"))
            .clone();
        let col: Vec<usize> = REQUIRED
            .iter()
            .map(|c| {
                header
                    .iter()
                    .position(|h| h == *c)
                    .unwrap_or_else(|| panic!("{name}: no column {c}"))
            })
            .collect();
        for rec in reader.records() {
            let rec = rec.unwrap_or_else(|e| panic!("{name}: {e}"));
            if rec == header {
                continue;
            }
            let line = rec.position().map_or(0, |p| p.line());
            let field = |i: usize| rec[col[i]].to_string();
            let number = |i: usize| {
                rec[col[i]]
                    .parse::<u64>()
                    .unwrap_or_else(|e| panic!("{name}:{line}: {}: {e}", REQUIRED[i]))
            };
            rows.push(Row {
                commit: field(1),
                path: field(2),
                func: field(3),
                manager: field(4),
                sl: number(5),
                hits: number(6),
            });
        }
    }
    rows
}

/// The lines of `root/commit/path` (contract §3: split on `\n`, the empty piece after a
/// final newline is not a line, `\r` stays), or `None` when there is no such file.
pub fn load(root: &Path, commit: &str, path: &str) -> Option<Vec<Vec<u8>>> {
    let rel = Path::new(path);
    assert!(
        rel.components().all(|c| matches!(c, Component::Normal(_))),
        "{path}: not a plain relative path"
    );
    let mut parts = Path::new(commit).components();
    assert!(
        matches!(
            (parts.next(), parts.next()),
            (Some(Component::Normal(_)), None)
        ),
        "{commit}: not a plain commit name"
    );
    let data = match std::fs::read(root.join(commit).join(rel)) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("{commit}/{path}: {e}"),
    };
    let mut lines: Vec<Vec<u8>> = data.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    Some(lines)
}

/// `map[i]` is the base line (1-based) of line `i + 1` of `version`, or `None`.
///
/// Runs `git diff --no-index --diff-algorithm=histogram --indent-heuristic -U0` on the
/// two texts, each written with a newline after every line (so a missing final newline
/// is no difference, as in contract §3), and walks its hunks: between hunks the lines are
/// unchanged and map one to one.
pub fn line_map(version: &[Vec<u8>], base: &[Vec<u8>]) -> Vec<Option<u64>> {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, lines: &[Vec<u8>]| {
        let text: Vec<u8> = lines
            .iter()
            .flat_map(|l| l.iter().copied().chain([b'\n']))
            .collect();
        std::fs::write(dir.path().join(name), text).expect("write temp file");
    };
    write("version", version);
    write("base", base);
    let out = Command::new("git")
        .current_dir(dir.path())
        // Only the flags below decide the diff, not a user's or the system's config.
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args([
            "diff",
            "--no-index",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
        ])
        .args(["--text", "--diff-algorithm=histogram", "--indent-heuristic"])
        .args(["-U0", "--inter-hunk-context=0", "--", "version", "base"])
        .output()
        .expect("run git");
    // --no-index exits 1 when the files differ, 0 when they do not.
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "git diff failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut map = Vec::with_capacity(version.len());
    // The next line of each side not yet accounted for (1-based).
    let (mut v, mut b) = (1u64, 1u64);
    let mut lines = out.stdout.split(|&c| c == b'\n');
    while let Some(l) = lines.next() {
        let Some((old_start, old_len, new_start, new_len)) = hunk_header(l) else {
            continue;
        };
        // An empty side `-a,0` names the line *after which* the hunk sits.
        let old_first = if old_len == 0 {
            old_start + 1
        } else {
            old_start
        };
        let new_first = if new_len == 0 {
            new_start + 1
        } else {
            new_start
        };
        // The unchanged run before the hunk, the same length on both sides.
        assert_eq!(old_first - v, new_first - b, "unchanged run lengths differ");
        while v < old_first {
            map.push(Some(b));
            v += 1;
            b += 1;
        }
        // The hunk: exactly old_len `-` lines and new_len `+` lines, no context.
        for _ in 0..old_len {
            assert!(lines.next().is_some_and(|x| x.starts_with(b"-")));
            map.push(None);
        }
        for _ in 0..new_len {
            assert!(lines.next().is_some_and(|x| x.starts_with(b"+")));
        }
        v += old_len;
        b += new_len;
    }
    // The unchanged run after the last hunk.
    assert_eq!(
        version.len() as u64 + 1 - v,
        base.len() as u64 + 1 - b,
        "trailing unchanged run lengths differ"
    );
    while v <= version.len() as u64 {
        map.push(Some(b));
        v += 1;
        b += 1;
    }
    map
}

/// Parses `@@ -a[,b] +c[,d] @@...` (a missing count is 1).
fn hunk_header(line: &[u8]) -> Option<(u64, u64, u64, u64)> {
    let rest = line.strip_prefix(b"@@ -")?;
    let end = rest.windows(3).position(|w| w == b" @@")?;
    let ranges = std::str::from_utf8(&rest[..end]).expect("ASCII hunk header");
    let (old, new) = ranges.split_once(" +").expect("hunk header has two ranges");
    let range = |r: &str| -> (u64, u64) {
        let (start, len) = r.split_once(',').unwrap_or((r, "1"));
        (start.parse().unwrap(), len.parse().unwrap())
    };
    let ((a, b), (c, d)) = (range(old), range(new));
    Some((a, b, c, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = s.split('\n').map(|l| l.as_bytes().to_vec()).collect();
        if v.last().is_some_and(|l| l.is_empty()) {
            v.pop();
        }
        v
    }

    fn map(version: &str, base: &str) -> Vec<Option<u64>> {
        line_map(&lines(version), &lines(base))
    }

    #[test]
    fn line_map_reads_insertions_deletions_and_changes_from_the_hunks() {
        assert_eq!(map("a\nb\n", "a\nb\n"), [Some(1), Some(2)]);
        // Pure insertion (`-1,0 +2`), pure deletion (`-2 +1,0`), a change.
        assert_eq!(
            map("a\nb\nc\n", "a\nNEW\nb\nc\n"),
            [Some(1), Some(3), Some(4)]
        );
        assert_eq!(map("a\nb\nc\n", "a\nc\n"), [Some(1), None, Some(2)]);
        assert_eq!(map("a\nb\nc\n", "a\nB\nc\n"), [Some(1), None, Some(3)]);
        // Insertion at the very top and deletion at the very end.
        assert_eq!(map("a\nb\nc\n", "X\nY\na\nb\n"), [Some(3), Some(4), None]);
        // A final newline is no difference; `\r` is part of the line.
        assert_eq!(map("a\nb", "a\nb\n"), [Some(1), Some(2)]);
        assert_eq!(map("a\r\nb\n", "a\nb\n"), [None, Some(2)]);
        assert_eq!(map("", "a\n"), []);
        assert_eq!(map("a\n", ""), [None]);
    }

    /// A hand-merged case: every answer below was worked out on paper from contract §3.
    #[test]
    fn oracle_merges_a_hand_worked_case() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("src");
        let put = |commit: &str, text: &str| {
            let p = root.join(commit).join("fs/f.c");
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        // base B:  1 `int a;`  2 `void f() {`  3 `  x();`  4 `}`
        put("B", "int a;\nvoid f() {\n  x();\n}\n");
        // V: 1→2, `  y();` (2) is deleted, 3→3, 4→4; no final newline (not a change).
        put("V", "void f() {\n  y();\n  x();\n}");
        // W: line 1 carries a `\r`, so it differs from the base; 2→2, 3→3, 4→4.
        put("W", "int a;\r\nvoid f() {\n  x();\n}\n");

        // Columns in another order, an extra column, a repeated header.
        let plain = "manager,sl,kernel_repo,kernel_commit,file_path,func_name,hit_count,arch\n\
            m1,1,R,B,fs/f.c,,5,amd64\n\
            m1,3,R,V,fs/f.c,f,2,amd64\n\
            m2,2,R,V,fs/f.c,f,7,amd64\n\
            manager,sl,kernel_repo,kernel_commit,file_path,func_name,hit_count,arch\n\
            m2,1,R,V,fs/f.c,g,0,amd64\n\
            m2,0,R,B,fs/f.c,f,9,amd64\n";
        let gz = "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\n\
            R,W,fs/f.c,h,m1,1,4\n\
            R,W,fs/f.c,f,m1,2,1\n\
            R,V,fs/f.c,f,m2,5,3\n\
            R,NOPE,fs/f.c,f,m3,1,1\n\
            R,B,fs/gone.c,f,m1,1,1\n\
            R,V,fs/f.c,h,m1,4,0\n\
            R,B,fs/f.c,f,m2,4,0\n\
            R,B,fs/f.c,zz,m2,1,0\n\
            R,V,fs/f.c,k,m2,3,0\n\
            R,B,fs/f.c,k,m1,3,0\n\
            R,B,fs/f.c,,m1,1,5\n";
        let a = tmp.path().join("a.csv");
        std::fs::write(&a, plain).unwrap();
        let b = tmp.path().join("b.csv.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, gz.as_bytes()).unwrap();
        std::fs::write(&b, enc.finish().unwrap()).unwrap();

        let got = merge(&[a, b], &root, "B");
        // Rows onto base lines:
        //   1: m1 5 "" (B), m2 0 zz (B), m1 5 "" (B)  → 10; "" never names a line: zz
        //   2: m2 0 g (V1), m1 1 f (W2)                → 1; tie g/f: f
        //   3: m1 2 f (V3), m2 0 k (V3), m1 0 k (B3)   → 2; k twice beats f once
        //   4: m1 0 h (V4), m2 0 f (B4)                → 0; tie h/f: f
        // Lost: V2 changed (7), W1 `\r` (4), V5 beyond the end (3), commit NOPE (1):
        // 4 rows, 15 hits; m3 had only that lost row, so it has no record.
        // Without line: sl=0. Deleted: fs/gone.c.
        let want = json!({
            "files": {"fs/f.c": {
                "managers": {
                    "*": {"1": 10, "2": 1, "3": 2, "4": 0},
                    "m1": {"1": 10, "2": 1, "3": 2, "4": 0},
                    "m2": {"1": 0, "2": 0, "3": 0, "4": 0},
                },
                "funcs": {"f": [2, 4], "k": [3], "zz": [1]},
            }},
            "totals": {"instrumented": 4, "covered": 3},
        });
        assert_eq!(got.canon, want);
        assert_eq!(
            got.counts,
            json!({
                "rows_in": 16, "rows_without_line": 1, "rows_lost": 4, "hits_lost": 15,
                "rows_merged": 10, "rows_deleted": 1, "files": 1, "files_deleted": 1,
                "instrumented": 4, "covered": 3,
            })
        );
    }
}
