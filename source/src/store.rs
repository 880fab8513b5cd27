//! `store:URL`: file versions kept in object storage for workers that have no
//! repository. Layout under the store URL:
//!
//! ```text
//! blobs/<blob id hex>          the content, stored once however many commits share it
//! commits/<commit>.idx         "<blob id hex> <path>\n" for every exported path
//! ```
//!
//! A commit index is written last, after its blobs: a present index means every blob
//! it names is there. Indexes and blobs are immutable, so any number of jobs reuse them.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use covmerge_storage::Store;
use rustc_hash::FxHashMap;

use super::{
    plain_commit, plain_path, BlobId, FileVersion, GitSource, Source, SourceError,
    MAX_SOURCE_FILE_BYTES,
};

/// path → blob id of one commit.
type PathIndex = FxHashMap<String, String>;

/// Reads versions from a content-addressed snapshot in object storage.
pub struct StoreSource {
    store: Store,
    rt: tokio::runtime::Handle,
    /// commit → (path → blob id); `None` when the commit has no index.
    indexes: Mutex<FxHashMap<String, Option<Arc<PathIndex>>>>,
}

impl StoreSource {
    /// Must be created inside a tokio runtime; `get` is called from blocking threads.
    pub fn new(store: Store) -> Self {
        StoreSource {
            store,
            rt: tokio::runtime::Handle::current(),
            indexes: Mutex::default(),
        }
    }

    fn io(&self, what: String, e: impl std::fmt::Display) -> SourceError {
        SourceError::Io {
            source_name: format!("store:{}", self.store),
            what,
            message: e.to_string(),
        }
    }

    fn index(&self, commit: &str) -> Result<Option<Arc<PathIndex>>, SourceError> {
        if let Some(v) = self.indexes.lock().unwrap().get(commit) {
            return Ok(v.clone());
        }
        let key = format!("commits/{commit}.idx");
        let raw = self
            .rt
            .block_on(self.store.get_opt(&key))
            .map_err(|e| self.io(key.clone(), e))?;
        let parsed = raw.map(|b| {
            let text = String::from_utf8_lossy(&b);
            let map: FxHashMap<String, String> = text
                .lines()
                .filter_map(|l| l.split_once(' '))
                .map(|(id, p)| (p.to_string(), id.to_string()))
                .collect();
            Arc::new(map)
        });
        self.indexes
            .lock()
            .unwrap()
            .insert(commit.to_string(), parsed.clone());
        Ok(parsed)
    }
}

impl StoreSource {
    /// Drops the commits found without an index (see [`Source::forget_absent`]).
    fn forget_absent_indexes(&self) {
        self.indexes.lock().unwrap().retain(|_, v| v.is_some());
    }

    /// The bytes of blob `key` (`what`: the commit and path it is read for), read as
    /// they stream: a blob over [`MAX_SOURCE_FILE_BYTES`] is refused before any byte
    /// is read, and a stream that runs past the size the store gave is stopped there.
    async fn blob(&self, key: &str, what: &str) -> Result<Vec<u8>, SourceError> {
        use futures::StreamExt;
        let too_large = |size: u64| SourceError::TooLarge {
            source_name: format!("store:{}", self.store),
            what: what.to_string(),
            size,
        };
        let (size, mut chunks) = self
            .store
            .get_stream_sized(key)
            .await
            .map_err(|e| self.io(key.to_string(), e))?;
        if size > MAX_SOURCE_FILE_BYTES {
            return Err(too_large(size));
        }
        let mut data = Vec::with_capacity(size as usize);
        while let Some(c) = chunks.next().await {
            let c = c.map_err(|e| self.io(key.to_string(), e))?;
            let len = (data.len() + c.len()) as u64;
            if len > size {
                if len > MAX_SOURCE_FILE_BYTES {
                    return Err(too_large(len));
                }
                return Err(SourceError::Corrupt {
                    source_name: format!("store:{}", self.store),
                    what: key.to_string(),
                    message: format!("more bytes than the {size} the store gave as its size"),
                });
            }
            data.extend_from_slice(&c);
        }
        if (data.len() as u64) < size {
            return Err(self.io(
                key.to_string(),
                format!("read {} of its {size} bytes", data.len()),
            ));
        }
        Ok(data)
    }
}

impl Source for StoreSource {
    fn has_commit(&self, commit: &[u8]) -> Result<bool, SourceError> {
        let Some(commit) = plain_commit(commit) else {
            return Ok(false);
        };
        Ok(self.index(commit)?.is_some())
    }

    fn forget_absent(&self) {
        self.forget_absent_indexes();
    }

    fn get(&self, commit: &[u8], path: &[u8]) -> Result<Option<Arc<FileVersion>>, SourceError> {
        let Some(commit) = plain_commit(commit) else {
            return Ok(None);
        };
        let Some(path) = plain_path(path) else {
            return Ok(None);
        };
        let Some(idx) = self.index(commit)? else {
            return Ok(None);
        };
        let Some(id) = idx.get(path) else {
            return Ok(None);
        };
        let key = format!("blobs/{id}");
        let data = self
            .rt
            .block_on(self.blob(&key, &format!("{commit}:{path}")))?;
        let v = FileVersion::new(data);
        if v.id.hex() != *id {
            return Err(SourceError::Corrupt {
                source_name: format!("store:{}", self.store),
                what: key,
                message: format!(
                    "content does not match its blob id ({} bytes hash to {})",
                    v.data.len(),
                    v.id.hex()
                ),
            });
        }
        Ok(Some(Arc::new(v)))
    }
}

/// Exports `paths` (all of them, when `None`... not supported: the caller names the
/// paths) at each of `commits` from a git repository into a store snapshot. Blobs
/// already present are not uploaded again. Returns (blobs uploaded, indexes written).
pub async fn export_commits(
    git: &GitSource,
    store: &Store,
    commits: &[String],
    paths: &BTreeSet<String>,
) -> Result<(u64, u64), SourceError> {
    let io = |what: String, e: &dyn std::fmt::Display| SourceError::Io {
        source_name: format!("store:{store}"),
        what,
        message: e.to_string(),
    };
    let mut uploaded = 0;
    let mut indexes = 0;
    for commit in commits {
        let idx_key = format!("commits/{commit}.idx");
        if store
            .exists(&idx_key)
            .await
            .map_err(|e| io(idx_key.clone(), &e))?
        {
            continue;
        }
        let mut idx = String::new();
        for p in paths {
            let Some(v) = git.get(commit.as_bytes(), p.as_bytes())? else {
                continue;
            };
            let id: BlobId = v.id;
            let key = format!("blobs/{}", id.hex());
            if !store.exists(&key).await.map_err(|e| io(key.clone(), &e))? {
                store
                    .put(&key, Bytes::from(v.data.clone()))
                    .await
                    .map_err(|e| io(key.clone(), &e))?;
                uploaded += 1;
            }
            idx.push_str(&id.hex());
            idx.push(' ');
            idx.push_str(p);
            idx.push('\n');
        }
        store
            .put(&idx_key, Bytes::from(idx))
            .await
            .map_err(|e| io(idx_key.clone(), &e))?;
        indexes += 1;
    }
    Ok((uploaded, indexes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CachedSource;

    /// A commit exported after a job found it absent: the worker's source remembered
    /// the absence for its lifetime, and the next job lost that commit's rows.
    #[test]
    fn a_commit_exported_after_a_job_was_still_absent_for_the_next() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let store = Store::open("memory:").unwrap();
        let src = rt.block_on(async { StoreSource::new(store.clone()) });
        let commit = "a".repeat(40);
        let data = b"int x;\n".to_vec();
        let id = FileVersion::new(data.clone()).id.hex();
        let cached = CachedSource::new(Arc::new(src), 1 << 20);
        std::thread::spawn(move || {
            assert!(!cached.has_commit(commit.as_bytes()).unwrap());
            assert!(cached.get(commit.as_bytes(), b"a.c").unwrap().is_none());
            rt.block_on(async {
                store
                    .put(&format!("blobs/{id}"), Bytes::from(data))
                    .await
                    .unwrap();
                store
                    .put(
                        &format!("commits/{commit}.idx"),
                        Bytes::from(format!("{id} a.c\n")),
                    )
                    .await
                    .unwrap();
            });
            // Still remembered absent until the next merge task begins.
            assert!(cached.get(commit.as_bytes(), b"a.c").unwrap().is_none());
            cached.forget_absent();
            assert!(cached.has_commit(commit.as_bytes()).unwrap());
            let v = cached.get(commit.as_bytes(), b"a.c").unwrap();
            assert_eq!(v.unwrap().data, b"int x;\n");
        })
        .join()
        .unwrap();
    }
}
