//! Regression tests for the merge's hardening: each is named after what broke on a
//! release build before the fix (a hang, a blow-up, or a silent change of the result).

use std::io::Write;
use std::path::Path;

use covmerge_integration_tests::{canon, covmerge, gunzip};

use crate::bad_input::{Case, HDR};

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Rows over three files and a few managers: enough for many shards and tasks.
fn rows(n: usize) -> String {
    let mut t = String::from(HDR);
    for i in 0..n {
        t.push_str(&format!(
            "r,c1,a.c,f{},m{},{},{}\n",
            i % 3,
            i % 5,
            i % 3 + 1,
            i
        ));
    }
    t
}

#[test]
fn merge_hung_forever_at_16_or_more_task_loops() {
    let c = Case::new();
    let input = c.write("in.csv", &rows(5_000));
    let (ok, err) = c.merge(&[&input], &["--workers", "1"]);
    assert!(ok, "{err}");
    let want = gunzip(&c.path("out.jsonl.gz"));
    std::fs::remove_file(c.path("out.jsonl.gz")).unwrap();
    // 64 task loops over 64 shards and 8 inputs on a 2-core machine: every loop holds
    // a task at once, as on a 64-core machine.
    let inputs: Vec<_> = (0..8)
        .map(|i| c.write(&format!("in{i}.csv"), &rows(5_000)))
        .collect();
    let refs: Vec<&Path> = inputs.iter().map(|p| p.as_path()).collect();
    let (ok, err) = c.merge(&refs, &["--workers", "64", "--shards", "64"]);
    assert!(ok, "{err}");
    let many = canon(&c.path("out.jsonl.gz"));
    // Eight copies of the same rows: eight times the hits of one copy.
    let one = {
        let p = c.path("one.jsonl.gz");
        std::fs::write(&p, gz(&want)).unwrap();
        canon(&p)
    };
    let hits = |v: &serde_json::Value| -> u64 {
        v["files"]["a.c"]["managers"]["*"]
            .as_object()
            .unwrap()
            .values()
            .map(|h| h.as_u64().unwrap())
            .sum()
    };
    assert_eq!(hits(&many), 8 * hits(&one));
    assert_eq!(
        many["totals"]["instrumented"],
        one["totals"]["instrumented"]
    );
}

#[test]
fn task_loops_beyond_the_bound_are_refused() {
    let c = Case::new();
    let input = c.write("in.csv", &rows(10));
    let (ok, err) = c.merge(&[&input], &["--workers", "100000"]);
    assert!(!ok);
    assert!(err.contains("1 to 1024"), "{err}");
    c.no_result();
}

#[test]
fn a_stray_quote_in_an_unquoted_field_made_the_split_quadratic() {
    let c = Case::new();
    // 60 MB of rows after a `foo"x` function name: before the fix every read rescanned
    // the growing buffer from the stray quote (minutes and hundreds of MB); now one
    // pass. The field is text, as the csv crate reads it.
    let mut t = String::from(HDR);
    t.push_str("r,c1,a.c,foo\"x,m,1,7\n");
    let row = "r,c1,a.c,f,m,2,1\n";
    let n = 60_000_000 / row.len();
    t.reserve(n * row.len());
    for _ in 0..n {
        t.push_str(row);
    }
    let input = c.write("quote.csv", &t);
    drop(t);
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(ok, "{err}");
    let got = canon(&c.path("out.jsonl.gz"));
    let star = &got["files"]["a.c"]["managers"]["*"];
    assert_eq!(star["1"], 7);
    assert_eq!(star["2"], n as u64);
    assert_eq!(
        got["files"]["a.c"]["funcs"]["foo\"x"],
        serde_json::json!([1])
    );
}

#[test]
fn a_line_without_end_grew_memory_without_bound() {
    let c = Case::new();
    // 64 MB of NUL bytes with no newline, gzip: one over-long row, skipped unread.
    let mut t = rows(3).into_bytes();
    t.extend(std::iter::repeat_n(0u8, 64 << 20));
    t.extend_from_slice(b"\nr,c1,a.c,f,m,3,5\n");
    let input = c.path("nul.csv.gz");
    std::fs::write(&input, gz(&t)).unwrap();
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(!ok, "an over-long row was accepted");
    assert!(err.contains("nul.csv.gz:5"), "names input and line: {err}");
    assert!(err.contains("1048576 byte cap"), "names the cap: {err}");
    c.no_result();
    // Allowed as a bad row, the rows after it still count.
    let (ok, err) = c.merge(&[&input], &["--max-bad-rows", "1"]);
    assert!(ok, "{err}");
    let got = canon(&c.path("out.jsonl.gz"));
    assert_eq!(got["files"]["a.c"]["managers"]["*"]["3"], 2 + 5);
    let m = covmerge_integration_tests::manifest(&c.path("manifest.json"));
    assert_eq!(m["totals"]["rows_bad"], 1);
    assert_eq!(m["totals"]["rows_in"], 5);
}

#[test]
fn a_row_just_over_the_cap_is_bad_and_one_just_under_is_merged() {
    let c = Case::new();
    let mut t = String::from(HDR);
    let fixed = "r,c1,a.c,,m,1,1".len();
    // Fields and commas: exactly the cap, then one byte more.
    t.push_str(&format!(
        "r,c1,a.c,{},m,1,1\n",
        "x".repeat((1 << 20) - fixed)
    ));
    t.push_str(&format!(
        "r,c1,a.c,\"{}\",m,2,1\n",
        "y".repeat((1 << 20) - fixed + 1)
    ));
    let input = c.write("edge.csv", &t);
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(!ok);
    assert!(err.contains("edge.csv:3"), "{err}");
    let (ok, err) = c.merge(&[&input], &["--max-bad-rows", "1"]);
    assert!(ok, "{err}");
    let got = canon(&c.path("out.jsonl.gz"));
    assert_eq!(got["files"]["a.c"]["managers"]["*"]["1"], 1);
    assert!(got["files"]["a.c"]["managers"]["*"].get("2").is_none());
}

#[test]
fn a_header_without_newline_was_read_without_bound() {
    let c = Case::new();
    let input = c.path("hdr.csv");
    std::fs::write(&input, vec![b'k'; 8 << 20]).unwrap();
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(!ok);
    assert!(err.contains("hdr.csv:1"), "{err}");
    assert!(err.contains("header row longer than"), "{err}");
    c.no_result();
}

/// A header up to 64 KiB past the 1 MiB cap on a row was read (the cap was checked
/// only before each further read). Exactly the cap is read; one byte more is refused.
#[test]
fn a_header_up_to_64_kib_over_the_row_cap_was_read() {
    let c = Case::new();
    let cols = HDR.trim_end();
    for (extra, want_ok) in [(0usize, true), (1, false), (40 << 10, false)] {
        // An extra column whose name fills the header to the cap, plus `extra` bytes.
        let fill = (1usize << 20) - cols.len() - 1 + extra;
        let text = format!("{cols},{}\nr,c1,a.c,f,m,1,5,x\n", "z".repeat(fill));
        let input = c.write("wide.csv", &text);
        let _ = std::fs::remove_file(c.path("out.jsonl.gz"));
        let (ok, err) = c.merge(&[&input], &[]);
        assert_eq!(ok, want_ok, "{extra} bytes over: {err}");
        if !want_ok {
            assert!(err.contains("wide.csv:1"), "{err}");
            assert!(err.contains("header row longer than"), "{err}");
            c.no_result();
        }
    }
}

#[test]
fn rows_after_a_header_ended_by_a_bare_carriage_return_were_dropped_unseen() {
    let c = Case::new();
    let header = "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count";
    // The rows up to the first newline went with the header, uncounted, exit 0.
    for (name, text) in [
        (
            "cr.csv",
            format!("{header}\rr,c1,a.c,f,m,1,1\nr,c1,a.c,f,m,2,1\n"),
        ),
        (
            "cr-only.csv",
            format!("{header}\rr,c1,a.c,f,m,1,1\rr,c1,a.c,f,m,2,1\r"),
        ),
    ] {
        let input = c.write(name, &text);
        let (ok, err) = c.merge(&[&input], &[]);
        assert!(!ok, "{name}: merged");
        assert!(err.contains(&format!("{name}:1")), "{err}");
        assert!(err.contains("carriage return"), "{err}");
        c.no_result();
    }
    // A CRLF header is a header.
    let input = c.write("crlf.csv", &format!("{header}\r\nr,c1,a.c,f,m,1,1\r\n"));
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(ok, "{err}");
    let got = canon(&c.path("out.jsonl.gz"));
    assert_eq!(got["files"]["a.c"]["managers"]["*"]["1"], 1);
}

#[test]
fn shards_beyond_the_bound_aborted_on_a_huge_allocation() {
    let c = Case::new();
    let input = c.write("in.csv", &rows(10));
    let (ok, err) = c.merge(&[&input], &["--shards", "4294967295"]);
    assert!(!ok);
    assert!(err.contains("--shards"), "{err}");
    assert!(err.contains("65536"), "{err}");
    c.no_result();
}

#[test]
fn sums_overflowing_go_int64_were_written() {
    let c = Case::new();
    let max = i64::MAX;
    let t = format!("{HDR}r,c1,a.c,f,m,2,{max}\nr,c1,a.c,f,n,2,{max}\nr,c1,a.c,f,m,1,1\n");
    let input = c.write("big.csv", &t);
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(!ok, "an overflowing sum was written");
    assert!(err.contains("a.c line 2"), "{err}");
    assert!(err.contains("int64"), "{err}");
    c.no_result();
    // One row at the maximum is fine.
    let t = format!("{HDR}r,c1,a.c,f,m,2,{max}\n");
    let input = c.write("max.csv", &t);
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(ok, "{err}");
    let got = canon(&c.path("out.jsonl.gz"));
    assert_eq!(got["files"]["a.c"]["managers"]["*"]["2"], max);
}

#[test]
fn out_equal_to_an_input_overwrote_the_input() {
    let c = Case::new();
    let input = c.write("same.csv", &rows(10));
    let before = std::fs::read(&input).unwrap();
    let src = format!("dir:{}", c.path("src").display());
    let args = |out: &str, man: Option<&str>| {
        let mut a = vec![
            "merge",
            "--quiet",
            "--source",
            &src,
            "--base-repo",
            "r",
            "--base-commit",
            "c1",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
        a.extend(["--out".into(), out.to_string()]);
        if let Some(m) = man {
            a.extend(["--manifest".into(), m.to_string()]);
        }
        a.extend(["--input".into(), input.display().to_string()]);
        a
    };
    let run = |a: Vec<String>| {
        let refs: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
        covmerge(&refs)
    };
    // The same file by another spelling is still the same file.
    let other = c.dir_path().join(".").join("same.csv");
    for out in [input.display().to_string(), other.display().to_string()] {
        let o = run(args(&out, None));
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("--out") && err.contains("is the input"),
            "{err}"
        );
    }
    let out = c.path("out.gz").display().to_string();
    let o = run(args(&out, Some(&input.display().to_string())));
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--manifest"));
    assert_eq!(
        std::fs::read(&input).unwrap(),
        before,
        "the input was changed"
    );
}

#[test]
fn manifest_equal_to_out_replaced_the_result() {
    let c = Case::new();
    let input = c.write("in.csv", &rows(10));
    let src = format!("dir:{}", c.path("src").display());
    let out = c.path("x.json").display().to_string();
    let o = covmerge(&[
        "merge",
        "--quiet",
        "--source",
        &src,
        "--base-repo",
        "r",
        "--base-commit",
        "c1",
        "--out",
        &out,
        "--manifest",
        &out,
        "--input",
        input.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("one would overwrite the other"), "{err}");
    assert!(!c.path("x.json").exists());
}

#[test]
fn output_locations_were_checked_only_after_the_merge() {
    let c = Case::new();
    let input = c.write("in.csv", &rows(10));
    let src = format!("dir:{}", c.path("src").display());
    let run = |out: &str, man: &str| {
        let o = covmerge(&[
            "merge",
            "--quiet",
            "--source",
            &src,
            "--base-repo",
            "r",
            "--base-commit",
            "c1",
            "--out",
            out,
            "--manifest",
            man,
            "--input",
            input.to_str().unwrap(),
        ]);
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let missing = c.path("nope/out.gz").display().to_string();
    let ok_out = c.path("out.jsonl.gz").display().to_string();
    let ok_man = c.path("m.json").display().to_string();
    let (ok, err) = run(&missing, &ok_man);
    assert!(!ok);
    assert!(
        err.contains("--out") && err.contains("does not exist"),
        "{err}"
    );
    assert!(err.contains("nothing was read or written"), "{err}");
    // A manifest in a missing directory is found before the result is published, and
    // is called the manifest.
    let (ok, err) = run(&ok_out, &c.path("nope/m.json").display().to_string());
    assert!(!ok);
    assert!(
        err.contains("--manifest") && err.contains("does not exist"),
        "{err}"
    );
    assert!(!c.path("out.jsonl.gz").exists(), "the result was published");
}

#[cfg(unix)]
#[test]
fn result_and_manifest_were_written_0600_ignoring_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let c = Case::new();
    let input = c.write("in.csv", &rows(10));
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(ok, "{err}");
    // The test runs under the default umask of this process (022 in CI): 0644.
    let umask = unsafe {
        let u = libc::umask(0o022);
        libc::umask(u);
        u
    };
    let want = 0o666 & !(umask as u32);
    for f in ["out.jsonl.gz", "manifest.json"] {
        let mode = std::fs::metadata(c.path(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, want, "{f}: mode {mode:o}, umask {umask:o}");
    }
}

#[test]
fn gzip_errors_said_line_0_and_repeated_the_file_name() {
    let c = Case::new();
    let gzbytes = gz(rows(20_000).as_bytes());
    let p = c.path("trunc.csv.gz");
    let cut = gzbytes.len() / 2;
    std::fs::write(&p, &gzbytes[..cut]).unwrap();
    let (ok, err) = c.merge(&[&p], &[]);
    assert!(!ok);
    let err = err
        .lines()
        .skip_while(|l| !l.starts_with("covmerge: error"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!err.contains(":0:"), "{err}");
    assert_eq!(err.matches("trunc.csv.gz").count(), 1, "named once: {err}");
    assert!(
        err.contains(&format!("at byte {cut} of the gzip stream")),
        "names the offset: {err}"
    );
    assert!(err.contains("truncated gzip stream"), "{err}");
}

#[test]
fn non_utf8_names_were_silently_replaced() {
    let c = Case::new();
    std::fs::write(c.path("src/c1/a\u{fffd}.c"), "x\n").unwrap();
    let mut t = HDR.as_bytes().to_vec();
    t.extend_from_slice(b"r,c1,a\xff.c,f,m,1,1\n");
    t.extend_from_slice(b"r,c1,a.c,f\xfe,m,1,1\n");
    t.extend_from_slice(b"r,c1,a.c,f,m,2,1\n");
    let input = c.path("bytes.csv");
    std::fs::write(&input, &t).unwrap();
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(!ok, "a non-UTF-8 name was accepted");
    assert!(err.contains("bytes.csv:2"), "{err}");
    assert!(
        err.contains("a\\xff.c") && err.contains("not valid UTF-8"),
        "{err}"
    );
    let (ok, err) = c.merge(&[&input], &["--max-bad-rows", "2"]);
    assert!(ok, "{err}");
    let got = canon(&c.path("out.jsonl.gz"));
    let files: Vec<&String> = got["files"].as_object().unwrap().keys().collect();
    assert_eq!(files, ["a.c"], "nothing merged under an altered name");
    assert!(got["files"]["a.c"]["funcs"].get("f\u{fffd}").is_none());
}

#[test]
fn worker_hung_forever_at_concurrency_64() {
    use covmerge_integration_tests::fleet::{self, coordinator_run, worker};
    let s = covmerge_integration_tests::FleetCorpus::new(64)
        .files(40)
        .lines(60)
        .commits(3)
        .parts(8)
        .shards(64)
        .reference_flags(&["--workers", "1"])
        .build();
    // One worker process with 64 task loops over a local store: every split and
    // merge of the job runs at once in it.
    let store = s.file_store();
    std::fs::create_dir_all(s.path("store")).unwrap();
    let _w = worker(s.dir(), 1, &store, &["--concurrency", "64"], &[]);
    let out = s.path("fleet.gz");
    let amqp = fleet::amqp();
    let a = s.coord_args(&amqp, &store, &out);
    let o = coordinator_run(&a, &[], std::time::Duration::from_secs(300));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(gunzip(&out), s.want, "fleet result differs");
}

#[test]
fn non_canonical_paths_are_bad_rows() {
    // Other names of a.c: before the fix each was its own FilePath record of one file.
    let names = ["./a.c", "a.c/", "x//a.c", "x/./a.c", "x/../a.c", "/a.c"];
    let c = Case::new();
    let mut t = format!("{HDR}r,c1,a.c,f,m,1,1\n");
    for n in names {
        t.push_str(&format!("r,c1,{n},f,m,2,1\n"));
    }
    let input = c.write("in.csv", &t);
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(!ok, "a non-canonical file_path was accepted");
    assert!(
        err.contains("in.csv:3") && err.contains("not a canonical path"),
        "names input, line and rule: {err}"
    );
    c.no_result();
    let (ok, err) = c.merge(&[&input], &["--max-bad-rows", "10"]);
    assert!(ok, "{err}");
    let got = canon(&c.path("out.jsonl.gz"));
    let files: Vec<&String> = got["files"].as_object().unwrap().keys().collect();
    assert_eq!(files, vec!["a.c"], "one file, one name");
    let m = covmerge_integration_tests::manifest(&c.path("manifest.json"));
    assert_eq!(m["totals"]["rows_bad"], names.len() as u64, "{m}");
}

#[test]
fn dir_source_symlink_to_etc_passwd_is_not_merged_or_shown() {
    let c = Case::new();
    let src = c.path("src/c1");
    std::os::unix::fs::symlink("/etc/passwd", src.join("p.c")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", src.join("z.c")).unwrap();
    let fifo = std::ffi::CString::new(src.join("fifo.c").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let input = c.write(
        "in.csv",
        &format!(
            "{HDR}r,c1,a.c,f,m,1,1\nr,c1,p.c,f,m,1,3\nr,c1,p.c,f,m,2,3\n\
             r,c1,z.c,f,m,1,1\nr,c1,fifo.c,f,m,1,1\n"
        ),
    );
    // Before the fix: fifo.c hung the merge, z.c read until memory ran out.
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(ok, "{err}");
    let got = canon(&c.path("out.jsonl.gz"));
    // A symlink is its target text, one line: line 2 of /etc/passwd is not merged.
    assert_eq!(got["files"]["p.c"]["managers"]["*"]["1"], 3, "{got}");
    assert!(
        got["files"]["p.c"]["managers"]["*"].get("2").is_none(),
        "{got}"
    );
    assert!(
        got["files"].get("fifo.c").is_none(),
        "a FIFO is no file: {got}"
    );
    let site = c.path("site");
    let o = covmerge(&[
        "report",
        c.path("out.jsonl.gz").to_str().unwrap(),
        "--source",
        &format!("dir:{}", c.path("src").display()),
        "--out",
        site.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let first = passwd.lines().next().unwrap().to_string();
    let mut dirs = vec![site.join("data")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                let s = std::fs::read_to_string(&p).unwrap();
                assert!(!s.contains(&first), "{} shows /etc/passwd", p.display());
            }
        }
    }
}
