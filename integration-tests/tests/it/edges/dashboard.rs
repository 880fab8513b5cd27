//! The dashboard's HTTP: no redirects, replies capped, upload URLs checked.

use super::*;

/// A loopback HTTP server: reads each request (head, and a body of its
/// Content-Length), counts it, and lets `answer` write the reply; one request per
/// connection.
pub(super) struct Http {
    /// `http://127.0.0.1:PORT`.
    pub(super) url: String,
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Http {
    pub(super) fn start(answer: impl Fn(&mut TcpStream) + Send + Sync + 'static) -> Http {
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

    pub(super) fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// Answers 200 with a JSON body.
pub(super) fn json_reply(body: String) -> impl Fn(&mut TcpStream) + Send + Sync + 'static {
    move |s: &mut TcpStream| {
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    }
}

pub(super) const KEY: &str = "edges-s3cret-dashboard-key";

/// `merge --dashboard URL` on the semantics fixture, run in `tmp` with the GCS
/// emulator's credentials (bounded); returns (exit code, stderr).
pub(super) fn merge_to_dashboard(tmp: &Path, url: &str) -> (Option<i32>, String) {
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
pub(super) fn dashboard_redirect_to_another_host_was_followed() {
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
pub(super) fn wait_rss(child: Child, limit: Duration, what: &str) -> (i32, i64) {
    let pid = child.id() as libc::pid_t;
    let t0 = Instant::now();
    // The child's own high-water mark, read while it runs: `wait4`'s `ru_maxrss` of a
    // child spawned by vfork counts the high-water mark of this test process at the
    // spawn (Linux carries the old address space's over `exec`), so a test process
    // grown by other tests reported 410 MB for a merge that used 30.
    let hwm = || -> Option<i64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    let mut peak = 0i64;
    loop {
        if let Some(kb) = hwm() {
            peak = peak.max(kb);
        }
        let mut status = 0;
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            assert!(libc::WIFEXITED(status), "{what}: killed by a signal");
            assert!(peak > 0, "{what}: no /proc reading of its memory");
            return (libc::WEXITSTATUS(status), peak);
        }
        if t0.elapsed() > limit {
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::wait4(pid, &mut status, 0, &mut ru);
            }
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A dashboard answering create_upload_url with an endless body: covmerge held it
/// all in memory (a 2 GB reply took 4.1 GB). Now the reply is cut at its cap: the job
/// fails quickly with a clear error, having read little, in little memory.
#[test]
pub(super) fn dashboard_reply_without_end_took_all_memory() {
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

/// An upload location `http://…` was reported as "not found in gs://http//…". Now it
/// is an unsupported scheme, from `notify --upload` (before any call) and from
/// create_upload_url's answer (before anything is written).
#[test]
pub(super) fn http_upload_url_was_reported_as_not_found_in_gs() {
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
