//! The worker's open sources, bounded by their estimated cost.

use std::sync::Arc;

use crate::source::Source;

/// A worker's open sources, least recently used first out, bounded by their
/// estimated cost ([`super::executor::source_cost`]); the most recent one always stays.
#[derive(Default)]
pub(super) struct SourceCache {
    /// (spec, source, cost), least recently used first.
    entries: Vec<(String, Arc<dyn Source>, usize)>,
}

impl SourceCache {
    pub(super) fn get(&mut self, spec: &str) -> Option<Arc<dyn Source>> {
        let i = self.entries.iter().position(|(s, _, _)| s == spec)?;
        let e = self.entries.remove(i);
        let s = e.1.clone();
        self.entries.push(e);
        Some(s)
    }

    /// Adds a source as the most recent, then closes the least recently used ones
    /// until the total cost fits `budget`; returns how many were closed.
    pub(super) fn insert(
        &mut self,
        spec: &str,
        s: Arc<dyn Source>,
        cost: usize,
        budget: usize,
    ) -> usize {
        self.entries.retain(|(k, _, _)| k != spec);
        self.entries.push((spec.to_string(), s, cost));
        let mut evicted = 0;
        while self.entries.len() > 1 && self.entries.iter().map(|e| e.2).sum::<usize>() > budget {
            self.entries.remove(0);
            evicted += 1;
        }
        evicted
    }

    pub(super) fn clear(&mut self) -> usize {
        std::mem::take(&mut self.entries).len()
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}
