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
    /// How inputs are read and how Go coverage becomes rows (absent in older jobs).
    #[serde(default)]
    pub go: GoSpec,
}

impl JobSpec {
    /// How split task `i` reads Go coverage: the job's format and module rules, the
    /// input's manager and commit (older jobs: the default manager, the base commit).
    /// Workers admit a split only if its settings are these.
    pub fn go_input(&self, i: usize) -> GoInput {
        let meta = self.go.inputs.get(i);
        GoInput {
            format: self.go.format,
            modules: self.go.modules.clone(),
            manager: meta.map(|m| m.manager.clone()).unwrap_or_default(),
            commit: meta
                .map(|m| m.commit.clone())
                .unwrap_or_else(|| self.base_commit.clone()),
        }
    }
}

/// What an input holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputFormat {
    /// A directory holding `covmeta.*` files is Go covdata, a file whose first line
    /// starts with `mode: ` a Go text profile, anything else CSV.
    #[default]
    Auto,
    Csv,
    GoText,
    GoCovdata,
}

impl InputFormat {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "auto" => InputFormat::Auto,
            "csv" => InputFormat::Csv,
            "go-text" => InputFormat::GoText,
            "go-covdata" => InputFormat::GoCovdata,
            _ => return None,
        })
    }
}

/// `--go-module MODULE=DIR`: Go files under import path MODULE are at DIR in the
/// repository (`.`: its root).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoModule {
    pub module: String,
    pub dir: String,
}

/// The manager and build commit of one input's Go coverage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoInputMeta {
    pub manager: String,
    pub commit: String,
}

/// Job-wide input settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoSpec {
    pub format: InputFormat,
    pub modules: Vec<GoModule>,
    /// One per input, aligned with [`JobSpec::inputs`] (empty in older jobs).
    pub inputs: Vec<GoInputMeta>,
}

/// How one split task reads its input when it is Go coverage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoInput {
    pub format: InputFormat,
    pub modules: Vec<GoModule>,
    /// The manager its rows are recorded under and the commit of its build.
    pub manager: String,
    pub commit: String,
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

/// The default manager of an input: a directory's name, or a file's name without its
/// extension(s) (`runs/mgr-c.out` → `mgr-c`, `p.out.gz` → `p`).
pub fn default_manager(input: &str) -> String {
    let trimmed = input.trim_end_matches('/');
    let base = trimmed.rsplit('/').next().unwrap_or(trimmed);
    let stem = match base.find('.') {
        Some(0) | None => base,
        Some(i) => &base[..i],
    };
    stem.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_manager_is_the_name_without_extension() {
        assert_eq!(default_manager("runs/mgr-c.out"), "mgr-c");
        assert_eq!(default_manager("runs/p.out.gz"), "p");
        assert_eq!(default_manager("/data/covdir-7/"), "covdir-7");
        assert_eq!(default_manager("plain"), "plain");
    }
}
