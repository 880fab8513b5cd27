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
    let d = Dashboard::new(&n.dashboard, &n.dashboard_client, dashboard_key()?);
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
        match m.dashboard_upload {
            Some(u) => (Some(u), None),
            None => (
                None,
                Some(format!("{store}/{}", covmerge_proto::layout::result(&job))),
            ),
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
