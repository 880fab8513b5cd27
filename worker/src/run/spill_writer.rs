//! A split's spill objects, few and large: the flushes of a split (one at the end of
//! each of its inputs, more when an input outgrows the split's memory) are gathered
//! by shard and written together once they reach [`TARGET_BYTES`], so that a split of
//! many small inputs writes one object whose every shard is one chunk, not one object
//! and one chunk per input and shard. A chunk may hold several blocks, one after the
//! other; the merge reads them in turn.
//!
//! Every store request costs a round trip: a job of 100 small inputs and 16 shards
//! made 1,400 chunk reads in its merge phase, each one a round trip to a bucket tens
//! of milliseconds away. And a write is not waited for: objects are written by a
//! thread of their own while the split reads on, one at a time (a parse thread with
//! the next object ready waits for the one being written), so a split of a large
//! input pays the store's latency once, for its last object, not once per object.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Mutex;
use std::thread::{Scope, ScopedJoinHandle};

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

/// What the writing thread did: the chunks written, or the first error (nothing is
/// written after it).
#[derive(Default)]
struct Written {
    chunks: Vec<(ShardId, ChunkRef)>,
    failed: Option<SplitError>,
}

/// Gathers a split's flushes and writes them as spill objects through `write` (which
/// stores one object and returns its key) on a thread of the scope it was started in.
pub(super) struct SpillWriter<'s> {
    pending: Mutex<Pending>,
    target: usize,
    /// To the writing thread; a rendezvous channel: a hand-off waits for the object
    /// being written, so one object at most is in flight beside the split's tables.
    to_writer: Mutex<Option<SyncSender<Flush>>>,
    writer: Mutex<Option<ScopedJoinHandle<'s, ()>>>,
    written: &'s Mutex<Written>,
}

/// The writing thread's state, outliving the scope's threads (create it before the
/// scope, pass it to [`SpillWriter::start`]).
#[derive(Default)]
pub(super) struct SpillState(Mutex<Written>);

impl<'s> SpillWriter<'s> {
    /// A writer for a split whose memory budget is `split_budget` bytes, writing on a
    /// thread of `scope`.
    pub(super) fn start<'e>(
        scope: &'s Scope<'s, 'e>,
        state: &'s SpillState,
        write: &'s (dyn Fn(Flush) -> Result<String, SplitError> + Sync),
        split_budget: usize,
    ) -> Self {
        let (tx, rx) = sync_channel::<Flush>(0);
        let written = &state.0;
        let writer = scope.spawn(move || {
            for flush in rx {
                if written.lock().unwrap().failed.is_some() {
                    continue;
                }
                let chunks = flush.chunks.clone();
                match write(flush) {
                    Ok(key) => written
                        .lock()
                        .unwrap()
                        .chunks
                        .extend(chunks.into_iter().map(|(shard, r)| {
                            (
                                shard,
                                ChunkRef {
                                    key: key.clone(),
                                    start: r.start as u64,
                                    len: r.len() as u64,
                                },
                            )
                        })),
                    Err(e) => written.lock().unwrap().failed = Some(e),
                }
            }
        });
        SpillWriter {
            pending: Mutex::default(),
            target: (split_budget / 4).clamp(64 << 10, TARGET_BYTES),
            to_writer: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            written,
        }
    }

    /// The writing thread's error, if it met one (then the split stops).
    fn failed(&self) -> Result<(), SplitError> {
        match &self.written.lock().unwrap().failed {
            None => Ok(()),
            Some(e) => Err(copy(e)),
        }
    }

    fn store(&self, flush: Flush) -> Result<(), SplitError> {
        self.failed()?;
        if flush.chunks.is_empty() {
            return Ok(());
        }
        let tx = self.to_writer.lock().unwrap().clone();
        if let Some(tx) = tx {
            // Fails only once the thread is gone, which it is not before `finish`.
            let _ = tx.send(flush);
        }
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
            None => self.failed(),
        }
    }

    /// Writes what is gathered, waits for every write, and returns every chunk
    /// written, sorted (or the first error).
    pub(super) fn finish(self) -> Result<Vec<(ShardId, ChunkRef)>, SplitError> {
        let rest = self.pending.lock().unwrap().take();
        self.store(rest)?;
        self.to_writer.lock().unwrap().take();
        if let Some(w) = self.writer.lock().unwrap().take() {
            if let Err(panic) = w.join() {
                std::panic::resume_unwind(panic);
            }
        }
        let mut written = std::mem::take(&mut *self.written.lock().unwrap());
        if let Some(e) = written.failed {
            return Err(e);
        }
        written.chunks.sort();
        Ok(written.chunks)
    }
}

/// The writing thread's error, for each parse thread that asks (the first keeps it).
fn copy(e: &SplitError) -> SplitError {
    match e {
        SplitError::Emit { message, transient } => SplitError::Emit {
            message: message.clone(),
            transient: *transient,
        },
        other => SplitError::Emit {
            message: other.to_string(),
            transient: false,
        },
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
        let state = SpillState::default();
        let chunks = std::thread::scope(|s| {
            let w = SpillWriter::start(s, &state, &write, 64 << 20);
            w.add(flush(&[(0, b"a1"), (2, b"c1")])).unwrap();
            w.add(flush(&[(1, b"b2"), (2, b"c2")])).unwrap();
            w.add(Flush::default()).unwrap();
            w.finish().unwrap()
        });
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
        let state = SpillState::default();
        std::thread::scope(|s| {
            let w = SpillWriter::start(s, &state, &write, 64 << 20);
            w.add(flush(&[(3, &big)])).unwrap();
            assert_eq!(w.finish().unwrap().len(), 1);
        });
        assert_eq!(*n.lock().unwrap(), 1, "no object for an empty rest");
    }

    /// The split read on while an object was being written: `add` returned before the
    /// write it handed off ended, and `finish` waited for it.
    #[test]
    fn the_split_reads_on_while_an_object_is_written() {
        let (release, held) = std::sync::mpsc::channel::<()>();
        let held = Mutex::new(held);
        let done = std::sync::atomic::AtomicU32::new(0);
        let write = |_: Flush| -> Result<String, SplitError> {
            held.lock().unwrap().recv().unwrap();
            done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok("k".into())
        };
        let big = vec![7u8; TARGET_BYTES];
        let state = SpillState::default();
        let chunks = std::thread::scope(|s| {
            let w = SpillWriter::start(s, &state, &write, 64 << 20);
            w.add(flush(&[(1, &big)])).unwrap();
            w.add(flush(&[(2, b"small")])).unwrap();
            assert_eq!(
                done.load(std::sync::atomic::Ordering::SeqCst),
                0,
                "add waited for the store"
            );
            release.send(()).unwrap();
            release.send(()).unwrap();
            w.finish().unwrap()
        });
        assert_eq!(done.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert_eq!(chunks.len(), 2);
    }

    /// A write that failed stops the split: the next `add` that would write, or
    /// `finish`, returns the store's error, and nothing after it is written.
    #[test]
    fn a_failed_write_fails_the_split_and_nothing_is_written_after_it() {
        let n = std::sync::atomic::AtomicU32::new(0);
        let write = |_: Flush| -> Result<String, SplitError> {
            n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(SplitError::Emit {
                message: "bucket said no".into(),
                transient: true,
            })
        };
        let big = vec![7u8; TARGET_BYTES];
        let state = SpillState::default();
        let err = std::thread::scope(|s| {
            let w = SpillWriter::start(s, &state, &write, 64 << 20);
            let mut first = None;
            for _ in 0..4 {
                if let Err(e) = w.add(flush(&[(1, &big)])) {
                    first = Some(e);
                    break;
                }
            }
            let end = w.finish();
            first.or(end.err()).expect("the failure reached the split")
        });
        assert!(err.to_string().contains("bucket said no"), "{err}");
        assert!(matches!(
            err,
            SplitError::Emit {
                transient: true,
                ..
            }
        ));
        assert_eq!(n.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
