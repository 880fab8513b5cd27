//! How a worker process holds its one memory budget (`--memory-budget`): the division
//! is the memory plan's ([`Shares`](covmerge_proto::memory::Shares),
//! [`TaskShare`](covmerge_proto::memory::TaskShare), in `covmerge_proto::memory::plan`);
//! every share is reserved from the executor's [`MemoryPool`], so that the sum of the
//! reservations never exceeds the budget.
//!
//! A task that finds less than its loop's share free (more tasks than loops for a
//! moment) works within what it got: a split flushes earlier, a merge fetches fewer
//! chunks ahead and reads base texts and line maps again instead of holding them.

use covmerge_proto::memory::{MemoryPool, MemoryReservation, MIN_LOOP_SHARE};

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
