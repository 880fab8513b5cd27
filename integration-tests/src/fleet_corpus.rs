//! A generated corpus as one job, the setup most end-to-end tests share: a temporary
//! directory, a corpus generated in it, the job's arguments (`dir:` source, base,
//! shards, date, inputs) and the embedded merge's result that a fleet's must equal.
//!
//! A test names only what it varies:
//!
//! ```ignore
//! let s = FleetCorpus::new(41).build();                  // the fleet lock is held
//! let s = FleetCorpus::new(77).lines(80).shards(4).build();
//! let c = FleetCorpus::local(27).git().files(40).build(); // no fleet, no reference merge
//! ```

use std::path::{Path, PathBuf};
use std::sync::MutexGuard;

use covmerge_corpus::{generate, Corpus, CorpusSpec};

use crate::{fleet, gunzip, merge_ok};

/// The `--date-to` of every job.
const DATE_TO: &str = "2024-04-08";

/// The knobs of a [`CorpusJob`], with defaults for a fleet test: 12 files of ~150
/// lines over 5 commits, 3 managers, 3 input parts, no git repository; 6 shards,
/// `--date-to 2024-04-08`; the fleet lock held and the embedded result computed.
#[derive(Debug, Clone)]
pub struct FleetCorpus {
    spec: CorpusSpec,
    shards: u32,
    lock: bool,
    /// The flags of the embedded merge [`CorpusJob::want`] is of (none: no such merge).
    reference: Option<Vec<String>>,
}

impl FleetCorpus {
    /// A corpus of `seed` for a fleet test: [`build`](Self::build) takes the fleet lock
    /// ([`fleet::lock`]) and computes the embedded result.
    pub fn new(seed: u64) -> FleetCorpus {
        FleetCorpus {
            spec: CorpusSpec {
                seed,
                files: 12,
                lines: 150,
                commits: 5,
                managers: 3,
                parts: 3,
                no_git: true,
                ..CorpusSpec::default()
            },
            shards: 6,
            lock: true,
            reference: Some(Vec::new()),
        }
    }

    /// A corpus of `seed` for a test without workers on the shared broker: no fleet
    /// lock and no embedded merge (the test runs its own merges).
    pub fn local(seed: u64) -> FleetCorpus {
        FleetCorpus {
            lock: false,
            reference: None,
            ..FleetCorpus::new(seed)
        }
    }

    /// Distinct source files over the history.
    pub fn files(mut self, n: usize) -> Self {
        self.spec.files = n;
        self
    }

    /// Approximate lines per file.
    pub fn lines(mut self, n: usize) -> Self {
        self.spec.lines = n;
        self
    }

    /// Commits of the history (the last is the base).
    pub fn commits(mut self, n: usize) -> Self {
        self.spec.commits = n;
        self
    }

    /// syz-managers of the rows.
    pub fn managers(mut self, n: usize) -> Self {
        self.spec.managers = n;
        self
    }

    /// Input CSV parts.
    pub fn parts(mut self, n: usize) -> Self {
        self.spec.parts = n;
        self
    }

    /// Each manager ran builds of about this share of the commits.
    pub fn manager_commit_share(mut self, share: f64) -> Self {
        self.spec.manager_commit_share = share;
        self
    }

    /// Leaves out the generator's edge-case rows.
    pub fn no_edge_cases(mut self) -> Self {
        self.spec.no_edge_cases = true;
        self
    }

    /// Writes the history as a git repository too ([`CorpusJob::git_source`]).
    pub fn git(mut self) -> Self {
        self.spec.no_git = false;
        self
    }

    /// Any other knob of the generator.
    pub fn spec(mut self, f: impl FnOnce(&mut CorpusSpec)) -> Self {
        f(&mut self.spec);
        self
    }

    /// The job's `--shards`.
    pub fn shards(mut self, n: u32) -> Self {
        self.shards = n;
        self
    }

    /// Merges the reference ([`CorpusJob::want`]) with these flags too.
    pub fn reference_flags(mut self, flags: &[&str]) -> Self {
        self.reference = Some(flags.iter().map(|f| f.to_string()).collect());
        self
    }

    /// Takes no fleet lock: the test's workers are on a vhost of its own.
    pub fn unlocked(mut self) -> Self {
        self.lock = false;
        self
    }

    /// Generates the corpus in a new temporary directory (under the fleet lock unless
    /// [`unlocked`](Self::unlocked) or [`local`](Self::local)) and merges it embedded.
    pub fn build(self) -> CorpusJob {
        let lock = self.lock.then(fleet::lock);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let mut job = self.build_in(&dir, "corpus");
        job._tmp = Some(tmp);
        job._lock = lock;
        job
    }

    fn build_in(self, dir: &Path, name: &str) -> CorpusJob {
        let corpus = generate(&self.spec, &dir.join(name)).unwrap();
        let mut job = CorpusJob {
            source: format!("dir:{}", corpus.sources.display()),
            inputs: corpus
                .inputs
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            corpus,
            want: Vec::new(),
            shards: self.shards.to_string(),
            knobs: self,
            dir: dir.to_path_buf(),
            _tmp: None,
            _lock: None,
        };
        if let Some(flags) = &job.knobs.reference {
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            job.want = job.embedded(&format!("embedded-{name}.jsonl.gz"), &flags);
        }
        job
    }
}

/// A generated corpus and its job (see [`FleetCorpus`]). Dropping it deletes the
/// directory and then releases the fleet lock.
#[derive(Debug)]
pub struct CorpusJob {
    /// The generated corpus.
    pub corpus: Corpus,
    /// `dir:` of the corpus' source trees.
    pub source: String,
    /// The corpus' input parts, as arguments.
    pub inputs: Vec<String>,
    /// The embedded merge's decompressed result (empty for [`FleetCorpus::local`]).
    pub want: Vec<u8>,
    shards: String,
    knobs: FleetCorpus,
    dir: PathBuf,
    // Last: the directory goes, then the lock.
    _tmp: Option<tempfile::TempDir>,
    _lock: Option<MutexGuard<'static, ()>>,
}

impl CorpusJob {
    /// The test's directory (the corpus is in `corpus/` below it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The corpus' seed.
    pub fn seed(&self) -> u64 {
        self.knobs.spec.seed
    }

    /// `name` in [`dir`](Self::dir).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A `file://` store in `dir/store` (not created).
    pub fn file_store(&self) -> String {
        format!("file://{}", self.path("store").display())
    }

    /// `git:` of the corpus' repository (built with [`FleetCorpus::git`]).
    pub fn git_source(&self) -> String {
        let git = self.corpus.git.as_ref().expect("a corpus with git");
        format!("git:{}", git.display())
    }

    /// The job's arguments: source, base, shards, date, then `--input` and the parts.
    pub fn job_args(&self) -> Vec<&str> {
        self.job_args_with(&self.source, &self.inputs)
    }

    /// [`job_args`](Self::job_args) with another source and other inputs.
    pub fn job_args_with<'a>(&'a self, source: &'a str, inputs: &'a [String]) -> Vec<&'a str> {
        let mut a = vec![
            "--source",
            source,
            "--base-repo",
            &self.corpus.base_repo,
            "--base-commit",
            &self.corpus.base_commit,
            "--shards",
            &self.shards,
            "--date-to",
            DATE_TO,
            "--input",
        ];
        a.extend(inputs.iter().map(String::as_str));
        a
    }

    /// A coordinator's arguments: the job's, then the broker, the store and the result.
    pub fn coord_args<'a>(&'a self, amqp: &'a str, store: &'a str, out: &'a Path) -> Vec<&'a str> {
        let mut a = self.job_args();
        let out = out.to_str().unwrap();
        a.extend_from_slice(&["--amqp", amqp, "--store", store, "--out", out]);
        a
    }

    /// Merges the job embedded with `extra` flags into `dir/name`; returns the result
    /// decompressed.
    pub fn embedded(&self, name: &str, extra: &[&str]) -> Vec<u8> {
        let out = self.path(name);
        let mut a = self.job_args();
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--out", out.to_str().unwrap()]);
        merge_ok(&a);
        gunzip(&out)
    }

    /// Merges one input part onto another `base` commit from `source` into `out` (no
    /// `--shards`).
    pub fn merge_onto(&self, source: &str, input: &Path, base: &str, out: &Path) {
        merge_ok(&[
            "--source",
            source,
            "--base-repo",
            &self.corpus.base_repo,
            "--base-commit",
            base,
            "--date-to",
            DATE_TO,
            "--input",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
    }

    /// Another corpus, of `seed`, with the same knobs, in the same directory (under
    /// this one's lock).
    pub fn sibling(&self, seed: u64) -> CorpusJob {
        let mut knobs = self.knobs.clone();
        knobs.spec.seed = seed;
        knobs.build_in(&self.dir, &format!("corpus-{seed}"))
    }
}
