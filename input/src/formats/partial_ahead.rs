//! A merge task's shard of many partials, fetched ahead: reading a partial's shard
//! from a store is a handful of small GETs (its `partial.json`, then its four shard
//! files), so reading 90 of them one after the other is latency, not bytes. Here up
//! to `ahead` partials are opened and their shard's files copied down at once, each
//! on a thread of its own, while the caller decodes the earlier ones; the caller gets
//! them in the order given, each exactly as [`open_partial_shard`](super::open_partial_shard) would have opened
//! it, with the same checks (the planned `partial.json`, the shard count, each file's
//! size while copied, its SHA-256 as read) and the same errors, naming the store's
//! objects.
//!
//! Disk holds at most `ahead` + 1 shards' copies; memory a copy's buffers for each
//! fetch in flight (a 64 KiB buffer and a channel of at most 8 of the store's chunks).

use std::collections::VecDeque;
use std::sync::mpsc;

use super::partial::PartialRows;
use super::partial_store::PartialAt;
use super::{ReadError, RowSource};

/// Partials fetched at once by a merge task unless told otherwise.
pub const FETCH_AHEAD: usize = 8;

/// A partial's shard opened and its files made readable, or why not.
type Opened = Result<Box<dyn RowSource>, ReadError>;

/// Shard `shard` of each of a list of partials, in order, fetched ahead.
pub struct PartialShardsAhead {
    rt: tokio::runtime::Handle,
    shard: u32,
    shards: u32,
    /// The partials not yet started: input and planned `partial.json` SHA-256.
    rest: std::vec::IntoIter<(String, String)>,
    /// The partials started, in order: input and where its opening comes.
    started: VecDeque<(String, mpsc::Receiver<Opened>)>,
}

/// Opens shard `shard` of each of `partials` (input, SHA-256 of the planned
/// `partial.json`) for a merge task of a job of `shards` shards, up to `ahead` (at
/// least 1) fetched at once; the iterator yields them in order (see the module).
/// Dropped early, the fetches in flight finish and their copies are removed.
pub fn open_partial_shards_ahead(
    partials: Vec<(String, String)>,
    rt: &tokio::runtime::Handle,
    shard: u32,
    shards: u32,
    ahead: usize,
) -> PartialShardsAhead {
    let mut out = PartialShardsAhead {
        rt: rt.clone(),
        shard,
        shards,
        rest: partials.into_iter(),
        started: VecDeque::new(),
    };
    for _ in 0..ahead.max(1) {
        out.start_next();
    }
    out
}

impl PartialShardsAhead {
    /// Starts fetching the next partial, if any.
    fn start_next(&mut self) {
        let Some((input, sha)) = self.rest.next() else {
            return;
        };
        let (tx, rx) = mpsc::sync_channel(1);
        let (rt, shard, shards) = (self.rt.clone(), self.shard, self.shards);
        let spawned = std::thread::Builder::new()
            .name("partial-fetch".into())
            .spawn({
                let (input, sha, tx) = (input.clone(), sha.clone(), tx.clone());
                move || {
                    let _ = tx.send(fetched(&input, &rt, shard, shards, &sha));
                }
            });
        if spawned.is_err() {
            // No thread to spare: fetch it here, as a serial read would.
            let _ = tx.send(fetched(&input, &self.rt, shard, shards, &sha));
        }
        self.started.push_back((input, rx));
    }
}

impl Iterator for PartialShardsAhead {
    type Item = Opened;

    fn next(&mut self) -> Option<Opened> {
        let (input, rx) = self.started.pop_front()?;
        self.start_next();
        Some(rx.recv().unwrap_or_else(|_| {
            Err(ReadError::Input {
                input,
                problem: "its fetch stopped without a result".into(),
            })
        }))
    }
}

/// [`open_partial_shard`](super::open_partial_shard) with the shard's files already copied down.
fn fetched(
    input: &str,
    rt: &tokio::runtime::Handle,
    shard: u32,
    shards: u32,
    description_sha256: &str,
) -> Opened {
    let refuse = |problem: String| ReadError::Input {
        input: input.to_string(),
        problem,
    };
    let at =
        PartialAt::open_planned(input, rt, shard, shards, description_sha256).map_err(refuse)?;
    at.fetch(shard).map_err(refuse)?;
    Ok(Box::new(PartialRows::new(input, at, Some(shard))))
}
