//! End-to-end benchmark: generates (or reuses) a corpus, measures the `zcat | wc -l`
//! floor, the two-core inflate floor (`zcat` of every part to /dev/null, as many at
//! a time as there are cores), `covmerge merge`, the ISA-L inflate floor (`igzip -dc`,
//! Debian's `isal`, the same way) and DuckDB's bare `GROUP BY` of the parts
//! (`scripts/duckdb_groupby.py`, PyPI's `duckdb`) side by side, and prints one row
//! per run with rows/s, MB/s (compressed input), wall, CPU and peak RSS, and the
//! merge's wall over each floor and DuckDB's over the merge's.
//!
//! With `--history REPO`, it also builds a corpus over the repository's real history
//! ([`covmerge_integration_tests::history`]) and merges it with `git:REPO` and with
//! `dir:` on the same files, printing CPU and peak RSS of both, their ratio, and
//! whether the two results are identical.
//!
//! ```sh
//! cargo build --release --workspace
//! target/release/covmerge-bench --corpus /tmp/c20 --files 200 --lines 1000 --commits 40 \
//!     --managers 20 --parts 1 --sorted [--runs 1] [-- extra merge flags]
//! target/release/covmerge-bench --corpus /tmp/r20u ... --history /path/to/curl.git \
//!     --history-corpus /tmp/hist-curl --history-commits 60
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use clap::Parser;
use covmerge_corpus::CorpusSpec;
use covmerge_integration_tests::measure::{covmerge_beside_this_exe, measure, Usage};

#[derive(Parser, Debug)]
struct Args {
    /// Corpus directory (generated when it has no corpus.json).
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// A git repository whose real history to benchmark `git:` against `dir:` on.
    #[arg(long)]
    history: Option<PathBuf>,
    /// Where the history corpus is built (reused when built from the same settings).
    #[arg(long, default_value = "/tmp/covmerge-history")]
    history_corpus: PathBuf,
    /// First-parent commits of the history, newest (the base) included.
    #[arg(long, default_value_t = 60)]
    history_commits: usize,
    /// Managers of the history corpus (each ran ~10 % of the commits).
    #[arg(long, default_value_t = 10)]
    history_managers: usize,
    /// File name endings that are sources in the history.
    #[arg(long, value_delimiter = ',', default_value = ".c,.h,.rs")]
    history_exts: Vec<String>,
    #[command(flatten)]
    spec: CorpusSpec,
    /// Measured runs of each command.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// The covmerge binary (default: next to this one).
    #[arg(long)]
    covmerge: Option<PathBuf>,
    /// Run on a fleet of this many worker processes (RabbitMQ at --amqp, a file store
    /// in a temporary directory) instead of embedded mode.
    #[arg(long)]
    fleet: Option<usize>,
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    amqp: String,
    /// Flags for each fleet worker, e.g. "--split-threads 1".
    #[arg(long, default_value = "")]
    worker_flags: String,
    /// Extra flags for `covmerge merge`.
    #[arg(last = true)]
    extra: Vec<String>,
}

fn rusage() -> (f64, i64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime) + t(ru.ru_stime), ru.ru_maxrss)
}

fn json_field(text: &str, key: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    match &v[key] {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn main() {
    let a = Args::parse();
    let bin = a.covmerge.clone().unwrap_or_else(covmerge_beside_this_exe);
    if let Some(corpus) = &a.corpus {
        corpus_bench(&a, corpus, &bin);
    }
    if let Some(repo) = &a.history {
        history_bench(&a, repo, &bin);
    }
    if a.corpus.is_none() && a.history.is_none() {
        eprintln!("nothing to do: give --corpus DIR and/or --history REPO");
        std::process::exit(2);
    }
}

/// `covmerge merge --quiet --source SOURCE ... --input FILES`, wrapped in a fresh shell
/// so that the peak RSS measured is the merge's own.
fn merge_command(
    bin: &Path,
    source: &str,
    repo: &str,
    base: &str,
    out: &Path,
    extra: &[String],
    files: &[String],
) -> Command {
    let mut m = Command::new(bin);
    m.args(["merge", "--quiet", "--source", source])
        .args(["--base-repo", repo, "--base-commit", base, "--out"])
        .arg(out)
        .args(extra)
        .arg("--input")
        .args(files);
    let mut wrapped = Command::new("sh");
    wrapped
        .arg("-c")
        .arg("\"$@\" >/dev/null")
        .arg("sh")
        .arg(m.get_program())
        .args(m.get_args());
    wrapped
}

/// The two-core inflate floor: every part through `zcat` to /dev/null, as many at once
/// as there are cores.
fn inflate_floor(files: &[String]) -> Command {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!(
            "printf '%s\\n' \"$@\" | xargs -P {cores} -n 1 sh -c 'zcat \"$0\" >/dev/null'"
        ))
        .arg("sh")
        .args(files);
    c
}

/// The ISA-L inflate floor: every part through Debian's `isal` `igzip -dc` to
/// /dev/null, as many at once as there are cores; `None` when `igzip` is not installed.
fn igzip_floor(files: &[String]) -> Option<Command> {
    let found = Command::new("sh")
        .args(["-c", "command -v igzip"])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        return None;
    }
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!(
            "printf '%s\\n' \"$@\" | xargs -P {cores} -n 1 sh -c 'igzip -dc \"$0\" >/dev/null'"
        ))
        .arg("sh")
        .args(files);
    Some(c)
}

/// DuckDB's bare `GROUP BY GROUPING SETS` of the parts on every core
/// (`scripts/duckdb_groupby.py`); `None` when PyPI's `duckdb` is not installed.
fn duckdb_groupby(files: &[String]) -> Option<Command> {
    let found = Command::new("python3")
        .args(["-c", "import duckdb"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        return None;
    }
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/duckdb_groupby.py");
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("\"$@\" >/dev/null")
        .arg("sh")
        .arg("python3")
        .arg(script)
        .arg(cores.to_string())
        .args(files);
    Some(c)
}

/// The decoder `covmerge merge` inflates gzip inputs with (covmerge-input's `open`
/// rule, repeated: ISA-L when `libisal.so.2` loads and `COVMERGE_INFLATE` is not
/// `zlib-rs`); the merge also logs it at `RUST_LOG=info`.
fn merge_decoder() -> &'static str {
    if std::env::var("COVMERGE_INFLATE").is_ok_and(|v| v == "zlib-rs") {
        return "zlib-rs (COVMERGE_INFLATE=zlib-rs)";
    }
    // SAFETY: a NUL-terminated name; the handle is only tested, then closed.
    let h = unsafe { libc::dlopen(c"libisal.so.2".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        return "zlib-rs (libisal.so.2 not installed: apt-get install libisal2)";
    }
    unsafe { libc::dlclose(h) };
    "isa-l (libisal.so.2)"
}

/// SHA-256 of a gzip file's decompressed bytes.
fn content_sha(path: &Path) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg("zcat \"$0\" | sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)
        .split(' ')
        .next()
        .unwrap_or("")
        .to_string()
}

fn history_bench(a: &Args, repo: &Path, bin: &Path) {
    let spec = covmerge_integration_tests::history::HistorySpec {
        repo: repo.to_path_buf(),
        commits: a.history_commits,
        managers: a.history_managers,
        share: 0.1,
        instrumented: 0.3,
        parts: 4,
        exts: a.history_exts.clone(),
        head: "HEAD".into(),
        variant: 0,
    };
    let t0 = Instant::now();
    let h = covmerge_integration_tests::history::build(&spec, &a.history_corpus);
    let files: Vec<String> = h.inputs.iter().map(|p| p.display().to_string()).collect();
    let gz_bytes: u64 = h
        .inputs
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    println!(
        "history {} | {} commits | {} rows | {} file versions, {} distinct blobs | {:.1} MB gz (ready in {:.1} s)",
        repo.display(),
        a.history_commits,
        h.rows,
        h.versions,
        h.blobs,
        gz_bytes as f64 / 1e6,
        t0.elapsed().as_secs_f64()
    );
    println!("| source | wall s | CPU s | peak RSS MB | rows/s |");
    println!("|---|---|---|---|---|");
    let pid = std::process::id();
    let git_out = std::env::temp_dir().join(format!("covmerge-bench-{pid}-git.jsonl.gz"));
    let dir_out = std::env::temp_dir().join(format!("covmerge-bench-{pid}-dir.jsonl.gz"));
    let url = covmerge_integration_tests::history::REPO_URL;
    for _ in 0..a.runs {
        let d = measure(&mut merge_command(
            bin,
            &format!("dir:{}", h.sources.display()),
            url,
            &h.base_commit,
            &dir_out,
            &a.extra,
            &files,
        ));
        let g = measure(&mut merge_command(
            bin,
            &format!("git:{}", repo.display()),
            url,
            &h.base_commit,
            &git_out,
            &a.extra,
            &files,
        ));
        for (name, u) in [("dir:", &d), ("git:", &g)] {
            println!(
                "| {name} | {:.2} | {:.2} | {:.0} | {:.0} |",
                u.wall,
                u.cpu,
                u.max_rss_kb as f64 / 1024.0,
                h.rows as f64 / u.wall
            );
        }
        let same = content_sha(&git_out) == content_sha(&dir_out);
        println!(
            "git: / dir: CPU {:.2}× (target ≤ 1.30×), git: peak RSS {:.0} MB (budget 256 MB), results identical: {}",
            g.cpu / d.cpu,
            g.max_rss_kb as f64 / 1024.0,
            if same { "yes" } else { "NO" }
        );
        assert!(same, "git: and dir: results differ");
    }
    let _ = std::fs::remove_file(&git_out);
    let _ = std::fs::remove_file(&dir_out);
}

fn corpus_bench(a: &Args, corpus: &Path, bin: &Path) {
    let meta = corpus.join("corpus.json");
    if !meta.is_file() {
        eprintln!("generating corpus in {} ...", corpus.display());
        let t0 = Instant::now();
        covmerge_corpus::generate(&a.spec, corpus).expect("generate");
        eprintln!("generated in {:.1} s", t0.elapsed().as_secs_f64());
    }
    let text = std::fs::read_to_string(&meta).unwrap();
    let base = json_field(&text, "base_commit");
    let repo = json_field(&text, "base_repo");
    let rows: u64 = json_field(&text, "rows").parse().unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let inputs: Vec<PathBuf> = v["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| corpus.join(i.as_str().unwrap()))
        .collect();
    let gz_bytes: u64 = inputs
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let out = std::env::temp_dir().join(format!("covmerge-bench-{}.jsonl.gz", std::process::id()));
    println!(
        "corpus {} | {} rows | {:.1} MB gz in {} part(s)",
        corpus.display(),
        rows,
        gz_bytes as f64 / 1e6,
        inputs.len()
    );
    println!("covmerge inflates with {}", merge_decoder());
    println!("| command | wall s | CPU s | peak RSS MB | rows/s | MB/s (gz) |");
    println!("|---|---|---|---|---|---|");
    let row = |name: &str, u: &Usage| {
        println!(
            "| {name} | {:.2} | {:.2} | {:.0} | {:.0} | {:.1} |",
            u.wall,
            u.cpu,
            u.max_rss_kb as f64 / 1024.0,
            rows as f64 / u.wall,
            gz_bytes as f64 / 1e6 / u.wall
        );
    };
    if let Some(n) = a.fleet {
        let files: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
        for _ in 0..a.runs {
            fleet_run(a, corpus, bin, n, &files, &repo, &base, rows, gz_bytes);
        }
        return;
    }
    for _ in 0..a.runs {
        let files: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
        let mut floor = Command::new("sh");
        floor
            .arg("-c")
            .arg(format!("zcat {} | wc -l >/dev/null", files.join(" ")));
        row("zcat | wc -l", &measure(&mut floor));
        let floor2 = measure(&mut inflate_floor(&files));
        row("zcat > /dev/null, parts on all cores", &floor2);
        let src = format!("dir:{}", corpus.join("sources").display());
        let m = measure(&mut merge_command(
            bin, &src, &repo, &base, &out, &a.extra, &files,
        ));
        row("covmerge merge", &m);
        // On an idle machine both use every core, so the CPU ratio is also what the
        // wall ratio tends to; it stays meaningful when others load the machine.
        println!(
            "covmerge merge / zcat floor: {:.2}× wall, {:.2}× CPU",
            m.wall / floor2.wall,
            m.cpu / floor2.cpu
        );
        match igzip_floor(&files).map(|mut c| measure(&mut c)) {
            Some(ig) => {
                row("igzip -dc > /dev/null, parts on all cores", &ig);
                println!(
                    "covmerge merge / igzip floor: {:.2}× wall (target ≤ 1.50×), {:.2}× CPU",
                    m.wall / ig.wall,
                    m.cpu / ig.cpu
                );
            }
            None => println!("igzip: not installed (apt-get install isal)"),
        }
        match duckdb_groupby(&files).map(|mut c| measure(&mut c)) {
            Some(d) => {
                row("DuckDB bare GROUP BY GROUPING SETS", &d);
                println!(
                    "DuckDB / covmerge merge: {:.2}× wall (target ≥ 3.00×), {:.2}× CPU",
                    d.wall / m.wall,
                    d.cpu / m.cpu
                );
            }
            None => println!("DuckDB: not installed (pip install duckdb)"),
        }
    }
    let _ = std::fs::remove_file(&out);
}

#[allow(clippy::too_many_arguments)]
fn fleet_run(
    a: &Args,
    corpus: &Path,
    bin: &Path,
    n: usize,
    files: &[String],
    repo: &str,
    base: &str,
    rows: u64,
    gz_bytes: u64,
) {
    let store_dir = tempfile::tempdir().unwrap();
    let store = format!("file://{}", store_dir.path().display());
    let before = rusage();
    let mut workers: Vec<_> = (0..n)
        .map(|_| {
            Command::new(bin)
                .args(["worker", "--amqp", &a.amqp, "--store", &store])
                .args(a.worker_flags.split_whitespace())
                .env("RUST_LOG", "warn")
                .spawn()
                .expect("spawn worker")
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = store_dir.path().join("result.jsonl.gz");
    let t0 = Instant::now();
    let st = Command::new(bin)
        .args([
            "coordinator",
            "--quiet",
            "--amqp",
            &a.amqp,
            "--store",
            &store,
        ])
        .args([
            "--source",
            &format!("dir:{}", corpus.join("sources").display()),
        ])
        .args([
            "--base-repo",
            repo,
            "--base-commit",
            base,
            "--out",
            out.to_str().unwrap(),
        ])
        .args(&a.extra)
        .arg("--input")
        .args(files)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .status()
        .expect("coordinator");
    let wall = t0.elapsed().as_secs_f64();
    assert!(st.success(), "coordinator failed");
    let coord = rusage();
    for w in &workers {
        unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
    }
    for w in &mut workers {
        let _ = w.wait();
    }
    let all = rusage();
    let coord_cpu = coord.0 - before.0;
    let total_cpu = all.0 - before.0;
    println!(
        "| fleet, {n} worker(s) {} | {wall:.2} | {total_cpu:.2} (coordinator {coord_cpu:.2}, {:.1} %) | {:.0} | {:.0} | {:.1} |",
        a.worker_flags,
        100.0 * coord_cpu / total_cpu.max(1e-9),
        all.1 as f64 / 1024.0,
        rows as f64 / wall,
        gz_bytes as f64 / 1e6 / wall
    );
}
