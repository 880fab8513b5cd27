//! syz-covermerger's options: `--file-path-prefix` and `--base-at DATE [--branch B]`.

use std::path::Path;
use std::process::Command;

use covmerge_integration_tests::{canon, covmerge, fixture, gunzip, manifest, merge_ok};
use serde_json::Value;

fn semantics(out: &Path, man: &Path, extra: &[&str]) {
    let d = fixture("semantics");
    let src = format!("dir:{}", d.join("sources").display());
    let mut a = vec![
        "--source",
        &src,
        "--base-repo",
        "git://example/linux",
        "--base-commit",
        "base",
        "--out",
        out.to_str().unwrap(),
        "--manifest",
        man.to_str().unwrap(),
        "--shards",
        "3",
    ];
    a.extend_from_slice(extra);
    let ia = d.join("input-a.csv");
    let ib = d.join("input-b.csv.gz");
    a.extend_from_slice(&["--input", ia.to_str().unwrap(), ib.to_str().unwrap()]);
    merge_ok(&a);
}

/// Only files under the prefix are merged, each exactly as in the full merge; the
/// other rows are counted in rows_outside_prefix, rows_in keeps contract §7's identity, and
/// the header's TotalRows counts the rows in scope (as syz-covermerger's query would).
#[test]
fn file_path_prefix_merges_matching_files_and_counts_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let (full, full_man) = (tmp.path().join("full.gz"), tmp.path().join("full.json"));
    semantics(&full, &full_man, &[]);
    let (mm, mm_man) = (tmp.path().join("mm.gz"), tmp.path().join("mm.json"));
    semantics(&mm, &mm_man, &["--file-path-prefix", "mm/"]);
    let (all, part) = (canon(&full), canon(&mm));
    let want: serde_json::Map<String, Value> = all["files"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(p, _)| p.starts_with("mm/"))
        .map(|(p, v)| (p.clone(), v.clone()))
        .collect();
    assert!(want.len() >= 2);
    assert_eq!(part["files"], Value::Object(want));
    let (f, p) = (
        manifest(&full_man)["totals"].clone(),
        manifest(&mm_man)["totals"].clone(),
    );
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("totals.{k}"));
    assert!(n(&p, "rows_outside_prefix") > 0);
    assert_eq!(n(&f, "rows_outside_prefix"), 0);
    assert_eq!(
        n(&p, "rows_in") + n(&p, "rows_outside_prefix"),
        n(&f, "rows_in"),
        "every row read is in scope or outside it"
    );
    assert_eq!(
        n(&p, "rows_in"),
        [
            "rows_merged",
            "rows_bad",
            "rows_without_line",
            "rows_lost",
            "rows_deleted"
        ]
        .iter()
        .map(|k| n(&p, k))
        .sum::<u64>()
    );
    let text = String::from_utf8(gunzip(&mm)).unwrap();
    let head: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(head["TotalRows"].as_u64().unwrap(), n(&p, "rows_in"));
}

fn git(repo: &Path, args: &[&str], date: &str) {
    let o = Command::new("git")
        .args(args)
        .current_dir(repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .env("GIT_AUTHOR_DATE", date)
        .env("GIT_COMMITTER_DATE", date)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn rev(repo: &Path, r: &str) -> String {
    let o = Command::new("git")
        .args(["rev-parse", r])
        .current_dir(repo)
        .output()
        .unwrap();
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

fn commit(repo: &Path, content: &str, date: &str) -> String {
    std::fs::write(repo.join("f.c"), content).unwrap();
    git(repo, &["add", "f.c"], date);
    git(repo, &["commit", "-q", "-m", date], date);
    rev(repo, "HEAD")
}

/// `--base-at 2024-04-08` takes the branch's last commit at or before 23:59:59 UTC that
/// day (not the one a second later), `--branch` picks another branch, `--date-to`
/// defaults to the date, and rows project onto that base.
#[test]
fn base_at_picks_the_last_commit_of_the_day_on_the_branch() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "master"], "1712484000 +0000");
    let a = commit(&repo, "a\nb\n", "1712484000 +0000"); // 2024-04-07 10:00 UTC
    git(
        &repo,
        &["checkout", "-q", "-b", "other"],
        "1712484000 +0000",
    );
    let d = commit(&repo, "a\nb\nd\n", "1712577600 +0000"); // 2024-04-08 12:00 UTC
    git(&repo, &["checkout", "-q", "master"], "1712484000 +0000");
    let b = commit(&repo, "x\na\nb\n", "1712620799 +0000"); // 2024-04-08 23:59:59 UTC
    let _c = commit(&repo, "y\nx\na\nb\n", "1712620800 +0000"); // 2024-04-09 00:00:00 UTC
    let input = tmp.path().join("in.csv");
    std::fs::write(
        &input,
        format!(
            "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\n\
             r,{a},f.c,fn,m,1,4\nr,{a},f.c,fn,m,2,0\n"
        ),
    )
    .unwrap();
    let src = format!("git:{}", repo.display());
    let run = |extra: &[&str]| -> Vec<Value> {
        let out = tmp.path().join("out.gz");
        let mut args = vec![
            "--source",
            &src,
            "--base-repo",
            "r",
            "--base-at",
            "2024-04-08",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--out", out.to_str().unwrap(), "--input"]);
        args.push(input.to_str().unwrap());
        merge_ok(&args);
        String::from_utf8(gunzip(&out))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let lines = run(&[]);
    assert_eq!(
        lines[0]["Commit"],
        b.as_str(),
        "HEAD branch at the end of the day"
    );
    assert_eq!(lines[0]["DateTo"], "2024-04-08");
    assert_eq!(
        lines[1]["MCR"]["FileData"]["LinesInstrumented"],
        serde_json::json!([2, 3]),
        "rows of {a} projected onto {b}"
    );
    let lines = run(&["--branch", "other"]);
    assert_eq!(lines[0]["Commit"], d.as_str());
    let lines = run(&["--date-to", "2024-04-30"]);
    assert_eq!(
        lines[0]["DateTo"], "2024-04-30",
        "an explicit --date-to wins"
    );
    // A merge that must fail: its stderr.
    let x = tmp.path().join("x.gz");
    let fails = |source: &str, extra: &[&str]| -> String {
        let mut args = vec!["merge", "--quiet", "--source", source, "--base-repo", "r"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--out", x.to_str().unwrap(), "--input"]);
        args.push(input.to_str().unwrap());
        let o = covmerge(&args);
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    // Before the first commit: nothing to merge onto, said clearly.
    assert!(fails(&src, &["--base-at", "2024-01-01"]).contains("no commit at or before"));
    // A branch the repository lacks is named as such (it said only
    // "refs/remotes/origin/nosuch could not be found").
    let err = fails(&src, &["--base-at", "2024-04-08", "--branch", "nosuch"]);
    assert!(
        err.contains("--branch nosuch") && err.contains("no such branch"),
        "{err}"
    );
    // --base-at needs a git: source.
    assert!(
        fails("dir:/tmp", &["--base-at", "2024-04-08"]).contains("--base-at needs a git: source")
    );
}
