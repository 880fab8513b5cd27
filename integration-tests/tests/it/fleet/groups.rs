//! `--group` on a fleet: the groups travel in the job spec and the merge tasks, and the
//! result is the embedded one.

use super::*;

/// A coordinator and two workers with two groups (and one matching no manager) write
/// exactly what `merge` writes with the same flags, group records included; the
/// manifest lists the groups.
#[test]
fn fleet_with_groups_equals_embedded() {
    let s = FleetCorpus::new(47).build();
    let groups = [
        "--group",
        "kasan=*kasan*",
        "--group",
        "first=*-0",
        "--group",
        "none=no-such-manager-*",
    ];
    let want = s.embedded("embedded-groups.gz", &groups);
    let text = String::from_utf8(want.clone()).unwrap();
    assert!(text.contains(r#""Manager":"kasan""#) && text.contains(r#""Manager":"first""#));
    assert!(!text.contains(r#""Manager":"none""#));
    assert_ne!(want, s.want, "group records were written");

    let amqp = fleet::amqp();
    let store = s.file_store();
    let out = s.path("fleet-groups.gz");
    let man = s.path("manifest.json");
    let _w1 = worker(s.dir(), 70, &store, &[], &[]);
    let _w2 = worker(s.dir(), 71, &store, &[], &[]);
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&groups);
    a.extend_from_slice(&["--manifest", man.to_str().unwrap()]);
    run_ok(&a, &[]);
    assert_eq!(
        gunzip(&out),
        want,
        "fleet result with groups differs from embedded"
    );
    let m = manifest(&man);
    let names: Vec<&str> = m["groups"]
        .as_array()
        .expect("the manifest lists the groups")
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kasan", "first", "none"]);
    assert_eq!(m["groups"][0]["glob"], "*kasan*");
}

/// `--resume` compares the groups with those the job was started with, as it does the
/// other job flags: other groups, or none, are refused naming `--group`, before
/// anything of the job is changed; the same groups resume it.
#[test]
fn resume_with_other_groups_is_refused() {
    let s = FleetCorpus::new(48).build();
    let amqp = fleet::amqp();
    let store_dir = s.path("store");
    let store = file_store(&store_dir);
    let out = s.path("groups.gz");
    let _w = worker(s.dir(), 72, &store, &[], &[]);
    let started = ["--job", "groups-resume", "--group", "kasan=*kasan*"];
    let mut a = s.coord_args(&amqp, &store, &out);
    a.extend_from_slice(&started);
    run_ok(&a, &[]);
    let want = gunzip(&out);
    let spec = store_dir.join("jobs/groups-resume/job.json");
    let stored = std::fs::read(&spec).unwrap();

    let out_b = s.path("groups-b.gz");
    for other in [
        &["--group", "kasan=*kmsan*"][..],
        &["--group", "kasan=*kasan*", "--group", "first=*-0"][..],
        &[][..],
    ] {
        let mut r = s.coord_args(&amqp, &store, &out_b);
        r.extend_from_slice(&["--job", "groups-resume", "--resume"]);
        r.extend_from_slice(other);
        let o = coordinator_run(&r, &[], LONG);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "resumed with {other:?}");
        assert!(
            err.contains("job groups-resume was started with other settings: groups (--group)"),
            "{other:?}: {err}"
        );
        assert!(
            err.contains("*kasan*"),
            "the stored groups are named: {err}"
        );
        assert!(!out_b.exists(), "no result with {other:?}");
        assert_eq!(std::fs::read(&spec).unwrap(), stored, "job.json untouched");
    }

    let mut r = s.coord_args(&amqp, &store, &out_b);
    r.extend_from_slice(&started);
    r.push("--resume");
    run_ok(&r, &[]);
    assert_eq!(gunzip(&out_b), want, "the same groups resume the job");
}

/// On a fleet too (the split runs on the worker, with the groups of `job.json`): a
/// row with manager `*` gave its file a second `*` record, and one with a group's NAME
/// failed the job past `--max-bad-rows`. Both are bad rows: counted, skipped, and the
/// result is the embedded one.
#[test]
fn a_manager_named_star_or_like_a_group_is_a_bad_row_on_the_fleet() {
    let _g = fleet::lock();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("src/c1")).unwrap();
    std::fs::write(tmp.path().join("src/c1/a.c"), "int a;\nint b;\nint c;\n").unwrap();
    let input = tmp.path().join("in.csv");
    std::fs::write(
        &input,
        "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\n\
         r,c1,a.c,f,m1,1,1\nr,c1,a.c,f,*,2,3\nr,c1,a.c,f,all,3,2\nr,c1,a.c,f,m2,3,4\n",
    )
    .unwrap();
    let src = format!("dir:{}", tmp.path().join("src").display());
    let input = input.display().to_string();
    let job = |bad: &'static str| -> Vec<String> {
        [
            "--source",
            &src,
            "--base-repo",
            "r",
            "--base-commit",
            "c1",
            "--shards",
            "2",
            "--date-to",
            "2024-04-08",
            "--group",
            "all=m*",
            "--max-bad-rows",
            bad,
            "--input",
            &input,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let embedded = tmp.path().join("embedded.gz");
    let mut a = job("2");
    a.extend(["--out".into(), embedded.display().to_string()]);
    merge_ok(&a.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    let want = gunzip(&embedded);
    let text = String::from_utf8(want.clone()).unwrap();
    assert_eq!(text.matches(r#""Manager":"*""#).count(), 1, "{text}");

    let amqp = fleet::amqp();
    let store = file_store(&tmp.path().join("store"));
    let _w = worker(tmp.path(), 73, &store, &[], &[]);
    let out = tmp.path().join("fleet.gz");
    let man = tmp.path().join("manifest.json");
    let fleet_args = |bad: &'static str| -> Vec<String> {
        let mut a = job(bad);
        a.extend(
            [
                "--amqp",
                &amqp,
                "--store",
                &store,
                "--out",
                out.to_str().unwrap(),
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        a
    };
    let a = fleet_args("1");
    let o = coordinator_run(&a.iter().map(|s| s.as_str()).collect::<Vec<_>>(), &[], LONG);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "two bad rows past --max-bad-rows 1 accepted"
    );
    assert!(
        err.contains("in.csv:3:") && err.contains("`manager`"),
        "{err}"
    );
    assert!(!out.exists(), "a result was published");
    let mut a = fleet_args("2");
    a.extend(["--manifest".into(), man.display().to_string()]);
    run_ok(&a.iter().map(|s| s.as_str()).collect::<Vec<_>>(), &[]);
    assert_eq!(
        gunzip(&out),
        want,
        "the fleet's result differs from embedded"
    );
    assert_eq!(manifest(&man)["totals"]["rows_bad"], 2);
}

/// `coordinator --out -` wrote `job ID` before the gzip stream on standard output and
/// `result -` with the totals after it (exit 0): no reader could take the result. With
/// the result (or the manifest) on standard output, those lines go to standard error,
/// as `merge --out -` does.
#[test]
fn a_result_on_standard_output_was_wrapped_in_the_summary_lines() {
    let s = FleetCorpus::new(111).build();
    let amqp = fleet::amqp();
    let store = s.file_store();
    let _w = worker(s.dir(), 82, &store, &[], &[]);
    let stdout = s.path("stdout.gz");
    let mut a = vec!["coordinator"];
    a.extend(s.job_args());
    a.extend_from_slice(&["--amqp", &amqp, "--store", &store, "--out", "-"]);
    let o = fleet::fleet_cmd(&a)
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let raw = std::fs::read(&stdout).unwrap();
    assert_eq!(
        raw.get(..2),
        Some(&[0x1f, 0x8b][..]),
        "{:?}",
        &raw[..raw.len().min(40)]
    );
    assert!(
        covmerge_integration_tests::gunzip_bytes(&raw) == s.want,
        "standard output is not the result"
    );
    assert!(err.contains("job ") && err.contains("result -"), "{err}");
}
