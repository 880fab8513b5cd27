//! `merge --group NAME=GLOB` (contract §4): per file, a record summing the managers the
//! glob matches, whatever the shard count; nothing else of the output changes.

use std::collections::BTreeMap;
use std::path::Path;

use covmerge_integration_tests::{
    canon, covmerge, gunzip, manifest, merge_ok, CorpusJob, FleetCorpus,
};
use serde_json::Value;

/// 9 managers (so that globs match several), 10 files of ~120 lines, 4 commits.
fn corpus() -> CorpusJob {
    FleetCorpus::local(23)
        .files(10)
        .lines(120)
        .commits(4)
        .managers(9)
        .build()
}

fn merge(s: &CorpusJob, out: &Path, shards: &str, extra: &[&str]) -> String {
    let c = &s.corpus;
    let mut a = vec![
        "--source",
        &s.source,
        "--base-repo",
        &c.base_repo,
        "--base-commit",
        &c.base_commit,
        "--date-to",
        "2024-01-01",
        "--shards",
        shards,
        "--out",
        out.to_str().unwrap(),
    ];
    a.extend_from_slice(extra);
    a.push("--input");
    a.extend(s.inputs.iter().map(|s| s.as_str()));
    merge_ok(&a)
}

/// Line → hits of one record of a canonical result.
fn hits(v: &Value) -> BTreeMap<u64, u64> {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(l, h)| (l.parse().unwrap(), h.as_u64().unwrap()))
        .collect()
}

/// The group records equal the sums of the matching managers' records (summed here
/// from the managers' own records, with the test's own reading of the globs), at
/// `--shards 1` and `--shards 7` alike; a group that matches no manager has no record;
/// without the group records the output is byte for byte the merge without `--group`;
/// the manifest lists the groups.
#[test]
fn group_records_are_the_sums_of_their_managers_at_any_shard_count() {
    let c = corpus();
    let groups = [
        "--group",
        "kasan=*-kasan-*",
        "--group",
        "gce=ci-upstream-*gce-?",
        "--group",
        "all=*",
        "--group",
        "none=syz-ci-*",
    ];
    // The test's own reading of each glob over the corpus' manager names.
    let member = |group: &str, m: &str| -> bool {
        match group {
            "kasan" => m.contains("-kasan-"),
            "gce" => {
                m.starts_with("ci-upstream-")
                    && m.len() >= 6
                    && m[..m.len() - 1].ends_with("gce-")
                    && m[m.len() - 1..].chars().all(|ch| ch.is_ascii_digit())
            }
            "all" => true,
            _ => false,
        }
    };
    let man = c.path("m.json");
    let one = c.path("one.gz");
    let seven = c.path("seven.gz");
    let mut with_manifest = groups.to_vec();
    with_manifest.extend_from_slice(&["--manifest", man.to_str().unwrap()]);
    let out_one = merge(&c, &one, "1", &with_manifest);
    let out_seven = merge(&c, &seven, "7", &groups);
    assert_eq!(out_one, out_seven, "totals line");
    let (r1, r7) = (canon(&one), canon(&seven));
    assert_eq!(r1, r7, "--shards 1 and --shards 7 differ");

    let mut records = BTreeMap::<&str, usize>::new();
    for (path, f) in r1["files"].as_object().unwrap() {
        let managers = f["managers"].as_object().unwrap();
        for group in ["kasan", "gce", "all", "none"] {
            let mut want = BTreeMap::<u64, u64>::new();
            let mut matched = 0;
            for (m, rec) in managers {
                if ["*", "kasan", "gce", "all", "none"].contains(&m.as_str()) || !member(group, m) {
                    continue;
                }
                matched += 1;
                for (l, h) in hits(rec) {
                    *want.entry(l).or_default() += h;
                }
            }
            match managers.get(group) {
                Some(rec) => {
                    assert_eq!(hits(rec), want, "{path}: group {group}");
                    *records.entry(group).or_default() += 1;
                }
                None => assert!(
                    want.is_empty(),
                    "{path}: group {group} of {matched} managers has no record"
                ),
            }
        }
        // `*` counts every manager once: the `all` group is the `*` record.
        assert_eq!(
            hits(&managers["all"]),
            hits(&managers["*"]),
            "{path}: all = *"
        );
    }
    assert!(records["kasan"] > 0 && records["gce"] > 0, "{records:?}");
    assert!(!records.contains_key("none"));

    // Without its group records, the output is the merge without --group.
    let plain = c.path("plain.gz");
    merge(&c, &plain, "7", &[]);
    let grouped = String::from_utf8(gunzip(&seven)).unwrap();
    let stripped: String = grouped
        .lines()
        .filter(|l| {
            !["kasan", "gce", "all"]
                .iter()
                .any(|g| l.contains(&format!(r#"{{"MCR":{{"Manager":"{g}","#)))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(stripped.as_bytes(), gunzip(&plain), "other records changed");

    let m = manifest(&man);
    assert_eq!(
        m["groups"],
        serde_json::json!([
            {"name": "kasan", "glob": "*-kasan-*"},
            {"name": "gce", "glob": "ci-upstream-*gce-?"},
            {"name": "all", "glob": "*"},
            {"name": "none", "glob": "syz-ci-*"},
        ])
    );
    let plain_man = c.path("plain.json");
    merge(
        &c,
        &plain,
        "7",
        &["--manifest", plain_man.to_str().unwrap()],
    );
    assert!(
        manifest(&plain_man).get("groups").is_none(),
        "no groups: no field"
    );
}

/// A group NAME that is a manager (its rows are bad rows), `*`, or given twice is
/// refused, naming it.
#[test]
fn a_group_named_like_a_manager_is_refused() {
    let s = corpus();
    let c = &s.corpus;
    let out = s.path("out.gz");
    let run = |groups: &[&str]| {
        let mut a = vec![
            "merge",
            "--quiet",
            "--source",
            &s.source,
            "--base-repo",
            &c.base_repo,
            "--base-commit",
            &c.base_commit,
            "--out",
            out.to_str().unwrap(),
        ];
        a.extend_from_slice(groups);
        a.push("--input");
        a.extend(s.inputs.iter().map(String::as_str));
        let o = covmerge(&a);
        assert!(!o.status.success(), "{groups:?} accepted");
        assert!(!out.exists(), "{groups:?}: a result was published");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    // The manager's rows are bad rows now (contract §6), named by input and line.
    let err = run(&["--group", "ci-upstream-kasan-gce-0=*-kasan-*"]);
    assert!(
        err.contains("column `manager`: \"ci-upstream-kasan-gce-0\" is the NAME of --group ci-upstream-kasan-gce-0=*-kasan-*"),
        "{err}"
    );
    let err = run(&["--group", "*=ci-*"]);
    assert!(err.contains("NAME `*`"), "{err}");
    let err = run(&["--group", "g=a*", "--group", "g=b*"]);
    assert!(err.contains("group \"g\" is given twice"), "{err}");
    let err = run(&["--group", "nameonly"]);
    assert!(err.contains("expected NAME=GLOB"), "{err}");
}
