//! `partial.json`: what a partial holds, beside its shard files (contract §10).

use std::path::Path;

use covmerge_proto::date::Date;
use covmerge_proto::manifest::OtherNamespaces;
use serde::{Deserialize, Serialize};

use crate::PartialError;

/// The value of `format` in every description.
pub const FORMAT: &str = "covmerge-partial";
/// The format version this crate writes and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;
/// The description's file name in a partial's directory.
pub const DESCRIPTION: &str = "partial.json";

/// The counts of a partial that no table holds: they do not depend on the base.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialCounts {
    /// Data rows of the partial's namespace read (bad rows included): `rows_bad` plus the
    /// rows of `lines` plus `rows_without_line` and `rows_without_version` of `paths`.
    pub rows_in: u64,
    /// Malformed rows skipped (under `--max-bad-rows`): they name no trustworthy path.
    pub rows_bad: u64,
    /// Sum of `paths.rows_without_line` (redundant, for a reader of the JSON alone).
    pub rows_without_line: u64,
    /// Sum of `paths.rows_without_version`.
    pub rows_without_version: u64,
    /// Sum of `paths.hits_without_version` (saturating).
    pub hits_without_version: u64,
    /// Rows of other namespaces than the partial's (not in `rows_in`).
    pub rows_other_namespaces: u64,
    /// Whether any input had a `namespace` column (contract §2).
    pub namespace_column: bool,
}

/// One table file of one shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// File name in the partial's directory (`lines-00003.parquet`).
    pub name: String,
    /// Rows of the table in the file.
    pub rows: u64,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the file (hex).
    pub sha256: String,
}

/// The four table files of one shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardFiles {
    /// The shard's number (`fnv1a64(path) % shard_count`).
    pub index: u32,
    /// Hits and rows per (path, version, manager, line).
    pub lines: FileEntry,
    /// Rows per (path, version, line, function).
    pub funcs: FileEntry,
    /// One commit per (path, version).
    pub versions: FileEntry,
    /// Every path, with its rows that reach no line of a version.
    pub paths: FileEntry,
}

/// `partial.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Description {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The namespace of every row the partial sums.
    pub namespace: String,
    /// First day of the period (YYYY-MM-DD).
    pub date_from: String,
    /// Last day of the period (YYYY-MM-DD), inclusive.
    pub date_to: String,
    /// Counts that no table holds.
    pub counts: PartialCounts,
    /// Rows of other namespaces, by name (the listing rule of contract §7).
    pub other_namespaces: OtherNamespaces,
    /// Number of shards (`shards.len()`).
    pub shard_count: u32,
    /// The shards, by index.
    pub shards: Vec<ShardFiles>,
}

/// The most bytes of a `partial.json` read: the description of a partial of the most
/// shards a job has ([`covmerge_proto::limits::MAX_SHARDS`], about 700 bytes each) is
/// under it.
pub const MAX_DESCRIPTION_BYTES: u64 = 64 << 20;

impl Description {
    /// Reads and checks `dir/partial.json`: the format and its version first (an unknown
    /// version is refused as such, whatever else it holds), then the fields.
    pub fn read(dir: &Path) -> Result<Description, PartialError> {
        use std::io::Read as _;
        let path = dir.join(DESCRIPTION);
        let f = crate::file::open_regular(&path)?;
        let mut text = Vec::new();
        f.take(MAX_DESCRIPTION_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(|e| PartialError::io(&path, e))?;
        if text.len() as u64 > MAX_DESCRIPTION_BYTES {
            return Err(PartialError::corrupt(
                &path,
                format!("more than the {MAX_DESCRIPTION_BYTES} bytes of a partial's description"),
            ));
        }
        // The format and its version first, without building the rest as a tree of
        // values (a description of many shards is tens of MB).
        #[derive(serde::Deserialize)]
        struct Head {
            format: Option<serde_json::Value>,
            format_version: Option<serde_json::Value>,
        }
        let head: Head =
            serde_json::from_slice(&text).map_err(|e| PartialError::corrupt(&path, e))?;
        if head.format.as_ref().and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(PartialError::corrupt(
                &path,
                format!("not a partial's description (no \"format\": {FORMAT:?})"),
            ));
        }
        match head.format_version.as_ref().and_then(|f| f.as_u64()) {
            Some(n) if n == FORMAT_VERSION as u64 => {}
            found => {
                return Err(PartialError::Version {
                    path,
                    found: match (found, head.format_version.as_ref()) {
                        (Some(n), _) => n.to_string(),
                        (None, None) => "none".to_owned(),
                        // `"1"`, `1.0`: shown as written, not as "none".
                        (None, Some(v)) => v.to_string(),
                    },
                });
            }
        }
        let d: Description =
            serde_json::from_slice(&text).map_err(|e| PartialError::corrupt(&path, e))?;
        d.check().map_err(|e| PartialError::corrupt(&path, e))?;
        Ok(d)
    }

    fn check(&self) -> Result<(), String> {
        let from = parse_date(&self.date_from)?;
        let to = parse_date(&self.date_to)?;
        if from > to {
            return Err(format!("date_from {from} is after date_to {to}"));
        }
        if self.shard_count == 0 {
            return Err("shard_count 0: a partial has 1 shard at least".to_owned());
        }
        if self.shards.len() != self.shard_count as usize {
            return Err(format!(
                "shard_count {} but {} shards listed",
                self.shard_count,
                self.shards.len()
            ));
        }
        for (i, s) in self.shards.iter().enumerate() {
            if s.index as usize != i {
                return Err(format!("shard {i} is listed with index {}", s.index));
            }
        }
        let ns = &self.namespace;
        if ns.len() > covmerge_proto::limits::MAX_NAME_BYTES || ns.chars().any(char::is_control) {
            return Err(format!(
                "namespace {ns:?} is not one a merge takes (at most {} bytes, no control characters)",
                covmerge_proto::limits::MAX_NAME_BYTES
            ));
        }
        let ours = covmerge_proto::manifest::OtherNamespaces::shown_name(ns.as_bytes());
        for (name, &n) in &self.other_namespaces.listed {
            if n == 0 {
                return Err(format!("other namespace {name:?} is listed with no rows"));
            }
            if *name == ours {
                return Err(format!(
                    "the partial's own namespace {name:?} is listed as another"
                ));
            }
            if name.len() > covmerge_proto::manifest::MAX_LISTED_NAMESPACE_BYTES {
                return Err(format!(
                    "other namespace {name:?} is longer than a listed name may be ({} bytes)",
                    covmerge_proto::manifest::MAX_LISTED_NAMESPACE_BYTES
                ));
            }
        }
        if self.other_namespaces.listed.len() > covmerge_proto::manifest::MAX_LISTED_NAMESPACES {
            return Err(format!(
                "{} other namespaces listed, at most {} are",
                self.other_namespaces.listed.len(),
                covmerge_proto::manifest::MAX_LISTED_NAMESPACES
            ));
        }
        if self.other_namespaces.total() != self.counts.rows_other_namespaces {
            return Err(format!(
                "rows_other_namespaces {} but other_namespaces lists {}",
                self.counts.rows_other_namespaces,
                self.other_namespaces.total()
            ));
        }
        Ok(())
    }

    /// The description's text, as `partial.json` holds it.
    pub fn to_json(&self) -> Vec<u8> {
        let mut text = serde_json::to_vec_pretty(self).expect("a description serializes");
        text.push(b'\n');
        text
    }

    /// Checks the description as a reader does (its dates, shards and counts of
    /// other namespaces), but not the files it names.
    pub fn validate(&self) -> Result<(), String> {
        self.check()?;
        let c = &self.counts;
        let sum = [c.rows_bad, c.rows_without_line, c.rows_without_version]
            .into_iter()
            .fold(0u64, u64::saturating_add);
        if sum > c.rows_in {
            return Err(format!(
                "rows_in {} is less than rows_bad, rows_without_line and rows_without_version together ({sum})",
                c.rows_in
            ));
        }
        Ok(())
    }

    /// Writes `dir/partial.json` (to a temporary name, then renamed: a partial whose
    /// description is there is whole).
    pub fn write(&self, dir: &Path) -> Result<(), PartialError> {
        let path = dir.join(DESCRIPTION);
        let tmp = dir.join(".partial.json.tmp");
        let text = self.to_json();
        std::fs::write(&tmp, &text).map_err(|e| PartialError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| PartialError::io(&path, e))
    }
}

/// A `YYYY-MM-DD` date.
pub(crate) fn parse_date(s: &str) -> Result<Date, String> {
    s.parse::<Date>().map_err(|e| format!("date {s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(DESCRIPTION), text).unwrap();
        Description::read(dir.path()).unwrap_err().to_string()
    }

    /// A description of no shards was refused as "shard_count 0 but 0 shards
    /// listed", which reads as if the two agreed; a version written as text was
    /// "format version none".
    #[test]
    fn a_description_of_no_shards_or_a_version_in_quotes_was_named_confusingly() {
        let head = format!("\"format\":\"{FORMAT}\"");
        let e = read_text(&format!("{{{head},\"format_version\":\"1\"}}"));
        assert!(e.contains("\"1\"") && !e.contains("none"), "{e}");
        let e = read_text(&format!("{{{head}}}"));
        assert!(e.contains("none"), "{e}");
        let e = read_text(&format!(
            "{{{head},\"format_version\":1,\"namespace\":\"\",\"date_from\":\"2024-01-01\",\
             \"date_to\":\"2024-01-01\",\"counts\":{{\"rows_in\":0,\"rows_bad\":0,\
             \"rows_other_namespaces\":0,\"namespace_column\":false,\"rows_without_line\":0,\
             \"rows_without_version\":0,\"hits_without_version\":0}},\
             \"other_namespaces\":{{\"listed\":{{}},\"unlisted_rows\":0}},\
             \"shard_count\":0,\"shards\":[]}}"
        ));
        assert!(
            e.contains("shard_count 0: a partial has 1 shard at least"),
            "{e}"
        );
    }

    /// A missing shard file's cause was printed twice by an error chain ("...:
    /// No such file or directory (os error 2): No such file or directory (os error 2)").
    #[test]
    fn an_io_error_was_its_own_source_and_printed_twice() {
        let e = PartialError::io(
            Path::new("versions-00002.parquet"),
            std::io::Error::from(std::io::ErrorKind::NotFound),
        );
        assert!(std::error::Error::source(&e).is_none());
        assert!(e.to_string().starts_with("versions-00002.parquet: "), "{e}");
    }
}
