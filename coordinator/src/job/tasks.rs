//! A job's tasks: the split tasks from its spec, the merge tasks from what the
//! splits wrote, and the map phase's outcome gathered from its tracker.

use covmerge_proto::manifest::FailedTask;
use covmerge_proto::wire::{ChunkRef, MergeTask, SplitInput, SplitTask, Task};
use covmerge_proto::{Counts, JobSpec, ShardId, SplitId};

use crate::state::{Output, TaskState};
use crate::tracker::Tracker;

/// The split tasks of a job, one per group of inputs ([`JobSpec::split_task_ranges`]:
/// not the partials the merge tasks read directly), numbered by their first input.
pub(super) fn split_tasks(spec: &JobSpec) -> Vec<Task> {
    spec.split_task_ranges()
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
                partials: spec.partial_shard_refs(),
                rollup: spec.rollup.is_some(),
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
    // The partials no split reads count as their splits would have: their rows and
    // bad rows as their descriptions say (the publish gate checks the merges' sums).
    for d in &spec.direct_partials {
        out.totals.rows_in = out.totals.rows_in.saturating_add(d.rows_in);
        out.totals.rows_bad = out.totals.rows_bad.saturating_add(d.rows_bad);
        out.namespaces.add(&d.namespaces);
        if d.rows_bad > 0 && out.first_bad.is_none() {
            out.first_bad = Some(covmerge_proto::wire::BadRow {
                input: spec.inputs[d.input as usize].clone(),
                line: 0,
                problem: format!(
                    "{} bad rows counted in the partial (its rows_bad)",
                    d.rows_bad
                ),
            });
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use covmerge_proto::direct::DirectPartial;
    use covmerge_proto::JobId;

    /// A job of a CSV input, a partial of its shard count and another CSV input.
    fn spec() -> JobSpec {
        JobSpec {
            namespace: None,
            job: JobId::parse("j1").unwrap(),
            inputs: vec!["a.csv".into(), "gs://b/day/".into(), "c.csv".into()],
            base_repo: "r".into(),
            base_commit: "c".into(),
            source: "dir:/s".into(),
            shards: 2,
            max_bad_rows: 5,
            file_path_prefix: String::new(),
            header: covmerge_proto::job::HeaderSpec {
                namespace: "upstream".into(),
                duration: 0,
                date_to: "2026-12-01".into(),
                total_rows: None,
            },
            input: Default::default(),
            splits: Vec::new(),
            groups: Vec::new(),
            input_ids: Vec::new(),
            partial_out: None,
            partial_inputs: Vec::new(),
            direct_partials: vec![DirectPartial {
                input: 1,
                description_sha256: "ab".repeat(32),
                rows_in: 40,
                rows_bad: 2,
                namespaces: Default::default(),
            }],
            rollup: None,
        }
    }

    #[test]
    fn a_partial_of_the_jobs_shard_count_has_no_split_and_every_merge_reads_it() {
        let spec = spec();
        assert_eq!(spec.validate(), Ok(()));
        let splits: Vec<String> = split_tasks(&spec)
            .iter()
            .map(|t| match t {
                Task::Split(s) => s.input.clone(),
                Task::Merge(_) => panic!("a merge"),
            })
            .collect();
        assert_eq!(splits, ["a.csv", "c.csv"]);
        for t in merge_tasks(&spec, vec![Vec::new(); 2]) {
            let Task::Merge(m) = t else { panic!("a split") };
            assert_eq!(m.partials.len(), 1);
            assert_eq!(m.partials[0].input, "gs://b/day/");
            assert_eq!(m.partials[0].description_sha256, "ab".repeat(32));
            assert_eq!(Task::Merge(m).validate(), Ok(()));
        }
        // Its counts are the map phase's, as a split's would be.
        let mut bad = spec.clone();
        bad.direct_partials[0].input = 3;
        assert!(bad.validate().is_err(), "an input the job does not have");
        bad.direct_partials[0].input = 1;
        bad.direct_partials[0].description_sha256 = "x".into();
        assert!(bad.validate().is_err(), "not a SHA-256");
    }
}
