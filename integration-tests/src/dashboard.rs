//! A fake syzkaller dashboard for the tests: `POST /api` with the form fields dashapi
//! sends (`client`, `key`, `method`, `payload` = gzip of the request's JSON; multipart
//! or urlencoded), answering JSON as the real one does:
//! - `create_upload_url` (no payload): a string `<bucket>/<uuid>.upload` in the GCS
//!   emulator (with `gs://` when asked);
//! - `save_coverage` (payload: that string): reads the object back from the emulator,
//!   checks every line against Go's coveragedb field names ([`crate::canon`]) and
//!   answers the number of records after the header, the DB rows it would create.
//!
//! Failures are scripted per method: the first answers are the given HTTP statuses.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use crate::{canon, gcs, gunzip_bytes};

/// One request the dashboard received.
#[derive(Debug, Clone)]
pub struct Call {
    /// The `client` field.
    pub client: String,
    /// The `key` field.
    pub key: String,
    /// The `method` field (`create_upload_url`, `save_coverage`).
    pub method: String,
    /// The decoded JSON request (gunzipped payload), if any.
    pub request: Option<serde_json::Value>,
    /// The HTTP status answered.
    pub status: u16,
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    faults: HashMap<String, Vec<u16>>,
    uploads: Vec<String>,
    /// What save_coverage answered, by upload.
    rows: Vec<(String, i64)>,
}

/// A fake syzkaller dashboard serving `POST /api` on a loopback port, recording every call.
pub struct FakeDashboard {
    /// Its base URL (`http://127.0.0.1:PORT`).
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl FakeDashboard {
    /// Serves on a loopback port until the process ends. `key`: the only key accepted
    /// (others get 403). `bucket`: the emulator bucket for uploads; `gs_prefix`: whether
    /// create_upload_url answers with `gs://`.
    pub fn start(key: &str, bucket: &str, gs_prefix: bool) -> FakeDashboard {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let (st, key, bucket) = (state.clone(), key.to_string(), bucket.to_string());
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                let (st, key, bucket) = (st.clone(), key.clone(), bucket.clone());
                std::thread::spawn(move || serve(s, &st, &key, &bucket, gs_prefix));
            }
        });
        FakeDashboard { url, state }
    }

    /// The next answers to `method` are these statuses (then normal answers). Status 0:
    /// the call is processed as usual, then the connection is closed without a reply
    /// (a reply lost on the way back).
    pub fn fail(&self, method: &str, statuses: &[u16]) {
        self.state
            .lock()
            .unwrap()
            .faults
            .insert(method.to_string(), statuses.to_vec());
    }

    /// Every call received so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// How many calls of `method` were received.
    pub fn calls_of(&self, method: &str) -> usize {
        self.calls().iter().filter(|c| c.method == method).count()
    }

    /// Upload locations handed out, in order.
    pub fn uploads(&self) -> Vec<String> {
        self.state.lock().unwrap().uploads.clone()
    }

    /// (upload, rows) answered by successful save_coverage calls.
    pub fn saved(&self) -> Vec<(String, i64)> {
        self.state.lock().unwrap().rows.clone()
    }
}

/// The fields of a form body, multipart or urlencoded, as dashapi may send either.
fn form_fields(content_type: &str, body: &[u8]) -> HashMap<String, Vec<u8>> {
    let mut out = HashMap::new();
    if let Some(b) = content_type.split("boundary=").nth(1) {
        let delim = format!("--{}", b.trim_matches('"'));
        let d = delim.as_bytes();
        let mut starts = Vec::new();
        let mut i = 0;
        while i + d.len() <= body.len() {
            if &body[i..i + d.len()] == d {
                starts.push(i);
                i += d.len();
            } else {
                i += 1;
            }
        }
        for w in starts.windows(2) {
            let part = &body[w[0] + d.len()..w[1]];
            let Some(h) = part.windows(4).position(|x| x == b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&part[..h]);
            let Some(name) = head
                .split("name=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
            else {
                continue;
            };
            let data = &part[h + 4..];
            let data = data.strip_suffix(b"\r\n").unwrap_or(data);
            out.insert(name.to_string(), data.to_vec());
        }
    } else {
        for kv in body.split(|&c| c == b'&') {
            let s = String::from_utf8_lossy(kv);
            let (k, v) = s.split_once('=').unwrap_or((&s, ""));
            let dec = |x: &str| -> Vec<u8> {
                let x = x.replace('+', " ");
                let b = x.as_bytes();
                let mut o = Vec::new();
                let mut i = 0;
                while i < b.len() {
                    if b[i] == b'%' && i + 2 < b.len() {
                        o.push(u8::from_str_radix(&x[i + 1..i + 3], 16).unwrap());
                        i += 3;
                    } else {
                        o.push(b[i]);
                        i += 1;
                    }
                }
                o
            };
            out.insert(String::from_utf8(dec(k)).unwrap(), dec(v));
        }
    }
    out
}

fn serve(s: TcpStream, st: &Mutex<State>, key: &str, bucket: &str, gs_prefix: bool) {
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut s = s;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let (mut len, mut ctype) = (0usize, String::new());
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            if lower.starts_with("content-type:") {
                ctype = line["content-type:".len()..].trim().to_string();
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
        let f = form_fields(&ctype, &body);
        let text = |k: &str| String::from_utf8_lossy(f.get(k).map_or(&[][..], |v| v)).to_string();
        let request = f.get("payload").map(|p| {
            serde_json::from_slice::<serde_json::Value>(&gunzip_bytes(p)).expect("payload JSON")
        });
        let mut call = Call {
            client: text("client"),
            key: text("key"),
            method: text("method"),
            request,
            status: 200,
        };
        let injected = {
            let mut g = st.lock().unwrap();
            g.faults
                .get_mut(&call.method)
                .and_then(|v| (!v.is_empty()).then(|| v.remove(0)))
        };
        let lose_reply = injected == Some(0);
        let injected = injected.filter(|&c| c != 0);
        let reply: Result<String, (u16, String)> = if let Some(code) = injected {
            Err((code, "injected failure".into()))
        } else if call.key != key {
            Err((403, "unauthorized".into()))
        } else {
            match call.method.as_str() {
                "create_upload_url" => {
                    assert!(call.request.is_none(), "create_upload_url takes no payload");
                    let n = st.lock().unwrap().uploads.len();
                    let name = format!(
                        "{}{bucket}/{:08x}-{n}.upload",
                        if gs_prefix { "gs://" } else { "" },
                        std::process::id()
                    );
                    st.lock().unwrap().uploads.push(name.clone());
                    Ok(serde_json::to_string(&name).unwrap())
                }
                "save_coverage" => {
                    let upload = call
                        .request
                        .as_ref()
                        .and_then(|v| v.as_str())
                        .map(str::to_string);
                    match upload {
                        Some(u) if st.lock().unwrap().uploads.contains(&u) => {
                            let obj = u.trim_start_matches("gs://");
                            let (b, k) = obj.split_once('/').unwrap();
                            let raw = gcs::download(b, k);
                            let tmp = tempfile::NamedTempFile::new().unwrap();
                            std::fs::write(tmp.path(), &raw).unwrap();
                            // Panics (and so the test fails) on any field Go would not read.
                            canon(tmp.path());
                            let rows = String::from_utf8(gunzip_bytes(&raw))
                                .unwrap()
                                .lines()
                                .count() as i64
                                - 1;
                            st.lock().unwrap().rows.push((u.clone(), rows));
                            Ok(rows.to_string())
                        }
                        other => Err((400, format!("unknown upload {other:?}"))),
                    }
                }
                m => Err((400, format!("unknown method {m}"))),
            }
        };
        let (status, body) = match reply {
            Ok(b) => (200, b),
            Err((c, m)) => (c, m),
        };
        call.status = status;
        st.lock().unwrap().calls.push(call);
        if lose_reply {
            let _ = s.shutdown(std::net::Shutdown::Both);
            return;
        }
        let _ = write!(
            s,
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
    }
}
