use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use super::{FileVersion, Source, SourceError};

type Key = (Box<[u8]>, Box<[u8]>);

/// What an entry holds beyond its version's bytes: the key twice (the map's and the
/// eviction order's copy, four allocations) and the map's and the queue's slots at
/// their load. Counted as 64 bytes plus the key once, an absent path held about 210
/// bytes where 83 were counted, so a shard of many distinct paths went 2.5× past the
/// cache's share.
fn entry_bytes(key: &Key) -> usize {
    2 * (key.0.len() + key.1.len()) + 192
}

/// What a held version costs besides its entry: its bytes (as allocated) and the
/// `Arc`'s block around the [`FileVersion`] (counts, the vector, the blob id). Counted
/// as its length alone, a cache of many small versions went 16 % past its budget.
fn version_bytes(v: &Option<Arc<FileVersion>>) -> usize {
    v.as_ref().map_or(0, |f| {
        f.data.capacity() + std::mem::size_of::<FileVersion>() + 2 * std::mem::size_of::<usize>()
    })
}

/// Keeps recently used versions (and known absences) of any source, up to a byte
/// budget, evicting the oldest first. Shared by the merge threads of one worker.
pub struct CachedSource {
    inner: Arc<dyn Source>,
    budget: usize,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    map: FxHashMap<Key, Option<Arc<FileVersion>>>,
    order: VecDeque<Key>,
    bytes: usize,
}

impl CachedSource {
    /// `inner` behind a cache of its versions and absences, the oldest dropped first past `budget_bytes` (file data and keys).
    pub fn new(inner: Arc<dyn Source>, budget_bytes: usize) -> Self {
        CachedSource {
            inner,
            budget: budget_bytes,
            state: Mutex::default(),
        }
    }
}

impl Source for CachedSource {
    fn has_commit(&self, commit: &[u8]) -> Result<bool, SourceError> {
        self.inner.has_commit(commit)
    }

    fn tree_id(&self, commit: &[u8]) -> Result<Option<String>, SourceError> {
        self.inner.tree_id(commit)
    }

    fn forget_absent(&self) {
        self.inner.forget_absent();
        let mut st = self.state.lock().unwrap();
        let mut freed = 0;
        st.map.retain(|k, v| {
            let keep = v.is_some();
            if !keep {
                freed += entry_bytes(k);
            }
            keep
        });
        st.bytes -= freed;
        let CacheState { map, order, .. } = &mut *st;
        order.retain(|k| map.contains_key(k));
    }

    fn get(&self, commit: &[u8], path: &[u8]) -> Result<Option<Arc<FileVersion>>, SourceError> {
        let key: Key = (commit.into(), path.into());
        if let Some(v) = self.state.lock().unwrap().map.get(&key) {
            return Ok(v.clone());
        }
        let v = self.inner.get(commit, path)?;
        let size = version_bytes(&v) + entry_bytes(&key);
        let mut st = self.state.lock().unwrap();
        if st.map.insert(key.clone(), v.clone()).is_none() {
            st.order.push_back(key);
            st.bytes += size;
        }
        while st.bytes > self.budget {
            let Some(old) = st.order.pop_front() else {
                break;
            };
            if let Some(ov) = st.map.remove(&old) {
                st.bytes -= version_bytes(&ov) + entry_bytes(&old);
            }
        }
        Ok(v)
    }
}
