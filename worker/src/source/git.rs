use std::sync::{Arc, Mutex};

use super::{plain_commit, FileVersion, Source, SourceError};

/// `git:PATH`: blobs read straight from the object database of a repository (bare or
/// not) with gix — no checkout, no `git` process per file.
pub struct GitSource {
    path: String,
    shared: gix::ThreadSafeRepository,
    /// Thread-local handles are cheap but not free (object caches): keep a few.
    pool: Mutex<Vec<gix::Repository>>,
}

impl GitSource {
    pub fn open(path: &str) -> Result<Self, SourceError> {
        let shared = gix::ThreadSafeRepository::open(path).map_err(|e| SourceError::Spec {
            spec: format!("git:{path}"),
            reason: e.to_string(),
        })?;
        Ok(GitSource {
            path: path.to_string(),
            shared,
            pool: Mutex::default(),
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
                let mut r = repo
                    .find_reference(b)
                    .or_else(|_| repo.find_reference(format!("refs/remotes/origin/{b}").as_str()))
                    .map_err(|e| self.io(format!("branch {b}"), e))?;
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

    fn lookup(
        &self,
        repo: &gix::Repository,
        commit: &str,
        path: &str,
    ) -> Result<Option<Vec<u8>>, SourceError> {
        let Ok(id) = gix::ObjectId::from_hex(commit.as_bytes()) else {
            return Ok(None);
        };
        let obj = repo
            .try_find_object(id)
            .map_err(|e| self.io(format!("object {commit}"), e))?;
        let Some(obj) = obj else { return Ok(None) };
        let Ok(commit_obj) = obj.try_into_commit() else {
            return Ok(None);
        };
        let tree = commit_obj
            .tree()
            .map_err(|e| self.io(format!("tree of {commit}"), e))?;
        let entry = tree
            .lookup_entry_by_path(path)
            .map_err(|e| self.io(format!("{commit}:{path}"), e))?;
        let Some(entry) = entry else { return Ok(None) };
        if !entry.mode().is_blob() {
            return Ok(None);
        }
        let blob = entry
            .object()
            .map_err(|e| self.io(format!("{commit}:{path}"), e))?;
        Ok(Some(blob.detach().data))
    }
}

impl Source for GitSource {
    fn get(&self, commit: &[u8], path: &[u8]) -> Result<Option<Arc<FileVersion>>, SourceError> {
        let Some(commit) = plain_commit(commit) else {
            return Ok(None);
        };
        let Ok(path) = std::str::from_utf8(path) else {
            return Ok(None);
        };
        let repo = self.pool.lock().unwrap().pop();
        let repo = repo.unwrap_or_else(|| self.shared.to_thread_local());
        let r = self.lookup(&repo, commit, path);
        self.pool.lock().unwrap().push(repo);
        Ok(r?.map(|d| Arc::new(FileVersion::new(d))))
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
            if e.mode.is_blob() {
                out.insert(e.filepath.to_string());
            }
        }
    }
    Ok(out)
}
