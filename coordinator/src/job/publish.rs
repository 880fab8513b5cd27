//! The end of a job whose tasks have all settled: its manifest, the reasons it may
//! publish nothing, and the publication (gate, result, manifest, cleanup, dashboard).

use std::collections::{BTreeMap, HashMap};

use covmerge_proto::layout as keys;
use covmerge_proto::manifest::{FailedTask, JobStatus};
use covmerge_proto::wire::MergeOutcome;
use covmerge_proto::{Counts, JobSpec, Manifest, TaskRef};
use covmerge_queue::Queue;
use covmerge_storage::Store;
use tracing::warn;

use super::begin::still_held;
use super::{JobError, JobOptions, JobOutcome};
use crate::finish::{self, Assembly, Destination};
use crate::lease::Lease;
use crate::state::{Output, TaskState};

/// The manifest of a job whose merge tasks settled as `merges`, and the parts to
/// publish, in shard order.
pub(super) async fn manifest_of(
    spec: &JobSpec,
    totals: Counts,
    merges: &BTreeMap<TaskRef, TaskState>,
    outages: &HashMap<TaskRef, u32>,
    store: &Store,
) -> Result<(Manifest, Vec<MergeOutcome>), JobError> {
    let job = &spec.job;
    let mut manifest = Manifest {
        job: job.to_string(),
        status: JobStatus::Complete,
        base_repo: spec.base_repo.clone(),
        base_commit: spec.base_commit.clone(),
        result: None,
        inputs: spec.inputs.clone(),
        totals,
        shards: Vec::new(),
        failed: Vec::new(),
        dashboard_upload: None,
        groups: spec.groups.clone(),
        other_namespaces: Default::default(),
        header: None,
        partial: None,
    };
    // Executions recorded by the workers: a delivery count misses executions that
    // overlapped (a stalled worker finishing after another one redid its shard).
    let mut executions: HashMap<String, u32> = HashMap::new();
    let attempts_prefix = keys::attempts(job);
    for key in store.list(&attempts_prefix).await? {
        if let Some((dir, _)) = key
            .strip_prefix(&attempts_prefix)
            .and_then(|k| k.split_once('/'))
        {
            *executions.entry(dir.to_string()).or_default() += 1;
        }
    }
    let mut parts = Vec::new();
    for (t, s) in merges {
        if let (
            TaskRef::Merge(shard),
            TaskState::Done {
                output: Output::Merge(o),
                attempts,
            },
        ) = (t, s)
        {
            manifest.totals.add(&o.counts);
            manifest.shards.push(covmerge_proto::ShardEntry {
                index: shard.0,
                records: o.records,
                bytes: o.bytes,
                sha256: o.sha256.clone(),
                attempts: (*attempts)
                    .max(executions.get(&keys::task_dir(*t)).copied().unwrap_or(0))
                    .max(1),
                outages: outages.get(t).copied().unwrap_or(0),
            });
            parts.push((**o).clone());
        }
    }
    // Splits count every row read; rows outside --file-path-prefix are not in scope.
    manifest.totals.rows_in = manifest
        .totals
        .rows_in
        .saturating_sub(manifest.totals.rows_outside_prefix);
    Ok((manifest, parts))
}

/// Why a job whose tasks have all settled publishes nothing (the manifest then says
/// failed): tasks that failed, or merges whose sources hold different bases. Every
/// file of the input absent at a base the source holds is a valid result (contract
/// §3: each counts as deleted): the header alone.
pub(super) fn refusal(
    spec: &JobSpec,
    manifest: &mut Manifest,
    failed: Vec<FailedTask>,
    parts: &[MergeOutcome],
) -> Option<JobError> {
    let job = &spec.job;
    let e = if !failed.is_empty() {
        manifest.failed = failed.clone();
        JobError::TasksFailed {
            job: job.to_string(),
            failed,
        }
    } else if let Some(why) = sources_differ(parts, &manifest.shards) {
        JobError::SourcesDiffer(format!(
            "job {job}: the merges' sources do not hold the same base commit {}: {why}; a worker's --source lacks (or has other) files of the base, which its shards would count as deleted; give the workers the same source; no result published",
            spec.base_commit,
        ))
    } else {
        return None;
    };
    manifest.status = JobStatus::Failed;
    Some(e)
}

/// The merges grouped by the id of the base their worker's source gave, when there is
/// more than one id: each id with its shards and workers. `shards` is the manifest's
/// (in the order of `parts`).
pub(super) fn sources_differ(
    parts: &[MergeOutcome],
    shards: &[covmerge_proto::ShardEntry],
) -> Option<String> {
    let mut by_id: BTreeMap<&str, (Vec<u32>, Vec<&str>)> = BTreeMap::new();
    for (o, s) in parts.iter().zip(shards) {
        let e = by_id.entry(o.source_id.as_str()).or_default();
        e.0.push(s.index);
        let w = if o.worker.is_empty() {
            "a worker of protocol 6 or before"
        } else {
            o.worker.as_str()
        };
        if !e.1.contains(&w) {
            e.1.push(w);
        }
    }
    if by_id.len() < 2 {
        return None;
    }
    let groups: Vec<String> = by_id
        .iter()
        .map(|(id, (shards, workers))| {
            let id = if id.is_empty() {
                "no id (a marker of protocol 6 or before)"
            } else {
                id
            };
            let shards: Vec<String> = shards.iter().map(u32::to_string).collect();
            format!(
                "shard(s) {} merged by {} saw {id}",
                shards.join(", "),
                workers.join(", ")
            )
        })
        .collect();
    Some(groups.join("; "))
}

/// What the merges made: the parts, and with `--partial-out` the partial's
/// description (or why it is refused).
pub(super) struct Merged {
    /// The parts, in shard order.
    pub(super) parts: Vec<MergeOutcome>,
    /// The partial's description ([`super::partial::describe`]).
    pub(super) partial: Option<Result<covmerge_partial::Description, crate::gate::Refused>>,
}

/// Publishes a complete job: the result, then the partial (`--partial-out`), then the
/// manifest naming the result, then the cleanup, then the dashboard. Each step that
/// writes first checks the lease.
pub(super) async fn publish(
    spec: &JobSpec,
    mut manifest: Manifest,
    merged: Merged,
    opts: &JobOptions,
    queue: &dyn Queue,
    store: &Store,
    lease: Option<&Lease>,
) -> Result<JobOutcome, JobError> {
    let dest = Destination::parse(
        opts.out.as_deref(),
        opts.result_in_store,
        opts.dashboard.is_some(),
    )?;
    covmerge_fault::pause_async("assemble").await;
    let Merged { parts, partial } = merged;
    let out = Assembly::new(spec, &manifest, parts, store, opts);
    let checked = match out.gate(spec, &manifest).await {
        Ok(()) => partial.transpose(),
        Err(refused) => Err(refused),
    };
    let partial = match checked {
        Ok(p) => p,
        Err(refused) => {
            let e = JobError::Gate {
                job: spec.job.to_string(),
                refused: Box::new(refused),
            };
            return Err(refuse_job(manifest, "publish gate", e, opts, store, spec, lease).await);
        }
    };
    if let Some(why) = crate::gate::why_empty(&manifest) {
        warn!("{why}");
    }
    // The partial's destination and files checked before anything is published: a
    // refused partial publishes nothing, as a refused result.
    let partial = match (&partial, &spec.partial_out) {
        (Some(d), Some(url)) => {
            still_held(lease).await?;
            match super::partial::check_partial(spec, d, store, url).await {
                Ok(p) => Some(p),
                Err(e) => {
                    return Err(
                        refuse_job(manifest, "--partial-out", e, opts, store, spec, lease).await,
                    );
                }
            }
        }
        _ => None,
    };
    manifest.header = Some(out.header_line().to_string());
    still_held(lease).await?;
    let result = out.write_result(&dest).await?;
    if let Some(r) = &result {
        crate::finish::note_published(format!("the result is published at {r}"));
    }
    manifest.result = result.clone();
    if let Some(p) = partial {
        still_held(lease).await?;
        manifest.partial = Some(p.write().await?);
    }
    still_held(lease).await?;
    out.write_manifest(&manifest)
        .await
        .map_err(|e| match &result {
            Some(r) => JobError::AfterPublish {
                error: Box::new(e),
                result: r.clone(),
            },
            None => e,
        })?;
    // The job's own work is done whatever the dashboard says: clean up first, so a
    // dashboard failure (the result kept, `covmerge notify` to re-send) leaves no spill.
    out.cleanup(queue).await;
    let mut dashboard_rows = None;
    if let Some(d) = &opts.dashboard {
        still_held(lease).await?;
        dashboard_rows = Some(
            out.to_dashboard(d, result.as_deref(), &mut manifest)
                .await?,
        );
    }
    Ok(JobOutcome {
        manifest,
        result: result.unwrap_or_default(),
        dashboard_rows,
    })
}

/// Ends a job refused before anything was published: its manifest written with status
/// failed and `task`'s error (unless the lease is lost), then the error returned.
pub(super) async fn refuse_job(
    mut manifest: Manifest,
    task: &str,
    e: JobError,
    opts: &JobOptions,
    store: &Store,
    spec: &JobSpec,
    lease: Option<&Lease>,
) -> JobError {
    manifest.status = JobStatus::Failed;
    manifest.failed = vec![FailedTask {
        task: task.into(),
        error: e.to_string(),
    }];
    if let Err(held) = still_held(lease).await {
        return held;
    }
    match finish::write_manifest(&manifest, opts, store, &spec.job).await {
        Ok(()) => e,
        Err(written) => written,
    }
}
