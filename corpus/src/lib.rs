//! `covmerge-corpus`: a deterministic synthetic corpus generator for
//! covmerge's tests and benchmarks.
//!
//! This crate owns everything needed to fabricate a realistic-looking
//! syzkaller coverage data set without a kernel checkout or a BigQuery
//! export: the same seed and [`CorpusSpec`] always produce byte-identical
//! output.
//!
//! [`generate`] writes, under an output directory:
//!
//! * `sources/<commit>/<file_path>` — every kernel-like C file present at
//!   every commit of a synthetic linear history (unchanged files are hard
//!   links to the previous commit's copy where the file system allows).
//! * `git.git/` — a bare git repository holding the same history on
//!   `refs/heads/master`, written with `git fast-import` using fixed
//!   identities and timestamps, so the 40-hex commit shas are deterministic
//!   (skipped with `no_git`, in which case fake deterministic 40-hex ids
//!   derived from the seed are used instead).
//! * `input-NN.csv.gz` (or `.csv` with `plain`) — coverage rows in the
//!   column layout of syzkaller's BigQuery export ([`HEADER`]), spread over
//!   `parts` files, shuffled across and within parts (or sorted by
//!   `file_path` within each part with `sorted`).
//! * `corpus.json` — a small description (base repo/commit, commits, input
//!   paths relative to the output directory, row count, ...) for scripts.
//!
//! ## The history
//! Commit 0 is the initial tree; every later commit edits ~20% of the files
//! (insert/delete/change statements, add or remove whole functions). The
//! last commit is the *base* commit. With at least 3 files and 2 commits,
//! one file is deleted before the base and one file exists only at the
//! base.
//!
//! ## The rows
//! Each of the `managers` (named like `ci-upstream-kasan-gce-0`) ran builds
//! of ~`manager_commit_share` of the commits (manager 0 always includes the
//! base). For each (manager, commit) and each file present at that commit
//! there is one row per instrumented line: a subset of ~`instrumented_share`
//! of the file's lines chosen by a hash of the path, function name, line
//! content and occurrence, so every commit instruments the same code.
//! `func_name` is the function containing the line in that commit's version
//! (empty outside functions), `sl`/`el` the 1-based line. Hit counts are
//! ~40% zeros and otherwise heavy-tailed (occasionally ~10^6 and more);
//! they are a hash of (manager, commit, file, line), so `sorted` and
//! shuffled corpora hold the same multiset of rows. ~0.5% of rows are
//! reported twice by the same build (their hits add up).
//!
//! Unless `no_edge_cases`, the inputs also hold a few rows with `sl=0`, rows
//! with `sl` past the end of the file, rows for a commit that exists nowhere,
//! rows for the file deleted before the base, and one repeated header line in
//! the middle of part 0 (not counted in [`Corpus::rows`]).
//!
//! With `days` (history mode, module `history`), the history has one commit a day
//! and the rows go per day to `day-DDD/input-NN.csv(.gz)` ([`Corpus::days`]).
//!
//! Rows are streamed: the generator holds the sources (as shared line ids),
//! never the rows, and compresses the parts on worker threads.
//!
//! (Long because the generator is one deterministic sequence: every step draws from
//! the same seeded PRNG in a fixed order, which a split into modules would obscure; the
//! C source text and the word tables are in `source/`.)

mod git;
mod history;
mod json;
mod rng;
mod rows;
mod source;

use std::fs;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use covmerge_proto::date::civil_from_days;
use rng::{hash_bytes, hex40, mix, Rng};
use rows::{Parts, RowFile, RowsInput, Session};
use source::{Arena, FileGen, Instr};

pub use history::Day;
pub use rows::{Columns, HEADER, REQUIRED_HEADER};

/// What to generate. Also usable as clap arguments (`#[command(flatten)]`).
#[derive(Debug, Clone, clap::Args)]
pub struct CorpusSpec {
    /// PRNG seed: same seed and spec give byte-identical output.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of distinct C source files over the history.
    #[arg(long, default_value_t = 20)]
    pub files: usize,
    /// Approximate lines per file.
    #[arg(long, default_value_t = 300)]
    pub lines: usize,
    /// Commits in the history; the last one is the base.
    #[arg(long, default_value_t = 8)]
    pub commits: usize,
    /// Number of syz-managers.
    #[arg(long, default_value_t = 4)]
    pub managers: usize,
    /// Each manager ran builds of ~this share of the commits.
    #[arg(long, default_value_t = 0.3)]
    pub manager_commit_share: f64,
    /// Share of a file's lines that get rows.
    #[arg(long, default_value_t = 0.3)]
    pub instrumented_share: f64,
    /// Number of input CSV parts.
    #[arg(long, default_value_t = 2)]
    pub parts: usize,
    /// Sort rows by file_path within each part (default: shuffled).
    #[arg(long)]
    pub sorted: bool,
    /// Write .csv instead of .csv.gz.
    #[arg(long)]
    pub plain: bool,
    /// Skip writing the git repository (fake commit ids are used).
    #[arg(long)]
    pub no_git: bool,
    /// Skip the edge-case rows.
    #[arg(long)]
    pub no_edge_cases: bool,
    /// Which columns the rows carry.
    #[arg(long, value_enum, default_value_t = Columns::Bigquery)]
    pub columns: Columns,
    /// gzip level of the parts (6 is gzip's and BigQuery's default).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(0..=9))]
    pub gzip_level: u32,
    /// History mode: this many days, one commit a day (`commits` is ignored), the
    /// last day's the base; the rows go per day to `day-DDD/input-NN.csv(.gz)`
    /// (0: the single-set mode above).
    #[arg(long, default_value_t = 0)]
    pub days: usize,
    /// History mode: share of the files each day's commit edits.
    #[arg(long, default_value_t = 0.02)]
    pub change_share: f64,
    /// History mode: besides the day's commit, each manager builds each of the
    /// previous this-many days' commits with probability `manager_commit_share`.
    #[arg(long, default_value_t = 3)]
    pub lag_days: usize,
    /// History mode: the last day's date (day 0 is `days - 1` days before).
    #[arg(long, default_value = "2024-09-30")]
    pub date_to: covmerge_proto::date::Date,
}

impl Default for CorpusSpec {
    fn default() -> Self {
        CorpusSpec {
            seed: 1,
            files: 20,
            lines: 300,
            commits: 8,
            managers: 4,
            manager_commit_share: 0.3,
            instrumented_share: 0.3,
            parts: 2,
            sorted: false,
            plain: false,
            no_git: false,
            no_edge_cases: false,
            columns: Columns::Bigquery,
            gzip_level: 6,
            days: 0,
            change_share: 0.02,
            lag_days: 3,
            date_to: history::DEFAULT_DATE_TO,
        }
    }
}

/// A generated corpus.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// The output directory.
    pub root: PathBuf,
    /// `root/sources`, laid out as `sources/<commit>/<file_path>`.
    pub sources: PathBuf,
    /// The bare git repository (`root/git.git`), `None` with `no_git`.
    pub git: Option<PathBuf>,
    /// The CSV(.gz) parts, in order.
    pub inputs: Vec<PathBuf>,
    /// The kernel repository named in every row.
    pub base_repo: String,
    /// The base commit (the last of `commits`).
    pub base_commit: String,
    /// All commit ids in history order, base last.
    pub commits: Vec<String>,
    /// Data rows written (header lines excluded).
    pub rows: u64,
    /// The file deleted before the base commit, if any (present at commit 0).
    pub deleted_file: Option<String>,
    /// The file that exists only at the base commit, if any.
    pub base_only_file: Option<String>,
    /// History mode: each day's commit and inputs, oldest first (empty otherwise;
    /// `inputs` then lists every day's inputs in day order).
    pub days: Vec<Day>,
}

/// Errors of [`generate`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The spec asks for something impossible (no files, no commits, ...).
    #[error("invalid corpus spec: {0}")]
    Spec(String),
    /// Writing a file of the corpus failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The write error.
        #[source]
        source: std::io::Error,
    },
    /// A git command building the corpus's repository failed.
    #[error("{command} failed ({status}): {stderr}")]
    Git {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it wrote to stderr.
        stderr: String,
    },
    /// A thread writing input parts panicked or stopped.
    #[error("a part writer thread failed")]
    Worker,
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The kernel repository used in every row.
pub const BASE_REPO: &str = "git://example.invalid/linux.git";

const MANAGER_NAMES: &[&str] = &[
    "ci-upstream-kasan-gce",
    "ci-upstream-kmsan-gce",
    "ci-upstream-gce-leak",
    "ci-upstream-kasan-gce-selinux-root",
    "ci-upstream-kasan-gce-smack-root",
    "ci-upstream-net-kasan-gce",
    "ci-qemu-upstream",
    "ci-upstream-linux-next-kasan-gce-root",
];

/// The history: per commit, per file, the version (shared when unchanged).
struct History {
    gens: Vec<FileGen>,
    arena: Arena,
    versions: Vec<Vec<Option<Rc<Vec<u32>>>>>,
    messages: Vec<String>,
    deleted: Option<usize>,
    base_only: Option<usize>,
}

#[cfg(test)]
fn build_history(spec: &CorpusSpec) -> History {
    build_history_with(spec, spec.commits, 0.2)
}

/// The history of `nc` commits, each after the first editing ~`share` of the files.
fn build_history_with(spec: &CorpusSpec, nc: usize, share: f64) -> History {
    let mut rng = Rng::new(spec.seed, 1);
    let mut gens = source::choose_paths(&mut rng, spec.files);
    let mut arena = Arena::default();
    let nf = spec.files;
    let special = nf >= 3 && nc >= 2;
    let (deleted, base_only) = if special {
        (Some(nf - 2), Some(nf - 1))
    } else {
        (None, None)
    };
    let del_commit = if nc >= 3 { rng.range(1, nc - 2) } else { 1 };

    let mut versions: Vec<Vec<Option<Rc<Vec<u32>>>>> = Vec::with_capacity(nc);
    let mut messages = Vec::with_capacity(nc);
    let first: Vec<Option<Rc<Vec<u32>>>> = (0..nf)
        .map(|f| {
            if Some(f) == base_only {
                None
            } else {
                Some(Rc::new(gens[f].initial(&mut rng, spec.lines, &mut arena)))
            }
        })
        .collect();
    versions.push(first);
    messages.push("Initial import of the synthetic tree".to_string());
    for c in 1..nc {
        let mut cur = versions[c - 1].clone();
        let present: Vec<usize> = (0..nf).filter(|&f| cur[f].is_some()).collect();
        let mut edited: Vec<usize> = present
            .iter()
            .copied()
            .filter(|_| rng.chance(share))
            .collect();
        if edited.is_empty() && !present.is_empty() {
            edited.push(*rng.pick(&present));
        }
        for &f in &edited {
            let old = cur[f].as_ref().expect("present").clone();
            cur[f] = Some(Rc::new(gens[f].edit(&mut rng, &old, &mut arena)));
        }
        let mut msg = match edited.first() {
            Some(&f) => {
                let dir = gens[f]
                    .path
                    .rsplit_once('/')
                    .map_or("", |(d, _)| d)
                    .to_string();
                format!("{dir}: update {} file(s)", edited.len())
            }
            None => "tree: update".to_string(),
        };
        if special && c == del_commit {
            let d = deleted.expect("special");
            cur[d] = None;
            msg.push_str(&format!("\n\nRemove {}.", gens[d].path));
        }
        if special && c == nc - 1 {
            let b = base_only.expect("special");
            cur[b] = Some(Rc::new(gens[b].initial(&mut rng, spec.lines, &mut arena)));
            msg.push_str(&format!("\n\nAdd {}.", gens[b].path));
        }
        versions.push(cur);
        messages.push(msg);
    }
    History {
        gens,
        arena,
        versions,
        messages,
        deleted,
        base_only,
    }
}

fn validate(spec: &CorpusSpec) -> Result<(), Error> {
    let bad = |m: &str| Err(Error::Spec(m.to_string()));
    if spec.files == 0 {
        return bad("files must be at least 1");
    }
    if spec.commits == 0 {
        return bad("commits must be at least 1");
    }
    if spec.managers == 0 {
        return bad("managers must be at least 1");
    }
    if spec.parts == 0 {
        return bad("parts must be at least 1");
    }
    if !(0.0..=1.0).contains(&spec.manager_commit_share) {
        return bad("manager_commit_share must be within 0..=1");
    }
    if !(0.0..=1.0).contains(&spec.instrumented_share) {
        return bad("instrumented_share must be within 0..=1");
    }
    history::validate(spec)
}

/// Removes what a previous run may have left in `out` (only our own names).
fn clean(out: &Path) -> Result<(), Error> {
    for d in ["sources", "git.git"] {
        let p = out.join(d);
        if p.exists() {
            fs::remove_dir_all(&p).map_err(|e| Error::io(&p, e))?;
        }
    }
    let rd = fs::read_dir(out).map_err(|e| Error::io(out, e))?;
    for ent in rd {
        let ent = ent.map_err(|e| Error::io(out, e))?;
        let name = ent.file_name().to_string_lossy().into_owned();
        if history::is_day_dir(&name) && ent.path().is_dir() {
            let p = ent.path();
            fs::remove_dir_all(&p).map_err(|e| Error::io(&p, e))?;
        } else if name == "corpus.json"
            || (name.starts_with("input-") && (name.ends_with(".csv") || name.ends_with(".csv.gz")))
        {
            let p = ent.path();
            fs::remove_file(&p).map_err(|e| Error::io(&p, e))?;
        }
    }
    Ok(())
}

fn write_sources(h: &History, commits: &[String], dir: &Path) -> Result<(), Error> {
    for (c, sha) in commits.iter().enumerate() {
        let cdir = dir.join(sha);
        for (f, v) in h.versions[c].iter().enumerate() {
            let Some(v) = v else { continue };
            let path = cdir.join(&h.gens[f].path);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
            if c > 0 {
                if let Some(prev) = &h.versions[c - 1][f] {
                    if Rc::ptr_eq(prev, v) {
                        let prev_path = dir.join(&commits[c - 1]).join(&h.gens[f].path);
                        if fs::hard_link(&prev_path, &path).is_ok() {
                            continue;
                        }
                    }
                }
            }
            fs::write(&path, h.arena.render(v)).map_err(|e| Error::io(&path, e))?;
        }
    }
    Ok(())
}

/// The history as git commits; `time(c)`: commit `c`'s Unix time.
fn git_commits<'a>(
    h: &'a History,
    time: impl Fn(usize) -> u64 + 'a,
) -> impl Iterator<Item = git::GitCommit<'a>> + 'a {
    (0..h.versions.len()).map(move |c| {
        let mut modified = Vec::new();
        let mut deleted = Vec::new();
        for (f, v) in h.versions[c].iter().enumerate() {
            let prev = if c == 0 {
                None
            } else {
                h.versions[c - 1][f].as_ref()
            };
            match (prev, v) {
                (Some(p), Some(v)) if Rc::ptr_eq(p, v) => {}
                (_, Some(v)) => modified.push((h.gens[f].path.as_str(), h.arena.render(v))),
                (Some(_), None) => deleted.push(h.gens[f].path.as_str()),
                (None, None) => {}
            }
        }
        git::GitCommit {
            message: h.messages[c].clone(),
            time: time(c),
            modified,
            deleted,
        }
    })
}

fn timestamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn manager_name(m: usize) -> String {
    format!("{}-{m}", MANAGER_NAMES[m % MANAGER_NAMES.len()])
}

fn session_prefix(seed: u64, columns: Columns, m: usize, c: usize, commit: &str) -> (Vec<u8>, u64) {
    let key = mix(mix(seed, 0x5E55_1000 + m as u64), c as u64);
    let secs = 1_717_200_000 + c as u64 * 3 * 86_400 + 86_400 + m as u64 * 3_600 + key % 3_600;
    (render_prefix(columns, m, secs, key, commit), key)
}

/// A session's rendered prefix (see [`Session`]): its build started at `secs`; `key`
/// picks the fuzzing minutes and build id.
fn render_prefix(columns: Columns, m: usize, secs: u64, key: u64, commit: &str) -> Vec<u8> {
    let minutes = 60 + (key >> 16) % 1_380;
    let build_id = hex40(mix(key, 0xB11D));
    let prefix = match columns {
        Columns::Bigquery => format!(
            "{},1,{minutes},amd64,{build_id},{},{BASE_REPO},master,{commit},",
            timestamp(secs),
            manager_name(m)
        ),
        Columns::Required => format!("{BASE_REPO},{commit},{},", manager_name(m)),
    };
    prefix.into_bytes()
}

/// Which commits each manager built.
fn choose_sessions(spec: &CorpusSpec, h: &History) -> Vec<Vec<usize>> {
    let mut rng = Rng::new(spec.seed, 3);
    let nc = spec.commits;
    let k = ((spec.manager_commit_share * nc as f64).round() as usize).clamp(1, nc);
    let mut out = Vec::with_capacity(spec.managers);
    for m in 0..spec.managers {
        let mut all: Vec<usize> = (0..nc).collect();
        rng.shuffle(&mut all);
        let mut chosen: Vec<usize> = all[..k].to_vec();
        if m == 0 && !chosen.contains(&(nc - 1)) {
            chosen[0] = nc - 1;
        }
        // Make sure some manager built a commit that still had the file
        // deleted before the base.
        let want_early = !spec.no_edge_cases && h.deleted.is_some();
        if want_early && m == spec.managers - 1 && !chosen.contains(&0) {
            // Replace a commit other than the base manager 0 must keep.
            match chosen.iter().position(|&c| m != 0 || c != nc - 1) {
                Some(i) => chosen[i] = 0,
                None => chosen.push(0),
            }
        }
        chosen.sort_unstable();
        chosen.dedup();
        out.push(chosen);
    }
    out
}

/// Manager `m`'s session of commit `c` (`commits[c]` or, past them, a commit that
/// exists nowhere): its rendered prefix and key.
type SessionOf<'a> = dyn Fn(usize, usize, &str) -> (Vec<u8>, u64) + 'a;

/// Pre-rendered edge-case rows: (file index, row line).
fn edge_rows(
    spec: &CorpusSpec,
    h: &History,
    files: &[RowFile],
    commits: &[String],
    session: &SessionOf<'_>,
) -> Vec<(usize, Vec<u8>)> {
    let mut rng = Rng::new(spec.seed, 4);
    let mut out = Vec::new();
    let nc = commits.len();
    let base = nc - 1;
    let mut names = Vec::new();
    let mut lines: Vec<Instr> = Vec::new();
    let push = |out: &mut Vec<(usize, Vec<u8>)>,
                rng: &mut Rng,
                c: usize,
                commit: &str,
                f: usize,
                func: &str,
                sl: u32,
                key: u64| {
        let m = rng.below(spec.managers);
        let (prefix, skey) = session(m, c, commit);
        let ins = Instr {
            sl,
            func: 0,
            sc: if sl == 0 { 0 } else { 1 },
            ec: if sl == 0 { 0 } else { 8 },
            key,
        };
        let hit = rows::hit_count(key, mix(skey, u64::from(sl) ^ 0xED6E));
        let mut buf = Vec::new();
        rows::render_row(
            &mut buf,
            spec.columns,
            &prefix,
            &files[f].path,
            func,
            &ins,
            hit,
            files[f].key,
        );
        out.push((f, buf));
    };
    let base_files: Vec<usize> = (0..files.len())
        .filter(|&f| h.versions[base][f].is_some())
        .collect();
    // sl = 0
    for _ in 0..3 {
        let f = *rng.pick(&base_files);
        let key = rng.next_u64();
        push(&mut out, &mut rng, base, &commits[base], f, "", 0, key);
    }
    // sl past the end of the file
    for _ in 0..3 {
        let f = *rng.pick(&base_files);
        let len = h.versions[base][f].as_ref().map_or(0, |v| v.len());
        let sl = (len + 1 + rng.below(50)) as u32;
        let key = rng.next_u64();
        let func = source::parse_funcs(h.versions[base][f].as_ref().expect("present"), &h.arena)
            .last()
            .map(|f| f.name.clone())
            .unwrap_or_default();
        push(&mut out, &mut rng, base, &commits[base], f, &func, sl, key);
    }
    // a commit that exists nowhere
    let mut unknown = hex40(mix(spec.seed, 0xBAD_C0DE));
    while commits.contains(&unknown) {
        unknown = hex40(mix(rng.next_u64(), 0xBAD_C0DE));
    }
    for _ in 0..3 {
        let f = *rng.pick(&base_files);
        let v = h.versions[base][f].as_ref().expect("present");
        instrumented(
            v,
            &h.arena,
            files[f].key,
            files[f].p,
            &mut names,
            &mut lines,
        );
        let (sl, func, key) = match lines.first() {
            Some(i) => (i.sl, names[i.func as usize].clone(), i.key),
            None => (1, String::new(), rng.next_u64()),
        };
        push(&mut out, &mut rng, nc, &unknown, f, &func, sl, key);
    }
    // the file deleted before the base, at commit 0
    if let Some(d) = h.deleted {
        let v = h.versions[0][d]
            .as_ref()
            .expect("deleted file exists at commit 0");
        instrumented(
            v,
            &h.arena,
            files[d].key,
            files[d].p,
            &mut names,
            &mut lines,
        );
        for i in 0..3 {
            let (sl, func, key) = match lines.get(i) {
                Some(l) => (l.sl, names[l.func as usize].clone(), l.key),
                None => (1 + i as u32, String::new(), rng.next_u64()),
            };
            push(&mut out, &mut rng, 0, &commits[0], d, &func, sl, key);
        }
    }
    out
}

use source::instrumented;

/// Every file as the row writer sees it (its instrumentation share from its first version).
fn row_files(spec: &CorpusSpec, h: &History) -> Vec<RowFile> {
    h.gens
        .iter()
        .enumerate()
        .map(|(f, g)| {
            let first = h
                .versions
                .iter()
                .find_map(|c| c[f].as_ref())
                .expect("every file exists somewhere");
            let ratio = source::code_ratio(first, &h.arena);
            RowFile {
                path: g.path.clone(),
                key: hash_bytes(spec.seed, g.path.as_bytes()),
                p: (spec.instrumented_share * ratio).min(1.0),
            }
        })
        .collect()
}

/// Generates the corpus described by `spec` into `out` (created if needed;
/// files of a previous run there are replaced).
pub fn generate(spec: &CorpusSpec, out: &Path) -> Result<Corpus, Error> {
    validate(spec)?;
    fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    clean(out)?;
    if spec.days > 0 {
        return history::generate(spec, out);
    }

    let h = build_history_with(spec, spec.commits, 0.2);

    let git_dir = out.join("git.git");
    let commits: Vec<String> = if spec.no_git {
        (0..spec.commits)
            .map(|c| hex40(mix(spec.seed, 0xC0FF_EE00 + c as u64)))
            .collect()
    } else {
        git::write_repo(
            &git_dir,
            git_commits(&h, |c| 1_717_200_000 + c as u64 * 3 * 86_400),
        )?
    };

    let sources = out.join("sources");
    write_sources(&h, &commits, &sources)?;

    let files = row_files(spec, &h);

    let mut sessions = Vec::new();
    for (m, cs) in choose_sessions(spec, &h).into_iter().enumerate() {
        for c in cs {
            let (prefix, key) = session_prefix(spec.seed, spec.columns, m, c, &commits[c]);
            sessions.push(Session {
                commit: c,
                prefix,
                key,
            });
        }
    }
    let edges = if spec.no_edge_cases {
        Vec::new()
    } else {
        edge_rows(spec, &h, &files, &commits, &|m, c, commit| {
            session_prefix(spec.seed, spec.columns, m, c, commit)
        })
    };

    let ext = if spec.plain { "csv" } else { "csv.gz" };
    let inputs: Vec<PathBuf> = (0..spec.parts)
        .map(|i| out.join(format!("input-{i:02}.{ext}")))
        .collect();
    let mut parts = Parts::create(&inputs, (!spec.plain).then_some(spec.gzip_level))?;
    let input = RowsInput {
        arena: &h.arena,
        files: &files,
        versions: &h.versions,
        sessions: &sessions,
        edges: &edges,
        sorted: spec.sorted,
        columns: spec.columns,
        repeat_header: !spec.no_edge_cases,
        seed: spec.seed,
    };
    let rows = match rows::write_rows(&input, &mut parts) {
        Ok(n) => n,
        Err(e) => {
            let _ = parts.finish();
            return Err(e);
        }
    };
    parts.finish()?;

    let corpus = Corpus {
        root: out.to_path_buf(),
        sources,
        git: if spec.no_git { None } else { Some(git_dir) },
        inputs,
        base_repo: BASE_REPO.to_string(),
        base_commit: commits.last().expect("at least one commit").clone(),
        commits,
        rows,
        deleted_file: h.deleted.map(|f| h.gens[f].path.clone()),
        base_only_file: h.base_only.map(|f| h.gens[f].path.clone()),
        days: Vec::new(),
    };
    json::write_json(spec, &corpus)?;
    Ok(corpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(timestamp(1_717_200_000), "2024-06-01 00:00:00 UTC");
        assert_eq!(timestamp(1_717_200_000 - 1), "2024-05-31 23:59:59 UTC");
    }

    #[test]
    fn history_has_special_files_and_parseable_functions() {
        let spec = CorpusSpec {
            files: 6,
            lines: 80,
            commits: 6,
            ..Default::default()
        };
        let h = build_history(&spec);
        let d = h.deleted.expect("deleted");
        let b = h.base_only.expect("base only");
        assert!(h.versions[0][d].is_some());
        assert!(h.versions[5][d].is_none());
        assert!(h.versions[5][b].is_some());
        assert!(h.versions[..5].iter().all(|c| c[b].is_none()));
        for c in &h.versions {
            for v in c.iter().flatten() {
                let funcs = source::parse_funcs(v, &h.arena);
                assert!(!funcs.is_empty());
                for f in &funcs {
                    assert_eq!(h.arena.get(v[f.end]), "}");
                }
            }
        }
    }
}
