//! SPEC §8: `POST URL/api` with multipart fields `client`, `key`, `method=save_coverage`
//! and `payload` = gzip of the JSON string naming the result. The key comes from
//! `COVMERGE_DASHBOARD_KEY` and is never logged; `Debug` hides it.

use std::io::Write;
use std::time::Duration;

use flate2::{write::GzEncoder, Compression};
use tracing::{info, warn};

/// Where and as whom to notify.
#[derive(Clone)]
pub struct Dashboard {
    pub url: String,
    pub client: String,
    key: String,
    pub attempts: u32,
    pub first_backoff: Duration,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("url", &self.url)
            .field("client", &self.client)
            .field("key", &"<redacted>")
            .finish()
    }
}

impl Dashboard {
    pub fn new(url: &str, client: &str, key: String) -> Self {
        Dashboard {
            url: url.trim_end_matches('/').to_string(),
            client: client.to_string(),
            key,
            attempts: 5,
            first_backoff: Duration::from_millis(500),
        }
    }

    /// The payload: gzip of the JSON string `result`.
    pub fn payload(result: &str) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        serde_json::to_writer(&mut enc, result).expect("in-memory write");
        enc.flush().expect("in-memory write");
        enc.finish().expect("in-memory write")
    }

    /// Calls `save_coverage`, retrying non-200 answers and connection errors with
    /// exponential backoff; the last failure is returned.
    pub async fn notify(&self, result: &str) -> Result<(), String> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| e.to_string())?;
        let url = format!("{}/api", self.url);
        let mut wait = self.first_backoff;
        let mut last = String::new();
        for attempt in 1..=self.attempts {
            let form = reqwest::multipart::Form::new()
                .text("client", self.client.clone())
                .text("key", self.key.clone())
                .text("method", "save_coverage")
                .part(
                    "payload",
                    reqwest::multipart::Part::bytes(Self::payload(result)),
                );
            match client.post(&url).multipart(form).send().await {
                Ok(r) if r.status().is_success() => {
                    info!(url = %url, "dashboard notified");
                    return Ok(());
                }
                Ok(r) => last = format!("POST {url}: HTTP {}", r.status()),
                // reqwest errors name the URL, never the form fields.
                Err(e) => last = format!("POST {url}: {e}"),
            }
            warn!(attempt, error = %last, "dashboard call failed");
            if attempt < self.attempts {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        }
        Err(last)
    }
}
