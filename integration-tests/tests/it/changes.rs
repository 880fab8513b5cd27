//! `covmerge diff` across base commits on a generated git history: two periods merged
//! onto two bases, every file's categories checked against the results (contract §9's
//! identities) and against `git diff --histogram`, and `--fail-on`'s exit status.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use covmerge_integration_tests::{covmerge, gunzip, FleetCorpus};
use serde_json::Value;

/// path -> line -> hits of the `*` records of a result.
fn star_lines(path: &Path) -> BTreeMap<String, BTreeMap<u32, u64>> {
    let text = String::from_utf8(gunzip(path)).unwrap();
    let mut files = BTreeMap::new();
    for l in text.lines().skip(1) {
        let v: Value = serde_json::from_str(l).unwrap();
        let m = &v["MCR"];
        if m.is_object() && m["Manager"] == "*" {
            let d = &m["FileData"];
            let lines = d["LinesInstrumented"].as_array().unwrap();
            let hits = d["HitCounts"].as_array().unwrap();
            files.insert(
                m["FilePath"].as_str().unwrap().to_string(),
                lines
                    .iter()
                    .zip(hits)
                    .map(|(l, h)| (l.as_u64().unwrap() as u32, h.as_u64().unwrap()))
                    .collect(),
            );
        }
    }
    files
}

/// (removed OLD lines, added NEW lines) of `git diff --histogram` between two commits.
fn git_hunks(git: &Path, old: &str, new: &str, path: &str) -> (BTreeSet<u32>, BTreeSet<u32>) {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(git)
        .args(["diff", "--histogram", "-U0", "--no-color", "--no-renames"])
        .args([old, new, "--", path])
        .output()
        .unwrap();
    assert!(out.status.success());
    let (mut rm, mut add) = (BTreeSet::new(), BTreeSet::new());
    let range = |s: &str| -> (u32, u32) {
        let (a, n) = s.split_once(',').unwrap_or((s, "1"));
        (a.parse().unwrap(), n.parse().unwrap())
    };
    for l in String::from_utf8(out.stdout).unwrap().lines() {
        if let Some(h) = l.strip_prefix("@@ -") {
            let mut it = h.split(' ');
            let (a, n) = range(it.next().unwrap());
            let (b, m) = range(it.next().unwrap().trim_start_matches('+'));
            rm.extend(a..a + n);
            add.extend(b..b + m);
        }
    }
    (rm, add)
}

fn count(v: &Value, cat: &str) -> u64 {
    v["categories"][cat].as_u64().unwrap_or(0)
}

fn lines(v: &Value, cat: &str) -> Vec<u32> {
    v["lines"][cat]
        .as_array()
        .map(|a| a.iter().map(|x| x.as_u64().unwrap() as u32).collect())
        .unwrap_or_default()
}

/// path -> line -> hits of one result's `*` records.
type StarLines = BTreeMap<String, BTreeMap<u32, u64>>;

/// Lines covered of one file's `*` record.
fn covered(m: &BTreeMap<u32, u64>) -> u64 {
    m.values().filter(|&&h| h > 0).count() as u64
}

/// contract §9's identities for one written file `v`, OLD lines `o` and NEW lines
/// `n`; every line against the result it comes from. Returns the file's categories.
fn assert_identities(
    path: &str,
    o: &BTreeMap<u32, u64>,
    n: &BTreeMap<u32, u64>,
    v: &Value,
) -> Vec<String> {
    let k = |c: &str| count(v, c);
    assert_eq!(
        o.len() as u64,
        k("CBC") + k("LBC") + k("GBC") + k("UBC") + k("ECB") + k("EUB") + k("DCB") + k("DUB"),
        "{path} OLD instrumented"
    );
    assert_eq!(
        n.len() as u64,
        k("CBC") + k("LBC") + k("GBC") + k("UBC") + k("GIC") + k("UIC") + k("GNC") + k("UNC"),
        "{path} NEW instrumented"
    );
    assert_eq!(
        covered(o),
        k("CBC") + k("LBC") + k("ECB") + k("DCB"),
        "{path} OLD covered"
    );
    assert_eq!(
        covered(n),
        k("CBC") + k("GBC") + k("GIC") + k("GNC"),
        "{path} NEW covered"
    );
    assert_eq!(v["old"]["instrumented"], o.len() as u64, "{path}");
    assert_eq!(v["new"]["covered"], covered(n), "{path}");
    let mut cats = Vec::new();
    for (cat, c) in v["categories"].as_object().unwrap() {
        assert_eq!(
            lines(v, cat).len() as u64,
            c.as_u64().unwrap(),
            "{path} {cat}"
        );
        cats.push(cat.clone());
    }
    // Every line against the result it comes from.
    for l in lines(v, "DCB") {
        assert!(o[&l] > 0, "{path} DCB {l}");
    }
    for l in lines(v, "GNC")
        .iter()
        .chain(&lines(v, "GIC"))
        .chain(&lines(v, "GBC"))
    {
        assert!(n[l] > 0, "{path} {l}");
    }
    for l in lines(v, "ECB").iter().chain(&lines(v, "EUB")) {
        assert!(!n.contains_key(l), "{path} E.. {l} is instrumented in NEW");
    }
    cats
}

/// A changed file's categories against git's own histogram diff of the file between
/// the bases.
fn assert_agrees_with_git(git: &Path, old_base: &str, new_base: &str, path: &str, v: &Value) {
    let (rm, add) = git_hunks(git, old_base, new_base, path);
    for l in lines(v, "DCB").iter().chain(&lines(v, "DUB")) {
        assert!(rm.contains(l), "{path}: OLD line {l} is not removed by git");
    }
    for l in lines(v, "GNC").iter().chain(&lines(v, "UNC")) {
        assert!(add.contains(l), "{path}: NEW line {l} is not added by git");
    }
    for cat in ["CBC", "LBC", "GBC", "UBC", "ECB", "EUB", "GIC", "UIC"] {
        for l in lines(v, cat) {
            assert!(!add.contains(&l), "{path}: {cat} line {l} is added by git");
        }
    }
}

/// Every file of OLD or NEW against the diff's records (`written`, by file) and, if
/// changed, against git; returns how many were checked against git and the
/// categories seen.
fn assert_files(
    (ol, nl): (&StarLines, &StarLines),
    written: &BTreeMap<&str, &Value>,
    (git, old_base, new_base): (&Path, &str, &str),
) -> (usize, BTreeSet<String>) {
    let empty = BTreeMap::new();
    let paths: BTreeSet<&String> = ol.keys().chain(nl.keys()).collect();
    let mut checked_against_git = 0;
    let mut seen = BTreeSet::new();
    for path in paths {
        let (o, n) = (
            ol.get(path).unwrap_or(&empty),
            nl.get(path).unwrap_or(&empty),
        );
        let Some(v) = written.get(path.as_str()) else {
            // Not written: every line CBC or UBC, so nothing moved in or out.
            assert_eq!((o.len(), covered(o)), (n.len(), covered(n)), "{path}");
            continue;
        };
        seen.extend(assert_identities(path, o, n, v));
        if v["text"] == "changed" {
            assert_agrees_with_git(git, old_base, new_base, path, v);
            checked_against_git += 1;
        }
    }
    (checked_against_git, seen)
}

/// `--fail-on`: reached names the file (the one of most DCB lines) and exits 3; not
/// reached exits 0; a malformed spec exits 2. The output is written either way.
fn assert_fail_on(diff: &[String], written: &BTreeMap<&str, &Value>, out: &Path, text: &str) {
    let (file, dcb) = written
        .iter()
        .map(|(p, v)| (*p, count(v, "DCB")))
        .max_by_key(|x| x.1)
        .unwrap();
    let run = |spec: &str| {
        let mut a: Vec<&str> = diff.iter().map(String::as_str).collect();
        a.extend(["--out", out.to_str().unwrap(), "--fail-on", spec]);
        covmerge(&a)
    };
    let o = run(&format!("DCB>={dcb}"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!("{file}: DCB {dcb} (>= {dcb})")),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(out).unwrap(),
        text,
        "the output is written whatever --fail-on says"
    );
    let o = run(&format!("DCB>={}", dcb + 1));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run("LBC=>3");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--fail-on \"LBC=>3\": no `>=`"), "{err}");
}

#[test]
fn categories_across_bases_on_a_git_history_hold_the_identities_and_agree_with_git() {
    let s = FleetCorpus::local(27)
        .git()
        .files(40)
        .commits(8)
        .parts(2)
        .manager_commit_share(0.6)
        .no_edge_cases()
        .build();
    let c = &s.corpus;
    let git = c.git.clone().unwrap();
    let src = s.git_source();
    // Two periods (the two parts) merged onto two bases, commits apart.
    let (old_base, new_base) = (&c.commits[3], &c.commits[7]);
    let (old, new) = (s.path("old.gz"), s.path("new.gz"));
    s.merge_onto(&src, &c.inputs[0], old_base, &old);
    s.merge_onto(&src, &c.inputs[1], new_base, &new);
    let diff: Vec<String> = ["diff", old.to_str().unwrap(), new.to_str().unwrap()]
        .into_iter()
        .chain(["--source", &src])
        .map(String::from)
        .collect();
    let diff_out = s.path("diff.jsonl");
    let mut a: Vec<&str> = diff.iter().map(String::as_str).collect();
    a.extend(["--out", diff_out.to_str().unwrap()]);
    let o = covmerge(&a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary = String::from_utf8(o.stdout).unwrap();
    assert!(summary.contains("without source text"), "{summary}");

    let (ol, nl) = (star_lines(&old), star_lines(&new));
    let text = std::fs::read_to_string(&diff_out).unwrap();
    let recs: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(recs[0]["old"]["commit"], old_base.as_str());
    assert_eq!(recs[0]["new"]["commit"], new_base.as_str());
    let written: BTreeMap<&str, &Value> = recs[1..recs.len() - 1]
        .iter()
        .map(|v| (v["file"].as_str().unwrap(), v))
        .collect();
    let (checked_against_git, seen) =
        assert_files((&ol, &nl), &written, (&git, old_base, new_base));
    assert!(
        checked_against_git >= 3,
        "{checked_against_git} changed files"
    );
    // The history makes every kind of change.
    for cat in ["LBC", "GBC", "GNC", "UNC", "DCB", "DUB"] {
        assert!(seen.contains(cat), "no {cat} in {seen:?}");
    }
    // The totals are the sums of the files (written or not).
    let t = &recs.last().unwrap()["totals"];
    let old_cov: u64 = ol.values().map(covered).sum();
    assert_eq!(t["old"]["covered"].as_u64().unwrap(), old_cov, "{t}");
    let tk = |c: &str| t["categories"][c].as_u64().unwrap_or(0);
    assert_eq!(old_cov, tk("CBC") + tk("LBC") + tk("ECB") + tk("DCB"));

    assert_fail_on(&diff, &written, &s.path("d2.jsonl"), &text);

    // Without a source, two bases are refused saying what to give.
    let o = covmerge(&["diff", old.to_str().unwrap(), new.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("give --source SRC"), "{err}");
}

/// `covmerge-changes-check` (the real-history check of the categories) on a generated git
/// history: two periods built, merged and diffed; the identities hold and the sampled
/// files are compared with git.
#[test]
fn changes_check_runs_on_a_generated_history() {
    let s = FleetCorpus::local(28)
        .git()
        .files(20)
        .lines(120)
        .commits(8)
        .managers(2)
        .parts(1)
        .no_edge_cases()
        .build();
    let c = &s.corpus;
    let git = c.git.clone().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_covmerge-changes-check"))
        .arg("--repo")
        .arg(&git)
        .args(["--old", &c.commits[3], "--new", &c.commits[7]])
        .args(["--commits", "3", "--managers", "3", "--sample", "10"])
        .arg("--work")
        .arg(s.path("work"))
        .arg("--covmerge")
        .arg(covmerge_integration_tests::bin())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(", 0 problem(s)"), "{stdout}");
    let sampled = stdout
        .split(" sampled files agree")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse::<u32>().ok());
    assert_eq!(sampled, Some(10), "{stdout}");
}
