use covmerge_integration_tests::{canon, fixture, gunzip, merge_ok};
use serde_json::Value;

fn merge_to(dir: &std::path::Path, extra: &[&str]) -> std::path::PathBuf {
    let d = fixture("semantics");
    let out = dir.join("out.jsonl.gz");
    let src = format!("dir:{}", d.join("sources").display());
    let mut args = vec![
        "--source",
        &src,
        "--base-repo",
        "git://example/linux",
        "--base-commit",
        "base",
        "--out",
        out.to_str().unwrap(),
        "--shards",
        "3",
    ];
    args.extend_from_slice(extra);
    let a = d.join("input-a.csv");
    let b = d.join("input-b.csv.gz");
    args.extend_from_slice(&["--input", a.to_str().unwrap(), b.to_str().unwrap()]);
    merge_ok(&args);
    out
}

#[test]
fn header_carries_the_job_description() {
    let tmp = tempfile::tempdir().unwrap();
    let out = merge_to(
        tmp.path(),
        &[
            "--namespace",
            "upstream",
            "--duration",
            "30",
            "--date-to",
            "2024-04-08",
            "--total-rows",
            "123456",
        ],
    );
    let text = String::from_utf8(gunzip(&out)).unwrap();
    let head = text.lines().next().unwrap();
    assert_eq!(
        head,
        r#"{"Session":"","Time":"0001-01-01T00:00:00Z","Namespace":"upstream","Repo":"git://example/linux","Commit":"base","Duration":30,"DateTo":"2024-04-08","TotalRows":123456}"#
    );
}

#[test]
fn records_use_exact_go_field_names_and_a_deterministic_order() {
    let tmp = tempfile::tempdir().unwrap();
    let out = merge_to(tmp.path(), &[]);
    canon(&out); // panics on any extra or missing key
    let text = String::from_utf8(gunzip(&out)).unwrap();
    let mut last_file = String::new();
    let mut seen_fl = false;
    for l in text.lines().skip(1) {
        let v: Value = serde_json::from_str(l).unwrap();
        if let Some(m) = v["MCR"].as_object() {
            let f = m["FilePath"].as_str().unwrap();
            if f != last_file {
                assert_eq!(m["Manager"], "*", "a file starts with its `*` record: {l}");
                last_file = f.to_string();
                seen_fl = false;
            } else {
                assert!(!seen_fl, "FL records follow a file's MCR records");
            }
            assert!(l.ends_with(r#","FL":null}"#));
        } else {
            assert_eq!(v["FL"]["FilePath"], last_file.as_str());
            assert!(l.starts_with(r#"{"MCR":null,"FL":"#));
            seen_fl = true;
        }
    }
    // An empty `*` record has empty arrays, not null.
    assert!(text.contains(
        r#"{"MCR":{"Manager":"*","FilePath":"fs/crlf.c","FileData":{"Instrumented":0,"Covered":0,"LinesInstrumented":[],"HitCounts":[]}},"FL":null}"#
    ));
    // Same input, same shard count: same bytes.
    let again = merge_to(&tmp.path().join("again").tap_mkdir(), &["--workers", "1"]);
    let (a, b) = (gunzip(&out), gunzip(&again));
    let (ha, hb) = (
        a.iter().position(|&c| c == b'\n').unwrap(),
        b.iter().position(|&c| c == b'\n').unwrap(),
    );
    assert_eq!(a[ha..], b[hb..], "records after the header are identical");
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}
impl TapMkdir for std::path::PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}
