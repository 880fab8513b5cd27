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

use crate::store_index::{Indexes, Lookup};

use super::{
    plain_commit, plain_path, BlobId, FileVersion, GitSource, Source, SourceError,
    MAX_SOURCE_FILE_BYTES,
};

/// Bytes of commit indexes a store source holds unless told otherwise
/// ([`StoreSource::with_index_budget`]).
pub const DEFAULT_INDEX_BYTES: usize = 32 << 20;

/// Reads versions from a content-addressed snapshot in object storage.
pub struct StoreSource {
    store: Store,
    rt: tokio::runtime::Handle,
    /// The commit indexes read, within a byte budget.
    indexes: Mutex<Indexes>,
    /// The largest blob read.
    max_file: u64,
}

impl StoreSource {
    /// Must be created inside a tokio runtime; `get` is called from blocking threads.
    pub fn new(store: Store) -> Self {
        Self::with_index_budget(store, DEFAULT_INDEX_BYTES)
    }

    /// A source that holds at most about `bytes` of commit indexes (the most recently
    /// used one always); past it indexes are read again when needed.
    pub fn with_index_budget(store: Store, bytes: usize) -> Self {
        StoreSource {
            store,
            rt: tokio::runtime::Handle::current(),
            indexes: Mutex::new(Indexes::new(bytes)),
            max_file: MAX_SOURCE_FILE_BYTES,
        }
    }

    /// The source refusing blobs over `bytes` (at most [`MAX_SOURCE_FILE_BYTES`]).
    pub fn with_max_file_bytes(mut self, bytes: u64) -> Self {
        self.max_file = bytes.min(MAX_SOURCE_FILE_BYTES);
        self
    }

    fn io(&self, what: String, e: impl std::fmt::Display) -> SourceError {
        SourceError::Io {
            source_name: format!("store:{}", self.store),
            what,
            message: e.to_string(),
        }
    }

    /// Reads `commit`'s index (`None`: it has none) and holds it.
    fn read_index(&self, commit: &str) -> Result<Option<Bytes>, SourceError> {
        let key = format!("commits/{commit}.idx");
        let raw = self
            .rt
            .block_on(self.store.get_opt(&key))
            .map_err(|e| self.io(key.clone(), e))?;
        self.indexes.lock().unwrap().add(commit, raw.as_deref());
        Ok(raw)
    }

    /// The blob id of `path` at `commit` (`None`: no such commit or path).
    fn blob_id(&self, commit: &str, path: &str) -> Result<Option<Arc<str>>, SourceError> {
        match self.indexes.lock().unwrap().lookup(commit, path) {
            Lookup::Blob(id) => return Ok(Some(id)),
            Lookup::NoCommit | Lookup::NoPath => return Ok(None),
            Lookup::NotHeld => {}
        }
        let raw = self.read_index(commit)?;
        match self.indexes.lock().unwrap().lookup(commit, path) {
            Lookup::Blob(id) => return Ok(Some(id)),
            Lookup::NoCommit | Lookup::NoPath => return Ok(None),
            Lookup::NotHeld => {}
        }
        // Dropped at once for another thread's index: looked up in this read alone.
        let mut alone = Indexes::new(usize::MAX);
        alone.add(commit, raw.as_deref());
        Ok(match alone.lookup(commit, path) {
            Lookup::Blob(id) => Some(id),
            _ => None,
        })
    }

    fn has_index(&self, commit: &str) -> Result<bool, SourceError> {
        if let Some(has) = self.indexes.lock().unwrap().has(commit) {
            return Ok(has);
        }
        Ok(self.read_index(commit)?.is_some())
    }
}

impl StoreSource {
    /// Drops the commits found without an index (see [`Source::forget_absent`]).
    fn forget_absent_indexes(&self) {
        self.indexes.lock().unwrap().forget_absent();
    }

    /// The bytes of blob `key` (`what`: the commit and path it is read for), read as
    /// they stream: a blob over the source's limit is refused before any byte
    /// is read, and a stream that runs past the size the store gave is stopped there.
    async fn blob(&self, key: &str, what: &str) -> Result<Vec<u8>, SourceError> {
        use futures::StreamExt;
        let too_large = |size: u64| SourceError::TooLarge {
            source_name: format!("store:{}", self.store),
            what: what.to_string(),
            size,
            limit: self.max_file,
        };
        let (size, mut chunks) = self
            .store
            .get_stream_sized(key)
            .await
            .map_err(|e| self.io(key.to_string(), e))?;
        if size > self.max_file {
            return Err(too_large(size));
        }
        let mut data = Vec::with_capacity(size as usize);
        while let Some(c) = chunks.next().await {
            let c = c.map_err(|e| self.io(key.to_string(), e))?;
            let len = (data.len() + c.len()) as u64;
            if len > size {
                if len > self.max_file {
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
        self.has_index(commit)
    }

    fn forget_absent(&self) {
        self.forget_absent_indexes();
    }

    fn tree_id(&self, commit: &[u8]) -> Result<Option<String>, SourceError> {
        use sha2::Digest;
        let Some(commit) = plain_commit(commit) else {
            return Ok(None);
        };
        Ok(self.read_index(commit)?.map(|raw| {
            format!(
                "store index sha256 {}",
                hex::encode(sha2::Sha256::digest(&raw))
            )
        }))
    }

    fn get(&self, commit: &[u8], path: &[u8]) -> Result<Option<Arc<FileVersion>>, SourceError> {
        let Some(commit) = plain_commit(commit) else {
            return Ok(None);
        };
        let Some(path) = plain_path(path) else {
            return Ok(None);
        };
        let Some(id) = self.blob_id(commit, path)? else {
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

    /// The id of a snapshot is the digest of its index: another index (a path more or
    /// less) is another id, and no index is no id.
    #[test]
    fn a_snapshot_is_named_by_its_index_digest() {
        use sha2::Digest;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let store = Store::open("memory:").unwrap();
        let src = rt.block_on(async { StoreSource::new(store.clone()) });
        let (c1, c2) = ("a".repeat(40), "b".repeat(40));
        let idx1 = "0123 a.c\n4567 b.c\n";
        rt.block_on(async {
            for (c, idx) in [(&c1, idx1), (&c2, "0123 a.c\n")] {
                store
                    .put(&format!("commits/{c}.idx"), Bytes::from(idx))
                    .await
                    .unwrap();
            }
        });
        std::thread::spawn(move || {
            let want = format!(
                "store index sha256 {}",
                hex::encode(sha2::Sha256::digest(idx1))
            );
            assert_eq!(src.tree_id(c1.as_bytes()).unwrap(), Some(want));
            assert_ne!(
                src.tree_id(c2.as_bytes()).unwrap(),
                src.tree_id(c1.as_bytes()).unwrap()
            );
            assert_eq!(src.tree_id("c".repeat(40).as_bytes()).unwrap(), None);
            assert_eq!(src.tree_id(b"../x").unwrap(), None);
        })
        .join()
        .unwrap();
    }

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
