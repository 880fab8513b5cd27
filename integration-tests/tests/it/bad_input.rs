//! contract §6: a missing column is refused before any row is read; a malformed row fails
//! the job naming input and line, unless `--max-bad-rows` allows it; a truncated gzip
//! is an error; and no failure ever leaves a result behind.

use std::io::Write;
use std::path::{Path, PathBuf};

use covmerge_integration_tests::{canon, covmerge, manifest};

pub(crate) const HDR: &str = "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\n";

pub(crate) struct Case {
    dir: tempfile::TempDir,
}

#[allow(dead_code)]
impl Case {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/c1")).unwrap();
        std::fs::write(dir.path().join("src/c1/a.c"), "int a;\nint b;\nint c;\n").unwrap();
        Case { dir }
    }
    pub(crate) fn dir_path(&self) -> &Path {
        self.dir.path()
    }
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }
    pub(crate) fn merge(&self, inputs: &[&Path], extra: &[&str]) -> (bool, String) {
        let src = format!("dir:{}", self.path("src").display());
        let out = self.path("out.jsonl.gz");
        let man = self.path("manifest.json");
        let mut args = vec![
            "merge",
            "--quiet",
            "--source",
            &src,
            "--base-repo",
            "r",
            "--base-commit",
            "c1",
            "--out",
            out.to_str().unwrap(),
            "--manifest",
            man.to_str().unwrap(),
        ];
        if !extra.contains(&"--shards") {
            args.extend(["--shards", "2"]);
        }
        args.extend_from_slice(extra);
        args.push("--input");
        let ins: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
        args.extend(ins.iter().map(|s| s.as_str()));
        let o = covmerge(&args);
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }
    pub(crate) fn no_result(&self) {
        assert!(
            !self.path("out.jsonl.gz").exists(),
            "a failed job left a result"
        );
        let leftovers: Vec<_> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".covmerge-"))
            .collect();
        assert!(
            leftovers.is_empty(),
            "temporary result files left: {leftovers:?}"
        );
    }
}

#[test]
fn missing_required_column_is_refused_by_name() {
    let c = Case::new();
    let input = c.write(
        "in.csv",
        "kernel_repo,kernel_commit,file_path,func_name,manager,sl\nr,c1,a.c,f,m,1\n",
    );
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(!ok);
    assert!(
        err.contains("in.csv") && err.contains("`hit_count`"),
        "{err}"
    );
    c.no_result();
}

#[test]
fn each_malformed_row_fails_the_job_naming_input_and_line() {
    let cases = [
        ("r,c1,a.c,f,m,1\n", "expected 7 fields"),
        ("r,c1,a.c,f,m,x,1\n", "`sl`"),
        ("r,c1,a.c,f,m,-2,1\n", "negative"),
        ("r,c1,a.c,f,m,1,-1\n", "negative"),
        ("r,c1,a.c,f,m,1,1.5\n", "not an integer"),
        ("r,c1,/etc/passwd,f,m,1,1\n", "file_path"),
        ("r,c1,a/../../b.c,f,m,1,1\n", "file_path"),
        (
            "r,c1,a.c,f,m,1,18446744073709551616\n",
            "past the largest count",
        ),
    ];
    for (row, what) in cases {
        let c = Case::new();
        let input = c.write(
            "in.csv",
            &format!("{HDR}r,c1,a.c,f,m,1,1\n{row}r,c1,a.c,f,m,2,1\n"),
        );
        let (ok, err) = c.merge(&[&input], &[]);
        assert!(!ok, "row {row:?} accepted");
        assert!(
            err.contains("in.csv:3:"),
            "row {row:?}: error does not name in.csv:3: {err}"
        );
        assert!(
            err.contains(what),
            "row {row:?}: error does not say {what:?}: {err}"
        );
        c.no_result();
    }
}

#[test]
fn max_bad_rows_skips_and_counts_then_fails_one_past() {
    let c = Case::new();
    let a = c.write(
        "a.csv",
        &format!("{HDR}r,c1,a.c,f,m,1,5\nr,c1,a.c,f,m,zz,1\n"),
    );
    let b = c.write("b.csv", &format!("{HDR}r,c1,a.c,f,m,2,1\nr,c1,a.c,f,m,1\n"));
    let (ok, err) = c.merge(&[&a, &b], &["--max-bad-rows", "2"]);
    assert!(ok, "{err}");
    let m = manifest(&c.path("manifest.json"));
    assert_eq!(m["totals"]["rows_bad"], 2);
    assert_eq!(m["totals"]["rows_in"], 4);
    let got = canon(&c.path("out.jsonl.gz"));
    assert_eq!(
        got["files"]["a.c"]["managers"]["*"],
        serde_json::json!({"1": 5, "2": 1})
    );

    std::fs::remove_file(c.path("out.jsonl.gz")).unwrap();
    std::fs::remove_file(c.path("manifest.json")).unwrap();
    let (ok, err) = c.merge(&[&a, &b], &["--max-bad-rows", "1"]);
    assert!(!ok, "one bad row past the limit must fail");
    assert!(err.contains(".csv:3:"), "{err}");
    c.no_result();
    // Each split within the limit, the two past it: no failed manifest was written
    // (a failed task's refusal writes one).
    let m = manifest(&c.path("manifest.json"));
    assert_eq!(m["status"], "failed", "{m}");
    assert_eq!(m["totals"]["rows_bad"], 2, "{m}");
}

#[test]
fn truncated_gzip_is_an_error_not_a_short_read() {
    let c = Case::new();
    let mut body = String::from(HDR);
    for i in 0..20_000 {
        body.push_str(&format!("r,c1,a.c,f,m{},{},{}\n", i % 7, i % 3 + 1, i));
    }
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(body.as_bytes()).unwrap();
    let gz = enc.finish().unwrap();
    let p = c.path("cut.csv.gz");
    std::fs::write(&p, &gz[..gz.len() * 2 / 3]).unwrap();
    let (ok, err) = c.merge(&[&p], &[]);
    assert!(!ok, "truncated gzip accepted");
    assert!(err.contains("cut.csv.gz"), "{err}");
    c.no_result();
}

#[test]
fn failed_job_keeps_an_earlier_result_untouched() {
    let c = Case::new();
    c.write("out.jsonl.gz", "previous");
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,x\n"));
    let (ok, _) = c.merge(&[&input], &[]);
    assert!(!ok);
    assert_eq!(
        std::fs::read_to_string(c.path("out.jsonl.gz")).unwrap(),
        "previous"
    );
}

#[test]
fn missing_input_and_bad_source_are_named() {
    let c = Case::new();
    let (ok, err) = c.merge(&[&c.path("nope.csv")], &[]);
    assert!(!ok && err.contains("nope.csv"), "{err}");
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,1\n"));
    let o = covmerge(&[
        "merge",
        "--quiet",
        "--source",
        "svn:x",
        "--base-repo",
        "r",
        "--base-commit",
        "c1",
        "--out",
        c.path("o.gz").to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("svn:x"));
}
