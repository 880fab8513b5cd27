//! Every record of a file is unique by name (contract §4, §6): a manager the format
//! reserves (`*`), that a `--group` takes, that is empty or past the cap is a bad row,
//! never a second record. Each test is named after what a build did before the fix.

use std::path::Path;

use covmerge_integration_tests::{covmerge, gunzip, manifest};

use crate::bad_input::{Case, HDR};

/// The `Manager` of every `MCR` record of `path` in the result, in order.
fn managers_of(result: &Path, path: &str) -> Vec<String> {
    let text = String::from_utf8(gunzip(result)).unwrap();
    text.lines()
        .skip(1)
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["MCR"]["FilePath"] == path)
        .map(|v| v["MCR"]["Manager"].as_str().unwrap().to_string())
        .collect()
}

/// One row with `manager=*` gave the file a second `"Manager":"*"` record (the
/// dashboard took that row's coverage for the whole file's, and covmerge's own
/// `report` refused the result). Now it is a bad row: the job fails naming the input
/// and line; with `--max-bad-rows 1` it is counted and skipped, the file has one `*`
/// record, and `report` and `diff` read the result.
#[test]
fn a_manager_named_star_gave_a_file_two_star_records() {
    let c = Case::new();
    let input = c.write(
        "in.csv",
        &format!("{HDR}r,c1,a.c,f,m,1,1\nr,c1,a.c,f,*,2,3\nr,c1,a.c,f,m,3,2\n"),
    );
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(!ok, "a row with manager `*` was merged");
    assert!(err.contains("in.csv:3:"), "{err}");
    assert!(err.contains("`manager`") && err.contains("`*`"), "{err}");
    c.no_result();

    let (ok, err) = c.merge(&[&input], &["--max-bad-rows", "1"]);
    assert!(ok, "{err}");
    let m = manifest(&c.path("manifest.json"));
    assert_eq!(m["totals"]["rows_bad"], 1);
    assert_eq!(m["totals"]["rows_in"], 3);
    let out = c.path("out.jsonl.gz");
    assert_eq!(managers_of(&out, "a.c"), ["*", "m"]);
    let text = String::from_utf8(gunzip(&out)).unwrap();
    assert!(
        text.contains(r#""Manager":"*","FilePath":"a.c","FileData":{"Instrumented":2,"Covered":2,"LinesInstrumented":[1,3],"HitCounts":[1,2]}"#),
        "{text}"
    );
    let site = c.path("site");
    let o = covmerge(&[
        "report",
        out.to_str().unwrap(),
        "--out",
        site.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = covmerge(&["diff", out.to_str().unwrap(), out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A row whose manager is a `--group`'s NAME failed the whole job at the merge, even
/// with `--max-bad-rows`: which records are the group's and which the manager's
/// cannot be told apart. Now it is a bad row like any other, named by input and line.
#[test]
fn a_manager_named_like_a_group_failed_the_job_past_max_bad_rows() {
    let c = Case::new();
    let input = c.write(
        "in.csv",
        &format!("{HDR}r,c1,a.c,f,m1,1,1\nr,c1,a.c,f,all,2,3\nr,c1,a.c,f,m2,3,2\n"),
    );
    let (ok, err) = c.merge(&[&input], &["--group", "all=m*"]);
    assert!(!ok, "a row with a group's name as manager was merged");
    assert!(err.contains("in.csv:3:"), "{err}");
    assert!(err.contains("\"all\"") && err.contains("--group"), "{err}");
    c.no_result();

    let (ok, err) = c.merge(&[&input], &["--group", "all=m*", "--max-bad-rows", "1"]);
    assert!(ok, "{err}");
    assert_eq!(manifest(&c.path("manifest.json"))["totals"]["rows_bad"], 1);
    assert_eq!(
        managers_of(&c.path("out.jsonl.gz"), "a.c"),
        ["*", "m1", "m2", "all"]
    );
}

/// An empty manager was merged as a record with `"Manager":""`, and a 100 KB one was
/// matched against every group glob (a 1 MB one, seconds per pair). Both are bad rows
/// now: empty, and longer than the documented cap, said with the length.
#[test]
fn an_empty_or_huge_manager_was_merged_as_a_record() {
    let c = Case::new();
    let huge = "m".repeat(100_000);
    for (manager, what) in [("", "is empty"), (huge.as_str(), "is 100000 bytes")] {
        let input = c.write(
            "in.csv",
            &format!("{HDR}r,c1,a.c,f,m,1,1\nr,c1,a.c,f,{manager},2,3\n"),
        );
        let (ok, err) = c.merge(&[&input], &[]);
        assert!(!ok, "manager of {} bytes merged", manager.len());
        assert!(err.contains("in.csv:3:") && err.contains(what), "{err}");
        c.no_result();
        let (ok, err) = c.merge(&[&input], &["--max-bad-rows", "1"]);
        assert!(ok, "{err}");
        assert_eq!(managers_of(&c.path("out.jsonl.gz"), "a.c"), ["*", "m"]);
        std::fs::remove_file(c.path("out.jsonl.gz")).unwrap();
    }
    // The cap itself is a manager.
    let at_cap = "m".repeat(1024);
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,{at_cap},2,3\n"));
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(ok, "{err}");
    assert_eq!(managers_of(&c.path("out.jsonl.gz"), "a.c"), ["*", &at_cap]);
}

/// A Go input's rows are all its manager's: `--go-manager INPUT=*` gave each file a
/// second `*` record, and an input named like a group (`all.out` beside
/// `--group all=...`) gave the group's name to a manager. Refused now: up front when
/// the flag names it or every input is Go, else by the input's split, naming the input.
#[test]
fn a_go_input_could_be_named_star_or_like_a_group() {
    let c = Case::new();
    let prof = c.write("all.out", "mode: set\nexample.com/m/a.c:1.1,2.5 1 1\n");
    let module = ["--go-module", "example.com/m=."];
    let with = |more: &[&'static str]| -> Vec<&'static str> {
        module.iter().chain(more).copied().collect()
    };
    let (ok, err) = c.merge(&[&prof], &with(&["--go-manager", "all=*"]));
    assert!(!ok, "a Go input merged as manager `*`");
    assert!(
        err.contains("--go-manager all=*: the manager is `*`"),
        "{err}"
    );
    c.no_result();
    let (ok, err) = c.merge(&[&prof], &with(&["--group", "all=m*"]));
    assert!(!ok, "a Go input merged under a group's name");
    assert!(
        err.contains("all.out")
            && err.contains("its manager \"all\" is the NAME of --group all=m*"),
        "{err}"
    );
    c.no_result();
    let (ok, err) = c.merge(
        &[&prof],
        &with(&["--input-format", "go-text", "--group", "all=m*"]),
    );
    assert!(!ok);
    assert!(
        err.contains("Go input") && err.contains("--go-manager"),
        "{err}"
    );
    c.no_result();
    let (ok, err) = c.merge(
        &[&prof],
        &with(&["--group", "all=m*", "--go-manager", "all=m1"]),
    );
    assert!(ok, "{err}");
    assert_eq!(
        managers_of(&c.path("out.jsonl.gz"), "a.c"),
        ["*", "m1", "all"]
    );
}

/// `--go-module X=./` was taken for `X=.`, and a MODULE given twice silently mapped
/// its files by the first rule: both are refused before any work, naming the flag.
#[test]
fn go_module_dot_slash_and_a_module_given_twice_were_accepted() {
    let c = Case::new();
    let prof = c.write("p.out", "mode: set\nexample.com/m/a.c:1.1,2.5 1 1\n");
    let (ok, err) = c.merge(&[&prof], &["--go-module", "example.com/m=./"]);
    assert!(!ok, "--go-module example.com/m=./ accepted");
    assert!(
        err.contains("--go-module \"example.com/m=./\"") && err.contains("ends with `/`"),
        "{err}"
    );
    let (ok, err) = c.merge(
        &[&prof],
        &[
            "--go-module",
            "example.com/m=.",
            "--go-module",
            "example.com/m=sub",
        ],
    );
    assert!(!ok, "a MODULE given twice accepted");
    assert!(
        err.contains("MODULE \"example.com/m\" is given twice"),
        "{err}"
    );
    c.no_result();
    let (ok, err) = c.merge(&[&prof], &["--go-module", "example.com/m=."]);
    assert!(ok, "{err}");
    assert_eq!(managers_of(&c.path("out.jsonl.gz"), "a.c"), ["*", "p"]);
}
