//! `covmerge diff` across two bases at kernel size: writes two synthetic results, OLD on
//! base `old` and NEW on base `new` (default 45,000 files in a kernel-like tree, ~2.5 M
//! instrumented lines each, 20 managers, one `FL` line per 15 lines), and a `dir:`
//! source holding both versions of every file (`ROOT/old/PATH`, `ROOT/new/PATH`; a file
//! whose text did not change is a hard link). Between the bases, `--changed` of the
//! files (default 30 %) have lines edited, inserted and deleted (about 1 in 10 of their
//! lines: ~3 % of all lines), 1 % of files are added and 1 % deleted; 2 % of the
//! unchanged lines change whether they are instrumented, and 10 % have their hits drawn
//! again.
//! Then it runs `covmerge diff OLD NEW --source dir:ROOT` (`--runs` times) and prints
//! wall time, CPU and peak RSS, and the totals line of the output.
//!
//! ```sh
//! cargo build --release -p covmerge && cargo build --release --bin covmerge-changes-bench
//! target/release/covmerge-changes-bench --dir /tmp/changes-bench \
//!     [--files 45000 --lines 140 --managers 20 --runs 1] [-- extra diff flags]
//! ```
//!
//! The generated data are reused when `--dir` holds data of the same settings.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use clap::Parser;
use covmerge_integration_tests::measure::{covmerge_beside_this_exe, measure};
use flate2::{write::GzEncoder, Compression};

#[derive(Parser, Debug)]
struct Args {
    /// Work directory: results and sources (reused when of the same settings).
    #[arg(long)]
    dir: PathBuf,
    /// Files at OLD's base.
    #[arg(long, default_value_t = 45_000)]
    files: usize,
    /// Mean source lines per file (about 40 % instrumented).
    #[arg(long, default_value_t = 140)]
    lines: usize,
    #[arg(long, default_value_t = 20)]
    managers: usize,
    /// Share of files whose text changes between the bases.
    #[arg(long, default_value_t = 0.3)]
    changed: f64,
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// The covmerge binary (default: next to this one).
    #[arg(long)]
    covmerge: Option<PathBuf>,
    /// Extra flags for `covmerge diff`.
    #[arg(last = true)]
    extra: Vec<String>,
}

/// SplitMix64 of a key: deterministic per (file, line, side), no state.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn h(parts: &[u64]) -> u64 {
    parts.iter().fold(0x1234_5678, |a, &p| mix(a ^ p))
}

const TOP: &[&str] = &[
    "arch", "block", "crypto", "drivers", "fs", "include", "init", "io_uring", "ipc", "kernel",
    "lib", "mm", "net", "security", "sound", "virt",
];

/// Kernel-like paths: top-level directories, nested subdirectories, ~16 files each.
fn paths(n: usize) -> Vec<String> {
    let mut dirs: Vec<String> = TOP.iter().map(|s| s.to_string()).collect();
    let mut out = Vec::with_capacity(n);
    let mut i = 0u64;
    while out.len() < n {
        i += 1;
        let d = dirs[(h(&[i, 1]) % dirs.len() as u64) as usize].clone();
        if h(&[i, 2]).is_multiple_of(4) && d.matches('/').count() < 4 {
            dirs.push(format!("{d}/sub{}", dirs.len()));
            continue;
        }
        out.push(format!("{d}/file{}.c", out.len()));
    }
    out
}

/// A line's text from its token: ~1 in 6 a line repeated all over C (`}`, blank,
/// `return ret;`), the rest distinct.
fn text(tok: u64, out: &mut String) {
    use std::fmt::Write as _;
    match tok % 18 {
        0 => out.push_str("}\n"),
        1 => out.push('\n'),
        2 => out.push_str("\treturn ret;\n"),
        _ => writeln!(
            out,
            "\tret = do_something_{tok}(dev, flags & 0x{:x});",
            tok % 4096
        )
        .unwrap(),
    }
}

/// One side's `*` lines and the managers' records of a file.
type Records = (Vec<(u32, u64)>, Vec<(usize, Vec<(u32, u64)>)>);

/// Instrumentation and hits of a version (`side` 0 OLD, 1 NEW) of file `f`, whose
/// lines are the tokens `toks`: a token is instrumented by a hash of (file, token),
/// flipped on NEW for 2 % of tokens; NEW draws the hits of 10 % of tokens again.
fn records(f: u64, side: u64, toks: &[u64], managers: usize) -> Records {
    let mut star = Vec::new();
    for (i, &t) in toks.iter().enumerate() {
        let instr = h(&[f, t, 3]) % 10 < 4;
        let flip = side == 1 && h(&[f, t, 4]).is_multiple_of(50);
        if instr != flip {
            // NEW redraws the hits of 1 line in 10.
            let drawn = if side == 1 && h(&[f, t, 16]).is_multiple_of(10) {
                1
            } else {
                0
            };
            let r = h(&[f, t, drawn, 5]);
            let hits = if r % 10 < 6 { 1 + (r >> 8) % 1000 } else { 0 };
            star.push((i as u32 + 1, hits));
        }
    }
    let k = (h(&[f, side, 6]) % (managers as u64 + 1)) as usize;
    let mut ms: Vec<usize> = (0..k)
        .map(|j| (h(&[f, side, j as u64, 7]) % managers as u64) as usize)
        .collect();
    ms.sort_unstable();
    ms.dedup();
    let mgrs = ms
        .into_iter()
        .map(|m| {
            let ls = star
                .iter()
                .filter(|&&(l, _)| h(&[f, side, m as u64, l as u64, 8]) % 10 < 7)
                .map(|&(l, hits)| (l, hits / 2))
                .collect();
            (m, ls)
        })
        .collect();
    (star, mgrs)
}

type Out = std::io::BufWriter<GzEncoder<std::fs::File>>;

fn result(p: &Path, commit: &str) -> Out {
    let f = std::fs::File::create(p).unwrap();
    let mut w = std::io::BufWriter::with_capacity(1 << 20, GzEncoder::new(f, Compression::fast()));
    writeln!(w, r#"{{"Session":"","Time":"0001-01-01T00:00:00Z","Namespace":"upstream","Repo":"git://bench/linux","Commit":"{commit}","Duration":30,"DateTo":"2024-04-30","TotalRows":0}}"#).unwrap();
    w
}

fn write_file(w: &mut Out, names: &[String], path: &str, (star, mgrs): &Records) {
    let mcr = |w: &mut Out, m: &str, ls: &[(u32, u64)]| {
        let lines: Vec<u32> = ls.iter().map(|x| x.0).collect();
        let hits: Vec<u64> = ls.iter().map(|x| x.1).collect();
        covmerge_proto::output::write_mcr(w, m.as_bytes(), path.as_bytes(), &lines, &hits).unwrap();
    };
    mcr(w, "*", star);
    for (m, ls) in mgrs {
        mcr(w, &names[*m], ls);
    }
    let lines: Vec<u32> = star.iter().map(|x| x.0).collect();
    for (i, chunk) in lines.chunks(15).enumerate() {
        covmerge_proto::output::write_fl(w, path.as_bytes(), format!("func_{i}").as_bytes(), chunk)
            .unwrap();
    }
}

/// What was generated.
struct Made {
    instrumented: [u64; 2],
    source_lines: [u64; 2],
    files: [u64; 2],
}

fn generate(a: &Args, root: &Path) -> Made {
    let _ = std::fs::remove_dir_all(root);
    let src = root.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let names: Vec<String> = (0..a.managers)
        .map(|m| format!("ci-upstream-{m:02}"))
        .collect();
    let mut outs = [
        result(&root.join("old.jsonl.gz"), "old"),
        result(&root.join("new.jsonl.gz"), "new"),
    ];
    let mut made = Made {
        instrumented: [0; 2],
        source_lines: [0; 2],
        files: [0; 2],
    };
    let all = paths(a.files + a.files / 100);
    let mut buf = String::new();
    for (fi, path) in all.iter().enumerate() {
        let f = fi as u64;
        let n = 10 + h(&[f, 9]) % (2 * a.lines as u64 - 10);
        let old: Vec<u64> = (0..n).map(|i| h(&[f, i, 10]) % 1_000_000_000).collect();
        // The last 1 % of paths exist at NEW only; 1 % of the others at OLD only.
        let at_old = fi < a.files;
        let at_new = !at_old || !h(&[f, 11]).is_multiple_of(100);
        let changes = (h(&[f, 12]) % 10_000) as f64 / 10_000.0 < a.changed;
        let new: Vec<u64> = if changes {
            let mut v = Vec::with_capacity(old.len() + 8);
            for (i, &t) in old.iter().enumerate() {
                match h(&[f, i as u64, 13]) % 30 {
                    0 => {}                                                    // deleted
                    1 => v.push(h(&[f, i as u64, 14]) % 1_000_000_000),        // changed
                    2 => v.extend([t, h(&[f, i as u64, 15]) % 1_000_000_000]), // inserted
                    _ => v.push(t),
                }
            }
            v
        } else {
            old.clone()
        };
        let write = |side: &str, toks: &[u64], buf: &mut String| -> PathBuf {
            let p = src.join(side).join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            buf.clear();
            for &t in toks {
                text(t, buf);
            }
            std::fs::write(&p, buf.as_bytes()).unwrap();
            p
        };
        let mut old_file = None;
        for (side, toks, present) in [(0usize, &old, at_old), (1, &new, at_new)] {
            if !present {
                continue;
            }
            match (&old_file, changes) {
                (Some(o), false) => {
                    let p = src.join("new").join(path);
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::fs::hard_link(o, &p).unwrap();
                }
                _ => {
                    let p = write(["old", "new"][side], toks, &mut buf);
                    old_file = Some(p);
                }
            }
            let recs = records(f, side as u64, toks, a.managers);
            made.instrumented[side] += recs.0.len() as u64;
            made.source_lines[side] += toks.len() as u64;
            made.files[side] += 1;
            write_file(&mut outs[side], &names, path, &recs);
        }
    }
    for w in outs {
        w.into_inner().unwrap().finish().unwrap();
    }
    made
}

fn main() {
    let a = Args::parse();
    let bin = a.covmerge.clone().unwrap_or_else(covmerge_beside_this_exe);
    let stamp = format!("v2 {} {} {} {}", a.files, a.lines, a.managers, a.changed);
    let meta = a.dir.join("changes-bench.txt");
    let made = std::fs::read_to_string(&meta)
        .ok()
        .filter(|m| m.starts_with(&stamp));
    let summary = match made {
        Some(m) => m.lines().nth(1).unwrap_or("").to_string(),
        None => {
            let t0 = Instant::now();
            let m = generate(&a, &a.dir);
            let s = format!(
                "files {} / {}, source lines {} / {}, instrumented {} / {} (OLD / NEW), generated in {:.0} s",
                m.files[0],
                m.files[1],
                m.source_lines[0],
                m.source_lines[1],
                m.instrumented[0],
                m.instrumented[1],
                t0.elapsed().as_secs_f64()
            );
            std::fs::write(&meta, format!("{stamp}\n{s}\n")).unwrap();
            s
        }
    };
    let size = |p: &str| std::fs::metadata(a.dir.join(p)).unwrap().len() as f64 / 1e6;
    println!(
        "{summary}; results {:.1} / {:.1} MB gzip",
        size("old.jsonl.gz"),
        size("new.jsonl.gz")
    );
    let out = a.dir.join("diff.jsonl");
    for _ in 0..a.runs {
        let u = measure(
            Command::new(&bin)
                .arg("diff")
                .arg(a.dir.join("old.jsonl.gz"))
                .arg(a.dir.join("new.jsonl.gz"))
                .arg("--source")
                .arg(format!("dir:{}", a.dir.join("src").display()))
                .arg("--out")
                .arg(&out)
                .args(&a.extra),
        );
        println!(
            "diff across bases: {:.1} s wall, {:.1} s CPU, {:.0} MB peak RSS",
            u.wall,
            u.cpu,
            u.max_rss_kb as f64 / 1024.0
        );
    }
    if a.runs > 0 {
        let text = std::fs::read_to_string(&out).unwrap();
        println!("{}", text.lines().last().unwrap_or(""));
    }
}
