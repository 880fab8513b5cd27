//! SPEC §8: `save_coverage` is called after the result is written, retried on non-200,
//! and the key never appears in the output.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use covmerge_integration_tests::{bin, fixture};

/// A one-thread HTTP server that answers `statuses` in turn and records request bodies.
fn serve(statuses: Vec<u16>) -> (String, Arc<Mutex<Vec<Vec<u8>>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let b2 = bodies.clone();
    std::thread::spawn(move || {
        for status in statuses {
            let Ok((s, _)) = l.accept() else { return };
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut len = 0usize;
            let mut line = String::new();
            loop {
                line.clear();
                r.read_line(&mut line).unwrap();
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            r.read_exact(&mut body).unwrap();
            b2.lock().unwrap().push(body);
            let mut s = s;
            write!(
                s,
                "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
            .unwrap();
        }
    });
    (url, bodies)
}

fn field<'a>(body: &'a [u8], name: &str) -> &'a [u8] {
    let marker = format!("name=\"{name}\"");
    let start = body
        .windows(marker.len())
        .position(|w| w == marker.as_bytes())
        .expect(name);
    let rest = &body[start..];
    let data = rest.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let rest = &rest[data..];
    let end = rest.windows(4).position(|w| w == b"\r\n--").unwrap();
    &rest[..end]
}

#[test]
fn save_coverage_is_called_with_retries_and_the_key_stays_secret() {
    let (url, bodies) = serve(vec![503, 200]);
    let d = fixture("semantics");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.jsonl.gz");
    let o = std::process::Command::new(bin())
        .args([
            "merge",
            "--quiet",
            "--source",
            &format!("dir:{}", d.join("sources").display()),
        ])
        .args([
            "--base-repo",
            "r",
            "--base-commit",
            "base",
            "--out",
            out.to_str().unwrap(),
        ])
        .args([
            "--dashboard",
            &url,
            "--dashboard-client",
            "ci-covmerge",
            "--input",
        ])
        .arg(d.join("input-a.csv"))
        .env("COVMERGE_DASHBOARD_KEY", "sup3r-s3cret-key")
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        !stderr.contains("sup3r-s3cret-key")
            && !String::from_utf8_lossy(&o.stdout).contains("sup3r")
    );
    let bodies = bodies.lock().unwrap();
    assert_eq!(bodies.len(), 2, "one 503, then a retry");
    let b = &bodies[1];
    assert_eq!(field(b, "client"), b"ci-covmerge");
    assert_eq!(field(b, "key"), b"sup3r-s3cret-key");
    assert_eq!(field(b, "method"), b"save_coverage");
    let mut payload = String::new();
    flate2::read::GzDecoder::new(field(b, "payload"))
        .read_to_string(&mut payload)
        .unwrap();
    let named: String = serde_json::from_str(&payload).unwrap();
    assert_eq!(named, out.display().to_string());
}

#[test]
fn a_dashboard_that_keeps_failing_fails_the_job_but_keeps_the_result() {
    let (url, _) = serve(vec![500; 5]);
    let d = fixture("semantics");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.jsonl.gz");
    let o = std::process::Command::new(bin())
        .args([
            "merge",
            "--quiet",
            "--source",
            &format!("dir:{}", d.join("sources").display()),
        ])
        .args([
            "--base-repo",
            "r",
            "--base-commit",
            "base",
            "--out",
            out.to_str().unwrap(),
        ])
        .args(["--dashboard", &url, "--dashboard-client", "c", "--input"])
        .arg(d.join("input-a.csv"))
        .env("COVMERGE_DASHBOARD_KEY", "k")
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("HTTP 500"));
    assert!(out.is_file(), "the result stays");
}
