//! `covmerge report` on a kernel-sized result: writes a synthetic result (default 80,000
//! files in a kernel-like tree, 50 managers) and its sources, runs `covmerge report`
//! (and with `--diff`, against a second result with some coverage gained and lost), and
//! prints wall time, CPU, peak RSS, the site's size and the first page's bytes (the page
//! and everything it loads before any click).
//!
//! ```sh
//! cargo build --release -p covmerge -p covmerge-integration-tests
//! target/release/covmerge-report-bench --dir /tmp/rb [--files 80000 --managers 50 --lines 120]
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use clap::Parser;
use covmerge_integration_tests::measure::{covmerge_beside_this_exe, measure, Usage};
use flate2::{write::GzEncoder, Compression};

#[derive(Parser, Debug)]
struct Args {
    /// Work directory: result, sources and sites go here (reused when present).
    #[arg(long)]
    dir: PathBuf,
    #[arg(long, default_value_t = 80_000)]
    files: usize,
    #[arg(long, default_value_t = 50)]
    managers: usize,
    /// Mean source lines per file (about 40 % instrumented).
    #[arg(long, default_value_t = 120)]
    lines: usize,
    /// Most managers with a record per file (each file draws 0 to this many).
    #[arg(long, default_value_t = 30)]
    managers_per_file: usize,
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// The covmerge binary (default: next to this one).
    #[arg(long)]
    covmerge: Option<PathBuf>,
}

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const TOP: &[&str] = &[
    "arch", "block", "crypto", "drivers", "fs", "include", "init", "io_uring", "ipc", "kernel",
    "lib", "mm", "net", "security", "sound", "virt",
];

/// Kernel-like paths: top-level directories, nested subdirectories, ~16 files each.
fn paths(n: usize, rng: &mut Rng) -> Vec<String> {
    let mut dirs: Vec<String> = TOP.iter().map(|s| s.to_string()).collect();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let d = dirs[rng.below(dirs.len() as u64) as usize].clone();
        if rng.below(4) == 0 && d.matches('/').count() < 4 {
            dirs.push(format!("{d}/sub{}", dirs.len()));
            continue;
        }
        out.push(format!("{d}/file{}.c", out.len()));
    }
    out
}

struct File {
    path: String,
    n_lines: u32,
    star: Vec<(u32, u64)>,
    mgrs: Vec<(usize, Vec<(u32, u64)>)>,
}

fn gen_files(a: &Args, rng: &mut Rng) -> Vec<File> {
    paths(a.files, rng)
        .into_iter()
        .map(|path| {
            let n_lines = 10 + rng.below(2 * a.lines as u64 - 10) as u32;
            let mut star: Vec<(u32, u64)> = Vec::new();
            for l in 1..=n_lines {
                if rng.below(10) < 4 {
                    let h = if rng.below(10) < 6 {
                        1 + rng.below(1000)
                    } else {
                        0
                    };
                    star.push((l, h));
                }
            }
            let k = rng.below(a.managers_per_file as u64 + 1) as usize;
            let mut ms: Vec<usize> = (0..k)
                .map(|_| rng.below(a.managers as u64) as usize)
                .collect();
            ms.sort_unstable();
            ms.dedup();
            let mgrs = ms
                .into_iter()
                .map(|m| {
                    let mut ls = Vec::new();
                    for &(l, h) in &star {
                        if rng.below(10) < 7 {
                            ls.push((l, h / 2));
                        }
                    }
                    (m, ls)
                })
                .collect();
            File {
                path,
                n_lines,
                star,
                mgrs,
            }
        })
        .collect()
}

fn mcr(w: &mut impl Write, m: &str, path: &str, ls: &[(u32, u64)]) {
    let lines: Vec<u32> = ls.iter().map(|x| x.0).collect();
    let hits: Vec<u64> = ls.iter().map(|x| x.1).collect();
    covmerge_proto::output::write_mcr(w, m.as_bytes(), path.as_bytes(), &lines, &hits).unwrap();
}

/// Writes the result; `lose`: every n-th covered line reads 0 (an "older" result).
fn write_result(p: &Path, files: &[File], managers: usize, lose: Option<u64>) {
    let f = std::fs::File::create(p).unwrap();
    let mut w = std::io::BufWriter::new(GzEncoder::new(f, Compression::fast()));
    writeln!(w, r#"{{"Session":"","Time":"0001-01-01T00:00:00Z","Namespace":"upstream","Repo":"git://bench/linux","Commit":"base","Duration":30,"DateTo":"2024-04-30","TotalRows":0}}"#).unwrap();
    let names: Vec<String> = (0..managers)
        .map(|m| format!("ci-upstream-{m:02}"))
        .collect();
    for f in files {
        let adj = |ls: &[(u32, u64)]| -> Vec<(u32, u64)> {
            ls.iter()
                .map(|&(l, h)| match lose {
                    Some(n) if (l as u64).is_multiple_of(n) => (l, 0),
                    _ => (l, h),
                })
                .collect()
        };
        mcr(&mut w, "*", &f.path, &adj(&f.star));
        for (m, ls) in &f.mgrs {
            mcr(&mut w, &names[*m], &f.path, &adj(ls));
        }
        let lines: Vec<u32> = f.star.iter().map(|x| x.0).collect();
        for (i, chunk) in lines.chunks(15).enumerate() {
            covmerge_proto::output::write_fl(
                &mut w,
                f.path.as_bytes(),
                format!("func_{i}").as_bytes(),
                chunk,
            )
            .unwrap();
        }
    }
    w.into_inner().unwrap().finish().unwrap();
}

fn write_sources(root: &Path, files: &[File]) {
    for f in files {
        let p = root.join("base").join(&f.path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let mut s = String::new();
        for l in 1..=f.n_lines {
            s += &format!("\tret = do_something_{l}(dev, flags & 0x{l:x});\n");
        }
        std::fs::write(p, s).unwrap();
    }
}

fn du(p: &Path) -> (u64, u64) {
    let (mut bytes, mut files) = (0, 0);
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        if m.is_dir() {
            let (b, f) = du(&e.path());
            bytes += b;
            files += f;
        } else {
            bytes += m.len();
            files += 1;
        }
    }
    (bytes, files)
}

fn main() {
    let a = Args::parse();
    let bin = a.covmerge.clone().unwrap_or_else(covmerge_beside_this_exe);
    std::fs::create_dir_all(&a.dir).unwrap();
    let tag = format!(
        "{}f-{}m-{}l-{}k",
        a.files, a.managers, a.lines, a.managers_per_file
    );
    let new = a.dir.join(format!("new-{tag}.jsonl.gz"));
    let old = a.dir.join(format!("old-{tag}.jsonl.gz"));
    let src = a.dir.join(format!("src-{tag}"));
    if !new.exists() {
        let t = Instant::now();
        let files = gen_files(&a, &mut Rng(0x9E37_79B9_7F4A_7C15));
        write_sources(&src, &files);
        write_result(&old, &files, a.managers, Some(7));
        write_result(&new, &files, a.managers, None);
        eprintln!("generated the corpus in {:.1} s", t.elapsed().as_secs_f64());
    }
    println!(
        "result {} ({:.1} MB gzip), {} files, {} managers",
        new.display(),
        std::fs::metadata(&new).unwrap().len() as f64 / 1e6,
        a.files,
        a.managers
    );
    println!("mode      wall_s  cpu_s  peak_rss_mb  site_mb  site_files  first_page_bytes");
    for (mode, diff) in [("report", false), ("report+diff", true)] {
        for _ in 0..a.runs {
            let site = a.dir.join(format!("site-{mode}"));
            let _ = std::fs::remove_dir_all(&site);
            let mut cmd = Command::new(&bin);
            cmd.arg("report")
                .arg(&new)
                .arg("--source")
                .arg(format!("dir:{}", src.display()))
                .arg("--out")
                .arg(&site)
                .stdout(std::process::Stdio::null());
            if diff {
                cmd.arg("--diff").arg(&old);
            }
            // The run's own peak RSS (getrusage(RUSAGE_CHILDREN) would report the
            // largest of every child so far, the previous mode's included).
            let Usage {
                wall,
                cpu,
                max_rss_kb,
            } = measure(&mut cmd);
            let (bytes, n) = du(&site);
            let first: u64 = [
                "index.html",
                "assets/app.js",
                "assets/style.css",
                "data/meta.js",
                "data/d/0/0.js",
            ]
            .iter()
            .map(|p| std::fs::metadata(site.join(p)).unwrap().len())
            .sum();
            println!(
                "{mode:<12} {wall:>6.2} {cpu:>6.2} {:>12.0} {:>8.1} {n:>11} {first:>17}",
                max_rss_kb as f64 / 1024.0,
                bytes as f64 / 1e6
            );
        }
    }
}
