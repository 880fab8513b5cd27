//! How a worker process divides its one memory budget (`--memory-budget`) among the
//! structures that grow with the input.
//!
//! The process-wide shares are the open sources (each with its version cache and, for
//! a `store:` source, its commit indexes), the cache of line maps and the line diffs
//! running (a quarter of the budget: each diff takes its estimate, both texts and its
//! lines, and waits while others hold too much; a pair over the whole share is
//! capped, so which pairs are capped depends on the budget alone). What is left
//! goes to the task loops in equal shares; a loop runs one task at a time, so a share
//! serves a split (its builders' tables, the flushes gathered for writing) or a merge
//! (the chunks fetched ahead, the base texts and line maps it holds between uses, and
//! its own tables), never both. Every share is reserved from the executor's
//! [`MemoryPool`]: the sum of the reservations never exceeds the budget.
//!
//! A task that finds less than its loop's share free (more tasks than loops for a
//! moment) works within what it got: a split flushes earlier, a merge fetches fewer
//! chunks ahead and reads base texts and line maps again instead of holding them.

use covmerge_proto::memory::{format_bytes, MemoryPool, MemoryReservation};

/// The smallest share of one task loop: a chunk fetched ahead, the split's tables
/// before their first flush, the buffers of the input readers.
pub const MIN_LOOP_SHARE: usize = 4 << 20;

/// The most chunk bytes fetched ahead of a merge: more does not go faster (eight
/// requests in flight already hide a distant store's round trips).
const MAX_PREFETCH: usize = 32 << 20;
/// The most flushes gathered before a split writes them (see `spill_writer`).
const MIN_PREFETCH: usize = 1 << 20;

/// The shares of one budget, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// The whole budget.
    pub budget: usize,
    /// Estimated memory of the open sources together (see `source_cost`); past it
    /// the least recently used are closed, the most recent always stays open.
    pub sources: usize,
    /// Version cache of one open source.
    pub source_cache: usize,
    /// Commit indexes one `store:` source holds (least recently used out).
    pub store_indexes: usize,
    /// The line maps cached across merges.
    pub projection_cache: usize,
    /// The line diffs running together ([`covmerge_source::project::diff_limit`]).
    pub diffs: usize,
    /// The largest source file read ([`covmerge_source::max_file_bytes`]).
    pub max_file: u64,
    /// Each task loop's share.
    pub per_loop: usize,
}

impl Shares {
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
        let diffs = covmerge_source::project::diff_limit(budget as u64) as usize;
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
            source_cache: sources * 4 / 15,
            store_indexes: sources / 4,
            projection_cache,
            diffs,
            max_file: covmerge_source::max_file_bytes(budget as u64),
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
        }
    }
}

/// Reserves a task's share of `pool`: its loop's `per_loop` bytes, or what is free
/// if less (at least [`MIN_LOOP_SHARE`], else whatever is left: the task then holds
/// the least it can, and is not refused).
pub fn reserve_task(
    pool: &std::sync::Arc<MemoryPool>,
    name: String,
    per_loop: usize,
) -> MemoryReservation {
    let mut r = pool.reservation(name);
    if r.grow_up_to(per_loop, MIN_LOOP_SHARE).is_err() {
        let _ = r.grow_up_to(per_loop, 0);
    }
    if r.size() < per_loop {
        tracing::info!(
            consumer = r.consumer(),
            got = r.size(),
            share = per_loop,
            "less memory free than the task loop's share: the task holds less and reads again"
        );
    }
    r
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
        }
        assert_eq!(Shares::budget_or_default(None, 256 << 20, 2), 256 << 20);
        let explicit = Shares::budget_or_default(Some(256 << 20), 256 << 20, 64);
        assert_eq!(explicit, 256 << 20);
        assert!(Shares::of(explicit, 64).is_err());
    }

    #[test]
    fn a_task_gets_what_is_free_when_less_than_its_share() {
        let pool = MemoryPool::new(10 << 20);
        let a = reserve_task(&pool, "a".into(), 8 << 20);
        assert_eq!(a.size(), 8 << 20);
        let b = reserve_task(&pool, "b".into(), 8 << 20);
        assert_eq!(b.size(), 2 << 20);
        let c = reserve_task(&pool, "c".into(), 8 << 20);
        assert_eq!((c.size(), pool.reserved()), (0, 10 << 20));
        drop((a, b, c));
        assert_eq!(pool.reserved(), 0);
    }
}
