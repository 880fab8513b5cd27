//! Memory shapes: inputs that grow a dimension other than rows (managers, distinct
//! paths, lines per file, base file size, commits of one file, commits of a `store:`
//! snapshot, lines of two versions of one file (capped and diffed), function names
//! on one line, distinct paths in path order at a small budget, managers of one
//! long file). Each shape is merged
//! at 1× and 2× its size; one row per run with rows, wall, CPU, peak RSS, the passes
//! of the shards merged in more than one (from the merge's log), and the time and RSS
//! at 2× over 1×, so that a dimension that grows memory or time faster than linearly
//! shows.
//!
//! ```sh
//! cargo build --release --workspace
//! target/release/covmerge-shapes-bench [--scale 1.0] [--shapes last-line,managers] [-- extra merge flags]
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use covmerge_integration_tests::measure::{covmerge_beside_this_exe, measure, Usage};
use covmerge_integration_tests::shapes::{store_snapshot, HDR};

#[derive(Parser, Debug)]
struct Args {
    /// Where the inputs are generated.
    #[arg(long, default_value = "/tmp/covmerge-shapes")]
    dir: PathBuf,
    /// Multiplies every shape's size (1.0: the sizes below).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Only these shapes (default: all).
    #[arg(long, value_delimiter = ',')]
    shapes: Vec<String>,
    /// The covmerge binary (default: next to this one).
    #[arg(long)]
    covmerge: Option<PathBuf>,
    /// Extra flags for `covmerge merge`.
    #[arg(last = true)]
    extra: Vec<String>,
}

/// One generated case: a source, its base commit and an input.
struct Case {
    source: String,
    base: String,
    input: PathBuf,
    rows: u64,
}

fn write_source(root: &Path, commit: &str, path: &str, lines: usize, width: usize) {
    let p = root.join(commit).join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let mut t = String::with_capacity(lines * (width + 1));
    for i in 0..lines {
        let l = format!("x{i}");
        t.push_str(&l);
        for _ in l.len()..width {
            t.push(' ');
        }
        t.push('\n');
    }
    std::fs::write(p, t).unwrap();
}

/// An input's CSV text being written, and its rows.
struct Rows {
    text: String,
    n: u64,
}

impl Rows {
    /// A row of function `fn`.
    fn row(&mut self, commit: &str, file: &str, mgr: &str, line: usize, hits: u64) {
        self.row_of("fn", commit, file, mgr, line, hits);
    }

    /// A row of function `func`.
    fn row_of(&mut self, func: &str, commit: &str, file: &str, mgr: &str, line: usize, hits: u64) {
        writeln!(self.text, "r,{commit},{file},{func},{mgr},{line},{hits}").unwrap();
        self.n += 1;
    }
}

/// One file of n lines; one manager hits every line, n/16 managers the last.
fn last_line(src: &Path, n: usize, r: &mut Rows) {
    write_source(src, "base", "a.c", n, 8);
    for l in 1..=n {
        r.row("base", "a.c", "all", l, 1);
    }
    for m in 0..n / 16 {
        r.row("base", "a.c", &format!("m{m}"), n, 1);
    }
}

/// n managers × 30 files of 200 lines, one row per (manager, file).
fn managers(src: &Path, n: usize, r: &mut Rows) {
    for f in 0..30 {
        write_source(src, "base", &format!("f{f}.c"), 200, 8);
    }
    for m in 0..n {
        for f in 0..30 {
            r.row(
                "base",
                &format!("f{f}.c"),
                &format!("m{m}"),
                1 + (m * 7 + f * 13) % 200,
                1,
            );
        }
    }
}

/// n distinct paths, one row each (no source file: deleted at the base), and one
/// file that exists.
fn paths(src: &Path, n: usize, r: &mut Rows) {
    write_source(src, "base", "keep.c", 10, 8);
    r.row("base", "keep.c", "m", 1, 1);
    for p in 0..n {
        r.row("base", &format!("d{}/p{p}.c", p % 1000), "m", 1, 1);
    }
}

/// n base files of 120 KB, 10 rows each.
fn base_files(src: &Path, n: usize, r: &mut Rows) {
    for f in 0..n {
        write_source(src, "base", &format!("f{f}.c"), 3_000, 40);
        for l in 0..10 {
            r.row("base", &format!("f{f}.c"), "m", 1 + l * 300, 1);
        }
    }
}

/// n commits of one 20,000-line file (each with one line changed), 5 rows each.
fn commits(src: &Path, n: usize, r: &mut Rows) {
    write_source(src, "base", "a.c", 20_000, 8);
    for c in 0..n {
        let commit = format!("c{c}");
        write_source(src, &commit, "a.c", 20_000, 8);
        let p = src.join(&commit).join("a.c");
        let mut text = std::fs::read_to_string(&p).unwrap();
        let at = (c * 97 % 19_000) * 9;
        text.replace_range(at..at + 1, "y");
        std::fs::write(&p, text).unwrap();
        for l in 0..5 {
            r.row(&commit, "a.c", "m", 1 + l * 4_000, 1);
        }
    }
}

/// Two versions of an n-line file, every 100th line changed; a row every 1,000 lines
/// of the newer one. `long-file` is sized to be capped at the default budget,
/// `long-file-diffed` to be diffed (every run of unchanged lines as long: the first is
/// taken, the worst case of a histogram diff that rescans the rest of the file after
/// each run it takes).
fn long_file(src: &Path, n: usize, r: &mut Rows) {
    write_source(src, "base", "a.c", n, 8);
    write_source(src, "c1", "a.c", n, 8);
    let p = src.join("c1").join("a.c");
    let mut text = std::fs::read(&p).unwrap();
    for l in (0..n).step_by(100) {
        text[l * 9] = b'y';
    }
    std::fs::write(&p, text).unwrap();
    // Line 2 on: the rows land on unchanged lines (every 100th from 1 changed).
    for l in (2..=n).step_by(1_000) {
        r.row("c1", "a.c", "m", l, 1);
    }
}

/// n distinct paths in path order, one row each (deleted at the base), and one file
/// that exists: run at a small budget (see `SHAPES`), so that the shard is merged in
/// passes over ranges of its paths, each having seen only the first paths of its
/// range when it outgrew its share.
fn sorted_paths(src: &Path, n: usize, r: &mut Rows) {
    for p in 0..n {
        r.row("base", &format!("d{:04}/p{p:08}.c", p / 1000), "m", 1, 1);
    }
    write_source(src, "base", "keep.c", 10, 8);
    r.row("base", "keep.c", "m", 1, 1);
}

/// One file of 100,000 lines, each hit by every one of n managers: the file's own
/// records (its per-manager sums and its part) grow with n.
fn file_managers(src: &Path, n: usize, r: &mut Rows) {
    let lines = 100_000;
    write_source(src, "base", "a.c", lines, 8);
    for m in 0..n {
        for l in 1..=lines {
            r.row(
                "base",
                "a.c",
                &format!("manager-{m}"),
                l,
                1 + (l % 7) as u64,
            );
        }
    }
}

/// n distinct function names on one line of one file.
fn func_names(src: &Path, n: usize, r: &mut Rows) {
    write_source(src, "base", "a.c", 10, 8);
    for f in 0..n {
        r.row_of(
            &format!("function_name_number_{f}"),
            "base",
            "a.c",
            "m",
            5,
            1,
        );
    }
}

/// The shape `name` at size `n` (its growing dimension), in `dir`.
fn generate(name: &str, n: usize, dir: &Path) -> Case {
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(&src).unwrap();
    let input = dir.join("in.csv");
    if name == "store-indexes" {
        // n commits of a `store:` snapshot of 20,000 paths, 4 rows each.
        let (source, csv) = store_snapshot(&dir.join("store"), n, 20_000);
        std::fs::write(&input, csv).unwrap();
        return Case {
            source,
            base: "c0".into(),
            input,
            rows: 4 * n as u64,
        };
    }
    let shape: fn(&Path, usize, &mut Rows) = match name {
        "last-line" => last_line,
        "managers" => managers,
        "paths" => paths,
        "base-files" => base_files,
        "commits" => commits,
        "long-file" | "long-file-diffed" => long_file,
        "sorted-paths" => sorted_paths,
        "file-managers" => file_managers,
        "func-names" => func_names,
        other => panic!("unknown shape {other}"),
    };
    let mut rows = Rows {
        text: String::from(HDR),
        n: 0,
    };
    shape(&src, n, &mut rows);
    std::fs::write(&input, rows.text).unwrap();
    Case {
        source: format!("dir:{}", src.display()),
        base: "base".into(),
        input,
        rows: rows.n,
    }
}

/// Each shape, its size at `--scale 1`, and flags of its own for `merge`.
const SHAPES: &[(&str, usize, &[&str])] = &[
    ("last-line", 50_000, &[]),
    ("managers", 20_000, &[]),
    ("paths", 500_000, &[]),
    ("base-files", 1_000, &[]),
    ("commits", 500, &[]),
    ("store-indexes", 50, &[]),
    ("long-file", 2_500_000, &[]),
    ("long-file-diffed", 250_000, &[]),
    ("func-names", 500_000, &[]),
    ("file-managers", 40, &[]),
    (
        "sorted-paths",
        200_000,
        &["--memory-budget", "16MiB", "--workers", "1"],
    ),
];

fn main() {
    let a = Args::parse();
    let bin = a.covmerge.clone().unwrap_or_else(covmerge_beside_this_exe);
    println!(
        "| shape | size | rows | wall s | CPU s | peak RSS MB | passes | wall 2×/1× | RSS 2×/1× |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for &(name, base, flags) in SHAPES {
        if !a.shapes.is_empty() && !a.shapes.iter().any(|s| s == name) {
            continue;
        }
        let mut first: Option<Usage> = None;
        for mult in [1, 2] {
            let n = ((base as f64 * a.scale) as usize).max(16) * mult;
            let dir = a.dir.join(format!("{name}-{n}"));
            let case = generate(name, n, &dir);
            let out = dir.join("out.jsonl.gz");
            let mut cmd = Command::new(&bin);
            cmd.args(["merge", "--quiet", "--base-repo", "r", "--base-commit"])
                .arg(&case.base)
                .arg("--source")
                .arg(&case.source)
                .arg("--input")
                .arg(&case.input)
                .arg("--out")
                .arg(&out)
                .args(flags)
                .args(&a.extra);
            // The worker logs the passes of a shard merged in more than one.
            let log = dir.join("merge.log");
            cmd.env("RUST_LOG", "warn,covmerge_worker=info")
                .stderr(std::fs::File::create(&log).unwrap());
            let u = measure(&mut cmd);
            let passes = passes_logged(&log);
            let ratio = |f: &dyn Fn(&Usage) -> f64| {
                first
                    .as_ref()
                    .map(|b| format!("{:.2}", f(&u) / f(b).max(1e-9)))
                    .unwrap_or_default()
            };
            println!(
                "| {name} | {n} | {} | {:.2} | {:.2} | {:.1} | {passes} | {} | {} |",
                case.rows,
                u.wall,
                u.cpu,
                u.max_rss_kb as f64 / 1024.0,
                ratio(&|u| u.wall),
                ratio(&|u| u.max_rss_kb as f64),
            );
            if first.is_none() {
                first = Some(u);
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// The passes the merge's log in `log` reports over all shards merged in more than
/// one (`-`: none).
fn passes_logged(log: &Path) -> String {
    let raw = std::fs::read_to_string(log).unwrap_or_default();
    // Without the colours of the log's fields (`\x1b[...m`).
    let mut text = String::with_capacity(raw.len());
    let mut rest = raw.as_str();
    while let Some(at) = rest.find('\x1b') {
        text.push_str(&rest[..at]);
        rest = &rest[at..];
        rest = rest.find('m').map_or("", |m| &rest[m + 1..]);
    }
    text.push_str(rest);
    let passes: Vec<u64> = text
        .lines()
        .filter_map(|l| {
            let at = l.find("passes=")? + "passes=".len();
            let digits: String = l[at..].chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect();
    if passes.is_empty() {
        "-".into()
    } else {
        passes.iter().sum::<u64>().to_string()
    }
}
