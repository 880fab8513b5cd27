//! Streamed transfers: many objects read in order with requests in flight ahead,
//! and objects written through a multipart upload from parts of a store
//! ([`Store::concat`], [`Store::copy_from`]) or from a local file
//! ([`Store::put_file`]), appearing whole or not at all.

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStoreExt, WriteMultipart};

use crate::{Store, StoreError, PARTS_AHEAD};

impl Store {
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
            let mut s = crate::get::chunks(r);
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
