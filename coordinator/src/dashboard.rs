//! SPEC §8: syzkaller's dashboard API as syz-covermerger uses it (dashapi): `POST URL/api`
//! with multipart fields `client`, `key`, `method` and, when the method takes a request,
//! `payload` = gzip of the request's JSON. The reply is JSON.
//!
//! 1. `create_upload_url` (no payload) answers `"<bucket>/<name>.upload"` (with or
//!    without `gs://`): a Google Cloud Storage object.
//! 2. The result is written there (see `job.rs`).
//! 3. `save_coverage` with that same string answers the number of DB rows created.
//!
//! A call is retried with exponential backoff on connection errors, 5xx and 429; any
//! other 4xx is final. The key comes from `COVMERGE_DASHBOARD_KEY` and is never logged;
//! `Debug` hides it and errors name the URL and the method only.

use std::io::Write;
use std::time::Duration;

use flate2::{write::GzEncoder, Compression};
use serde::de::DeserializeOwned;
use tracing::{info, warn};

/// Where and as whom to call.
#[derive(Clone)]
pub struct Dashboard {
    pub url: String,
    /// `url` without user info or query: what logs and errors show.
    shown: String,
    pub client: String,
    key: String,
    pub attempts: u32,
    pub first_backoff: Duration,
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

impl Dashboard {
    pub fn new(url: &str, client: &str, key: String) -> Self {
        let url = url.trim_end_matches('/').to_string();
        Dashboard {
            shown: covmerge_storage::redact_url(&url),
            url,
            client: client.to_string(),
            key,
            attempts: 5,
            first_backoff: Duration::from_millis(500),
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
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| e.to_string())?;
        let target = format!("{}/api", self.url);
        // What logs and errors name: the URL without its user info.
        let url = format!("{}/api", self.shown.trim_end_matches('/'));
        let mut wait = self.first_backoff;
        let mut last = String::new();
        for attempt in 1..=self.attempts {
            let mut form = reqwest::multipart::Form::new()
                .text("client", self.client.clone())
                .text("key", self.key.clone())
                .text("method", method.to_string());
            if let Some(r) = req {
                form = form.part("payload", reqwest::multipart::Part::bytes(Self::payload(r)));
            }
            let retry = match client.post(&target).multipart(form).send().await {
                Ok(r) if r.status().is_success() => {
                    let body = r
                        .bytes()
                        .await
                        .map_err(|e| format!("{method} at {url}: reading the reply: {e}"));
                    match body.and_then(|b| {
                        serde_json::from_slice::<R>(&b).map_err(|e| {
                            format!(
                                "{method} at {url}: unexpected reply {:?}: {e}",
                                String::from_utf8_lossy(&b[..b.len().min(200)])
                            )
                        })
                    }) {
                        Ok(v) => {
                            info!(url = %url, method, "dashboard call done");
                            return Ok(v);
                        }
                        Err(e) => {
                            last = e;
                            true
                        }
                    }
                }
                Ok(r) => {
                    let s = r.status();
                    let body = r.text().await.unwrap_or_default();
                    let body: String = body.trim().chars().take(200).collect();
                    last = format!("{method} at {url}: HTTP {s}: {body}");
                    s.is_server_error() || s == reqwest::StatusCode::TOO_MANY_REQUESTS
                }
                // reqwest errors name the URL with its user info: drop it.
                Err(e) => {
                    last = format!("{method} at {url}: {}", e.without_url());
                    true
                }
            };
            warn!(attempt, error = %last, "dashboard call failed");
            if !retry {
                break;
            }
            if attempt < self.attempts {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        }
        Err(last)
    }

    /// `create_upload_url`: the GCS object to write the result to, as the dashboard
    /// names it (`bucket/name.upload`, maybe with `gs://`).
    pub async fn create_upload_url(&self) -> Result<String, String> {
        let u: String = self.call("create_upload_url", None).await?;
        if u.trim()
            .trim_start_matches("gs://")
            .split_once('/')
            .is_none()
        {
            return Err(format!(
                "create_upload_url at {}/api: {u:?} names no GCS object",
                self.shown
            ));
        }
        Ok(u)
    }

    /// `save_coverage` naming `upload` (exactly as `create_upload_url` gave it): the
    /// number of DB rows the dashboard created.
    pub async fn save_coverage(&self, upload: &str) -> Result<i64, String> {
        self.call("save_coverage", Some(upload)).await
    }
}
