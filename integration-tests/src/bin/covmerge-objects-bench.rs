//! Many small input objects: a `file://` prefix of N one-row CSV objects merged with
//! `covmerge merge --input file://DIR/*`, at each N given. One row per run with the
//! objects, wall, CPU, the wall per object and peak RSS, and the wall per object over
//! the first run's: a cost per object that grows with N shows there (it went from
//! 1.7 to 2.85 ms per object between 10k and 100k objects).
//!
//! ```sh
//! cargo build --release --workspace
//! target/release/covmerge-objects-bench [--objects 10000,30000,100000] [-- extra merge flags]
//! ```

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use covmerge_integration_tests::measure::{covmerge_beside_this_exe, measure, Usage};

#[derive(Parser, Debug)]
struct Args {
    /// Where the prefixes are generated (each reused when it has its objects).
    #[arg(long, default_value = "/tmp/covmerge-objects")]
    dir: PathBuf,
    /// Objects per run.
    #[arg(long, value_delimiter = ',', default_values_t = [10_000, 30_000, 100_000])]
    objects: Vec<usize>,
    /// Measured runs at each size (the fastest is shown).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// The covmerge binary (default: next to this one).
    #[arg(long)]
    covmerge: Option<PathBuf>,
    /// Extra flags for `covmerge merge`.
    #[arg(last = true)]
    extra: Vec<String>,
}

const HDR: &str = "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\n";
const COMMIT: &str = "c1";
/// Source files the rows name, lines in each.
const FILES: usize = 100;
const LINES: usize = 50;

fn write_source(root: &Path) {
    let dir = root.join(COMMIT);
    std::fs::create_dir_all(&dir).unwrap();
    let text: String = (0..LINES).map(|i| format!("line {i};\n")).collect();
    for f in 0..FILES {
        std::fs::write(dir.join(format!("f{f}.c")), &text).unwrap();
    }
}

/// `n` one-row objects under `dir/in-N/` (kept when all are there); returns the prefix.
fn prefix(dir: &Path, n: usize) -> PathBuf {
    let p = dir.join(format!("in-{n}"));
    let done = p.join(".complete");
    if done.exists() {
        return p;
    }
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    for i in 0..n {
        let mut f = std::fs::File::create(p.join(format!("part-{i:07}.csv"))).unwrap();
        writeln!(
            f,
            "{HDR}git://r,{COMMIT},f{}.c,fn{},m{},{},{}",
            i % FILES,
            i % FILES,
            i % 7,
            1 + i % LINES,
            1 + i % 3
        )
        .unwrap();
    }
    // Outside the `part-*` pattern: never an input.
    std::fs::write(&done, b"").unwrap();
    p
}

fn main() {
    let a = Args::parse();
    let bin = a.covmerge.clone().unwrap_or_else(covmerge_beside_this_exe);
    std::fs::create_dir_all(&a.dir).unwrap();
    let src = a.dir.join("src");
    write_source(&src);
    println!(
        "{:>9} {:>9} {:>9} {:>13} {:>10} {:>9}",
        "objects", "wall_s", "cpu_s", "ms_per_object", "rss_mb", "vs_first"
    );
    let mut first: Option<f64> = None;
    for &n in &a.objects {
        let p = prefix(&a.dir, n);
        let out = a.dir.join("out.jsonl.gz");
        let mut best: Option<Usage> = None;
        for _ in 0..a.runs.max(1) {
            let mut c = Command::new(&bin);
            c.args(["merge", "--quiet", "--source"])
                .arg(format!("dir:{}", src.display()))
                .args(["--base-repo", "git://r", "--base-commit", COMMIT])
                .args(["--date-to", "2024-04-08", "--out"])
                .arg(&out)
                .arg("--input")
                .arg(format!("file://{}/part-*", p.display()))
                .args(&a.extra)
                .stdout(std::process::Stdio::null());
            let u = measure(&mut c);
            if best.as_ref().is_none_or(|b| u.wall < b.wall) {
                best = Some(u);
            }
        }
        let u = best.unwrap();
        let per = u.wall * 1000.0 / n as f64;
        let base = *first.get_or_insert(per);
        println!(
            "{:>9} {:>9.2} {:>9.2} {:>13.3} {:>10.1} {:>9.2}",
            n,
            u.wall,
            u.cpu,
            per,
            u.max_rss_kb as f64 / 1024.0,
            per / base
        );
    }
}
