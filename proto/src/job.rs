use serde::{Deserialize, Serialize};

use crate::JobId;

/// Everything that defines one job. The coordinator stores it under the job's prefix
/// (`jobs/<id>/job.json`) so that `--resume` continues exactly the same job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpec {
    pub job: JobId,
    /// Input locations after listing: local paths or object-store URLs.
    pub inputs: Vec<String>,
    pub base_repo: String,
    pub base_commit: String,
    /// The source spec workers use when they have none of their own (`dir:`, `git:`, `store:`).
    pub source: String,
    pub shards: u32,
    pub max_bad_rows: u64,
    /// Merge only files whose path starts with this (`--file-path-prefix`; empty: all).
    #[serde(default)]
    pub file_path_prefix: String,
    /// Header fields of the result (SPEC §4).
    pub header: HeaderSpec,
}

/// The job description line of the output (`coveragedb.HistoryRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderSpec {
    pub namespace: String,
    pub duration: i64,
    pub date_to: String,
    /// `None`: the number of data rows read.
    pub total_rows: Option<i64>,
}
