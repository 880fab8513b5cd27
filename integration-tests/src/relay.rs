//! A TCP relay to cut a service off for a while: processes connect to the relay, the
//! relay forwards to the real RabbitMQ or S3 server. [`Relay::cut`] closes every
//! connection through it and refuses new ones (each is accepted and closed at once,
//! as a restarting broker or an unreachable endpoint does) until [`Relay::restore`].
//!
//! In front of an HTTP store it also plays a distant bucket: [`Relay::set_latency`]
//! holds each request for that long before forwarding it, and [`Relay::requests`]
//! counts the requests that went through, by method and kind of object.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running relay; stops accepting when dropped.
pub struct Relay {
    addr: SocketAddr,
    up: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    /// Connections accepted while the relay was cut.
    pub refused: Arc<AtomicU64>,
    http: Arc<Http>,
}

/// What the relay does to HTTP requests: the latency it adds, the requests it saw.
#[derive(Default)]
struct Http {
    latency_us: AtomicU64,
    requests: Mutex<BTreeMap<String, u64>>,
    /// `Some((relay, upstream))`: a request's `Host: relay` header is forwarded as
    /// `Host: upstream` (fake-gcs-server answers only for its own public host).
    host: Mutex<Option<(String, String)>>,
    /// Every request forwarded: when, and its request line.
    timeline: Mutex<Vec<(std::time::Instant, String)>>,
    /// Bytes forwarded to the upstream (requests and their bodies) and back (replies).
    bytes: [AtomicU64; 2],
}

/// The kind of a request of covmerge's store layout, from its request line:
/// `GET spill` (a chunk), `PUT part`, `LIST`, ...
fn request_kind(line: &str) -> String {
    let mut it = line.split(' ');
    let method = it.next().unwrap_or("");
    // GCS's XML API escapes `.` too (`x%2Edone`).
    let target = it
        .next()
        .unwrap_or("")
        .replace("%2F", "/")
        .replace("%2f", "/")
        .replace("%2E", ".")
        .replace("%2e", ".");
    let target = target.as_str();
    if target.contains("list-type=2") || (method == "GET" && target.contains("prefix=")) {
        return "LIST".into();
    }
    let kind = if target.contains("/spill/") {
        "spill"
    } else if target.contains(".done") {
        "marker"
    } else if target.contains("/parts/") {
        "part"
    } else if target.contains("attempts") {
        "attempt"
    } else if target.contains("lease.json") {
        "lease"
    } else if target.contains("job.json") {
        "job"
    } else {
        "other"
    };
    format!("{method} {kind}")
}

impl Relay {
    /// Listens on a free port of 127.0.0.1 and forwards to `upstream` (`host:port`).
    pub fn start(upstream: &str) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let up = Arc::new(AtomicBool::new(true));
        let stop = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let refused = Arc::new(AtomicU64::new(0));
        let http = Arc::new(Http::default());
        let upstream = upstream.to_string();
        let (u, s, c, r) = (up.clone(), stop.clone(), conns.clone(), refused.clone());
        let h = http.clone();
        std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                let client = match listener.accept() {
                    Ok((client, _)) => client,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                    Err(_) => continue,
                };
                client.set_nonblocking(false).unwrap();
                if !u.load(Ordering::SeqCst) {
                    r.fetch_add(1, Ordering::SeqCst);
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                {
                    let mut all = c.lock().unwrap();
                    all.push(client.try_clone().unwrap());
                    all.push(server.try_clone().unwrap());
                }
                pipe(
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    Some(h.clone()),
                );
                pipe_counted(server, client, None, Some(h.clone()));
            }
        });
        Relay {
            addr,
            up,
            stop,
            conns,
            refused,
            http,
        }
    }

    /// Holds each HTTP request for `latency` before forwarding it (a store that far
    /// away, one way; the reply is not delayed again).
    pub fn set_latency(&self, latency: Duration) {
        self.http
            .latency_us
            .store(latency.as_micros() as u64, Ordering::SeqCst);
    }

    /// Forwards requests with the upstream's `Host` header instead of the relay's (a
    /// server that routes by its public host, as fake-gcs-server's XML API does).
    /// Not for signed requests (S3's signature covers the host).
    pub fn rewrite_host(&self, upstream: &str) {
        *self.http.host.lock().unwrap() = Some((self.addr.to_string(), upstream.to_string()));
    }

    /// The HTTP requests forwarded so far, by method and kind (see `request_kind`).
    pub fn requests(&self) -> BTreeMap<String, u64> {
        self.http.requests.lock().unwrap().clone()
    }

    /// Every request forwarded so far: when, and its request line (in order).
    pub fn timeline(&self) -> Vec<(std::time::Instant, String)> {
        self.http.timeline.lock().unwrap().clone()
    }

    /// Bytes forwarded so far: (to the upstream, back from it), headers included.
    pub fn bytes(&self) -> (u64, u64) {
        (
            self.http.bytes[0].load(Ordering::Relaxed),
            self.http.bytes[1].load(Ordering::Relaxed),
        )
    }

    /// The relay's `host:port`.
    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    /// Closes every connection through the relay and refuses new ones.
    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for s in self.conns.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Forwards new connections again.
    pub fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.cut();
    }
}

/// Copies `from` to `to` on a thread until either side closes. With `http`, a read
/// that starts with an HTTP request line is counted and held for the latency first.
fn pipe(from: TcpStream, to: TcpStream, http: Option<Arc<Http>>) {
    let up = http.clone();
    pipe_counted(from, to, http, up)
}

/// [`pipe`], adding the bytes copied to `counted`'s count of bytes up (with `http`)
/// or down (without).
fn pipe_counted(
    mut from: TcpStream,
    mut to: TcpStream,
    http: Option<Arc<Http>>,
    counted: Option<Arc<Http>>,
) {
    let direction = usize::from(http.is_none());
    std::thread::spawn(move || {
        let mut buf = [0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if let Some(c) = &counted {
                        c.bytes[direction].fetch_add(n as u64, Ordering::Relaxed);
                    }
                    if let Some(h) = &http {
                        let head = &buf[..n.min(2048)];
                        let line = head.split(|&b| b == b'\r').next().unwrap_or(&[]);
                        let line = String::from_utf8_lossy(line);
                        let method = line.split(' ').next().unwrap_or("");
                        if ["GET", "PUT", "POST", "HEAD", "DELETE", "PATCH"].contains(&method)
                            && line.ends_with("HTTP/1.1")
                        {
                            *h.requests
                                .lock()
                                .unwrap()
                                .entry(request_kind(&line))
                                .or_insert(0) += 1;
                            h.timeline
                                .lock()
                                .unwrap()
                                .push((std::time::Instant::now(), line.to_string()));
                            let us = h.latency_us.load(Ordering::SeqCst);
                            if us > 0 {
                                std::thread::sleep(Duration::from_micros(us));
                            }
                        }
                    }
                    let rewritten = http.as_ref().and_then(|h| {
                        let host = h.host.lock().unwrap();
                        let (relay, upstream) = host.as_ref()?;
                        let head = &buf[..n.min(8192)];
                        let from = format!("\r\nHost: {relay}\r\n");
                        let at = head
                            .windows(from.len())
                            .position(|w| w.eq_ignore_ascii_case(from.as_bytes()))?;
                        let mut out = buf[..at].to_vec();
                        out.extend_from_slice(format!("\r\nHost: {upstream}\r\n").as_bytes());
                        out.extend_from_slice(&buf[at + from.len()..n]);
                        Some(out)
                    });
                    let sent = match &rewritten {
                        Some(b) => to.write_all(b),
                        None => to.write_all(&buf[..n]),
                    };
                    if sent.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}
