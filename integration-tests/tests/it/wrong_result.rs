//! "Never publish a wrong result": each test is named after what a release
//! build did before the fix — exit 0 with data that is not the merge of its inputs on
//! its base, or a result written where it must not be.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use covmerge_integration_tests::{bin, covmerge};

use crate::bad_input::{Case, HDR};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The arguments of `covmerge merge --quiet` from `src` onto `base` into `out`, then
/// `rest` (`--manifest ...`, `--input ...`).
fn merge_args<'a>(src: &'a str, base: &'a str, out: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "merge",
        "--quiet",
        "--source",
        src,
        "--base-repo",
        "r",
        "--base-commit",
        base,
        "--out",
        out,
    ];
    a.extend_from_slice(rest);
    a
}

/// `git init` of a one-file repository with two commits; returns (repo, [c1, c2]).
fn git_repo(dir: &Path) -> (std::path::PathBuf, Vec<String>) {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    git(&["init", "-q"]);
    let mut commits = Vec::new();
    for text in [
        "int a;\nint b;\nint c;\n",
        "int z;\nint a;\nint b;\nint c;\n",
    ] {
        std::fs::write(repo.join("a.c"), text).unwrap();
        git(&["add", "a.c"]);
        git(&["commit", "-q", "-m", "x"]);
        commits.push(git(&["rev-parse", "HEAD"]));
    }
    (repo, commits)
}

#[test]
fn base_commit_missing_from_the_source_gave_an_empty_complete_result() {
    let c = Case::new();
    let (repo, commits) = git_repo(c.dir_path());
    let input = c.write("in.csv", &format!("{HDR}r,{},a.c,f,m,1,5\n", commits[0]));
    let git_src = format!("git:{}", repo.display());
    let dir_src = format!("dir:{}", c.path("src").display());
    let out = c.path("out.jsonl.gz");
    let missing = "0123456789abcdef0123456789abcdef01234567";
    // Git writes ids in lowercase; an uppercase spelling would go into the header.
    let upper = commits[1].to_ascii_uppercase();
    for (src, base) in [
        (git_src.as_str(), missing),
        // A revspec is not a commit id: the header would carry `HEAD~1`.
        (git_src.as_str(), "HEAD~1"),
        (git_src.as_str(), &commits[0][..12]),
        (git_src.as_str(), &upper),
        (dir_src.as_str(), "no-such-commit"),
    ] {
        let o = covmerge(&merge_args(
            src,
            base,
            out.to_str().unwrap(),
            &["--input", input.to_str().unwrap()],
        ));
        let err = stderr(&o);
        assert!(!o.status.success(), "{src} {base}: exit 0");
        assert!(
            err.contains(base) && err.contains("does not hold the base commit"),
            "{src} {base}: {err}"
        );
        assert!(!out.exists(), "{src} {base}: a result was published");
    }
    // The same job on a base the source holds merges.
    let o = covmerge(&merge_args(
        &git_src,
        &commits[1],
        out.to_str().unwrap(),
        &["--input", input.to_str().unwrap()],
    ));
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn base_commit_missing_from_a_store_snapshot_is_refused() {
    let c = Case::new();
    let (repo, commits) = git_repo(c.dir_path());
    let snap = format!("file://{}", c.path("snap").display());
    std::fs::create_dir_all(c.path("snap")).unwrap();
    let o = covmerge(&[
        "sources",
        "--git",
        repo.to_str().unwrap(),
        "--store",
        &snap,
        "--commit",
        &commits[0],
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let input = c.write("in.csv", &format!("{HDR}r,{},a.c,f,m,1,5\n", commits[0]));
    let out = c.path("out.jsonl.gz");
    let src = format!("store:{snap}");
    let run = |base: &str| {
        covmerge(&merge_args(
            &src,
            base,
            out.to_str().unwrap(),
            &["--input", input.to_str().unwrap()],
        ))
    };
    let o = run(&commits[1]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains(&commits[1]), "{}", stderr(&o));
    assert!(!out.exists());
    let o = run(&commits[0]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn impossible_dates_were_written_into_the_header() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    for date in ["2024-99-99", "2026-02-30", "2025-02-29"] {
        let (ok, err) = c.merge(&[&input], &["--date-to", date]);
        assert!(!ok, "--date-to {date}: exit 0");
        assert!(err.contains(date), "{err}");
        c.no_result();
    }
    let (ok, err) = c.merge(&[&input], &["--date-to", "2024-02-29"]);
    assert!(ok, "{err}");
}

#[test]
fn the_same_input_given_twice_was_counted_twice() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let link = c.path("link.csv");
    std::os::unix::fs::symlink(&input, &link).unwrap();
    let hard = c.path("hard.csv");
    std::fs::hard_link(&input, &hard).unwrap();
    let dotted = c.dir_path().join(".").join("in.csv");
    for other in [input.as_path(), &link, &hard, &dotted] {
        let (ok, err) = c.merge(&[&input, other], &[]);
        assert!(!ok, "{}: exit 0", other.display());
        assert!(err.contains("counted twice"), "{err}");
        c.no_result();
    }
}

#[test]
fn a_duplicated_header_column_silently_used_the_first() {
    let c = Case::new();
    let input = c.write(
        "in.csv",
        "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count,hit_count\nr,c1,a.c,f,m,1,5,7\n",
    );
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(!ok);
    assert!(err.contains("`hit_count` appears more than once"), "{err}");
    c.no_result();
}

/// Runs `covmerge diff OLD NEW --out OUT`.
fn diff(old: &Path, new: &Path, out: &Path) -> std::process::Output {
    covmerge(&[
        "diff",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
}

#[test]
fn diff_out_overwrote_its_own_input() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(ok, "{err}");
    let a = c.path("out.jsonl.gz");
    let b = c.path("b.jsonl.gz");
    std::fs::copy(&a, &b).unwrap();
    let before = std::fs::read(&a).unwrap();
    let link = c.path("a-link");
    std::os::unix::fs::symlink(&a, &link).unwrap();
    for out in [&a, &b, &link] {
        let o = diff(&a, &b, out);
        assert!(!o.status.success(), "diff --out {}: exit 0", out.display());
        assert!(
            stderr(&o).contains("would be overwritten"),
            "{}",
            stderr(&o)
        );
        assert_eq!(std::fs::read(&a).unwrap(), before);
    }
    let o = diff(&a, &b, &c.path("d.jsonl"));
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_symlinked_out_was_replaced_by_a_regular_file() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    std::fs::create_dir(c.path("real")).unwrap();
    let target = c.path("real/result.jsonl.gz");
    let link = c.path("out.jsonl.gz");
    std::os::unix::fs::symlink("real/result.jsonl.gz", &link).unwrap();
    let (ok, err) = c.merge(&[&input], &[]);
    assert!(ok, "{err}");
    let meta = std::fs::symlink_metadata(&link).unwrap();
    assert!(meta.file_type().is_symlink(), "the link was replaced");
    let text = covmerge_integration_tests::gunzip(&target);
    assert!(text.starts_with(b"{"), "the target holds no result");
    // No temporary file stays beside the link or the target.
    for dir in [c.dir_path(), &c.path("real")] {
        for e in std::fs::read_dir(dir).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                !name.contains(".partial"),
                "{name} left in {}",
                dir.display()
            );
        }
    }
}

#[test]
fn out_to_standard_output_streams_and_keeps_the_summary_off_it() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let src = format!("dir:{}", c.path("src").display());
    let o = Command::new(bin())
        .args(merge_args(
            &src,
            "c1",
            "-",
            &["--input", input.to_str().unwrap()],
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::MultiGzDecoder::new(&o.stdout[..]),
        &mut text,
    )
    .unwrap();
    assert!(text.lines().count() >= 2, "{text}");
    assert!(stderr(&o).contains("instrumented"), "{}", stderr(&o));
}

/// Waits until `path` holds `needle` or `limit` passes.
fn wait_for(path: &Path, needle: &str, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if std::fs::read_to_string(path).is_ok_and(|s| s.contains(needle)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A merge of case `c` (with `args`) whose stderr goes to `stderr.log` and whose
/// `$TMPDIR` is `tmp` (made here), held a minute at fault point `point`.
fn paused_merge(c: &Case, args: &[&str], point: &str) -> std::process::Child {
    let tmp = c.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let src = format!("dir:{}", c.path("src").display());
    let out = c.path("out.jsonl.gz");
    Command::new(bin())
        .args(merge_args(&src, "c1", out.to_str().unwrap(), args))
        .env("TMPDIR", &tmp)
        .env("RUST_LOG", "warn")
        .env("COVMERGE_FAULT_SLEEP", format!("{point}:60000"))
        .stderr(std::fs::File::create(c.path("stderr.log")).unwrap())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Sends `sig` to `child` and waits (30 s at most) for it to exit.
fn signal_and_wait(mut child: std::process::Child, sig: i32) -> std::process::ExitStatus {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no exit after the signal"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_interrupted_merge_left_its_spills_behind() {
    for (sig, code) in [
        (libc::SIGINT, 130),
        (libc::SIGTERM, 143),
        (libc::SIGHUP, 129),
    ] {
        let c = Case::new();
        let mut text = String::from(HDR);
        for i in 0..2000 {
            text.push_str(&format!("r,c1,a.c,f,m{},{},{}\n", i % 7, i % 3 + 1, i));
        }
        let input = c.write("in.csv", &text);
        let (tmp, log) = (c.path("tmp"), c.path("stderr.log"));
        let child = paused_merge(&c, &["--input", input.to_str().unwrap()], "merge");
        assert!(
            wait_for(&log, "fault point reached", Duration::from_secs(60)),
            "the merge never reached its shards"
        );
        assert!(
            std::fs::read_dir(&tmp).unwrap().count() > 0,
            "no spill directory to clean up"
        );
        let status = signal_and_wait(child, sig);
        assert_eq!(
            status.code(),
            Some(code),
            "{}",
            std::fs::read_to_string(&log).unwrap()
        );
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
        assert!(left.is_empty(), "left in TMPDIR: {left:?}");
        c.no_result();
    }
}

/// A merge interrupted while its shards' partial files were being stored left each
/// shard's `covmerge-partial-shard-*` directory in `$TMPDIR` (now made in the merge's
/// own scratch directory).
#[test]
fn an_interrupted_partial_out_left_its_shard_directories_behind() {
    let c = Case::new();
    let mut text = String::from(HDR);
    for i in 0..2000 {
        text.push_str(&format!(
            "r,c1,a{}.c,f,m{},{},{}\n",
            i % 5,
            i % 7,
            i % 3 + 1,
            i
        ));
    }
    let input = c.write("in.csv", &text);
    for f in 0..5 {
        c.write(&format!("src/c1/a{f}.c"), "l1\nl2\nl3\n");
    }
    let (tmp, log, partial) = (c.path("tmp"), c.path("stderr.log"), c.path("partial"));
    let args = [
        "--input",
        input.to_str().unwrap(),
        "--partial-out",
        partial.to_str().unwrap(),
    ];
    let child = paused_merge(&c, &args, "partial");
    assert!(
        wait_for(&log, "fault point reached", Duration::from_secs(60)),
        "the merge never stored a shard's partial: {}",
        std::fs::read_to_string(&log).unwrap()
    );
    // In the merge's own scratch directory, `$TMPDIR/covmerge-*/.scratch/`.
    let shard_dirs = || {
        let mut n = 0;
        for own in std::fs::read_dir(&tmp).unwrap() {
            let Ok(inner) = std::fs::read_dir(own.unwrap().path().join(".scratch")) else {
                continue;
            };
            n += inner
                .filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    name.to_string_lossy()
                        .starts_with("covmerge-partial-shard-")
                })
                .count();
        }
        n
    };
    assert!(shard_dirs() > 0, "no shard directory to clean up");
    let status = signal_and_wait(child, libc::SIGINT);
    assert_eq!(status.code(), Some(130));
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
    assert!(!partial.join("partial.json").exists());
}

#[test]
fn a_failed_manifest_write_hid_that_the_result_was_published() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    std::fs::create_dir(c.path("m")).unwrap();
    let man = c.path("m/manifest.json");
    let out = c.path("out.jsonl.gz");
    let src = format!("dir:{}", c.path("src").display());
    let log = c.path("stderr.log");
    let mut child = Command::new(bin())
        .args(merge_args(
            &src,
            "c1",
            out.to_str().unwrap(),
            &[
                "--manifest",
                man.to_str().unwrap(),
                "--input",
                input.to_str().unwrap(),
            ],
        ))
        .env("RUST_LOG", "warn")
        .env("COVMERGE_FAULT_SLEEP", "assemble:3000")
        .stderr(std::fs::File::create(&log).unwrap())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_for(
        &log,
        "fault point reached",
        Duration::from_secs(60)
    ));
    // The manifest's directory goes away between the preflight and the write.
    std::fs::remove_dir(c.path("m")).unwrap();
    let status = child.wait().unwrap();
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "{err}");
    assert!(err.contains("manifest"), "{err}");
    assert!(
        err.contains("the result was published") && err.contains(out.to_str().unwrap()),
        "{err}"
    );
    assert!(out.exists());
}

/// Found by a hostile review: a `file://` URL is the local file it names.
#[test]
fn a_file_url_out_overwrote_its_input_and_a_file_url_input_was_counted_twice() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let before = std::fs::read(&input).unwrap();
    let src = format!("dir:{}", c.path("src").display());
    let p = input.to_str().unwrap();
    let run = |out: &str, man: Option<&str>, inputs: &[&str]| {
        let mut a = merge_args(&src, "c1", out, &[]);
        if let Some(m) = man {
            a.extend(["--manifest", m]);
        }
        a.push("--input");
        a.extend_from_slice(inputs);
        covmerge(&a)
    };
    for out in [
        format!("file://{p}"),
        format!("file://localhost{p}"),
        format!("file:///{p}"),
    ] {
        let o = run(&out, None, &[p]);
        assert!(!o.status.success(), "--out {out}: exit 0");
        assert!(
            stderr(&o).contains("would be overwritten"),
            "{}",
            stderr(&o)
        );
        assert_eq!(std::fs::read(&input).unwrap(), before);
    }
    let res = c.path("res.jsonl.gz");
    let o = run(
        &format!("file://{}", res.display()),
        Some(res.to_str().unwrap()),
        &[p],
    );
    assert!(!o.status.success(), "--manifest over the result: exit 0");
    let o = run(
        res.to_str().unwrap(),
        None,
        &[p, &format!("file://localhost{p}")],
    );
    assert!(!o.status.success(), "file://localhost input counted twice");
    assert!(stderr(&o).contains("counted twice"), "{}", stderr(&o));
    // diff: OLD named by URL, --out its path.
    let o = run(res.to_str().unwrap(), None, &[p]);
    assert!(o.status.success(), "{}", stderr(&o));
    let old = std::fs::read(&res).unwrap();
    let o = covmerge(&[
        "diff",
        &format!("file://{}", res.display()),
        res.to_str().unwrap(),
        "--out",
        res.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert_eq!(std::fs::read(&res).unwrap(), old);
}

/// Found by the hostile review: `--out /dev/stdout` with stdout appending to a file
/// renamed a new file over it, and two streams to stdout lost one.
#[test]
fn out_dev_stdout_replaced_the_file_behind_standard_output() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let log = c.write("app.log", "PRECIOUS\n");
    let src = format!("dir:{}", c.path("src").display());
    let f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let o = Command::new(bin())
        .args(merge_args(
            &src,
            "c1",
            "/dev/stdout",
            &["--input", input.to_str().unwrap()],
        ))
        .stdout(f)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read(&log).unwrap();
    assert!(
        text.starts_with(b"PRECIOUS\n"),
        "the file behind stdout was replaced"
    );
    assert_eq!(&text[9..11], &[0x1f, 0x8b], "no gzip result appended");
    for (out, man) in [("-", "/dev/stdout"), ("/dev/stdout", "-"), ("-", "-")] {
        let o = covmerge(&merge_args(
            &src,
            "c1",
            out,
            &["--manifest", man, "--input", input.to_str().unwrap()],
        ));
        assert!(!o.status.success(), "--out {out} --manifest {man}: exit 0");
    }
}

/// Found by the hostile review: an empty `ROOT/<commit>/` passed the base check and
/// every file counted deleted made an empty "complete" result.
#[test]
fn every_file_absent_at_the_base_published_an_empty_result() {
    let c = Case::new();
    std::fs::create_dir(c.path("src/c0")).unwrap();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let src = format!("dir:{}", c.path("src").display());
    let out = c.path("out.jsonl.gz");
    let o = covmerge(&merge_args(
        &src,
        "c0",
        out.to_str().unwrap(),
        &["--input", input.to_str().unwrap()],
    ));
    assert!(!o.status.success(), "exit 0");
    assert!(
        stderr(&o).contains("does not hold the base commit \"c0\"")
            && stderr(&o).contains("is an empty directory"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
    // Directories without a file hold no commit either.
    std::fs::create_dir_all(c.path("src/c0/sub/deeper")).unwrap();
    let o = covmerge(&merge_args(
        &src,
        "c0",
        out.to_str().unwrap(),
        &["--input", input.to_str().unwrap()],
    ));
    assert!(
        !o.status.success() && stderr(&o).contains("is an empty directory (no file under it)"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
}

/// Found by the hostile review: a job whose every file was deleted at a base the
/// source holds (other files there) was refused as "a source that does not hold the
/// base", although each such file is simply deleted (contract §3): the result is the
/// header alone, every row counted deleted.
#[test]
fn every_file_deleted_at_a_base_holding_other_files_was_refused() {
    let c = Case::new();
    std::fs::create_dir_all(c.path("src/c0")).unwrap();
    std::fs::write(c.path("src/c0/keep.c"), "int x;\n").unwrap();
    std::fs::create_dir_all(c.path("src/c1")).unwrap();
    std::fs::write(c.path("src/c1/gone.c"), "a\nb\n").unwrap();
    let input = c.write(
        "in.csv",
        &format!("{HDR}r,c1,gone.c,f,m,1,5\nr,c1,gone.c,f,m,2,0\nr,c1,gone.c,f,m,0,3\n"),
    );
    let src = format!("dir:{}", c.path("src").display());
    let out = c.path("out.jsonl.gz");
    let man = c.path("man.json");
    let o = covmerge(&merge_args(
        &src,
        "c0",
        out.to_str().unwrap(),
        &[
            "--manifest",
            man.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
        ],
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(covmerge_integration_tests::gunzip(&out)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "only the header: {text}");
    assert!(lines[0].contains("\"TotalRows\":3"), "{text}");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&man).unwrap()).unwrap();
    let t = &m["totals"];
    assert_eq!(
        (
            t["rows_in"].as_u64(),
            t["files"].as_u64(),
            t["files_deleted"].as_u64(),
            t["rows_deleted"].as_u64(),
            t["instrumented"].as_u64()
        ),
        (Some(3), Some(0), Some(1), Some(3), Some(0)),
        "{m}"
    );
    assert_eq!(m["status"].as_str(), Some("complete"), "{m}");
}

/// Found by the hostile review: `sources --commit HEAD` wrote an empty index that a
/// merge then read as "every file deleted".
#[test]
fn sources_wrote_an_index_for_a_commit_the_repository_lacks() {
    let c = Case::new();
    let (repo, commits) = git_repo(c.dir_path());
    let snap = format!("file://{}", c.path("snap").display());
    std::fs::create_dir_all(c.path("snap")).unwrap();
    for bad in [
        "HEAD",
        &commits[0][..10],
        "0123456789abcdef0123456789abcdef01234567",
    ] {
        let o = covmerge(&[
            "sources",
            "--git",
            repo.to_str().unwrap(),
            "--store",
            &snap,
            "--commit",
            bad,
        ]);
        assert!(!o.status.success(), "--commit {bad}: exit 0");
        assert!(stderr(&o).contains(bad), "{}", stderr(&o));
    }
    assert_eq!(std::fs::read_dir(c.path("snap")).unwrap().count(), 0);
}
