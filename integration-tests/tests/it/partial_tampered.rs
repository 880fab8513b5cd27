//! Partials whose description says one thing while their files, or the names they are
//! given as, say another (a hostile tester's round on partials): a `rows_in` that the
//! shards do not hold, read directly (the job's shard count) where every other read
//! refused it; a directory of links to another partial's files, counted twice; a
//! roll-up that copied its inputs' `paths` sums into its own description whatever its
//! tables held; other namespaces no merge could have counted.

use std::path::{Path, PathBuf};

use covmerge_integration_tests::covmerge;

const HEADER: &str = "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count";

/// A directory with a `dir:` source (commit `c0`, `f.c` of three lines) and
/// `rows.csv` holding `rows`; returns the source.
fn setup(dir: &Path, rows: &str) -> String {
    std::fs::create_dir_all(dir.join("src/c0")).unwrap();
    std::fs::write(dir.join("src/c0/f.c"), "a\nb\nc\n").unwrap();
    std::fs::write(dir.join("rows.csv"), format!("{HEADER}\n{rows}")).unwrap();
    format!("dir:{}", dir.join("src").display())
}

/// `covmerge args`: whether it succeeded, and its stderr.
fn run(args: &[&str]) -> (bool, String) {
    let o = covmerge(args);
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A one-shard partial of `rows.csv` in `dir/P`.
fn partial(dir: &Path, src: &str) -> PathBuf {
    let p = dir.join("P");
    let rows = dir.join("rows.csv");
    let (ok, err) = run(&[
        "rollup",
        "--source",
        src,
        "--shards",
        "1",
        "--date-to",
        "2024-09-30",
        "--partial-out",
        p.to_str().unwrap(),
        "--input",
        rows.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    p
}

/// Edits `P/partial.json` with `edit`.
fn edit_description(p: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = p.join("partial.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// `merge --shards 1` of `inputs` onto `c0`, into `dir/out.gz`.
fn merge(dir: &Path, src: &str, inputs: &[&Path]) -> (bool, String) {
    merge_to(&dir.join("out.gz"), None, src, inputs)
}

/// `merge --shards 1` of `inputs` onto `c0`, into `out` (and its manifest).
fn merge_to(out: &Path, manifest: Option<&Path>, src: &str, inputs: &[&Path]) -> (bool, String) {
    let mut args = vec![
        "merge",
        "--quiet",
        "--source",
        src,
        "--base-repo",
        "r",
        "--base-commit",
        "c0",
        "--shards",
        "1",
        "--out",
        out.to_str().unwrap(),
    ];
    if let Some(m) = manifest {
        args.extend(["--manifest", m.to_str().unwrap()]);
    }
    args.push("--input");
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    run(&args)
}

#[test]
fn a_partial_read_directly_whose_rows_in_the_shards_do_not_hold_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let src = setup(d.path(), "r,c0,f.c,fn,m1,1,5\nr,c0,f.c,fn,m1,2,0\n");
    let p = partial(d.path(), &src);
    edit_description(&p, |v| v["counts"]["rows_in"] = 5.into());
    // The job's shard count is the partial's: its shards are read directly, and only
    // the publish gate sees every shard's rows.
    let (ok, err) = merge(d.path(), &src, &[&p]);
    assert!(!ok, "a rows_in of 5 over 2 rows was published");
    assert!(
        err.contains("rows_in is 5") && err.contains("make 2"),
        "{err}"
    );
    assert!(
        !d.path().join("out.gz").exists(),
        "a refused result was written"
    );
}

#[test]
fn a_directory_of_links_to_a_partials_files_is_the_same_partial() {
    let d = tempfile::tempdir().unwrap();
    let src = setup(d.path(), "r,c0,f.c,fn,m1,1,5\n");
    let p = partial(d.path(), &src);
    for (name, hard) in [("Q", false), ("H", true)] {
        let q = d.path().join(name);
        std::fs::create_dir(&q).unwrap();
        for e in std::fs::read_dir(&p).unwrap() {
            let e = e.unwrap().path();
            let to = q.join(e.file_name().unwrap());
            if hard {
                std::fs::hard_link(&e, &to).unwrap();
            } else {
                std::os::unix::fs::symlink(&e, &to).unwrap();
            }
        }
        let (ok, err) = merge(d.path(), &src, &[&p, &q]);
        assert!(
            !ok && err.contains("same partial"),
            "merge of P and {name}: {err}"
        );
        let r = d.path().join(format!("R{name}"));
        let (ok, err) = run(&[
            "rollup",
            "--partial-out",
            r.to_str().unwrap(),
            "--input",
            p.to_str().unwrap(),
            q.to_str().unwrap(),
        ]);
        assert!(
            !ok && err.contains("same partial"),
            "rollup of P and {name}: {err}"
        );
        assert!(!r.join("partial.json").exists());
    }
}

#[test]
fn a_rollup_no_longer_copies_path_sums_its_inputs_tables_do_not_hold() {
    let d = tempfile::tempdir().unwrap();
    let rows = "r,c0,f.c,fn,m1,1,5\nr,c0,f.c,fn,m1,0,5\nr,nope,f.c,fn,m1,1,7\n";
    let src = setup(d.path(), rows);
    let p = partial(d.path(), &src);
    edit_description(&p, |v| {
        let c = &mut v["counts"];
        c["rows_without_line"] = 2.into();
        c["rows_without_version"] = 0.into();
        c["hits_without_version"] = 1000.into();
    });
    let r = d.path().join("R");
    let (ok, err) = run(&[
        "rollup",
        "--shards",
        "1",
        "--partial-out",
        r.to_str().unwrap(),
        "--input",
        p.to_str().unwrap(),
    ]);
    assert!(!ok, "a roll-up wrote a description its tables contradict");
    assert!(err.contains("paths tables hold [1, 1, 7]"), "{err}");
    assert!(!r.join("partial.json").exists());
}

#[test]
fn other_namespaces_no_merge_could_count_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let src = setup(d.path(), "r,c0,f.c,fn,m1,1,5\n");
    let p = partial(d.path(), &src);
    let original = std::fs::read(p.join("partial.json")).unwrap();
    let long = "z".repeat(300);
    let cases: [(&str, serde_json::Value, u64, &str); 3] = [
        ("a", 0.into(), 0, "listed with no rows"),
        ("", 2.into(), 2, "own namespace"),
        (&long, 5.into(), 5, "longer than a listed name"),
    ];
    for (name, rows, total, why) in cases {
        std::fs::write(p.join("partial.json"), &original).unwrap();
        edit_description(&p, |v| {
            v["other_namespaces"]["listed"] = serde_json::json!({ name: rows });
            v["counts"]["rows_other_namespaces"] = total.into();
        });
        let (ok, err) = merge(d.path(), &src, &[&p]);
        assert!(!ok && err.contains(why), "{name:?}: {err}");
        assert!(
            err.contains("partial.json"),
            "{name:?}: the file is not named: {err}"
        );
    }
}

/// A copy of a partial has files of its own: two inputs, as two copies of a CSV file
/// are (two fleets' identical exports of one day), not the same partial twice. An
/// earlier rule compared the descriptions' bytes and refused them.
#[test]
fn a_copy_of_a_partial_is_an_input_of_its_own_as_a_copied_csv_is() {
    let d = tempfile::tempdir().unwrap();
    let src = setup(d.path(), "r,c0,f.c,fn,m1,1,5\n");
    let p = partial(d.path(), &src);
    let c = d.path().join("C");
    std::fs::create_dir(&c).unwrap();
    for e in std::fs::read_dir(&p).unwrap() {
        let e = e.unwrap().path();
        std::fs::copy(&e, c.join(e.file_name().unwrap())).unwrap();
    }
    let csv = d.path().join("rows.csv");
    let copy = d.path().join("rows-copy.csv");
    std::fs::copy(&csv, &copy).unwrap();
    let manifest = |name: &str, inputs: &[&Path]| -> serde_json::Value {
        let m = d.path().join(name);
        let out = d.path().join(format!("{name}.gz"));
        let (ok, err) = merge_to(&out, Some(&m), &src, inputs);
        assert!(ok, "{name}: {err}");
        serde_json::from_slice(&std::fs::read(&m).unwrap()).unwrap()
    };
    let partials = manifest("partials.json", &[&p, &c]);
    let raw = manifest("raw.json", &[&csv, &copy]);
    assert_eq!(partials["totals"], raw["totals"]);
    assert_eq!(raw["totals"]["rows_in"], 2);
    let r = d.path().join("R");
    let (ok, err) = run(&[
        "rollup",
        "--partial-out",
        r.to_str().unwrap(),
        "--input",
        p.to_str().unwrap(),
        c.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
}
