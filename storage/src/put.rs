//! Writing objects: whole puts, create-only puts, conditional writes against a
//! version read ([`Store::get_versioned`], [`Store::put_if`]), and deletes.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use futures::StreamExt;
use object_store::{
    path::Path, GetOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    UpdateVersion,
};

use crate::error::http_status;
use crate::{Atomicity, ObjectVersion, Store, StoreError};

impl Store {
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
}
