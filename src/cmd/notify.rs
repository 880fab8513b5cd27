//! `covmerge notify`: send a written result to the dashboard again.

use anyhow::{bail, Context, Result};
use covmerge_coordinator::dashboard::Dashboard;
use covmerge_proto::JobId;
use covmerge_storage::Store;
use tracing::info;

use super::print_rows;
use crate::cli::NotifyArgs;
use crate::job::dashboard_key;

/// `covmerge notify`: save_coverage again for a result that is already written.
pub(crate) async fn run(n: NotifyArgs) -> Result<()> {
    use covmerge_coordinator::dashboard::upload_object_url;
    use covmerge_storage::{is_store_url, open_object};
    crate::job::check_dashboard_url(&n.dashboard)?;
    let d = Dashboard::new(&n.dashboard, &n.dashboard_client, dashboard_key()?);
    // The manifest a `--job` result must belong to.
    let mut manifest = None;
    let (upload, result) = if let Some(u) = n.upload {
        (Some(u), None)
    } else if let Some(r) = n.result {
        (None, Some(r))
    } else if let Some(job) = &n.job_id {
        let job = JobId::parse(job).map_err(anyhow::Error::msg)?;
        let store = Store::open(n.store.as_deref().context("--job needs --store")?)?;
        let m: covmerge_proto::Manifest =
            serde_json::from_slice(&store.get(&covmerge_proto::layout::manifest(&job)).await?)
                .with_context(|| format!("job {job}: manifest in {store}"))?;
        if m.status != covmerge_proto::manifest::JobStatus::Complete {
            bail!("job {job} is {}: it has no result to send", m.status);
        }
        match m.dashboard_upload.clone() {
            Some(u) => (Some(u), None),
            None => {
                let r = format!("{store}/{}", covmerge_proto::layout::result(&job));
                manifest = Some((
                    format!("{store}/{}", covmerge_proto::layout::manifest(&job)),
                    m,
                ));
                (None, Some(r))
            }
        }
    } else {
        bail!("notify needs --upload, --result or --job");
    };
    let upload = match (upload, result) {
        (Some(u), _) => {
            covmerge_coordinator::dashboard::check_upload(&u).map_err(anyhow::Error::msg)?;
            u
        }
        (None, Some(src)) => {
            check_sendable(&src, manifest).await?;
            let (s, sk) = if is_store_url(&src) {
                open_object(&src)?
            } else {
                let p = std::fs::canonicalize(&src).with_context(|| format!("result {src}"))?;
                let parent = p.parent().context("result path")?;
                let name = p.file_name().context("result path")?.to_string_lossy();
                (
                    Store::open(&format!("file://{}", parent.display()))?,
                    name.to_string(),
                )
            };
            let u = d.create_upload_url().await.map_err(anyhow::Error::msg)?;
            let obj = upload_object_url(&u);
            let (dst, k) = open_object(&obj)?;
            dst.copy_from(&k, &s, &sk).await?;
            info!(object = %obj, "result copied for the dashboard");
            u
        }
        (None, None) => unreachable!(),
    };
    let rows = d
        .save_coverage(&upload)
        .await
        .map_err(|e| anyhow::anyhow!("{e}\nthe result stays at {}", upload_object_url(&upload)))?;
    print_rows(Some(rows));
    Ok(())
}

/// Refuses a result the dashboard must not be given: unless its bytes as stored read as
/// a result that passes the publish gate's checks of a part (a header line in its
/// fields' domains, then each file's records: one `*` record, lines ascending, counts
/// as the arrays say, ...; contract §6), and, for a job's result, unless they are
/// exactly the result its manifest describes (`manifest`: where it was read, and it;
/// its groups are then known). The result is named without credentials.
async fn check_sendable(
    src: &str,
    manifest: Option<(String, covmerge_proto::Manifest)>,
) -> Result<()> {
    let rt = tokio::runtime::Handle::current();
    let src = src.to_string();
    tokio::task::spawn_blocking(move || -> Result<()> {
        // A URL without its credentials, query or fragment (a token can ride in one).
        let shown = if src.contains("://") || src.contains(['@', '?', '#']) {
            covmerge_storage::redact_url(&src)
        } else {
            src.clone()
        };
        // What may hold a secret, as a message may quote it: the whole location, its
        // query or fragment, its user info.
        let mut secrets = vec![(src.clone(), shown.clone())];
        if let Some(q) = src.find(['?', '#']) {
            secrets.push((src[q..].to_string(), String::new()));
        }
        if let Some((_, rest)) = src.split_once("://") {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            if let Some((user, _)) = authority.rsplit_once('@') {
                secrets.push((format!("{user}@"), "***@".to_string()));
            }
        }
        let hide = |e: String| {
            secrets
                .iter()
                .filter(|(s, _)| !s.is_empty())
                .fold(e, |e, (s, with)| e.replace(s.as_str(), with))
        };
        if let Some((spec, m)) = &manifest {
            covmerge_report::groups::check_belongs(spec, m, &src, &rt)
                .map_err(|e| anyhow::anyhow!(hide(format!("{e:#}"))))?;
        }
        let raw = covmerge_input::open_raw(&src, &rt)
            .map_err(|e| anyhow::anyhow!("result {shown}: {}", hide(e.to_string())))?;
        // A failed read is the store's or the disk's, not the result's.
        let failed = std::sync::Arc::new(std::sync::Mutex::new(None));
        let raw = Watched {
            inner: raw,
            failed: failed.clone(),
        };
        let groups = manifest.as_ref().map(|(_, m)| &m.groups[..]);
        let checked = covmerge_coordinator::gate::check_whole(&shown, raw, groups);
        if let Some(e) = failed.lock().expect("read error").take() {
            bail!("result {shown}: reading it failed: {}", hide(e));
        }
        let sum = checked.map_err(|e| {
            anyhow::anyhow!("result {shown} is not sent to the dashboard: {}", hide(e.to_string()))
        })?;
        info!(result = %shown, files = sum.files, records = sum.records, "result checked for the dashboard");
        Ok(())
    })
    .await?
}

/// A reader that keeps its first error (other than an interruption).
struct Watched<R> {
    inner: R,
    failed: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

impl<R: std::io::Read> std::io::Read for Watched<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            if e.kind() != std::io::ErrorKind::Interrupted {
                self.failed
                    .lock()
                    .expect("read error")
                    .get_or_insert_with(|| e.to_string());
            }
        })
    }
}
