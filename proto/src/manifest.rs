use serde::{Deserialize, Serialize};

/// Row and line counters. Every data row in scope (`rows_in`) ends in exactly one of
/// `rows_merged`, `rows_bad`, `rows_without_line`, `rows_lost` or `rows_deleted`
/// (rows of files that do not exist at the base; contract §3.1 counts such files under
/// `files_deleted` and not their rows as lost).
///
/// With `--file-path-prefix`, rows of other files are out of scope, as they are for
/// syz-covermerger whose query never selects them: counted in `rows_outside_prefix`
/// and not in `rows_in`. The rows read are `rows_in + rows_outside_prefix`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Data rows read within scope (every row but those outside `--file-path-prefix`).
    pub rows_in: u64,
    /// Malformed rows skipped under `--max-bad-rows`.
    pub rows_bad: u64,
    /// Rows whose `sl` is below 1: they name no line.
    pub rows_without_line: u64,
    /// Rows whose line did not land on the base (changed, removed or past the end, or no such version).
    pub rows_lost: u64,
    /// Hits of the lost rows.
    pub hits_lost: u64,
    /// Files present at the base that got records.
    pub files: u64,
    /// Files named by rows but absent at the base.
    pub files_deleted: u64,
    /// Base lines with at least one row (in the `*` records).
    pub instrumented: u64,
    /// Instrumented lines with hits above 0.
    pub covered: u64,
    /// Rows that landed on a base line.
    #[serde(default)]
    pub rows_merged: u64,
    /// Rows of files absent at the base.
    #[serde(default)]
    pub rows_deleted: u64,
    /// Revision pairs whose diff hit the size cap and were mapped by anchors only.
    #[serde(default)]
    pub diffs_capped: u64,
    /// Rows of files outside `--file-path-prefix` (not in `rows_in`).
    #[serde(default)]
    pub rows_outside_prefix: u64,
    /// Rows whose `namespace` column names another namespace than `--namespace` (not
    /// in `rows_in`).
    #[serde(default)]
    pub rows_other_namespaces: u64,
}

impl Counts {
    /// Adds `o` into `self` (saturating: counters never wrap).
    pub fn add(&mut self, o: &Counts) {
        let f = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        f(&mut self.rows_in, o.rows_in);
        f(&mut self.rows_bad, o.rows_bad);
        f(&mut self.rows_without_line, o.rows_without_line);
        f(&mut self.rows_lost, o.rows_lost);
        f(&mut self.hits_lost, o.hits_lost);
        f(&mut self.files, o.files);
        f(&mut self.files_deleted, o.files_deleted);
        f(&mut self.instrumented, o.instrumented);
        f(&mut self.covered, o.covered);
        f(&mut self.rows_merged, o.rows_merged);
        f(&mut self.rows_deleted, o.rows_deleted);
        f(&mut self.diffs_capped, o.diffs_capped);
        f(&mut self.rows_outside_prefix, o.rows_outside_prefix);
        f(&mut self.rows_other_namespaces, o.rows_other_namespaces);
    }
}

/// The namespaces listed by name in a manifest, at most: the smallest names (byte
/// order), so that the list is the same however the rows fell to splits and threads.
pub const MAX_LISTED_NAMESPACES: usize = 16;

/// The longest namespace listed by name; the rows of a longer one are counted unlisted.
pub const MAX_LISTED_NAMESPACE_BYTES: usize = 256;

/// The rows of namespaces other than the job's, per namespace: at most
/// [`MAX_LISTED_NAMESPACES`] names, the rows of the others counted together.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtherNamespaces {
    /// Rows per namespace (a name that is not UTF-8 is shown with its bytes escaped).
    pub listed: std::collections::BTreeMap<String, u64>,
    /// Rows of namespaces not listed.
    pub unlisted_rows: u64,
}

impl OtherNamespaces {
    /// Counts `rows` rows of namespace `name`.
    pub fn add_rows(&mut self, name: &[u8], rows: u64) {
        self.add_shown(Self::shown_name(name), rows);
    }

    /// How namespace `name` is listed. A name that is not UTF-8, or holds a
    /// backslash, is shown with its bytes escaped: the raw bytes `\xff` and the text
    /// `\xff` stay two namespaces.
    pub fn shown_name(name: &[u8]) -> std::borrow::Cow<'_, str> {
        match std::str::from_utf8(name) {
            Ok(s) if !s.contains('\\') => std::borrow::Cow::Borrowed(s),
            _ => std::borrow::Cow::Owned(name.escape_ascii().to_string()),
        }
    }

    /// Counts `rows` rows of a namespace as it is shown.
    fn add_shown(&mut self, shown: std::borrow::Cow<'_, str>, rows: u64) {
        if let Some(n) = self.listed.get_mut(shown.as_ref()) {
            *n = n.saturating_add(rows);
            return;
        }
        if shown.len() > MAX_LISTED_NAMESPACE_BYTES {
            self.unlisted_rows = self.unlisted_rows.saturating_add(rows);
            return;
        }
        self.listed.insert(shown.into_owned(), rows);
        if self.listed.len() > MAX_LISTED_NAMESPACES {
            let (_, n) = self.listed.pop_last().expect("over the cap");
            self.unlisted_rows = self.unlisted_rows.saturating_add(n);
        }
    }

    /// Adds `o`'s counts.
    pub fn add(&mut self, o: &OtherNamespaces) {
        for (name, &n) in &o.listed {
            self.add_shown(std::borrow::Cow::Borrowed(name), n);
        }
        self.unlisted_rows = self.unlisted_rows.saturating_add(o.unlisted_rows);
    }

    /// Rows of other namespaces in all.
    pub fn total(&self) -> u64 {
        self.listed
            .values()
            .fold(self.unlisted_rows, |a, &n| a.saturating_add(n))
    }

    /// Whether no row of another namespace was seen.
    pub fn is_empty(&self) -> bool {
        self.listed.is_empty() && self.unlisted_rows == 0
    }

    /// `"android" (20 rows), "linux-next" (1 row)` and the unlisted rows.
    pub fn describe(&self) -> String {
        let rows = |n: u64| format!("{n} row{}", if n == 1 { "" } else { "s" });
        let mut s: Vec<String> = self
            .listed
            .iter()
            .map(|(name, &n)| format!("{name:?} ({})", rows(n)))
            .collect();
        if self.unlisted_rows > 0 {
            s.push(format!(
                "{} of further namespaces",
                rows(self.unlisted_rows)
            ));
        }
        s.join(", ")
    }
}

/// What the splits saw of the `namespace` column (syzkaller's shared table).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceTally {
    /// Whether any input had the column.
    pub column: bool,
    /// Rows of inputs with the column that name the job's `--namespace`.
    pub matched: u64,
    /// Rows of the other namespaces.
    pub others: OtherNamespaces,
}

impl NamespaceTally {
    /// Adds `o`'s counts.
    pub fn add(&mut self, o: &NamespaceTally) {
        self.column |= o.column;
        self.matched = self.matched.saturating_add(o.matched);
        self.others.add(&o.others);
    }
}

/// One part of the result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardEntry {
    /// The shard's number, which is also the part's position in the result.
    pub index: u32,
    /// JSON lines in the part.
    pub records: u64,
    /// Compressed bytes of the part.
    pub bytes: u64,
    /// SHA-256 of the part's compressed bytes (hex).
    pub sha256: String,
    /// Executions it took (1 = first try), counting overlapping ones.
    pub attempts: u32,
    /// Deliveries handed back because the store was unreachable (not task failures).
    #[serde(default)]
    pub outages: u32,
}

/// A shard that could not be merged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedTask {
    /// The task, as `split-00003` or `merge-00012`.
    pub task: String,
    /// Its last error, naming the input, line or object it is about.
    pub error: String,
}

/// How a job ended (`"complete"` or `"failed"` in the manifest's JSON).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    /// Every task done, the result written.
    #[default]
    Complete,
    /// Some task failed: no result was published.
    Failed,
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JobStatus::Complete => "complete",
            JobStatus::Failed => "failed",
        })
    }
}

/// The manifest of contract §7.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The job's id.
    pub job: String,
    /// Whether the result was written.
    pub status: JobStatus,
    /// The repository of the base.
    pub base_repo: String,
    /// The commit every row was mapped onto.
    pub base_commit: String,
    /// Where the result was written; `None` when the job failed.
    pub result: Option<String>,
    /// Every input, after listing, in job order.
    pub inputs: Vec<String>,
    /// Counters summed over every shard (contract §7).
    pub totals: Counts,
    /// One entry per part of the result, in shard order.
    pub shards: Vec<ShardEntry>,
    /// The tasks that failed for good (empty when the job completed).
    #[serde(default)]
    pub failed: Vec<FailedTask>,
    /// The GCS object the dashboard gave for the result (`create_upload_url`), once the
    /// result is written there: `covmerge notify` re-sends `save_coverage` with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dashboard_upload: Option<String>,
    /// The job's `--group NAME=GLOB`s (absent when none): their records are not
    /// managers' (`covmerge report --manifest` reads them from here).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<crate::group::Group>,
    /// The rows of other namespaces than `--namespace`, per namespace (absent when
    /// there were none).
    #[serde(default, skip_serializing_if = "OtherNamespaces::is_empty")]
    pub other_namespaces: OtherNamespaces,
    /// The result's header line, as published (absent until the result is): with the
    /// shards' SHA-256 it ties the manifest to its result, header and parts
    /// (`covmerge report --manifest` checks both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// The partial written with `--partial-out` (absent without it, and until it is
    /// written): the manifest names it as it names the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<PartialWritten>,
}

/// Where a job's partial (contract §10) was written, and the SHA-256 of its
/// `partial.json`, which in turn gives every shard file's size and SHA-256: so the
/// manifest ties the job to the exact partial it wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialWritten {
    /// `--partial-out`, as logs show it (credentials removed).
    pub url: String,
    /// SHA-256 of the `partial.json` written there, lowercase hex.
    pub description_sha256: String,
    /// Its shard count.
    pub shard_count: u32,
    /// Its period's first day, `YYYY-MM-DD`.
    pub date_from: String,
    /// Its period's last day.
    pub date_to: String,
    /// Its `counts.rows_in`.
    pub rows_in: u64,
}

#[cfg(test)]
mod namespace_tests {
    use super::*;

    /// The listed names are the smallest whatever the order rows came in (so one list
    /// however rows fell to splits and threads), long names and the rest unlisted.
    #[test]
    fn other_namespaces_list_the_smallest_names_in_any_order() {
        let names: Vec<Vec<u8>> = (0..40u8)
            .map(|i| format!("ns{i:02}").into_bytes())
            .chain([Vec::new(), b"\xff\xfe".to_vec(), vec![b'x'; 257]])
            .collect();
        let mut fwd = OtherNamespaces::default();
        for n in &names {
            fwd.add_rows(n, 2);
        }
        let mut parts = [OtherNamespaces::default(), OtherNamespaces::default()];
        for (i, n) in names.iter().enumerate().rev() {
            parts[i % 2].add_rows(n, 1);
            parts[(i + 1) % 2].add_rows(n, 1);
        }
        let mut merged = parts[0].clone();
        merged.add(&parts[1]);
        assert_eq!(fwd, merged);
        assert_eq!(fwd.listed.len(), MAX_LISTED_NAMESPACES);
        assert_eq!(fwd.listed.keys().next().unwrap(), "");
        assert_eq!(fwd.listed.keys().last().unwrap(), "ns13");
        assert_eq!(fwd.total(), 2 * names.len() as u64);
        assert_eq!(
            fwd.unlisted_rows,
            2 * (names.len() - MAX_LISTED_NAMESPACES) as u64
        );
        let mut odd = OtherNamespaces::default();
        odd.add_rows(b"\xff\xfe", 1);
        assert_eq!(odd.describe(), "\"\\\\xff\\\\xfe\" (1 row)");
    }

    /// The raw bytes `\xff` `ns` and the text `\xffns` were listed as one namespace
    /// (a hostile run: `"listed": {"\\xffns": 3}` for 1 + 2 rows), also once merged.
    #[test]
    fn a_non_utf8_namespace_and_its_escape_as_text_were_listed_as_one() {
        let mut a = OtherNamespaces::default();
        a.add_rows(b"\xffns", 1);
        let mut b = OtherNamespaces::default();
        b.add_rows(br"\xffns", 2);
        for o in [&a, &b] {
            assert_eq!(o.listed.len(), 1);
        }
        let mut m = a.clone();
        m.add(&b);
        m.add(&OtherNamespaces::default());
        assert_eq!(m.listed.len(), 2, "{:?}", m.listed);
        assert_eq!(m.listed[r"\xffns"], 1);
        assert_eq!(m.listed[r"\\xffns"], 2);
        let mut again = m.clone();
        again.add(&m);
        assert_eq!(
            again.listed[r"\\xffns"], 4,
            "a shown name is not escaped twice"
        );
    }
}
