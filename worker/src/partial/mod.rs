//! A merge task's share of the job's partial (`--partial-out`, contract §10): the
//! shard's spill entries, shown to a [`ShardFeed`] as the merge reads them
//! ([`crate::merge::BlockSink`]), summed per file version by a
//! [`covmerge_partial::Builder`] of that one shard, whose four files are exactly those
//! a builder of the whole job's rows would write for it.
//!
//! Each entry turns back into what it stands for (the shared design of partial rows in
//! the merge): a manager's row with a line gets its version, git's blob id of the
//! source's text of (file, commit), or none when the source has no such file; an entry
//! with an empty manager is a partial's own row read back: with a function a vote
//! (`funcs`), without one rows without version; line 0 is rows without line (the path
//! listed even with none).

use std::path::Path;
use std::sync::Arc;

use covmerge_partial::{Builder, IdRow, PartialError, ShardPartial};

use crate::merge::{BlockSink, MergeError};
use crate::source::Source;
use crate::spill::Block;

mod versions;

use versions::Versions;

/// Why a shard's partial could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PartialShardError {
    /// Reading the source, as the merge does.
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// An entry whose names are not UTF-8 (a split refuses such rows: a chunk of
    /// another build).
    #[error("spill chunk {chunk}: a name that is not UTF-8 ({what})")]
    Utf8 {
        /// The chunk.
        chunk: String,
        /// Which name.
        what: &'static str,
    },
    /// Writing the partial's files.
    #[error("writing the shard's partial: {0}")]
    Partial(#[from] PartialError),
}

impl From<PartialShardError> for covmerge_proto::wire::Failure {
    fn from(e: PartialShardError) -> Self {
        MergeError::from(e).into()
    }
}

impl From<PartialShardError> for MergeError {
    fn from(e: PartialShardError) -> Self {
        // This worker's temporary files: another try may write them, but a full (or
        // read-only) disk fails the task at once, saying so and what to do (README,
        // "Scratch disk": not retried).
        let (transient, advice) = match &e {
            PartialShardError::Partial(PartialError::Io { cause, .. }) => {
                let advice = covmerge_storage::disk_advice(cause);
                (advice.is_none(), advice)
            }
            _ => (false, None),
        };
        match e {
            PartialShardError::Merge(m) => m,
            e => MergeError::Partial {
                message: match advice {
                    Some(a) => format!("{e}: {a}"),
                    None => e.to_string(),
                },
                transient,
            },
        }
    }
}

/// Where and how a shard's partial is built.
#[derive(Debug, Clone)]
pub(crate) struct PartialShardSpec<'a> {
    /// The shard.
    pub(crate) shard: u32,
    /// The job's shards (the partial's).
    pub(crate) shards: u32,
    /// Bytes of sums the builder holds before it spills a run; the versions found are
    /// held within an eighth of it beside.
    pub(crate) limit: usize,
    /// Bytes the roll-up of the builder's runs may hold at the end, when the merge
    /// that fed it is done (its task's share; the limit at least).
    pub(crate) finish_budget: usize,
    /// Where the builder's runs go.
    pub(crate) scratch: &'a Path,
}

/// The builder of a shard's partial, fed the shard's blocks (see the module's doc).
pub(crate) struct ShardFeed<'s> {
    b: Builder,
    versions: Versions,
    source: &'s dyn Source,
}

impl<'s> ShardFeed<'s> {
    /// A feed of `spec`'s shard, finding versions in `source`.
    pub(crate) fn new(
        source: &'s dyn Source,
        spec: &PartialShardSpec<'_>,
    ) -> Result<Self, PartialShardError> {
        let mut b = Builder::for_shard(spec.shard, spec.shards, spec.limit, spec.scratch)?;
        b.set_rollup_budget(spec.finish_budget);
        Ok(ShardFeed {
            b,
            versions: Versions::new((spec.limit / 8).max(1 << 20)),
            source,
        })
    }

    /// Writes the shard's four files into `out` (new or empty).
    pub(crate) fn finish(self, out: &Path) -> Result<ShardPartial, PartialShardError> {
        Ok(self.b.finish_shard(out)?)
    }
}

/// Reads the shard's `chunks` (no merge reading them: a roll-up of raw rows) and
/// writes its partial's four files into `out` (new or empty).
pub(crate) fn partial_shard<I>(
    chunks: I,
    source: &dyn Source,
    spec: &PartialShardSpec<'_>,
    out: &Path,
) -> Result<ShardPartial, PartialShardError>
where
    I: Iterator<Item = Result<(String, bytes::Bytes), MergeError>>,
{
    let mut feed = ShardFeed::new(source, spec)?;
    for chunk in chunks {
        let (name, bytes) = chunk?;
        let mut failed: Option<MergeError> = None;
        let r = crate::spill::for_each_block(&bytes, |block| {
            feed.block(&name, &block).map_err(|e| {
                failed = Some(e);
                crate::spill::SpillError {
                    offset: 0,
                    what: "stopped",
                }
            })
        });
        if let Some(e) = failed {
            return Err(e.into());
        }
        r.map_err(|source| MergeError::Spill {
            chunk: name.clone(),
            source,
        })?;
    }
    feed.finish(out)
}

impl BlockSink for ShardFeed<'_> {
    fn block(&mut self, chunk: &str, block: &Block<'_>) -> Result<(), MergeError> {
        add_block(&mut self.b, &mut self.versions, self.source, chunk, block)
            .map_err(MergeError::from)
    }
}

/// Builder ids of a block's strings, each mapped (and checked as UTF-8) once per block
/// while the builder's ids hold (no run written since).
struct BlockIds<'a, 'b> {
    block: &'b Block<'a>,
    chunk: &'b str,
    ids: Vec<u32>,
    /// Strings found UTF-8 already.
    checked: Vec<bool>,
    runs: usize,
}

/// Not mapped yet.
const UNMAPPED: u32 = u32::MAX;

impl<'a, 'b> BlockIds<'a, 'b> {
    fn new(block: &'b Block<'a>, chunk: &'b str, b: &Builder) -> Self {
        BlockIds {
            block,
            chunk,
            ids: vec![UNMAPPED; block.strings.len()],
            checked: vec![false; block.strings.len()],
            runs: b.runs(),
        }
    }

    /// Forgets the ids when the builder has written a run since they were made.
    fn refresh(&mut self, b: &Builder) {
        if b.runs() != self.runs {
            self.ids.fill(UNMAPPED);
            self.runs = b.runs();
        }
    }

    /// The text of string `i` of the block.
    fn text(&self, i: u32, what: &'static str) -> Result<&'a str, PartialShardError> {
        std::str::from_utf8(self.block.strings[i as usize]).map_err(|_| PartialShardError::Utf8 {
            chunk: self.chunk.to_owned(),
            what,
        })
    }

    /// Checks that string `i` of the block is UTF-8 (once per block).
    fn check(&mut self, i: u32, what: &'static str) -> Result<(), PartialShardError> {
        if !self.checked[i as usize] {
            self.text(i, what)?;
            self.checked[i as usize] = true;
        }
        Ok(())
    }

    /// The builder id of string `i` of the block.
    fn id(
        &mut self,
        b: &mut Builder,
        i: u32,
        what: &'static str,
    ) -> Result<u32, PartialShardError> {
        let id = self.ids[i as usize];
        if id != UNMAPPED {
            return Ok(id);
        }
        let id = b.intern(self.text(i, what)?);
        self.ids[i as usize] = id;
        Ok(id)
    }
}

/// The (file, commit) of the last run of a block and its version.
type LastRun = ((u32, u32), Option<Arc<str>>);

/// Adds the entries of one block of chunk `chunk`.
fn add_block(
    b: &mut Builder,
    versions: &mut Versions,
    source: &dyn Source,
    chunk: &str,
    block: &Block<'_>,
) -> Result<(), PartialShardError> {
    let mut ids = BlockIds::new(block, chunk, b);
    // Entries come in runs of one (file, commit): one lookup per run; the version's
    // builder id held while the builder's ids hold.
    let mut last: Option<LastRun> = None;
    let mut last_id: Option<(usize, u32)> = None;
    for &(k, v) in &block.entries {
        ids.refresh(b);
        let (sl, hits, rows) = (k.sl, v.hits, v.rows);
        // Every name of an entry must be UTF-8, checked in this order.
        let path = ids.id(b, k.file, "path")?;
        ids.check(k.commit, "commit")?;
        ids.check(k.func, "function")?;
        ids.check(k.manager, "manager")?;
        if sl == 0 {
            b.add_without_line_id(path, rows)?;
            continue;
        }
        let manager_empty = block.strings[k.manager as usize].is_empty();
        let func_empty = block.strings[k.func as usize].is_empty();
        if manager_empty && func_empty {
            b.add_without_version_id(path, rows, hits)?;
            continue;
        }
        if !manager_empty && rows == 0 {
            continue;
        }
        let at = (k.file, k.commit);
        let version = match &last {
            Some((a, v)) if *a == at => v.clone(),
            _ => {
                let p = ids.text(k.file, "path")?;
                let c = ids.text(k.commit, "commit")?;
                let v = versions.get(source, p, c)?;
                last = Some((at, v.clone()));
                last_id = None;
                v
            }
        };
        let Some(version) = version else {
            if !manager_empty {
                b.add_without_version_id(path, rows, hits)?;
            }
            // A vote of a version the source lacks: its rows were counted without
            // version where they came from; the vote itself counts nothing.
            continue;
        };
        let version = match last_id {
            Some((runs, id)) if runs == b.runs() => id,
            _ => {
                let id = b.intern(&version);
                last_id = Some((b.runs(), id));
                id
            }
        };
        let r = IdRow {
            path,
            commit: ids.id(b, k.commit, "commit")?,
            version,
            manager: ids.id(b, k.manager, "manager")?,
            func_name: ids.id(b, k.func, "function")?,
            line: sl,
            hits,
            rows,
        };
        if manager_empty {
            b.add_vote_ids(&r)?;
        } else {
            b.add_ids(&r)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full scratch disk under the partial's builder was retried (5 attempts, the
    /// task dead-lettered) and said nothing of what to do. It now fails at once with
    /// the disk's advice (`PartialError::written` makes Parquet's wrapped one the same).
    #[test]
    fn a_full_disk_under_the_partial_builder_was_retried_without_advice() {
        let path = std::path::PathBuf::from("/tmp/x/run-00001/lines-00000.parquet");
        let full = PartialError::Io {
            path: path.clone(),
            cause: std::io::Error::from(std::io::ErrorKind::StorageFull),
        };
        let m = MergeError::from(PartialShardError::Partial(full));
        let MergeError::Partial { message, transient } = m else {
            panic!("{m:?}");
        };
        assert!(!transient, "{message}");
        assert!(message.contains("a retry cannot help"), "{message}");
        assert!(message.contains("lines-00000.parquet"), "{message}");
        // Another I/O error may pass on another try.
        let other = PartialError::Io {
            path,
            cause: std::io::Error::from(std::io::ErrorKind::Interrupted),
        };
        let m = MergeError::from(PartialShardError::Partial(other));
        assert!(
            matches!(
                m,
                MergeError::Partial {
                    transient: true,
                    ..
                }
            ),
            "{m:?}"
        );
    }
}
