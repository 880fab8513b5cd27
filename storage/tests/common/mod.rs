//! Scripted stores for the storage tests: an HTTP/1.1 server whose answer to each
//! request is chosen by the test, and the environment that points S3 and GCS at it.

#![allow(dead_code)] // each test binary uses a part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;

/// Serves on a loopback port: each request (keep-alive connections included) is
/// answered `answer(request line)` = (status line, body). Returns `http://host:port`.
pub(crate) fn http_server(
    answer: impl Fn(&str) -> (&'static str, String) + Send + Sync + 'static,
) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(c) = c else { continue };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(c);
                loop {
                    let mut request = String::new();
                    if r.read_line(&mut request).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut len = 0usize;
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0u8; len];
                    if r.read_exact(&mut body).is_err() {
                        return;
                    }
                    let (status, text) = answer(&request);
                    let reply = format!(
                        "HTTP/1.1 {status}\r\nETag: \"e1\"\r\nContent-Length: {}\r\n\r\n{text}",
                        text.len()
                    );
                    if r.get_mut().write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

/// Points S3 (`AWS_*`) and GCS (a service-account file in `dir` with `gcs_base_url`)
/// at `endpoint`. Call before any other thread starts: it sets the environment.
pub(crate) fn point_stores_at(endpoint: &str, dir: &Path) {
    let creds = dir.join("sa.json");
    std::fs::write(
        &creds,
        format!(
            r#"{{"gcs_base_url":"{endpoint}","disable_oauth":true,"client_email":"","private_key":"","private_key_id":""}}"#
        ),
    )
    .unwrap();
    // Edition 2021, and no other thread reads the environment yet.
    std::env::set_var("GOOGLE_SERVICE_ACCOUNT", &creds);
    std::env::set_var("AWS_ENDPOINT_URL", endpoint);
    std::env::set_var("AWS_ALLOW_HTTP", "true");
    std::env::set_var("AWS_REGION", "us-east-1");
    std::env::set_var("AWS_ACCESS_KEY_ID", "AKIAUNKNOWN");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "s");
}
