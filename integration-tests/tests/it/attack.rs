//! Shapes a hostile tester found that the earlier rounds did not name: each test is
//! named after what broke (a wrong result published with exit 0, a panic, an output
//! written over what the job reads, a refusal that came after the work).

use covmerge_integration_tests::{canon, covmerge, manifest};
use serde_json::json;

use crate::bad_input::{Case, HDR};

/// `merge` on `src` at base commit `commit` with `rest` (outputs and inputs): whether
/// it succeeded, and its standard error.
fn merge_on(src: &str, commit: &str, rest: &[&str]) -> (bool, String) {
    let mut args = vec!["merge", "--quiet", "--source", src, "--base-repo", "r"];
    args.extend(["--base-commit", commit]);
    args.extend_from_slice(rest);
    let o = covmerge(&args);
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `merge` of `input` on `c`'s source with only the outputs in `extra`.
fn merge_to(c: &Case, input: &std::path::Path, extra: &[&str]) -> (bool, String) {
    let src = format!("dir:{}", c.path("src").display());
    let mut rest = extra.to_vec();
    rest.extend(["--input", input.to_str().unwrap()]);
    merge_on(&src, "c1", &rest)
}

/// The seven required columns without the header's newline.
fn columns() -> &'static str {
    HDR.trim_end()
}

#[test]
fn a_quoted_header_field_holding_a_newline_was_merged_as_a_row() {
    let c = Case::new();
    // The header's eighth column is named "note\nr,c1,a.c,f,m,1,5,z": no row.
    let text = format!(
        "{},\"note\nr,c1,a.c,f,m,1,5,z\"\nr,c1,a.c,f,m,2,7,q\nr,c1,a.c,f,m,3,1,\"x\"\n",
        columns()
    );
    let input = c.write("in.csv", &text);
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(ok, "{err}");
    let got = canon(&c.path("out.jsonl.gz"));
    assert_eq!(
        got["files"]["a.c"]["managers"]["*"],
        json!({"2": 7, "3": 1})
    );
    assert_eq!(manifest(&c.path("manifest.json"))["totals"]["rows_in"], 2);
    // The rows' line numbers count the header's two lines: the bad row is line 4.
    let bad = c.write(
        "bad.csv",
        &format!(
            "{},\"a\nb\"\nr,c1,a.c,f,m,1,1,x\nr,c1,a.c,f,m,x,1,x\n",
            columns()
        ),
    );
    std::fs::remove_file(c.path("out.jsonl.gz")).unwrap();
    let (ok, err) = c.merge(&[&bad], &[]);
    assert!(!ok && err.contains("bad.csv:4:"), "{err}");
}

#[test]
fn a_commit_with_spaces_around_it_was_taken_for_the_commit() {
    let c = Case::new();
    let input = c.write(
        "in.csv",
        &format!("{HDR}r, c1 ,a.c,f,m,1,5\nr,c1,a.c,f,m,2,7\n"),
    );
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(ok, "{err}");
    let got = canon(&c.path("out.jsonl.gz"));
    assert_eq!(got["files"]["a.c"]["managers"]["*"], json!({"2": 7}));
}

#[test]
fn a_header_repeated_in_another_column_order_was_read_by_the_first_ones_positions() {
    let c = Case::new();
    let reordered = "hit_count,sl,manager,func_name,file_path,kernel_commit,kernel_repo";
    let text = format!("{HDR}r,c1,a.c,f,m,1,5\n{reordered}\n7,2,m,f,a.c,c1,r\n");
    let input = c.write("in.csv", &text);
    for extra in [&[][..], &["--max-bad-rows", "10"][..]] {
        let (ok, err) = c.merge(&[&input], extra);
        assert!(
            !ok,
            "{extra:?}: a reordered header was skipped as a bad row"
        );
        assert!(
            err.contains("in.csv:3:") && err.contains("the header again"),
            "{extra:?}: {err}"
        );
        c.no_result();
    }
    // With a byte order mark, in the same order: refused too, not read as a row.
    let bom = c.write(
        "bom.csv",
        &format!("{HDR}r,c1,a.c,f,m,1,5\n\u{feff}{HDR}r,c1,a.c,f,m,2,1\n"),
    );
    let (ok, err) = c.merge(&[&bom], &["--max-bad-rows", "10"]);
    assert!(!ok && err.contains("the header again"), "{err}");
    // The same header byte for byte is skipped, as before.
    let same = c.write(
        "same.csv",
        &format!("{HDR}r,c1,a.c,f,m,1,5\n{HDR}r,c1,a.c,f,m,2,1\n"),
    );
    let (ok, err) = c.merge(&[&same], &[]);
    assert!(ok, "{err}");
}

/// Two exports of a shared table joined, the second's columns in another order: the
/// rows of another namespace are not parsed, so the header again was counted as a row
/// of namespace `hit_count` and the rows after it read by the first header's positions
/// (their namespace taken from another column, dropped as other namespaces' rows),
/// exit 0. It is now refused naming its line, by the fast path and the quoted one,
/// in a merge of one namespace and in a roll-up routing every namespace.
#[test]
fn a_header_again_in_another_order_in_a_shared_table_was_counted_as_another_namespace() {
    let c = Case::new();
    let first = format!("{},namespace", columns());
    let reordered = format!("namespace,{}", columns());
    for (name, func) in [("plain.csv", "f"), ("quoted.csv", "\"f\"")] {
        let text = format!(
            "{first}\nr,c1,a.c,{func},m,1,5,upstream\n{reordered}\nupstream,r,c1,a.c,{func},m,2,7\n"
        );
        let input = c.write(name, &text);
        let (ok, err) = c.merge(&[&input], &["--namespace", "upstream"]);
        assert!(
            !ok,
            "{name}: the header again was read as another namespace's row"
        );
        assert!(
            err.contains(&format!("{name}:3:")) && err.contains("the header again"),
            "{name}: {err}"
        );
        c.no_result();
        let src = format!("dir:{}", c.path("src").display());
        let out = format!("{}/p-{name}/{{namespace}}", c.dir_path().display());
        let o = covmerge(&[
            "rollup",
            "--source",
            &src,
            "--partial-out",
            &out,
            "--input",
            input.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{name}: rollup wrote the partials");
        assert!(
            err.contains(&format!("{name}:3:")) && err.contains("the header again"),
            "{name}: {err}"
        );
    }
}

/// `--duration -1` and `--total-rows -1` were refused by the publish gate after the
/// whole merge; an empty `--base-repo` as a failed task. All are refused before any
/// work now, naming the flag.
#[test]
fn a_negative_duration_or_total_rows_was_refused_only_after_the_merge() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    for (flags, named) in [
        (&["--duration=-1"][..], "--duration -1"),
        (&["--total-rows=-1"][..], "--total-rows -1"),
    ] {
        let (ok, err) = c.merge(&[&input], flags);
        assert!(!ok, "{flags:?}");
        assert!(err.contains(named), "{flags:?}: {err}");
        // Before any work: no task ran.
        assert!(
            !err.contains("task(s) failed") && !err.contains("gate"),
            "{err}"
        );
        c.no_result();
    }
    let src = format!("dir:{}", c.path("src").display());
    let o = covmerge(&[
        "merge",
        "--source",
        &src,
        "--base-repo",
        "",
        "--base-commit",
        "c1",
        "--out",
        c.path("out.jsonl.gz").to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("--base-repo") && !err.contains("task(s) failed"),
        "{err}"
    );
}

/// An `--out` of a scheme this build does not serve (`ftp://`, `GS://`) was taken for
/// a local relative path: written into a directory `GS:` where one existed, exit 0.
/// Any `scheme://` is a store URL now, refused naming its scheme.
#[test]
fn an_out_of_an_unknown_or_capital_scheme_was_written_as_a_local_path() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    std::fs::create_dir_all(c.path("GS:/bkt")).unwrap();
    let src = format!("dir:{}", c.path("src").display());
    for out in ["ftp://h/r.gz", "GS://bkt/r.gz", "gcs://bkt/r.gz"] {
        let o = std::process::Command::new(covmerge_integration_tests::bin())
            .current_dir(c.dir_path())
            .args(["merge", "--quiet", "--source", &src, "--base-repo", "r"])
            .args(["--base-commit", "c1", "--out", out, "--input"])
            .arg(&input)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{out}: written");
        let scheme = out.split("://").next().unwrap();
        assert!(err.contains(&format!("scheme {scheme}")), "{out}: {err}");
    }
    assert_eq!(std::fs::read_dir(c.path("GS:/bkt")).unwrap().count(), 0);
}

#[test]
fn a_blank_line_before_the_header_was_called_an_empty_input() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("\n{HDR}r,c1,a.c,f,m,1,5\n"));
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(
        !ok && err.contains("in.csv") && err.contains("blank line"),
        "{err}"
    );
    c.no_result();
}

#[test]
fn an_output_inside_the_dir_source_overwrote_a_source_file() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let src_file = c.path("src/c1/a.c");
    let before = std::fs::read(&src_file).unwrap();
    std::os::unix::fs::symlink(c.path("src"), c.path("link")).unwrap();
    let via_link = c.path("link/c1/a.c");
    for out in [&src_file, &via_link] {
        for flag in ["--out", "--manifest", "--partial-out"] {
            let other = c.path("elsewhere.jsonl.gz");
            let mut extra = vec![flag, out.to_str().unwrap()];
            if flag != "--out" {
                extra.extend(["--out", other.to_str().unwrap()]);
            }
            let (ok, err) = merge_to(&c, &input, &extra);
            assert!(!ok, "{flag} {} accepted", out.display());
            assert!(err.contains(flag) && err.contains("source"), "{err}");
            assert_eq!(std::fs::read(&src_file).unwrap(), before);
        }
    }
}

#[test]
fn clashing_outputs_were_refused_after_the_merge() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let x = c.path("x");
    let x = x.to_str().unwrap();
    for (a, b) in [("--out", "--partial-out"), ("--manifest", "--partial-out")] {
        let out = c.path("out.jsonl.gz");
        let mut extra = vec![a, x, b, x];
        if a != "--out" {
            extra.extend(["--out", out.to_str().unwrap()]);
        }
        let (ok, err) = merge_to(&c, &input, &extra);
        assert!(!ok && err.contains(a) && err.contains(b), "{err}");
        assert!(!c.path("x").exists(), "{a} {b}: something was written at x");
        assert!(!out.exists(), "{a} {b}: a result was published");
    }
    let (ok, err) = merge_to(&c, &input, &["--out", ""]);
    assert!(!ok && err.contains("--out is empty"), "{err}");
}

#[test]
fn a_memory_budget_near_two_to_the_64_panicked() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let o = covmerge(&[
        "merge",
        "--source",
        &format!("dir:{}", c.path("src").display()),
        "--base-repo",
        "r",
        "--base-commit",
        "c1",
        "--out",
        c.path("o.jsonl.gz").to_str().unwrap(),
        "--memory-budget",
        "15000000000000000000",
        "--input",
        input.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("largest memory budget"), "{err}");
}

#[test]
fn a_partial_named_by_its_description_was_read_as_csv() {
    let c = Case::new();
    let input = c.write(
        "in.csv",
        &format!("{HDR}r,c1,a.c,f,m,1,5\nr,c1,a.c,f,m,2,7\n"),
    );
    let (p, out1, out2) = (c.path("p"), c.path("o1.jsonl.gz"), c.path("o2.jsonl.gz"));
    let (ok, err) = merge_to(
        &c,
        &input,
        &[
            "--out",
            out1.to_str().unwrap(),
            "--partial-out",
            p.to_str().unwrap(),
        ],
    );
    assert!(ok, "{err}");
    let described = p.join("partial.json");
    let (ok, err) = merge_to(&c, &described, &["--out", out2.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(canon(&out1)["files"], canon(&out2)["files"]);
    let (ok, err) = merge_to(
        &c,
        &described,
        &[
            "--out",
            out2.to_str().unwrap(),
            "--input",
            p.to_str().unwrap(),
        ],
    );
    assert!(!ok && err.contains("same file"), "{err}");
}

#[test]
fn an_output_given_as_file_localhost_or_a_dangling_link_wrote_into_the_source() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let src_file = c.path("src/c1/a.c");
    let before = std::fs::read(&src_file).unwrap();
    let localhost = format!("file://localhost{}", src_file.display());
    std::os::unix::fs::symlink(c.path("src/c1/new.c"), c.path("dangling")).unwrap();
    let dangling = c.path("dangling");
    for out in [localhost.as_str(), dangling.to_str().unwrap()] {
        let (ok, err) = merge_to(&c, &input, &["--out", out]);
        assert!(!ok && err.contains("source"), "{out}: {err}");
    }
    assert_eq!(std::fs::read(&src_file).unwrap(), before);
    assert!(!c.path("src/c1/new.c").exists(), "written through the link");
}

#[test]
fn a_namespace_template_was_checked_before_it_was_filled() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let y = c.path("y");
    std::fs::create_dir_all(y.join("upstream")).unwrap();
    let out = y.join("upstream/o.jsonl");
    let template = format!("{}/{{namespace}}", y.display());
    let (ok, err) = merge_to(
        &c,
        &input,
        &[
            "--out",
            out.to_str().unwrap(),
            "--partial-out",
            &template,
            "--namespace",
            "upstream",
        ],
    );
    assert!(
        !ok && err.contains("--partial-out") && err.contains("--out"),
        "{err}"
    );
    assert!(!out.exists(), "the result was published before the refusal");
    // Filled, the template lands in the source: refused too.
    let into_source = format!("{}/{{namespace}}/p", c.path("src").display());
    let (ok, err) = merge_to(
        &c,
        &input,
        &[
            "--partial-out",
            &into_source,
            "--namespace",
            "c1",
            "--out",
            "-",
        ],
    );
    assert!(!ok && err.contains("source"), "{err}");
    assert!(!c.path("src/c1/p").exists());
}

#[test]
fn a_duration_past_the_calendar_panicked_or_failed_after_the_merge() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let p = c.path("p");
    for (to, days) in [("1969-12-29", "9223372036854775807"), ("0001-01-05", "6")] {
        let out = c.path("o.jsonl");
        let (ok, err) = merge_to(
            &c,
            &input,
            &[
                "--out",
                out.to_str().unwrap(),
                "--partial-out",
                p.to_str().unwrap(),
                "--date-to",
                to,
                "--duration",
                days,
            ],
        );
        assert!(
            !ok && err.contains("before 0001-01-01"),
            "{to} {days}: {err}"
        );
        assert!(
            !p.exists() && !out.exists(),
            "{to} {days}: written before the refusal"
        );
    }
}

#[test]
fn a_header_again_with_other_extra_columns_or_a_quoted_newline_was_read_as_rows() {
    let c = Case::new();
    let cases = [
        format!(
            "{},extra\nr,c1,a.c,f,m,1,3,x\nkernel_repo,kernel_commit,file_path,manager,func_name,sl,hit_count,other\nr,c1,a.c,m2,g,2,5,y\n",
            columns()
        ),
        format!(
            "\"ex\ntra\",{}\nx,r,c1,a.c,f,m,1,3\n\"ex\ntra\",kernel_repo,kernel_commit,file_path,manager,func_name,sl,hit_count\nx,r,c1,a.c,m2,g,2,5\n",
            columns()
        ),
    ];
    for text in cases {
        let input = c.write("h.csv", &text);
        let (ok, err) = c.merge(&[&input], &["--max-bad-rows", "1"]);
        assert!(!ok && err.contains("the header again"), "{text:?}: {err}");
    }
}

#[test]
fn a_partial_out_of_dash_or_through_dot_dot_was_misread() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let (ok, err) = merge_to(&c, &input, &["--out", "/dev/null", "--partial-out", "-"]);
    assert!(!ok && err.contains("not a stream"), "{err}");
    std::fs::create_dir_all(c.path("w")).unwrap();
    let up = format!("{}/w/../pp", c.dir_path().display());
    let (ok, err) = merge_to(&c, &input, &["--out", "/dev/null", "--partial-out", &up]);
    assert!(ok, "{err}");
    assert!(c.path("pp/partial.json").exists());
}

#[test]
fn a_dot_dot_in_the_partial_out_escaped_the_placement_checks() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    std::fs::create_dir_all(c.path("pp")).unwrap();
    let via_missing = format!("{}/nx/../pp", c.dir_path().display());
    let manifest = c.path("pp/partial.json");
    let (ok, err) = merge_to(
        &c,
        &input,
        &[
            "--out",
            "/dev/null",
            "--manifest",
            manifest.to_str().unwrap(),
            "--partial-out",
            &via_missing,
        ],
    );
    assert!(!ok && err.contains("--manifest"), "{err}");
    let into_source = format!("{}/nx/../src/p", c.dir_path().display());
    let (ok, err) = merge_to(
        &c,
        &input,
        &["--out", "/dev/null", "--partial-out", &into_source],
    );
    assert!(!ok && err.contains("source"), "{err}");
    assert!(!c.path("src/p").exists());
}

#[test]
fn two_inputs_with_a_byte_order_mark_joined_were_refused() {
    let c = Case::new();
    let one = format!("\u{feff}{HDR}r,c1,a.c,f,m,1,5\n");
    let input = c.write("joined.csv", &format!("{one}{one}"));
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(ok, "{err}");
    let got = canon(&c.path("out.jsonl.gz"));
    assert_eq!(got["files"]["a.c"]["managers"]["*"], json!({"1": 10}));
    // A header found again in other letter case is the header again.
    let text = format!(
        "{HDR}r,c1,a.c,f,m,1,5\nKernel_Repo,Kernel_Commit,file_path,func_name,manager,hit_count,sl\nr,c1,a.c,f,m,9,2\n"
    );
    let input = c.write("case.csv", &text);
    std::fs::remove_file(c.path("out.jsonl.gz")).unwrap();
    let (ok, err) = c.merge(&[&input], &["--max-bad-rows", "1"]);
    assert!(!ok && err.contains("the header again"), "{err}");
}

#[test]
fn a_refused_rollup_left_the_directories_it_made() {
    let c = Case::new();
    let text = format!(
        "{},namespace\nr,c1,a.c,f,m,1,5,aa\nr,c1,a.c,f,m,2,5,bb\n",
        columns()
    );
    let input = c.write("ns.csv", &text);
    std::fs::create_dir_all(c.path("out/bb")).unwrap();
    std::fs::write(c.path("out/bb/other.txt"), "not a partial").unwrap();
    let src = format!("dir:{}", c.path("src").display());
    let template = format!("{}/out/{{namespace}}", c.dir_path().display());
    let o = covmerge(&[
        "rollup",
        "--input",
        input.to_str().unwrap(),
        "--source",
        &src,
        "--date-to",
        "2026-01-01",
        "--partial-out",
        &template,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("not a partial"),
        "{err}"
    );
    assert!(
        !c.path("out/aa").exists(),
        "an empty directory was left for aa"
    );
}

#[test]
fn rollups_bad_row_refusal_named_what_the_partials_left_of_the_flag() {
    let c = Case::new();
    let two_bad = format!("{HDR}r,c1,a.c,f,m,1,5\nr,c1,a.c,f,m,x,1\nr,c1,a.c,f,m,y,1\n");
    let day = c.write("day.csv", &two_bad);
    let p = c.path("p");
    let (ok, err) = merge_to(
        &c,
        &day,
        &[
            "--out",
            "/dev/null",
            "--partial-out",
            p.to_str().unwrap(),
            "--max-bad-rows",
            "5",
        ],
    );
    assert!(ok, "{err}");
    let raw = c.write("raw.csv", &two_bad);
    let src = format!("dir:{}", c.path("src").display());
    let q = c.path("q");
    let o = covmerge(&[
        "rollup",
        "--input",
        p.to_str().unwrap(),
        raw.to_str().unwrap(),
        "--source",
        &src,
        "--max-bad-rows",
        "3",
        "--partial-out",
        q.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("--max-bad-rows 3") && err.contains("2 of them counted in the partial inputs"),
        "{err}"
    );
}

#[test]
fn an_output_reached_the_source_through_a_linked_commit_dir_or_worktree() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    // dir: a commit's directory is a link to a checkout elsewhere.
    std::fs::create_dir_all(c.path("real_c1")).unwrap();
    std::fs::write(c.path("real_c1/a.c"), "int a;\n").unwrap();
    std::fs::create_dir_all(c.path("linked")).unwrap();
    std::os::unix::fs::symlink(c.path("real_c1"), c.path("linked/c1")).unwrap();
    let src = format!("dir:{}", c.path("linked").display());
    let over = c.path("real_c1/a.c");
    let (ok, err) = merge_on(
        &src,
        "c1",
        &[
            "--out",
            "/dev/null",
            "--manifest",
            over.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
        ],
    );
    assert!(!ok && err.contains("overlap"), "{err}");
    assert_eq!(std::fs::read_to_string(&over).unwrap(), "int a;\n");
    // git: a linked worktree's objects live in the main repository's .git.
    let git = |dir: &std::path::Path, args: &[&str]| {
        let o = std::process::Command::new("git")
            .current_dir(dir)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let main = c.path("repo");
    std::fs::create_dir_all(&main).unwrap();
    git(&main, &["init", "-q"]);
    std::fs::write(main.join("a.c"), "int a;\n").unwrap();
    git(&main, &["add", "a.c"]);
    git(
        &main,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "c",
        ],
    );
    git(&main, &["worktree", "add", "-q", "../wt2"]);
    let src = format!("git:{}", c.path("wt2").display());
    let head = std::process::Command::new("git")
        .current_dir(&main)
        .args(["rev-parse", "HEAD"])
        .output()
        .unwrap();
    let head = String::from_utf8(head.stdout).unwrap().trim().to_owned();
    let into_objects = main.join(".git/objects/pwn.gz");
    let (ok, err) = merge_on(
        &src,
        &head,
        &[
            "--out",
            into_objects.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
        ],
    );
    assert!(!ok && err.contains("overlap"), "{err}");
    assert!(!into_objects.exists());
}

#[test]
fn a_result_under_a_listed_input_prefix_was_read_by_the_next_run() {
    let c = Case::new();
    std::fs::create_dir_all(c.path("gl")).unwrap();
    c.write("gl/a.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let glob = format!("file://{}/gl/*", c.dir_path().display());
    let out = c.path("gl/o.jsonl.gz");
    let src = format!("dir:{}", c.path("src").display());
    let (ok, err) = merge_on(
        &src,
        "c1",
        &["--out", out.to_str().unwrap(), "--input", &glob],
    );
    assert!(
        !ok && err.contains("--out") && err.contains("--input"),
        "{err}"
    );
    assert!(!out.exists());
    // Beside the listed directory: accepted.
    let beside = c.path("gl.jsonl.gz");
    let (ok, err) = merge_on(
        &src,
        "c1",
        &["--out", beside.to_str().unwrap(), "--input", &glob],
    );
    assert!(ok, "{err}");
}
