//! `merge`'s scratch directory (`$TMPDIR/covmerge-*`): a full disk is named at once,
//! and a killed merge's directory is reclaimed by the next one, never a live one's.
//! Each test is named after what broke.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use covmerge_integration_tests::bin;

use crate::bad_input::{Case, HDR};

/// `merge` of `input` onto the case's source into `out`, scratch in `tmp`.
fn merge_cmd(c: &Case, input: &Path, out: &Path, tmp: &Path) -> Command {
    let src = format!("dir:{}", c.path("src").display());
    let mut cmd = Command::new(bin());
    cmd.args([
        "merge",
        "--quiet",
        "--source",
        &src,
        "--base-repo",
        "r",
        "--base-commit",
        "c1",
        "--shards",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ])
    .env("TMPDIR", tmp)
    .env("RUST_LOG", "warn");
    cmd
}

fn input(c: &Case, rows: usize) -> PathBuf {
    let mut text = String::from(HDR);
    for i in 0..rows {
        text.push_str(&format!("r,c1,a.c,f,m{},{},{}\n", i % 7, i % 3 + 1, i));
    }
    c.write("in.csv", &text)
}

fn scratch_dirs(tmp: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("covmerge-"))
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// Starts a merge paused before its shards (its scratch directory full of spills).
fn paused_merge(c: &Case, input: &Path, out: &Path, tmp: &Path, ms: u32) -> (Child, PathBuf) {
    let log = c.path(&format!("paused-{ms}.log"));
    let child = paused_at(merge_cmd(c, input, out, tmp), "merge", ms, &log);
    let dirs = scratch_dirs(tmp);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    (child, dirs.into_iter().next().unwrap())
}

fn ok(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    err
}

/// A merge killed with SIGKILL left its spills in `$TMPDIR/covmerge-*` (82 MB after
/// three kills) and nothing ever removed them. The next merge now removes the
/// directories whose owner is gone, saying so, and completes.
#[test]
fn a_killed_merge_left_its_scratch_directory_forever() {
    let c = Case::new();
    let input = input(&c, 3000);
    let tmp = c.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let (mut killed, left) = paused_merge(&c, &input, &c.path("killed.gz"), &tmp, 60_000);
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert!(left.exists(), "SIGKILL leaves it");
    let out = c.path("out.jsonl.gz");
    let err = ok(&merge_cmd(&c, &input, &out, &tmp).output().unwrap());
    assert!(
        err.contains("removed 1 scratch directory (")
            && err.contains("bytes) of merges that are gone"),
        "{err}"
    );
    assert!(!left.exists());
    assert!(scratch_dirs(&tmp).is_empty(), "{:?}", scratch_dirs(&tmp));
    assert!(out.exists());
}

/// The sweep must never take a live merge's directory: one merge paused with its
/// spills in place, another merge on the same `$TMPDIR` runs whole; the first one's
/// directory is untouched and it completes with the same result.
#[test]
fn a_live_merge_s_scratch_directory_survived_a_concurrent_merge_s_sweep() {
    let c = Case::new();
    let input = input(&c, 3000);
    let tmp = c.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let first_out = c.path("first.gz");
    let (mut first, dir) = paused_merge(&c, &input, &first_out, &tmp, 8_000);
    let files_before = std::fs::read_dir(&dir).unwrap().count();
    let out = c.path("out.jsonl.gz");
    let err = ok(&merge_cmd(&c, &input, &out, &tmp).output().unwrap());
    assert!(!err.contains("of merges that are gone"), "{err}");
    assert!(dir.exists(), "a live merge's directory was removed");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), files_before);
    let status = first.wait().unwrap();
    assert!(status.success());
    assert_eq!(
        covmerge_integration_tests::gunzip(&first_out),
        covmerge_integration_tests::gunzip(&out)
    );
    assert!(scratch_dirs(&tmp).is_empty(), "{:?}", scratch_dirs(&tmp));
}

/// A full `$TMPDIR` hung `merge` forever: ENOSPC on a spill was retried as a store
/// outage for 300 s, then the split's cutter stayed parked on a full channel, no
/// CPU, no exit. It now fails within seconds naming the disk's problem and what to
/// do, and leaves nothing in the scratch directory. The full disk is a 64 KiB tmpfs
/// mounted in a mount namespace of its own (`unshare -m`, as root, as CI runs).
#[test]
fn a_full_tmpdir_hung_merge_forever() {
    let c = Case::new();
    // Many managers: spills far larger than the 64 KiB disk.
    let mut text = String::from(HDR);
    for i in 0..60_000 {
        text.push_str(&format!(
            "r,c1,a.c,f,manager-{},{},{}\n",
            i % 20_000,
            i % 3 + 1,
            i
        ));
    }
    let input = c.write("in.csv", &text);
    let tmp = c.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = c.path("out.jsonl.gz");
    let inner = merge_cmd(&c, &input, &out, &tmp);
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "sh", "-c"])
        .arg(
            "mount -t tmpfs -o size=64k tmpfs \"$1\" || exit 99; shift; \"$@\"; rc=$?; \
             echo \"left in TMPDIR: [$(ls -A \"$TMPDIR\")]\" >&2; exit $rc",
        )
        .arg("sh")
        .arg(&tmp)
        .arg(inner.get_program())
        .args(inner.get_args())
        .env("TMPDIR", &tmp)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // Its own process group: a hung merge is killed with the shell and unshare.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let t0 = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(90) {
            // SAFETY: signalling our own child's process group.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let o = child.wait_with_output().unwrap();
            panic!(
                "no exit 90 s after starting on a full TMPDIR:\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let err = {
        use std::io::Read;
        let mut s = String::new();
        child.stderr.take().unwrap().read_to_string(&mut s).unwrap();
        s
    };
    assert_ne!(status.code(), Some(99), "cannot mount a tmpfs here: {err}");
    assert!(!status.success(), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "{:?}: {err}",
        t0.elapsed()
    );
    assert!(
        err.contains("no space left on device") && err.contains("TMPDIR"),
        "{err}"
    );
    assert!(err.contains("left in TMPDIR: []"), "{err}");
    assert!(!out.exists());
}

/// Starts `cmd` paused for `ms` at fault point `point` (its standard error in `log`)
/// and returns it once it says it reached the point.
fn paused_at(mut cmd: Command, point: &str, ms: u32, log: &Path) -> Child {
    let child = cmd
        .env("COVMERGE_FAULT_SLEEP", format!("{point}:{ms}"))
        .env("RUST_LOG", "warn")
        .stderr(std::fs::File::create(log).unwrap())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !std::fs::read_to_string(log).is_ok_and(|s| s.contains("fault point reached")) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "never reached {point}: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// Runs `cmd` (its `$TMPDIR` `tmp`) until fault point `point`, kills it with
/// SIGKILL, and returns the scratch directories it left.
fn killed_at(cmd: Command, point: &str, log: &Path, tmp: &Path) -> Vec<PathBuf> {
    let mut child = paused_at(cmd, point, 60_000, log);
    child.kill().unwrap();
    child.wait().unwrap();
    scratch_dirs(tmp)
}

/// Sends SIGTERM to `child` and returns its exit code.
fn terminated(mut child: Child) -> Option<i32> {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap().code()
}

/// `rollup` of `input`'s raw rows onto the case's source into `p`, scratch in `tmp`.
fn rollup_cmd(c: &Case, input: &Path, tmp: &Path) -> Command {
    let src = format!("dir:{}", c.path("src").display());
    let mut cmd = Command::new(bin());
    cmd.args([
        "rollup",
        "--input",
        input.to_str().unwrap(),
        "--source",
        &src,
    ])
    .args(["--partial-out", c.path("p").to_str().unwrap()])
    .env("TMPDIR", tmp);
    cmd
}

/// A `--partial-out` merge killed with SIGKILL left its shard's partial files and its
/// builder's runs in `$TMPDIR/covmerge-partial-*`, directories without an owner
/// marker that the next merge's sweep left for 24 hours. They are now made inside the
/// merge's own scratch directory, swept with it.
#[test]
fn a_killed_partial_out_merge_left_its_shard_partials_for_a_day() {
    let c = Case::new();
    let input = input(&c, 3000);
    let tmp = c.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let partial = c.path("partial");
    let mut cmd = merge_cmd(&c, &input, &c.path("killed.gz"), &tmp);
    cmd.args(["--partial-out", partial.to_str().unwrap()]);
    let left = killed_at(cmd, "upload", &c.path("killed.log"), &tmp);
    assert_eq!(left.len(), 1, "one directory, the merge's own: {left:?}");
    let out = c.path("out.jsonl.gz");
    let err = ok(&merge_cmd(&c, &input, &out, &tmp).output().unwrap());
    assert!(err.contains("removed 1 scratch directory ("), "{err}");
    assert!(scratch_dirs(&tmp).is_empty(), "{:?}", scratch_dirs(&tmp));
}

/// A `rollup` killed with SIGKILL left its scratch directory (its raw rows' spills and
/// partials) in `$TMPDIR/covmerge-rollup-*`, without an owner marker: nothing removed
/// it for a day. It is now claimed as a merge's is, and the next covmerge sweeps it.
#[test]
fn a_killed_rollup_left_its_scratch_directory_for_a_day() {
    let c = Case::new();
    let input = input(&c, 3000);
    let tmp = c.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let cmd = rollup_cmd(&c, &input, &tmp);
    let left = killed_at(cmd, "rollup", &c.path("killed.log"), &tmp);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].join(".covmerge-owner").exists(), "{left:?}");
    let out = c.path("out.jsonl.gz");
    let err = ok(&merge_cmd(&c, &input, &out, &tmp).output().unwrap());
    assert!(err.contains("removed 1 scratch directory ("), "{err}");
    assert!(scratch_dirs(&tmp).is_empty(), "{:?}", scratch_dirs(&tmp));
}

/// A merge reading a partial through `file://` copies it to a temporary directory of
/// its own, made in `$TMPDIR` beside the merge's, without an owner marker: killed,
/// it left the copy for a day; interrupted, it left the copy while saying "temporary
/// files removed". The copy is now made in the merge's own directory.
#[test]
fn a_killed_merge_of_a_store_partial_left_its_copy_for_a_day() {
    let c = Case::new();
    let input = input(&c, 3000);
    let tmp = c.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let partial = c.path("partial");
    let mut made = merge_cmd(&c, &input, &c.path("first.gz"), &tmp);
    made.args(["--partial-out", partial.to_str().unwrap()]);
    ok(&made.output().unwrap());
    let url = format!("file://{}/", partial.display());
    let input = PathBuf::from(&url);
    let cmd = merge_cmd(&c, &input, &c.path("killed.gz"), &tmp);
    let left = killed_at(cmd, "store-copy", &c.path("killed.log"), &tmp);
    assert_eq!(left.len(), 1, "one directory, the merge's own: {left:?}");
    let cmd = merge_cmd(&c, &input, &c.path("stopped.gz"), &tmp);
    let child = paused_at(cmd, "store-copy", 60_000, &c.path("stopped.log"));
    assert_eq!(terminated(child), Some(143));
    assert!(scratch_dirs(&tmp).is_empty(), "{:?}", scratch_dirs(&tmp));
}

/// `rollup` had no signal handling: SIGTERM left its whole scratch directory until
/// the next covmerge's sweep. It now removes it and exits 143, as `merge` does.
#[test]
fn a_rollup_stopped_by_sigterm_left_its_scratch_directory() {
    let c = Case::new();
    let input = input(&c, 3000);
    let tmp = c.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let child = paused_at(
        rollup_cmd(&c, &input, &tmp),
        "rollup",
        60_000,
        &c.path("rollup.log"),
    );
    assert_eq!(scratch_dirs(&tmp).len(), 1);
    assert_eq!(terminated(child), Some(143));
    assert!(scratch_dirs(&tmp).is_empty(), "{:?}", scratch_dirs(&tmp));
    assert!(!c.path("p").join("partial.json").exists());
}
