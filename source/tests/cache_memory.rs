//! What [`CachedSource`] holds against its budget, as the allocator sees it: many
//! distinct paths looked up once each (absent ones, and small versions) must leave
//! the cache's live heap within its budget. Counted as the key once plus 64 bytes, an
//! absent path held about 2.5 times what was counted, and a shard of many distinct
//! paths went that far past the cache's share.
//! A test binary of its own: the counting allocator sees every allocation of it.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

mod common;
use common::{LIVE, ONE};

use covmerge_source::{CachedSource, FileVersion, Source, SourceError};

/// A source whose paths ending in `.h` are absent and the others a short text.
struct Synthetic;

impl Source for Synthetic {
    fn get(&self, _commit: &[u8], path: &[u8]) -> Result<Option<Arc<FileVersion>>, SourceError> {
        if path.ends_with(b".h") {
            return Ok(None);
        }
        Ok(Some(Arc::new(FileVersion::new(path.repeat(3)))))
    }

    fn has_commit(&self, _commit: &[u8]) -> Result<bool, SourceError> {
        Ok(true)
    }

    fn tree_id(&self, _commit: &[u8]) -> Result<Option<String>, SourceError> {
        Ok(Some("synthetic".into()))
    }
}

/// Looks up `n` distinct paths (every `absent_every`-th absent) through a cache of
/// `budget` bytes; returns the live heap the cache holds at the end.
fn held_after(n: usize, absent_every: usize, budget: usize) -> usize {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let commit = [b'c'; 40];
    let before = LIVE.load(Relaxed);
    let cache = CachedSource::new(Arc::new(Synthetic), budget);
    for i in 0..n {
        let ext = if i % absent_every == 0 { "h" } else { "c" };
        let path = format!("drivers/net/ethernet/vendor{}/file{i}.{ext}", i % 97);
        let got = cache.get(&commit, path.as_bytes()).unwrap();
        assert_eq!(got.is_none(), ext == "h", "{path}");
    }
    let held = LIVE.load(Relaxed) - before;
    drop(cache);
    held
}

#[test]
fn absent_paths_were_held_past_the_cache_budget() {
    let budget = 4 << 20;
    for absent_every in [1, 2, 10] {
        let held = held_after(200_000, absent_every, budget);
        println!("every {absent_every} absent: {held} bytes held for a budget of {budget}");
        assert!(
            held <= budget + budget / 8,
            "the cache held {held} bytes for a budget of {budget} (every {absent_every}-th path absent)"
        );
        // The budget is used, not left idle by an estimate far above the truth.
        assert!(held >= budget / 3, "only {held} bytes held of {budget}");
    }
}
