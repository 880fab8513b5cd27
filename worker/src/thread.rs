//! CPU-bound task work on threads of its own, never on tokio's blocking pool.
//!
//! A split or merge runs for seconds to minutes and, while it runs, waits on the store
//! with `Handle::block_on`. object_store's local store does its file I/O on tokio's
//! blocking pool. Had the split or merge itself held a blocking-pool thread, `N` task
//! loops would hold `N` pool threads, and at `N` ≥ the pool's cap every store call would
//! wait for a pool thread that never frees: `merge --workers 16` hung forever that way.
//! On a thread of its own, a task holds no pool thread, so the pool only ever runs short
//! store calls and no number of task loops can exhaust it.
//!
//! A thread of its own is also what lets a worker leave a task behind: dropping the
//! future returned by [`run_on_thread`] does not wait for the thread (see
//! [`Cancel`]), and the process exits without joining it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// A flag the task's thread polls between units of work; set when the task's future
/// is dropped (the task was handed back or abandoned).
#[derive(Debug, Clone, Default)]
pub(crate) struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// Whether the task was cancelled: the thread should stop at its next unit of work.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    /// Cancels the task.
    pub(crate) fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed)
    }
}

/// Sets the flag when dropped.
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// The thread running a task panicked or could not be started.
#[derive(Debug, thiserror::Error)]
#[error("task thread {name}: {message}")]
pub(crate) struct ThreadError {
    /// The thread's name (the task it ran).
    pub(crate) name: String,
    /// The panic's message, or why the thread did not start.
    pub(crate) message: String,
}

/// Runs `f` on a new OS thread and awaits its result. Dropping the returned future sets
/// the [`Cancel`] flag passed to `f` and returns at once; the thread finishes (or
/// notices the flag) on its own.
pub(crate) async fn run_on_thread<T, F>(name: &str, f: F) -> Result<T, ThreadError>
where
    T: Send + 'static,
    F: FnOnce(Cancel) -> T + Send + 'static,
{
    let cancel = Cancel::default();
    let guard = CancelOnDrop(cancel.clone());
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(cancel)));
            let _ = tx.send(out);
            give_back_freed_memory();
        })
        .map_err(|e| ThreadError {
            name: name.to_string(),
            message: format!("cannot start: {e}"),
        })?;
    let out = rx.await.map_err(|_| ThreadError {
        name: name.to_string(),
        message: "ended without a result".into(),
    })?;
    drop(guard);
    out.map_err(|p| ThreadError {
        name: name.to_string(),
        message: format!(
            "panicked: {}",
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into())
        ),
    })
}

/// Free bytes the allocator may keep for the next task (set from `--memory-budget` by
/// [`keep_freed_up_to`]; 32 MiB until then).
static FREED_KEPT: AtomicUsize = AtomicUsize::new(32 << 20);

/// Lets the allocator keep up to `bytes` of freed memory between tasks (an eighth of
/// the process's `--memory-budget`): the next task reuses it instead of faulting
/// fresh pages in.
pub(crate) fn keep_freed_up_to(bytes: usize) {
    FREED_KEPT.store(bytes, Ordering::Relaxed);
}

/// Returns the memory the task freed to the system once the allocator holds more of it
/// than [`FREED_KEPT`]. glibc keeps a freed block over its mmap threshold (which grows
/// to the largest block freed) in its heap: each merge task allocates and frees a
/// deflate state of ~380 KB and a 256 KiB buffer, and with a small long-lived block
/// between them the heap grew ~55 KB a task, past `--memory-budget` for a job of
/// thousands of shards (4,096 shards of one row: 274 MB; 65,536: 3.6 GB). Trimmed when
/// what it holds free passes the share, it stays flat. Trimmed after every task, the
/// next task faulted its whole working set in again: a day's merge (10 tasks, 20–46 MB
/// free after each) spent ~6 % more CPU.
fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallinfo2 reads the allocator's statistics; malloc_trim only releases
    // free memory of the allocator's own arenas.
    unsafe {
        if libc::mallinfo2().fordblks > FREED_KEPT.load(Ordering::Relaxed) {
            libc::malloc_trim(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn many_threads_waiting_on_the_blocking_pool_do_not_exhaust_it() {
        // 64 task threads each waiting on a blocking-pool job, with a pool of 2.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let h = rt.handle().clone();
        let sum = rt.block_on(async move {
            let mut all = Vec::new();
            for i in 0..64u64 {
                let h = h.clone();
                all.push(tokio::spawn(run_on_thread("t", move |_| {
                    std::thread::sleep(Duration::from_millis(20));
                    h.block_on(h.spawn_blocking(move || i)).unwrap()
                })));
            }
            let mut s = 0;
            for a in all {
                s += a.await.unwrap().unwrap();
            }
            s
        });
        assert_eq!(sum, (0..64).sum::<u64>());
        rt.shutdown_background();
    }

    #[tokio::test]
    async fn dropping_the_future_cancels_and_does_not_wait() {
        let (seen_tx, seen_rx) = std::sync::mpsc::channel();
        let fut = run_on_thread("t", move |c: Cancel| {
            while !c.is_cancelled() {
                std::thread::sleep(Duration::from_millis(5));
            }
            seen_tx.send(()).unwrap();
        });
        let r = tokio::time::timeout(Duration::from_millis(50), fut).await;
        assert!(r.is_err(), "the loop runs until cancelled");
        seen_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the thread saw the cancel flag");
    }

    #[tokio::test]
    async fn a_panic_is_an_error_naming_the_thread() {
        let e = run_on_thread("merge 7", |_| -> u32 { panic!("boom") })
            .await
            .unwrap_err();
        assert!(e.to_string().contains("merge 7"), "{e}");
        assert!(e.to_string().contains("boom"), "{e}");
    }
}
