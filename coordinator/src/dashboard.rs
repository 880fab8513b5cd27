//! contract §8: syzkaller's dashboard API as syz-covermerger uses it (dashapi): `POST URL/api`
//! with multipart fields `client`, `key`, `method` and, when the method takes a request,
//! `payload` = gzip of the request's JSON. The reply is JSON.
//!
//! 1. `create_upload_url` (no payload) answers `"<bucket>/<name>.upload"` (with or
//!    without `gs://`): a Google Cloud Storage object.
//! 2. The result is written there (see `job.rs`).
//! 3. `save_coverage` with that same string answers the number of DB rows created.
//!
//! A call is retried as [`RetryPolicy::dashboard`] says on connection errors, 5xx and
//! 429 ([`retryable_http_status`]; contract §8: "not on 4xx other than 429"); any other
//! 4xx, and a reply that is not the JSON expected, is final (a `save_coverage` that was
//! answered must not be sent twice). The key comes from `COVMERGE_DASHBOARD_KEY` and is
//! never logged; `Debug` hides it and errors name the URL and the method only.
//!
//! A call follows no redirect: a 3xx is a final error naming the host it pointed to
//! (a 302 to another host was followed, and that host's answer taken as the
//! upload object). A reply is read as it streams, up to [`MAX_REPLY_BYTES`]; a longer
//! one is a final error once the cap is reached (a 2 GB reply took 4 GB of memory).

use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use covmerge_proto::retry::{retryable_http_status, RetryPolicy, Retryable};
use flate2::{write::GzEncoder, Compression};
use serde::de::DeserializeOwned;
use tracing::{info, warn};

/// The longest reply a dashboard call reads: the replies are a JSON string (an upload
/// object's name) or a number; error bodies past it are cut.
pub const MAX_REPLY_BYTES: usize = 16 << 10;

/// Where and as whom to call.
#[derive(Clone)]
pub struct Dashboard {
    /// The dashboard's base URL (`--dashboard`, no trailing `/`); its API is `URL/api`.
    pub url: String,
    /// `url` without user info or query: what logs and errors show.
    shown: String,
    /// The client name the calls are made as (`--dashboard-client`).
    pub client: String,
    key: String,
    /// How often and how long to wait between attempts.
    pub retry: RetryPolicy,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("url", &self.shown)
            .field("client", &self.client)
            .field("key", &"<redacted>")
            .finish()
    }
}

/// The GCS object URL (`gs://bucket/name`) of an upload location the dashboard gave.
pub fn upload_object_url(upload: &str) -> String {
    format!("gs://{}", upload.trim().trim_start_matches("gs://"))
}

/// Refuses an upload location that is not a GCS object as the dashboard names them,
/// `<bucket>/<name>.upload` (maybe with `gs://`): one with a scheme other than `gs://`
/// (`http://host/b/x.upload` was taken for the bucket `http:` and reported as "not found
/// in gs://http//..."), a bucket name GCS does not allow, credentials, a query, an empty
/// or `..` segment, or a name without `.upload`. The same check covers what
/// `create_upload_url` answers and what `notify --upload` is given.
pub fn check_upload(upload: &str) -> Result<(), String> {
    // Taken as it is: the result is written to the object it names and save_coverage
    // sends it back as it is (the dashboard strips only a lower-case `gs://`), so a
    // location with spaces around it, or `GS://`, would name another object there.
    let u = upload;
    // A URL is shown without credentials; so is a bare `USER:PASS@BUCKET/NAME`.
    let shown = if u.contains("://") {
        covmerge_storage::redact_url(u)
    } else {
        match u.rsplit_once('@') {
            Some((_, after)) => format!("***@{after}"),
            None => u.to_string(),
        }
    };
    let bad = |why: &str| {
        Err(format!(
            "upload location {shown:?}: {why} (the dashboard's uploads are Google Cloud Storage objects: gs://BUCKET/NAME.upload or BUCKET/NAME.upload)"
        ))
    };
    if u.trim() != u {
        return bad("spaces or a line end around it");
    }
    let rest = match u.split_once("://") {
        Some(("gs", rest)) => rest,
        None => u,
        Some((scheme, _)) => return bad(&format!("unsupported scheme {scheme}://")),
    };
    let Some((bucket, name)) = rest.split_once('/') else {
        return bad("names no object (no `/` after the bucket)");
    };
    if let Err(why) = gcs_bucket_name(bucket) {
        return bad(&format!("not a GCS bucket name ({why})"));
    }
    if name.len() > 1024 {
        return bad(&format!(
            "its object name is {} bytes (GCS allows 1,024)",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| c.is_control() || c.is_whitespace() || "?#\\".contains(*c))
    {
        return bad(&format!("its object name holds {c:?}"));
    }
    if name
        .split('/')
        .any(|seg| seg.is_empty() || seg == "." || seg == "..")
    {
        return bad("its object name has an empty, `.` or `..` segment");
    }
    if !name.ends_with(".upload") || name.len() == ".upload".len() {
        return bad("its object name does not end in `.upload`");
    }
    Ok(())
}

/// Whether `b` is a bucket name GCS allows: 3 to 63 characters (222 with dots, each
/// dot-separated part at most 63) of a-z, 0-9, `-`, `_`, `.`, beginning and ending with
/// a letter or digit, no `..`, not an IP address, not beginning with `goog` and not
/// holding `google`.
fn gcs_bucket_name(b: &str) -> Result<(), &'static str> {
    let max = if b.contains('.') { 222 } else { 63 };
    if !(3..=max).contains(&b.len()) {
        return Err("3 to 63 characters, 222 with dots");
    }
    if !b
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"-_.".contains(&c))
    {
        return Err("only a-z, 0-9, `-`, `_` and `.`");
    }
    let alnum = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !alnum(b.bytes().next()) || !alnum(b.bytes().last()) {
        return Err("a letter or digit first and last");
    }
    if b.split('.').any(|p| p.is_empty() || p.len() > 63) {
        return Err("an empty part between dots, or one over 63 characters");
    }
    if b.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err("an IP address");
    }
    if b.starts_with("goog") || b.contains("google") {
        return Err("`goog` first or `google` in it");
    }
    Ok(())
}

impl Dashboard {
    /// The dashboard at `url`, called as `client` with `key` (from `COVMERGE_DASHBOARD_KEY`), with the default retries.
    pub fn new(url: &str, client: &str, key: String) -> Self {
        let url = url.trim_end_matches('/').to_string();
        Dashboard {
            // Without the `/` the URL parser adds after a bare host (`//api` in messages).
            shown: covmerge_storage::redact_url(&url)
                .trim_end_matches('/')
                .to_string(),
            url,
            client: client.to_string(),
            key,
            retry: RetryPolicy::dashboard(),
        }
    }

    /// The payload: gzip of the JSON encoding of `req`.
    pub fn payload<T: serde::Serialize + ?Sized>(req: &T) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        serde_json::to_writer(&mut enc, req).expect("in-memory write");
        enc.flush().expect("in-memory write");
        enc.finish().expect("in-memory write")
    }

    /// Calls `method` and decodes its JSON reply, retrying as the module doc says;
    /// the last failure is returned.
    pub async fn call<R: DeserializeOwned>(
        &self,
        method: &str,
        req: Option<&str>,
    ) -> Result<R, String> {
        self.call_with(method, req, Call::Idempotent).await
    }

    async fn call_with<R: DeserializeOwned>(
        &self,
        method: &str,
        req: Option<&str>,
        kind: Call,
    ) -> Result<R, String> {
        let timeout = match kind {
            Call::Idempotent => Duration::from_secs(120),
            Call::Once => SAVE_TIMEOUT,
        };
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        let one = OneCall {
            dashboard: self,
            client,
            target: format!("{}/api", self.url),
            // What logs and errors name: the URL without its user info.
            url: format!("{}/api", self.shown.trim_end_matches('/')),
            method,
            payload: req.map(Self::payload),
            kind,
            timeout,
        };
        let url = &one.url;
        let tried = AtomicU32::new(1);
        (|| one.attempt::<R>())
            .retry(self.retry.builder())
            .sleep(tokio::time::sleep)
            .when(|e: &CallError| e.retryable)
            .notify(|e, wait| {
                warn!(attempt = tried.load(Ordering::Relaxed), error = %e.msg, ?wait, "dashboard call failed; retrying");
                tried.fetch_add(1, Ordering::Relaxed);
            })
            .await
            .inspect(|_| info!(url = %url, method, "dashboard call done"))
            .map_err(|e| {
                warn!(attempt = tried.load(Ordering::Relaxed), error = %e.msg, "dashboard call failed");
                e.msg
            })
    }

    /// `create_upload_url`: the GCS object to write the result to, as the dashboard
    /// names it (`bucket/name.upload`, maybe with `gs://`).
    pub async fn create_upload_url(&self) -> Result<String, String> {
        let u: String = self.call("create_upload_url", None).await?;
        // The URL is logged and written in the manifest: one naming the key is refused
        // (unshown).
        if names_key(&u, &self.key) {
            return Err(format!(
                "create_upload_url at {}/api: the reply names the dashboard key; refused without showing it",
                self.shown
            ));
        }
        check_upload(&u).map_err(|e| format!("create_upload_url at {}/api: {e}", self.shown))?;
        Ok(u)
    }

    /// `save_coverage` naming `upload` (exactly as `create_upload_url` gave it): the
    /// number of DB rows the dashboard created.
    pub async fn save_coverage(&self, upload: &str) -> Result<i64, String> {
        self.call_with("save_coverage", Some(upload), Call::Once)
            .await
    }
}

/// Whether a call may be sent again after a failure that does not say whether the
/// dashboard processed it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Call {
    /// `create_upload_url`: a second URL costs nothing.
    Idempotent,
    /// `save_coverage`: a second one ingests the result twice.
    Once,
}

/// How long `save_coverage` may take: the dashboard ingests the whole result before it
/// answers, minutes for a quarter.
pub const SAVE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

enum ReadError {
    /// Past [`MAX_REPLY_BYTES`]: what was read up to the cap.
    TooLong(Vec<u8>),
    Http(reqwest::Error),
}

/// The reply's body as it streams, stopping at [`MAX_REPLY_BYTES`] (a declared
/// length past it is refused before any byte is read).
async fn read_capped(mut r: reqwest::Response) -> Result<Vec<u8>, ReadError> {
    if r.content_length()
        .is_some_and(|n| n > MAX_REPLY_BYTES as u64)
    {
        return Err(ReadError::TooLong(Vec::new()));
    }
    let mut b = Vec::new();
    while let Some(c) = r.chunk().await.map_err(ReadError::Http)? {
        if b.len() + c.len() > MAX_REPLY_BYTES {
            let room = MAX_REPLY_BYTES - b.len();
            b.extend_from_slice(&c[..room]);
            return Err(ReadError::TooLong(b));
        }
        b.extend_from_slice(&c);
    }
    Ok(b)
}

/// A reply's body as logs and errors show it: the key removed wherever the dashboard
/// echoed it ([`without_key`]), at most 200 characters, quoted with control
/// characters escaped (a reply cannot forge log lines).
fn shown_reply(body: &[u8], key: &str) -> String {
    // The cut is made before the key is looked for, on a char boundary, and wider than
    // what is shown: a key cut at its end is still found (6 characters of it suffice).
    let text: String = String::from_utf8_lossy(&body[..body.len().min(4096)])
        .chars()
        .take(1024)
        .collect();
    let cut: String = without_key(&unescape_u(&text), key)
        .trim()
        .chars()
        .take(200)
        .collect();
    format!("{cut:?}")
}

/// `text` with JSON's `\uXXXX` escapes decoded (a reply may escape what it echoes).
fn unescape_u(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\\u") {
        out.push_str(&rest[..at]);
        let hex = rest.get(at + 2..at + 6);
        match hex
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .and_then(char::from_u32)
        {
            Some(c) => {
                out.push(c);
                rest = &rest[at + 6..];
            }
            None => {
                out.push_str("\\u");
                rest = &rest[at + 2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Whether `text` names the whole key (any case, JSON escapes decoded).
fn names_key(text: &str, key: &str) -> bool {
    !key.is_empty()
        && unescape_u(text)
            .to_ascii_lowercase()
            .contains(&key.to_ascii_lowercase())
}

/// `text` with every run of characters that appears in `key` (any case: a host name is
/// shown lowercased) and is at least half of it (8 characters at least) replaced by
/// `<redacted>`: the whole key, or most of it after a character told apart; and the
/// start of the key (4 characters or more) where the text ends, cut inside it.
pub(crate) fn without_key(text: &str, key: &str) -> String {
    if key.is_empty() {
        return text.to_owned();
    }
    let (t, k) = (text.to_ascii_lowercase(), key.to_ascii_lowercase());
    let (t, k) = (t.as_bytes(), k.as_bytes());
    let least = (k.len() / 2).max(8).min(k.len());
    let mut hide = vec![false; t.len()];
    // A text cut inside the key ends with its start: hidden from 4 characters on.
    if let Some(n) = (4..k.len().min(t.len()) + 1)
        .rev()
        .find(|&n| t.ends_with(&k[..n]))
    {
        let len = t.len();
        hide[len - n..].iter_mut().for_each(|h| *h = true);
    }
    for i in 0..t.len() {
        for j in 0..k.len() {
            let n = t[i..]
                .iter()
                .zip(&k[j..])
                .take_while(|(a, b)| a == b)
                .count();
            if n >= least {
                hide[i..i + n].iter_mut().for_each(|h| *h = true);
            }
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut hiding = false;
    for (at, c) in text.char_indices() {
        if hide[at] {
            if !hiding {
                out.push_str("<redacted>");
            }
            hiding = true;
        } else {
            hiding = false;
            out.push(c);
        }
    }
    out
}

/// One dashboard call, attempted as often as its retries allow.
struct OneCall<'a> {
    dashboard: &'a Dashboard,
    client: reqwest::Client,
    /// The URL called.
    target: String,
    /// The URL as logs and errors name it (no user info).
    url: String,
    method: &'a str,
    payload: Option<Vec<u8>>,
    kind: Call,
    timeout: Duration,
}

impl OneCall<'_> {
    /// One attempt: sends the call and decodes its JSON reply.
    async fn attempt<R: DeserializeOwned>(&self) -> Result<R, CallError> {
        let (method, url) = (self.method, &self.url);
        let r = self.send().await?;
        let s = r.status();
        if s.is_redirection() {
            return Err(self.redirected(&r));
        }
        if !s.is_success() {
            let body = match read_capped(r).await {
                Ok(b) | Err(ReadError::TooLong(b)) => b,
                Err(ReadError::Http(_)) => Vec::new(),
            };
            let body = shown_reply(&body, &self.dashboard.key);
            let msg = format!("{method} at {url}: HTTP {s}: {body}");
            return Err(CallError {
                msg,
                retryable: retryable_http_status(s.as_u16()),
            });
        }
        let b = read_capped(r).await.map_err(|e| match e {
            ReadError::TooLong(_) => CallError {
                msg: format!(
                    "{method} at {url}: the reply is longer than {MAX_REPLY_BYTES} bytes, more than any dashboard answer: not read further"
                ),
                retryable: false,
            },
            ReadError::Http(e) => CallError {
                msg: format!(
                    "{method} at {url}: reading the reply: {}",
                    e.without_url()
                ),
                retryable: self.kind == Call::Idempotent,
            },
        })?;
        serde_json::from_slice::<R>(&b).map_err(|e| CallError {
            msg: format!(
                "{method} at {url}: unexpected reply {}: {e}",
                shown_reply(&b, &self.dashboard.key)
            ),
            retryable: false,
        })
    }

    /// Posts the call's form; its reply, or why none came.
    async fn send(&self) -> Result<reqwest::Response, CallError> {
        let (method, url) = (self.method, &self.url);
        let mut form = reqwest::multipart::Form::new()
            .text("client", self.dashboard.client.clone())
            .text("key", self.dashboard.key.clone())
            .text("method", method.to_string());
        if let Some(p) = &self.payload {
            form = form.part("payload", reqwest::multipart::Part::bytes(p.clone()));
        }
        match self.client.post(&self.target).multipart(form).send().await {
            Ok(r) => Ok(r),
            // A call that must not run twice is sent again only if it surely did
            // not reach the dashboard: a timeout or a connection lost after the
            // request may have been processed (a save_coverage taking more than
            // the timeout was sent twice and ingested twice).
            Err(e) if self.kind == Call::Once && !e.is_connect() => {
                let what = if e.is_timeout() {
                    format!("no reply within {} s", self.timeout.as_secs())
                } else {
                    e.without_url().to_string()
                };
                Err(CallError {
                    msg: format!(
                        "{method} at {url}: {what}; it may have been processed: check the dashboard before sending it again"
                    ),
                    retryable: false,
                })
            }
            // reqwest errors name the URL with its user info: drop it.
            Err(e) => Err(CallError::retry(format!(
                "{method} at {url}: {}",
                e.without_url()
            ))),
        }
    }

    /// The error of a reply that redirects: dashboard calls follow none.
    fn redirected(&self, r: &reqwest::Response) -> CallError {
        let (method, url, s) = (self.method, &self.url, r.status());
        // Named by its host only: the rest of the location may carry tokens.
        let host = r
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .and_then(|l| r.url().join(l).ok())
            .and_then(|u| u.host_str().map(str::to_string));
        let to = match host {
            Some(h) => format!("redirects to host {}", without_key(&h, &self.dashboard.key)),
            None => "redirects without a usable location".to_string(),
        };
        CallError {
            msg: format!(
                "{method} at {url}: HTTP {s}: the reply {to}; dashboard calls follow no redirect (give the dashboard's own URL)"
            ),
            retryable: false,
        }
    }
}

/// One failed attempt of a dashboard call.
struct CallError {
    msg: String,
    retryable: bool,
}

impl CallError {
    fn retry(msg: String) -> Self {
        CallError {
            msg,
            retryable: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::shown_reply;

    /// A location with spaces or a line end around it was checked and written trimmed,
    /// and sent untrimmed to save_coverage (another object for the dashboard); one of
    /// `GS://` passed the check and was written to a bucket named `GS:`. Both are
    /// refused before any write; the locations the dashboard gives are taken.
    #[test]
    fn an_upload_location_was_checked_otherwise_than_it_was_used() {
        use super::check_upload;
        for bad in [
            " bkt/a.upload",
            "bkt/b.upload\n",
            "gs://bkt/c.upload ",
            "GS://bkt/c.upload",
            "Gs://bkt/c.upload",
        ] {
            assert!(check_upload(bad).is_err(), "{bad:?} taken");
        }
        for good in ["gs://bkt/c.upload", "bkt/dir/c.upload"] {
            assert!(check_upload(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn a_reply_that_echoes_the_key_does_not_leak_it() {
        let key = "s3cr3t-dashboard-key-0123456789";
        let body = format!("bad request: key={key} client=ci\n");
        let shown = shown_reply(body.as_bytes(), key);
        assert!(
            !shown.contains(key) && shown.contains("<redacted>"),
            "{shown}"
        );
        // Cut at the cap inside the key: the start of the key is not shown either.
        let cut = format!("denied for {}", &key[..12]);
        let shown = shown_reply(cut.as_bytes(), key);
        assert!(!shown.contains(&key[..12]), "{shown}");
        // Escaped in JSON, or lowercased in a host name: still not shown.
        let escaped = format!("{{\"key\":\"\\u0073{}\"}}", &key[1..]);
        assert!(!shown_reply(escaped.as_bytes(), key).contains(&key[1..]));
        let all: String = key
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        assert!(!shown_reply(all.as_bytes(), key).contains(&key[4..]));
        // A word the key shares with a bucket name is no echo of the key.
        assert!(!super::names_key(
            "gs://syzbot-coverage/x.upload",
            "syzbot-dashkey-Q1"
        ));
        assert!(super::names_key(
            "gs://b/SYZBOT-DASHKEY-q1.upload",
            "syzbot-dashkey-Q1"
        ));
        let host = format!("http://{}/x.upload", key.to_ascii_uppercase());
        assert!(!shown_reply(host.as_bytes(), key)
            .to_ascii_lowercase()
            .contains(&key[2..]));
        // A forged log line stays inside the quotes, and the text is capped.
        let shown = shown_reply(b"x\nERROR fake line", key);
        assert!(!shown.contains('\n') && shown.contains("\\n"), "{shown}");
        assert!(shown_reply(&[b'a'; 5000], key).len() < 210);
    }
}
