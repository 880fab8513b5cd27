//! A merge task's share of the job's partial (`--partial-out`, contract §10): the
//! shard's spill entries read once more and summed per file version by a
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

use bytes::Bytes;
use covmerge_partial::{Builder, PartialError, RawRow, ShardPartial};
use covmerge_proto::wire::{Failure, FailureKind};

use crate::merge::MergeError;
use crate::source::Source;
use crate::spill::{for_each_block, Block, SpillError};

mod versions;

use versions::Versions;

/// Why a shard's partial could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PartialShardError {
    /// Reading the chunks or the source, as the merge does.
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

impl From<PartialShardError> for Failure {
    fn from(e: PartialShardError) -> Self {
        match e {
            PartialShardError::Merge(m) => Failure::from(m),
            PartialShardError::Utf8 { .. } => Failure::new(FailureKind::Internal, e.to_string()),
            // This worker's temporary files (a full disk): another try may have room.
            PartialShardError::Partial(PartialError::Io { .. }) => {
                Failure::new(FailureKind::Transient, e.to_string())
            }
            PartialShardError::Partial(_) => Failure::new(FailureKind::Internal, e.to_string()),
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
    /// Where the builder's runs go.
    pub(crate) scratch: &'a Path,
    /// Where the shard's four files are written (new or empty).
    pub(crate) out: &'a Path,
}

/// Reads the shard's `chunks` and writes its partial's files (see the module's doc).
pub(crate) fn partial_shard<I>(
    chunks: I,
    source: &dyn Source,
    spec: &PartialShardSpec<'_>,
) -> Result<ShardPartial, PartialShardError>
where
    I: Iterator<Item = Result<(String, Bytes), MergeError>>,
{
    let mut b = Builder::for_shard(spec.shard, spec.shards, spec.limit, spec.scratch)?;
    let mut versions = Versions::new((spec.limit / 8).max(1 << 20));
    for chunk in chunks {
        let (name, bytes) = chunk?;
        let mut failed: Option<PartialShardError> = None;
        let r = for_each_block(&bytes, |block| {
            match add_block(&mut b, &mut versions, source, &name, &block) {
                Ok(()) => Ok(()),
                Err(e) => {
                    failed = Some(e);
                    Err(SpillError {
                        offset: 0,
                        what: "stopped",
                    })
                }
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        r.map_err(|source| MergeError::Spill {
            chunk: name.clone(),
            source,
        })?;
    }
    Ok(b.finish_shard(spec.out)?)
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
    let text = |i: u32, what| {
        std::str::from_utf8(block.strings[i as usize]).map_err(|_| PartialShardError::Utf8 {
            chunk: chunk.to_owned(),
            what,
        })
    };
    // Entries come in runs of one (file, commit): one lookup per run.
    let mut last: Option<LastRun> = None;
    for &(k, v) in &block.entries {
        let e = Entry {
            path: text(k.file, "path")?,
            commit: text(k.commit, "commit")?,
            func: text(k.func, "function")?,
            manager: text(k.manager, "manager")?,
        };
        let version = || -> Result<Option<Arc<str>>, PartialShardError> {
            match &last {
                Some((at, v)) if *at == (k.file, k.commit) => Ok(v.clone()),
                _ => {
                    let v = versions.get(source, e.path, e.commit)?;
                    last = Some(((k.file, k.commit), v.clone()));
                    Ok(v)
                }
            }
        };
        add(b, &e, k.sl, v.hits, v.rows, version)?;
    }
    Ok(())
}

/// The names of one spill entry, as text.
struct Entry<'a> {
    path: &'a str,
    commit: &'a str,
    func: &'a str,
    manager: &'a str,
}

/// Adds one spill entry (`sl`, `hits`, `rows`) to `b`; `version` finds the version of
/// the entry's (file, commit) when one is needed.
fn add(
    b: &mut Builder,
    e: &Entry<'_>,
    sl: u32,
    hits: u64,
    rows: u64,
    mut version: impl FnMut() -> Result<Option<Arc<str>>, PartialShardError>,
) -> Result<(), PartialShardError> {
    if sl == 0 {
        b.add_without_line(e.path, rows)?;
        return Ok(());
    }
    if e.manager.is_empty() {
        if e.func.is_empty() {
            b.add_without_version(e.path, rows, hits)?;
        } else if let Some(v) = version()? {
            b.add_vote(e.path, &v, e.commit, sl, e.func, rows)?;
        }
        // A vote of a version the source lacks: its rows were counted without version
        // where they came from; the vote itself counts nothing.
        return Ok(());
    }
    if rows == 0 {
        return Ok(());
    }
    let v = version()?;
    b.add(&RawRow {
        path: e.path,
        commit: e.commit,
        version: v.as_deref(),
        manager: e.manager,
        func_name: e.func,
        line: sl,
        hits,
        rows,
    })?;
    Ok(())
}
