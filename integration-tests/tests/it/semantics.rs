use covmerge_integration_tests::{canon, fixture, manifest, merge_ok};
use serde_json::Value;

fn run(shards: &str, workers: &str) -> (Value, Value, String) {
    let d = fixture("semantics");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.jsonl.gz");
    let man = tmp.path().join("manifest.json");
    let stdout = merge_ok(&[
        "--source",
        &format!("dir:{}", d.join("sources").display()),
        "--base-repo",
        "git://example/linux",
        "--base-commit",
        "base",
        "--out",
        out.to_str().unwrap(),
        "--manifest",
        man.to_str().unwrap(),
        "--shards",
        shards,
        "--workers",
        workers,
        "--input",
        d.join("input-a.csv").to_str().unwrap(),
        d.join("input-b.csv.gz").to_str().unwrap(),
    ]);
    (canon(&out), manifest(&man), stdout)
}

/// The reviewed snapshot covers: a line inserted above, a changed line, deleted code,
/// a deleted file, an unchanged file (identity), `sl` beyond EOF, `sl` 0, an unknown
/// commit, CRLF vs LF, a repeated header, extra columns in another order, rows of one
/// file spread across inputs, a function-name tie, empty function names, a file only
/// at the base, a file whose rows all lack a line, a missing final newline.
#[test]
fn every_rule_of_spec_section_3() {
    let want: Value =
        serde_json::from_slice(&std::fs::read(fixture("semantics").join("expected.json")).unwrap())
            .unwrap();
    for (shards, workers) in [("1", "1"), ("3", "2"), ("16", "4")] {
        let (got, man, stdout) = run(shards, workers);
        assert_eq!(got["files"], want["files"], "files with --shards {shards}");
        assert_eq!(got["totals"], want["totals"]);
        for (k, v) in want["counts"].as_object().unwrap() {
            assert_eq!(&man["totals"][k], v, "manifest totals.{k}");
        }
        assert_eq!(
            stdout.trim_end().lines().last().unwrap(),
            "total instrumented(10), covered(9), 90.00%"
        );
    }
}

#[test]
fn manifest_accounts_for_every_row() {
    let (_, man, _) = run("4", "2");
    let t = &man["totals"];
    let n = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("totals.{k}"));
    assert_eq!(
        n("rows_in"),
        n("rows_merged")
            + n("rows_bad")
            + n("rows_without_line")
            + n("rows_lost")
            + n("rows_deleted")
    );
    assert_eq!(n("rows_deleted"), 2, "the deleted file's rows");
    assert_eq!(n("files"), 9);
    let shards = man["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 4);
    for (i, s) in shards.iter().enumerate() {
        assert_eq!(s["index"], i);
        assert_eq!(s["sha256"].as_str().unwrap().len(), 64);
        assert!(s["attempts"].as_u64().unwrap() >= 1);
    }
    let records: u64 = shards.iter().map(|s| s["records"].as_u64().unwrap()).sum();
    // 9 files: 9 `*` records + 11 per-manager records + 8 FL records.
    assert_eq!(records, 28);
    assert_eq!(man["status"], "complete");
}
