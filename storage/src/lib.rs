//! `covmerge-storage` owns every byte that covmerge keeps in object storage: it turns a
//! store URL (`file://`, `s3://`, `gs://`, `memory:`) into a [`Store`], and offers the few
//! operations the pipeline needs — whole-object puts (atomic: an object appears whole
//! or not at all), gets, listing, and the streamed concatenation that assembles the
//! result from parts without holding it in memory.
//!
//! It knows nothing about rows, shards or queues. Credentials come from the usual
//! environment variables (`AWS_*`, `GOOGLE_*`) and never appear in an error or a log line: the
//! [`Store`] displays its URL without user info or query.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod error;
/// `gs://`: Google Cloud Storage.
pub mod gcs;
/// Local output files: atomic, through symlinks, cleaned up when interrupted.
pub mod local;
mod location;

use error::http_status;
pub use error::{disk_advice, local_disk_problem, StoreError};
pub use location::{
    check_object_url, expand_inputs, file_url_path, local_unreadable, open_object, split_url,
};
use location::{join_key, local_unreadable_reason, shown};

use bytes::Bytes;
use covmerge_proto::retry::{RetryPolicy, Retryable};
use futures::{StreamExt, TryStreamExt};
use object_store::{
    memory::InMemory, path::Path, GetOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions,
    PutPayload, UpdateVersion, WriteMultipart,
};

/// One version of an object, as read: what a conditional write ([`Store::put_if`])
/// names as the version it replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectVersion {
    /// The object's bytes.
    pub bytes: Bytes,
    e_tag: Option<String>,
    version: Option<String>,
}

/// Whether a store does conditional writes itself or covmerge emulates them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Atomicity {
    /// The store checks the condition and writes in one step (memory, S3 with
    /// `If-None-Match`/`If-Match`, GCS with `ifGenerationMatch`; `file://` for creates).
    Atomic,
    /// The store has no such write (`file://` updates): the object is read, compared,
    /// then written, and a writer in between is not seen.
    ReadCompareWrite,
}

/// How long an operation keeps retrying transient errors (the store unreachable,
/// throttling, 5xx) before it fails: a storage outage of a few minutes costs time, not
/// the task. Overridden with [`Store::with_retry_budget`] (`--store-outage-budget`).
pub const DEFAULT_RETRY_BUDGET: Duration = Duration::from_secs(300);

/// Objects whose requests [`Store::get_streams`] and [`Store::concat`] keep in flight
/// ahead of the one being read: a result assembled from N parts on a bucket 20 ms
/// away waits about one round trip, not N.
pub const PARTS_AHEAD: usize = 8;

/// object_store's own retry layer switched off: [`Store::retrying`] is the one layer
/// that retries, so `--store-outage-budget` bounds an operation (object_store's
/// default would retry 10 times for up to 3 minutes inside each attempt). Each attempt
/// is still bounded by the client's request timeout (object_store's 30 s), so a store
/// that never answers fails an operation after at most the budget plus one request
/// timeout.
pub(crate) fn single_attempt() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: 0,
        ..Default::default()
    }
}

/// A store and a prefix inside it.
#[derive(Clone)]
pub struct Store {
    inner: Arc<dyn ObjectStore>,
    prefix: Path,
    display: String,
    retry_budget: Duration,
    /// object_store's `LocalFileSystem` (`file://`): it cannot name files whose name
    /// ends in `#` and digits (see [`local_unreadable`]).
    local: bool,
    /// The directory of a `file://` store: listed by [`Store::list`] only after
    /// [`local::check_no_dir_symlinks`] (object_store's walk follows symlinks).
    local_dir: Option<Arc<std::path::PathBuf>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.display)
    }
}

impl std::fmt::Display for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.display)
    }
}

/// A URL without credentials: safe for logs (the one redaction of every URL kind).
pub use covmerge_proto::redact::redact_url;

/// Whether `s` names an object-store location rather than a local path.
pub fn is_store_url(s: &str) -> bool {
    [
        "file://", "s3://", "s3a://", "gs://", "az://", "abfs://", "memory:", "http://", "https://",
    ]
    .iter()
    .any(|p| s.starts_with(p))
}

impl Store {
    /// Opens a store URL; the URL's path becomes the prefix of every key, as it is
    /// written (see [`split_url`]: no percent-escape is decoded, `?` and `#` are
    /// characters of names).
    pub fn open(url: &str) -> Result<Store, StoreError> {
        let bad = |reason: String| StoreError::Url {
            url: redact_url(url),
            reason,
        };
        if url == "memory:" || url.starts_with("memory:/") {
            return Ok(Store::from_object_store(
                Arc::new(InMemory::new()),
                "",
                "memory:",
            ));
        }
        let (scheme, authority, path) =
            split_url(url).ok_or_else(|| bad("expected scheme://location".into()))?;
        let display = shown(url);
        // The authority (bucket, user info, port) is a URL's; the path is names.
        let host = || -> Result<String, StoreError> {
            let u = url::Url::parse(&format!("{scheme}://{authority}/"))
                .map_err(|e| bad(e.to_string()))?;
            u.host_str()
                .filter(|h| !h.is_empty())
                .map(str::to_string)
                .ok_or_else(|| bad("no bucket".into()))
        };
        let prefix = path.trim_matches('/');
        if !prefix.is_empty() {
            Path::parse(prefix).map_err(|e| bad(format!("the path {prefix:?}: {e}")))?;
        }
        match scheme {
            "file" => {
                let dir =
                    file_url_path(url).ok_or_else(|| bad("not an absolute file path".into()))?;
                std::fs::create_dir_all(dir).map_err(|e| bad(e.to_string()))?;
                let fs = object_store::local::LocalFileSystem::new_with_prefix(dir)
                    .map_err(|e| bad(e.to_string()))?;
                let mut s = Store::from_object_store(Arc::new(fs), "", &display);
                s.local = true;
                s.local_dir = Some(Arc::new(std::path::PathBuf::from(dir)));
                Ok(s)
            }
            "s3" | "s3a" => {
                let bucket = host()?;
                let mut b =
                    object_store::aws::AmazonS3Builder::from_env().with_bucket_name(&bucket);
                if let Ok(ep) =
                    std::env::var("AWS_ENDPOINT_URL").or_else(|_| std::env::var("AWS_ENDPOINT"))
                {
                    if ep.starts_with("http://") {
                        b = b.with_allow_http(true);
                    }
                    b = b.with_endpoint(ep);
                }
                if std::env::var("AWS_REGION").is_err()
                    && std::env::var("AWS_DEFAULT_REGION").is_err()
                {
                    b = b.with_region("us-east-1");
                }
                let s3 = b
                    .with_retry(single_attempt())
                    .build()
                    .map_err(|e| bad(e.to_string()))?;
                Ok(Store::from_object_store(Arc::new(s3), prefix, &display))
            }
            "gs" => {
                let bucket = host()?;
                let gcs = gcs::GcsStore::open(&bucket).map_err(bad)?;
                Ok(Store::from_object_store(Arc::new(gcs), prefix, &display))
            }
            other => Err(bad(format!(
                "scheme {other}: this build supports file://, s3://, gs:// and memory: \
                 (az:// needs object_store's azure feature)"
            ))),
        }
    }

    /// Wraps an existing object store (tests hand in an `InMemory`).
    /// `prefix` is names as they are (a prefix object_store cannot name, with an
    /// empty, `.` or `..` segment, is taken as object_store escapes it).
    pub fn from_object_store(inner: Arc<dyn ObjectStore>, prefix: &str, display: &str) -> Store {
        let prefix = prefix.trim_matches('/');
        Store {
            inner,
            prefix: Path::parse(prefix).unwrap_or_else(|_| Path::from(prefix)),
            display: display.to_string(),
            retry_budget: DEFAULT_RETRY_BUDGET,
            local: false,
            local_dir: None,
        }
    }

    /// The same store with another time budget for retrying transient errors
    /// (zero: fail at the first error).
    pub fn with_retry_budget(mut self, budget: Duration) -> Store {
        self.retry_budget = budget;
        self
    }

    /// The same store, one level deeper.
    pub fn scoped(&self, sub: &str) -> Store {
        let joined = join_key(&self.prefix, sub);
        Store {
            inner: self.inner.clone(),
            prefix: Path::parse(&joined).unwrap_or_else(|_| Path::from(joined.as_str())),
            display: format!("{}/{}", self.display.trim_end_matches('/'), sub),
            retry_budget: self.retry_budget,
            local: self.local,
            local_dir: self.local_dir.clone(),
        }
    }

    /// Runs `f` until it succeeds, fails permanently, or transient failures have
    /// lasted the retry budget (wall clock); waits as [`RetryPolicy::store`] says in
    /// between.
    async fn retrying<T, F, Fut>(&self, op: &'static str, key: &str, f: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let start = Instant::now();
        let budget = self.retry_budget;
        let failures = AtomicU32::new(0);
        let res = f
            .retry(RetryPolicy::store(budget).builder())
            .sleep(tokio::time::sleep)
            .when(StoreError::is_transient)
            .adjust(|_, wait| wait.filter(|w| start.elapsed() + *w < budget))
            .notify(|e, wait| {
                let failures = failures.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::warn!(store = %self.display, op, key, error = %e, failures, retry_in = ?wait, "store operation failed; retrying");
            })
            .await;
        let failures = failures.into_inner();
        match &res {
            Ok(_) if failures > 0 => {
                tracing::info!(store = %self.display, op, key, failures, after = ?start.elapsed(), "store reachable again");
            }
            Err(_) if failures > 0 => {
                tracing::warn!(store = %self.display, op, key, failures, after = ?start.elapsed(), "store operation still failing; giving up");
            }
            _ => {}
        }
        res
    }

    /// The object `key` names under this store's prefix, its name exactly as given.
    /// (object_store's `Path::from` would percent-escape non-ASCII, `#`, `?`, `%` and
    /// more, so that `ü.csv` was asked for as `%C3%BC.csv`, and written so: a `Path`
    /// holds names as the store has them, which `Path::parse` checks and keeps.)
    fn path(&self, key: &str) -> Result<Path, StoreError> {
        let joined = join_key(&self.prefix, key);
        let p = Path::parse(&joined)
            .map_err(|e| self.name_error(key, format!("object_store cannot name it ({e})")))?;
        if self.local && !key.trim_matches('/').is_empty() {
            if let Some(file) = p.filename().filter(|f| local_unreadable(f)) {
                return Err(self.name_error(key, local_unreadable_reason(file)));
            }
        }
        Ok(p)
    }

    fn name_error(&self, key: &str, reason: String) -> StoreError {
        StoreError::Name {
            store: self.display.clone(),
            key: key.to_string(),
            reason,
        }
    }

    /// Whether `key` names an object this store can read and write (see
    /// [`Store::path`]): checked before any work for a result's name.
    pub fn check_name(&self, key: &str) -> Result<(), StoreError> {
        self.path(key).map(|_| ())
    }

    fn io(&self, op: &'static str, key: &str, source: object_store::Error) -> StoreError {
        if let object_store::Error::NotFound { .. } = source {
            return StoreError::NotFound {
                store: self.display.clone(),
                key: key.to_string(),
            };
        }
        if let Some(problem) = error::local_disk_problem(&source) {
            return StoreError::LocalDisk {
                op,
                store: self.display.clone(),
                key: key.to_string(),
                problem,
            };
        }
        StoreError::Io {
            op,
            store: self.display.clone(),
            key: key.to_string(),
            source: Box::new(source),
        }
    }

    /// Writes a whole object. Readers see the old object or the new one, never a part.
    pub async fn put(&self, key: &str, data: Bytes) -> Result<(), StoreError> {
        self.retrying("put", key, || async {
            self.inner
                .put(&self.path(key)?, PutPayload::from(data.clone()))
                .await
                .map(|_| ())
                .map_err(|e| self.io("put", key, e))
        })
        .await
    }

    /// Writes `data` as `key` only if no object `key` exists: `Ok(true)` when this
    /// call created it, `Ok(false)` when one was there. Atomic where the store has a
    /// create-if-absent write (memory, `file://` (a hard link), S3 `If-None-Match`, GCS
    /// `ifGenerationMatch=0`); elsewhere a look then a write, with the race between
    /// them ([`Atomicity`]). A create retried after a lost reply that finds its own
    /// bytes there counts as created.
    pub async fn put_new(&self, key: &str, data: Bytes) -> Result<(bool, Atomicity), StoreError> {
        enum Outcome {
            Created,
            Exists,
            Unsupported,
        }
        let failed = std::sync::atomic::AtomicBool::new(false);
        let outcome = self
            .retrying("create", key, || async {
                let opts = PutOptions {
                    mode: PutMode::Create,
                    ..PutOptions::default()
                };
                match self
                    .inner
                    .put_opts(&self.path(key)?, PutPayload::from(data.clone()), opts)
                    .await
                {
                    Ok(_) => Ok(Outcome::Created),
                    // S3 answers 409 ConditionalRequestConflict to a create that
                    // raced another conditional write ("try again"); object_store
                    // reports it as AlreadyExists, like the 412 of an object there.
                    Err(e @ object_store::Error::AlreadyExists { .. })
                        if http_status(&e).is_some_and(|(s, _)| s == 409) =>
                    {
                        failed.store(true, Ordering::Relaxed);
                        Err(self.io("create", key, e))
                    }
                    Err(object_store::Error::AlreadyExists { .. }) => Ok(Outcome::Exists),
                    Err(object_store::Error::NotImplemented { .. }) => Ok(Outcome::Unsupported),
                    Err(e) => {
                        failed.store(true, Ordering::Relaxed);
                        Err(self.io("create", key, e))
                    }
                }
            })
            .await?;
        match outcome {
            Outcome::Created => Ok((true, Atomicity::Atomic)),
            Outcome::Exists => {
                // A first attempt may have written it and lost its reply.
                let ours = failed.load(Ordering::Relaxed)
                    && self.get_opt(key).await?.is_some_and(|b| b == data);
                Ok((ours, Atomicity::Atomic))
            }
            Outcome::Unsupported => {
                if self.exists(key).await? {
                    return Ok((false, Atomicity::ReadCompareWrite));
                }
                self.put(key, data).await?;
                Ok((true, Atomicity::ReadCompareWrite))
            }
        }
    }

    /// The object with what a conditional write needs to name this version of it;
    /// `None` when it does not exist.
    pub async fn get_versioned(&self, key: &str) -> Result<Option<ObjectVersion>, StoreError> {
        let r = self
            .retrying("get", key, || async {
                let r = self
                    .inner
                    .get_opts(&self.path(key)?, GetOptions::default())
                    .await
                    .map_err(|e| self.io("get", key, e))?;
                let (e_tag, version) = (r.meta.e_tag.clone(), r.meta.version.clone());
                let bytes = r.bytes().await.map_err(|e| self.io("get", key, e))?;
                Ok(ObjectVersion {
                    bytes,
                    e_tag,
                    version,
                })
            })
            .await;
        match r {
            Ok(v) => Ok(Some(v)),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Replaces `key` with `data` only if it is still version `expected`: the new
    /// version, or `None` when another write (or a delete) came in between. Atomic on
    /// memory, S3 (`If-Match`) and GCS (`ifGenerationMatch`); on `file://`, which has
    /// no such write, the object is read and compared, then written ([`Atomicity`]).
    pub async fn put_if(
        &self,
        key: &str,
        data: Bytes,
        expected: &ObjectVersion,
    ) -> Result<(Option<ObjectVersion>, Atomicity), StoreError> {
        enum Outcome {
            Written(object_store::PutResult),
            Conflict,
            Unsupported,
        }
        let outcome = self
            .retrying("update", key, || async {
                let opts = PutOptions {
                    mode: PutMode::Update(UpdateVersion {
                        e_tag: expected.e_tag.clone(),
                        version: expected.version.clone(),
                    }),
                    ..PutOptions::default()
                };
                match self
                    .inner
                    .put_opts(&self.path(key)?, PutPayload::from(data.clone()), opts)
                    .await
                {
                    Ok(r) => Ok(Outcome::Written(r)),
                    Err(
                        object_store::Error::Precondition { .. }
                        | object_store::Error::NotFound { .. },
                    ) => Ok(Outcome::Conflict),
                    Err(object_store::Error::NotImplemented { .. }) => Ok(Outcome::Unsupported),
                    Err(e) => Err(self.io("update", key, e)),
                }
            })
            .await?;
        let written = |r: object_store::PutResult| ObjectVersion {
            bytes: data.clone(),
            e_tag: r.e_tag,
            version: r.version,
        };
        match outcome {
            Outcome::Written(r) => Ok((Some(written(r)), Atomicity::Atomic)),
            Outcome::Conflict => Ok((None, Atomicity::Atomic)),
            Outcome::Unsupported => {
                let same = match self.get_versioned(key).await? {
                    Some(now) => {
                        now.bytes == expected.bytes
                            && (now.e_tag.is_none()
                                || expected.e_tag.is_none()
                                || now.e_tag == expected.e_tag)
                    }
                    None => false,
                };
                if !same {
                    return Ok((None, Atomicity::ReadCompareWrite));
                }
                let r = self
                    .retrying("put", key, || async {
                        self.inner
                            .put(&self.path(key)?, PutPayload::from(data.clone()))
                            .await
                            .map_err(|e| self.io("put", key, e))
                    })
                    .await?;
                Ok((Some(written(r)), Atomicity::ReadCompareWrite))
            }
        }
    }

    /// The whole object `key`, within the retry budget.
    pub async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
        self.retrying("get", key, || async {
            let r = self
                .inner
                .get(&self.path(key)?)
                .await
                .map_err(|e| self.io("get", key, e))?;
            r.bytes().await.map_err(|e| self.io("get", key, e))
        })
        .await
    }

    /// Bytes `range` of an object. A range the object does not hold is a permanent
    /// [`StoreError::OutOfRange`] (stores report it as a generic error, which would
    /// otherwise be retried as if the store were unreachable).
    pub async fn get_range(
        &self,
        key: &str,
        range: std::ops::Range<u64>,
    ) -> Result<Bytes, StoreError> {
        self.retrying("get", key, || async {
            let path = self.path(key)?;
            let out_of_range = |size: u64| StoreError::OutOfRange {
                store: self.display.clone(),
                key: key.to_string(),
                start: range.start,
                end: range.end,
                size,
            };
            match self.inner.get_range(&path, range.clone()).await {
                Ok(b) if b.len() as u64 == range.end - range.start => Ok(b),
                Ok(b) => Err(out_of_range(range.start + b.len() as u64)),
                Err(e) => match self.inner.head(&path).await {
                    Ok(meta) if meta.size < range.end => Err(out_of_range(meta.size)),
                    _ => Err(self.io("get", key, e)),
                },
            }
        })
        .await
    }

    /// The object as a stream of chunks.
    pub async fn get_stream(
        &self,
        key: &str,
    ) -> Result<futures::stream::BoxStream<'static, Result<Bytes, StoreError>>, StoreError> {
        Ok(self.get_stream_sized(key).await?.1)
    }

    /// The object's size, as the store reports it before any byte is read, and the
    /// object as a stream of chunks: a reader can refuse an object too large for it
    /// without reading it, and stop a stream that runs past the size.
    pub async fn get_stream_sized(
        &self,
        key: &str,
    ) -> Result<
        (
            u64,
            futures::stream::BoxStream<'static, Result<Bytes, StoreError>>,
        ),
        StoreError,
    > {
        let r = self
            .retrying("get", key, || async {
                self.inner
                    .get(&self.path(key)?)
                    .await
                    .map_err(|e| self.io("get", key, e))
            })
            .await?;
        let (store, k) = (self.display.clone(), key.to_string());
        let size = r.meta.size;
        let stream = Box::pin(r.into_stream().map_err(move |source| StoreError::Io {
            op: "get",
            store: store.clone(),
            key: k.clone(),
            source: Box::new(source),
        }));
        Ok((size, stream))
    }

    /// `None` when the object does not exist.
    pub async fn get_opt(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
        match self.get(key).await {
            Ok(b) => Ok(Some(b)),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Size in bytes of an object.
    pub async fn size(&self, key: &str) -> Result<u64, StoreError> {
        self.retrying("head", key, || async {
            self.inner
                .head(&self.path(key)?)
                .await
                .map(|m| m.size)
                .map_err(|e| self.io("head", key, e))
        })
        .await
    }

    /// What an object is now ([`covmerge_proto::job::InputIdentity`]): its size and
    /// what the store says of its version (ETag, generation or version id, and the
    /// modification time), to tell it from an object rewritten under the same name.
    pub async fn identity(
        &self,
        key: &str,
    ) -> Result<covmerge_proto::job::InputIdentity, StoreError> {
        self.retrying("head", key, || async {
            self.inner
                .head(&self.path(key)?)
                .await
                .map(|m| covmerge_proto::job::InputIdentity {
                    size: m.size,
                    etag: m.e_tag,
                    version: m.version,
                    modified_ns: m
                        .last_modified
                        .timestamp_nanos_opt()
                        .and_then(|ns| u64::try_from(ns).ok()),
                    inode: None,
                })
                .map_err(|e| self.io("head", key, e))
        })
        .await
    }

    /// When an object was last written; `None` when it does not exist.
    pub async fn modified(&self, key: &str) -> Result<Option<std::time::SystemTime>, StoreError> {
        self.retrying("head", key, || async {
            match self.inner.head(&self.path(key)?).await {
                Ok(m) => {
                    let ms = m.last_modified.timestamp_millis().max(0) as u64;
                    Ok(Some(
                        std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms),
                    ))
                }
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(self.io("head", key, e)),
            }
        })
        .await
    }

    /// Whether object `key` exists.
    pub async fn exists(&self, key: &str) -> Result<bool, StoreError> {
        self.retrying("head", key, || async {
            match self.inner.head(&self.path(key)?).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(self.io("head", key, e)),
            }
        })
        .await
    }

    /// Keys (relative to this store's prefix) under `prefix`, sorted.
    pub async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let p = self.path(prefix)?;
        if let Some(dir) = &self.local_dir {
            // object_store walks a local directory following symlinks: one to a
            // directory outside would list files of another tree, a loop fails (and
            // was retried as an outage). Refused first, naming it.
            let under = dir.join(p.as_ref());
            local::check_no_dir_symlinks(&under).map_err(|(at, reason)| StoreError::Name {
                store: self.display.clone(),
                key: at
                    .strip_prefix(dir.as_path())
                    .map(|r| r.display().to_string())
                    .unwrap_or_else(|_| at.display().to_string()),
                reason,
            })?;
        }
        let metas: Vec<_> = self
            .retrying("list", prefix, || async {
                self.inner
                    .list(Some(&p))
                    .try_collect::<Vec<_>>()
                    .await
                    .map_err(|e| self.io("list", prefix, e))
            })
            .await?;
        let strip = self.prefix.as_ref();
        let mut keys: Vec<String> = metas
            .into_iter()
            .map(|m| {
                let s = m.location.to_string();
                if strip.is_empty() {
                    s
                } else {
                    s.strip_prefix(strip)
                        .unwrap_or(&s)
                        .trim_start_matches('/')
                        .to_string()
                }
            })
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// Deletes object `key`; one that is already gone is no error.
    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.retrying("delete", key, || async {
            match self.inner.delete(&self.path(key)?).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(self.io("delete", key, e)),
            }
        })
        .await
    }

    /// Deletes `keys` with many requests in flight (S3: bulk `DeleteObjects` of up to
    /// 1,000 keys a request; GCS: several deletes at once): cleaning up a job's
    /// thousands of spill objects costs a few round trips, not one per object. A key
    /// already gone is deleted; a key the bulk pass did not report deleted is deleted
    /// again alone, with [`Store::delete`]'s retries.
    pub async fn delete_all(&self, keys: &[String]) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        let paths = keys
            .iter()
            .map(|k| self.path(k))
            .collect::<Result<Vec<_>, _>>()?;
        let deleted: std::collections::HashSet<Path> = self
            .inner
            .delete_stream(futures::stream::iter(paths.clone().into_iter().map(Ok)).boxed())
            .filter_map(|r| async move { r.ok() })
            .collect()
            .await;
        for (key, path) in keys.iter().zip(&paths) {
            if !deleted.contains(path) {
                self.delete(key).await?;
            }
        }
        Ok(())
    }

    /// The objects `keys`, each as a stream of chunks, in order, with the requests of
    /// up to [`PARTS_AHEAD`] of them in flight ahead of the one being read: reading many
    /// parts one after another costs about one round trip, not one per part. Bodies are
    /// not read ahead (memory holds what the connections buffer).
    pub fn get_streams<'a>(
        &'a self,
        keys: &'a [String],
    ) -> impl futures::Stream<
        Item = Result<futures::stream::BoxStream<'static, Result<Bytes, StoreError>>, StoreError>,
    > + 'a {
        futures::stream::iter(keys)
            .map(move |k| self.get_stream(k))
            .buffered(PARTS_AHEAD)
    }

    /// Writes `head` followed by the objects `parts` of `src`, in order, as the single
    /// object `key`, streaming through a multipart upload: the object appears only when
    /// the upload completes, and memory holds a few chunks at a time. A transient
    /// failure aborts the upload and starts it again, within the retry budget.
    pub async fn concat(
        &self,
        key: &str,
        head: Bytes,
        src: &Store,
        parts: &[String],
    ) -> Result<u64, StoreError> {
        self.retrying("concat", key, || {
            self.concat_once(key, head.clone(), src, parts)
        })
        .await
    }

    async fn concat_once(
        &self,
        key: &str,
        head: Bytes,
        src: &Store,
        parts: &[String],
    ) -> Result<u64, StoreError> {
        let sources = parts
            .iter()
            .map(|p| src.path(p))
            .collect::<Result<Vec<_>, _>>()?;
        let upload = self
            .inner
            .put_multipart(&self.path(key)?)
            .await
            .map_err(|e| self.io("put_multipart", key, e))?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, 8 << 20);
        let mut total = head.len() as u64;
        w.put(head);
        let mut gets = futures::stream::iter(&sources)
            .map(|path| src.inner.get(path))
            .buffered(PARTS_AHEAD);
        for p in parts {
            let r = gets.next().await.expect("one request per part");
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    w.abort().await.ok();
                    return Err(src.io("get", p, e));
                }
            };
            let mut s = r.into_stream();
            loop {
                match s.try_next().await {
                    Ok(Some(b)) => {
                        total += b.len() as u64;
                        if let Err(e) = w.wait_for_capacity(4).await {
                            w.abort().await.ok();
                            return Err(self.io("put_part", key, e));
                        }
                        w.put(b);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        w.abort().await.ok();
                        return Err(src.io("get", p, e));
                    }
                }
            }
        }
        // On failure `finish` has already aborted the upload.
        w.finish().await.map_err(|e| self.io("complete", key, e))?;
        Ok(total)
    }
}

impl Store {
    /// Writes the first `len` bytes of the local `file` as the object `key`, streamed
    /// through a multipart upload with the same atomicity as [`Store::concat`]:
    /// memory holds a few 8 MiB chunks, not the object (a large merged part).
    pub async fn put_file(
        &self,
        key: &str,
        file: &std::fs::File,
        len: u64,
    ) -> Result<(), StoreError> {
        self.retrying("put", key, || self.put_file_once(key, file, len))
            .await
    }

    async fn put_file_once(
        &self,
        key: &str,
        file: &std::fs::File,
        len: u64,
    ) -> Result<(), StoreError> {
        use std::os::unix::fs::FileExt;
        const CHUNK: usize = 8 << 20;
        let upload = self
            .inner
            .put_multipart(&self.path(key)?)
            .await
            .map_err(|e| self.io("put_multipart", key, e))?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, CHUNK);
        let mut at = 0u64;
        while at < len {
            if let Err(e) = w.wait_for_capacity(2).await {
                w.abort().await.ok();
                return Err(self.io("put_part", key, e));
            }
            let n = (len - at).min(CHUNK as u64) as usize;
            let read = file.try_clone().map(|f| {
                tokio::task::spawn_blocking(move || {
                    let mut buf = vec![0u8; n];
                    f.read_exact_at(&mut buf, at).map(|()| buf)
                })
            });
            let read = match read {
                Ok(task) => task.await.unwrap_or_else(|e| Err(std::io::Error::other(e))),
                Err(e) => Err(e),
            };
            let buf = match read {
                Ok(buf) => buf,
                Err(e) => {
                    w.abort().await.ok();
                    let source = object_store::Error::Generic {
                        store: "local file",
                        source: Box::new(e),
                    };
                    return Err(self.io("read for put", key, source));
                }
            };
            w.put(Bytes::from(buf));
            at += n as u64;
        }
        // On failure `finish` has already aborted the upload.
        w.finish().await.map_err(|e| self.io("complete", key, e))?;
        Ok(())
    }

    /// Copies `src_key` of `src` to `key` here, streamed, with the same atomicity as
    /// [`Store::concat`].
    pub async fn copy_from(
        &self,
        key: &str,
        src: &Store,
        src_key: &str,
    ) -> Result<u64, StoreError> {
        self.concat(key, Bytes::new(), src, &[src_key.to_string()])
            .await
    }
}

#[cfg(test)]
mod tests;
