//! Checks `covmerge diff` across bases on a real git history (the categories of contract §9): two periods of
//! coverage on two base commits OLD and NEW of one repository, each a history corpus
//! ([`covmerge_integration_tests::history`]) ending at its base, with its own managers
//! and instrumentation (variants 1 and 2: lines instrumented in one period only, lines
//! covered in one only), are merged with `covmerge merge --source git:REPO
//! --base-commit`, then compared with `covmerge diff OLD NEW --source git:REPO`.
//!
//! Checked, with a non-zero exit if any fails:
//! - per file, from the two results' `*` records (instrumented lines, lines with hits
//!   above 0) against the diff's categories (contract §9): OLD instrumented =
//!   CBC+LBC+GBC+UBC+ECB+EUB+DCB+DUB, NEW instrumented = CBC+LBC+GBC+UBC+GIC+UIC+GNC+UNC,
//!   OLD covered = CBC+LBC+ECB+DCB, NEW covered = CBC+GBC+GIC+GNC; a file the diff leaves
//!   out (all CBC/UBC) must have the same counts in both; the totals line must be the
//!   sum of every file's categories (a left-out file's CBC its NEW covered lines, its
//!   UBC the rest).
//!
//! Reported, not failed on (covmerge's line diff is imara-diff's histogram, which may
//! align repeated lines otherwise than git: `source/src/project.rs`): for a
//! deterministic sample of files present at both bases, each category's line numbers
//! against those derived from `git diff --histogram -U0 OLD NEW -- PATH` (an unchanged
//! line is CBC/LBC/GBC/UBC/ECB/EUB/GIC/UIC at its NEW number, an added one GNC/UNC, a
//! deleted one DCB/DUB at its OLD number): lines agreeing / lines checked and files
//! agreeing in full. Files absent at one base are left out of this comparison (renames
//! are not followed).
//!
//! ```sh
//! cargo build --workspace --bins
//! target/debug/covmerge-changes-check --repo /path/to/zlib.git --old v1.2.13 --new v1.3.1 \
//!     [--commits 20] [--managers 6] [--sample 50] [--work /tmp/changes-zlib]
//! target/debug/covmerge-changes-check --repo /path/to/curl.git --old curl-8_10_1 \
//!     --new curl-8_11_0 --exts .c,.h
//! ```
//!
//! Nothing fetched or built from the repository is written outside `--work`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use clap::Parser;
use covmerge_integration_tests::history::{build, git, HistorySpec, REPO_URL};
use covmerge_integration_tests::measure::{covmerge_beside_this_exe, measure, Usage};
use serde_json::Value;

#[derive(Parser, Debug)]
struct Args {
    /// The git repository (a bare git dir or a work tree).
    #[arg(long)]
    repo: PathBuf,
    /// OLD's base commit (any revision git resolves).
    #[arg(long)]
    old: String,
    /// NEW's base commit.
    #[arg(long)]
    new: String,
    /// First-parent commits in each period, its base included.
    #[arg(long, default_value_t = 20)]
    commits: usize,
    /// Managers per period (each ran ~30 % of the period's commits).
    #[arg(long, default_value_t = 6)]
    managers: usize,
    /// Files compared with `git diff --histogram`.
    #[arg(long, default_value_t = 50)]
    sample: usize,
    /// File name endings that are sources.
    #[arg(long, value_delimiter = ',', default_value = ".c,.h")]
    exts: Vec<String>,
    /// Working directory (corpora reused when built from the same settings).
    #[arg(long, default_value = "/tmp/covmerge-changes-check")]
    work: PathBuf,
    /// The covmerge binary (default: next to this one).
    #[arg(long)]
    covmerge: Option<PathBuf>,
}

/// The 12 categories, in the order of contract §9.
const CATS: [&str; 12] = [
    "CBC", "LBC", "GBC", "UBC", "ECB", "EUB", "GIC", "UIC", "GNC", "UNC", "DCB", "DUB",
];

fn output(mut c: Command) -> Vec<u8> {
    let o = c.output().expect("run git");
    assert!(
        o.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// A file's `*` record: instrumented lines and their hits.
#[derive(Default, Clone)]
struct Star {
    lines: Vec<u32>,
    hits: Vec<u64>,
}

impl Star {
    fn instrumented(&self) -> u64 {
        self.lines.len() as u64
    }
    fn covered(&self) -> u64 {
        self.hits.iter().filter(|&&h| h > 0).count() as u64
    }
    fn map(&self) -> HashMap<u32, bool> {
        self.lines
            .iter()
            .zip(&self.hits)
            .map(|(&l, &h)| (l, h > 0))
            .collect()
    }
}

/// The `*` records of a result, by path.
fn stars(result: &Path) -> BTreeMap<String, Star> {
    let f = std::fs::File::open(result).unwrap();
    let rd = BufReader::new(flate2::read::MultiGzDecoder::new(f));
    let mut out = BTreeMap::new();
    for line in rd.lines().skip(1) {
        let v: Value = serde_json::from_str(&line.unwrap()).expect("result line");
        let m = &v["MCR"];
        if m.is_null() || m["Manager"] != "*" {
            continue;
        }
        let d = &m["FileData"];
        let nums = |k: &str| -> Vec<u64> {
            d[k].as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect()
        };
        let star = Star {
            lines: nums("LinesInstrumented")
                .into_iter()
                .map(|l| l as u32)
                .collect(),
            hits: nums("HitCounts"),
        };
        out.insert(m["FilePath"].as_str().unwrap().to_string(), star);
    }
    out
}

/// One file line of the diff: category counts and lines.
#[derive(Default)]
struct FileCats {
    counts: BTreeMap<String, u64>,
    lines: BTreeMap<String, Vec<u32>>,
    old: (u64, u64),
    new: (u64, u64),
}

impl FileCats {
    fn n(&self, c: &str) -> u64 {
        self.counts.get(c).copied().unwrap_or(0)
    }
    fn sum(&self, cs: &[&str]) -> u64 {
        cs.iter().map(|c| self.n(c)).sum()
    }
}

fn pair(v: &Value) -> (u64, u64) {
    (
        v["instrumented"].as_u64().unwrap(),
        v["covered"].as_u64().unwrap(),
    )
}

/// The diff's file lines by path, and its totals' categories.
fn read_diff(path: &Path) -> (BTreeMap<String, FileCats>, BTreeMap<String, u64>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut files = BTreeMap::new();
    let mut totals = None;
    for line in text.lines().skip(1) {
        let v: Value = serde_json::from_str(line).expect("diff line");
        let counts = |c: &Value| -> BTreeMap<String, u64> {
            c.as_object()
                .unwrap()
                .iter()
                .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
                .collect()
        };
        if let Some(t) = v.get("totals") {
            totals = Some(counts(&t["categories"]));
            continue;
        }
        let lines = v["lines"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, ls)| {
                let ls = ls.as_array().unwrap();
                (
                    k.clone(),
                    ls.iter().map(|x| x.as_u64().unwrap() as u32).collect(),
                )
            })
            .collect();
        let f = FileCats {
            counts: counts(&v["categories"]),
            lines,
            old: pair(&v["old"]),
            new: pair(&v["new"]),
        };
        files.insert(v["file"].as_str().unwrap().to_string(), f);
    }
    (files, totals.expect("a totals line"))
}

/// Checks the four identities of every file; returns (files checked, problems).
fn identities(
    old: &BTreeMap<String, Star>,
    new: &BTreeMap<String, Star>,
    diff: &BTreeMap<String, FileCats>,
    totals: &BTreeMap<String, u64>,
) -> (usize, Vec<String>) {
    let mut problems = Vec::new();
    let mut sum: BTreeMap<String, u64> = BTreeMap::new();
    let paths: HashSet<&String> = old.keys().chain(new.keys()).collect();
    let empty = Star::default();
    for p in &paths {
        let (o, n) = (old.get(*p).unwrap_or(&empty), new.get(*p).unwrap_or(&empty));
        let Some(f) = diff.get(*p) else {
            // Left out: every line CBC or UBC, in both results.
            if !(old.contains_key(*p) && new.contains_key(*p))
                || o.instrumented() != n.instrumented()
                || o.covered() != n.covered()
            {
                problems.push(format!(
                    "{p}: not in the diff but OLD {}/{} NEW {}/{} (instrumented/covered)",
                    o.instrumented(),
                    o.covered(),
                    n.instrumented(),
                    n.covered()
                ));
            }
            *sum.entry("CBC".into()).or_default() += n.covered();
            *sum.entry("UBC".into()).or_default() += n.instrumented() - n.covered();
            continue;
        };
        for (c, k) in &f.counts {
            *sum.entry(c.clone()).or_default() += k;
            let listed = f.lines.get(c).map_or(0, Vec::len) as u64;
            if listed != *k {
                problems.push(format!("{p}: {c} counts {k}, lists {listed} lines"));
            }
        }
        let checks = [
            (
                "OLD instrumented",
                o.instrumented(),
                f.sum(&["CBC", "LBC", "GBC", "UBC", "ECB", "EUB", "DCB", "DUB"]),
            ),
            (
                "NEW instrumented",
                n.instrumented(),
                f.sum(&["CBC", "LBC", "GBC", "UBC", "GIC", "UIC", "GNC", "UNC"]),
            ),
            (
                "OLD covered",
                o.covered(),
                f.sum(&["CBC", "LBC", "ECB", "DCB"]),
            ),
            (
                "NEW covered",
                n.covered(),
                f.sum(&["CBC", "GBC", "GIC", "GNC"]),
            ),
            ("the line's old.instrumented", o.instrumented(), f.old.0),
            ("the line's old.covered", o.covered(), f.old.1),
            ("the line's new.instrumented", n.instrumented(), f.new.0),
            ("the line's new.covered", n.covered(), f.new.1),
        ];
        for (what, want, got) in checks {
            if want != got {
                problems.push(format!("{p}: {what}: results {want}, diff {got}"));
            }
        }
    }
    for c in CATS {
        let (s, t) = (
            sum.get(c).copied().unwrap_or(0),
            totals.get(c).copied().unwrap_or(0),
        );
        if s != t {
            problems.push(format!("totals: {c} is {t}, the files sum to {s}"));
        }
    }
    (paths.len(), problems)
}

/// The files of a commit (sources only), path → blob id.
fn tree(repo: &Path, commit: &str, exts: &[String]) -> HashMap<String, String> {
    let mut g = git(repo);
    g.args(["ls-tree", "-r", "--full-tree", commit]);
    String::from_utf8(output(g))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (meta, path) = l.split_once('\t')?;
            let f: Vec<&str> = meta.split(' ').collect();
            (f[1] == "blob" && f[0] != "120000" && exts.iter().any(|e| path.ends_with(e.as_str())))
                .then(|| (path.to_string(), f[2].to_string()))
        })
        .collect()
}

/// Lines of a blob (a last line without a newline counts).
fn line_count(repo: &Path, blob: &str) -> u32 {
    let mut g = git(repo);
    g.args(["cat-file", "blob", blob]);
    let b = output(g);
    let n = b.iter().filter(|&&c| c == b'\n').count();
    (n + usize::from(!b.is_empty() && !b.ends_with(b"\n"))) as u32
}

/// git's map of OLD's unchanged lines to NEW's (`git diff --histogram -U0`).
fn git_map(repo: &Path, old: &str, new: &str, path: &str, old_lines: u32) -> HashMap<u32, u32> {
    let mut g = git(repo);
    g.args([
        "diff",
        "--histogram",
        "-U0",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        old,
        new,
        "--",
        path,
    ]);
    let text = String::from_utf8_lossy(&output(g)).into_owned();
    let mut map = HashMap::new();
    let (mut o, mut n) = (1u32, 1u32);
    let range = |s: &str| -> (u32, u32) {
        match s.split_once(',') {
            Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
            None => (s.parse().unwrap(), 1),
        }
    };
    for l in text.lines().filter(|l| l.starts_with("@@ ")) {
        let mut f = l.split(' ');
        let (os, ol) = range(&f.nth(1).unwrap()[1..]);
        let (_, nl) = range(&f.next().unwrap()[1..]);
        // An empty old side is placed after line `os`; a non-empty one starts at it.
        let first_changed = if ol == 0 { os + 1 } else { os };
        while o < first_changed {
            map.insert(o, n);
            (o, n) = (o + 1, n + 1);
        }
        (o, n) = (o + ol, n + nl);
    }
    while o <= old_lines {
        map.insert(o, n);
        (o, n) = (o + 1, n + 1);
    }
    map
}

/// Each category's lines as git's line map puts them.
fn expected(map: &HashMap<u32, u32>, old: &Star, new: &Star) -> BTreeMap<&'static str, Vec<u32>> {
    let (om, nm) = (old.map(), new.map());
    let back: HashMap<u32, u32> = map.iter().map(|(&o, &n)| (n, o)).collect();
    let mut cats: BTreeMap<&'static str, Vec<u32>> = BTreeMap::new();
    let mut put = |c, l| cats.entry(c).or_default().push(l);
    for (&n, &nc) in &nm {
        let c = match back.get(&n).map(|o| om.get(o)) {
            Some(Some(&oc)) => match (oc, nc) {
                (true, true) => "CBC",
                (true, false) => "LBC",
                (false, true) => "GBC",
                (false, false) => "UBC",
            },
            Some(None) => ["UIC", "GIC"][usize::from(nc)],
            None => ["UNC", "GNC"][usize::from(nc)],
        };
        put(c, n);
    }
    for (&o, &oc) in &om {
        match map.get(&o) {
            Some(n) if nm.contains_key(n) => {}
            Some(n) => put(["EUB", "ECB"][usize::from(oc)], *n),
            None => put(["DUB", "DCB"][usize::from(oc)], o),
        }
    }
    for v in cats.values_mut() {
        v.sort_unstable();
    }
    cats
}

/// A stable hash of a path (FNV-1a), for the sample.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Outcome of the git comparison.
#[derive(Default)]
struct Agreement {
    files: usize,
    files_agreeing: usize,
    lines: u64,
    lines_agreeing: u64,
    examples: Vec<String>,
}

#[allow(clippy::too_many_arguments)]
fn compare_with_git(
    a: &Args,
    old_c: &str,
    new_c: &str,
    old: &BTreeMap<String, Star>,
    new: &BTreeMap<String, Star>,
    diff: &BTreeMap<String, FileCats>,
) -> Agreement {
    let (ot, nt) = (tree(&a.repo, old_c, &a.exts), tree(&a.repo, new_c, &a.exts));
    let mut candidates: Vec<&String> = old
        .keys()
        .chain(new.keys())
        .filter(|p| ot.contains_key(*p) && nt.contains_key(*p))
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    // Files whose text changed first (they are what the comparison is about), then
    // by hash: deterministic.
    candidates.sort_by_key(|p| (ot[*p] == nt[*p], fnv(p)));
    let empty = Star::default();
    let mut r = Agreement::default();
    for p in candidates.into_iter().take(a.sample) {
        let (o, n) = (old.get(p).unwrap_or(&empty), new.get(p).unwrap_or(&empty));
        let map = git_map(&a.repo, old_c, new_c, p, line_count(&a.repo, &ot[p]));
        let want = expected(&map, o, n);
        let got: BTreeMap<&str, Vec<u32>> = match diff.get(p) {
            Some(f) => CATS
                .iter()
                .filter_map(|&c| f.lines.get(c).map(|v| (c, v.clone())))
                .collect(),
            // Left out of the diff: NEW's lines are CBC or UBC.
            None => {
                let mut g: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
                for (&l, &h) in n.lines.iter().zip(&n.hits) {
                    g.entry(if h > 0 { "CBC" } else { "UBC" })
                        .or_default()
                        .push(l);
                }
                g
            }
        };
        let mut all_agree = true;
        for c in CATS {
            let w: HashSet<u32> = want.get(c).into_iter().flatten().copied().collect();
            let g: HashSet<u32> = got.get(c).into_iter().flatten().copied().collect();
            let same = w.intersection(&g).count() as u64;
            r.lines += w.len().max(g.len()) as u64;
            r.lines_agreeing += same;
            if w != g {
                all_agree = false;
                if r.examples.len() < 10 {
                    let mut only_git: Vec<_> = w.difference(&g).copied().collect();
                    let mut only_cm: Vec<_> = g.difference(&w).copied().collect();
                    only_git.sort_unstable();
                    only_cm.sort_unstable();
                    only_git.truncate(8);
                    only_cm.truncate(8);
                    r.examples.push(format!(
                        "{p} {c}: git only {only_git:?}, covmerge only {only_cm:?}"
                    ));
                }
            }
        }
        r.files += 1;
        r.files_agreeing += usize::from(all_agree);
    }
    r
}

fn merge(bin: &Path, repo: &Path, base: &str, inputs: &[PathBuf], out: &Path) -> Usage {
    let mut c = Command::new(bin);
    c.args(["merge", "--quiet", "--source"])
        .arg(format!("git:{}", repo.display()))
        .args(["--base-repo", REPO_URL, "--base-commit", base, "--out"])
        .arg(out)
        .arg("--input")
        .args(inputs)
        .stdout(std::process::Stdio::null());
    measure(&mut c)
}

fn main() {
    let a = Args::parse();
    let bin = a.covmerge.clone().unwrap_or_else(covmerge_beside_this_exe);
    let repo = std::fs::canonicalize(&a.repo).expect("--repo");
    std::fs::create_dir_all(&a.work).unwrap();
    let resolve = |rev: &str| -> String {
        let mut g = git(&repo);
        g.args(["rev-parse", "--verify", &format!("{rev}^{{commit}}")]);
        String::from_utf8(output(g)).unwrap().trim().to_string()
    };
    let (old_c, new_c) = (resolve(&a.old), resolve(&a.new));
    let between = {
        let mut g = git(&repo);
        g.args(["rev-list", "--count", &format!("{old_c}..{new_c}")]);
        String::from_utf8(output(g)).unwrap().trim().to_string()
    };
    let mut results = Vec::new();
    for (name, head, variant) in [("old", &old_c, 1), ("new", &new_c, 2)] {
        let mut spec = HistorySpec::new(repo.clone(), a.commits, a.exts.clone());
        spec.managers = a.managers;
        spec.head = head.clone();
        spec.variant = variant;
        spec.parts = 2;
        let t0 = Instant::now();
        let h = build(&spec, &a.work.join(format!("{name}-corpus")));
        let built = t0.elapsed().as_secs_f64();
        let out = a.work.join(format!("{name}.jsonl.gz"));
        let u = merge(&bin, &repo, &h.base_commit, &h.inputs, &out);
        eprintln!(
            "{name}: {} rows over {} commits to {} (corpus {built:.1} s), merged in {:.1} s, {:.0} MB",
            h.rows,
            a.commits,
            &head[..12],
            u.wall,
            u.max_rss_kb as f64 / 1024.0
        );
        results.push(out);
    }
    let diff_out = a.work.join("diff.jsonl");
    let mut c = Command::new(&bin);
    c.arg("diff")
        .args(&results)
        .arg("--source")
        .arg(format!("git:{}", repo.display()))
        .arg("--out")
        .arg(&diff_out);
    let d = measure(&mut c);
    let (old, new) = (stars(&results[0]), stars(&results[1]));
    let (diff, totals) = read_diff(&diff_out);
    let (checked, problems) = identities(&old, &new, &diff, &totals);
    let agree = compare_with_git(&a, &old_c, &new_c, &old, &new, &diff);

    println!(
        "## {} {}..{} ({between} commits apart; {} commits, {} managers a period)",
        repo.display(),
        a.old,
        a.new,
        a.commits,
        a.managers
    );
    println!();
    println!("| | files | {} |", CATS.join(" | "));
    println!("|---|---|{}", "---|".repeat(CATS.len()));
    let cells: Vec<String> = CATS
        .iter()
        .map(|c| totals.get(*c).copied().unwrap_or(0).to_string())
        .collect();
    println!(
        "| totals | {} listed of {checked} | {} |",
        diff.len(),
        cells.join(" | ")
    );
    println!();
    println!(
        "- diff: {:.1} s wall, {:.0} MB peak RSS",
        d.wall,
        d.max_rss_kb as f64 / 1024.0
    );
    println!(
        "- identities: {checked} files checked, {} problem(s)",
        problems.len()
    );
    println!(
        "- against `git diff --histogram`: {} of {} sampled files agree in full; {} of {} lines agree ({:.3} %)",
        agree.files_agreeing,
        agree.files,
        agree.lines_agreeing,
        agree.lines,
        100.0 * agree.lines_agreeing as f64 / agree.lines.max(1) as f64
    );
    for e in &agree.examples {
        println!("  - differs: {e}");
    }
    let missing: Vec<&str> = CATS
        .iter()
        .copied()
        .filter(|c| totals.get(*c).copied().unwrap_or(0) == 0)
        .collect();
    if !missing.is_empty() {
        println!("- categories with no line: {}", missing.join(" "));
    }
    for p in problems.iter().take(20) {
        eprintln!("identity broken: {p}");
    }
    if !problems.is_empty() {
        std::process::exit(1);
    }
}
