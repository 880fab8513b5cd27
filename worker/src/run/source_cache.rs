//! The worker's open sources, bounded by their estimated cost.

use std::sync::Arc;

use covmerge_proto::wire::Failure;
use tracing::info;

use super::executor::{source_cost, trim_heap, Executor};
use super::failure::TaskError;
use crate::source::{open_source_within, CachedSource, Source};

/// A worker's open sources, least recently used first out, bounded by their
/// estimated cost ([`super::executor::source_cost`]); the most recent one always stays.
#[derive(Default)]
pub(super) struct SourceCache {
    /// (spec, source, cost), least recently used first.
    entries: Vec<(String, Arc<dyn Source>, usize)>,
    /// Messages of failures to open a job's source (not this worker's own), oldest
    /// first, until the task loop takes them ([`Executor::job_source_failure`]).
    job_source_failures: Vec<String>,
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

    fn note_job_source(&mut self, message: &str) {
        if self.job_source_failures.len() >= JOB_SOURCE_NOTES {
            self.job_source_failures.remove(0);
        }
        self.job_source_failures.push(message.to_string());
    }

    pub(super) fn clear(&mut self) -> usize {
        std::mem::take(&mut self.entries).len()
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Failures to open a job's source noted and not yet taken: more than this (taken by
/// nothing, which should not happen) and the oldest notes go.
const JOB_SOURCE_NOTES: usize = 64;

impl Executor {
    /// The source a merge reads: this worker's own (`--source`) if it has one, else
    /// the job's `spec`; opened once and cached.
    pub(super) fn source(&self, spec: &str) -> Result<Arc<dyn Source>, TaskError> {
        let spec = self.cfg.source.as_deref().unwrap_or(spec);
        if let Some(s) = self.sources.lock().unwrap().get(spec) {
            return Ok(s);
        }
        let inner = open_source_within(
            spec,
            self.cfg.shares.store_indexes,
            self.cfg.shares.max_file,
        )
        .map_err(|e| {
            let f = Failure::config(e);
            if self.cfg.source.is_none() {
                // The job's source, not this worker's: the task loop must not take
                // it for this worker's misconfiguration.
                self.sources.lock().unwrap().note_job_source(&f.message);
            }
            f
        })?;
        let s: Arc<dyn Source> = Arc::new(CachedSource::new(inner, self.cfg.shares.source_cache));
        let cost = source_cost(spec, &self.cfg.shares);
        let evicted =
            self.sources
                .lock()
                .unwrap()
                .insert(spec, s.clone(), cost, self.cfg.shares.sources);
        if evicted > 0 {
            info!(
                evicted,
                "source cache full: closed the least recently used source(s)"
            );
            trim_heap();
        }
        Ok(s)
    }

    /// Whether `f` is a failure to open the job's source (which says nothing about
    /// this worker's configuration, unlike its own `--source` failing to open); each
    /// such failure is answered `true` once.
    pub(super) fn job_source_failure(&self, f: &Failure) -> bool {
        let mut sources = self.sources.lock().unwrap();
        let notes = &mut sources.job_source_failures;
        match notes.iter().position(|m| *m == f.message) {
            Some(i) => {
                notes.remove(i);
                true
            }
            None => false,
        }
    }
}
