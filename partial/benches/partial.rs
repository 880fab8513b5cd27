//! Partials: write and roll-up throughput and peak memory.
//!
//! `cargo bench -p covmerge-partial --bench partial [-- ROWS DAYS]` (default 3,000,000
//! rows over 10 days). Each phase runs in a process of its own (this binary, called
//! back with a phase), so each peak RSS (`VmHWM`) is that phase's alone:
//!
//! - `write`: the rows of all days summed into one partial (16 shards) by a `Builder`
//!   holding at most 64 MiB of sums (so it writes runs and rolls them up);
//! - `days`: one partial per day;
//! - `rollup`: the days' partials rolled up into one, which must equal `write`'s shard
//!   files byte for byte.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use covmerge_partial::{rollup, Builder, Partial, RawRow};

const SHARDS: u32 = 16;
const LIMIT: usize = 64 << 20;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Feeds day `day`'s rows (`rows` of them) to `f`: 20,000 files of 2 versions each
/// (a new one every few days), 30 managers, lines up to 3,000, a function per 40 lines.
fn day_rows(day: u64, rows: u64, mut f: impl FnMut(&RawRow<'_>)) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (day + 1).wrapping_mul(0x1234_5678_9abc_def1));
    let mut path = String::new();
    let mut version = String::new();
    let mut commit = String::new();
    let mut manager = String::new();
    let mut func = String::new();
    for _ in 0..rows {
        let r = rng.next();
        let file = r % 20_000;
        let v = (day / 4 + (file % 7)) % 2;
        path.clear();
        use std::fmt::Write;
        let _ = write!(path, "drivers/sub{}/file{file}.c", file % 97);
        version.clear();
        let _ = write!(
            version,
            "{:040x}",
            (file * 2 + v) as u128 * 0x9e37_79b9_7f4a_7c15
        );
        commit.clear();
        let _ = write!(commit, "{:040x}", day * 1000 + v);
        manager.clear();
        let _ = write!(manager, "ci-qemu-upstream-{}", (r >> 20) % 30);
        let line = 1 + ((r >> 32) % 3000) as u32;
        func.clear();
        let _ = write!(func, "func_{}_{}", file, line / 40);
        f(&RawRow {
            path: &path,
            commit: &commit,
            version: Some(&version),
            manager: &manager,
            func_name: &func,
            line,
            hits: (r >> 40) % 5,
            rows: 1,
        });
    }
}

fn peak_rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// CPU seconds (user + system) of this process, from `/proc/self/stat` (100 ticks/s):
/// the machine is shared, so wall time alone says little.
fn cpu_secs() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit_once(')').map_or("", |x| x.1);
    let f: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

fn build(days: std::ops::Range<u64>, per_day: u64, out: &Path, scratch: &Path) -> u64 {
    let d = "2026-12-01".parse().unwrap();
    let mut b = Builder::new("upstream", d, d, SHARDS, LIMIT, scratch).unwrap();
    let mut n = 0;
    for day in days {
        day_rows(day, per_day, |r| {
            b.add(r).unwrap();
            n += 1;
        });
    }
    b.finish(out).unwrap();
    n
}

fn phase(args: &[String]) {
    let t = Instant::now();
    let (what, rows) = match args[0].as_str() {
        "write" => {
            let (days, per_day): (u64, u64) = (args[1].parse().unwrap(), args[2].parse().unwrap());
            let out = PathBuf::from(&args[3]);
            (
                "write",
                build(0..days, per_day, &out, out.parent().unwrap()),
            )
        }
        "day" => {
            let (day, per_day): (u64, u64) = (args[1].parse().unwrap(), args[2].parse().unwrap());
            let out = PathBuf::from(&args[3]);
            (
                "day",
                build(day..day + 1, per_day, &out, out.parent().unwrap()),
            )
        }
        "rollup" => {
            let out = PathBuf::from(&args[1]);
            let inputs: Vec<PathBuf> = args[2..].iter().map(PathBuf::from).collect();
            let rows: u64 = inputs
                .iter()
                .map(|p| {
                    let d = Partial::open(p).unwrap().description().clone();
                    d.shards.iter().map(|s| s.lines.rows).sum::<u64>()
                })
                .sum();
            rollup(&inputs, &out, Some(SHARDS)).unwrap();
            ("rollup", rows)
        }
        other => panic!("unknown phase {other}"),
    };
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{what}\t{rows}\t{:.2}\t{}\t{secs:.2}",
        cpu_secs(),
        peak_rss_kib()
    );
}

fn run(args: &[String]) -> (u64, f64, u64) {
    let out = Command::new(std::env::current_exe().unwrap())
        .arg("--phase")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).unwrap();
    let f: Vec<&str> = s.trim().split('\t').collect();
    eprintln!("{} wall {} s", f[0], f[4]);
    (
        f[1].parse().unwrap(),
        f[2].parse().unwrap(),
        f[3].parse().unwrap(),
    )
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.first().map(String::as_str) == Some("--phase") {
        return phase(&args[1..]);
    }
    let rows: u64 = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(3_000_000);
    let days: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    let per_day = rows / days;
    let tmp = tempfile::tempdir().unwrap();
    let all = tmp.path().join("all");
    let (n, secs, rss) = run(&[
        "write".into(),
        days.to_string(),
        per_day.to_string(),
        all.display().to_string(),
    ]);
    println!(
        "write   {n} rows into one partial ({SHARDS} shards, {} MiB of sums held): {secs:.2} CPU s, {:.0} rows per CPU s, peak RSS {} MiB, {} MiB on disk",
        LIMIT >> 20,
        n as f64 / secs,
        rss / 1024,
        dir_bytes(&all) >> 20
    );
    let mut day_dirs = Vec::new();
    let (mut day_secs, mut day_rss) = (0.0, 0);
    for day in 0..days {
        let d = tmp.path().join(format!("day-{day}"));
        let (_, s, r) = run(&[
            "day".into(),
            day.to_string(),
            per_day.to_string(),
            d.display().to_string(),
        ]);
        day_secs += s;
        day_rss = day_rss.max(r);
        day_dirs.push(d.display().to_string());
    }
    println!(
        "days    {days} partials of {per_day} rows: {day_secs:.2} CPU s in all, peak RSS {} MiB, one day {} MiB on disk",
        day_rss / 1024,
        dir_bytes(Path::new(&day_dirs[0])) >> 20
    );
    let rolled = tmp.path().join("rolled");
    let mut a = vec!["rollup".to_owned(), rolled.display().to_string()];
    a.extend(day_dirs);
    let (n, secs, rss) = run(&a);
    println!(
        "rollup  {days} partials, {n} lines rows read: {secs:.2} CPU s, {:.0} rows per CPU s, peak RSS {} MiB",
        n as f64 / secs,
        rss / 1024
    );
    for s in 0..SHARDS {
        let name = format!("lines-{s:05}.parquet");
        assert!(
            std::fs::read(all.join(&name)).unwrap() == std::fs::read(rolled.join(&name)).unwrap(),
            "{name}: the roll-up differs from the partial of all rows"
        );
    }
    println!("rollup  equals the partial of all rows, byte for byte");
}
