//! A job's tasks: the split tasks from its spec, the merge tasks from what the
//! splits wrote, and the map phase's outcome gathered from its tracker.

use covmerge_proto::manifest::FailedTask;
use covmerge_proto::wire::{ChunkRef, MergeTask, SplitInput, SplitTask, Task};
use covmerge_proto::{Counts, JobSpec, ShardId, SplitId};

use crate::state::{Output, TaskState};
use crate::tracker::Tracker;

/// The split tasks of a job, one per group of inputs ([`JobSpec::split_ranges`]),
/// numbered by their first input.
pub(super) fn split_tasks(spec: &JobSpec) -> Vec<Task> {
    spec.split_ranges()
        .into_iter()
        .map(|r| {
            let i = r.start;
            Task::Split(SplitTask {
                job: spec.job.clone(),
                split: SplitId(i as u32),
                input: spec.inputs[i].clone(),
                shards: spec.shards,
                max_bad_rows: spec.max_bad_rows,
                read: spec.input_spec(i),
                namespace: spec.namespace.clone(),
                more: (i + 1..r.end)
                    .map(|j| {
                        let g = spec.input_spec(j);
                        SplitInput {
                            input: spec.inputs[j].clone(),
                            manager: g.manager,
                            commit: g.commit,
                        }
                    })
                    .collect(),
            })
        })
        .collect()
}

/// The merge tasks of a job, one per shard, given each shard's spill chunks: the
/// shards with the most spill bytes first, so that the merge phase does not end on a
/// large shard merged alone while the other task loops sit idle (longest first is
/// the classic bound for scheduling unequal tasks on a few machines).
pub(super) fn merge_tasks(spec: &JobSpec, chunks: Vec<Vec<ChunkRef>>) -> Vec<Task> {
    let mut shards: Vec<(u64, usize, Vec<ChunkRef>)> = chunks
        .into_iter()
        .enumerate()
        .map(|(i, c)| (c.iter().map(|c| c.len).sum(), i, c))
        .collect();
    shards.sort_by_key(|&(bytes, i, _)| (std::cmp::Reverse(bytes), i));
    shards
        .into_iter()
        .map(|(_, i, shard_chunks)| {
            Task::Merge(MergeTask {
                job: spec.job.clone(),
                shard: ShardId(i as u32),
                base_commit: spec.base_commit.clone(),
                source: spec.source.clone(),
                chunks: shard_chunks,
                file_path_prefix: spec.file_path_prefix.clone(),
                groups: spec.groups.clone(),
            })
        })
        .collect()
}

/// What the map phase produced: totals, each shard's chunks, and the splits that failed.
pub(super) struct MapOutput {
    pub(super) totals: Counts,
    pub(super) chunks: Vec<Vec<ChunkRef>>,
    pub(super) failed: Vec<FailedTask>,
    pub(super) first_bad: Option<covmerge_proto::wire::BadRow>,
    pub(super) namespaces: covmerge_proto::manifest::NamespaceTally,
}

/// Gathers the settled splits' outcomes.
pub(super) fn map_output(spec: &JobSpec, tracker: &Tracker<'_>) -> MapOutput {
    let mut out = MapOutput {
        totals: Counts::default(),
        chunks: vec![Vec::new(); spec.shards as usize],
        failed: tracker.failed(),
        first_bad: None,
        namespaces: Default::default(),
    };
    for (t, s) in &tracker.states {
        if let TaskState::Done {
            output: Output::Split(o),
            ..
        } = s
        {
            // A chunk for a shard the job does not have would be silently dropped:
            // its rows would be missing from the result.
            if let Some((shard, _)) = o.chunks.iter().find(|(sh, _)| sh.0 >= spec.shards) {
                out.failed.push(FailedTask {
                    task: t.to_string(),
                    error: format!(
                        "reported a chunk for shard {shard}, but the job has {} shards",
                        spec.shards
                    ),
                });
                continue;
            }
            out.totals.rows_in = out.totals.rows_in.saturating_add(o.counts.rows_in);
            out.totals.rows_bad = out.totals.rows_bad.saturating_add(o.counts.rows_bad);
            out.namespaces.add(&o.namespaces);
            if out.first_bad.is_none() {
                out.first_bad = o.bad_rows.first().cloned();
            }
            for (shard, chunk) in &o.chunks {
                if let Some(c) = out.chunks.get_mut(shard.index()) {
                    c.push(chunk.clone());
                }
            }
        }
    }
    out
}
