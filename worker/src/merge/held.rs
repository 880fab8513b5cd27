//! Base texts and line maps a shard merge holds between uses ([`Held`]), within the
//! byte limits of its [`HeldBudget`].

use std::sync::Arc;

use covmerge_proto::Counts;
use rustc_hash::FxHashMap;

use super::{HeldBudget, LineMap, MergeError, ProjectionCache};
use crate::source::{FileVersion, Source, SourceError};
use crate::spill::StringTable;

/// What a shard merge keeps to avoid asking twice — base texts and line maps — each
/// within a byte budget, so that many files or many commits of one file cost time
/// (a second read, a second diff), not memory without bound.
#[derive(Default)]
pub(super) struct Held {
    budget: HeldBudget,
    bases: FxHashMap<u32, Arc<FileVersion>>,
    bases_bytes: usize,
    maps: FxHashMap<(u32, u32), Option<Arc<LineMap>>>,
    maps_bytes: usize,
    /// The (file, commit) pairs counted in `diffs_capped`: a map computed again
    /// after being dropped is not counted twice.
    capped: rustc_hash::FxHashSet<(u32, u32)>,
}

impl Held {
    /// A new budget of what is held.
    pub(super) fn new(budget: HeldBudget) -> Self {
        Held {
            budget,
            ..Held::default()
        }
    }

    /// Holds the base version of `file` (a string id), within the budget.
    pub(super) fn hold_base(&mut self, file: u32, base: Arc<FileVersion>) {
        let bytes = base.data.len() + 64;
        if self.bases_bytes + bytes > self.budget.bases {
            self.bases.clear();
            self.bases_bytes = 0;
        }
        self.bases_bytes += bytes;
        self.bases.insert(file, base);
    }

    /// The line map of `file` at `commit` (string ids of `strings`) onto the base:
    /// held, or computed (through the worker's `cache`) and held. A map capped by the
    /// diff's budget is counted in `counts.diffs_capped` once.
    pub(super) fn line_map(
        &mut self,
        source: &dyn Source,
        cache: &ProjectionCache,
        base_commit: &[u8],
        strings: &StringTable,
        (file, commit): (u32, u32),
        counts: &mut Counts,
    ) -> Result<Option<Arc<LineMap>>, MergeError> {
        if let Some(m) = self.map(file, commit) {
            return Ok(m);
        }
        let m = self.compute_map(
            source,
            cache,
            base_commit,
            strings.get(file),
            strings.get(commit),
            file,
        )?;
        if m.as_ref().is_some_and(|m| m.capped) && self.capped.insert((file, commit)) {
            counts.diffs_capped += 1;
        }
        self.hold_map(file, commit, m.clone());
        Ok(m)
    }

    fn map(&self, file: u32, commit: u32) -> Option<Option<Arc<LineMap>>> {
        self.maps.get(&(file, commit)).cloned()
    }

    fn hold_map(&mut self, file: u32, commit: u32, map: Option<Arc<LineMap>>) {
        let bytes = map.as_ref().map_or(0, |m| m.bytes()) + 32;
        if self.maps_bytes + bytes > self.budget.maps {
            self.maps.clear();
            self.maps_bytes = 0;
        }
        self.maps_bytes += bytes;
        self.maps.insert((file, commit), map);
    }

    /// The line map of `path` at `commit` onto the base (`None`: no such version).
    fn compute_map(
        &mut self,
        source: &dyn Source,
        cache: &ProjectionCache,
        base_commit: &[u8],
        path: &[u8],
        commit: &[u8],
        file: u32,
    ) -> Result<Option<Arc<LineMap>>, MergeError> {
        let Some(version) = source.get(commit, path)? else {
            return Ok(None);
        };
        let base = match self.bases.get(&file) {
            Some(b) => b.clone(),
            None => {
                // Dropped to stay in budget: read again. The source is immutable, so
                // a file that existed at the base still does.
                let b = source.get(base_commit, path)?.ok_or_else(|| {
                    MergeError::Source(SourceError::Io {
                        source_name: "the source".into(),
                        what: format!("{} at the base", String::from_utf8_lossy(path)),
                        message: "present when first read, absent when read again".into(),
                    })
                })?;
                self.hold_base(file, b.clone());
                b
            }
        };
        Ok(Some(cache.get(&version, &base)))
    }
}
