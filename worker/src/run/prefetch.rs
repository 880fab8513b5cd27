//! A merge task's spill chunks, fetched ahead of the merge several at a time.
//!
//! A store 10–50 ms away made a merge wait one round trip per chunk, one after the
//! other: with splits × shards chunks of a few KB, the fleet was 4.8× slower at 20 ms
//! than on loopback. Here up to [`REQUESTS`] ranged reads are in flight at
//! once while the merge works through the chunks that have arrived, in their order,
//! and what is fetched but not yet merged stays under the task's prefetch share
//! (at most 32 MiB; see `budget`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use covmerge_proto::wire::ChunkRef;
use covmerge_storage::Store;
use covmerge_telemetry::metrics;
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::cancel::ABANDONED;
use crate::merge::MergeError;
use crate::thread::Cancel;

/// Ranged reads in flight at once (their bytes bounded by the prefetch share). Every
/// spill object holds a chunk of every shard, so on big jobs chunks are small: a
/// quarter's 8 MiB spill objects over 256 shards make chunks of ~32 KiB, and the
/// merge's wait is the round trips, not the bytes: 8 in flight left a quarter's
/// merge phase waiting ~34 minutes at 20 ms a request, 32 about 8.
pub(super) const REQUESTS: usize = 32;

type Fetched = (
    Result<(String, Bytes), MergeError>,
    Option<OwnedSemaphorePermit>,
);

/// The chunks of one merge task, in order, as they arrive. Dropping it stops the
/// fetching.
pub(super) struct Prefetch {
    rx: tokio::sync::mpsc::Receiver<Fetched>,
    task: tokio::task::JoinHandle<()>,
    /// Chunks not yet handed over.
    left: usize,
}

impl Prefetch {
    /// Starts fetching `chunks` from `store` on `rt`, at most `ahead` bytes ahead of
    /// the merge (a larger chunk is fetched alone); stops (with an "abandoned" error)
    /// when `cancel` is set.
    pub(super) fn start(
        rt: &tokio::runtime::Handle,
        store: Store,
        chunks: Vec<ChunkRef>,
        ahead: usize,
        cancel: Cancel,
    ) -> Prefetch {
        let (tx, rx) = tokio::sync::mpsc::channel::<Fetched>(REQUESTS);
        let left = chunks.len();
        let task = rt.spawn(async move {
            let kib_budget = u32::try_from(ahead >> 10).unwrap_or(u32::MAX).max(1);
            let budget = Arc::new(Semaphore::new(kib_budget as usize));
            let fetches = futures::stream::iter(chunks)
                .map(|c| {
                    let (store, budget) = (store.clone(), budget.clone());
                    async move {
                        let kib = u32::try_from((c.len >> 10) + 1)
                            .unwrap_or(u32::MAX)
                            .min(kib_budget);
                        let permit = budget.acquire_many_owned(kib).await.ok();
                        let r = store
                            .get_range(&c.key, c.range())
                            .await
                            .map(|b| {
                                metrics().bytes_read("chunk", b.len() as u64);
                                (c.to_string(), b)
                            })
                            .map_err(|e| MergeError::Fetch {
                                chunk: c.to_string(),
                                message: e.to_string(),
                                transient: e.is_transient(),
                            });
                        (r, permit)
                    }
                })
                .buffered(REQUESTS);
            futures::pin_mut!(fetches);
            loop {
                let next = tokio::select! {
                    n = fetches.next() => n,
                    _ = async {
                        while !cancel.is_cancelled() {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    } => Some((
                        Err(MergeError::Fetch {
                            chunk: "(next chunk)".into(),
                            message: ABANDONED.into(),
                            transient: true,
                        }),
                        None,
                    )),
                };
                let Some(item) = next else { break };
                let failed = item.0.is_err();
                if tx.send(item).await.is_err() || failed {
                    break;
                }
            }
        });
        Prefetch { rx, task, left }
    }
}

impl Iterator for Prefetch {
    type Item = Result<(String, Bytes), MergeError>;

    /// Waits for the next chunk (called from the merge's own thread, not the
    /// runtime's). Its share of the budget is released as it is handed over.
    fn next(&mut self) -> Option<Self::Item> {
        self.left = self.left.saturating_sub(1);
        self.rx.blocking_recv().map(|(r, _permit)| r)
    }

    /// The chunks not yet handed over (fewer if fetching fails or is abandoned).
    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

impl Drop for Prefetch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
