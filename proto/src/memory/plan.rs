//! The memory plan: `--memory-budget` divided once, per role, into named byte limits
//! that every consumer takes as plain numbers. Nothing else divides the budget.
//!
//! - A process that merges (`merge`, `worker`): [`Shares`] for its caches and task
//!   loops, then [`TaskShare`] for what one task got of its loop's share.
//! - A process that reads results (`report`, `diff`, the publish gate): [`ReadBudget`].
//!
//! Each role's default is one constant of [`super`]: [`DEFAULT_MERGE_BUDGET`],
//! [`DEFAULT_WORKER_BUDGET`], [`DEFAULT_READ_BUDGET`].

use std::fmt;

#[cfg(doc)]
use super::MemoryPool;
use super::{format_bytes, parse_budget};
use super::{DEFAULT_MERGE_BUDGET, DEFAULT_READ_BUDGET, DEFAULT_WORKER_BUDGET};
use crate::limits::MAX_SOURCE_FILE_BYTES;

/// The smallest share of one task loop: a chunk fetched ahead, the split's tables
/// before their first flush, the buffers of the input readers.
pub const MIN_LOOP_SHARE: usize = 4 << 20;

/// The most chunk bytes fetched ahead of a merge: more does not go faster (eight
/// requests in flight already hide a distant store's round trips).
const MAX_PREFETCH: usize = 32 << 20;
/// The most flushes gathered before a split writes them (see `spill_writer`).
const MIN_PREFETCH: usize = 1 << 20;

/// The most a line diff may hold under a memory budget of `budget` bytes (a
/// quarter of it: 64 MiB at the default of 256 MiB, two 20 MB files of 40-byte lines),
/// all the line diffs of a process together.
pub fn line_diff_bytes(budget: u64) -> u64 {
    budget / 4
}

/// The largest file version a merging process reads under a memory budget of
/// `budget` bytes: an eighth of it (two versions are a quarter, what a line diff may
/// hold with its lines: [`line_diff_bytes`]), at most [`MAX_SOURCE_FILE_BYTES`]. 32 MiB
/// at the default budget of 256 MiB, 48 MiB at a worker's 384 MiB: the kernel's
/// largest files (generated register headers) are under 20 MB.
pub fn max_file_bytes(budget: u64) -> u64 {
    (budget / 8).min(MAX_SOURCE_FILE_BYTES)
}

/// The shares of a merging process's budget, in bytes: the open sources (each with
/// its version cache and, for a `store:` source, its commit indexes), the cache of
/// line maps and the line diffs running (a quarter of the budget: each diff takes its
/// estimate, both texts and its lines, and waits while others hold too much; a pair
/// over the whole share is capped, so which pairs are capped depends on the budget
/// alone). What is left goes to the task loops in equal shares; a loop runs one task
/// at a time, so a share serves a split or a merge ([`TaskShare`]), never both. Every
/// share is reserved from the process's [`MemoryPool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// The whole budget.
    pub budget: usize,
    /// Estimated memory of the open sources together; past it the least recently
    /// used are closed, the most recent always stays open.
    pub sources: usize,
    /// Version cache of one open source.
    pub source_cache: usize,
    /// Commit indexes one `store:` source holds (least recently used out).
    pub store_indexes: usize,
    /// The line maps cached across merges.
    pub projection_cache: usize,
    /// The line diffs running together ([`line_diff_bytes`]).
    pub diffs: usize,
    /// The largest source file read ([`max_file_bytes`]).
    pub max_file: u64,
    /// Each task loop's share.
    pub per_loop: usize,
}

impl Shares {
    /// `covmerge merge`'s plan: `budget` (default [`DEFAULT_MERGE_BUDGET`]) for `loops`
    /// task loops.
    pub fn for_merge(budget: Option<u64>, loops: usize) -> Result<Shares, String> {
        Self::of(
            Self::budget_or_default(budget, DEFAULT_MERGE_BUDGET, loops),
            loops,
        )
    }

    /// `covmerge worker`'s plan: `budget` (default [`DEFAULT_WORKER_BUDGET`]) for
    /// `loops` task loops.
    pub fn for_worker(budget: Option<u64>, loops: usize) -> Result<Shares, String> {
        Self::of(
            Self::budget_or_default(budget, DEFAULT_WORKER_BUDGET, loops),
            loops,
        )
    }

    /// The smallest budget that gives each of `loops` task loops
    /// [`MIN_LOOP_SHARE`] after the caches' shares: what a default budget grows to
    /// when many task loops are asked for (`--workers 64` on a small machine).
    pub fn least_budget(loops: usize) -> usize {
        // The loops get what the sources (3/8), the line maps (1/32) and the line
        // diffs (1/4) leave: 11/32.
        (loops.max(1) * MIN_LOOP_SHARE).div_ceil(11) * 32 + (1 << 20)
    }

    /// `budget` if given, else `default` raised to [`Shares::least_budget`] for
    /// `loops`: an explicit budget too small for its loops is refused by
    /// [`Shares::of`], a default one grows.
    pub fn budget_or_default(budget: Option<u64>, default: u64, loops: usize) -> usize {
        match budget {
            Some(b) => usize::try_from(b).unwrap_or(usize::MAX),
            None => usize::try_from(default)
                .unwrap_or(usize::MAX)
                .max(Self::least_budget(loops)),
        }
    }

    /// Divides `budget` for `loops` task loops; refuses a budget that leaves a loop
    /// less than [`MIN_LOOP_SHARE`], naming both flags that help.
    pub fn of(budget: usize, loops: usize) -> Result<Shares, String> {
        let loops = loops.max(1);
        let sources = budget / 8 * 3;
        let projection_cache = budget / 32;
        let diffs = line_diff_bytes(budget as u64) as usize;
        let per_loop = (budget - sources - projection_cache - diffs) / loops;
        if per_loop < MIN_LOOP_SHARE {
            return Err(format!(
                "a memory budget of {} leaves {} to each of {loops} task loops, less than the {} one task needs: raise --memory-budget or run fewer task loops (--workers / --concurrency)",
                format_bytes(budget as u64),
                format_bytes(per_loop as u64),
                format_bytes(MIN_LOOP_SHARE as u64),
            ));
        }
        Ok(Shares {
            budget,
            sources,
            // A source's caches are within the sources' share: a few sources open at
            // once (three `dir:` ones at the default budget, two `store:` ones, one `git:`).
            source_cache: sources / 15 * 4,
            store_indexes: sources / 4,
            projection_cache,
            diffs,
            max_file: max_file_bytes(budget as u64),
            per_loop,
        })
    }
}

/// How one task uses its loop's share (or what it got of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskShare {
    /// A split: what its builders may hold before flushing.
    pub split: usize,
    /// A merge: chunk bytes fetched ahead.
    pub prefetch: usize,
    /// A merge: base texts held between uses.
    pub held_bases: usize,
    /// A merge: line maps held between uses.
    pub held_maps: usize,
    /// A merge: its own tables (strings, each file's tag or accumulator); past it
    /// the shard is merged in passes over ranges of its paths.
    pub tables: usize,
    /// A merge with `--partial-out`: the shard's partial builder's sums (past it they
    /// spill in sorted runs) and the versions it found (an eighth of it beside). The builder is fed as the merge reads its chunks, so
    /// both hold at once: see [`TaskShare::beside_partial`].
    pub partial: usize,
}

impl TaskShare {
    /// The uses of `bytes`. A split's builders count the capacity of their tables,
    /// which their flush briefly doubles: two fifths. A merge fetches a quarter ahead
    /// (at most 32 MiB), holds a quarter of base texts and an eighth of line maps;
    /// the rest (at least 3/8) is its own tables.
    pub fn of(bytes: usize) -> TaskShare {
        let prefetch = (bytes / 4).clamp(MIN_PREFETCH, MAX_PREFETCH);
        let (held_bases, held_maps) = (bytes / 4, bytes / 8);
        TaskShare {
            split: bytes / 5 * 2,
            prefetch,
            held_bases,
            held_maps,
            tables: bytes.saturating_sub(prefetch + held_bases + held_maps),
            partial: bytes.saturating_sub(prefetch + held_bases + held_maps) / 2,
        }
    }

    /// The uses of a merge that builds its shard's partial as it merges: the tables'
    /// share halved, the chunks fetched ahead and the base texts held halved too; the
    /// builder gets 8/9 of the tables' other half and of what the halving frees (its
    /// versions an eighth of its sums beside), all within the loop's share. A shard (of 8) of the benchmark's 2.15 M
    /// row day holds up to ~11 MB of sums: with two task loops at the default budget
    /// they fit (17 MiB), where 7/16 of the tables (7 MiB) spilled a run and rolled it
    /// up, doubling the partial's cost.
    pub fn beside_partial(self) -> TaskShare {
        let prefetch = (self.prefetch / 2).max(MIN_PREFETCH).min(self.prefetch);
        let held_bases = self.held_bases / 2;
        let tables = self.tables / 2;
        let freed = (self.prefetch - prefetch) + (self.held_bases - held_bases);
        TaskShare {
            prefetch,
            held_bases,
            tables,
            partial: (self.tables - tables + freed) / 9 * 8,
            ..self
        }
    }
}

/// The memory budget of a process that reads results (`report`, `diff`, the publish
/// gate), in bytes, and its shares: the longest result record line, the records of
/// one file, the files in flight to the page writers, the directory tree's sums, a
/// source text shown on a page, and the older result of a diff. Each structure that
/// grows with the input is held within its share; past it the structure spills (the
/// tree's file rows go to a temporary file) or, where no bounded way exists, the
/// input is refused naming the dimension and the flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadBudget(pub u64);

impl Default for ReadBudget {
    fn default() -> Self {
        ReadBudget(DEFAULT_READ_BUDGET)
    }
}

impl fmt::Display for ReadBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", format_bytes(self.0))
    }
}

impl std::str::FromStr for ReadBudget {
    type Err = String;

    /// `--memory-budget`'s parser ([`parse_budget`]).
    fn from_str(s: &str) -> Result<Self, String> {
        parse_budget(s).map(ReadBudget)
    }
}

impl ReadBudget {
    /// The longest record line read (a quarter: the line, its parsed arrays and the
    /// file's script fit beside the rest; 64 MiB at the default).
    pub fn line_cap(self) -> usize {
        (self.0 / 4) as usize
    }

    /// The parsed records of one file (its managers' lines and hits, its functions).
    pub fn file_cap(self) -> u64 {
        self.0 / 4
    }

    /// Files read but not yet written by the page writers.
    pub fn in_flight(self) -> u64 {
        self.0 / 4
    }

    /// The directory tree: its directories and their per-manager sums (file rows
    /// spill to disk).
    pub fn tree(self) -> u64 {
        self.0 / 4
    }

    /// The largest source text shown on a file page (larger ones: numbers without text).
    pub fn text(self) -> u64 {
        self.0 / 4
    }

    /// The older result of a diff (its `*` lines of every file).
    pub fn old_side(self) -> u64 {
        self.0 / 2
    }

    /// A line diff across bases: both texts of a file and the diff's lines (a
    /// quarter, [`line_diff_bytes`]); a pair over it is mapped by its common prefix
    /// and suffix only, and said so (`"text":"capped"`).
    pub fn line_diff(self) -> u64 {
        line_diff_bytes(self.0)
    }

    /// The largest source file read: the largest text shown ([`ReadBudget::text`], a
    /// quarter; `report` holds one text at a time per page writer, a diff across
    /// bases two, and caps their diff), at most [`MAX_SOURCE_FILE_BYTES`]; a larger
    /// one is refused naming it, its size and the flag.
    pub fn source_file(self) -> u64 {
        self.text().min(MAX_SOURCE_FILE_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_never_add_up_to_more_than_the_budget() {
        for budget in [16usize << 20, 256 << 20, 384 << 20, 1 << 30, 5_000_000_123] {
            for loops in [1, 2, 3, 8] {
                let Ok(s) = Shares::of(budget, loops) else {
                    continue;
                };
                assert!(s.sources + s.projection_cache + s.diffs + s.per_loop * loops <= budget);
                // Two files at the limit fit the diffs' share, with room for their lines.
                assert!(2 * s.max_file <= s.diffs as u64);
                assert!(s.source_cache + s.store_indexes < s.sources);
                let t = TaskShare::of(s.per_loop);
                assert!(t.split <= s.per_loop);
                assert!(t.prefetch + t.held_bases + t.held_maps + t.tables <= s.per_loop);
                assert!(t.tables >= s.per_loop / 8 * 3, "{t:?}");
                let p = t.beside_partial();
                let merge = |t: &TaskShare| t.prefetch + t.held_bases + t.held_maps + t.tables;
                assert!(merge(&p) + p.partial + p.partial / 8 <= merge(&t), "{p:?}");
                assert!(p.partial >= t.tables / 16 * 7, "{p:?}");
                assert!(p.prefetch >= MIN_PREFETCH.min(t.prefetch), "{p:?}");
            }
        }
    }

    #[test]
    fn a_budget_too_small_for_its_loops_is_refused_naming_the_flags() {
        let e = Shares::of(16 << 20, 64).unwrap_err();
        assert!(
            e.contains("--memory-budget") && e.contains("--workers"),
            "{e}"
        );
        assert!(Shares::of(16 << 20, 1).is_ok());
    }

    #[test]
    fn a_default_budget_grows_to_fit_many_task_loops_an_explicit_one_does_not() {
        for loops in [1, 2, 16, 64, 1024] {
            let b = Shares::budget_or_default(None, 256 << 20, loops);
            assert!(b >= 256 << 20);
            let s = Shares::of(b, loops).unwrap();
            assert!(s.per_loop >= MIN_LOOP_SHARE, "{loops}: {s:?}");
            assert_eq!(Shares::for_merge(None, loops), Ok(s));
        }
        assert_eq!(Shares::budget_or_default(None, 256 << 20, 2), 256 << 20);
        assert_eq!(Shares::for_worker(None, 1).unwrap().budget, 384 << 20);
        let explicit = Shares::budget_or_default(Some(256 << 20), 256 << 20, 64);
        assert_eq!(explicit, 256 << 20);
        assert!(Shares::of(explicit, 64).is_err());
        assert!(Shares::for_merge(Some(256 << 20), 64).is_err());
    }

    #[test]
    fn the_source_limits_are_the_same_shares_in_every_role() {
        assert_eq!(max_file_bytes(256 << 20), 32 << 20);
        assert_eq!(max_file_bytes(384 << 20), 48 << 20);
        assert_eq!(max_file_bytes(1 << 40), MAX_SOURCE_FILE_BYTES);
        let r = ReadBudget::default();
        assert_eq!(
            (r.line_cap(), r.line_diff(), r.source_file()),
            (64 << 20, 64 << 20, 64 << 20)
        );
        assert_eq!(ReadBudget(1 << 40).source_file(), MAX_SOURCE_FILE_BYTES);
        assert_eq!(r.to_string(), "256 MiB");
        assert_eq!("256 MiB".parse::<ReadBudget>(), Ok(r));
    }
}
