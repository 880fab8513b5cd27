//! A merge task's shard of each partial the job reads directly (contract §10): a
//! partial of the job's shard count holds, in its shard `S`, the rows of exactly the
//! paths of the job's shard `S` (the shuffle's file hash), so the merge of shard `S`
//! reads that shard's four files itself (from a local directory or, one shard's files
//! copied down, from a store prefix), each checked against the description's size and
//! SHA-256, instead of split tasks re-shuffling the whole partial.
//!
//! The partials' shard files are fetched up to `FETCH_AHEAD` partials at once while
//! the earlier ones are decoded (`partial_ahead`): the reads are small GETs whose
//! latency, one after the other, was most of a task's time.
//!
//! Its rows become the same spill entries a split makes of them (`split::rows`),
//! written once to a temporary file, and are handed to the merge after its chunks,
//! one block at a time, for each pass of the merge.

use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Mutex;

use bytes::Bytes;
use covmerge_proto::input::{InputFormat, InputSpec};
use covmerge_proto::wire::MergeTask;

use super::failure::TaskError;
use crate::merge::MergeError;
use crate::split::rows::split_rows;
use crate::split::{Flush, SplitError, SplitSettings};

/// The spill blocks of a merge task's shard of its direct partials: a temporary file
/// and each block's byte range and name.
pub(super) struct DirectChunks {
    file: Option<Mutex<std::fs::File>>,
    chunks: Vec<(String, u64, u64)>,
}

impl DirectChunks {
    /// Reads shard `t.shard` of each of `t.partials` (a job of `shards` shards and
    /// `--namespace` `namespace`, whose groups are `groups`) into spill blocks, holding
    /// at most `budget` bytes of entries at once.
    pub(super) fn read(
        t: &MergeTask,
        shards: u32,
        namespace: Option<&str>,
        groups: crate::input::Groups,
        budget: usize,
        rt: &tokio::runtime::Handle,
    ) -> Result<DirectChunks, TaskError> {
        let mut out = DirectChunks {
            file: None,
            chunks: Vec::new(),
        };
        if t.partials.is_empty() {
            return Ok(out);
        }
        let scratch = |e: std::io::Error| TaskError::from(MergeError::Scratch(e));
        let file = Mutex::new(tempfile::tempfile().map_err(scratch)?);
        let spec = InputSpec {
            format: InputFormat::Partial,
            ..InputSpec::default()
        };
        // The partials' shard files are fetched several at once, ahead of the one
        // decoded; the blocks are still made one partial after the other, in order.
        use crate::input::formats::partial_ahead::{open_partial_shards_ahead, FETCH_AHEAD};
        let planned = t.partials.iter();
        let planned = planned.map(|p| (p.input.clone(), p.description_sha256.clone()));
        let mut opened =
            open_partial_shards_ahead(planned.collect(), rt, t.shard.0, shards, FETCH_AHEAD);
        for p in &t.partials {
            let rows = opened
                .next()
                .expect("one opening a partial")
                .map_err(|e| TaskError::from(SplitError::Read(e)))?;
            let settings = SplitSettings {
                shards,
                max_bad_rows: u64::MAX,
                memory_budget: budget,
                threads: 1,
                groups: groups.clone(),
            };
            let found: Mutex<Vec<(String, u64, u64)>> = Mutex::new(Vec::new());
            let emit = |flush: Flush| -> Result<(), SplitError> {
                let mut f = file.lock().unwrap();
                let mut found = found.lock().unwrap();
                // The reader refused a path of another shard before its rows got here.
                for (_, range) in flush.chunks.iter().filter(|(s, _)| *s == t.shard) {
                    let start = f.stream_position().map_err(scratch_split)?;
                    f.write_all(&flush.bytes[range.clone()])
                        .map_err(scratch_split)?;
                    let name = format!(
                        "partial {} shard {} block {}",
                        p.input,
                        t.shard,
                        found.len()
                    );
                    found.push((name, start, range.len() as u64));
                }
                Ok(())
            };
            split_rows(&p.input, rows, &spec, namespace, settings, &emit)?;
            out.chunks.extend(found.into_inner().unwrap());
        }
        out.file = Some(file);
        Ok(out)
    }

    /// The blocks, in order, read from the temporary file one at a time.
    pub(super) fn iter(&self) -> impl Iterator<Item = Result<(String, Bytes), MergeError>> + '_ {
        self.chunks.iter().map(move |(name, start, len)| {
            let file = self.file.as_ref().expect("blocks are in a file");
            let mut f = file.lock().unwrap();
            let mut buf = vec![0u8; *len as usize];
            f.seek(SeekFrom::Start(*start))
                .and_then(|_| f.read_exact(&mut buf))
                .map_err(MergeError::Scratch)?;
            Ok((name.clone(), Bytes::from(buf)))
        })
    }
}

fn scratch_split(e: std::io::Error) -> SplitError {
    SplitError::Emit {
        message: format!("the temporary file of a partial's shard: {e}"),
        transient: true,
    }
}
