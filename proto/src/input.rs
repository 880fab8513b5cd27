//! How inputs are read: the one list of input formats ([`InputFormat`]), and the one
//! description of how an input is read ([`InputSpec`]: its format, the manager and
//! commit its rows are recorded under, the job's format options) that a split task
//! carries and a job stores ([`JobInputs`]). What each format *does* is the input
//! crate's (`covmerge_input::formats`); this is what travels.

use serde::{Deserialize, Serialize};

/// What an input holds: covmerge's formats. Adding one adds a variant here (its
/// `--input-format` spelling in [`InputFormat::as_str`] and [`InputFormat::ALL`]) and
/// its reader to the input crate's registry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputFormat {
    /// Found from each input: a directory a directory format claims (a `GOCOVERDIR`, a
    /// partial), a stream whose first bytes a format claims (`mode: `: a Go text
    /// profile), else CSV.
    #[default]
    Auto,
    /// CSV rows (contract §2).
    Csv,
    /// A Go text profile (`go test -coverprofile`).
    GoText,
    /// A `GOCOVERDIR` directory of Go covmeta and covcounters files.
    GoCovdata,
    /// A partial (contract §10): a directory holding `partial.json` and its shards'
    /// Parquet files, rows already summed per file version.
    Partial,
}

impl InputFormat {
    /// Every value of `--input-format`, in the order its help lists them (`auto` first).
    pub const ALL: [InputFormat; 5] = [
        InputFormat::Auto,
        InputFormat::Csv,
        InputFormat::GoText,
        InputFormat::GoCovdata,
        InputFormat::Partial,
    ];

    /// The format an `--input-format` value names (`auto`, `csv`, `go-text`, `go-covdata`,
    /// `partial`).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// The `--input-format` value naming it.
    pub fn as_str(self) -> &'static str {
        match self {
            InputFormat::Auto => "auto",
            InputFormat::Csv => "csv",
            InputFormat::GoText => "go-text",
            InputFormat::GoCovdata => "go-covdata",
            InputFormat::Partial => "partial",
        }
    }

    /// What `--input-format`'s help says of the value.
    pub fn describe(self) -> &'static str {
        match self {
            InputFormat::Auto => {
                "found from each input: a directory with covmeta.* files is Go covdata, one with partial.json a partial, a file starting `mode: ` a Go text profile, else CSV"
            }
            InputFormat::Csv => "syzkaller's CSV rows",
            InputFormat::GoText => "a Go text profile (go test -coverprofile)",
            InputFormat::GoCovdata => "a GOCOVERDIR directory (covmeta.* and covcounters.* files)",
            InputFormat::Partial => {
                "a partial: a local directory with partial.json (covmerge merge --partial-out)"
            }
        }
    }
}

impl std::fmt::Display for InputFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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

/// Format options: the same for every input of a job, each read by the formats it
/// concerns (the others ignore it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputOptions {
    /// Where Go modules lie in the repository (`--go-module`; the Go formats).
    #[serde(default, alias = "modules")]
    pub go_modules: Vec<GoModule>,
    /// A partial input read by a split: the SHA-256 (hex) of its `partial.json` as
    /// planned (set per input by [`crate::job::JobSpec::input_spec`], never stored
    /// with the job's options): a partial rewritten since is refused, naming it, where
    /// its new rows were read with the planned period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_sha256: Option<String>,
}

impl InputOptions {
    /// Checks the options against the hard bounds of [`crate::limits`].
    pub fn validate(&self) -> Result<(), String> {
        use crate::limits::*;
        if let Some(s) = &self.partial_sha256 {
            if !crate::direct::is_sha256_hex(s) {
                return Err("a partial input's partial_sha256 is not a SHA-256".into());
            }
        }
        if self.go_modules.len() > MAX_GO_MODULES {
            return Err(format!(
                "{} Go module rules, more than {MAX_GO_MODULES}",
                self.go_modules.len()
            ));
        }
        if self
            .go_modules
            .iter()
            .any(|m| m.module.len() > MAX_NAME_BYTES || m.dir.len() > MAX_NAME_BYTES)
        {
            return Err(format!(
                "a Go module rule longer than {MAX_NAME_BYTES} bytes"
            ));
        }
        Ok(())
    }
}

/// How one input is read: the per-input spec a split task carries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputSpec {
    /// Its format (`auto`: found from the input).
    pub format: InputFormat,
    /// The manager its rows are recorded under when the format's rows name none (Go
    /// coverage: `--go-manager`, or the input's default name).
    pub manager: String,
    /// The commit of the build that recorded it, when the format's rows name none
    /// (`--go-commit`, or the base commit).
    pub commit: String,
    /// The job's format options.
    pub options: InputOptions,
}

impl InputSpec {
    /// Checks the spec against the hard bounds of [`crate::limits`].
    pub fn validate(&self) -> Result<(), String> {
        use crate::limits::MAX_NAME_BYTES;
        if self.manager.len() > MAX_NAME_BYTES || self.commit.len() > MAX_NAME_BYTES {
            return Err(format!(
                "an input's manager or commit longer than {MAX_NAME_BYTES} bytes"
            ));
        }
        self.options.validate()
    }
}

/// The manager and build commit of one input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputMeta {
    /// The manager the input's rows are recorded under.
    pub manager: String,
    /// The commit (build) the input's coverage was recorded on.
    pub commit: String,
}

/// A job's input settings, as its `job.json` stores them (older jobs: the keys
/// `modules` and `inputs` under `go`, still read).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobInputs {
    /// How every input is read (`--input-format`).
    pub format: InputFormat,
    /// The format options (`--go-module`).
    #[serde(flatten)]
    pub options: InputOptions,
    /// One per input, aligned with the job's inputs (empty in older jobs).
    #[serde(default, alias = "inputs")]
    pub each: Vec<InputMeta>,
}

impl JobInputs {
    /// How input `i` of `n` is read: the job's format and options, the input's
    /// manager and commit (older jobs: the default manager of `input`, `base_commit`).
    pub fn spec(&self, i: usize, input: &str, base_commit: &str) -> InputSpec {
        let meta = self.each.get(i);
        InputSpec {
            format: self.format,
            options: self.options.clone(),
            manager: meta.map_or_else(|| default_manager(input), |m| m.manager.clone()),
            commit: meta.map_or_else(|| base_commit.to_string(), |m| m.commit.clone()),
        }
    }

    /// Checks the settings of a job of `inputs` inputs: `name(what, value, may_be_empty)`
    /// checks one name as the job's other names are. A roll-up's (`rollup`) inputs may
    /// have no commit: it has no base commit to default to, and only Go coverage
    /// needs one (refused when planned).
    pub fn validate(
        &self,
        inputs: usize,
        rollup: bool,
        name: impl Fn(&str, &str, bool) -> Result<(), String>,
    ) -> Result<(), String> {
        self.options.validate()?;
        for m in &self.options.go_modules {
            name("a Go module", &m.module, false)?;
            name("a Go module directory", &m.dir, false)?;
        }
        if !self.each.is_empty() && self.each.len() != inputs {
            return Err(format!(
                "{} per-input settings for {inputs} inputs",
                self.each.len(),
            ));
        }
        for g in &self.each {
            name("an input's manager", &g.manager, true)?;
            name("an input's commit", &g.commit, rollup)?;
        }
        Ok(())
    }
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
    fn every_format_parses_from_its_spelling() {
        for f in InputFormat::ALL {
            assert_eq!(InputFormat::parse(f.as_str()), Some(f));
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{}\"", f.as_str()));
        }
        assert_eq!(InputFormat::parse("lcov"), None);
        let names: Vec<_> = InputFormat::ALL.iter().map(|f| f.as_str()).collect();
        assert_eq!(names.join("|"), "auto|csv|go-text|go-covdata|partial");
    }

    #[test]
    fn an_older_jobs_go_settings_still_read() {
        let old = r#"{"format":"go-text","modules":[{"module":"m","dir":"."}],"inputs":[{"manager":"a","commit":"c"}]}"#;
        let j: JobInputs = serde_json::from_str(old).unwrap();
        assert_eq!(j.format, InputFormat::GoText);
        assert_eq!(j.options.go_modules.len(), 1);
        assert_eq!(j.each[0].manager, "a");
        let back: JobInputs = serde_json::from_str(&serde_json::to_string(&j).unwrap()).unwrap();
        assert_eq!(back, j);
        let spec = j.spec(0, "runs/x.out", "base");
        assert_eq!((spec.manager.as_str(), spec.commit.as_str()), ("a", "c"));
        let spec = JobInputs::default().spec(3, "runs/x.out.gz", "base");
        assert_eq!((spec.manager.as_str(), spec.commit.as_str()), ("x", "base"));
    }

    #[test]
    fn default_manager_is_the_name_without_extension() {
        assert_eq!(default_manager("runs/mgr-c.out"), "mgr-c");
        assert_eq!(default_manager("runs/p.out.gz"), "p");
        assert_eq!(default_manager("/data/covdir-7/"), "covdir-7");
        assert_eq!(default_manager("plain"), "plain");
    }
}
