//! `gs://bucket/prefix`: Google Cloud Storage.
//!
//! Reads, heads and listings go through object_store's `gcp` client (GCS's XML API).
//! Writes and deletes go through GCS's JSON API — a media upload for whole objects and a
//! resumable upload for streamed ones — which is what Google's Go client, and so
//! syz-covermerger, uses. Both APIs are GCS's own; the JSON write path is also the one
//! fake-gcs-server (the emulator the tests run against) implements: it has no XML
//! object or multipart upload. A resumable upload becomes visible only when its last
//! chunk is sent, so a streamed result still appears whole or not at all.
//!
//! Credentials and endpoint come from object_store's environment (`GOOGLE_SERVICE_ACCOUNT`,
//! `GOOGLE_SERVICE_ACCOUNT_KEY`, `GOOGLE_APPLICATION_CREDENTIALS`, the metadata server).
//! A service-account file with `"gcs_base_url"` and `"disable_oauth": true` points both
//! APIs at an emulator, as object_store's own CI does.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use covmerge_proto::retry::{retryable_http_status, RetryPolicy, Retryable};
use futures::future::{BoxFuture, FutureExt, Shared};
use futures::stream::{BoxStream, StreamExt};
use object_store::gcp::{GcpCredentialProvider, GoogleCloudStorage, GoogleCloudStorageBuilder};
use object_store::path::Path;
use object_store::{
    ClientOptions, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, UploadPart,
};

/// Why one attempt of a JSON API request did not give an answer to return.
enum SendFailure {
    /// An answer with a status worth another try (kept: the last one is returned).
    Status(reqwest::Response),
    /// No answer (connection, timeout) or a request that could not be built.
    Http(reqwest::Error),
    /// No credentials: not retried here.
    Auth(object_store::Error),
}

const DEFAULT_BASE_URL: &str = "https://storage.googleapis.com";
/// Resumable upload chunks must be multiples of 256 KiB (all but the last).
const CHUNK_ALIGN: usize = 256 << 10;
const STORE: &str = "GCS";

/// The `gcs_base_url` of the service-account file or key object_store would use.
fn base_url_from_env() -> Option<String> {
    let json = if let Ok(k) = std::env::var("GOOGLE_SERVICE_ACCOUNT_KEY") {
        k
    } else {
        let path = [
            "GOOGLE_SERVICE_ACCOUNT",
            "GOOGLE_SERVICE_ACCOUNT_PATH",
            "SERVICE_ACCOUNT",
        ]
        .iter()
        .find_map(|v| std::env::var(v).ok())?;
        std::fs::read_to_string(path).ok()?
    };
    let v: serde_json::Value = serde_json::from_str(&json).ok()?;
    v.get("gcs_base_url")?.as_str().map(str::to_string)
}

/// The JSON API side: where to send writes and as whom.
#[derive(Debug)]
struct JsonApi {
    http: reqwest::Client,
    base: String,
    bucket: String,
    creds: GcpCredentialProvider,
}

/// A JSON API answer that is not a success, keeping its status, so that a refusal
/// (400, 405, 411, 413...) is told from an outage ([`crate::StoreError::is_transient`]).
#[derive(Debug)]
pub(crate) struct HttpStatus {
    pub(crate) status: u16,
    message: String,
}

impl std::fmt::Display for HttpStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HttpStatus {}

fn generic(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> object_store::Error {
    object_store::Error::Generic {
        store: STORE,
        source: e.into(),
    }
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

impl JsonApi {
    async fn auth(
        &self,
        r: reqwest::RequestBuilder,
    ) -> object_store::Result<reqwest::RequestBuilder> {
        let c = self.creds.get_credential().await?;
        Ok(if c.bearer.is_empty() {
            r
        } else {
            r.bearer_auth(&c.bearer)
        })
    }

    /// Sends a request built by `make`, retrying connection errors (not timeouts) and
    /// the statuses of [`retryable_http_status`] as [`RetryPolicy::gcs_request`] says. The last
    /// answer is returned whatever its status ([`Gcs::check`] judges it).
    async fn send(
        &self,
        what: &str,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> object_store::Result<reqwest::Response> {
        let make = &make;
        let attempt = || async move {
            let r = self
                .auth(make())
                .await
                .map_err(SendFailure::Auth)?
                .send()
                .await;
            match r {
                Ok(resp) if retryable_http_status(resp.status().as_u16()) => {
                    Err(SendFailure::Status(resp))
                }
                Ok(resp) => Ok(resp),
                Err(e) => Err(SendFailure::Http(e)),
            }
        };
        let res = attempt
            .retry(RetryPolicy::gcs_request().builder())
            .sleep(tokio::time::sleep)
            // Quick failures (5xx, 429, a refused or reset connection) are retried
            // here, a few times within a second, so that one resumable chunk does not
            // restart a whole upload; silence (a timeout) goes to the store
            // operation's one budget (`Store::retrying`), so that no request waits
            // out several timeouts inside one attempt.
            .when(|f| match f {
                SendFailure::Status(_) => true,
                SendFailure::Http(e) => !e.is_builder() && !e.is_timeout(),
                SendFailure::Auth(_) => false,
            })
            .await;
        match res {
            Ok(resp) | Err(SendFailure::Status(resp)) => Ok(resp),
            Err(SendFailure::Http(e)) => Err(generic(format!("{what}: {e}"))),
            Err(SendFailure::Auth(e)) => Err(e),
        }
    }

    async fn check(
        what: &str,
        resp: reqwest::Response,
        path: &Path,
    ) -> object_store::Result<reqwest::Response> {
        let s = resp.status();
        if s.is_success() || s.as_u16() == 308 {
            return Ok(resp);
        }
        let body = resp.text().await.unwrap_or_default();
        let msg = format!("{what} {path}: HTTP {s}: {}", body.trim());
        Err(match s.as_u16() {
            404 => object_store::Error::NotFound {
                path: path.to_string(),
                source: msg.into(),
            },
            401 => object_store::Error::Unauthenticated {
                path: path.to_string(),
                source: msg.into(),
            },
            403 => object_store::Error::PermissionDenied {
                path: path.to_string(),
                source: msg.into(),
            },
            status => generic(HttpStatus {
                status,
                message: msg,
            }),
        })
    }

    fn upload_url(&self, kind: &str, path: &Path) -> String {
        format!(
            "{}/upload/storage/v1/b/{}/o?uploadType={kind}&name={}",
            self.base,
            enc(&self.bucket),
            enc(path.as_ref())
        )
    }

    /// A media upload; `if_generation` makes it conditional (`0`: only if absent).
    /// Returns the new object's generation when the reply names it.
    async fn put(
        &self,
        path: &Path,
        data: Bytes,
        if_generation: Option<&str>,
    ) -> object_store::Result<Option<String>> {
        let mut url = self.upload_url("media", path);
        if let Some(g) = if_generation {
            url.push_str(&format!("&ifGenerationMatch={}", enc(g)));
        }
        let resp = self
            .send("upload", || {
                self.http
                    .post(&url)
                    .header("content-type", "application/octet-stream")
                    .body(data.clone())
            })
            .await?;
        if resp.status().as_u16() == 412 {
            let msg = format!("upload {path}: HTTP 412: the object changed");
            return Err(if if_generation == Some("0") {
                object_store::Error::AlreadyExists {
                    path: path.to_string(),
                    source: msg.into(),
                }
            } else {
                object_store::Error::Precondition {
                    path: path.to_string(),
                    source: msg.into(),
                }
            });
        }
        let resp = Self::check("upload", resp, path).await?;
        let body = resp.bytes().await.unwrap_or_default();
        let meta: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        Ok(match &meta["generation"] {
            serde_json::Value::String(g) => Some(g.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
    }

    async fn delete(&self, path: &Path) -> object_store::Result<()> {
        let url = format!(
            "{}/storage/v1/b/{}/o/{}",
            self.base,
            enc(&self.bucket),
            enc(path.as_ref())
        );
        let resp = self.send("delete", || self.http.delete(&url)).await?;
        match Self::check("delete", resp, path).await {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Starts a resumable upload session; returns its URL.
    async fn start(&self, path: &Path) -> object_store::Result<String> {
        let url = self.upload_url("resumable", path);
        let resp = self
            .send("start upload", || {
                self.http
                    .post(&url)
                    .header("content-type", "application/json")
                    .body("{}")
            })
            .await?;
        let resp = Self::check("start upload", resp, path).await?;
        resp.headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| generic(format!("start upload {path}: no session URL in the reply")))
    }

    /// Sends `data` at `offset` of a session; `total` only with the last chunk.
    async fn chunk(
        &self,
        session: &str,
        path: &Path,
        offset: u64,
        data: Bytes,
        total: Option<u64>,
    ) -> object_store::Result<()> {
        let range = match (data.is_empty(), total) {
            (true, Some(t)) => format!("bytes */{t}"),
            (false, t) => format!(
                "bytes {offset}-{}/{}",
                offset + data.len() as u64 - 1,
                t.map_or("*".to_string(), |t| t.to_string())
            ),
            (true, None) => return Ok(()),
        };
        // A chunk is not retried blindly: a lost reply may hide a stored chunk.
        let r = self
            .auth(
                self.http
                    .put(session)
                    .header("content-range", range)
                    .body(data),
            )
            .await?
            .send()
            .await
            .map_err(|e| generic(format!("upload {path}: {e}")))?;
        let s = r.status().as_u16();
        let r = Self::check("upload", r, path).await?;
        match (total, s) {
            (None, 308) | (Some(_), 200 | 201) => Ok(()),
            _ => Err(generic(format!(
                "upload {path}: unexpected HTTP {} for a {} chunk",
                r.status(),
                if total.is_some() { "last" } else { "middle" }
            ))),
        }
    }
}

/// A GCS bucket: object_store's client for reads, the JSON API for writes.
#[derive(Debug)]
pub struct GcsStore {
    inner: GoogleCloudStorage,
    api: Arc<JsonApi>,
}

impl std::fmt::Display for GcsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GCS({})", self.api.bucket)
    }
}

impl GcsStore {
    /// Opens `bucket` with object_store's GCS environment.
    pub fn open(bucket: &str) -> Result<GcsStore, String> {
        let base = base_url_from_env().unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
        let base = base.trim_end_matches('/').to_string();
        let opts = ClientOptions::new().with_allow_http(base.starts_with("http://"));
        let inner = GoogleCloudStorageBuilder::from_env()
            .with_bucket_name(bucket)
            .with_client_options(opts)
            .with_retry(crate::single_attempt())
            .build()
            .map_err(|e| e.to_string())?;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            // A server that stops answering is noticed within 30 s of silence, while
            // a long upload that keeps moving may take its 300 s.
            .read_timeout(Duration::from_secs(30))
            .timeout(Duration::from_secs(300))
            .build()
            .map_err(|e| e.to_string())?;
        let creds = inner.credentials().clone();
        Ok(GcsStore {
            inner,
            api: Arc::new(JsonApi {
                http,
                base,
                bucket: bucket.to_string(),
                creds,
            }),
        })
    }
}

#[async_trait]
impl ObjectStore for GcsStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        // Conditional writes are GCS preconditions on the generation: `0` creates
        // only if absent, a generation replaces only that version.
        let cond = match &opts.mode {
            PutMode::Overwrite => None,
            PutMode::Create => Some("0".to_string()),
            PutMode::Update(v) => match &v.version {
                Some(g) => Some(g.clone()),
                // No generation was read (an emulator that sends none): the caller
                // falls back to read, compare, write.
                None => {
                    return Err(object_store::Error::NotImplemented {
                        operation: "conditional put without the object's generation".into(),
                        implementer: STORE.into(),
                    })
                }
            },
        };
        let generation = self
            .api
            .put(location, Bytes::from(payload), cond.as_deref())
            .await?;
        Ok(PutResult {
            e_tag: None,
            version: generation,
            extensions: Default::default(),
        })
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        _opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let session = self.api.start(location).await?;
        Ok(Box::new(Resumable {
            api: self.api.clone(),
            path: location.clone(),
            session: Arc::new(session),
            state: Arc::new(Mutex::new(Progress::default())),
            tail: futures::future::ready(Ok(())).boxed().shared(),
        }))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let api = self.api.clone();
        locations
            .map(move |p| {
                let api = api.clone();
                async move {
                    let p = p?;
                    api.delete(&p).await?;
                    Ok(p)
                }
            })
            .buffered(8)
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// Bytes sent so far and the unaligned rest not sent yet.
#[derive(Default)]
struct Progress {
    offset: u64,
    carry: BytesMut,
}

type Step = Shared<BoxFuture<'static, Result<(), String>>>;

/// A resumable upload as a [`MultipartUpload`]: parts may be handed in concurrently but
/// GCS takes chunks in order, so each part's request waits for the one before it.
struct Resumable {
    api: Arc<JsonApi>,
    path: Path,
    session: Arc<String>,
    state: Arc<Mutex<Progress>>,
    tail: Step,
}

impl std::fmt::Debug for Resumable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Resumable({})", self.path)
    }
}

#[async_trait]
impl MultipartUpload for Resumable {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let prev = self.tail.clone();
        let (api, path, session, state) = (
            self.api.clone(),
            self.path.clone(),
            self.session.clone(),
            self.state.clone(),
        );
        let step: Step = async move {
            prev.await?;
            let (offset, send) = {
                let mut st = state.lock().unwrap();
                for b in data.iter() {
                    st.carry.extend_from_slice(b);
                }
                let n = st.carry.len() - st.carry.len() % CHUNK_ALIGN;
                (st.offset, st.carry.split_to(n).freeze())
            };
            let n = send.len() as u64;
            api.chunk(&session, &path, offset, send, None)
                .await
                .map_err(|e| e.to_string())?;
            state.lock().unwrap().offset += n;
            Ok(())
        }
        .boxed()
        .shared();
        self.tail = step.clone();
        async move { step.await.map_err(generic) }.boxed()
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        self.tail.clone().await.map_err(generic)?;
        let (offset, rest) = {
            let mut st = self.state.lock().unwrap();
            let rest = std::mem::take(&mut st.carry).freeze();
            (st.offset, rest)
        };
        let total = offset + rest.len() as u64;
        self.api
            .chunk(&self.session, &self.path, offset, rest, Some(total))
            .await?;
        Ok(PutResult {
            e_tag: None,
            version: None,
            extensions: Default::default(),
        })
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        // Cancels the session (GCS answers 499); nothing was visible.
        let r = self
            .api
            .auth(self.api.http.delete(self.session.as_str()))
            .await?;
        let _ = r.send().await;
        Ok(())
    }
}
