//! How inputs are read: their format and, for Go coverage, how it becomes rows.

use serde::{Deserialize, Serialize};

/// What an input holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputFormat {
    /// A directory holding `covmeta.*` files is Go covdata, a file whose first line
    /// starts with `mode: ` a Go text profile, anything else CSV.
    #[default]
    Auto,
    /// CSV rows (contract §2).
    Csv,
    /// A Go text profile (`go test -coverprofile`).
    GoText,
    /// A `GOCOVERDIR` directory of Go covmeta and covcounters files.
    GoCovdata,
}

impl InputFormat {
    /// The format an `--input-format` value names (`auto`, `csv`, `go-text`, `go-covdata`).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "auto" => InputFormat::Auto,
            "csv" => InputFormat::Csv,
            "go-text" => InputFormat::GoText,
            "go-covdata" => InputFormat::GoCovdata,
            _ => return None,
        })
    }

    /// The `--input-format` value naming it.
    pub fn as_str(self) -> &'static str {
        match self {
            InputFormat::Auto => "auto",
            InputFormat::Csv => "csv",
            InputFormat::GoText => "go-text",
            InputFormat::GoCovdata => "go-covdata",
        }
    }
}

/// `--go-module MODULE=DIR`: Go files under import path MODULE are at DIR in the
/// repository (`.`: its root).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoModule {
    /// The Go import path prefix (e.g. `example.com/m`).
    pub module: String,
    /// Where its files are in the repository, relative to the root (`.`: the root).
    pub dir: String,
}

/// The manager and build commit of one input's Go coverage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoInputMeta {
    /// The manager the input's rows are recorded under.
    pub manager: String,
    /// The kernel commit (build) the input's coverage was recorded on.
    pub commit: String,
}

/// Job-wide input settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoSpec {
    /// How every input is read (`--input-format`).
    pub format: InputFormat,
    /// Where Go modules lie in the repository (`--go-module`).
    pub modules: Vec<GoModule>,
    /// One per input, aligned with [`JobSpec::inputs`] (empty in older jobs).
    pub inputs: Vec<GoInputMeta>,
}

/// How one split task reads its input when it is Go coverage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoInput {
    /// How this input is read.
    pub format: InputFormat,
    /// Where Go modules lie in the repository (`--go-module`).
    pub modules: Vec<GoModule>,
    /// The manager its rows are recorded under and the commit of its build.
    pub manager: String,
    /// The commit of the build that recorded it.
    pub commit: String,
}
