//! Issue 38, items 6, 9 and 11: a report or diff whose inputs do not belong together
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

/// Issue 38 item 6: with `ROOT/c1/` emptied after the merge, OLD's two covered lines
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
    for want in [
        "OLD",
        old.to_str().unwrap(),
        "c1",
        &src,
        "none of its 1 file(s)",
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
