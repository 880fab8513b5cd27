//! covmerge against Go's own tools: the fixture program
//! (fixtures/goprog, three packages) is built with `go build -cover` in `set`, `count`
//! and `atomic` mode, run several times under `GOCOVERDIR`, and covmerge's result on
//! that directory is compared with `go tool covdata textfmt` (per-line hits, by the
//! README's rule) and `go tool cover -func` (per-function statement coverage of
//! covmerge's function attribution). Go comes from deploy/dev/install-go.sh
//! (`COVMERGE_TEST_GO`); without it these tests fail, they never skip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use covmerge_integration_tests::{canon, fixture, merge_ok, root};
use serde_json::Value;

fn go() -> PathBuf {
    let go = std::env::var_os("COVMERGE_TEST_GO").map(PathBuf::from).unwrap_or_else(|| {
        panic!("COVMERGE_TEST_GO is not set: run deploy/dev/test.sh, or export COVMERGE_TEST_GO=$(deploy/dev/install-go.sh)")
    });
    assert!(
        go.is_file(),
        "COVMERGE_TEST_GO={} is not a file",
        go.display()
    );
    go
}

/// Runs go with a build cache under target/ and no network.
fn go_cmd(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(go())
        .args(args)
        .current_dir(dir)
        .env("GOCACHE", root().join("target/go-cache"))
        .env("GOPATH", root().join("target/go-path"))
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "")
        .output()
        .expect("run go");
    assert!(
        out.status.success(),
        "go {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Copies the fixture program to `to`, with `edit` applied to main.go.
fn copy_program(to: &Path, edit: impl Fn(&str) -> String) {
    let fx = fixture("goprog");
    for f in ["go.mod", "main.go", "calc/calc.go", "text/text.go"] {
        let dst = to.join(f);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        let text = std::fs::read_to_string(fx.join(f)).unwrap();
        let text = if f == "main.go" { edit(&text) } else { text };
        std::fs::write(dst, text).unwrap();
    }
}

/// The runs: different arguments take different branches.
const RUNS: &[&[&str]] = &[
    &["1", "2", "hello"],
    &["500", "600", "a-b-c"],
    &["x"],
    &[],
    &["7", "7", "7", "y-z"],
];

/// Builds the program in `src` with `-covermode=mode` and runs it with every element of
/// RUNS under GOCOVERDIR=`covdir`.
fn build_and_run(src: &Path, mode: &str, covdir: &Path) {
    let exe = src.join("prog");
    go_cmd(
        src,
        &[
            "build",
            "-cover",
            &format!("-covermode={mode}"),
            "-coverpkg=./...",
            "-o",
            exe.to_str().unwrap(),
            ".",
        ],
    );
    std::fs::create_dir_all(covdir).unwrap();
    for args in RUNS {
        let st = Command::new(&exe)
            .args(*args)
            .env("GOCOVERDIR", covdir)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
    }
    let n = std::fs::read_dir(covdir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("covcounters.")
        })
        .count();
    assert_eq!(n, RUNS.len(), "one counter file per process");
}

/// A text profile's blocks: (file, start line, end line, statements, count), summed
/// per block as `go tool cover` does.
fn profile_blocks(text: &str, module: &str) -> Vec<(String, u32, u32, u32, u64)> {
    let mut blocks: BTreeMap<(String, String), (u32, u64)> = BTreeMap::new();
    for l in text.lines().skip(1) {
        let (pos, rest) = l.rsplit_once(':').unwrap();
        let mut it = rest.split(' ');
        let span = it.next().unwrap().to_string();
        let stmts: u32 = it.next().unwrap().parse().unwrap();
        let count: u64 = it.next().unwrap().parse().unwrap();
        let file = pos
            .strip_prefix(module)
            .unwrap()
            .trim_start_matches('/')
            .to_string();
        let e = blocks.entry((file, span)).or_insert((stmts, 0));
        e.1 += count;
    }
    blocks
        .into_iter()
        .map(|((file, span), (stmts, count))| {
            let (a, b) = span.split_once(',').unwrap();
            let sl = a.split_once('.').unwrap().0.parse().unwrap();
            let el = b.split_once('.').unwrap().0.parse().unwrap();
            (file, sl, el, stmts, count)
        })
        .collect()
}

/// Per file, per line: the max count of the blocks covering it (README's rule).
fn lines_from_blocks(
    blocks: &[(String, u32, u32, u32, u64)],
) -> BTreeMap<String, BTreeMap<u32, u64>> {
    let mut out: BTreeMap<String, BTreeMap<u32, u64>> = BTreeMap::new();
    for (f, sl, el, _, c) in blocks {
        for l in *sl..=*el {
            let e = out.entry(f.clone()).or_default().entry(l).or_insert(0);
            *e = (*e).max(*c);
        }
    }
    out
}

/// covmerge's per-line hits of `manager` per file.
fn covmerge_lines(got: &Value, manager: &str) -> BTreeMap<String, BTreeMap<u32, u64>> {
    got["files"]
        .as_object()
        .unwrap()
        .iter()
        .filter_map(|(f, v)| {
            let m = v["managers"].get(manager)?.as_object()?;
            Some((
                f.clone(),
                m.iter()
                    .map(|(l, h)| (l.parse().unwrap(), h.as_u64().unwrap()))
                    .collect(),
            ))
        })
        .collect()
}

fn merge(sources: &Path, inputs: &[&Path], extra: &[&str], out: &Path) -> Value {
    let src = format!("dir:{}", sources.display());
    let mut args = vec![
        "--source",
        &src,
        "--base-repo",
        "git://example/goprog",
        "--base-commit",
        "base",
        "--go-module",
        "example.com/goprog=.",
        "--shards",
        "2",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.push("--input");
    let ins: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
    args.extend(ins.iter().map(String::as_str));
    merge_ok(&args);
    canon(out)
}

#[test]
fn covdata_of_set_count_and_atomic_builds_matches_go_tool_covdata_and_cover_func() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let prog = d.join("prog");
    copy_program(&prog, str::to_string);
    let sources = d.join("src");
    copy_program(&sources.join("base"), str::to_string);
    for mode in ["set", "count", "atomic"] {
        let covdir = d.join(format!("cov-{mode}"));
        build_and_run(&prog, mode, &covdir);
        let profile = d.join(format!("{mode}.txt"));
        go_cmd(
            &prog,
            &[
                "tool",
                "covdata",
                "textfmt",
                "-i",
                covdir.to_str().unwrap(),
                "-o",
                profile.to_str().unwrap(),
            ],
        );
        let text = std::fs::read_to_string(&profile).unwrap();
        assert!(text.starts_with(&format!("mode: {mode}\n")), "{text}");
        let blocks = profile_blocks(&text, "example.com/goprog");
        let want = lines_from_blocks(&blocks);
        if mode != "set" {
            assert!(
                want.values().flat_map(|m| m.values()).any(|&h| h > 1),
                "{mode}: counts above 1"
            );
        }

        // The binary directory, decoded by covmerge.
        let got = merge(
            &sources,
            &[&covdir],
            &[],
            &d.join(format!("{mode}-covdata.gz")),
        );
        let manager = format!("cov-{mode}");
        assert_eq!(
            covmerge_lines(&got, &manager),
            want,
            "{mode}: per-line hits vs textfmt"
        );
        assert_eq!(covmerge_lines(&got, "*"), want, "{mode}: '*' record");
        // Go's own text profile of the same data gives the same lines.
        let got_text = merge(
            &sources,
            &[&profile],
            &[],
            &d.join(format!("{mode}-text.gz")),
        );
        assert_eq!(
            covmerge_lines(&got_text, mode),
            want,
            "{mode}: text profile"
        );

        // Per function: `go tool cover -func` reports statement coverage per function;
        // group textfmt's blocks by the function covmerge gives their first line.
        let func_report = go_cmd(
            &prog,
            &["tool", "cover", "-func", profile.to_str().unwrap()],
        );
        let mut per_func: BTreeMap<(String, String), (u32, u32)> = BTreeMap::new();
        for (f, sl, _, stmts, c) in &blocks {
            let funcs = got["files"][f]["funcs"].as_object().unwrap();
            let owner = funcs
                .iter()
                .find(|(_, ls)| {
                    ls.as_array()
                        .unwrap()
                        .iter()
                        .any(|l| l.as_u64() == Some(u64::from(*sl)))
                })
                .map(|(n, _)| n.clone())
                .unwrap_or_else(|| panic!("{mode}: {f}:{sl} has no function in covmerge's output"));
            let e = per_func.entry((f.clone(), owner)).or_default();
            e.0 += stmts;
            if *c > 0 {
                e.1 += stmts;
            }
        }
        let mut compared = 0;
        for l in func_report.lines().filter(|l| !l.starts_with("total:")) {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let (loc, name, pct) = (cols[0], cols[1], cols[2]);
            let file = loc
                .split(':')
                .next()
                .unwrap()
                .strip_prefix("example.com/goprog/")
                .unwrap();
            // covmerge keeps Go's meta-data names (`*Acc.Push`); cover -func prints `Push`.
            let (_, &(total, covered)) = per_func
                .iter()
                .find(|((f, n), _)| f == file && n.rsplit('.').next() == Some(name))
                .unwrap_or_else(|| {
                    panic!("{mode}: {file} {name} not among covmerge's functions {per_func:?}")
                });
            let ours = format!("{:.1}%", 100.0 * f64::from(covered) / f64::from(total));
            assert_eq!(ours, pct, "{mode}: {file} {name}");
            compared += 1;
        }
        assert_eq!(compared, 7, "{mode}: every function compared");
        assert_eq!(compared, per_func.len());
    }
}

#[test]
fn covdata_of_an_older_build_projects_onto_the_newer_source() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // The older build had two more lines at the top of main.go.
    let older = |t: &str| t.replacen("package main\n", "package main\n\n// Old build.\n", 1);
    let (new_prog, old_prog) = (d.join("new"), d.join("old"));
    copy_program(&new_prog, str::to_string);
    copy_program(&old_prog, older);
    let sources = d.join("src");
    copy_program(&sources.join("base"), str::to_string);
    copy_program(&sources.join("old"), older);
    let (new_cov, old_cov) = (d.join("new-build"), d.join("old-build"));
    build_and_run(&new_prog, "count", &new_cov);
    build_and_run(&old_prog, "count", &old_cov);
    let got = merge(
        &sources,
        &[&new_cov, &old_cov],
        &["--go-commit", "old-build=old"],
        &d.join("out.gz"),
    );
    let new = covmerge_lines(&got, "new-build");
    let old = covmerge_lines(&got, "old-build");
    // The same runs on both builds: once projected, the same hits on the same lines.
    assert_eq!(old, new);
    assert!(new["main.go"].len() > 5);
    let star = covmerge_lines(&got, "*");
    for (f, lines) in &new {
        for (l, h) in lines {
            assert_eq!(star[f][l], 2 * h, "{f}:{l}");
        }
    }
}
