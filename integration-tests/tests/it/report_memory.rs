//! `report` and `diff` within their memory budget whatever the shape of the result:
//! many managers, many files, a tall source file, one long line. Each runs the binary
//! under a data limit (`RLIMIT_DATA`) the test sets on the child, so a regression
//! fails here instead of taking the machine. Each is named after what broke.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

use covmerge_integration_tests::bin;

/// Runs `covmerge ARGS` with its data segment limited to `limit` bytes.
fn limited(args: &[&str], limit: u64) -> Output {
    let mut c = Command::new(bin());
    c.args(args).env("RUST_LOG", "warn");
    unsafe {
        c.pre_exec(move || {
            let r = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_DATA, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.output().expect("run covmerge")
}

fn ok(args: &[&str], limit: u64) -> String {
    let o = limited(args, limit);
    assert!(
        o.status.success(),
        "covmerge {args:?} under a {} MiB data limit: {}",
        limit >> 20,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

const LIMIT: u64 = 200 << 20;

fn header() -> String {
    r#"{"Session":"","Time":"0001-01-01T00:00:00Z","Namespace":"upstream","Repo":"git://r","Commit":"c1","Duration":30,"DateTo":"2024-04-08","TotalRows":1}"#.to_string() + "\n"
}

fn mcr(out: &mut String, m: &str, path: &str, lines: &[u32], hits: &[u64]) {
    let cov = hits.iter().filter(|&&h| h > 0).count();
    out.push_str(&format!(
        r#"{{"MCR":{{"Manager":"{m}","FilePath":"{path}","FileData":{{"Instrumented":{},"Covered":{cov},"LinesInstrumented":{lines:?},"HitCounts":{hits:?}}}}},"FL":null}}"#,
        lines.len()
    ));
    out.push('\n');
}

/// Every file under `dir`.
fn count_files(dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        n += if e.file_type().unwrap().is_dir() {
            count_files(&e.path())
        } else {
            1
        };
    }
    n
}

/// The JSON argument of a one-call `covmerge.NAME(...)` script.
fn script_arg(p: &Path) -> serde_json::Value {
    let s = std::fs::read_to_string(p).unwrap();
    let start = s.find('(').unwrap() + 1;
    serde_json::from_str(&s[start..s.rfind(");").unwrap()]).unwrap()
}

/// 70,000 managers over 3 files. The tree numbered managers with 16 bits (refused past
/// 65,536), and a duplicate check scanned every manager of a file per record.
#[test]
fn report_and_diff_of_more_than_65536_managers() {
    let tmp = tempfile::tempdir().unwrap();
    let managers = 70_000;
    let mut t = header();
    for f in 0..3 {
        let path = format!("d{f}/f.c");
        mcr(&mut t, "*", &path, &[1, 2], &[managers, 0]);
        for m in 0..managers {
            mcr(&mut t, &format!("m{m:05}"), &path, &[1], &[1]);
        }
    }
    let r = tmp.path().join("r.jsonl");
    std::fs::write(&r, &t).unwrap();
    let site = tmp.path().join("site");
    let out = ok(
        &[
            "report",
            r.to_str().unwrap(),
            "--out",
            site.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(
        out.contains("3 files, 4 directories, 70000 managers"),
        "{out}"
    );
    let meta = script_arg(&site.join("data/meta.js"));
    assert_eq!(
        meta["managers"].as_array().unwrap().len(),
        managers as usize
    );
    assert_eq!(meta["managers"][69_999], "m69999");
    let root = script_arg(&site.join("data/d/0/0.js"));
    let m = root["rows"][0]["m"].as_array().unwrap();
    assert_eq!(m.len(), managers as usize);
    assert_eq!(m[69_999], serde_json::json!([69_999, 1, 1]));
    let d = tmp.path().join("d.jsonl");
    ok(
        &[
            "diff",
            r.to_str().unwrap(),
            r.to_str().unwrap(),
            "--out",
            d.to_str().unwrap(),
        ],
        LIMIT,
    );
    let last: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&d).unwrap().lines().last().unwrap()).unwrap();
    assert_eq!(last["totals"]["files_unchanged"], 3);
}

/// 20,000 files in 100 directories: a data script per file made the report of a
/// million files a million files on disk. Now files are written 64 to a script.
#[test]
fn report_of_many_files_writes_a_bounded_number_of_files() {
    let tmp = tempfile::tempdir().unwrap();
    let files = 20_000usize;
    let mut t = header();
    for f in 0..files {
        let path = format!("dir{}/file{f}.c", f % 100);
        mcr(&mut t, "*", &path, &[1, 2, 3], &[1, 0, 2]);
        mcr(&mut t, &format!("m{}", f % 7), &path, &[1], &[1]);
    }
    let r = tmp.path().join("r.jsonl");
    std::fs::write(&r, &t).unwrap();
    let site = tmp.path().join("site");
    let out = ok(
        &[
            "report",
            r.to_str().unwrap(),
            "--out",
            site.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(out.contains("20000 files, 101 directories"), "{out}");
    let written = count_files(&site);
    // index, file, 3 assets, meta, groups, paths, 101 directories, 313 groups.
    assert_eq!(written, 8 + 101 + files.div_ceil(64), "{out}");
    assert!(out.contains(&format!("{written} files written")), "{out}");
    let groups = script_arg(&site.join("data/groups.js"));
    assert_eq!(groups.as_array().unwrap().len(), files.div_ceil(64));
    // A directory's rows are all its files, by name.
    let d = script_arg(&site.join("data/d/0/1.js"));
    assert_eq!(d["path"], "dir0");
    assert_eq!(d["rows"].as_array().unwrap().len(), files / 100);
    assert_eq!(d["rows"][0]["name"], "file0.c");
    assert_eq!(d["rows"][1]["name"], "file100.c");
}

/// A source file of 300,000 lines: its text was one list in one script (a 10 M-line
/// file: one 590 MB script). Now it is written in pages of 10,000 lines.
#[test]
fn report_of_a_tall_source_file_writes_pages_not_one_script() {
    let tmp = tempfile::tempdir().unwrap();
    let lines = 300_000u32;
    let root = tmp.path().join("src/c1");
    std::fs::create_dir_all(&root).unwrap();
    let text: String = (1..=lines)
        .map(|i| format!("line {i} of tall.c\n"))
        .collect();
    std::fs::write(root.join("tall.c"), &text).unwrap();
    let mut t = header();
    mcr(&mut t, "*", "tall.c", &[1, 150_000, lines], &[1, 0, 7]);
    let r = tmp.path().join("r.jsonl");
    std::fs::write(&r, &t).unwrap();
    let site = tmp.path().join("site");
    let src = format!("dir:{}", tmp.path().join("src").display());
    let out = ok(
        &[
            "report",
            r.to_str().unwrap(),
            "--source",
            &src,
            "--out",
            site.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(!out.contains("without source text"), "{out}");
    let pages = site.join("data/t/0");
    assert_eq!(count_files(&pages), 30);
    let last = script_arg(&pages.join("29.js"));
    assert_eq!(last["text"].as_array().unwrap().len(), 10_000);
    assert_eq!(last["text"][9_999], "line 300000 of tall.c");
    let group = std::fs::read_to_string(site.join("data/f/0/0.js")).unwrap();
    assert!(group.len() < 4096, "the text is not in the file's record");
    assert!(
        group.contains(r#""pages":30,"text_lines":300000"#),
        "{group}"
    );
}

/// A record line of 6 MB under a 16 MiB budget (its line cap is 4 MiB): `report` and
/// `diff` held any line whole (1 GB, exit 0), then capped it at a fixed 64 MiB. The
/// cap is a quarter of `--memory-budget`, and the refusal names the line and the flag;
/// a budget that fits the line reads it.
#[test]
fn a_line_over_a_quarter_of_the_budget_is_refused_naming_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 300_000u32;
    let lines: Vec<u32> = (1..=n).collect();
    let hits: Vec<u64> = (1..=n as u64).map(|h| h * 1000).collect();
    let mut t = header();
    mcr(&mut t, "*", "long.c", &lines, &hits);
    let r = tmp.path().join("r.jsonl");
    std::fs::write(&r, &t).unwrap();
    let site = tmp.path().join("site");
    let rs = r.to_str().unwrap();
    for args in [
        vec!["report", rs, "--out", site.to_str().unwrap()],
        vec!["diff", rs, rs],
    ] {
        let mut a = args.clone();
        a.extend(["--memory-budget", "16MiB"]);
        let o = limited(&a, LIMIT);
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}");
        assert!(
            e.contains(&format!("{rs}, line 2: a line longer than 4 MiB"))
                && e.contains("--memory-budget 16 MiB"),
            "{args:?}: {e}"
        );
        let mut a = args.clone();
        a.extend(["--memory-budget", "64MiB"]);
        ok(&a, LIMIT);
    }
}
