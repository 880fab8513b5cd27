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
/// a result that passes the publish gate's checks of a part (a header line, then each
/// file's records: one `*` record, lines ascending, counts as the arrays say, ...;
/// contract §6), and, for a job's result, unless they are exactly the result its
/// manifest describes (`manifest`: where it was read, and it).
async fn check_sendable(
    src: &str,
    manifest: Option<(String, covmerge_proto::Manifest)>,
) -> Result<()> {
    let rt = tokio::runtime::Handle::current();
    let src = src.to_string();
    tokio::task::spawn_blocking(move || -> Result<()> {
        let groups = match &manifest {
            Some((spec, m)) => {
                covmerge_report::groups::check_belongs(spec, m, &src, &rt)?;
                m.groups.clone()
            }
            None => Vec::new(),
        };
        let raw = covmerge_input::open_raw(&src, &rt).map_err(|e| anyhow::anyhow!("{e}"))?;
        let sum = covmerge_coordinator::gate::check_whole(&src, raw, &groups)
            .map_err(|e| anyhow::anyhow!("result {src} is not sent to the dashboard: {e}"))?;
        info!(result = %src, files = sum.files, records = sum.records, "result checked for the dashboard");
        Ok(())
    })
    .await?
}
