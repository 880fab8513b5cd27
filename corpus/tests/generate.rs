//! End-to-end tests of the corpus generator on tiny specs.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use covmerge_corpus::{generate, Corpus, CorpusSpec, Error, HEADER};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "covmerge-corpus-test-{name}-{}",
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

fn tiny() -> CorpusSpec {
    CorpusSpec {
        seed: 42,
        files: 6,
        lines: 60,
        commits: 4,
        managers: 3,
        parts: 3,
        ..Default::default()
    }
}

fn read_input(p: &Path) -> String {
    let raw = fs::read(p).unwrap();
    if p.extension().is_some_and(|e| e == "gz") {
        let mut s = String::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_string(&mut s)
            .unwrap();
        s
    } else {
        String::from_utf8(raw).unwrap()
    }
}

/// All files under `dir`, relative path -> bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
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

/// Data lines of every part (headers excluded).
fn data_lines(c: &Corpus) -> Vec<Vec<String>> {
    c.inputs
        .iter()
        .map(|p| {
            let text = read_input(p);
            let mut lines = text.lines();
            assert_eq!(
                lines.next(),
                Some(HEADER),
                "{} starts with the header",
                p.display()
            );
            lines.filter(|l| *l != HEADER).map(str::to_string).collect()
        })
        .collect()
}

fn git(repo: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn deterministic() {
    let a = TempDir::new("det-a");
    let b = TempDir::new("det-b");
    let ca = generate(&tiny(), &a.0).unwrap();
    let cb = generate(&tiny(), &b.0).unwrap();
    assert_eq!(ca.commits, cb.commits);
    assert_eq!(ca.rows, cb.rows);
    for (x, y) in ca.inputs.iter().zip(&cb.inputs) {
        assert_eq!(fs::read(x).unwrap(), fs::read(y).unwrap());
    }
    assert_eq!(tree(&ca.sources), tree(&cb.sources));
    assert_eq!(
        fs::read(a.0.join("corpus.json")).unwrap(),
        fs::read(b.0.join("corpus.json")).unwrap()
    );

    // A rerun into the same directory replaces the previous output.
    let again = generate(&tiny(), &a.0).unwrap();
    assert_eq!(again.commits, ca.commits);
    for (x, y) in again.inputs.iter().zip(&cb.inputs) {
        assert_eq!(fs::read(x).unwrap(), fs::read(y).unwrap());
    }

    // Another seed gives another corpus.
    let c = TempDir::new("det-c");
    let cc = generate(&CorpusSpec { seed: 43, ..tiny() }, &c.0).unwrap();
    assert_ne!(cc.commits, ca.commits);
}

#[test]
fn history_layout_and_git() {
    let d = TempDir::new("layout");
    let c = generate(&tiny(), &d.0).unwrap();
    assert_eq!(c.commits.len(), 4);
    assert_eq!(c.commits.last(), Some(&c.base_commit));
    assert!(c
        .commits
        .iter()
        .all(|s| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())));
    assert_eq!(c.base_repo, "git://example.invalid/linux.git");

    let deleted = c.deleted_file.clone().expect("a deleted file");
    let base_only = c.base_only_file.clone().expect("a base-only file");
    let first = c.sources.join(&c.commits[0]);
    let base = c.sources.join(&c.base_commit);
    assert!(first.join(&deleted).is_file());
    assert!(!base.join(&deleted).exists());
    assert!(base.join(&base_only).is_file());
    for sha in &c.commits[..3] {
        assert!(!c.sources.join(sha).join(&base_only).exists());
    }

    let repo = c.git.clone().expect("git repo");
    let head = String::from_utf8(git(&repo, &["rev-parse", "master"])).unwrap();
    assert_eq!(head.trim(), c.base_commit);
    let list = String::from_utf8(git(&repo, &["rev-list", "--reverse", "master"])).unwrap();
    assert_eq!(
        list.lines().collect::<Vec<_>>(),
        c.commits.iter().map(String::as_str).collect::<Vec<_>>()
    );
    // Every file of the base and of commit 0 matches the repository.
    for sha in [&c.commits[0], &c.base_commit] {
        let files = tree(&c.sources.join(sha));
        let ls = String::from_utf8(git(&repo, &["ls-tree", "-r", "--name-only", sha])).unwrap();
        assert_eq!(
            ls.lines().collect::<Vec<_>>(),
            files.keys().map(String::as_str).collect::<Vec<_>>()
        );
        for (path, bytes) in files.iter().take(4) {
            assert_eq!(
                &git(&repo, &["cat-file", "-p", &format!("{sha}:{path}")]),
                bytes,
                "{sha}:{path}"
            );
        }
    }
    // The history really changes files.
    assert_ne!(tree(&first), tree(&base));

    let json = fs::read_to_string(d.0.join("corpus.json")).unwrap();
    assert!(json.contains(&format!("\"base_commit\": \"{}\"", c.base_commit)));
    assert!(json.contains(&format!("\"rows\": {}", c.rows)));
    assert!(json
        .contains("\"inputs\": [\"input-00.csv.gz\", \"input-01.csv.gz\", \"input-02.csv.gz\"]"));
}

#[test]
fn rows_counted_and_shaped() {
    let d = TempDir::new("rows");
    let spec = CorpusSpec {
        no_git: true,
        ..tiny()
    };
    let c = generate(&spec, &d.0).unwrap();
    assert!(c.git.is_none());
    let parts = data_lines(&c);
    let total: usize = parts.iter().map(Vec::len).sum();
    assert_eq!(total as u64, c.rows);
    assert!(c.rows > 100, "rows: {}", c.rows);

    let headers: usize = c
        .inputs
        .iter()
        .map(|p| read_input(p).lines().filter(|l| *l == HEADER).count())
        .sum();
    assert_eq!(headers, c.inputs.len() + 1, "one repeated header");

    let mut files_parts: BTreeMap<String, std::collections::BTreeSet<usize>> = BTreeMap::new();
    let (mut sl0, mut past_end, mut unknown, mut deleted, mut zeros) = (0, 0, 0, 0, 0);
    for (pi, part) in parts.iter().enumerate() {
        for l in part {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 18, "{l}");
            files_parts.entry(f[9].to_string()).or_default().insert(pi);
            let (commit, path, sl) = (f[8], f[9], f[11].parse::<usize>().unwrap());
            zeros += usize::from(f[15] == "0");
            if Some(path) == c.deleted_file.as_deref() {
                deleted += 1;
            }
            if !c.commits.iter().any(|x| x == commit) {
                unknown += 1;
                continue;
            }
            if sl == 0 {
                sl0 += 1;
                continue;
            }
            let src = fs::read_to_string(c.sources.join(commit).join(path)).unwrap();
            let n = src.lines().count();
            if sl > n {
                past_end += 1;
                continue;
            }
            // func_name is the function containing the line (or empty).
            let lines: Vec<&str> = src.lines().collect();
            let func = f[10];
            if !func.is_empty() {
                let sig = format!(" {func}(");
                let mut i = sl - 1;
                while !(lines[i].contains(&sig) && lines.get(i + 1) == Some(&"{")) {
                    assert!(
                        i == sl - 1 || lines[i] != "}",
                        "{func} does not contain line {sl}: {l}"
                    );
                    assert!(i > 0, "no function {func} above line {sl}: {l}");
                    i -= 1;
                }
            }
        }
    }
    assert_eq!((sl0, past_end, unknown), (3, 3, 3));
    assert!(deleted >= 3);
    let share = zeros as f64 / total as f64;
    assert!((0.25..0.6).contains(&share), "zero share {share}");
    // A file's rows are spread over several parts.
    assert!(files_parts.values().any(|s| s.len() > 1));
}

#[test]
fn sorted_plain_and_no_edge_cases() {
    let a = TempDir::new("sorted");
    let b = TempDir::new("shuffled");
    let sorted = CorpusSpec {
        sorted: true,
        plain: true,
        no_git: true,
        ..tiny()
    };
    let cs = generate(&sorted, &a.0).unwrap();
    assert!(cs
        .inputs
        .iter()
        .all(|p| p.extension().is_some_and(|e| e == "csv")));
    let parts = data_lines(&cs);
    for part in &parts {
        let paths: Vec<&str> = part.iter().map(|l| l.split(',').nth(9).unwrap()).collect();
        assert!(
            paths.windows(2).all(|w| w[0] <= w[1]),
            "sorted by file_path"
        );
    }
    // Sorted and shuffled corpora hold the same rows.
    let cu = generate(
        &CorpusSpec {
            sorted: false,
            ..sorted.clone()
        },
        &b.0,
    )
    .unwrap();
    assert_eq!(cu.rows, cs.rows);
    let mut x: Vec<String> = parts.concat();
    let mut y: Vec<String> = data_lines(&cu).concat();
    x.sort();
    y.sort();
    assert_eq!(x, y);

    let n = TempDir::new("noedge");
    let cn = generate(
        &CorpusSpec {
            no_edge_cases: true,
            ..sorted
        },
        &n.0,
    )
    .unwrap();
    let headers: usize = cn
        .inputs
        .iter()
        .map(|p| read_input(p).lines().filter(|l| *l == HEADER).count())
        .sum();
    assert_eq!(headers, cn.inputs.len());
    for l in data_lines(&cn).concat() {
        let f: Vec<&str> = l.split(',').collect();
        assert!(cn.commits.iter().any(|c| c == f[8]));
        assert_ne!(f[11], "0");
    }
    assert_eq!(data_lines(&cn).concat().len() as u64, cn.rows);
}

#[test]
fn degenerate_specs() {
    let d = TempDir::new("degenerate");
    let one = CorpusSpec {
        files: 1,
        lines: 5,
        commits: 1,
        managers: 1,
        parts: 1,
        no_git: true,
        ..Default::default()
    };
    let c = generate(&one, &d.0).unwrap();
    assert_eq!(c.commits.len(), 1);
    assert!(c.deleted_file.is_none() && c.base_only_file.is_none());
    assert_eq!(data_lines(&c).concat().len() as u64, c.rows);

    let bad = CorpusSpec {
        parts: 0,
        ..Default::default()
    };
    assert!(matches!(generate(&bad, &d.0), Err(Error::Spec(_))));
}
