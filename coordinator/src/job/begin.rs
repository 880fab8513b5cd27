//! A job's start: a new job's spec stored under an id nobody uses, or a resumed
//! job's spec loaded and checked against the command line; the lease taken either way.

use std::time::Duration;

use bytes::Bytes;
use covmerge_proto::layout as keys;
use covmerge_proto::{JobId, JobSpec, SplitId};
use covmerge_storage::{Atomicity, Store};
use tracing::warn;

use super::{JobError, ResumeCheck, Start};
use crate::lease::Lease;

fn resume_hint(job: &JobId) -> String {
    format!(
        "a new job needs an id of its own (or no --job: a new id is made); to continue \
         job {job}, run the command that started it with --job {job} --resume"
    )
}

/// Refuses a new job whose id is in use: anything under `jobs/<id>/` but a lease
/// (whose owner, if alive, is refused by the lease itself).
async fn check_new_id(job: &JobId, store: &Store) -> Result<(), JobError> {
    let spec_key = keys::job_spec(job);
    if store.exists(&spec_key).await? {
        if let Some(who) = crate::lease::live_owner(store, job).await? {
            return Err(crate::lease::busy(job, store, who));
        }
        return Err(JobError::Exists(format!(
            "job {job} already exists in {store} ({spec_key}); nothing was changed. {}",
            resume_hint(job)
        )));
    }
    let lease = keys::lease(job);
    let others: Vec<String> = store
        .list(&keys::job_prefix(job))
        .await?
        .into_iter()
        .filter(|k| *k != lease)
        .collect();
    if let Some(first) = others.first() {
        return Err(JobError::Exists(format!(
            "job {job} is in use in {store}: {} object(s) under {}/ without {spec_key} \
             (e.g. {first}); nothing was changed. Use another --job id, or delete that prefix",
            others.len(),
            keys::job_prefix(job)
        )));
    }
    Ok(())
}

/// Loads a resumed job's spec: it must be JSON, name this job, be within the bounds
/// tasks get, and be what the command line asks for.
async fn load_for_resume(
    job: &JobId,
    check: Option<&ResumeCheck>,
    store: &Store,
) -> Result<JobSpec, JobError> {
    let key = keys::job_spec(job);
    let Some(b) = store.get_opt(&key).await? else {
        return Err(JobError::Plan(format!(
            "--resume: job {job} not found in {store} (no {key})"
        )));
    };
    let refused = |why: String| {
        JobError::Resume(format!(
            "--resume: job {job}: {key} in {store} is refused: {why}; nothing was changed"
        ))
    };
    let spec = serde_json::from_slice::<JobSpec>(&b)
        .map_err(|e| refused(format!("not a job spec: {e}")))?;
    if spec.job != *job {
        return Err(refused(format!("it names job {:?}", spec.job.as_str())));
    }
    spec.validate().map_err(refused)?;
    if let Some(c) = check {
        if let Some((field, stored, asked)) =
            spec.first_difference(&c.spec, c.shards_given, c.date_to_given)
        {
            return Err(JobError::Resume(format!(
                "--resume: job {job} was started with other settings: {field} is {stored} \
                 in {key}, {asked} on this command line; nothing was changed. Resume with the \
                 flags that started the job, or start a new job with another --job id"
            )));
        }
        // An input rewritten under its name (BigQuery re-exports reuse
        // `000000000000.csv.gz`): the splits done before would keep its old rows and
        // the rest read the new ones, a result matching neither.
        if spec.input_ids.is_empty() {
            return Err(JobError::Resume(format!(
                "--resume: job {job}: {key} in {store} was written by an older covmerge that \
                 did not record what its inputs were (size, ETag, generation, modification \
                 time), so an input rewritten since under the same name cannot be told; \
                 nothing was changed. Run the job again as a new job (another --job id, or none)"
            )));
        }
        // Only a split that finished read the old content: an input whose split has
        // not (it failed on a bad row, say, and the input was fixed) is read anew,
        // whole, and the result is that of the new content.
        let mut changed = Vec::new();
        for (i, what) in crate::plan::changed_inputs(&spec, &c.spec) {
            let split = spec
                .split_ranges()
                .iter()
                .find(|r| r.contains(&i))
                .map_or(i, |r| r.start);
            // A partial the merges read directly has no split: merges done may have
            // read the old one.
            let direct = spec.direct_partials.iter().any(|d| d.input as usize == i);
            if direct
                || store
                    .exists(&keys::split_done(job, SplitId(split as u32)))
                    .await?
            {
                changed.push(what);
            } else {
                warn!(job = %job, "{what}; its split has not finished, so it is read anew, whole");
            }
        }
        if !changed.is_empty() {
            return Err(JobError::Resume(format!(
                "--resume: job {job}: {}; the tasks done before read the old content, a \
                 result mixing both would match neither, so nothing was changed. Restore \
                 the input as it was, or merge the new one as a new job (another --job id, \
                 or none)",
                changed.join("; ")
            )));
        }
    }
    Ok(spec)
}

/// Stores a new job's spec (create-if-absent) or loads a resumed job's, and takes the
/// job's lease (if `lease` is set) before anything is written.
pub(super) async fn begin(
    start: Start,
    lease: Option<Duration>,
    store: &Store,
) -> Result<(JobSpec, Option<Lease>), JobError> {
    match start {
        Start::New(spec) => {
            let spec = *spec;
            let job = spec.job.clone();
            check_new_id(&job, store).await?;
            let held = match lease {
                Some(i) => Some(Lease::acquire(store, &job, i).await?),
                None => None,
            };
            let body = serde_json::to_vec_pretty(&spec).expect("spec encodes");
            let created = store
                .put_new(&keys::job_spec(&job), Bytes::from(body))
                .await;
            let refused = match created {
                Ok((true, atomicity)) => {
                    if atomicity == Atomicity::ReadCompareWrite {
                        warn!(store = %store, "this store has no create-if-absent write: job.json was written after a look");
                    }
                    return Ok((spec, held));
                }
                Ok((false, _)) => JobError::Exists(format!(
                    "job {job} already exists in {store} ({}): another coordinator stored it \
                     just now; nothing of it was changed. {}",
                    keys::job_spec(&job),
                    resume_hint(&job)
                )),
                Err(e) => e.into(),
            };
            if let Some(l) = held {
                l.release().await;
            }
            Err(refused)
        }
        Start::Resume { job, check } => {
            let spec = load_for_resume(&job, check.as_deref(), store).await?;
            let held = match lease {
                Some(i) => Some(Lease::acquire_for_resume(store, &job, i).await?),
                None => None,
            };
            Ok((spec, held))
        }
    }
}

/// Before a write that publishes: the lease must still be this coordinator's.
pub(super) async fn still_held(lease: Option<&Lease>) -> Result<(), JobError> {
    match lease {
        Some(l) => l.ensure_held().await,
        None => Ok(()),
    }
}
