//! A benchmark corpus over a *real* git history: the last `commits` first-parent
//! commits of a repository (curl's, the kernel's, covmerge's own), the repository's
//! source files at each of them laid out for `dir:` (`sources/<commit>/<path>`, one
//! hard-linked copy per distinct blob), and coverage rows in the 7 required columns
//! for files of those commits, so that `git:REPO` and `dir:sources` can be merged
//! side by side on identical inputs and must give identical results.
//!
//! Rows: each of `managers` managers ran ~`share` of the commits (manager 0 always
//! the newest, the base); for each such (manager, commit) and each source file there
//! is one row per instrumented line, chosen by a hash of (path, line text,
//! occurrence) so that every commit instruments the same code; hit counts are ~40 %
//! zeros and otherwise a hash. The function name is the last line before it that
//! starts a C-like definition (an identifier at column 0 followed by `(`).
//! Everything is deterministic: the same repository and settings give the same bytes.
//!
//! A corpus may end at any commit (`head`, default `HEAD`), and its `variant` (0: the
//! above) changes what is instrumented and who ran it: with variant V, the managers are
//! `ci-history-vV-M`, ~10 % of lines (by a hash of V and the line's key) have their
//! instrumentation flipped and ~30 % are never hit (cold), so that two periods of one history differ as two kernel
//! configurations would (`covmerge-changes-check` needs lines instrumented in one period
//! only).
//!
//! The git CLI reads the history (`rev-list`, `ls-tree`, `cat-file --batch`): the
//! corpus does not depend on the code it benchmarks.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use flate2::{write::GzEncoder, Compression};

/// What to build.
#[derive(Debug, Clone)]
pub struct HistorySpec {
    /// The repository whose history is used.
    pub repo: PathBuf,
    /// First-parent commits of the history, newest (the base) included.
    pub commits: usize,
    /// Managers recording rows.
    pub managers: usize,
    /// Each manager ran ~this share of the commits.
    pub share: f64,
    /// Share of a file's lines with a row.
    pub instrumented: f64,
    /// Input parts written.
    pub parts: usize,
    /// File name endings that count as sources (`.c`, `.h`, `.rs`, ...).
    pub exts: Vec<String>,
    /// The newest commit (the base): a revision git resolves (`HEAD`, a tag, a hash).
    pub head: String,
    /// 0: the instrumentation and managers above; otherwise ~10 % of lines flipped,
    /// ~30 % cold and managers named `ci-history-vV-M`.
    pub variant: u64,
}

impl HistorySpec {
    /// `commits` commits of `repo` up to `HEAD`, variant 0, sources `exts`; the other
    /// settings are to be set by the caller.
    pub fn new(repo: PathBuf, commits: usize, exts: Vec<String>) -> Self {
        HistorySpec {
            repo,
            commits,
            managers: 4,
            share: 0.3,
            instrumented: 0.5,
            parts: 1,
            exts,
            head: "HEAD".into(),
            variant: 0,
        }
    }

    /// Whether a line (keyed by path, text and occurrence in the file) is instrumented.
    fn instruments(&self, path: &str, line: &[u8], occ: u32) -> bool {
        let base = unit(h64((path, line, occ))) < self.instrumented;
        let flip = self.variant != 0 && unit(h64((self.variant, path, line, occ))) < 0.1;
        base != flip
    }

    /// Whether no session of this variant ever hits the line.
    fn cold(&self, path: &str, line: &[u8], occ: u32) -> bool {
        self.variant != 0 && unit(h64((self.variant, path, line, occ, "cold"))) < 0.3
    }
}

/// A built corpus.
#[derive(Debug, Clone)]
pub struct HistoryCorpus {
    /// The `dir:` tree of every commit's files (`ROOT/<commit>/<path>`).
    pub sources: PathBuf,
    /// The gzip CSV input parts.
    pub inputs: Vec<PathBuf>,
    /// The newest commit: the base.
    pub base_commit: String,
    /// Data rows written.
    pub rows: u64,
    /// Distinct blobs laid out.
    pub blobs: usize,
    /// (file, commit) pairs laid out in the `dir:` tree.
    pub versions: usize,
}

/// The kernel repository named in the rows.
pub const REPO_URL: &str = "git://example.invalid/history.git";

/// `git` on the repository at `repo` (its `.git` if it has one, else `repo` itself:
/// a bare repository).
pub fn git(repo: &Path) -> Command {
    let mut c = Command::new("git");
    let dot_git = repo.join(".git");
    c.arg("--git-dir").arg(if dot_git.is_dir() {
        dot_git
    } else {
        repo.to_path_buf()
    });
    c
}

fn run(mut c: Command) -> String {
    let out = c.output().expect("run git");
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 git output")
}

fn h64(parts: impl Hash) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

fn unit(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// The name a C-like definition line starts, if it starts one.
fn definition(line: &[u8]) -> Option<&[u8]> {
    let first = *line.first()?;
    if !(first.is_ascii_alphabetic() || first == b'_') || line.ends_with(b";") {
        return None;
    }
    let paren = line.iter().position(|&b| b == b'(')?;
    let head = &line[..paren];
    let start = head
        .iter()
        .rposition(|&b| !(b.is_ascii_alphanumeric() || b == b'_'))
        .map_or(0, |i| i + 1);
    let name = &head[start..];
    (!name.is_empty() && !matches!(name, b"if" | b"for" | b"while" | b"switch" | b"return"))
        .then_some(name)
}

/// The last `spec.commits` first-parent commits up to `spec.head`, newest first.
fn first_parent_commits(spec: &HistorySpec) -> Vec<String> {
    run({
        let mut c = git(&spec.repo);
        c.args(["rev-list", "--first-parent", "-n"])
            .arg(spec.commits.to_string())
            .arg(&spec.head);
        c
    })
    .lines()
    .map(str::to_string)
    .collect()
}

/// The corpus `meta` describes, if it was built from `stamp` at `base`.
fn built_before(
    meta: &Path,
    stamp: &str,
    base: &str,
    sources: &Path,
    inputs: &[PathBuf],
) -> Option<HistoryCorpus> {
    let text = std::fs::read_to_string(meta).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).expect("history.json");
    (v["spec"] == stamp && v["base"] == base).then(|| HistoryCorpus {
        sources: sources.to_path_buf(),
        inputs: inputs.to_vec(),
        base_commit: base.to_string(),
        rows: v["rows"].as_u64().unwrap(),
        blobs: v["blobs"].as_u64().unwrap() as usize,
        versions: v["versions"].as_u64().unwrap() as usize,
    })
}

/// The source files (path, blob id) of commit `c`: blobs, no symlinks, ending in one
/// of `spec.exts`.
fn source_tree(spec: &HistorySpec, c: &str) -> Vec<(String, String)> {
    let listing = run({
        let mut g = git(&spec.repo);
        g.args(["ls-tree", "-r", "--full-tree", c]);
        g
    });
    listing
        .lines()
        .filter_map(|l| {
            let (meta, path) = l.split_once('\t')?;
            let mut f = meta.split(' ');
            let (mode, kind, id) = (f.next()?, f.next()?, f.next()?);
            (kind == "blob"
                && mode != "120000"
                && spec.exts.iter().any(|e| path.ends_with(e.as_str())))
            .then(|| (path.to_string(), id.to_string()))
        })
        .collect()
}

/// Every blob of `ids` (sorted, distinct) from one `cat-file --batch`, each written to
/// `blobs/ID` too.
fn read_blobs(spec: &HistorySpec, ids: &[&str], blobs: &Path) -> HashMap<String, Vec<u8>> {
    let mut cat = git(&spec.repo)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("git cat-file");
    let mut stdin = cat.stdin.take().unwrap();
    let owned: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    let feeder = std::thread::spawn(move || {
        for id in owned {
            writeln!(stdin, "{id}").unwrap();
        }
    });
    let mut rd = BufReader::new(cat.stdout.take().unwrap());
    let mut contents: HashMap<String, Vec<u8>> = HashMap::new();
    for id in ids {
        let mut head = String::new();
        rd.read_line(&mut head).unwrap();
        let size: usize = head.trim_end().rsplit(' ').next().unwrap().parse().unwrap();
        let mut data = vec![0u8; size + 1];
        rd.read_exact(&mut data).unwrap();
        data.truncate(size);
        std::fs::write(blobs.join(id), &data).unwrap();
        contents.insert(id.to_string(), data);
    }
    feeder.join().unwrap();
    assert!(cat.wait().unwrap().success());
    contents
}

/// Lays every commit's files out as `sources/<commit>/<path>`, hard links to
/// `blobs/ID` (copies where links fail); returns how many.
fn lay_out(
    sources: &Path,
    blobs: &Path,
    commits: &[String],
    trees: &[Vec<(String, String)>],
) -> usize {
    let mut versions = 0;
    for (c, files) in commits.iter().zip(trees) {
        for (path, id) in files {
            let dst = sources.join(c).join(path);
            std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
            let src = blobs.join(id);
            if std::fs::hard_link(&src, &dst).is_err() {
                std::fs::copy(&src, &dst).unwrap();
            }
            versions += 1;
        }
    }
    versions
}

/// One session's file: the rows of manager `m` (named `mgr`) at commit `ci` (`c`) for
/// `path` with text `data`, appended to `buf`; returns how many.
fn file_rows(
    spec: &HistorySpec,
    (m, mgr): (usize, &str),
    (ci, c): (usize, &str),
    path: &str,
    data: &[u8],
    buf: &mut Vec<u8>,
) -> u64 {
    let mut rows = 0;
    let mut func: &[u8] = b"";
    let mut seen: HashMap<&[u8], u32> = HashMap::new();
    let text = data.strip_suffix(b"\n").unwrap_or(data);
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if data.is_empty() {
            break;
        }
        if let Some(f) = definition(line) {
            func = f;
        }
        let occ = seen.entry(line).or_insert(0);
        *occ += 1;
        if !spec.instruments(path, line, *occ) {
            continue;
        }
        let r = h64((m, ci, path, i));
        let cold = spec.cold(path, line, *occ);
        let hits = if cold || r % 10 < 4 {
            0
        } else {
            (r >> 8) % 5000
        };
        let func = String::from_utf8_lossy(func);
        let func = if func.contains([',', '"']) { "" } else { &func };
        writeln!(buf, "{REPO_URL},{c},{mgr},{path},{func},{},{hits}", i + 1).unwrap();
        rows += 1;
    }
    rows
}

/// Writes the rows, per (manager, commit) session, each (session, file) group to one
/// of the `inputs`; returns how many.
fn write_rows(
    spec: &HistorySpec,
    commits: &[String],
    trees: &[Vec<(String, String)>],
    contents: &HashMap<String, Vec<u8>>,
    inputs: &[PathBuf],
) -> u64 {
    let mut parts: Vec<GzEncoder<std::io::BufWriter<std::fs::File>>> = inputs
        .iter()
        .map(|p| {
            let f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(p).unwrap());
            let mut e = GzEncoder::new(f, Compression::new(6));
            e.write_all(b"kernel_repo,kernel_commit,manager,file_path,func_name,sl,hit_count\n")
                .unwrap();
            e
        })
        .collect();
    let mut rows = 0u64;
    let mut buf = Vec::with_capacity(1 << 20);
    let n = commits.len();
    for m in 0..spec.managers {
        let mgr = match spec.variant {
            0 => format!("ci-history-{m}"),
            v => format!("ci-history-v{v}-{m}"),
        };
        for (ci, c) in commits.iter().enumerate() {
            let ran = (m == 0 && ci == n - 1) || unit(h64((m, ci, "session"))) < spec.share;
            if !ran {
                continue;
            }
            for (path, id) in &trees[ci] {
                rows += file_rows(spec, (m, &mgr), (ci, c), path, &contents[id], &mut buf);
                let part = (h64((m, ci, path)) % spec.parts as u64) as usize;
                parts[part].write_all(&buf).unwrap();
                buf.clear();
            }
        }
    }
    for p in parts {
        p.finish().unwrap().flush().unwrap();
    }
    rows
}

/// Builds the corpus under `out` (unless `out/history.json` says it is built from the
/// same settings) and returns it.
pub fn build(spec: &HistorySpec, out: &Path) -> HistoryCorpus {
    let stamp = format!("{spec:?}");
    let meta = out.join("history.json");
    let commits = first_parent_commits(spec);
    let base = commits.first().expect("a commit").clone();
    let inputs: Vec<PathBuf> = (0..spec.parts)
        .map(|p| out.join(format!("input-{p:02}.csv.gz")))
        .collect();
    let sources = out.join("sources");
    if let Some(corpus) = built_before(&meta, &stamp, &base, &sources, &inputs) {
        return corpus;
    }
    let _ = std::fs::remove_dir_all(out);
    let blobs = out.join("blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    // Oldest first: the base is the last commit of the history.
    let commits: Vec<String> = commits.into_iter().rev().collect();
    let trees: Vec<Vec<(String, String)>> = commits.iter().map(|c| source_tree(spec, c)).collect();
    // Every distinct blob once.
    let mut ids: Vec<&str> = trees.iter().flatten().map(|(_, id)| id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let contents = read_blobs(spec, &ids, &blobs);
    let versions = lay_out(&sources, &blobs, &commits, &trees);
    let rows = write_rows(spec, &commits, &trees, &contents, &inputs);
    let corpus = HistoryCorpus {
        sources,
        inputs,
        base_commit: base.clone(),
        rows,
        blobs: ids.len(),
        versions,
    };
    let json = serde_json::json!({
        "spec": stamp, "base": base, "rows": rows, "blobs": ids.len(), "versions": versions,
    });
    std::fs::write(&meta, json.to_string()).unwrap();
    corpus
}

#[cfg(test)]
mod tests {
    use super::definition;

    #[test]
    fn definitions_are_found() {
        assert_eq!(definition(b"static int foo(void)"), Some(&b"foo"[..]));
        assert_eq!(
            definition(b"CURLcode Curl_bar(struct x *y,"),
            Some(&b"Curl_bar"[..])
        );
        assert_eq!(definition(b"  if (x)"), None);
        assert_eq!(definition(b"int x(void);"), None);
        assert_eq!(definition(b"#define F(x)"), None);
    }
}
