//! The map phase: read one input's rows and partition them by the stable file hash
//! ([`covmerge_proto::shard_hash`]) into per-shard spill chunks, pre-aggregating
//! identical (file, commit, func, manager, line) rows on the way. Memory is bounded by
//! a budget: when the builders hold more, every non-empty one is flushed as a chunk.

use std::io::Read;

use covmerge_proto::{
    shard_hash::shard_of,
    spill::{BlockBuilder, RawKey},
    wire::{BadRow, SplitOutcome},
    ShardId,
};

use crate::input::{InputError, RowReader};

/// How a split runs.
#[derive(Debug, Clone, Copy)]
pub struct SplitSettings {
    pub shards: u32,
    /// Stop reading once more than this many bad rows were seen (the job fails anyway).
    pub max_bad_rows: u64,
    /// Bytes the shard builders may hold before they are flushed as chunks.
    pub memory_budget: usize,
}

/// Bad rows reported by name (the count covers all of them).
const BAD_ROW_SAMPLES: usize = 5;

/// Why a split failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("writing spill chunk for shard {shard}: {message}")]
    Emit { shard: ShardId, message: String, transient: bool },
}

struct ShardBuf {
    builder: BlockBuilder,
    // The last strings seen by this shard, to skip hashing runs of equal values.
    last: [(Vec<u8>, u32); 4],
}

impl ShardBuf {
    fn new() -> Self {
        ShardBuf { builder: BlockBuilder::new(), last: Default::default() }
    }

    fn id(&mut self, slot: usize, s: &[u8]) -> u32 {
        let (ref mut bytes, ref mut id) = self.last[slot];
        if bytes.as_slice() == s && *id != u32::MAX {
            return *id;
        }
        let new = self.builder.intern(s);
        bytes.clear();
        bytes.extend_from_slice(s);
        *id = new;
        new
    }

    fn flush(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.builder.finish_into(&mut out);
        for l in &mut self.last {
            l.1 = u32::MAX;
        }
        out
    }
}

/// Splits one input. `emit(shard, chunk)` stores a finished chunk (in order per shard).
/// Rows counted: `rows_in` (every data row) and `rows_bad`; the first bad rows are named.
pub fn split_input<R: Read>(
    name: &str,
    input: R,
    settings: SplitSettings,
    emit: &mut dyn FnMut(ShardId, Vec<u8>) -> Result<(), SplitError>,
) -> Result<SplitOutcome, SplitError> {
    let mut reader = RowReader::new(name, input)?;
    let n = settings.shards.max(1);
    let mut bufs: Vec<ShardBuf> = (0..n).map(|_| ShardBuf::new()).collect();
    let mut outcome = SplitOutcome::default();
    let mut held = 0usize;
    let mut pending_err: Option<SplitError> = None;
    let flush_all = |bufs: &mut Vec<ShardBuf>,
                     emit: &mut dyn FnMut(ShardId, Vec<u8>) -> Result<(), SplitError>|
     -> Result<(), SplitError> {
        for (i, b) in bufs.iter_mut().enumerate() {
            if !b.builder.is_empty() {
                let chunk = b.flush();
                emit(ShardId(i as u32), chunk)?;
            }
        }
        Ok(())
    };
    let mut rows_since_check = 0u32;
    reader.for_each(|line, row| {
        outcome.counts.rows_in += 1;
        let row = match row {
            Ok(r) => r,
            Err(problem) => {
                outcome.counts.rows_bad += 1;
                if outcome.bad_rows.len() < BAD_ROW_SAMPLES {
                    outcome.bad_rows.push(BadRow {
                        input: name.to_string(),
                        line,
                        problem: problem.to_string(),
                    });
                }
                return outcome.counts.rows_bad <= settings.max_bad_rows;
            }
        };
        let shard = shard_of(row.file, n);
        let b = &mut bufs[shard.index()];
        let key = RawKey {
            file: b.id(0, row.file),
            commit: b.id(1, row.commit),
            func: b.id(2, row.func),
            manager: b.id(3, row.manager),
            sl: row.sl,
        };
        b.builder.add(key, row.hits, 1);
        rows_since_check += 1;
        if rows_since_check >= 4096 {
            rows_since_check = 0;
            held = bufs.iter().map(|b| b.builder.approx_bytes()).sum();
            if held > settings.memory_budget {
                if let Err(e) = flush_all(&mut bufs, emit) {
                    pending_err = Some(e);
                    return false;
                }
            }
        }
        true
    })?;
    if let Some(e) = pending_err {
        return Err(e);
    }
    let _ = held;
    flush_all(&mut bufs, emit)?;
    Ok(outcome)
}
