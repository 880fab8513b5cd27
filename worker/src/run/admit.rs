//! Admitting a task ([`Executor::admit`]): it runs only if it is part of its job as
//! the coordinator stored it, its spec (`jobs/<id>/job.json`) and, for a merge, the
//! chunks planned for its shard (`jobs/<id>/merges.json`); both cached for the jobs
//! seen lately ([`Recent`]).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use covmerge_proto::input::InputSpec;
use covmerge_proto::wire::{Failure, MergePlan, MergeTask, Task};
use covmerge_proto::{JobId, JobSpec};

use super::executor::Executor;
use super::failure::*;
use super::keys;
use crate::split::inputs::split_inputs;

/// What an executor remembers of the jobs seen lately; more jobs than this at once
/// just reload.
const RECENT_JOBS: usize = 64;

/// A map of what an executor keeps of the last [`RECENT_JOBS`] jobs, emptied when it
/// would hold more.
pub(super) struct Recent<K, V>(Mutex<HashMap<K, V>>);

impl<K, V> Default for Recent<K, V> {
    fn default() -> Self {
        Recent(Mutex::new(HashMap::new()))
    }
}

impl<K: Hash + Eq, V: Clone> Recent<K, V> {
    /// The value kept for `k`.
    pub(super) fn get(&self, k: &K) -> Option<V> {
        self.0.lock().unwrap().get(k).cloned()
    }

    /// Keeps `v` for `k`.
    pub(super) fn put(&self, k: K, v: V) {
        let mut m = self.0.lock().unwrap();
        if m.len() >= RECENT_JOBS {
            m.clear();
        }
        m.insert(k, v);
    }

    /// Forgets everything.
    pub(super) fn clear(&self) {
        self.0.lock().unwrap().clear();
    }
}

impl Executor {
    /// The spec the coordinator stored for `job` (cached unless `fresh`).
    pub(super) async fn job_spec(
        &self,
        job: &JobId,
        fresh: bool,
    ) -> Result<Arc<JobSpec>, TaskError> {
        if let Some(s) = self.specs.get(job).filter(|_| !fresh) {
            return Ok(s);
        }
        let key = keys::job_spec(job);
        // The coordinator stores the spec before it publishes a task: a worker that
        // does not find it looks at the wrong store (a bucket or root of another
        // fleet). The worker's fault, not the task's, unless several workers say so (a
        // forged task, a job whose objects were deleted).
        let missing =
            || Failure::config(format!("job {job} is unknown: no {key} in {}", self.store));
        let spec: JobSpec = self
            .stored(&key, "job spec", missing, |b| serde_json::from_slice(b))
            .await?;
        if spec.job != *job {
            return Err(Failure::refused(format!("{key} names job {}", spec.job)));
        }
        spec.validate()
            .map_err(|e| Failure::refused(format!("{key}: job spec refused: {e}")))?;
        let spec = Arc::new(spec);
        self.specs.put(job.clone(), spec.clone());
        Ok(spec)
    }

    /// Admits a task only if it is part of its job as the coordinator stored it: a
    /// split reads one of the job's inputs, a merge uses the job's source and base.
    /// Whoever can publish a task can thus not make a worker read other files.
    pub async fn admit(&self, task: &Task) -> Result<(), TaskError> {
        let check = |spec: &JobSpec| -> Result<(), String> {
            match task {
                Task::Split(t) => {
                    // Exactly one of the job's splits: its inputs, in order, are those
                    // of the split that starts at its first.
                    let first = t.split.index();
                    let range = spec
                        .split_task_ranges()
                        .into_iter()
                        .find(|r| r.start == first)
                        .ok_or_else(|| format!("job {} has no split {}", t.job, t.split))?;
                    let inputs: Vec<(&str, InputSpec)> = split_inputs(t);
                    if inputs.len() != range.len()
                        || range
                            .clone()
                            .zip(&inputs)
                            .any(|(j, (input, _))| spec.inputs[j] != *input)
                    {
                        return Err(format!(
                            "its inputs are not those of split {} of job {}",
                            t.split, t.job
                        ));
                    }
                    // Its namespace too: a split of another namespace's rows was merged
                    // into the job, and published as its coverage.
                    if t.shards != spec.shards
                        || t.max_bad_rows != spec.max_bad_rows
                        || t.namespace != spec.namespace
                        || range
                            .zip(&inputs)
                            .any(|(j, (_, read))| *read != spec.input_spec(j))
                    {
                        return Err(format!("its settings are not those of job {}", t.job));
                    }
                }
                Task::Merge(t) => {
                    if t.shard.0 >= spec.shards {
                        return Err(format!("job {} has {} shards", t.job, spec.shards));
                    }
                    if t.rollup != spec.rollup.is_some() {
                        return Err(format!(
                            "it is {}a roll-up's task, job {} is {}a roll-up",
                            if t.rollup { "" } else { "not " },
                            t.job,
                            if spec.rollup.is_some() { "" } else { "not " }
                        ));
                    }
                    if t.source != spec.source
                        || t.base_commit != spec.base_commit
                        || t.file_path_prefix != spec.file_path_prefix
                    {
                        return Err(format!(
                            "its source, base commit or file path prefix is not that of job {}",
                            t.job
                        ));
                    }
                    if t.groups != spec.groups {
                        return Err(format!("its groups are not those of job {}", t.job));
                    }
                    if t.partials != spec.partial_shard_refs() {
                        return Err(format!(
                            "its partials are not those the job {} reads directly",
                            t.job
                        ));
                    }
                }
            }
            Ok(())
        };
        if check(&*self.job_spec(task.job(), false).await?).is_err() {
            // The job may have been planned again under the same id: reload before
            // refusing.
            check(&*self.job_spec(task.job(), true).await?)
                .map_err(|why| Failure::refused(format!("{} refused: {why}", task.task_ref())))?;
        }
        match task {
            Task::Merge(t) => self.admit_chunks(t).await,
            Task::Split(_) => Ok(()),
        }
    }

    /// Admits a merge task only with the chunks the coordinator planned for its shard
    /// ([`covmerge_proto::wire::MergePlan`], reloaded once before refusing: a resumed
    /// job plans again).
    async fn admit_chunks(&self, t: &MergeTask) -> Result<(), TaskError> {
        for fresh in [false, true] {
            if self
                .merge_plan(&t.job, fresh)
                .await?
                .holds(t.shard, &t.chunks)
            {
                return Ok(());
            }
        }
        Err(Failure::refused(format!(
            "merge {} of job {} refused: its chunks are not those the job's splits wrote for it ({})",
            t.shard.0,
            t.job,
            keys::merge_plan(&t.job)
        )))
    }

    /// The job's merge plan, from the cache unless `fresh`.
    async fn merge_plan(&self, job: &JobId, fresh: bool) -> Result<Arc<MergePlan>, TaskError> {
        if let Some(p) = self.plans.get(job).filter(|_| !fresh) {
            return Ok(p);
        }
        let key = keys::merge_plan(job);
        let missing = || {
            Failure::refused(format!(
                "job {job} has no merge plan ({key}): its merge tasks were not published by its coordinator"
            ))
        };
        let plan: MergePlan = self
            .stored(&key, "merge plan", missing, |b| serde_json::from_slice(b))
            .await?;
        if plan.job != *job {
            return Err(Failure::refused(format!("{key} names job {}", plan.job)));
        }
        let plan = Arc::new(plan);
        self.plans.put(job.clone(), plan.clone());
        Ok(plan)
    }

    /// The JSON object `key` the coordinator stored (`what` it is, read by `parse`),
    /// refused when unreadable; `missing` when absent.
    async fn stored<T>(
        &self,
        key: &str,
        what: &str,
        missing: impl FnOnce() -> TaskError,
        parse: impl FnOnce(&[u8]) -> serde_json::Result<T>,
    ) -> Result<T, TaskError> {
        let bytes = self
            .store
            .get_opt(key)
            .await
            .map_err(store_failure)?
            .ok_or_else(missing)?;
        parse(&bytes).map_err(|e| Failure::refused(format!("{key}: unreadable {what}: {e}")))
    }
}
