//! The result is the header's gzip member followed by the parts' gzip members in shard
//! order (a multi-member gzip stream), written in one atomic step: a local file is
//! written under a temporary name in the same directory and renamed; a store object is
//! a multipart upload that becomes visible only when it completes.

use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use covmerge_proto::layout as keys;
use covmerge_proto::output::{write_header, HistoryRecord};
use covmerge_proto::wire::MergeOutcome;
use covmerge_proto::{Counts, JobId, JobSpec, Manifest};
use covmerge_storage::local::{
    final_target, parent_dir, same_location, stream_fd, OutputFile as AtomicFile,
};
use covmerge_storage::{is_store_url, open_object, redact_url, Store};
use flate2::{write::GzEncoder, Compression};
use futures::StreamExt;

use covmerge_queue::Queue;
use tracing::{info, warn};

use covmerge_input::ChannelReader;
use covmerge_proto::ShardId;

use crate::dashboard::{upload_object_url, Dashboard};
use crate::gate::{self, Invariant, PartCheck, PartSummary, Refused};
use crate::{JobError, JobOptions};

/// Where the result goes.
pub enum Destination {
    /// A local file.
    Local(PathBuf),
    /// An object: its store and key.
    Store(Store, String),
    /// Only under the job's prefix.
    JobStore,
    /// Only where the dashboard says (`--dashboard` without `--out`, embedded).
    DashboardOnly,
}

impl Destination {
    /// Where `--out` (`out`) sends the result; without it, the job's prefix (`in_store`) or the dashboard's object (`dashboard`), else an error.
    pub fn parse(out: Option<&str>, in_store: bool, dashboard: bool) -> Result<Self, JobError> {
        match out {
            None if in_store => Ok(Destination::JobStore),
            None if dashboard => Ok(Destination::DashboardOnly),
            None => Err(JobError::Plan("--out is required".into())),
            Some(o) if is_store_url(o) => {
                let (s, k) = open_object(o).map_err(|e| JobError::Plan(e.to_string()))?;
                // A name the store cannot write fails now, not after the merge.
                s.check_name(&k)
                    .map_err(|e| JobError::Plan(format!("--out {o}: {e}")))?;
                Ok(Destination::Store(s, k))
            }
            Some(o) => Ok(Destination::Local(PathBuf::from(o))),
        }
    }
}

/// The header line (without its newline) and the same line as its own gzip member.
fn header_member(spec: &JobSpec, totals: &Counts) -> (String, Bytes) {
    let h = HistoryRecord {
        session: "",
        time: "0001-01-01T00:00:00Z",
        namespace: &spec.header.namespace,
        repo: &spec.base_repo,
        commit: &spec.base_commit,
        duration: spec.header.duration,
        date_to: &spec.header.date_to,
        total_rows: spec
            .header
            .total_rows
            .unwrap_or(totals.rows_in.min(i64::MAX as u64) as i64),
    };
    let mut line = Vec::new();
    write_header(&mut line, &h).expect("in-memory write");
    let mut enc = GzEncoder::new(Vec::new(), Compression::new(6));
    enc.write_all(&line).expect("in-memory write");
    line.pop();
    let line = String::from_utf8(line).expect("JSON is UTF-8");
    (line, Bytes::from(enc.finish().expect("in-memory write")))
}

fn out_err(dest: &str, e: impl std::fmt::Display) -> JobError {
    JobError::Output {
        dest: dest.to_string(),
        message: e.to_string(),
    }
}

/// A finished job's output, ready to publish: the header member and the parts in
/// shard order, in the job's store. The steps after the merge are its methods, in the
/// order [`crate::run_job`] takes them: [`Assembly::write_result`], the manifest,
/// [`Assembly::cleanup`], [`Assembly::to_dashboard`].
pub struct Assembly<'a> {
    job: &'a JobId,
    store: &'a Store,
    opts: &'a JobOptions,
    header: Bytes,
    header_line: String,
    parts: Vec<String>,
    /// Per part, what its merge reported of its files' base line counts.
    base_lines: Vec<Vec<(String, u32)>>,
}

impl<'a> Assembly<'a> {
    /// The output of `spec`'s job, whose merges reported `parts` (in shard order).
    pub fn new(
        spec: &'a JobSpec,
        manifest: &Manifest,
        parts: Vec<MergeOutcome>,
        store: &'a Store,
        opts: &'a JobOptions,
    ) -> Self {
        let (header_line, header) = header_member(spec, &manifest.totals);
        Assembly {
            job: &spec.job,
            store,
            opts,
            header,
            header_line,
            base_lines: parts.iter().map(|o| o.base_lines.clone()).collect(),
            parts: parts.into_iter().map(|o| o.part).collect(),
        }
    }

    /// The publish gate ([`crate::gate`]): every part read back from the store and
    /// checked (parts in parallel, on blocking threads), then the header and the
    /// parts' summaries against the manifest. Runs before anything is published.
    pub async fn gate(&self, spec: &JobSpec, manifest: &Manifest) -> Result<(), Refused> {
        let t0 = std::time::Instant::now();
        let width = std::thread::available_parallelism().map_or(2, |n| n.get());
        let shards: Vec<u32> = manifest.shards.iter().map(|s| s.index).collect();
        let checks = self.parts.iter().zip(&self.base_lines).zip(shards).map(
            |((key, lines), shard)| {
                let (store, key, spec) = (self.store.clone(), key.clone(), spec.clone());
                let lines = lines.clone();
                async move { check_stored_part(&store, &key, ShardId(shard), &spec, lines).await }
            },
        );
        let summaries: Vec<PartSummary> = futures::stream::iter(checks)
            .buffered(width)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        gate::check_result(spec, &self.header, manifest, &summaries)?;
        info!(
            parts = summaries.len(),
            ms = t0.elapsed().as_millis() as u64,
            "publish gate: every part read back and checked"
        );
        Ok(())
    }

    /// The result's header line, as it is published (without its newline).
    pub fn header_line(&self) -> &str {
        &self.header_line
    }

    /// Writes the result to `dest` (and under the job's prefix in fleet mode); returns
    /// its location (`None`: only the dashboard gets it).
    pub async fn write_result(&self, dest: &Destination) -> Result<Option<String>, JobError> {
        self.write_to(dest, self.opts.result_in_store).await
    }

    async fn write_to(
        &self,
        dest: &Destination,
        in_store: bool,
    ) -> Result<Option<String>, JobError> {
        let (store, header, parts) = (self.store, &self.header, &self.parts[..]);
        let job_key = keys::result(self.job);
        if in_store {
            store.concat(&job_key, header.clone(), store, parts).await?;
        }
        match dest {
            Destination::DashboardOnly => Ok(None),
            Destination::JobStore => Ok(Some(format!("{store}/{job_key}"))),
            Destination::Store(s, k) => {
                s.concat(k, header.clone(), store, parts).await?;
                Ok(Some(format!("{s}/{k}")))
            }
            Destination::Local(path) => {
                let shown = path.display().to_string();
                let mut file = AtomicFile::create(path).map_err(|e| out_err(&shown, e))?;
                file.write_all(header).map_err(|e| out_err(&shown, e))?;
                let mut streams = std::pin::pin!(store.get_streams(parts));
                while let Some(s) = streams.next().await {
                    let mut s = s?;
                    while let Some(chunk) = s.next().await {
                        file.write_all(&chunk?).map_err(|e| out_err(&shown, e))?;
                    }
                }
                file.commit().map_err(|e| out_err(&shown, e))?;
                Ok(Some(shown))
            }
        }
    }

    /// Writes the manifest where the job's options say.
    pub async fn write_manifest(&self, m: &Manifest) -> Result<(), JobError> {
        write_manifest(m, self.opts, self.store, self.job).await
    }

    /// Deletes the job's spill chunks and attempt records and its queues, when the
    /// options ask for it. The result is written: a failure here is a warning, not the
    /// job's.
    pub async fn cleanup(&self, queue: &dyn Queue) {
        cleanup(self.opts, self.store, self.job, queue).await;
    }

    /// contract §8 after the result is written: `create_upload_url`, the result streamed
    /// from the parts to that GCS object, the manifest updated to name it,
    /// `save_coverage`. Returns the DB rows the dashboard created. On failure the
    /// result stays where it is (`result`, or a local file when it was to go to the
    /// dashboard only) and the error says where and how to re-send it without merging
    /// again.
    pub async fn to_dashboard(
        &self,
        d: &Dashboard,
        result: Option<&str>,
        manifest: &mut Manifest,
    ) -> Result<i64, JobError> {
        let resend = |arg: &str, what: &str| {
            format!(
                "COVMERGE_DASHBOARD_KEY=... covmerge notify --dashboard {} --dashboard-client {} {arg} {}",
                sh_quote(&redact_url(&d.url)),
                sh_quote(&d.client),
                sh_quote(what)
            )
        };
        // Where the result stays when the dashboard never gets it.
        let keep = |message: String| async move {
            let kept = match result {
                Some(r) => r.to_string(),
                None => {
                    let local = Destination::Local(PathBuf::from(format!(
                        "covmerge-{}.jsonl.gz",
                        self.job
                    )));
                    self.write_to(&local, false)
                        .await?
                        .expect("a local destination has a location")
                }
            };
            Err(JobError::Dashboard {
                message,
                resend: resend("--result", &kept),
                kept,
            })
        };
        if let Some(r) = result {
            note_published(format!(
                "the result is published at {r}; the dashboard was not told: send it with {}",
                resend("--result", r)
            ));
        }
        let upload = match d.create_upload_url().await {
            Ok(u) => u,
            Err(e) => return keep(e).await,
        };
        let obj = upload_object_url(&upload);
        let written = match open_object(&obj) {
            Ok((s, k)) => s
                .concat(&k, self.header.clone(), self.store, &self.parts)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = written {
            return keep(format!("writing the result to {obj}: {e}")).await;
        }
        info!(object = %obj, "result written for the dashboard");
        manifest.dashboard_upload = Some(upload.clone());
        self.write_manifest(manifest).await?;
        note_published(format!(
            "the result is published at {}{obj}; save_coverage may not have reached the dashboard: send it with {}",
            result.map(|r| format!("{r} and ")).unwrap_or_default(),
            resend("--upload", &upload)
        ));
        d.save_coverage(&upload)
            .await
            .map_err(|message| JobError::Dashboard {
                message,
                kept: obj.clone(),
                resend: resend("--upload", &upload),
            })
    }
}

/// What this process has published, for a signal that ends it before the job is done
/// (the dashboard not yet told): a result written is not "no result published".
static PUBLISHED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Records what is published and how to finish the job by hand (see [`published`]).
pub(crate) fn note_published(note: String) {
    *PUBLISHED.lock().unwrap_or_else(|e| e.into_inner()) = Some(note);
}

/// What this process has published so far, and how to tell the dashboard, if
/// anything: said by `merge` when a signal ends it. SIGTERM while covmerge waited for
/// save_coverage's reply said "no result published" of a result written, and printed
/// neither where it was nor how to send it again.
pub fn published() -> Option<String> {
    PUBLISHED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// `s` as one shell word: as it is when it holds only characters no shell takes for
/// syntax, else in single quotes (a `'` as `'\''`). The printed command to re-send a
/// result split a client name with a space into two arguments, and ran a `$(...)` of
/// a result's name.
pub(crate) fn sh_quote(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./:@%+=,-".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Reads part `key` of shard `shard` from `store` as it streams in, and checks it on a
/// blocking thread.
async fn check_stored_part(
    store: &Store,
    key: &str,
    shard: ShardId,
    spec: &JobSpec,
    base_lines: Vec<(String, u32)>,
) -> Result<PartSummary, Refused> {
    let unreadable = |e: String| Refused {
        invariant: Invariant::Readable,
        place: format!("part {} ({key})", shard.0),
        detail: e,
    };
    let mut stream = store
        .get_stream(key)
        .await
        .map_err(|e| unreadable(e.to_string()))?;
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let feed = tokio::spawn(async move {
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(std::io::Error::other);
            let stop = chunk.is_err();
            if tx.send(chunk).await.is_err() || stop {
                break;
            }
        }
    });
    let (key2, spec2) = (key.to_string(), spec.clone());
    let r = tokio::task::spawn_blocking(move || {
        let part = PartCheck {
            key: &key2,
            shard,
            shards: spec2.shards,
            groups: &spec2.groups,
            base_lines: Some(&base_lines),
            groups_unknown: false,
        };
        gate::check_part(part, ChannelReader::new(rx), gate::PART_BUDGET)
    })
    .await
    .map_err(|e| unreadable(format!("the check stopped: {e}")))?;
    feed.abort();
    r
}

/// Deletes the job's spill chunks and attempt records and its queues, when `opts` ask
/// for it (after the job's output is written: a failure here is a warning).
pub(crate) async fn cleanup(opts: &JobOptions, store: &Store, job: &JobId, queue: &dyn Queue) {
    if !opts.cleanup {
        return;
    }
    for dir in [keys::spill_prefix(job), keys::attempts(job)] {
        match store.list(&dir).await {
            Ok(keys) => {
                if let Err(e) = store.delete_all(&keys).await {
                    warn!(error = %e, "cleanup: cannot delete under {dir}");
                }
            }
            Err(e) => warn!(error = %e, "cleanup: cannot list {dir}"),
        }
    }
    close_queues(queue, job).await;
}

/// Deletes the job's report and dead-letter queues when it ends, complete or failed
/// (they would otherwise stay until they expire).
pub(crate) async fn close_queues(queue: &dyn Queue, job: &JobId) {
    if let Err(e) = queue.close_job(job.as_str()).await {
        warn!(error = %e, "cleanup: cannot delete the job's queues");
    }
}

/// Writes the manifest locally (atomically) and, in fleet mode, under the job prefix.
pub async fn write_manifest(
    m: &Manifest,
    opts: &JobOptions,
    store: &Store,
    job: &JobId,
) -> Result<(), JobError> {
    let body = serde_json::to_vec_pretty(m).expect("manifest encodes");
    if opts.result_in_store {
        store
            .put(&keys::manifest(job), Bytes::from(body.clone()))
            .await?;
    }
    if let Some(path) = &opts.manifest {
        let shown = path.display().to_string();
        let err = |e: &dyn std::fmt::Display| JobError::Manifest {
            dest: shown.clone(),
            message: e.to_string(),
        };
        let mut file = AtomicFile::create(path).map_err(|e| err(&e))?;
        file.write_all(&body).map_err(|e| err(&e))?;
        file.write_all(b"\n").map_err(|e| err(&e))?;
        file.commit().map_err(|e| err(&e))?;
    }
    Ok(())
}

/// Checks, before any work, that the job's store and every listed input (a URL ending
/// in `*` or `/`) are apart: a `--store` equal to an input prefix, inside one or
/// holding one would have a job list its own objects, or another job's, as input
/// (a second job read the first one's objects as inputs).
pub fn preflight_store(store: &str, inputs: &[String]) -> Result<(), JobError> {
    // A location as a path of `/`-separated names: `file://` URLs as the local path
    // they name, lexically normalised (the store's directory may not exist yet).
    let norm = |loc: &str| -> String {
        match covmerge_storage::local::local_path(loc) {
            Some(p) if loc.starts_with("file:") => {
                let p: PathBuf = p.components().collect();
                format!("file://{}", p.display())
            }
            _ => loc.trim_end_matches('/').to_string(),
        }
    };
    let s = norm(store);
    let related = |a: &str, b: &str| {
        a == b || a.starts_with(&format!("{b}/")) || b.starts_with(&format!("{a}/"))
    };
    for i in inputs {
        if !is_store_url(i) || !(i.ends_with('*') || i.ends_with('/')) {
            continue;
        }
        let pat = i.trim_end_matches('*');
        let dir = match pat.rfind('/') {
            Some(k) => &pat[..k],
            None => pat,
        };
        let d = norm(dir);
        if related(&s, &d) {
            let how = if s == d {
                "is the input prefix"
            } else if s.starts_with(&d) {
                "is inside the input prefix"
            } else {
                "holds the input prefix"
            };
            return Err(JobError::Preflight(format!(
                "--store {} {how} {}: the job's own objects (and other jobs') would be listed as input; give the store a location apart from the inputs",
                redact_url(store),
                redact_url(i)
            )));
        }
    }
    Ok(())
}

/// Checks, before any work, that the result and the manifest can be written and
/// overwrite nothing they must not (contract §6): neither equals an input or the other, and
/// each local one's directory exists and takes a new file.
pub fn preflight_outputs(
    inputs: &[String],
    out: Option<&str>,
    manifest: Option<&Path>,
) -> Result<(), JobError> {
    let fail = |m: String| Err(JobError::Preflight(m));
    // A `file://` URL is the local file it names; `-` and `/dev/stdout` are one stream.
    let same = |a: &str, b: &str| -> bool { a == b || same_location(a, b) };
    let manifest_s = manifest.map(|m| m.display().to_string());
    for (flag, dest) in [("--out", out), ("--manifest", manifest_s.as_deref())] {
        let Some(dest) = dest else { continue };
        if let Some(i) = inputs.iter().find(|i| same(i, dest)) {
            return fail(format!(
                "{flag} {dest} is the input {i}: it would be overwritten"
            ));
        }
    }
    if let (Some(o), Some(m)) = (out, manifest_s.as_deref()) {
        if same(o, m) {
            return fail(format!(
                "--manifest {m} is the --out result: one would overwrite the other"
            ));
        }
    }
    for (flag, dest) in [("--out", out), ("--manifest", manifest_s.as_deref())] {
        let Some(dest) = dest else { continue };
        if is_store_url(dest) {
            covmerge_storage::check_object_url(dest)
                .map_err(|e| JobError::Preflight(format!("{flag} {dest}: {e}")))?;
            continue;
        }
        if stream_fd(Path::new(dest)).is_some() {
            continue;
        }
        let path = &final_target(Path::new(dest))
            .map_err(|e| JobError::Preflight(format!("{flag} {dest}: {e}")))?;
        if path.is_dir() {
            return fail(format!("{flag} {dest} is a directory"));
        }
        // Standard output, a FIFO, a device: streamed to, not created (and opening a
        // FIFO here would wait for its reader).
        if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
            continue;
        }
        let dir = parent_dir(path);
        if !dir.is_dir() {
            return fail(format!(
                "{flag} {dest}: the directory {} does not exist",
                dir.display()
            ));
        }
        if let Err(e) = AtomicFile::create(path) {
            return fail(format!(
                "{flag} {dest}: cannot create a file in {}: {e}",
                dir.display()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::sh_quote;

    /// The command printed to re-send a result to the dashboard split a client name
    /// with a space, and ran the `$(id)` of a result's name when pasted.
    #[test]
    fn the_resend_command_split_a_client_name_and_ran_a_results_name() {
        assert_eq!(sh_quote("ci-upstream"), "ci-upstream");
        assert_eq!(sh_quote("gs://b/x.upload"), "gs://b/x.upload");
        assert_eq!(sh_quote("coverage merger"), "'coverage merger'");
        assert_eq!(sh_quote("my $(id).gz"), "'my $(id).gz'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        assert_eq!(sh_quote(""), "''");
        // What a shell makes of each is the text again.
        for s in ["a b", "$(id)", "it's", "", "x\ny", "`id`", "*"] {
            let o = std::process::Command::new("sh")
                .args(["-c", &format!("printf %s {}", sh_quote(s))])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(o.stdout).unwrap(), s);
        }
    }
}
