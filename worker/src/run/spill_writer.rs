//! A split's spill objects, few and large: the flushes of a split (one at the end of
//! each of its inputs, more when an input outgrows the split's memory) are gathered
//! by shard and written together once they reach [`TARGET_BYTES`], so that a split of
//! many small inputs writes one object whose every shard is one chunk, not one object
//! and one chunk per input and shard. A chunk may hold several blocks, one after the
//! other; the merge reads them in turn.
//!
//! Every store request costs a round trip: a job of 100 small inputs and 16 shards
//! made 1,400 chunk reads in its merge phase, each one a round trip to a bucket tens
//! of milliseconds away.

use std::sync::Mutex;

use covmerge_proto::wire::ChunkRef;
use covmerge_proto::ShardId;

use crate::split::{Flush, SplitError};

/// Flushes are gathered until they hold this many bytes (or a quarter of the split's
/// memory budget, if less); a larger flush is written as it is.
pub(super) const TARGET_BYTES: usize = 8 << 20;

#[derive(Default)]
struct Pending {
    /// Per shard (sorted by shard): its blocks so far, end to end.
    shards: std::collections::BTreeMap<ShardId, Vec<u8>>,
    bytes: usize,
}

impl Pending {
    fn take(&mut self) -> Flush {
        let mut out = Flush::default();
        for (shard, bytes) in std::mem::take(&mut self.shards) {
            out.push(shard, |b| b.extend_from_slice(&bytes));
        }
        self.bytes = 0;
        out
    }
}

/// Gathers a split's flushes and writes them as spill objects through `write`, which
/// stores one object and returns its key.
pub(super) struct SpillWriter<'a> {
    pending: Mutex<Pending>,
    chunks: Mutex<Vec<(ShardId, ChunkRef)>>,
    write: &'a (dyn Fn(Flush) -> Result<String, SplitError> + Sync),
    target: usize,
}

impl<'a> SpillWriter<'a> {
    /// A writer for a split whose memory budget is `split_budget` bytes.
    pub(super) fn new(
        write: &'a (dyn Fn(Flush) -> Result<String, SplitError> + Sync),
        split_budget: usize,
    ) -> Self {
        SpillWriter {
            pending: Mutex::default(),
            chunks: Mutex::default(),
            write,
            target: (split_budget / 4).clamp(64 << 10, TARGET_BYTES),
        }
    }

    fn store(&self, flush: Flush) -> Result<(), SplitError> {
        if flush.chunks.is_empty() {
            return Ok(());
        }
        let chunks = flush.chunks.clone();
        let key = (self.write)(flush)?;
        self.chunks
            .lock()
            .unwrap()
            .extend(chunks.into_iter().map(|(shard, r)| {
                (
                    shard,
                    ChunkRef {
                        key: key.clone(),
                        start: r.start as u64,
                        len: r.len() as u64,
                    },
                )
            }));
        Ok(())
    }

    /// Takes one flush of the split (called from its parse threads).
    pub(super) fn add(&self, flush: Flush) -> Result<(), SplitError> {
        if flush.bytes.len() >= self.target {
            return self.store(flush);
        }
        let full = {
            let mut p = self.pending.lock().unwrap();
            for (shard, r) in &flush.chunks {
                p.shards
                    .entry(*shard)
                    .or_default()
                    .extend_from_slice(&flush.bytes[r.clone()]);
            }
            p.bytes += flush.bytes.len();
            (p.bytes >= self.target).then(|| p.take())
        };
        match full {
            Some(f) => self.store(f),
            None => Ok(()),
        }
    }

    /// Writes what is gathered and returns every chunk written, sorted.
    pub(super) fn finish(self) -> Result<Vec<(ShardId, ChunkRef)>, SplitError> {
        let rest = self.pending.lock().unwrap().take();
        self.store(rest)?;
        let mut chunks = self.chunks.into_inner().unwrap();
        chunks.sort();
        Ok(chunks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flush(parts: &[(u32, &[u8])]) -> Flush {
        let mut f = Flush::default();
        for (s, b) in parts {
            f.push(ShardId(*s), |out| out.extend_from_slice(b));
        }
        f
    }

    #[test]
    fn small_flushes_become_one_object_with_one_chunk_per_shard() {
        let objects: Mutex<Vec<Vec<u8>>> = Mutex::default();
        let write = |f: Flush| -> Result<String, SplitError> {
            let mut o = objects.lock().unwrap();
            o.push(f.bytes);
            Ok(format!("obj{}", o.len() - 1))
        };
        let w = SpillWriter::new(&write, 64 << 20);
        w.add(flush(&[(0, b"a1"), (2, b"c1")])).unwrap();
        w.add(flush(&[(1, b"b2"), (2, b"c2")])).unwrap();
        w.add(Flush::default()).unwrap();
        let chunks = w.finish().unwrap();
        let objects = objects.into_inner().unwrap();
        assert_eq!(objects.len(), 1);
        let read = |c: &ChunkRef| objects[0][c.start as usize..(c.start + c.len) as usize].to_vec();
        let got: Vec<(u32, Vec<u8>)> = chunks.iter().map(|(s, c)| (s.0, read(c))).collect();
        assert_eq!(
            got,
            vec![
                (0, b"a1".to_vec()),
                (1, b"b2".to_vec()),
                (2, b"c1c2".to_vec())
            ]
        );
    }

    #[test]
    fn a_large_flush_is_written_as_it_is_and_nothing_written_for_nothing() {
        let n = Mutex::new(0);
        let write = |_: Flush| -> Result<String, SplitError> {
            *n.lock().unwrap() += 1;
            Ok("k".into())
        };
        let big = vec![7u8; TARGET_BYTES];
        let w = SpillWriter::new(&write, 64 << 20);
        w.add(flush(&[(3, &big)])).unwrap();
        assert_eq!(*n.lock().unwrap(), 1);
        assert_eq!(w.finish().unwrap().len(), 1);
        assert_eq!(*n.lock().unwrap(), 1, "no object for an empty rest");
    }
}
