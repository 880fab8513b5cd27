//! Reading objects: whole, a byte range or a stream; their size, identity and
//! modification time; listing a prefix.

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::{local, Store, StoreError};

/// Bytes a chunk of a local file's stream holds ([`chunks`]).
const FILE_CHUNK: usize = 1 << 20;

/// A local file found shorter, while it was read, than when it was opened: cut (or
/// rewritten) under its reader. Never retried: another try would read the shorter file
/// as a whole object (a copy, a result assembled from parts, published cut short).
#[derive(Debug, thiserror::Error)]
#[error("{path} ended before byte {size} (cut short while read, at byte {at} or after)")]
pub(crate) struct FileCut {
    path: String,
    at: u64,
    size: u64,
}

/// The stream of a get's bytes. A local file's is read [`FILE_CHUNK`] bytes at a time:
/// `object_store` reads it 8 KiB a blocking task, so that streaming a few MB (a
/// result's parts read back by the publish gate, a partial checked and copied) took
/// hundreds of thread hand-offs.
pub(crate) fn chunks(
    r: object_store::GetResult,
) -> futures::stream::BoxStream<'static, object_store::Result<Bytes>> {
    use futures::StreamExt;
    let object_store::GetResult {
        payload,
        meta,
        range,
        attributes,
        extensions,
    } = r;
    let (file, path) = match payload {
        object_store::GetResultPayload::File(file, path) => (file, path),
        payload => {
            let r = object_store::GetResult {
                payload,
                meta,
                range,
                attributes,
                extensions,
            };
            return r.into_stream();
        }
    };
    let file = std::sync::Arc::new(file);
    futures::stream::try_unfold(range, move |at| {
        let (file, path) = (file.clone(), path.clone());
        async move {
            if at.start >= at.end {
                return Ok(None);
            }
            let n = (at.end - at.start).min(FILE_CHUNK as u64) as usize;
            let start = at.start;
            let read = tokio::task::spawn_blocking(move || {
                use std::os::unix::fs::FileExt;
                let mut buf = vec![0u8; n];
                file.read_exact_at(&mut buf, start).map(|()| buf)
            })
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
            match read {
                Ok(buf) => Ok(Some((Bytes::from(buf), start + n as u64..at.end))),
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    Err(object_store::Error::Generic {
                        store: "LocalFileSystem",
                        source: Box::new(FileCut {
                            path: path.display().to_string(),
                            at: start,
                            size: at.end,
                        }),
                    })
                }
                Err(source) => Err(object_store::Error::Generic {
                    store: "LocalFileSystem",
                    source: Box::new(source),
                }),
            }
        }
    })
    .boxed()
}

impl Store {
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
        let stream = Box::pin(chunks(r).map_err(move |source| StoreError::Io {
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
}
