//! The versions a shard's partial found: git's blob id of (file, commit) in the
//! source, or none, each looked up once while they fit their share.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::merge::MergeError;
use crate::source::Source;

/// Bytes counted per entry beside its key and id (slot, `Arc`, lengths).
const ENTRY_BYTES: usize = 64;

/// The blob ids found, by (file, commit), within `limit` bytes: past it they are
/// forgotten and looked up again (the source has its own cache of texts).
pub(super) struct Versions {
    ids: FxHashMap<Box<[u8]>, Option<Arc<str>>>,
    bytes: usize,
    limit: usize,
    key: Vec<u8>,
}

impl Versions {
    pub(super) fn new(limit: usize) -> Self {
        Versions {
            ids: FxHashMap::default(),
            bytes: 0,
            limit,
            key: Vec::new(),
        }
    }

    /// The version of `path` at `commit`: its blob id, `None` when the source has no
    /// such file (or commit).
    pub(super) fn get(
        &mut self,
        source: &dyn Source,
        path: &str,
        commit: &str,
    ) -> Result<Option<Arc<str>>, MergeError> {
        self.key.clear();
        self.key
            .extend_from_slice(&(path.len() as u32).to_le_bytes());
        self.key.extend_from_slice(path.as_bytes());
        self.key.extend_from_slice(commit.as_bytes());
        if let Some(v) = self.ids.get(self.key.as_slice()) {
            return Ok(v.clone());
        }
        let v = source
            .get(commit.as_bytes(), path.as_bytes())?
            .map(|f| Arc::<str>::from(f.id.hex()));
        let cost = self.key.len() + ENTRY_BYTES + v.as_ref().map_or(0, |s| s.len());
        if self.bytes + cost > self.limit {
            self.ids.clear();
            self.bytes = 0;
        }
        self.bytes += cost;
        self.ids.insert(self.key.as_slice().into(), v.clone());
        Ok(v)
    }
}
