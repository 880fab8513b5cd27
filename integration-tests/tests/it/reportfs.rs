//! "Never a wrong result", round 3: a report or diff whose inputs do not belong together
//! (a source without one side's base, a manifest of another job), a site directory
//! that would overwrite or escape through its inputs, `file://` listings through
//! symlinks. Each test is named after what a build did before its fix.

use std::path::{Path, PathBuf};

use covmerge_integration_tests::covmerge;

use crate::bad_input::{Case, HDR};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `merge` of `input` onto `base` from `dir:src`, writing `out` and its manifest `man`.
fn merge(c: &Case, base: &str, input: &Path, out: &Path, man: &Path, extra: &[&str]) {
    let src = format!("dir:{}", c.path("src").display());
    let mut a = vec![
        "merge",
        "--quiet",
        "--source",
        &src,
        "--base-repo",
        "r",
        "--base-commit",
        base,
        "--date-to",
        "2024-04-08",
        "--out",
        out.to_str().unwrap(),
        "--manifest",
        man.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ];
    a.extend_from_slice(extra);
    let o = covmerge(&a);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Two results of `a.c` on bases c1 and c2 (c2 adds a line on top): (old, new).
fn two_bases(c: &Case) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(c.path("src/c2")).unwrap();
    std::fs::write(c.path("src/c2/a.c"), "int z;\nint a;\nint b;\nint c;\n").unwrap();
    let old_in = c.write(
        "old.csv",
        &format!("{HDR}r,c1,a.c,f,m,1,5\nr,c1,a.c,f,m,2,5\nr,c1,a.c,f,m,3,0\n"),
    );
    let new_in = c.write(
        "new.csv",
        &format!("{HDR}r,c2,a.c,f,m,2,0\nr,c2,a.c,f,m,3,0\nr,c2,a.c,f,m,4,0\n"),
    );
    let (old, new) = (c.path("old.jsonl.gz"), c.path("new.jsonl.gz"));
    merge(c, "c1", &old_in, &old, &c.path("old.manifest.json"), &[]);
    merge(c, "c2", &new_in, &new, &c.path("new.manifest.json"), &[]);
    (old, new)
}

/// Found by the round-3 review: with `ROOT/c1/` emptied after the merge, OLD's two covered lines
/// became DCB and NEW's GNC/UNC: nothing lost, and `--fail-on lost>=1` exited 0 on a
/// source that cannot produce OLD's text at all.
#[test]
fn a_missing_base_turned_every_line_into_dcb_and_gnc() {
    let c = Case::new();
    let (old, new) = two_bases(&c);
    let src = format!("dir:{}", c.path("src").display());
    let d = c.path("d.jsonl");
    let diff = || {
        covmerge(&[
            "diff",
            old.to_str().unwrap(),
            new.to_str().unwrap(),
            "--source",
            &src,
            "--out",
            d.to_str().unwrap(),
            "--fail-on",
            "lost>=1",
        ])
    };
    // With the source whole: both covered lines are lost (LBC), so --fail-on trips.
    let o = diff();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    std::fs::remove_file(c.path("src/c1/a.c")).unwrap();
    let o = diff();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    // An emptied `ROOT/c1/` holds no commit: refused as such, naming the side.
    for want in [
        "OLD",
        old.to_str().unwrap(),
        "c1",
        &src,
        "is an empty directory",
    ] {
        assert!(err.contains(want), "no {want:?} in {err}");
    }
    // `report --diff` the same.
    let site = c.path("site");
    let o = covmerge(&[
        "report",
        new.to_str().unwrap(),
        "--out",
        site.to_str().unwrap(),
        "--diff",
        old.to_str().unwrap(),
        "--source",
        &src,
    ]);
    let err = stderr(&o);
    assert!(!o.status.success(), "report --diff: exit 0");
    assert!(err.contains("--diff") && err.contains("c1"), "{err}");
    // NEW's base emptied instead: named as NEW.
    std::fs::write(c.path("src/c1/a.c"), "int a;\nint b;\nint c;\n").unwrap();
    std::fs::remove_file(c.path("src/c2/a.c")).unwrap();
    let o = diff();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("NEW") && err.contains("c2"), "{err}");
}

/// `report RESULT --out SITE --manifest MAN` (more args after), through `cmd`.
fn report_with(
    cmd: &mut std::process::Command,
    result: &str,
    site: &Path,
    man: &str,
) -> std::process::Output {
    cmd.args([
        "report",
        result,
        "--out",
        site.to_str().unwrap(),
        "--manifest",
        man,
    ])
    .output()
    .unwrap()
}

/// Found by the round-3 review: job A's manifest (group `ci` over `m*`) given to the report of job
/// B on the same base, where `ci` is a real manager: accepted, exit 0, B's manager `ci`
/// shown as a group and its unique lines gone.
#[test]
fn a_manifest_of_another_job_relabelled_a_real_manager_as_a_group() {
    use covmerge_integration_tests::fleet::{bucket, fleet_cmd, upload};
    let c = Case::new();
    let a_in = c.write(
        "a.csv",
        &format!("{HDR}r,c1,a.c,f,m1,1,5\nr,c1,a.c,f,m2,2,5\n"),
    );
    let b_in = c.write(
        "b.csv",
        &format!("{HDR}r,c1,a.c,f,m1,1,5\nr,c1,a.c,f,ci,2,5\n"),
    );
    let (a, a_man) = (c.path("a.jsonl.gz"), c.path("a.manifest.json"));
    let (b, b_man) = (c.path("b.jsonl.gz"), c.path("b.manifest.json"));
    merge(
        &c,
        "c1",
        &a_in,
        &a,
        &a_man,
        &["--group", "ci=m*", "--shards", "3"],
    );
    merge(&c, "c1", &b_in, &b, &b_man, &["--shards", "3"]);
    let site = c.path("site");
    let bk = bucket("reportfs");
    upload(&bk, "b.jsonl.gz", &b);
    upload(&bk, "b.manifest.json", &b_man);
    let b_url = format!("s3://{bk}/b.jsonl.gz");
    let b_man_url = format!("s3://{bk}/b.manifest.json");
    for (result, man) in [
        (b.to_str().unwrap(), a_man.to_str().unwrap()),
        (&b_url, a_man.to_str().unwrap()),
    ] {
        let o = report_with(&mut fleet_cmd(&[]), result, &site, man);
        let err = stderr(&o);
        assert!(!o.status.success(), "{result} with A's manifest: exit 0");
        for want in [man, result, "does not belong", "SHA-256"] {
            assert!(err.contains(want), "no {want:?} in {err}");
        }
    }
    // B's own manifest, local or in the store, with B local or in the store.
    for result in [b.to_str().unwrap(), &b_url] {
        for man in [b_man.to_str().unwrap(), &b_man_url] {
            let o = report_with(&mut fleet_cmd(&[]), result, &site, man);
            assert!(o.status.success(), "{result} {man}: {}", stderr(&o));
        }
    }
    // A's result with its own manifest: its group is shown.
    let o = report_with(
        &mut fleet_cmd(&[]),
        a.to_str().unwrap(),
        &site,
        a_man.to_str().unwrap(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("1 groups"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // B without its largest part, or with an empty gzip member after it: both read as a
    // result, neither is the manifest's.
    let raw = std::fs::read(&b).unwrap();
    let m = covmerge_integration_tests::manifest(&b_man);
    let sizes: Vec<usize> = m["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["bytes"].as_u64().unwrap() as usize)
        .collect();
    // The largest part (the one with records), cut out.
    let big = (0..sizes.len()).max_by_key(|&i| sizes[i]).unwrap();
    let start = raw.len() - sizes.iter().sum::<usize>() + sizes[..big].iter().sum::<usize>();
    const EMPTY_MEMBER: [u8; 20] = [
        0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let cut = [&raw[..start], &raw[start + sizes[big]..]].concat();
    let long = [&raw[..], &EMPTY_MEMBER[..]].concat();
    for (name, bytes) in [("cut", cut), ("long", long)] {
        let p = c.path(name);
        std::fs::write(&p, bytes).unwrap();
        let o = report_with(
            &mut fleet_cmd(&[]),
            p.to_str().unwrap(),
            &site,
            b_man.to_str().unwrap(),
        );
        assert!(!o.status.success(), "{name}: exit 0");
        assert!(
            stderr(&o).contains("does not belong"),
            "{name}: {}",
            stderr(&o)
        );
    }
}

/// Found by a hostile run: two jobs whose parts are byte-identical (job 1's managers
/// `m1` and `zz`, job 2's `m1` and a group `zz=m1`, all hits 0) but whose headers differ
/// (`--duration`): job 2's manifest was accepted for job 1's result, its manager `zz`
/// shown as a group. The manifest keeps the header line, and it must be the result's.
#[test]
fn a_manifest_of_a_job_with_the_same_parts_and_another_header_was_accepted() {
    let c = Case::new();
    let one_in = c.write(
        "one.csv",
        &format!("{HDR}r,c1,a.c,f,m1,1,0\nr,c1,a.c,f,zz,1,0\n"),
    );
    let two_in = c.write("two.csv", &format!("{HDR}r,c1,a.c,f,m1,1,0\n"));
    let (one, one_man) = (c.path("one.jsonl.gz"), c.path("one.manifest.json"));
    let (two, two_man) = (c.path("two.jsonl.gz"), c.path("two.manifest.json"));
    merge(&c, "c1", &one_in, &one, &one_man, &["--duration", "1"]);
    merge(
        &c,
        "c1",
        &two_in,
        &two,
        &two_man,
        &["--group", "zz=m1", "--duration", "7"],
    );
    let shards = |m: &Path| {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(m).unwrap()).unwrap();
        v["shards"].clone()
    };
    assert_eq!(
        shards(&one_man),
        shards(&two_man),
        "the parts are the same bytes"
    );
    let site = c.path("site");
    let o = report_with(
        &mut std::process::Command::new(covmerge_integration_tests::bin()),
        one.to_str().unwrap(),
        &site,
        two_man.to_str().unwrap(),
    );
    let err = stderr(&o);
    assert!(
        !o.status.success(),
        "job 2's manifest for job 1's result: exit 0"
    );
    assert!(
        err.contains("does not belong") && err.contains("header line"),
        "{err}"
    );
    for (r, m) in [(&one, &one_man), (&two, &two_man)] {
        let o = report_with(
            &mut std::process::Command::new(covmerge_integration_tests::bin()),
            r.to_str().unwrap(),
            &site,
            m.to_str().unwrap(),
        );
        assert!(o.status.success(), "{}", stderr(&o));
    }
}

/// `report RESULT --out SITE` plus `rest`.
fn report(result: &Path, site: &Path, rest: &[&str]) -> std::process::Output {
    let mut a = vec![
        "report",
        result.to_str().unwrap(),
        "--out",
        site.to_str().unwrap(),
    ];
    a.extend_from_slice(rest);
    covmerge(&a)
}

/// Found by the round-3 review: `report --out DIR` was not checked against its inputs (a result
/// inside DIR, or hard-linked as DIR/index.html, was overwritten) and wrote through
/// symlinks inside DIR (one at index.html, or at data/, wrote outside DIR).
#[test]
fn report_out_wrote_through_a_symlink_and_over_its_own_input() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let (result, man) = (c.path("r.jsonl.gz"), c.path("r.manifest.json"));
    merge(&c, "c1", &input, &result, &man, &[]);
    let original = std::fs::read(&result).unwrap();
    let site = c.path("site");
    let src = format!("dir:{}", c.path("src").display());
    // A clean site, written twice: fine.
    for _ in 0..2 {
        let o = report(
            &result,
            &site,
            &["--source", &src, "--manifest", man.to_str().unwrap()],
        );
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let refused = |result: &Path, site: &Path, rest: &[&str], want: &[&str]| {
        let o = report(result, site, rest);
        let err = stderr(&o);
        assert!(!o.status.success(), "{rest:?}: exit 0");
        for w in want {
            assert!(err.contains(w), "{rest:?}: no {w:?} in {err}");
        }
    };
    // The result, or the manifest, inside DIR.
    let inside = site.join("r.jsonl.gz");
    std::fs::copy(&result, &inside).unwrap();
    refused(&inside, &site, &[], &["holds the result"]);
    refused(
        &result,
        &site,
        &["--manifest", inside.to_str().unwrap()],
        &["holds the --manifest"],
    );
    refused(
        &result,
        &c.path("."),
        &["--diff", result.to_str().unwrap()],
        &["holds the result"],
    );
    std::fs::remove_file(&inside).unwrap();
    // The result hard-linked as DIR/index.html: written over.
    std::fs::remove_file(site.join("index.html")).unwrap();
    std::fs::hard_link(&result, site.join("index.html")).unwrap();
    refused(&result, &site, &[], &["under the name", "index.html"]);
    assert_eq!(
        std::fs::read(&result).unwrap(),
        original,
        "the result was overwritten"
    );
    std::fs::remove_file(site.join("index.html")).unwrap();
    // A symlink at index.html to a file outside, and one at data/ to a directory outside.
    let victim = c.write("victim.txt", "keep me");
    std::os::unix::fs::symlink(&victim, site.join("index.html")).unwrap();
    refused(&result, &site, &[], &["symlink", "index.html"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    std::fs::remove_file(site.join("index.html")).unwrap();
    let elsewhere = c.path("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::rename(site.join("data"), c.path("old-data")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, site.join("data")).unwrap();
    refused(&result, &site, &[], &["symlink", "data"]);
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "written outside DIR"
    );
    // The source inside DIR, or DIR inside the source.
    refused(
        &result,
        &c.path("src/c1/site"),
        &["--source", &src],
        &["overlap"],
    );
    let s2 = c.path("site2");
    std::fs::create_dir_all(s2.join("src/c1")).unwrap();
    std::fs::copy(c.path("src/c1/a.c"), s2.join("src/c1/a.c")).unwrap();
    let inner = format!("dir:{}", s2.join("src").display());
    refused(&result, &s2, &["--source", &inner], &["overlap"]);
    // `..` past a directory that does not exist yet.
    let dotdot = c.path("new/../site3");
    refused(&result, &dotdot, &[], &["`..`"]);
}
