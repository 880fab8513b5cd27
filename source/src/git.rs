//! `git:PATH`: file versions read straight from a repository's object database.
//!
//! What a merge asks is "the content of `path` at `commit`", once per (file, commit)
//! group of its shard: tens of thousands of times per job, for far fewer distinct
//! blobs (a file changes in a few of the commits). Answering each question from the
//! object database alone decodes the commit, every tree on the path and the blob, each
//! through its pack delta chain. So a worker keeps, shared by its merge threads:
//!
//! - commit → root tree id;
//! - decoded trees by id (name → mode and id), up to [`TREE_CACHE`] bytes: a path is
//!   then a few hash lookups, and the trees shared by many commits (all but the changed
//!   directories) are decoded once per worker;
//! - the blobs handed out, by id, as weak references: a blob that some holder (the
//!   version cache, a shard's base file) still keeps is handed out again without being
//!   read, so a file unchanged over 60 commits is decoded once. This costs no memory
//!   of its own: a blob nobody holds is read again.
//!
//! A version's [`BlobId`] is the tree entry's id, not a hash of the content: git
//! names blobs by exactly that hash (only SHA-1 repositories are opened).

use std::sync::{Arc, Mutex, Weak};

use gix::ObjectId;
use rustc_hash::FxHashMap;

use super::{
    plain_commit, plain_path, BlobId, FileVersion, Source, SourceError, MAX_SOURCE_FILE_BYTES,
};

/// Bytes of decoded trees a worker keeps (then they are dropped and decoded again).
/// The Linux kernel's trees hold ~90,000 entries in ~5,000 directories (~7 MB decoded
/// for one commit's whole tree); a merge walks only the directories of its files.
const TREE_CACHE: usize = 16 << 20;

/// Root trees of commits a worker remembers (then forgotten and looked up again).
const COMMITS: usize = 1 << 16;

/// One decoded tree: entry name → (mode, id).
type Tree = FxHashMap<Box<[u8]>, (gix::objs::tree::EntryMode, ObjectId)>;

#[derive(Default)]
struct Caches {
    /// `None`: no such commit (or not a commit).
    roots: FxHashMap<ObjectId, Option<ObjectId>>,
    trees: FxHashMap<ObjectId, Arc<Tree>>,
    tree_bytes: usize,
    blobs: FxHashMap<ObjectId, Weak<FileVersion>>,
    /// Weak entries when dead ones were last dropped.
    blobs_pruned_at: usize,
}

/// `git:PATH`: blobs read straight from the object database of a repository (bare or
/// not) with gix — no checkout, no `git` process per file.
pub struct GitSource {
    path: String,
    shared: gix::ThreadSafeRepository,
    /// Thread-local handles are cheap but not free (object caches): keep a few.
    pool: Mutex<Vec<gix::Repository>>,
    caches: Mutex<Caches>,
    /// The largest blob read.
    max_file: u64,
}

impl GitSource {
    /// The source refusing blobs over `bytes` (at most [`MAX_SOURCE_FILE_BYTES`]).
    pub fn with_max_file_bytes(mut self, bytes: u64) -> Self {
        self.max_file = bytes.min(MAX_SOURCE_FILE_BYTES);
        self
    }

    /// Opens the git repository at `path` (a work tree or a bare repository).
    pub fn open(path: &str) -> Result<Self, SourceError> {
        let shared = gix::ThreadSafeRepository::open(path).map_err(|e| SourceError::Spec {
            spec: format!("git:{path}"),
            reason: open_failure(path, &e),
        })?;
        Ok(GitSource {
            path: path.to_string(),
            shared,
            pool: Mutex::default(),
            caches: Mutex::default(),
            max_file: MAX_SOURCE_FILE_BYTES,
        })
    }

    /// The base for `--base-at`: the newest commit reachable from `branch` (default: the
    /// repository's HEAD) whose committer date is at or before `until` (Unix seconds),
    /// walking in commit-date order from the tip as syz-bq.sh's `git log --before`
    /// does.
    pub fn commit_at(&self, branch: Option<&str>, until: i64) -> Result<String, SourceError> {
        let repo = self.shared.to_thread_local();
        let what = branch.unwrap_or("HEAD").to_string();
        let tip = match branch {
            None => repo
                .head_id()
                .map_err(|e| self.io(what.clone(), e))?
                .detach(),
            Some(b) => {
                // A branch as given (`master`, `refs/heads/x`), else origin's. The
                // error names the branch and where it was looked for (it named only
                // the last place: "refs/remotes/origin/X could not be found").
                let mut r = repo
                    .find_reference(b)
                    .or_else(|_| repo.find_reference(format!("refs/remotes/origin/{b}").as_str()))
                    .map_err(|_| {
                        self.io(
                            format!("--branch {b}"),
                            format!("no such branch: neither {b} nor refs/remotes/origin/{b} is a reference of the repository"),
                        )
                    })?;
                r.peel_to_id()
                    .map_err(|e| self.io(format!("branch {b}"), e))?
                    .detach()
            }
        };
        let walk = repo
            .rev_walk([tip])
            .sorting(gix::revision::walk::Sorting::ByCommitTime(
                gix::traverse::commit::simple::CommitTimeOrder::NewestFirst,
            ))
            .all()
            .map_err(|e| self.io(what.clone(), e))?;
        // Commits of the same second come in no defined order; syz-bq.sh's `sort -rn`
        // of "date hash" lines then takes the greatest hash: so do we.
        let mut best: Option<(i64, String)> = None;
        for info in walk {
            let info = info.map_err(|e| self.io(what.clone(), e))?;
            let t = match info.commit_time {
                Some(t) => t,
                None => {
                    info.object()
                        .map_err(|e| self.io(what.clone(), e))?
                        .time()
                        .map_err(|e| self.io(what.clone(), e))?
                        .seconds
                }
            };
            match &mut best {
                Some((bt, _)) if t < *bt => break,
                Some((_, id)) => {
                    let h = info.id.to_string();
                    if h > *id {
                        *id = h;
                    }
                }
                None if t <= until => best = Some((t, info.id.to_string())),
                None => {}
            }
        }
        if let Some((_, id)) = best {
            return Ok(id);
        }
        Err(self.io(what, format!("no commit at or before {until} (Unix time)")))
    }

    fn io(&self, what: String, e: impl std::fmt::Display) -> SourceError {
        SourceError::Io {
            source_name: format!("git:{}", self.path),
            what,
            message: e.to_string(),
        }
    }

    /// The root tree of `commit`, `None` when there is no such commit.
    fn root(
        &self,
        repo: &gix::Repository,
        id: ObjectId,
        commit: &str,
    ) -> Result<Option<ObjectId>, SourceError> {
        if let Some(r) = self.caches.lock().unwrap().roots.get(&id) {
            return Ok(*r);
        }
        let obj = repo
            .try_find_object(id)
            .map_err(|e| self.io(format!("object {commit}"), e))?;
        let root = match obj.map(|o| o.try_into_commit()) {
            Some(Ok(c)) => Some(
                c.tree_id()
                    .map_err(|e| self.io(format!("tree of {commit}"), e))?
                    .detach(),
            ),
            _ => None,
        };
        let mut c = self.caches.lock().unwrap();
        if c.roots.len() >= COMMITS {
            c.roots.clear();
        }
        c.roots.insert(id, root);
        Ok(root)
    }

    /// The decoded tree `id`; `None` when the object is not a tree.
    fn tree(
        &self,
        repo: &gix::Repository,
        id: ObjectId,
        what: impl Fn() -> String,
    ) -> Result<Option<Arc<Tree>>, SourceError> {
        if let Some(t) = self.caches.lock().unwrap().trees.get(&id) {
            return Ok(Some(t.clone()));
        }
        let obj = repo.find_object(id).map_err(|e| self.io(what(), e))?;
        if obj.kind != gix::object::Kind::Tree {
            return Ok(None);
        }
        let mut tree = Tree::default();
        let mut bytes = 64;
        for entry in gix::objs::TreeRefIter::from_bytes(&obj.data, id.kind()) {
            // Like gix's own path lookup: entries that do not parse are skipped.
            let Ok(entry) = entry else { continue };
            bytes += entry.filename.len() + 64;
            tree.entry(entry.filename.to_vec().into_boxed_slice())
                .or_insert((entry.mode, entry.oid.to_owned()));
        }
        let tree = Arc::new(tree);
        let mut c = self.caches.lock().unwrap();
        if c.tree_bytes + bytes > TREE_CACHE {
            c.trees.clear();
            c.tree_bytes = 0;
        }
        if c.trees.insert(id, tree.clone()).is_none() {
            c.tree_bytes += bytes;
        }
        Ok(Some(tree))
    }

    /// The blob id of `path` (canonical: its `/`-separated segments are tree entry
    /// names) at `commit`, `None` when there is none. A file or a symlink is a blob (a
    /// symlink's content is its target text, what `git show` gives and what `dir:`
    /// reads); a path below a file, a symlink or a submodule (whose commit is not in
    /// this repository) names nothing, as in a checkout.
    fn blob_id(
        &self,
        repo: &gix::Repository,
        commit: &str,
        path: &str,
    ) -> Result<Option<ObjectId>, SourceError> {
        let Ok(id) = ObjectId::from_hex(commit.as_bytes()) else {
            return Ok(None);
        };
        let Some(root) = self.root(repo, id, commit)? else {
            return Ok(None);
        };
        let what = || format!("{commit}:{path}");
        let mut tree = match self.tree(repo, root, || format!("tree of {commit}"))? {
            Some(t) => t,
            None => return Ok(None),
        };
        let mut parts = path.split('/').map(str::as_bytes).peekable();
        while let Some(name) = parts.next() {
            let Some(&(mode, oid)) = tree.get(name) else {
                return Ok(None);
            };
            if parts.peek().is_none() {
                return Ok(mode.is_blob_or_symlink().then_some(oid));
            }
            if !mode.is_tree() {
                return Ok(None); // not a directory: no path below it
            }
            tree = match self.tree(repo, oid, what)? {
                Some(t) => t,
                None => return Ok(None),
            };
        }
        Ok(None) // no components at all
    }

    /// The version with blob `oid`, read only if no holder keeps it already.
    fn blob(
        &self,
        repo: &gix::Repository,
        oid: ObjectId,
        what: impl Fn() -> String,
    ) -> Result<Arc<FileVersion>, SourceError> {
        if let Some(v) = self
            .caches
            .lock()
            .unwrap()
            .blobs
            .get(&oid)
            .and_then(Weak::upgrade)
        {
            return Ok(v);
        }
        let size = repo
            .find_header(oid)
            .map_err(|e| self.io(what(), e))?
            .size();
        if size > self.max_file {
            return Err(SourceError::TooLarge {
                source_name: format!("git:{}", self.path),
                what: what(),
                size,
                limit: self.max_file,
            });
        }
        let data = repo
            .find_object(oid)
            .map_err(|e| self.io(what(), e))?
            .detach()
            .data;
        let mut id = [0u8; 20];
        id.copy_from_slice(oid.as_bytes());
        let v = Arc::new(FileVersion {
            id: BlobId(id),
            data,
        });
        let mut c = self.caches.lock().unwrap();
        c.blobs.insert(oid, Arc::downgrade(&v));
        if c.blobs.len() >= 2 * c.blobs_pruned_at.max(1024) {
            c.blobs.retain(|_, w| w.strong_count() > 0);
            c.blobs_pruned_at = c.blobs.len();
        }
        Ok(v)
    }

    fn lookup(
        &self,
        repo: &gix::Repository,
        commit: &str,
        path: &str,
    ) -> Result<Option<Arc<FileVersion>>, SourceError> {
        let Some(oid) = self.blob_id(repo, commit, path)? else {
            return Ok(None);
        };
        self.blob(repo, oid, || format!("{commit}:{path}"))
            .map(Some)
    }
}

/// A commit id as git writes it: lowercase hex. An uppercase spelling would resolve in
/// the object database but name a directory `dir:` does not have, a snapshot index
/// `store:` does not have, and go into the header as given.
fn git_commit(commit: &[u8]) -> Option<&str> {
    plain_commit(commit).filter(|c| !c.bytes().any(|b| b.is_ascii_uppercase()))
}

impl Source for GitSource {
    fn has_commit(&self, commit: &[u8]) -> Result<bool, SourceError> {
        let Some(commit) = git_commit(commit) else {
            return Ok(false);
        };
        // Only a full id names a commit: an abbreviation or a revspec (`HEAD~1`) is not
        // what the rows and the header carry.
        let Ok(id) = ObjectId::from_hex(commit.as_bytes()) else {
            return Ok(false);
        };
        let repo = self.pool.lock().unwrap().pop();
        let repo = repo.unwrap_or_else(|| self.shared.to_thread_local());
        let r = self.root(&repo, id, commit);
        self.pool.lock().unwrap().push(repo);
        Ok(r?.is_some())
    }

    fn named_instead(&self, id: &[u8]) -> Option<String> {
        let id = ObjectId::from_hex(git_commit(id)?.as_bytes()).ok()?;
        let repo = self.shared.to_thread_local();
        let obj = repo.try_find_object(id).ok()??;
        Some(match obj.kind {
            gix::object::Kind::Tag => match obj.peel_to_commit() {
                Ok(c) => format!(
                    "it is an annotated tag of commit {}: give that commit (`git rev-parse TAG^{{commit}}`)",
                    c.id
                ),
                Err(_) => "it is a tag of no commit".to_string(),
            },
            gix::object::Kind::Tree => "it is a tree, not a commit".to_string(),
            gix::object::Kind::Blob => "it is a blob (a file's text), not a commit".to_string(),
            gix::object::Kind::Commit => return None,
        })
    }

    fn tree_id(&self, commit: &[u8]) -> Result<Option<String>, SourceError> {
        let Some(commit) = git_commit(commit) else {
            return Ok(None);
        };
        let Ok(id) = ObjectId::from_hex(commit.as_bytes()) else {
            return Ok(None);
        };
        let repo = self.pool.lock().unwrap().pop();
        let repo = repo.unwrap_or_else(|| self.shared.to_thread_local());
        let r = self.root(&repo, id, commit);
        self.pool.lock().unwrap().push(repo);
        Ok(r?.map(|tree| format!("git tree {tree}")))
    }

    fn get(&self, commit: &[u8], path: &[u8]) -> Result<Option<Arc<FileVersion>>, SourceError> {
        let Some(commit) = git_commit(commit) else {
            return Ok(None);
        };
        let Some(path) = plain_path(path) else {
            return Ok(None);
        };
        let repo = self.pool.lock().unwrap().pop();
        let repo = repo.unwrap_or_else(|| self.shared.to_thread_local());
        let r = self.lookup(&repo, commit, path);
        self.pool.lock().unwrap().push(repo);
        r
    }
}

/// Every blob path of each of `commits` (for exporting whole trees).
pub fn all_paths(
    git: &GitSource,
    commits: &[String],
) -> Result<std::collections::BTreeSet<String>, SourceError> {
    let repo = git.shared.to_thread_local();
    let mut out = std::collections::BTreeSet::new();
    for c in commits {
        let id =
            gix::ObjectId::from_hex(c.as_bytes()).map_err(|e| git.io(format!("commit {c}"), e))?;
        let commit = repo
            .find_commit(id)
            .map_err(|e| git.io(format!("commit {c}"), e))?;
        let tree = commit
            .tree()
            .map_err(|e| git.io(format!("tree of {c}"), e))?;
        let mut rec = gix::traverse::tree::Recorder::default();
        tree.traverse()
            .breadthfirst(&mut rec)
            .map_err(|e| git.io(format!("tree of {c}"), e))?;
        for e in rec.records {
            // Only paths a row can name (the store's index is one path per line).
            if e.mode.is_blob_or_symlink()
                && covmerge_proto::path::canonical_path(&e.filepath).is_ok()
            {
                out.insert(e.filepath.to_string());
            }
        }
    }
    Ok(out)
}

/// Why a repository did not open: the error and its causes, and what a SHA-256
/// repository (which the git reader does not read) can do instead.
fn open_failure(path: &str, e: &(dyn std::error::Error + 'static)) -> String {
    let mut why = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        why.push_str(": ");
        why.push_str(&c.to_string());
        cause = c.source();
    }
    let config = [".git/config", "config"]
        .iter()
        .find_map(|f| std::fs::read_to_string(std::path::Path::new(path).join(f)).ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if config.contains("objectformat") && config.contains("sha256") {
        why.push_str(
            " (a SHA-256 repository, extensions.objectFormat = sha256: the git: source reads SHA-1 repositories only; give a dir: source of its commits' files, `git archive` of each)",
        );
    }
    why
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::process::Command;

    /// Runs git in `dir` with no user or system configuration (also `dir:`'s tests).
    pub(crate) fn git(dir: &std::path::Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// Two commits: `a/b/c.txt` changes, `a/same.txt` does not.
    fn repo() -> (tempfile::TempDir, String, String) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        git(p, &["init", "-q"]);
        std::fs::create_dir_all(p.join("a/b")).unwrap();
        std::fs::write(p.join("a/b/c.txt"), "one\n").unwrap();
        std::fs::write(p.join("a/same.txt"), "same\n").unwrap();
        git(p, &["add", "."]);
        git(p, &["commit", "-q", "-m", "1"]);
        let c1 = git(p, &["rev-parse", "HEAD"]);
        std::fs::write(p.join("a/b/c.txt"), "two\n").unwrap();
        git(p, &["commit", "-q", "-am", "2"]);
        let c2 = git(p, &["rev-parse", "HEAD"]);
        (d, c1, c2)
    }

    fn text(s: &GitSource, commit: &str, path: &str) -> Option<String> {
        s.get(commit.as_bytes(), path.as_bytes())
            .unwrap()
            .map(|v| String::from_utf8(v.data.clone()).unwrap())
    }

    #[test]
    fn a_commit_is_named_by_its_tree_id() {
        let (d, c1, c2) = repo();
        let s = GitSource::open(d.path().to_str().unwrap()).unwrap();
        let tree = git(d.path(), &["rev-parse", &format!("{c1}^{{tree}}")]);
        assert_eq!(
            s.tree_id(c1.as_bytes()).unwrap(),
            Some(format!("git tree {tree}"))
        );
        assert_ne!(
            s.tree_id(c2.as_bytes()).unwrap(),
            s.tree_id(c1.as_bytes()).unwrap()
        );
        // Not a commit of the repository, an abbreviation, uppercase, empty: no id.
        for none in [
            "0".repeat(40),
            c1[..12].to_string(),
            c1.to_uppercase(),
            String::new(),
        ] {
            assert_eq!(s.tree_id(none.as_bytes()).unwrap(), None, "{none:?}");
        }
    }

    #[test]
    fn paths_resolve_like_gix_lookup_and_ids_are_the_content_hash() {
        let (d, c1, c2) = repo();
        let s = GitSource::open(d.path().to_str().unwrap()).unwrap();
        assert_eq!(text(&s, &c1, "a/b/c.txt").as_deref(), Some("one\n"));
        assert_eq!(text(&s, &c2, "a/b/c.txt").as_deref(), Some("two\n"));
        // One name per file: no other spelling of it resolves.
        for none in [
            "a//b/c.txt",
            "a/./b/c.txt",
            "./a/b/c.txt",
            "a/b/c.txt/",
            "a/b",
            "a/b/",
            "/a/b/c.txt",
            "a/../a/b/c.txt",
            "a/same.txt/x",
            "",
            "x",
        ] {
            assert_eq!(text(&s, &c2, none), None, "{none:?}");
        }
        // Not a commit: a tree id, an unknown id, a short id.
        let tree = git(d.path(), &["rev-parse", "HEAD^{tree}"]);
        assert_eq!(text(&s, &tree, "a/same.txt"), None);
        assert_eq!(text(&s, &"0".repeat(40), "a/same.txt"), None);
        assert_eq!(text(&s, &c2[..12], "a/same.txt"), None);
        let v = s.get(c2.as_bytes(), b"a/b/c.txt").unwrap().unwrap();
        assert_eq!(v.id, BlobId::of(&v.data));
    }

    #[test]
    fn an_unchanged_blob_held_elsewhere_is_not_read_again() {
        let (d, c1, c2) = repo();
        let s = GitSource::open(d.path().to_str().unwrap()).unwrap();
        let a = s.get(c1.as_bytes(), b"a/same.txt").unwrap().unwrap();
        let b = s.get(c2.as_bytes(), b"a/same.txt").unwrap().unwrap();
        assert!(Arc::ptr_eq(&a, &b), "one version for one blob while held");
        drop((a, b));
        let c = s.get(c2.as_bytes(), b"a/same.txt").unwrap().unwrap();
        assert_eq!(c.data, b"same\n", "read again once nobody holds it");
    }
}
