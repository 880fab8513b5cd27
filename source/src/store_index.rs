//! The commit indexes a `store:` source holds, within a byte budget.
//!
//! A commit's index names a blob for each of its paths; consecutive commits share
//! almost all their paths and most of their blobs. Held as a map of strings per commit,
//! 101 indexes of 50,000 paths took 899 MB. Here each path and each blob id is held
//! once for all commits, and a commit's index is a sorted vector of (path, blob)
//! numbers: 8 bytes a path. Past the budget the least recently used indexes are
//! dropped (read again when needed); when the shared tables alone outgrow 3/4 of the
//! budget, everything is dropped and the tables start again. The most recent index
//! is always kept, however large.

use std::sync::Arc;

use rustc_hash::FxHashMap;

/// What a path costs in the shared table besides its bytes (the box, the map's slot,
/// the allocator's header).
const PATH_COST: usize = 48;
/// What a blob id costs in the shared tables besides its bytes.
const BLOB_COST: usize = 64;
/// What a commit's entry costs besides its index.
const COMMIT_COST: usize = 96;

/// One commit's paths: (path number, blob number), sorted by path number.
struct CommitIndex(Box<[(u32, u32)]>);

/// The indexes held, and the tables they share.
pub(crate) struct Indexes {
    budget: usize,
    paths: FxHashMap<Box<str>, u32>,
    paths_bytes: usize,
    blobs: Vec<Arc<str>>,
    blob_ids: FxHashMap<Arc<str>, u32>,
    /// commit → (its index, `None` when it has none; when it was last used).
    commits: FxHashMap<String, (Option<CommitIndex>, u64)>,
    commits_bytes: usize,
    tick: u64,
}

/// A lookup of a path in a commit's index.
pub(crate) enum Lookup {
    /// The commit's index is not held: read it and [`Indexes::add`] it.
    NotHeld,
    /// The commit has no index.
    NoCommit,
    /// The commit's index does not name the path.
    NoPath,
    /// The blob id of the path at the commit.
    Blob(Arc<str>),
}

impl Indexes {
    pub(crate) fn new(budget: usize) -> Self {
        Indexes {
            budget,
            paths: FxHashMap::default(),
            paths_bytes: 0,
            blobs: Vec::new(),
            blob_ids: FxHashMap::default(),
            commits: FxHashMap::default(),
            commits_bytes: 0,
            tick: 0,
        }
    }

    /// Bytes held, estimated.
    pub(crate) fn bytes(&self) -> usize {
        self.paths_bytes + self.blobs.len() * (BLOB_COST + 40) + self.commits_bytes
    }

    /// Commits held (with or without an index).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.commits.len()
    }

    /// Whether `commit` has an index, if known.
    pub(crate) fn has(&mut self, commit: &str) -> Option<bool> {
        self.tick += 1;
        let tick = self.tick;
        self.commits.get_mut(commit).map(|e| {
            e.1 = tick;
            e.0.is_some()
        })
    }

    pub(crate) fn lookup(&mut self, commit: &str, path: &str) -> Lookup {
        self.tick += 1;
        let Some(entry) = self.commits.get_mut(commit) else {
            return Lookup::NotHeld;
        };
        entry.1 = self.tick;
        let Some(idx) = &entry.0 else {
            return Lookup::NoCommit;
        };
        let Some(&p) = self.paths.get(path) else {
            return Lookup::NoPath;
        };
        match idx.0.binary_search_by_key(&p, |e| e.0) {
            Ok(i) => Lookup::Blob(self.blobs[idx.0[i].1 as usize].clone()),
            Err(_) => Lookup::NoPath,
        }
    }

    /// Holds `commit`'s index, read as `text` (`None`: the commit has none): lines of
    /// `<blob id> <path>`; a later line for a path wins.
    pub(crate) fn add(&mut self, commit: &str, text: Option<&[u8]>) {
        if let Some(old) = self.commits.remove(commit) {
            self.commits_bytes -= Self::cost(commit, &old.0);
        }
        if self.paths_bytes + self.blobs.len() * (BLOB_COST + 40) > self.budget / 4 * 3 {
            self.clear();
        }
        let index = text.map(|b| {
            let text = String::from_utf8_lossy(b);
            let mut entries: Vec<(u32, u32)> = Vec::new();
            for (id, path) in text.lines().filter_map(|l| l.split_once(' ')) {
                let p = match self.paths.get(path) {
                    Some(&p) => p,
                    None => {
                        let p = self.paths.len() as u32;
                        self.paths.insert(path.into(), p);
                        self.paths_bytes += path.len() + PATH_COST;
                        p
                    }
                };
                let b = match self.blob_ids.get(id) {
                    Some(&b) => b,
                    None => {
                        let b = self.blobs.len() as u32;
                        let id: Arc<str> = id.into();
                        self.blobs.push(id.clone());
                        self.blob_ids.insert(id, b);
                        b
                    }
                };
                entries.push((p, b));
            }
            // Stable: of several lines for a path, the last one is kept.
            entries.sort_by_key(|e| e.0);
            let mut kept: Vec<(u32, u32)> = Vec::with_capacity(entries.len());
            for e in entries {
                match kept.last_mut() {
                    Some(last) if last.0 == e.0 => *last = e,
                    _ => kept.push(e),
                }
            }
            CommitIndex(kept.into_boxed_slice())
        });
        self.tick += 1;
        let index = (index, self.tick);
        self.commits_bytes += Self::cost(commit, &index.0);
        self.commits.insert(commit.to_string(), index);
        self.evict(commit);
    }

    /// Drops the commits found without an index.
    pub(crate) fn forget_absent(&mut self) {
        let mut freed = 0;
        self.commits.retain(|c, (idx, _)| {
            if idx.is_none() {
                freed += c.len() + COMMIT_COST;
            }
            idx.is_some()
        });
        self.commits_bytes -= freed;
    }

    fn cost(commit: &str, index: &Option<CommitIndex>) -> usize {
        commit.len() + COMMIT_COST + index.as_ref().map_or(0, |i| i.0.len() * 8)
    }

    /// Drops the least recently used commits but `keep` until within the budget.
    fn evict(&mut self, keep: &str) {
        while self.bytes() > self.budget && self.commits.len() > 1 {
            let oldest = self
                .commits
                .iter()
                .filter(|(c, _)| c.as_str() != keep)
                .min_by_key(|(_, e)| e.1)
                .map(|(c, _)| c.clone());
            let Some(c) = oldest else { break };
            let e = self.commits.remove(&c).expect("present");
            self.commits_bytes -= Self::cost(&c, &e.0);
        }
    }

    fn clear(&mut self) {
        self.paths = FxHashMap::default();
        self.paths_bytes = 0;
        self.blobs = Vec::new();
        self.blob_ids = FxHashMap::default();
        self.commits = FxHashMap::default();
        self.commits_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` paths at commit `version`: a tenth of them changed since the first.
    fn index(n: usize, version: usize) -> String {
        (0..n)
            .map(|i| {
                let blob = if i % 10 == version % 10 {
                    i * 1000 + version
                } else {
                    i * 1000
                };
                format!("{blob:040x} src/dir{}/file{i}.c\n", i % 7)
            })
            .collect()
    }

    fn blob(l: Lookup) -> Option<String> {
        match l {
            Lookup::Blob(b) => Some(b.to_string()),
            _ => None,
        }
    }

    #[test]
    fn lookups_find_the_last_line_of_a_path() {
        let mut ix = Indexes::new(1 << 20);
        assert!(matches!(ix.lookup("c1", "a.c"), Lookup::NotHeld));
        ix.add("c1", Some(b"b1 a.c\nb2 sub/b.c\r\nbroken\nb3 a.c\n"));
        ix.add("c0", None);
        assert_eq!(blob(ix.lookup("c1", "a.c")).as_deref(), Some("b3"));
        assert_eq!(blob(ix.lookup("c1", "sub/b.c")).as_deref(), Some("b2"));
        assert!(matches!(ix.lookup("c1", "c.c"), Lookup::NoPath));
        assert!(matches!(ix.lookup("c0", "a.c"), Lookup::NoCommit));
        assert_eq!(ix.has("c0"), Some(false));
        ix.forget_absent();
        assert_eq!(ix.has("c0"), None);
        assert_eq!(ix.has("c1"), Some(true));
    }

    /// 101 indexes of 50,000 paths were held whole, as strings: 899 MB.
    #[test]
    fn many_commit_indexes_stay_within_the_budget() {
        let budget = 8 << 20;
        let mut ix = Indexes::new(budget);
        for c in 0..101 {
            let commit = format!("{c:040x}");
            ix.add(&commit, Some(index(20_000, c).as_bytes()));
            assert!(ix.bytes() <= budget, "{} after {c}", ix.bytes());
            // The newest is always held and right.
            let want = format!("{:040x}", 5 * 1000 + if c % 10 == 5 { c } else { 0 });
            assert_eq!(blob(ix.lookup(&commit, "src/dir5/file5.c")), Some(want));
        }
        assert!(ix.held() < 101 && ix.held() > 1, "{}", ix.held());
    }

    #[test]
    fn an_index_larger_than_the_budget_is_still_held_alone() {
        let mut ix = Indexes::new(64 << 10);
        ix.add("a", Some(index(5_000, 1).as_bytes()));
        ix.add("b", Some(index(5_000, 2).as_bytes()));
        assert_eq!(ix.held(), 1);
        assert!(blob(ix.lookup("b", "src/dir1/file8.c")).is_some());
        assert!(matches!(
            ix.lookup("a", "src/dir1/file8.c"),
            Lookup::NotHeld
        ));
    }
}
