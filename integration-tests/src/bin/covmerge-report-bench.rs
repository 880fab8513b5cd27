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
//!
//! With `--shapes`, it runs instead every shape that grows one dimension of a result, at
//! 1× and 2× (`--scale` multiplies both): many files, many managers (report and diff),
//! a tall source file, one long record line (report and diff), printing wall time,
//! peak RSS and the files written for each.

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
    /// Run the shapes of one growing dimension each, at 1× and 2×.
    #[arg(long)]
    shapes: bool,
    /// Multiplies every shape's size.
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
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

const HEAD: &str = r#"{"Session":"","Time":"0001-01-01T00:00:00Z","Namespace":"upstream","Repo":"git://bench/linux","Commit":"base","Duration":30,"DateTo":"2024-04-30","TotalRows":0}"#;

/// Writes a plain result: `f(w)` writes its records after the header.
fn plain_result(p: &Path, f: impl FnOnce(&mut std::io::BufWriter<std::fs::File>)) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(p).unwrap());
    writeln!(w, "{HEAD}").unwrap();
    f(&mut w);
    w.flush().unwrap();
}

/// One shape at size `n`: writes its inputs under `dir`, returns the covmerge
/// arguments (`{out}` stands for the output directory or file).
fn shape(name: &str, n: usize, dir: &Path) -> Vec<String> {
    let r = dir.join(format!("{name}-{n}.jsonl"));
    let rs = r.display().to_string();
    let site = "{out}".to_string();
    match name {
        // n files in directories of 16, 3 managers each.
        "files" => {
            plain_result(&r, |w| {
                for f in 0..n {
                    let p = format!("d{}/s{}/file{f}.c", f / 4096, f / 16);
                    mcr(w, "*", &p, &[(1, 3), (2, 0), (5, 1)]);
                    for m in 0..3 {
                        mcr(w, &format!("m{}", (f + m) % 50), &p, &[(1, 1)]);
                    }
                }
            });
            vec!["report".into(), rs, "--out".into(), site]
        }
        // n managers over 3 files (report, and diff of the result with itself).
        "managers-report" | "managers-diff" => {
            plain_result(&r, |w| {
                for f in 0..3 {
                    let p = format!("dir{f}/f.c");
                    mcr(w, "*", &p, &[(1, n as u64), (2, 0)]);
                    for m in 0..n {
                        mcr(w, &format!("m{m:06}"), &p, &[(1, 1)]);
                    }
                }
            });
            if name == "managers-report" {
                vec!["report".into(), rs, "--out".into(), site]
            } else {
                vec!["diff".into(), rs.clone(), rs, "--out".into(), site]
            }
        }
        // One source file of n lines, three of them instrumented.
        "tall-source" => {
            let src = dir.join(format!("tall-src-{n}"));
            let f = src.join("base/tall.c");
            if !f.exists() {
                std::fs::create_dir_all(f.parent().unwrap()).unwrap();
                let mut w = std::io::BufWriter::new(std::fs::File::create(&f).unwrap());
                for l in 1..=n {
                    writeln!(w, "\tret = do_something_{l}(dev, flags & 0x{l:x});").unwrap();
                }
                w.flush().unwrap();
            }
            let n = n as u32;
            plain_result(&r, |w| mcr(w, "*", "tall.c", &[(1, 1), (n / 2, 0), (n, 9)]));
            vec![
                "report".into(),
                rs,
                "--source".into(),
                format!("dir:{}", src.display()),
                "--out".into(),
                site,
            ]
        }
        // One file of n instrumented lines: one record line of about 20 bytes a line.
        "long-line-report" | "long-line-diff" => {
            plain_result(&r, |w| {
                let ls: Vec<(u32, u64)> = (1..=n as u32).map(|l| (l, l as u64 * 1000)).collect();
                mcr(w, "*", "long.c", &ls);
            });
            if name == "long-line-report" {
                vec!["report".into(), rs, "--out".into(), site]
            } else {
                vec!["diff".into(), rs.clone(), rs, "--out".into(), site]
            }
        }
        _ => unreachable!(),
    }
}

/// Every shape at 1× and 2×: wall time, peak RSS and files written.
fn shapes(a: &Args, bin: &Path) {
    let sizes: &[(&str, usize)] = &[
        ("files", 100_000),
        ("managers-report", 60_000),
        ("managers-diff", 60_000),
        ("tall-source", 1_000_000),
        ("long-line-report", 1_000_000),
        ("long-line-diff", 1_000_000),
    ];
    println!("shape              size  wall_s  peak_rss_mb  files_written  bytes_written");
    for &(name, base) in sizes {
        let mut walls = Vec::new();
        for k in [1, 2] {
            let n = (base as f64 * a.scale) as usize * k;
            let args = shape(name, n, &a.dir);
            let out = a.dir.join(format!("out-{name}"));
            let _ = std::fs::remove_dir_all(&out);
            let _ = std::fs::remove_file(&out);
            let args: Vec<String> = args
                .into_iter()
                .map(|x| x.replace("{out}", &out.display().to_string()))
                .collect();
            let mut cmd = Command::new(bin);
            cmd.args(&args).stdout(std::process::Stdio::null());
            let u = measure(&mut cmd);
            let (bytes, files) = if out.is_dir() {
                du(&out)
            } else {
                (std::fs::metadata(&out).map_or(0, |m| m.len()), 1)
            };
            walls.push(u.wall);
            println!(
                "{name:<16} {n:>8} {:>7.2} {:>12.0} {files:>14} {bytes:>14}",
                u.wall,
                u.max_rss_kb as f64 / 1024.0
            );
        }
        println!("{name:<16} 2x/1x wall {:.2}", walls[1] / walls[0]);
    }
}

fn main() {
    let a = Args::parse();
    let bin = a.covmerge.clone().unwrap_or_else(covmerge_beside_this_exe);
    if a.shapes {
        std::fs::create_dir_all(&a.dir).unwrap();
        shapes(&a, &bin);
        return;
    }
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
