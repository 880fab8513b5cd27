//! Where a job's objects live in the store: the one place that names them.
//!
//! ```text
//! jobs/<job>/job.json                                  the JobSpec (written first, create-if-absent)
//! jobs/<job>/lease.json                                which coordinator drives the job (heartbeat)
//! jobs/<job>/spill/<split>/<nonce>/<seq>.cms           spill objects of one split attempt
//! jobs/<job>/splits/<split>.done                       SplitOutcome (the split's commit point)
//! jobs/<job>/parts/<shard>.jsonl.gz                    a merged part
//! jobs/<job>/parts/<shard>.done                        MergeOutcome (the shard's commit point)
//! jobs/<job>/attempts/<task>/<nonce>                   one empty object per execution started
//! jobs/<job>/partial/<table>-<shard>.parquet           a shard's file of the job's partial (--partial-out)
//! jobs/<job>/result.jsonl.gz                           the assembled result (fleet mode)
//! jobs/<job>/manifest.json                             the manifest, written last
//! ```
//!
//! The coordinator writes `job.json`, `lease.json`, the result and the manifest; workers write
//! everything else; `covmerge status` only reads. All three build keys here.

use crate::{JobId, ShardId, SplitId, TaskRef};

/// `jobs/<job>`: everything of one job is under this prefix.
pub fn job_prefix(job: &JobId) -> String {
    format!("jobs/{job}")
}

/// The job's spec, written by the coordinator before any task.
pub fn job_spec(job: &JobId) -> String {
    format!("jobs/{job}/job.json")
}

/// The lease of the coordinator driving the job: its owner and heartbeat. Taken before
/// `job.json` is written or a task published, deleted when the job ends.
pub fn lease(job: &JobId) -> String {
    format!("jobs/{job}/lease.json")
}

/// The prefix every spill object of the job starts with (a merge task may name no other).
pub fn spill_prefix(job: &JobId) -> String {
    format!("jobs/{job}/spill/")
}

/// One spill object of one split attempt (`nonce`): the chunks of every shard that
/// one flush wrote, end to end ([`crate::wire::ChunkRef`] names a shard's range).
pub fn spill(job: &JobId, split: SplitId, nonce: &str, seq: u32) -> String {
    format!("jobs/{job}/spill/{split}/{nonce}/{seq:05}.cms")
}

/// The merge tasks' chunks as the coordinator published them
/// ([`crate::wire::MergePlan`]): a merge task whose chunks are not its shard's is
/// refused.
pub fn merge_plan(job: &JobId) -> String {
    format!("jobs/{job}/merges.json")
}

/// A split's commit point (its `SplitOutcome`).
pub fn split_done(job: &JobId, split: SplitId) -> String {
    format!("jobs/{job}/splits/{split}.done")
}

/// The prefix of every split marker.
pub fn splits(job: &JobId) -> String {
    format!("jobs/{job}/splits/")
}

/// A shard's file `name` of the job's partial (`--partial-out`), written by its merge
/// task and copied to the partial's URL when the job publishes.
pub fn partial_file(job: &JobId, name: &str) -> String {
    format!("jobs/{job}/partial/{name}")
}

/// The prefix of every part and part marker.
pub fn parts(job: &JobId) -> String {
    format!("jobs/{job}/parts/")
}

/// A shard's merged part.
pub fn part(job: &JobId, shard: ShardId) -> String {
    format!("jobs/{job}/parts/{shard}.jsonl.gz")
}

/// A shard's commit point (its `MergeOutcome`).
pub fn part_done(job: &JobId, shard: ShardId) -> String {
    format!("jobs/{job}/parts/{shard}.done")
}

/// The marker of a task: its output exists.
pub fn done(job: &JobId, task: TaskRef) -> String {
    match task {
        TaskRef::Split(s) => split_done(job, s),
        TaskRef::Merge(s) => part_done(job, s),
    }
}

/// Where executions of tasks are recorded, one object each.
pub fn attempts(job: &JobId) -> String {
    format!("jobs/{job}/attempts/")
}

/// The directory name of a task under [`attempts`].
pub fn task_dir(task: TaskRef) -> String {
    match task {
        TaskRef::Split(s) => format!("split-{s}"),
        TaskRef::Merge(s) => format!("shard-{s}"),
    }
}

/// One execution of a task.
pub fn attempt(job: &JobId, task: TaskRef, nonce: &str) -> String {
    format!("jobs/{job}/attempts/{}/{nonce}", task_dir(task))
}

/// The assembled result kept in the store (fleet mode).
pub fn result(job: &JobId) -> String {
    format!("jobs/{job}/result.jsonl.gz")
}

/// The job's manifest: its presence means the job ended.
pub fn manifest(job: &JobId) -> String {
    format!("jobs/{job}/manifest.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_under_the_job_prefix() {
        let j = JobId::parse("j1").unwrap();
        let p = format!("{}/", job_prefix(&j));
        let keys = [
            job_spec(&j),
            lease(&j),
            spill(&j, SplitId(1), "n", 3),
            split_done(&j, SplitId(1)),
            part(&j, ShardId(2)),
            part_done(&j, ShardId(2)),
            splits(&j),
            parts(&j),
            attempt(&j, TaskRef::Merge(ShardId(2)), "n"),
            result(&j),
            manifest(&j),
        ];
        for k in keys {
            assert!(k.starts_with(&p), "{k}");
        }
        assert!(spill(&j, SplitId(1), "n", 3).starts_with(&spill_prefix(&j)));
        assert_eq!(
            done(&j, TaskRef::Split(SplitId(1))),
            split_done(&j, SplitId(1))
        );
        assert_eq!(part(&j, ShardId(2)), "jobs/j1/parts/00002.jsonl.gz");
    }
}
