//! Logging never blocks or kills the work: stderr full, closed or unread.

use super::*;

/// Where a child's standard output or error goes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Sink {
    /// `/dev/full`: every write fails with ENOSPC.
    DevFull,
    /// A pipe whose reading end is closed: every write fails with EPIPE.
    ClosedPipe,
    /// A pipe nobody reads: writes block once its buffer (64 KiB) is full.
    StuckPipe,
    Null,
}

/// The `Stdio` for `sink`; a stuck pipe's reading end is kept in `keep` (open, unread).
pub(super) fn stdio(sink: Sink, keep: &mut Vec<std::io::PipeReader>) -> Stdio {
    match sink {
        Sink::DevFull => std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
            .into(),
        Sink::ClosedPipe => {
            let (r, w) = std::io::pipe().unwrap();
            drop(r);
            w.into()
        }
        Sink::StuckPipe => {
            let (r, w) = std::io::pipe().unwrap();
            keep.push(r);
            w.into()
        }
        Sink::Null => Stdio::null(),
    }
}

/// Waits for `child` at most `limit`; kills it and fails the test past that.
pub(super) fn wait_bounded(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?} (hung)");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A merge that logs (RUST_LOG=debug: many lines, more than a pipe holds) with its
/// standard error on a full device, a closed pipe or a pipe nobody reads, and its
/// standard output closed: it hung forever (0 % CPU) or panicked after the result was
/// written. Now it exits 0 within a bound and the result is the same as with
/// readable streams.
#[test]
pub(super) fn merge_hung_or_panicked_when_stderr_or_stdout_could_not_be_written() {
    let s = FleetCorpus::new(281).unlocked().build();
    for (out_sink, err_sink) in [
        (Sink::Null, Sink::DevFull),
        (Sink::Null, Sink::ClosedPipe),
        (Sink::Null, Sink::StuckPipe),
        (Sink::ClosedPipe, Sink::ClosedPipe),
        (Sink::DevFull, Sink::DevFull),
    ] {
        let what = format!("merge, stdout {out_sink:?}, stderr {err_sink:?}");
        let out = s.path(&format!("out-{out_sink:?}-{err_sink:?}.gz"));
        let mut a = vec!["merge", "--quiet"];
        a.extend(s.job_args());
        a.extend(["--out", out.to_str().unwrap()]);
        let mut keep = Vec::new();
        let mut child = Command::new(bin())
            .args(&a)
            .env("RUST_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(stdio(out_sink, &mut keep))
            .stderr(stdio(err_sink, &mut keep))
            .spawn()
            .unwrap();
        let st = wait_bounded(&mut child, Duration::from_secs(60), &what);
        assert_eq!(st.code(), Some(0), "{what}: {st}");
        assert!(gunzip(&out) == s.want, "{what}: the result differs");
    }
}

/// A merge that fails (an input without `hit_count`) with stderr on a full device:
/// it exits non-zero within a bound, not hanging and not exiting 0.
#[test]
pub(super) fn failing_merge_hung_when_stderr_was_full() {
    let c = crate::bad_input::Case::new();
    let input = c.write(
        "in.csv",
        "kernel_repo,kernel_commit,file_path,func_name,manager,sl\nr,c1,a.c,f,m,1\n",
    );
    let good = c.write(
        "good.csv",
        &format!("{}r,c1,a.c,f,m,1,5\n", crate::bad_input::HDR),
    );
    let src = format!("dir:{}", c.path("src").display());
    let out = c.path("out.jsonl.gz");
    for err_sink in [Sink::DevFull, Sink::ClosedPipe, Sink::StuckPipe] {
        let mut keep = Vec::new();
        let mut child = Command::new(bin())
            .args([
                "merge",
                "--source",
                &src,
                "--base-repo",
                "r",
                "--base-commit",
                "c1",
                "--out",
                out.to_str().unwrap(),
                "--input",
                good.to_str().unwrap(),
                input.to_str().unwrap(),
            ])
            .env("RUST_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stdio(err_sink, &mut keep))
            .spawn()
            .unwrap();
        let what = format!("failing merge, stderr {err_sink:?}");
        let st = wait_bounded(&mut child, Duration::from_secs(60), &what);
        assert_eq!(st.code(), Some(1), "{what}: {st}");
        c.no_result();
    }
}

/// A worker and a coordinator whose standard error is a full device and whose
/// standard output is a closed pipe (their log pipe died): the job completes with the
/// embedded result, the coordinator exits 0, and the worker stops at SIGTERM.
#[test]
pub(super) fn fleet_hung_when_its_log_pipe_died() {
    let s = FleetCorpus::new(282).unlocked().build();
    let vh = Vhost::new("edges-logs");
    let store_dir = s.path("store");
    std::fs::create_dir_all(&store_dir).unwrap();
    let store = file_store(&store_dir);
    let mut keep = Vec::new();
    let mut w = fleet_cmd(&["worker", "--amqp", &vh.url, "--store", &store])
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(stdio(Sink::ClosedPipe, &mut keep))
        .stderr(stdio(Sink::DevFull, &mut keep))
        .spawn()
        .unwrap();
    let out = s.path("fleet.gz");
    let mut a = vec!["coordinator", "--quiet"];
    a.extend(s.coord_args(&vh.url, &store, &out));
    let mut c = fleet_cmd(&a)
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(stdio(Sink::ClosedPipe, &mut keep))
        .stderr(stdio(Sink::DevFull, &mut keep))
        .spawn()
        .unwrap();
    let st = wait_bounded(&mut c, LONG, "coordinator with stderr on /dev/full");
    assert_eq!(st.code(), Some(0), "coordinator: {st}");
    assert!(gunzip(&out) == s.want, "fleet result differs");
    assert_eq!(w.try_wait().unwrap(), None, "the worker exited early");
    unsafe {
        libc::kill(w.id() as i32, libc::SIGTERM);
    }
    let st = wait_bounded(&mut w, Duration::from_secs(60), "worker after SIGTERM");
    assert_eq!(st.code(), Some(0), "worker: {st}");
}
