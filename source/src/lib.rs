//! Where file versions come from: `dir:ROOT` (ROOT/<commit>/<path>), `git:PATH` (blobs
//! straight from a repository's object database) and `store:URL` (content-addressed
//! blobs in object storage, for stateless fleet workers). Every provider answers
//! "the content of `path` at `commit`, or none"; a shared cache keeps recent versions.
//! [`project`] maps the lines of one version onto another (the line diff of contract §3).
//!
//! `covmerge-source` is used by the worker (to project rows onto the base), the report
//! (file pages, diffs across bases) and the CLI (`sources export`). It reads
//! repositories, directories and snapshots; it never writes a result, and knows
//! nothing of rows, shards or queues.

mod cache;
mod compact;
mod dir;
mod git;
mod histogram;
mod store;
mod store_index;

/// Line maps: the lines of one version of a file projected onto another.
pub mod project;

use std::sync::Arc;

pub use cache::CachedSource;
pub use dir::DirSource;
pub use git::{all_paths, GitSource};
pub use store::{export_commits, StoreSource, DEFAULT_INDEX_BYTES};

/// Git's blob id of some content: `sha1("blob <len>\0" + content)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlobId(pub [u8; 20]);

impl BlobId {
    /// The blob id git gives `content`.
    pub fn of(content: &[u8]) -> BlobId {
        use sha1::Digest;
        let mut h = sha1::Sha1::new();
        h.update(format!("blob {}\0", content.len()).as_bytes());
        h.update(content);
        BlobId(h.finalize().into())
    }

    /// The id in lowercase hex, as git prints it.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

/// One version of one file.
#[derive(Debug)]
pub struct FileVersion {
    /// Git's blob id of the content.
    pub id: BlobId,
    /// The file's bytes.
    pub data: Vec<u8>,
}

impl FileVersion {
    /// A version holding `data`, its id computed.
    pub fn new(data: Vec<u8>) -> Self {
        FileVersion {
            id: BlobId::of(&data),
            data,
        }
    }

    /// The lines of contract §3: split on `\n`; the empty piece after a final newline is
    /// not a line; a trailing `\r` stays part of its line.
    pub fn lines(&self) -> impl Iterator<Item = &[u8]> {
        let d = &self.data[..];
        let d = d.strip_suffix(b"\n").unwrap_or(d);
        let empty = self.data.is_empty();
        d.split(|&b| b == b'\n')
            .take(if empty { 0 } else { usize::MAX })
    }
}

/// A source failure that is not "no such file": the shard should be retried.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Reading the source failed (a file, an object, a listing).
    #[error("source {source_name}: reading {what}: {message}")]
    Io {
        /// The source, as displayed (its spec).
        source_name: String,
        /// What was being read (a commit and path, an object).
        what: String,
        /// The error.
        message: String,
    },
    /// The base commit is not in the source: nothing can be projected onto it.
    #[error("source {source_name} does not hold the base commit {commit:?} ({hint})")]
    NoCommit {
        /// The source, as displayed (its spec).
        source_name: String,
        /// The commit as given.
        commit: String,
        /// What to give instead: what the id names when it is not a commit.
        hint: String,
    },
    /// A source spec that names no source (unknown scheme, a repository that does not open).
    #[error("invalid source spec {spec:?}: {reason}")]
    Spec {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A snapshot blob whose content is not what its id names (a `store:` source):
    /// the snapshot is damaged, and no retry can cure it.
    #[error("source {source_name}: {what}: {message} (the snapshot is damaged: export it again with `covmerge sources`)")]
    Corrupt {
        /// The source, as displayed (its spec).
        source_name: String,
        /// What was being read.
        what: String,
        /// What is wrong with it.
        message: String,
    },
    /// A file over the source's limit (a share of the memory budget: the merge's is
    /// [`max_file_bytes`]): not read, and no retry will read it.
    #[error(
        "source {source_name}: {what} is {size} bytes, over the {} limit on a source file (a share of --memory-budget, at most {}: raise --memory-budget)",
        covmerge_proto::memory::format_bytes(*limit),
        covmerge_proto::memory::format_bytes(MAX_SOURCE_FILE_BYTES)
    )]
    TooLarge {
        /// The source, as displayed (its spec).
        source_name: String,
        /// The file (commit and path).
        what: String,
        /// Its size in bytes.
        size: u64,
        /// The limit it is over, in bytes.
        limit: u64,
    },
}

/// The largest file version a source reads, and the share of a merge's memory budget
/// it reads at most: the memory plan's (`covmerge_proto::memory::plan`); a source is
/// given its limit as a number.
pub use covmerge_proto::limits::MAX_SOURCE_FILE_BYTES;
pub use covmerge_proto::memory::max_file_bytes;

/// A provider of file versions. `Ok(None)`: that commit or that file does not exist.
pub trait Source: Send + Sync {
    /// Version `path` of `commit`, or `None` when the commit or the file does not exist.
    fn get(&self, commit: &[u8], path: &[u8]) -> Result<Option<Arc<FileVersion>>, SourceError>;

    /// Whether the source holds `commit` at all. A merge asks this of its base before
    /// anything else: for a base the source lacks, every file would look deleted and
    /// the result would be empty but look complete.
    fn has_commit(&self, commit: &[u8]) -> Result<bool, SourceError>;

    /// Forgets what it found absent (a commit, a file). A long-lived worker's source
    /// may gain commits between jobs (a snapshot exported, a repository fetched): an
    /// absence remembered from an earlier job made a later one lose its rows and exit
    /// 0. Called when a merge task starts; what exists stays cached.
    fn forget_absent(&self) {}

    /// What this source holds of `commit`, as an id (`None`: it does not hold the
    /// commit). Two sources of one kind that give the same id give the same set of
    /// files for it: `dir:` a SHA-256 of the sorted listing of `ROOT/<commit>/` (each
    /// path, whether file or symlink, and its size), `git:` the commit's tree id,
    /// `store:` a SHA-256 of the snapshot's index. The merges of one job compare their
    /// bases' ids: a worker whose own `--source` lacks some files of the base would
    /// count them as deleted, alone, for its shards.
    fn tree_id(&self, commit: &[u8]) -> Result<Option<String>, SourceError>;

    /// What `id` names in the source when it is not a commit the source holds (an
    /// annotated tag, a tree, a blob), for a refusal to say; `None` when the source
    /// cannot tell.
    fn named_instead(&self, _id: &[u8]) -> Option<String> {
        None
    }
}

/// Fails unless `source` (named `name` in the error) holds the base commit `commit`.
pub fn require_commit(source: &dyn Source, name: &str, commit: &str) -> Result<(), SourceError> {
    if source.has_commit(commit.as_bytes())? {
        Ok(())
    } else {
        Err(SourceError::NoCommit {
            source_name: name.to_string(),
            commit: commit.to_string(),
            hint: source.named_instead(commit.as_bytes()).unwrap_or_else(|| {
                "a full commit id the source has, e.g. `git rev-parse` of it".to_string()
            }),
        })
    }
}

/// A commit id from the input becomes part of a filesystem path or an object key:
/// only plain names are accepted, anything else does not exist.
pub(crate) fn plain_commit(commit: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(commit).ok()?;
    let ok = !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    ok.then_some(s)
}

/// A file path asked of a source: only a canonical one (UTF-8, as
/// [`covmerge_proto::path::canonical_path`] says) names a file; anything else does not
/// exist, in every source alike (rows with such paths are bad rows before any lookup).
pub(crate) fn plain_path(path: &[u8]) -> Option<&str> {
    covmerge_proto::path::canonical_path(path).ok()?;
    std::str::from_utf8(path).ok()
}

/// A source spec, parsed: which provider, and its argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceSpec<'a> {
    /// `dir:ROOT`
    Dir(&'a str),
    /// `git:PATH`
    Git(&'a str),
    /// `store:URL`
    Store(&'a str),
}

impl<'a> SourceSpec<'a> {
    /// Parses `dir:ROOT`, `git:PATH` or `store:URL` without opening anything (the
    /// command line checks a spec with this before any work).
    pub fn parse(spec: &'a str) -> Result<Self, SourceError> {
        if let Some(root) = spec.strip_prefix("dir:") {
            Ok(SourceSpec::Dir(root))
        } else if let Some(path) = spec.strip_prefix("git:") {
            Ok(SourceSpec::Git(path))
        } else if let Some(url) = spec.strip_prefix("store:") {
            Ok(SourceSpec::Store(url))
        } else {
            Err(SourceError::Spec {
                spec: spec.to_string(),
                reason: "expected dir:ROOT, git:PATH or store:URL".into(),
            })
        }
    }
}

/// Opens a source spec: `dir:ROOT`, `git:PATH`, or `store:URL`, reading files up to
/// [`MAX_SOURCE_FILE_BYTES`].
pub fn open_source(spec: &str) -> Result<Arc<dyn Source>, SourceError> {
    open_source_within(spec, store::DEFAULT_INDEX_BYTES, MAX_SOURCE_FILE_BYTES)
}

/// [`open_source`], a `store:` source holding at most about `index_bytes` of commit
/// indexes, and every source refusing a file over `max_file` bytes
/// ([`max_file_bytes`] of the memory budget) before reading it.
pub fn open_source_within(
    spec: &str,
    index_bytes: usize,
    max_file: u64,
) -> Result<Arc<dyn Source>, SourceError> {
    let bad = |reason: &str| SourceError::Spec {
        spec: spec.to_string(),
        reason: reason.to_string(),
    };
    match SourceSpec::parse(spec)? {
        SourceSpec::Dir(root) => {
            if !std::path::Path::new(root).is_dir() {
                return Err(bad("not a directory"));
            }
            Ok(Arc::new(DirSource::new(root).with_max_file_bytes(max_file)))
        }
        SourceSpec::Git(path) => Ok(Arc::new(
            GitSource::open(path)?.with_max_file_bytes(max_file),
        )),
        SourceSpec::Store(url) => {
            let store = covmerge_storage::Store::open(url).map_err(|e| bad(&e.to_string()))?;
            Ok(Arc::new(
                StoreSource::with_index_budget(store, index_bytes).with_max_file_bytes(max_file),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        FileVersion::new(s.as_bytes().to_vec())
            .lines()
            .map(|l| String::from_utf8(l.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn line_splitting_follows_the_spec() {
        assert_eq!(lines(""), Vec::<String>::new());
        assert_eq!(lines("a\nb\n"), vec!["a", "b"]);
        assert_eq!(lines("a\nb"), vec!["a", "b"]);
        assert_eq!(lines("a\r\n\n"), vec!["a\r", ""]);
        assert_eq!(lines("\n"), vec![""]);
    }

    #[test]
    fn blob_id_matches_git() {
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(
            BlobId::of(b"hello\n").hex(),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
    }

    #[test]
    fn commit_names_cannot_escape() {
        assert!(plain_commit(b"../etc").is_none());
        assert!(plain_commit(b"..").is_none());
        assert!(plain_commit(b"a/b").is_none());
        assert_eq!(plain_commit(b"fe46a7dd"), Some("fe46a7dd"));
    }
}
