use serde::{Deserialize, Serialize};

use crate::JobId;

use crate::input::{InputSpec, JobInputs};

/// Everything that defines one job. The coordinator stores it under the job's prefix
/// (`jobs/<id>/job.json`) so that `--resume` continues exactly the same job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpec {
    /// The job's id: names its store prefix, queues and lease.
    pub job: JobId,
    /// Input locations after listing: local paths or object-store URLs.
    pub inputs: Vec<String>,
    /// The repository of the base (`--base-repo`), written to the result's header.
    pub base_repo: String,
    /// The commit every row is mapped onto (`--base-commit`, or resolved from `--base-at`).
    pub base_commit: String,
    /// The source spec workers use when they have none of their own (`dir:`, `git:`, `store:`).
    pub source: String,
    /// Number of shards the rows are partitioned into (one result part each).
    pub shards: u32,
    /// Bad rows skipped and counted before the job fails (`--max-bad-rows`).
    pub max_bad_rows: u64,
    /// Merge only files whose path starts with this (`--file-path-prefix`; empty: all).
    #[serde(default)]
    pub file_path_prefix: String,
    /// Header fields of the result (contract §4).
    pub header: HeaderSpec,
    /// How inputs are read: their format, options and each one's manager and commit
    /// (stored as `go` by older jobs; absent in the oldest).
    #[serde(default, alias = "go")]
    pub input: JobInputs,
    /// The first input of each split task, ascending from 0: split `k` reads inputs
    /// `splits[k] .. splits[k + 1]` one after another. Empty (older jobs): one split
    /// per input.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub splits: Vec<u32>,
    /// `--group NAME=GLOB` in the order given (absent when none: a job without groups
    /// stores what it stored before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<crate::group::Group>,
    /// `--namespace` as given (the header's `Namespace` defaults to `upstream`
    /// without it): CSV rows with a `namespace` column are merged only if they name
    /// it, and such an input is refused when it was not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// What each input was when the job was planned, aligned with
    /// [`JobSpec::inputs`] (empty in jobs stored before covmerge kept them): `--resume`
    /// refuses an input rewritten since under the same name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_ids: Vec<InputIdentity>,
    /// `--partial-out URL`: the job's rows are also written as a partial (contract
    /// §10) there, each merge task writing its shard's files (absent: no partial, and
    /// the spec is what it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_out: Option<String>,
    /// The partial inputs of the job's shard count, in input order: no split reads
    /// them, each merge task reads its shard of them (contract §10). Absent: every
    /// input is split.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub direct_partials: Vec<crate::direct::DirectPartial>,
    /// Every partial input as planned, in input order: its index and the SHA-256
    /// (hex) of its `partial.json`. A split reading one refuses another description
    /// (the direct ones carry theirs in [`JobSpec::direct_partials`] too). Absent in
    /// jobs stored before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partial_inputs: Vec<crate::direct::PlannedSha>,
    /// `coordinator --rollup`: the job's rows are only summed into the partial of
    /// `partial_out`, with this period (no base, no projection, no result). Absent: a
    /// merge, and the spec is what it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollup: Option<RollupSpec>,
}

/// What a roll-up job (`coordinator --rollup`) fixes when planned: its partial's
/// period, the partial inputs' and the raw rows' (`--date-to`, `--duration`) together,
/// as `covmerge rollup` makes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollupSpec {
    /// The period's first day, `YYYY-MM-DD`.
    pub date_from: String,
    /// The period's last day, `YYYY-MM-DD`.
    pub date_to: String,
    /// The partial's namespace: `--namespace`, else the one its partials name (absent:
    /// none). [`JobSpec::namespace`] stays `--namespace` as given: the raw rows are
    /// read as a merge of them reads them, a `namespace` column refused without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl RollupSpec {
    /// Checks a roll-up job's spec: a period of calendar days, a partial to write, and
    /// nothing of a merge's (base, prefix, groups).
    fn validate(&self, spec: &JobSpec) -> Result<(), String> {
        let day = |what: &str, v: &str| {
            v.parse::<crate::date::Date>()
                .map_err(|e| format!("rollup.{what} {v:?}: {e}"))
        };
        let (from, to) = (
            day("date_from", &self.date_from)?,
            day("date_to", &self.date_to)?,
        );
        if from.days() > to.days() {
            return Err(format!(
                "rollup period {}..{} ends before it starts",
                self.date_from, self.date_to
            ));
        }
        if !spec.base_repo.is_empty()
            || !spec.base_commit.is_empty()
            || !spec.file_path_prefix.is_empty()
            || !spec.groups.is_empty()
        {
            return Err("a roll-up job names a base, a file path prefix or groups".into());
        }
        if spec.partial_out.is_none() {
            return Err("a roll-up job writes a partial: partial_out is missing".into());
        }
        if let Some(ns) = &self.namespace {
            if ns.is_empty()
                || ns.len() > crate::limits::MAX_NAME_BYTES
                || ns.chars().any(char::is_control)
            {
                return Err(format!(
                    "rollup.namespace must be 1-{} bytes without control characters",
                    crate::limits::MAX_NAME_BYTES
                ));
            }
        }
        Ok(())
    }
}

impl JobSpec {
    /// The namespace of the job's partial (`--partial-out`): a roll-up's own, else
    /// `--namespace` (`None`: none).
    pub fn partial_namespace(&self) -> Option<&str> {
        match &self.rollup {
            Some(r) => r.namespace.as_deref(),
            None => self.namespace.as_deref(),
        }
    }
}

/// What an input was when its job was planned: its size and what its store says of
/// its version (an S3 ETag, a GCS generation, a modification time; for a local file
/// its modification time in nanoseconds and inode). Two reads of the same unchanged
/// input give the same identity; an input rewritten under its name (BigQuery's
/// re-exports reuse `000000000000.csv.gz`) gives another.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputIdentity {
    /// Bytes (a Go coverage directory: the bytes of its files).
    pub size: u64,
    /// The store's entity tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// The store's object version (a GCS generation, an S3 version id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Last modification, nanoseconds since the Unix epoch (a Go coverage directory:
    /// its newest file's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_ns: Option<u64>,
    /// A local file's inode (a file replaced by a rename has another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inode: Option<u64>,
}

impl InputIdentity {
    /// How `now` differs from `self` (the identity recorded), each difference named
    /// with both values; `None` when they are the same.
    pub fn changes(&self, now: &InputIdentity) -> Option<String> {
        fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
            v.as_ref()
                .map_or_else(|| "none".to_string(), |v| format!("{v}"))
        }
        let mut d = Vec::new();
        if self.size != now.size {
            d.push(format!("size {} -> {} bytes", self.size, now.size));
        }
        if self.etag != now.etag {
            d.push(format!("ETag {} -> {}", opt(&self.etag), opt(&now.etag)));
        }
        if self.version != now.version {
            d.push(format!(
                "version (generation) {} -> {}",
                opt(&self.version),
                opt(&now.version)
            ));
        }
        if self.modified_ns != now.modified_ns {
            let t = |v: &Option<u64>| {
                v.map_or_else(
                    || "none".to_string(),
                    |ns| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000),
                )
            };
            d.push(format!(
                "modified {} -> {} (Unix seconds)",
                t(&self.modified_ns),
                t(&now.modified_ns)
            ));
        }
        if self.inode != now.inode {
            d.push(format!("inode {} -> {}", opt(&self.inode), opt(&now.inode)));
        }
        (!d.is_empty()).then(|| d.join(", "))
    }
}

impl JobSpec {
    /// How input `i` is read: the job's format and options, the input's manager and
    /// commit (older jobs: its default manager, the base commit). Workers admit a
    /// split only if its settings are these.
    pub fn input_spec(&self, i: usize) -> InputSpec {
        let input = self.inputs.get(i).map_or("", String::as_str);
        let mut spec = self.input.spec(i, input, &self.base_commit);
        spec.options.partial_sha256 = self
            .partial_inputs
            .iter()
            .find(|p| p.input as usize == i)
            .map(|p| p.description_sha256.clone());
        spec
    }
}

impl JobSpec {
    /// Each split task's inputs, as ranges of [`JobSpec::inputs`].
    pub fn split_ranges(&self) -> Vec<std::ops::Range<usize>> {
        if self.splits.is_empty() {
            return (0..self.inputs.len()).map(|i| i..i + 1).collect();
        }
        self.splits
            .iter()
            .enumerate()
            .map(|(k, &first)| {
                let end = self
                    .splits
                    .get(k + 1)
                    .map_or(self.inputs.len(), |&e| e as usize);
                first as usize..end
            })
            .collect()
    }

    /// Checks a stored spec against the hard bounds tasks get ([`crate::limits`]) before
    /// anything is sized from it: a `job.json` edited or forged to say `shards`
    /// 4294967295 must be refused, not allocated for.
    pub fn validate(&self) -> Result<(), String> {
        use crate::limits::*;
        let name = |what: &str, v: &str, may_be_empty: bool| {
            if (!may_be_empty && v.is_empty())
                || v.len() > MAX_NAME_BYTES
                || v.chars().any(char::is_control)
            {
                // The value named (escaped, cut at 200 characters): a refused input
                // was not named.
                let shown: String = format!("{v:?}").chars().take(200).collect();
                Err(format!(
                    "{what} {shown} ({} bytes) must be {}-{MAX_NAME_BYTES} bytes without control characters",
                    v.len(),
                    if may_be_empty { 0 } else { 1 }
                ))
            } else {
                Ok(())
            }
        };
        if self.shards == 0 || self.shards > MAX_SHARDS {
            return Err(format!("shards {} not in 1..={MAX_SHARDS}", self.shards));
        }
        if self.inputs.is_empty() || self.inputs.len() > MAX_INPUTS {
            return Err(format!(
                "{} inputs, expected 1 to {MAX_INPUTS}",
                self.inputs.len()
            ));
        }
        for i in &self.inputs {
            name("an input", i, false)?;
        }
        if !self.splits.is_empty() {
            let ascending = self
                .splits
                .windows(2)
                .all(|w| w[0] < w[1] && (w[1] - w[0]) as usize <= MAX_SPLIT_INPUTS + 1);
            let last = *self.splits.last().unwrap() as usize;
            if self.splits[0] != 0
                || !ascending
                || last >= self.inputs.len()
                || self.inputs.len() - last > MAX_SPLIT_INPUTS + 1
            {
                return Err(format!(
                    "splits must start at input 0, ascend by 1 to {} inputs and end below input {}",
                    MAX_SPLIT_INPUTS + 1,
                    self.inputs.len()
                ));
            }
        }
        match &self.rollup {
            Some(r) => r.validate(self)?,
            None => {
                name("base_repo", &self.base_repo, false)?;
                name("base_commit", &self.base_commit, false)?;
            }
        }
        // A roll-up of partials alone reads no source (contract §10).
        let partials_only =
            self.rollup.is_some() && self.direct_partials.len() == self.inputs.len();
        name("source", &self.source, partials_only)?;
        name("file_path_prefix", &self.file_path_prefix, true)?;
        name("header.namespace", &self.header.namespace, false)?;
        if let Some(ns) = &self.namespace {
            name("namespace", ns, false)?;
        }
        name("header.date_to", &self.header.date_to, false)?;
        if let Some(p) = &self.partial_out {
            name("partial_out", p, false)?;
        }
        self.input
            .validate(self.inputs.len(), self.rollup.is_some(), name)?;
        crate::direct::check_direct(&self.direct_partials, self.inputs.len())?;
        crate::direct::check_planned(&self.partial_inputs, self.inputs.len())?;
        crate::group::check_groups(&self.groups)?;
        if !self.input_ids.is_empty() && self.input_ids.len() != self.inputs.len() {
            return Err(format!(
                "{} input identities for {} inputs",
                self.input_ids.len(),
                self.inputs.len()
            ));
        }
        for id in &self.input_ids {
            name("an input's ETag", id.etag.as_deref().unwrap_or(""), true)?;
            name(
                "an input's version",
                id.version.as_deref().unwrap_or(""),
                true,
            )?;
        }
        Ok(())
    }

    /// The first setting in which `self` (a stored spec) and `other` (the spec the
    /// command line asks for) differ: its name, the stored value and the asked one.
    /// `shards` and `header.date_to` are compared only when `compare_shards` /
    /// `compare_date_to` say so (when the command line did not give them, their
    /// defaults follow the input sizes and today's date, and the stored ones stand).
    pub fn first_difference(
        &self,
        other: &JobSpec,
        compare_shards: bool,
        compare_date_to: bool,
    ) -> Option<(&'static str, String, String)> {
        fn show<T: Serialize>(v: &T) -> String {
            serde_json::to_string(v).unwrap_or_default()
        }
        macro_rules! cmp {
            ($name:literal, $($f:tt)+) => {
                if self.$($f)+ != other.$($f)+ {
                    return Some(($name, show(&self.$($f)+), show(&other.$($f)+)));
                }
            };
        }
        cmp!("job", job);
        if self.inputs != other.inputs {
            let i = self
                .inputs
                .iter()
                .zip(&other.inputs)
                .position(|(a, b)| a != b)
                .unwrap_or(self.inputs.len().min(other.inputs.len()));
            return Some((
                "inputs",
                format!(
                    "{} input(s), #{i} {}",
                    self.inputs.len(),
                    show(&self.inputs.get(i))
                ),
                format!(
                    "{} input(s), #{i} {}",
                    other.inputs.len(),
                    show(&other.inputs.get(i))
                ),
            ));
        }
        cmp!("base_repo", base_repo);
        cmp!("base_commit", base_commit);
        cmp!("source", source);
        if compare_shards {
            cmp!("shards", shards);
        }
        cmp!("max_bad_rows", max_bad_rows);
        cmp!("file_path_prefix", file_path_prefix);
        cmp!("namespace", header.namespace);
        cmp!("namespace (--namespace given)", namespace);
        cmp!("duration", header.duration);
        if compare_date_to {
            cmp!("date_to", header.date_to);
        }
        cmp!("total_rows", header.total_rows);
        cmp!("input_format", input.format);
        cmp!("go_modules", input.options.go_modules);
        // Older jobs stored no per-input settings: theirs are the defaults.
        if !self.input.each.is_empty() {
            cmp!("go inputs (--go-manager, --go-commit)", input.each);
        }
        cmp!("groups (--group)", groups);
        cmp!("partial_out (--partial-out)", partial_out);
        cmp!("rollup (--rollup)", rollup.is_some());
        if compare_date_to {
            cmp!("rollup period", rollup);
        }
        None
    }
}

/// The job description line of the output (`coveragedb.HistoryRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderSpec {
    /// The dashboard namespace (`Namespace` of the header record).
    pub namespace: String,
    /// Days the job's rows span (`Duration` of the header record).
    pub duration: i64,
    /// Last day of the rows, `YYYY-MM-DD` (`DateTo` of the header record).
    pub date_to: String,
    /// `None`: the number of data rows read.
    pub total_rows: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> JobSpec {
        JobSpec {
            namespace: None,
            job: JobId::parse("j1").unwrap(),
            inputs: vec!["a.csv".into(), "b.csv".into()],
            base_repo: "r".into(),
            base_commit: "c".into(),
            source: "dir:/s".into(),
            shards: 4,
            max_bad_rows: 0,
            file_path_prefix: String::new(),
            header: HeaderSpec {
                namespace: "upstream".into(),
                duration: 0,
                date_to: "2024-04-08".into(),
                total_rows: None,
            },
            input: JobInputs::default(),
            splits: Vec::new(),
            groups: Vec::new(),
            input_ids: Vec::new(),
            partial_out: None,
            partial_inputs: Vec::new(),
            direct_partials: Vec::new(),
            rollup: None,
        }
    }

    /// Each split of a planned partial carries its description's planned SHA-256; a
    /// job naming one of no input, twice, or without a SHA-256 is refused.
    #[test]
    fn planned_partials_reach_their_splits_and_forged_ones_are_refused() {
        let sha = "a".repeat(64);
        let planned = |input, sha: &str| crate::direct::PlannedSha {
            input,
            description_sha256: sha.to_string(),
        };
        let mut s = spec();
        s.partial_inputs = vec![planned(1, &sha)];
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(
            s.input_spec(1).options.partial_sha256.as_deref(),
            Some(sha.as_str())
        );
        assert_eq!(s.input_spec(0).options.partial_sha256, None);
        for bad in [
            vec![planned(9, &sha)],
            vec![planned(1, &sha), planned(1, &sha)],
            vec![planned(1, "x")],
        ] {
            let mut s = spec();
            s.partial_inputs = bad;
            assert!(s.validate().is_err());
        }
    }

    #[test]
    fn job_json_with_huge_shard_count_is_refused() {
        assert_eq!(spec().validate(), Ok(()));
        let mut s = spec();
        s.shards = u32::MAX;
        assert!(s.validate().unwrap_err().contains("shards 4294967295"));
        let mut s = spec();
        s.inputs.clear();
        assert!(s.validate().is_err());
        let mut s = spec();
        s.inputs[1] = "x".repeat(crate::limits::MAX_NAME_BYTES + 1);
        assert!(s.validate().is_err());
        // The refused input is named (escaped, cut): an input whose name held a
        // newline was refused without saying which.
        let mut s = spec();
        s.inputs[1] = "/in/a\nb.csv".into();
        let e = s.validate().unwrap_err();
        assert!(e.contains(r#"an input "/in/a\nb.csv" (11 bytes)"#), "{e}");
        let mut s = spec();
        s.input.each = vec![crate::input::InputMeta {
            manager: "m".into(),
            commit: "c".into(),
        }];
        assert!(s
            .validate()
            .unwrap_err()
            .contains("1 per-input settings for 2 inputs"));
    }

    #[test]
    fn a_rollup_job_has_a_period_a_partial_and_no_base() {
        let rollup = || JobSpec {
            base_repo: String::new(),
            base_commit: String::new(),
            partial_out: Some("/p".into()),
            rollup: Some(RollupSpec {
                date_from: "2024-04-06".into(),
                date_to: "2024-04-08".into(),
                namespace: None,
            }),
            ..spec()
        };
        assert_eq!(rollup().validate(), Ok(()));
        let back: JobSpec =
            serde_json::from_str(&serde_json::to_string(&rollup()).unwrap()).unwrap();
        assert_eq!(back, rollup());
        let mut s = rollup();
        s.base_commit = "c".into();
        assert!(s.validate().unwrap_err().contains("names a base"));
        let mut s = rollup();
        s.partial_out = None;
        assert!(s.validate().unwrap_err().contains("partial_out"));
        let mut s = rollup();
        s.rollup.as_mut().unwrap().date_from = "2024-04-09".into();
        assert!(s.validate().unwrap_err().contains("ends before it starts"));
        let mut s = rollup();
        s.rollup.as_mut().unwrap().date_to = "2024-02-30".into();
        assert!(s.validate().unwrap_err().contains("2024-02-30"));
        // A merge still needs its base; a merge's spec is stored as before.
        let mut s = rollup();
        s.rollup = None;
        assert!(s.validate().unwrap_err().contains("base_repo"));
        assert!(!serde_json::to_string(&spec()).unwrap().contains("rollup"));
        // Resuming a merge as a roll-up (or the other way) is refused.
        let field = spec().first_difference(&rollup(), false, false).unwrap().0;
        assert_eq!(field, "base_repo");
        let mut other = rollup();
        other.rollup.as_mut().unwrap().date_from = "2024-04-01".into();
        assert_eq!(rollup().first_difference(&other, true, false), None);
        assert_eq!(
            rollup().first_difference(&other, true, true).unwrap().0,
            "rollup period"
        );
    }

    #[test]
    fn resume_with_other_inputs_is_refused() {
        let (a, mut b) = (spec(), spec());
        assert_eq!(a.first_difference(&b, true, true), None);
        b.inputs[1] = "c.csv".into();
        let (field, stored, asked) = a.first_difference(&b, true, true).unwrap();
        assert_eq!(field, "inputs");
        assert!(stored.contains("#1 \"b.csv\"") && asked.contains("#1 \"c.csv\""));
        let mut b = spec();
        b.shards = 5;
        b.header.date_to = "2024-04-09".into();
        assert_eq!(a.first_difference(&b, false, false), None);
        assert_eq!(a.first_difference(&b, true, false).unwrap().0, "shards");
        assert_eq!(a.first_difference(&b, false, true).unwrap().0, "date_to");
        let mut b = spec();
        b.header.namespace = "android".into();
        assert_eq!(a.first_difference(&b, true, true).unwrap().0, "namespace");
    }

    #[test]
    fn resume_with_other_groups_is_refused() {
        let a = spec();
        let mut b = spec();
        b.groups = vec![crate::group::Group::parse("gcc=*-gcc").unwrap()];
        let (field, stored, asked) = a.first_difference(&b, true, true).unwrap();
        assert_eq!(field, "groups (--group)");
        assert_eq!(stored, "[]");
        assert!(asked.contains("*-gcc"), "{asked}");
        let mut c = b.clone();
        c.groups[0].glob = "*-clang".into();
        assert_eq!(
            b.first_difference(&c, true, true).unwrap().0,
            "groups (--group)"
        );
        assert_eq!(b.first_difference(&b.clone(), true, true), None);
        // A job.json of before groups reads as a job without them, and a job without
        // them is stored as before.
        let json = serde_json::to_string(&a).unwrap();
        assert!(!json.contains("groups"), "{json}");
        let back: JobSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, a);
        let mut d = spec();
        d.groups = vec![b.groups[0].clone(), b.groups[0].clone()];
        assert!(d.validate().unwrap_err().contains("given twice"));
    }

    #[test]
    fn an_input_rewritten_under_its_name_has_another_identity() {
        let old = InputIdentity {
            size: 10,
            etag: Some("\"a\"".into()),
            version: None,
            modified_ns: Some(1_700_000_000_123_456_789),
            inode: None,
        };
        assert_eq!(old.changes(&old.clone()), None);
        let new = InputIdentity {
            etag: Some("\"b\"".into()),
            modified_ns: Some(1_700_000_001_000_000_000),
            ..old.clone()
        };
        assert_eq!(
            old.changes(&new).unwrap(),
            "ETag \"a\" -> \"b\", modified 1700000000.123456789 -> 1700000001.000000000 (Unix seconds)"
        );
        // Older job.json files have none: they still parse.
        let mut s = spec();
        let json = serde_json::to_string(&s).unwrap();
        assert!(!json.contains("input_ids"), "{json}");
        s.input_ids = vec![old.clone()];
        assert!(s
            .validate()
            .unwrap_err()
            .contains("1 input identities for 2 inputs"));
        s.input_ids = vec![old.clone(), new];
        assert_eq!(s.validate(), Ok(()));
        let back: JobSpec = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }
}
