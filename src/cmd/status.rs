//! `covmerge status`: where a fleet job stands, read from the store.

use anyhow::Result;
use covmerge_proto::JobId;
use covmerge_storage::Store;

use crate::cli::StatusArgs;

/// Prints the job's status as text, or JSON with `--json`.
pub(crate) async fn run(st: StatusArgs) -> Result<()> {
    let job = JobId::parse(&st.job).map_err(anyhow::Error::msg)?;
    let store = Store::open(&st.store)?
        .with_retry_budget(std::time::Duration::from_secs(st.store_outage_budget));
    let status = covmerge_coordinator::status::job_status(&store, &job).await?;
    if st.json {
        crate::outln!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        crate::out!("{status}");
    }
    Ok(())
}
