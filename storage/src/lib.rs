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
mod get;
/// Local output files: atomic, through symlinks, cleaned up when interrupted.
pub mod local;
mod location;
mod put;
mod stream;

pub use error::{disk_advice, local_disk_problem, StoreError};
pub use location::{
    check_object_url, expand_each_input, expand_inputs, file_url_path, local_unreadable,
    open_object, split_url,
};
use location::{join_key, local_unreadable_reason, shown};

use bytes::Bytes;
use covmerge_proto::retry::{RetryPolicy, Retryable};
use object_store::{memory::InMemory, path::Path, ObjectStore};

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
pub use location::shown as shown_url;

/// Whether `s` names an object-store location rather than a local path: `memory:`, or
/// any `scheme://` (RFC 3986's scheme characters), so that [`Store::open`] refuses one
/// this build does not serve, naming it. `ftp://h/x` or `GS://b/x` was taken for a
/// local relative path, and written there where such a directory existed.
pub fn is_store_url(s: &str) -> bool {
    if s.starts_with("memory:") {
        return true;
    }
    let Some((scheme, _)) = s.split_once("://") else {
        return false;
    };
    let mut c = scheme.bytes();
    c.next().is_some_and(|b| b.is_ascii_alphabetic())
        && c.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

impl Store {
    /// Opens a store URL; the URL's path becomes the prefix of every key, as it is
    /// written (see [`split_url`]: no percent-escape is decoded, `?` and `#` are
    /// characters of names).
    pub fn open(url: &str) -> Result<Store, StoreError> {
        let bad = |reason: String| StoreError::Url {
            url: location::shown(url),
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
        // A store under $TMPDIR (an embedded merge's) holds temporary files; another
        // (an --out or --partial-out directory) an output.
        let tmp = format!("file://{}", std::env::temp_dir().display());
        let scratch = self
            .display
            .strip_prefix(tmp.trim_end_matches('/'))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        if let Some(problem) = error::disk_problem(&source, scratch) {
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
}

#[cfg(test)]
mod tests;
