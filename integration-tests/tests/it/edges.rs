//! "The edges": the parts around the merge (logs, the dashboard's HTTP,
//! snapshots, status and error messages, object names). Each test is named after what
//! broke.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use covmerge_integration_tests::fleet::{fleet_cmd, Vhost};
use covmerge_integration_tests::{bin, fixture, gcs, gunzip};

use crate::fleet::{file_store, job_args, setup, LONG};

/// Where a child's standard output or error goes.
#[derive(Debug, Clone, Copy)]
enum Sink {
    /// `/dev/full`: every write fails with ENOSPC.
    DevFull,
    /// A pipe whose reading end is closed: every write fails with EPIPE.
    ClosedPipe,
    /// A pipe nobody reads: writes block once its buffer (64 KiB) is full.
    StuckPipe,
    Null,
}

/// The `Stdio` for `sink`; a stuck pipe's reading end is kept in `keep` (open, unread).
fn stdio(sink: Sink, keep: &mut Vec<std::io::PipeReader>) -> Stdio {
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
fn wait_bounded(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
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
fn merge_hung_or_panicked_when_stderr_or_stdout_could_not_be_written() {
    let s = setup(281, false);
    for (out_sink, err_sink) in [
        (Sink::Null, Sink::DevFull),
        (Sink::Null, Sink::ClosedPipe),
        (Sink::Null, Sink::StuckPipe),
        (Sink::ClosedPipe, Sink::ClosedPipe),
        (Sink::DevFull, Sink::DevFull),
    ] {
        let what = format!("merge, stdout {out_sink:?}, stderr {err_sink:?}");
        let out = s
            .tmp
            .path()
            .join(format!("out-{out_sink:?}-{err_sink:?}.gz"));
        let mut a = vec!["merge", "--quiet"];
        a.extend(job_args(&s.corpus, &s.source, &s.ins));
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
fn failing_merge_hung_when_stderr_was_full() {
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
fn fleet_hung_when_its_log_pipe_died() {
    let s = setup(282, false);
    let vh = Vhost::new("edges-logs");
    let store_dir = s.tmp.path().join("store");
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
    let out = s.tmp.path().join("fleet.gz");
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

/// A loopback HTTP server: reads each request (head, and a body of its
/// Content-Length), counts it, and lets `answer` write the reply; one request per
/// connection.
struct Http {
    /// `http://127.0.0.1:PORT`.
    url: String,
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Http {
    fn start(answer: impl Fn(&mut TcpStream) + Send + Sync + 'static) -> Http {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let (h, answer) = (hits.clone(), Arc::new(answer));
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let (h, answer) = (h.clone(), answer.clone());
                std::thread::spawn(move || {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match s.read(&mut b) {
                            Ok(1) => head.push(b[0]),
                            _ => return,
                        }
                    }
                    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap_or(0));
                    let mut body = vec![0; len];
                    if s.read_exact(&mut body).is_err() {
                        return;
                    }
                    h.fetch_add(1, Ordering::SeqCst);
                    answer(&mut s);
                });
            }
        });
        Http {
            url: format!("http://127.0.0.1:{port}"),
            port,
            hits,
        }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// Answers 200 with a JSON body.
fn json_reply(body: String) -> impl Fn(&mut TcpStream) + Send + Sync + 'static {
    move |s: &mut TcpStream| {
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    }
}

const KEY: &str = "edges-s3cret-dashboard-key";

/// `merge --dashboard URL` on the semantics fixture, run in `tmp` with the GCS
/// emulator's credentials (bounded); returns (exit code, stderr).
fn merge_to_dashboard(tmp: &Path, url: &str) -> (Option<i32>, String) {
    let d = fixture("semantics");
    let src = format!("dir:{}", d.join("sources").display());
    let mut child = Command::new(bin())
        .args([
            "merge",
            "--quiet",
            "--source",
            &src,
            "--base-repo",
            "git://example/linux",
            "--base-commit",
            "base",
            "--date-to",
            "2024-04-08",
            "--dashboard",
            url,
            "--dashboard-client",
            "ci-covmerge",
            "--input",
            d.join("input-a.csv").to_str().unwrap(),
        ])
        .env("COVMERGE_DASHBOARD_KEY", KEY)
        .env("GOOGLE_SERVICE_ACCOUNT", gcs::credentials(tmp))
        .env("RUST_LOG", "debug")
        .current_dir(tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(tmp.join("stderr")).unwrap(),
        ))
        .spawn()
        .unwrap();
    let st = wait_bounded(&mut child, Duration::from_secs(90), "merge --dashboard");
    let err = std::fs::read_to_string(tmp.join("stderr")).unwrap();
    assert!(!err.contains(KEY), "the key leaked:\n{err}");
    (st.code(), err)
}

/// create_upload_url answered 302 to another host: covmerge re-sent the call there,
/// took that host's answer as the upload object, wrote the result to it and called
/// save_coverage. Now the 302 is a final error naming the other host; the other host
/// gets nothing, nothing is written to its bucket, and save_coverage is not called.
#[test]
fn dashboard_redirect_to_another_host_was_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let victim_bucket = gcs::bucket("victim");
    let victim = Http::start(json_reply(format!(
        "\"gs://{victim_bucket}/stolen.upload\""
    )));
    let to = format!("http://localhost:{}/api", victim.port);
    let dash = Http::start(move |s: &mut TcpStream| {
        let _ = write!(
            s,
            "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        );
    });
    let (code, err) = merge_to_dashboard(tmp.path(), &dash.url);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("redirect") && err.contains("host localhost"),
        "the error does not name the redirect's host:\n{err}"
    );
    assert_eq!(victim.hits(), 0, "the other host was called");
    assert_eq!(
        dash.hits(),
        1,
        "a redirect is final: one create_upload_url, no save_coverage"
    );
    assert!(
        gcs::list(&victim_bucket, "").is_empty(),
        "the result was written to the other host's object"
    );
}

/// The child's exit status and its own peak RSS in KiB, waiting at most `limit`
/// (killed past it).
fn wait_rss(child: Child, limit: Duration, what: &str) -> (i32, i64) {
    let pid = child.id() as libc::pid_t;
    let t0 = Instant::now();
    loop {
        let mut status = 0;
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            assert!(libc::WIFEXITED(status), "{what}: killed by a signal");
            return (libc::WEXITSTATUS(status), ru.ru_maxrss);
        }
        if t0.elapsed() > limit {
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::wait4(pid, &mut status, 0, &mut ru);
            }
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A dashboard answering create_upload_url with an endless body: covmerge held it
/// all in memory (a 2 GB reply took 4.1 GB). Now the reply is cut at its cap: the job
/// fails quickly with a clear error, having read little, in little memory.
#[test]
fn dashboard_reply_without_end_took_all_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let sent = Arc::new(AtomicUsize::new(0));
    let n = sent.clone();
    let dash = Http::start(move |s: &mut TcpStream| {
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        );
        let chunk = vec![b'a'; 64 << 10];
        let _ = write!(s, "1\r\n\"\r\n");
        // Until the client hangs up, or 4 GiB.
        for _ in 0..(1 << 16) {
            if write!(s, "{:x}\r\n", chunk.len())
                .and_then(|()| s.write_all(&chunk))
                .and_then(|()| s.write_all(b"\r\n"))
                .is_err()
            {
                return;
            }
            n.fetch_add(chunk.len(), Ordering::SeqCst);
        }
    });
    let d = fixture("semantics");
    let src = format!("dir:{}", d.join("sources").display());
    let child = Command::new(bin())
        .args([
            "merge",
            "--quiet",
            "--source",
            &src,
            "--base-repo",
            "git://example/linux",
            "--base-commit",
            "base",
            "--dashboard",
            &dash.url,
            "--dashboard-client",
            "ci-covmerge",
            "--input",
            d.join("input-a.csv").to_str().unwrap(),
        ])
        .env("COVMERGE_DASHBOARD_KEY", KEY)
        .current_dir(tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(tmp.path().join("stderr")).unwrap(),
        ))
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let (code, rss_kb) = wait_rss(child, Duration::from_secs(90), "merge --dashboard");
    let err = std::fs::read_to_string(tmp.path().join("stderr")).unwrap();
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("longer than 16384 bytes"),
        "no clear error about the reply's size:\n{err}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(dash.hits(), 1, "a reply too long is final, not retried");
    assert!(
        rss_kb < 200 << 10,
        "peak RSS {rss_kb} KiB reading a dashboard reply"
    );
    let sent = sent.load(Ordering::SeqCst);
    assert!(sent < 256 << 20, "{sent} bytes of the reply were read");
}

/// A `store:` snapshot in `c`'s directory with commit `c1` naming blob `id` for
/// `a.c`; returns the blob's path and the `--source`.
fn snapshot(c: &crate::bad_input::Case, id: &str) -> (std::path::PathBuf, String) {
    let snap = c.path("snap");
    std::fs::create_dir_all(snap.join("blobs")).unwrap();
    std::fs::create_dir_all(snap.join("commits")).unwrap();
    std::fs::write(snap.join("commits/c1.idx"), format!("{id} a.c\n")).unwrap();
    (
        snap.join("blobs").join(id),
        format!("store:file://{}", snap.display()),
    )
}

fn merge_from(c: &crate::bad_input::Case, source: &str) -> Command {
    let input = c.write(
        "in.csv",
        &format!("{}r,c1,a.c,f,m,1,5\n", crate::bad_input::HDR),
    );
    let mut cmd = Command::new(bin());
    cmd.args([
        "merge",
        "--quiet",
        "--source",
        source,
        "--base-repo",
        "r",
        "--base-commit",
        "c1",
        "--out",
        c.path("out.jsonl.gz").to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ])
    .env("RUST_LOG", "warn")
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::from(
        std::fs::File::create(c.path("stderr")).unwrap(),
    ));
    cmd
}

/// A snapshot blob far over the 256 MiB source-file cap (a sparse file: no disk) was
/// read whole before anything was checked (an 8 GB blob aborted the worker on its
/// allocation). Now its size is checked before a byte is read: the job fails at once
/// naming the limit, in little memory.
#[test]
fn store_blob_over_the_cap_was_read_whole() {
    let c = crate::bad_input::Case::new();
    let (blob, source) = snapshot(&c, &"ab".repeat(20));
    std::fs::File::create(&blob)
        .unwrap()
        .set_len(600 << 20)
        .unwrap();
    let child = merge_from(&c, &source).spawn().unwrap();
    let (code, rss_kb) = wait_rss(child, Duration::from_secs(60), "merge from a huge blob");
    let err = std::fs::read_to_string(c.path("stderr")).unwrap();
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("c1:a.c") && err.contains("MiB limit on a source file"),
        "{err}"
    );
    assert!(
        rss_kb < 300 << 10,
        "peak RSS {rss_kb} KiB: the blob was read"
    );
    c.no_result();
}

/// A snapshot blob whose content does not match its id was retried to the delivery
/// limit (5 attempts) though every try reads the same bytes. Now it is a permanent
/// bad-input failure at the first attempt.
#[test]
fn store_blob_not_matching_its_id_was_retried_to_the_delivery_limit() {
    let c = crate::bad_input::Case::new();
    let (blob, source) = snapshot(&c, &"0123456789".repeat(4));
    std::fs::write(&blob, "int a;\nint b;\nint c;\n").unwrap();
    let mut child = merge_from(&c, &source).spawn().unwrap();
    let st = wait_bounded(&mut child, Duration::from_secs(60), "merge from a bad blob");
    let err = std::fs::read_to_string(c.path("stderr")).unwrap();
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("does not match its blob id"), "{err}");
    assert!(err.contains("bad input"), "not a bad-input failure:\n{err}");
    assert!(
        !err.contains("will be retried"),
        "a damaged blob was retried:\n{err}"
    );
    c.no_result();
}

/// Runs `covmerge ARGS` (bounded), stdout and stderr to files in `dir`; returns (exit
/// code, stdout, stderr).
fn run_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut cmd = fleet_cmd(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (o, e) = (dir.join("run.stdout"), dir.join("run.stderr"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::fs::File::create(&o).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&e).unwrap()))
        .spawn()
        .unwrap();
    let st = wait_bounded(&mut child, LONG, &format!("covmerge {args:?}"));
    (
        st.code(),
        std::fs::read_to_string(o).unwrap(),
        std::fs::read_to_string(e).unwrap(),
    )
}

/// `covmerge status` of a failed job counted its failed tasks as still running
/// ("7 running, 7 failed"). Now a failed task is failed, not running.
#[test]
fn status_counted_failed_tasks_as_running() {
    let c = crate::bad_input::Case::new();
    let hdr = crate::bad_input::HDR;
    let good = c.write("good.csv", &format!("{hdr}r,c1,a.c,f,m,1,5\n"));
    let bad = c.write("bad.csv", &format!("{hdr}r,c1,a.c,f,m,x,1\n"));
    let vh = Vhost::new("edges-status");
    let store_dir = c.path("store");
    std::fs::create_dir_all(&store_dir).unwrap();
    let store = file_store(&store_dir);
    let mut w = fleet_cmd(&["worker", "--amqp", &vh.url, "--store", &store])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(c.path("worker.log")).unwrap(),
        ))
        .spawn()
        .unwrap();
    let src = format!("dir:{}", c.path("src").display());
    let job = format!("edges-status-{}", std::process::id());
    let (code, _, err) = run_in(
        c.dir_path(),
        &[
            "coordinator",
            "--quiet",
            "--amqp",
            &vh.url,
            "--store",
            &store,
            "--job",
            &job,
            "--source",
            &src,
            "--base-repo",
            "r",
            "--base-commit",
            "c1",
            "--shards",
            "2",
            "--out",
            c.path("out.jsonl.gz").to_str().unwrap(),
            "--input",
            good.to_str().unwrap(),
            bad.to_str().unwrap(),
        ],
        &[],
    );
    let _ = w.kill();
    let _ = w.wait();
    assert_ne!(code, Some(0), "a job with a bad row completed:\n{err}");
    let (code, out, err) = run_in(
        c.dir_path(),
        &["status", "--store", &store, "--job", &job, "--json"],
        &[],
    );
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["phase"], "failed", "{v}");
    assert_eq!(v["splits"]["failed"], 1, "{v}");
    assert_eq!(
        v["splits"]["running"], 0,
        "a failed split counted as running: {v}"
    );
    assert_eq!(v["merges"]["running"], 0, "{v}");
    let (_, text, _) = run_in(
        c.dir_path(),
        &["status", "--store", &store, "--job", &job],
        &[],
    );
    assert!(text.contains("0 running, 1 failed"), "{text}");
}

/// `--store` equal to an input prefix was not refused: the second job read the first
/// one's objects as inputs. Now a store equal to, inside or holding an input prefix is
/// refused before any work (no broker is even reached: the one given does not exist).
#[test]
fn store_equal_to_an_input_prefix_was_not_refused() {
    let c = crate::bad_input::Case::new();
    std::fs::create_dir_all(c.path("in")).unwrap();
    c.write(
        "in/a.csv",
        &format!("{}r,c1,a.c,f,m,1,5\n", crate::bad_input::HDR),
    );
    let src = format!("dir:{}", c.path("src").display());
    let inp = format!("file://{}/in/*", c.dir_path().display());
    let cases = [
        (format!("file://{}/in", c.dir_path().display()), inp.clone()),
        (
            format!("file://{}/in/", c.dir_path().display()),
            inp.clone(),
        ),
        (
            format!("file://{}/in/jobs", c.dir_path().display()),
            inp.clone(),
        ),
        (format!("file://{}", c.dir_path().display()), inp.clone()),
        ("s3://bkt/in".to_string(), "s3://bkt/in/*".to_string()),
        ("s3://bkt".to_string(), "s3://bkt/in/".to_string()),
    ];
    let run = |store: &str, input: &str| {
        run_in(
            c.dir_path(),
            &[
                "coordinator",
                "--quiet",
                "--amqp",
                "amqp://guest:guest@127.0.0.1:1/%2f",
                "--broker-outage-budget",
                "1",
                "--store",
                store,
                "--source",
                &src,
                "--base-repo",
                "r",
                "--base-commit",
                "c1",
                "--out",
                c.path("out.jsonl.gz").to_str().unwrap(),
                "--input",
                input,
            ],
            &[],
        )
    };
    for (store, input) in &cases {
        let (code, _, err) = run(store, input);
        assert_eq!(code, Some(1), "--store {store} --input {input}: {err}");
        assert!(
            err.contains("--store") && err.contains("input prefix"),
            "--store {store} --input {input}: {err}"
        );
    }
    // A store beside the inputs passes the check (and fails on the missing broker).
    let apart = format!("file://{}/store", c.dir_path().display());
    let (code, _, err) = run(&apart, &inp);
    assert_ne!(code, Some(0));
    assert!(!err.contains("input prefix"), "{err}");
}

/// `--input-format go-text` on a GOCOVERDIR directory said "no covmeta.* file" of a
/// directory full of them. Now it says what the directory looks like and which
/// format reads it.
#[test]
fn go_text_on_a_covdata_dir_said_no_covmeta_file() {
    let c = crate::bad_input::Case::new();
    std::fs::create_dir_all(c.path("cov")).unwrap();
    c.write("cov/covmeta.0123456789abcdef", "not read");
    let src = format!("dir:{}", c.path("src").display());
    let (code, _, err) = run_in(
        c.dir_path(),
        &[
            "merge",
            "--quiet",
            "--source",
            &src,
            "--base-repo",
            "r",
            "--base-commit",
            "c1",
            "--input-format",
            "go-text",
            "--out",
            c.path("out.jsonl.gz").to_str().unwrap(),
            "--input",
            c.path("cov").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("looks like Go coverage data") && err.contains("go-covdata"),
        "{err}"
    );
    assert!(!err.contains("no covmeta"), "{err}");
}

/// An upload location `http://…` was reported as "not found in gs://http//…". Now it
/// is an unsupported scheme, from `notify --upload` (before any call) and from
/// create_upload_url's answer (before anything is written).
#[test]
fn http_upload_url_was_reported_as_not_found_in_gs() {
    let tmp = tempfile::tempdir().unwrap();
    let dash = Http::start(json_reply("\"http://example.invalid/bkt/x.upload\"".into()));
    let (code, _, err) = run_in(
        tmp.path(),
        &[
            "notify",
            "--dashboard",
            &dash.url,
            "--dashboard-client",
            "ci",
            "--upload",
            "http://example.invalid/bkt/x.upload",
        ],
        &[("COVMERGE_DASHBOARD_KEY", KEY)],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("unsupported scheme http://"), "{err}");
    assert!(!err.contains("gs://http"), "{err}");
    assert_eq!(dash.hits(), 0, "save_coverage was called");
    let (code, err) = merge_to_dashboard(tmp.path(), &dash.url);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("unsupported scheme http://"), "{err}");
    assert!(!err.contains("gs://http"), "{err}");
    assert_eq!(dash.hits(), 1, "save_coverage was called");
}

/// Where the object-name tests put their inputs and results: a directory behind
/// `file://`, a GCS emulator bucket, an S3 server bucket. Objects are written, listed and
/// read with clients independent of covmerge's (the file system, curl).
enum Named {
    File(std::path::PathBuf),
    Gcs(String),
    S3(String),
}

/// Percent-encodes every byte but the unreserved ones (and `/` when `keep_slash`).
fn pct(s: &str, keep_slash: bool) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            b'/' if keep_slash => "/".to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// curl against the S3 server (bounded), asserting success; returns the body.
fn s3_curl(args: &[&str]) -> Vec<u8> {
    let o = Command::new("curl")
        .args(["-fsS", "--max-time", "30"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

impl Named {
    fn url(&self, key: &str) -> String {
        match self {
            Named::File(d) => format!("file://{}/{key}", d.display()),
            Named::Gcs(b) => format!("gs://{b}/{key}"),
            Named::S3(b) => format!("s3://{b}/{key}"),
        }
    }

    fn put(&self, key: &str, file: &Path) {
        match self {
            Named::File(d) => {
                let p = d.join(key);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::copy(file, p).unwrap();
            }
            Named::Gcs(b) => gcs::upload(b, key, file),
            Named::S3(b) => {
                let url = format!(
                    "{}/{b}/{}",
                    covmerge_integration_tests::fleet::s3_endpoint(),
                    pct(key, true)
                );
                s3_curl(&["-T", file.to_str().unwrap(), &url]);
            }
        }
    }

    /// The names of the objects under `dir/`, relative to it, sorted.
    fn list(&self, dir: &str) -> Vec<String> {
        let mut names: Vec<String> = match self {
            Named::File(d) => std::fs::read_dir(d.join(dir))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect(),
            Named::Gcs(b) => gcs::list(b, &format!("{dir}/")),
            Named::S3(b) => {
                let url = format!(
                    "{}/{b}?list-type=2&prefix={}",
                    covmerge_integration_tests::fleet::s3_endpoint(),
                    pct(&format!("{dir}/"), false)
                );
                let xml = String::from_utf8(s3_curl(&[&url])).unwrap();
                xml.split("<Key>")
                    .skip(1)
                    .map(|k| {
                        k.split("</Key>")
                            .next()
                            .unwrap()
                            .replace("&lt;", "<")
                            .replace("&gt;", ">")
                            .replace("&quot;", "\"")
                            .replace("&apos;", "'")
                            .replace("&#39;", "'")
                            .replace("&amp;", "&")
                    })
                    .collect()
            }
        };
        for n in &mut names {
            if let Some(rest) = n.strip_prefix(&format!("{dir}/")) {
                *n = rest.to_string();
            }
        }
        names.sort();
        names
    }

    fn get(&self, key: &str) -> Vec<u8> {
        match self {
            Named::File(d) => std::fs::read(d.join(key)).unwrap(),
            Named::Gcs(b) => gcs::download(b, key),
            Named::S3(b) => s3_curl(&[&format!(
                "{}/{b}/{}",
                covmerge_integration_tests::fleet::s3_endpoint(),
                pct(key, true)
            )]),
        }
    }
}

/// Object names with non-ASCII, spaces, `#`, `?` and `%` were unreadable and written
/// mangled: `gs://inb/s2/*` listed `ü.csv.gz`, then failed "object ü.csv.gz not found"
/// (object_store's `Path::from` percent-escaped the name it was given, so `ü` was
/// asked for as `%C3%BC`); `a#b`, `a?b` and `x%2Fy` the same, a `file://` prefix's
/// names were encoded twice, and `--out "gs://bkt/res ü#1.jsonl.gz"` exited 0 having
/// written `res %C3%BC%231.jsonl.gz` (a URL parser decoded `%`, cut at `#` and `?`).
/// Now, on `file://`, `gs://` and `s3://`, inputs listed from a prefix and inputs given
/// by URL are read by the names listed or given, the result equals the one merged from
/// local files, and the output object has exactly the name given, nothing else beside it.
#[test]
fn object_names_with_non_ascii_hash_question_percent_were_unreadable_and_written_mangled() {
    let tmp = tempfile::tempdir().unwrap();
    let d = fixture("semantics");
    let src = format!("dir:{}", d.join("sources").display());
    let job = |ins: &[String], out: &str, man: &Path| -> Vec<String> {
        let mut a: Vec<String> = [
            "merge",
            "--quiet",
            "--source",
            &src,
            "--base-repo",
            "git://example/linux",
            "--base-commit",
            "base",
            "--date-to",
            "2024-04-08",
            "--out",
            out,
            "--manifest",
            man.to_str().unwrap(),
            "--input",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(ins.iter().cloned());
        a
    };
    // The same merge from the fixture's local files.
    let local_out = tmp.path().join("local.jsonl.gz");
    let ins = [
        d.join("input-a.csv").display().to_string(),
        d.join("input-b.csv.gz").display().to_string(),
    ];
    let a = job(
        &ins,
        local_out.to_str().unwrap(),
        &tmp.path().join("l.json"),
    );
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let (code, _, err) = run_in(tmp.path(), &a, &[]);
    assert_eq!(code, Some(0), "local merge: {err}");
    let want = gunzip(&local_out);

    let creds = gcs::credentials(tmp.path());
    let env = [("GOOGLE_SERVICE_ACCOUNT", creds.to_str().unwrap())];
    let fs_root = tmp.path().join("fs");
    std::fs::create_dir_all(&fs_root).unwrap();
    let stores = [
        Named::File(fs_root),
        Named::Gcs(gcs::bucket("names")),
        Named::S3(covmerge_integration_tests::fleet::bucket("names")),
    ];
    // Each name has characters a URL parser or object_store's escaping changes.
    // (Sorted as listings sort them: by bytes.)
    let names = ["x%2Fy#b%.csv.gz", "ü #a?.csv"];
    let out_name = "res ü#1?%41.jsonl.gz";
    for st in &stores {
        st.put(&format!("in/{}", names[0]), &d.join("input-b.csv.gz"));
        st.put(&format!("in/{}", names[1]), &d.join("input-a.csv"));
        assert_eq!(st.list("in"), names, "the objects were written as named");
        let listed: Vec<String> = names.iter().map(|n| st.url(&format!("in/{n}"))).collect();
        for (how, ins, out_dir) in [
            ("a prefix listing", vec![st.url("in/*")], "out-listed"),
            ("URLs", listed.clone(), "out-direct"),
        ] {
            let what = format!("{} from {how}", st.url(""));
            let out = st.url(&format!("{out_dir}/{out_name}"));
            let man = tmp.path().join("m.json");
            let _ = std::fs::remove_file(&man);
            let a = job(&ins, &out, &man);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            let (code, _, err) = run_in(tmp.path(), &a, &env);
            assert_eq!(code, Some(0), "{what}: {err}");
            let m = covmerge_integration_tests::manifest(&man);
            assert_eq!(m["inputs"], serde_json::json!(listed), "{what}");
            assert_eq!(m["result"], serde_json::json!(out), "{what}");
            assert_eq!(st.list(out_dir), [out_name], "{what}: the result's name");
            let got =
                covmerge_integration_tests::gunzip_bytes(&st.get(&format!("{out_dir}/{out_name}")));
            assert!(
                got == want,
                "{what}: the result differs from the local merge"
            );
        }
    }
}

/// object_store's local store (`file://`) leaves a file whose name ends in `#` and
/// digits (its partial-upload convention) out of a listing and refuses to read or
/// write one: a `file://` prefix holding `part#12` would have been merged without it,
/// and such a `--out` failed only after the merge. Now the listing is refused naming the
/// file, and such a `--out` is refused before any work; a `#` followed by other text
/// is read as any name.
#[test]
fn file_names_ending_in_hash_digits_were_left_out_of_a_listing() {
    let c = crate::bad_input::Case::new();
    let hdr = crate::bad_input::HDR;
    std::fs::create_dir_all(c.path("in/sub")).unwrap();
    c.write("in/a#1x.csv", &format!("{hdr}r,c1,a.c,f,m,1,5\n"));
    c.write("in/sub/part#12", &format!("{hdr}r,c1,a.c,f,m,2,5\n"));
    let src = format!("dir:{}", c.path("src").display());
    let root = c.dir_path().display().to_string();
    let run = |input: &str, out: &str| {
        run_in(
            c.dir_path(),
            &[
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
                "--input",
                input,
            ],
            &[],
        )
    };
    let out = c.path("out.jsonl.gz");
    let out = out.to_str().unwrap();
    let (code, _, err) = run(&format!("file://{root}/in/*"), out);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("sub/part#12") && err.contains("partial upload"),
        "{err}"
    );
    assert!(!Path::new(out).exists(), "a result was written");
    // Given directly, the same file is refused by name, too.
    let (code, _, err) = run(&format!("file://{root}/in/sub/part#12"), out);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("part#12") && err.contains("partial upload"),
        "{err}"
    );
    // A listing without it merges; such an --out is refused before any work.
    let (code, _, err) = run(
        &format!("file://{root}/in/a*"),
        &format!("file://{root}/res#7"),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("res#7") && err.contains("nothing was read or written"),
        "{err}"
    );
    let (code, _, err) = run(
        &format!("file://{root}/in/a*"),
        &format!("file://{root}/res#7b"),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(c.path("res#7b").is_file());
}
