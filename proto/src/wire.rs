//! Messages on the queue, MessagePack-encoded (rmp-serde) inside a versioned envelope.
//!
//! A receiver checks the version and the size before anything else: a message from an
//! incompatible release, or one too large to be a task, is *poison* and goes to the
//! dead-letter queue instead of crash-looping a worker.

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::{Attempt, Counts, JobId, ShardId, SplitId, TaskRef};

/// Bumped on any incompatible change to the types below.
///
/// 2: `ReportStatus::Retrying`; job ids and tasks are checked on decode.
/// 3: failures are typed ([`Failure`] with a [`FailureKind`]), not strings.
/// 4: a spill chunk is a byte range of a spill object ([`ChunkRef`]), not a whole one.
/// 5: a merge task carries the job's groups ([`MergeTask::groups`]); a worker of
///    version 4 would drop them and write a part without group records.
/// 6: a split task carries the job's `--namespace` ([`SplitTask::namespace`]); a
///    worker of version 5 would merge every namespace of a shared table.
/// 7: a merge outcome lists its files' base line counts ([`MergeOutcome::base_lines`])
///    and names the base as the worker's source holds it ([`MergeOutcome::source_id`]);
///    the coordinator refuses the merges of a version-6 worker, which reports neither.
/// 8: a split task says how its input is read in one [`crate::input::InputSpec`]
///    ([`SplitTask::read`]: format, manager, commit, options) where version 7 had a
///    `go` field; a worker of version 7 would read every input as `auto`.
/// 9: a merge task lists the partials it reads its shard of directly
///    ([`MergeTask::partials`]); a worker of version 8 would drop their rows.
/// 10: a merge task may be a roll-up's ([`MergeTask::rollup`]): no base, no part, only
///    the shard's partial files; a worker of version 9 would refuse its empty base.
/// 11: a roll-up task of partials alone may name no source and direct partials of
///    any shard count (each read by the shards of it that map to the task's); a
///    worker of version 10 would refuse the one and read the others as its shard.
/// 12: a roll-up task of raw rows and partials reads every partial of the job's
///    namespace directly, whatever its shard count, and rolls the partial files of
///    its raw rows up with theirs (each partial row keeps the partial's version); a
///    worker of version 11 would look those rows' versions up in the source again.
pub const PROTOCOL_VERSION: u16 = 12;

/// Largest message a receiver decodes. A merge task lists its spill chunks; 16 MiB is
/// ~100k chunk keys, far beyond any real job.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

#[derive(Serialize, Deserialize)]
struct Envelope<T> {
    version: u16,
    body: T,
}

/// Why a message could not be decoded. Always permanent: redelivering it cannot help.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The message is larger than any this protocol sends.
    #[error("message of {size} bytes exceeds the cap of {max} bytes")]
    TooLarge {
        /// Bytes of the message.
        size: usize,
        /// The cap, [`MAX_MESSAGE_BYTES`].
        max: usize,
    },
    /// The message was written by a build of another protocol version.
    #[error("protocol version {got}, this build speaks {want}")]
    Version {
        /// The message's version.
        got: u16,
        /// This build's, [`PROTOCOL_VERSION`].
        want: u16,
    },
    /// The bytes are not a message of this protocol.
    #[error("undecodable message: {0}")]
    Decode(String),
    /// The value could not be encoded (a bug).
    #[error("unencodable message: {0}")]
    Encode(String),
}

/// Encodes `body` in a versioned envelope.
pub fn encode<T: Serialize>(body: &T) -> Result<Vec<u8>, WireError> {
    rmp_serde::to_vec_named(&Envelope {
        version: PROTOCOL_VERSION,
        body,
    })
    .map_err(|e| WireError::Encode(e.to_string()))
}

/// Decodes a versioned envelope, checking size and version first.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, WireError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(WireError::TooLarge {
            size: bytes.len(),
            max: MAX_MESSAGE_BYTES,
        });
    }
    #[derive(Deserialize)]
    struct VersionOnly {
        version: u16,
    }
    let v: VersionOnly =
        rmp_serde::from_slice(bytes).map_err(|e| WireError::Decode(e.to_string()))?;
    if v.version != PROTOCOL_VERSION {
        return Err(WireError::Version {
            got: v.version,
            want: PROTOCOL_VERSION,
        });
    }
    let env: Envelope<T> =
        rmp_serde::from_slice(bytes).map_err(|e| WireError::Decode(e.to_string()))?;
    Ok(env.body)
}

pub use crate::partial_shard::{PartialFile, PartialShardOutcome};

/// Work for a worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Task {
    /// Map phase: read one input into spill chunks per shard.
    Split(SplitTask),
    /// Reduce phase: merge one shard's chunks into a part.
    Merge(MergeTask),
}

impl Task {
    /// The job the task belongs to.
    pub fn job(&self) -> &JobId {
        match self {
            Task::Split(t) => &t.job,
            Task::Merge(t) => &t.job,
        }
    }

    /// The task's name within its job.
    pub fn task_ref(&self) -> TaskRef {
        match self {
            Task::Split(t) => TaskRef::Split(t.split),
            Task::Merge(t) => TaskRef::Merge(t.shard),
        }
    }

    /// Checks every field against the hard bounds of [`crate::limits`]. A worker calls
    /// this on each decoded task before acting on it: decoding alone accepts any
    /// number, and a split into 4294967295 shards would allocate ~100 GB.
    pub fn validate(&self) -> Result<(), String> {
        use crate::limits::*;
        let name = |what: &str, v: &str| {
            if v.is_empty() || v.len() > MAX_NAME_BYTES || v.chars().any(char::is_control) {
                Err(format!(
                    "{what} must be 1-{MAX_NAME_BYTES} bytes without control characters"
                ))
            } else {
                Ok(())
            }
        };
        match self {
            Task::Split(t) => {
                if t.shards == 0 || t.shards > MAX_SHARDS {
                    return Err(format!("shards {} not in 1..={MAX_SHARDS}", t.shards));
                }
                if t.split.index() >= MAX_INPUTS {
                    return Err(format!("split {} not below {MAX_INPUTS}", t.split.0));
                }
                name("input", &t.input)?;
                if t.more.len() > MAX_SPLIT_INPUTS || t.split.index() + t.more.len() >= MAX_INPUTS {
                    return Err(format!(
                        "{} further inputs: at most {MAX_SPLIT_INPUTS}, below input {MAX_INPUTS}",
                        t.more.len()
                    ));
                }
                for m in &t.more {
                    name("input", &m.input)?;
                    if m.manager.len() > MAX_NAME_BYTES || m.commit.len() > MAX_NAME_BYTES {
                        return Err(format!(
                            "an input's manager or commit longer than {MAX_NAME_BYTES} bytes"
                        ));
                    }
                }
                t.read.validate()?;
                Ok(())
            }
            Task::Merge(t) => {
                if t.shard.0 >= MAX_SHARDS {
                    return Err(format!("shard {} not below {MAX_SHARDS}", t.shard.0));
                }
                if t.chunks.len() > MAX_CHUNKS_PER_MERGE {
                    return Err(format!(
                        "{} chunks, more than {MAX_CHUNKS_PER_MERGE}",
                        t.chunks.len()
                    ));
                }
                if t.rollup {
                    // A roll-up projects nothing: no base, no prefix, no group.
                    if !t.base_commit.is_empty()
                        || !t.file_path_prefix.is_empty()
                        || !t.groups.is_empty()
                    {
                        return Err(
                            "a roll-up task names a base commit, a file path prefix or groups"
                                .into(),
                        );
                    }
                } else {
                    name("base commit", &t.base_commit)?;
                }
                // A roll-up of partials alone reads no source.
                if !(t.rollup && t.source.is_empty()) {
                    name("source", &t.source)?;
                }
                if t.file_path_prefix.len() > MAX_NAME_BYTES {
                    return Err(format!(
                        "file path prefix longer than {MAX_NAME_BYTES} bytes"
                    ));
                }
                if let Err(why) = crate::path::path_prefix(t.file_path_prefix.as_bytes()) {
                    return Err(format!(
                        "file path prefix {:?} starts no canonical path: it {why}",
                        t.file_path_prefix
                    ));
                }
                crate::group::check_groups(&t.groups)?;
                crate::direct::check_shard_refs(&t.partials)?;
                // A merge reads only its own job's spill objects, and only what fits
                // in memory at once.
                let prefix = crate::layout::spill_prefix(&t.job);
                for c in &t.chunks {
                    let k = &c.key;
                    name("chunk key", k)?;
                    if !k.starts_with(&prefix) || k.split('/').any(|p| p == ".." || p == ".") {
                        return Err(format!("chunk key {k:?} is not under {prefix}"));
                    }
                    if c.len == 0 || c.len > MAX_CHUNK_BYTES || c.start.checked_add(c.len).is_none()
                    {
                        return Err(format!(
                            "chunk {c}: a length of 1 to {MAX_CHUNK_BYTES} bytes is expected"
                        ));
                    }
                }
                Ok(())
            }
        }
    }
}

/// Map phase: read one input and partition its rows into per-shard spill chunks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitTask {
    /// The job the task belongs to.
    pub job: JobId,
    /// The split's number within its job.
    pub split: SplitId,
    /// Local path or object-store URL of the input.
    pub input: String,
    /// Number of shards to partition the rows into.
    pub shards: u32,
    /// The splitter stops early once it has seen more bad rows than this.
    pub max_bad_rows: u64,
    /// How `input` is read: its format, manager and commit, the job's format options.
    pub read: crate::input::InputSpec,
    /// The split's further inputs (inputs `split + 1 ..` of its group), read after
    /// `input` with the same format and options but their own manager and commit. Small
    /// inputs are grouped so that a job of many makes few spill objects and chunks.
    #[serde(default)]
    pub more: Vec<SplitInput>,
    /// `--namespace` as given: the rows a CSV input with a `namespace` column must
    /// name to be merged. `None` (not given): such an input is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// One further input of a split task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitInput {
    /// Local path or object-store URL of the input.
    pub input: String,
    /// The manager its rows are recorded under ([`crate::input::InputSpec::manager`]).
    pub manager: String,
    /// Its build commit ([`crate::input::InputSpec::commit`]).
    pub commit: String,
}

/// Reduce phase: merge one shard from its spill chunks into a part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeTask {
    /// The job the task belongs to.
    pub job: JobId,
    /// The shard to merge.
    pub shard: ShardId,
    /// The commit every row is mapped onto.
    pub base_commit: String,
    /// Source spec to use when the worker has none of its own.
    pub source: String,
    /// This shard's spill chunks, in split order.
    pub chunks: Vec<ChunkRef>,
    /// Merge only files whose path starts with this (`--file-path-prefix`).
    #[serde(default)]
    pub file_path_prefix: String,
    /// The job's `--group NAME=GLOB`s: a record per group and file, after the managers'.
    #[serde(default)]
    pub groups: Vec<crate::group::Group>,
    /// Partials of the job's shard count whose shard `shard` the merge reads directly,
    /// after its chunks (contract §10).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partials: Vec<crate::direct::PartialShardRef>,
    /// A roll-up's task ([`crate::JobSpec::rollup`]): the shard's blocks only summed
    /// into its partial files, no projection and no part (`base_commit` empty).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rollup: bool,
}

/// A bad row, as reported to the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadRow {
    /// The input, as the user named it.
    pub input: String,
    /// 1-based line number in the (decompressed) input.
    pub line: u64,
    /// What is wrong with the row.
    pub problem: String,
}

impl std::fmt::Display for BadRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.input, self.line, self.problem)
    }
}

/// What a split produced; also stored as `splits/<id>.done` (the split's commit point).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitOutcome {
    /// `rows_in`, `rows_bad` filled.
    pub counts: Counts,
    /// The first bad rows (at most a few), for the error message.
    pub bad_rows: Vec<BadRow>,
    /// Every chunk written, with its shard.
    pub chunks: Vec<(ShardId, ChunkRef)>,
    /// What the inputs' `namespace` columns held.
    #[serde(default)]
    pub namespaces: crate::manifest::NamespaceTally,
}

/// One shard's spill chunk: a byte range of a spill object. A split writes one object
/// per flush, holding that flush's chunk of every shard end to end, so a split of a
/// quarter's input writes a few objects, not a few per shard (each a store request,
/// and on a local disk a file created and deleted).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ChunkRef {
    /// The spill object's store key.
    pub key: String,
    /// The chunk's first byte in the object.
    pub start: u64,
    /// The chunk's length in bytes.
    pub len: u64,
}

/// The chunks of each merge task of a job, as the coordinator publishes them: stored
/// before the first merge task is published, so that a worker runs a merge task only
/// with its shard's chunks. A forged task naming one split's chunk twice (another's
/// left out) was merged, and the job published with exit 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergePlan {
    /// The job.
    pub job: JobId,
    /// Per shard, [`MergePlan::digest`] of its merge task's chunks.
    pub chunks_sha256: Vec<String>,
}

impl MergePlan {
    /// The plan of `chunks` (per shard, in shard order).
    pub fn new(job: &JobId, chunks: &[Vec<ChunkRef>]) -> Self {
        MergePlan {
            job: job.clone(),
            chunks_sha256: chunks.iter().map(|c| Self::digest(c)).collect(),
        }
    }

    /// SHA-256 of a shard's chunk list, in order (each key, a 0 byte, its start and
    /// length as 8 bytes little-endian).
    pub fn digest(chunks: &[ChunkRef]) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for c in chunks {
            h.update(c.key.as_bytes());
            h.update([0]);
            h.update(c.start.to_le_bytes());
            h.update(c.len.to_le_bytes());
        }
        hex::encode(h.finalize())
    }

    /// Whether `chunks` are those planned for `shard`.
    pub fn holds(&self, shard: ShardId, chunks: &[ChunkRef]) -> bool {
        self.chunks_sha256
            .get(shard.0 as usize)
            .is_some_and(|d| *d == Self::digest(chunks))
    }
}

impl ChunkRef {
    /// The chunk's byte range in its object.
    pub fn range(&self) -> std::ops::Range<u64> {
        self.start..self.start.saturating_add(self.len)
    }
}

impl std::fmt::Display for ChunkRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes {}..{}", self.key, self.start, self.range().end)
    }
}

/// What a merge produced; also stored as `parts/<shard>.done` (the shard's commit point).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeOutcome {
    /// Counters of the shard's rows (`rows_merged`, `rows_lost`, files, lines).
    pub counts: Counts,
    /// The part's store key.
    pub part: String,
    /// JSON lines in the part.
    pub records: u64,
    /// Compressed bytes of the part.
    pub bytes: u64,
    /// SHA-256 of the part's compressed bytes (hex).
    pub sha256: String,
    /// Per file of the part, in its order: the path and the line count of its base
    /// version (contract §3). The publish gate refuses a record line past it, and a
    /// part whose files are not these. Empty in a marker of protocol 6 or before.
    #[serde(default)]
    pub base_lines: Vec<(String, u32)>,
    /// The base as the merging worker's source holds it (the source's `tree_id`: a
    /// digest of `dir:`'s listing, `git:`'s tree id, `store:`'s index): the merges of one job must agree, or a worker whose source
    /// lacks some files of the base decided alone that they were deleted. Empty in a
    /// marker of protocol 6 or before.
    #[serde(default)]
    pub source_id: String,
    /// The worker that merged (host, pid and a random part), for errors.
    #[serde(default)]
    pub worker: String,
    /// With the job's `partial_out`: the shard's partial files, written under
    /// [`crate::layout::partial_file`], and what their rows count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<PartialShardOutcome>,
}

/// Worker → coordinator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskReport {
    /// The job the task belongs to.
    pub job: JobId,
    /// The task reported on.
    pub task: TaskRef,
    /// The delivery that ran (1 = the first).
    pub attempt: Attempt,
    /// How the attempt ended.
    pub status: ReportStatus,
}

/// How a task attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReportStatus {
    /// The split finished: its counts and chunks.
    Split(SplitOutcome),
    /// The merge finished: its part (a roll-up's: its partial files, no part).
    Merged(MergeOutcome),
    /// The task failed for good (bad input, a refused task, a wrong configuration): the
    /// job cannot finish. The kind is never retryable.
    Failed(Failure),
    /// This delivery failed and the task was handed back for another try. Tells the
    /// coordinator the cause, so that a task dead-lettered at the delivery limit is
    /// reported with its last error. The kind is retryable.
    Retrying(Failure),
}

/// What kind of failure ended a task attempt: decided once, where it happened, and
/// carried on the wire so that every later decision (retry, count as an outage, tell
/// the user) reads the kind instead of parsing a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FailureKind {
    /// The input is bad (undecodable, malformed rows past the limit, a sum that
    /// overflows): another try reads the same bytes.
    BadInput,
    /// The task itself was refused: out of bounds, forged, or not of its job.
    Refused,
    /// The configuration is wrong (an invalid source spec, a store that denies access):
    /// an operator must act.
    Config,
    /// The store or the source stayed unreachable for the whole retry budget: the task
    /// is fine, the infrastructure is not. Counted apart from the task's own failures.
    Outage,
    /// Something failed that another try may not hit (a source read error, a task
    /// thread that died).
    Transient,
    /// A bug: something that must not fail did (an unencodable marker).
    Internal,
}

impl FailureKind {
    /// Whether another delivery of the task may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(self, FailureKind::Outage | FailureKind::Transient)
    }

    /// A short name of the kind for messages and metrics labels (`bad input`, `outage`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::BadInput => "bad input",
            FailureKind::Refused => "refused task",
            FailureKind::Config => "configuration",
            FailureKind::Outage => "outage",
            FailureKind::Transient => "transient",
            FailureKind::Internal => "internal",
        }
    }
}

/// A classified failure of one task attempt. Displays as its message alone, which
/// names the input, line or object it is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    /// What kind of failure it is: decides retry and how it is told.
    pub kind: FailureKind,
    /// What failed, naming the input, line or object.
    pub message: String,
}

impl Failure {
    /// A failure of the given kind.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            message: message.into(),
        }
    }
    /// A [`FailureKind::BadInput`] failure.
    pub fn bad_input(m: impl std::fmt::Display) -> Self {
        Failure::new(FailureKind::BadInput, m.to_string())
    }
    /// A [`FailureKind::Refused`] failure.
    pub fn refused(m: impl std::fmt::Display) -> Self {
        Failure::new(FailureKind::Refused, m.to_string())
    }
    /// A [`FailureKind::Config`] failure.
    pub fn config(m: impl std::fmt::Display) -> Self {
        Failure::new(FailureKind::Config, m.to_string())
    }
    /// A [`FailureKind::Outage`] failure.
    pub fn outage(m: impl std::fmt::Display) -> Self {
        Failure::new(FailureKind::Outage, m.to_string())
    }
    /// A [`FailureKind::Transient`] failure.
    pub fn transient(m: impl std::fmt::Display) -> Self {
        Failure::new(FailureKind::Transient, m.to_string())
    }
    /// A [`FailureKind::Internal`] failure.
    pub fn internal(m: impl std::fmt::Display) -> Self {
        Failure::new(FailureKind::Internal, m.to_string())
    }
    /// Whether another delivery of the task may succeed.
    pub fn is_retryable(&self) -> bool {
        self.kind.is_retryable()
    }
}

#[cfg(test)]
mod tests;
