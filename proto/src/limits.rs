//! Hard bounds on what a job or a task may ask for. The CLI refuses values outside them
//! with a clear error before any work, and workers check every decoded task against
//! them (a forged message must not make a worker allocate without bound).

/// The most shards a job may have. A shard costs a table per parse thread in every
/// split and one merge task; 65,536 shards of a quarter's 10⁹ rows are 15,000 rows
/// each, far past the point where more shards help.
pub const MAX_SHARDS: u32 = 65_536;

/// The most task loops one process runs (`merge --workers`, `worker --concurrency`).
/// Each running task holds a thread of its own and its share of the memory budget.
pub const MAX_TASK_LOOPS: usize = 1024;

/// Most inputs (and so split tasks) a job may have.
pub const MAX_INPUTS: usize = 100_000;

/// Longest input location, source spec, commit or store key a task may carry.
pub const MAX_NAME_BYTES: usize = 4096;

/// Longest manager name (a row's `manager`, a Go input's, a `--group` NAME), in bytes.
/// syzbot's managers are named like `ci-upstream-kasan-gce-root` (tens of bytes); 1 KiB
/// is far past any of them and keeps a name cheap everywhere it goes: matched against
/// every `--group` glob once per shard, held once per file while its records are
/// written, shown in `report`'s columns.
pub const MAX_MANAGER_BYTES: usize = 1024;

/// Longest `--group` GLOB, in bytes: a glob longer than the longest manager name
/// matches none unless it is mostly `*`.
pub const MAX_GLOB_BYTES: usize = 1024;

/// Inputs one split task reads (its first and the ones grouped with it): bounds its
/// message (each name at most [`MAX_NAME_BYTES`]).
pub const MAX_SPLIT_INPUTS: usize = 256;

/// Most `--go-module` rules a job (and each of its split tasks) may carry.
pub const MAX_GO_MODULES: usize = 1024;

/// Most spill chunks one merge task may list (every split writes a few per shard).
pub const MAX_CHUNKS_PER_MERGE: usize = 100_000;

/// Largest spill chunk a merge task may name. A merge holds one chunk in memory at a
/// time; a split writes chunks of at most its memory budget (40 MiB by default).
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;

/// Most `--group` rules a job (and each of its merge tasks) may carry: each costs a
/// match against every manager of a shard and a record per file.
pub const MAX_GROUPS: usize = 256;

/// The largest file version a source reads (`dir:`, `git:` and `store:` alike),
/// whatever the memory budget: a merge holds a file's versions whole in memory.
pub const MAX_SOURCE_FILE_BYTES: u64 = 256 << 20;
