//! Partials benchmark: a quarter merged from raw rows, from daily partials and from
//! monthly roll-ups, on a generated history (`covmerge gen --days N`).
//!
//! Steps, each a measured `covmerge` process (wall, CPU, peak RSS, bytes read):
//!
//! * (a) the quarter from every day's raw rows: one `covmerge merge` over all inputs;
//! * (b) each day merged against its own commit, without and with `--partial-out`
//!   (the cost of writing a day's partial; target ≤ +15 %), keeping the day partials;
//! * (c) `covmerge rollup` of the days into 3 months, and of the months into the quarter;
//! * (d) `covmerge merge --input PARTIAL...` of the quarter from the day partials, the
//!   month partials and the quarter partial, each checked equal to (a)'s result byte for
//!   byte once the header's job fields (Session, Time, Duration, DateTo, TotalRows) are
//!   dropped.
//!
//! It prints the commands it runs (one day's for the per-day loop), a table, the partial
//! sizes (target: quarter ≤ 3× a day) and the ratios against (a) (target: ≥ 10× less
//! time and bytes). A `covmerge` without `--partial-out`, `rollup` or partial inputs
//! stops the run after (a) with a message saying which is missing.
//!
//! With `--fleet-gcs` the steps run on a fleet instead (coordinator per job, two
//! workers, RabbitMQ, fake-gcs-server behind a relay that counts the store's requests
//! and bytes): see `fleet.rs`.
//!
//! ```sh
//! cargo build --release --workspace
//! target/release/covmerge-partials-bench [--small] [--dir /tmp/covmerge-partials] [--raw-only]
//! target/release/covmerge-partials-bench --fleet-gcs [--small]
//! ```

mod fleet;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clap::Parser;
use covmerge_corpus::{CorpusSpec, BASE_REPO};
use covmerge_integration_tests::measure::{covmerge_beside_this_exe, measure, Usage};

#[derive(Parser, Debug)]
struct Args {
    /// Work directory: the corpus in `corpus/` (reused when generated from the same
    /// spec), results and partials in `out/`.
    #[arg(long, default_value = "/tmp/covmerge-partials")]
    dir: PathBuf,
    /// The quick scale (100 files of ~150 lines, 4 managers: ~20 k rows a day).
    #[arg(long)]
    small: bool,
    /// Days of history (default 90: three 30-day months).
    #[arg(long, default_value_t = 90)]
    days: usize,
    /// Override the scale's number of files.
    #[arg(long)]
    files: Option<usize>,
    /// Override the scale's number of managers.
    #[arg(long)]
    managers: Option<usize>,
    /// Share of the files each day's commit edits.
    #[arg(long, default_value_t = 0.02)]
    change_share: f64,
    /// Months the days are rolled up into (equal runs of days, the last takes the rest).
    #[arg(long, default_value_t = 3)]
    months: usize,
    /// Generate the corpus even if one of the same spec is there.
    #[arg(long)]
    regen: bool,
    /// Stop after the generation and (a).
    #[arg(long)]
    raw_only: bool,
    /// The covmerge binary (default: next to this one).
    #[arg(long)]
    covmerge: Option<PathBuf>,
    /// Run (a), (b), (c) and (d) on a fleet (a coordinator per job, two workers) with
    /// the inputs and partials on fake-gcs-server (COVMERGE_TEST_GCS_ENDPOINT, started
    /// by deploy/dev/start-gcs.sh) and the broker COVMERGE_TEST_AMQP, the store's
    /// requests and bytes counted by a relay.
    #[arg(long)]
    fleet_gcs: bool,
    /// With --fleet-gcs: run each day with --partial-out only, not also without it
    /// (the runs that price --partial-out; half of (b)'s jobs).
    #[arg(long, requires = "fleet_gcs")]
    no_plain_days: bool,
}

/// The corpus of the run: the default scale (~0.8 M rows a day, BigQuery's columns),
/// or `--small`.
fn corpus_spec(a: &Args) -> CorpusSpec {
    let (files, lines, managers, parts) = if a.small {
        (100, 150, 4, 1)
    } else {
        (200, 1000, 8, 2)
    };
    CorpusSpec {
        seed: 1,
        files: a.files.unwrap_or(files),
        lines,
        managers: a.managers.unwrap_or(managers),
        parts,
        no_git: true,
        days: a.days,
        change_share: a.change_share,
        ..CorpusSpec::default()
    }
}

/// One day of the corpus, as `corpus.json` lists it.
struct Day {
    date: String,
    commit: String,
    inputs: Vec<PathBuf>,
}

/// What the run needs of the corpus.
struct History {
    sources: PathBuf,
    base: String,
    days: Vec<Day>,
    rows: u64,
}

fn read_history(root: &Path) -> History {
    let p = root.join("corpus.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let v: serde_json::Value = serde_json::from_str(&text).expect("corpus.json");
    let days = v["days"]
        .as_array()
        .expect("a history corpus (days)")
        .iter()
        .map(|d| Day {
            date: d["date"].as_str().expect("date").to_string(),
            commit: d["commit"].as_str().expect("commit").to_string(),
            inputs: d["inputs"]
                .as_array()
                .expect("inputs")
                .iter()
                .map(|i| root.join(i.as_str().expect("input")))
                .collect(),
        })
        .collect();
    History {
        sources: root.join(v["sources"].as_str().expect("sources")),
        base: v["base_commit"].as_str().expect("base").to_string(),
        days,
        rows: v["rows"].as_u64().expect("rows"),
    }
}

/// `covmerge gen` of the run's corpus into `root`.
fn gen_cmd(bin: &Path, spec: &CorpusSpec, root: &Path) -> Command {
    let mut c = Command::new(bin);
    c.arg("gen").arg("--out").arg(root);
    for (flag, v) in [
        ("--seed", spec.seed.to_string()),
        ("--files", spec.files.to_string()),
        ("--lines", spec.lines.to_string()),
        ("--managers", spec.managers.to_string()),
        ("--parts", spec.parts.to_string()),
        ("--days", spec.days.to_string()),
        ("--change-share", spec.change_share.to_string()),
    ] {
        c.args([flag, &v]);
    }
    c.arg("--no-git");
    c.stdout(Stdio::null());
    c
}

/// Generates the corpus with `covmerge gen` unless one of the same spec is there;
/// returns it and the generation's row (None when reused).
fn ensure_corpus(a: &Args, bin: &Path, root: &Path) -> (History, Option<Row>) {
    let spec = corpus_spec(a);
    let stamp = root.join("bench-spec.txt");
    let mut c = gen_cmd(bin, &spec, root);
    let want = shown(&c);
    let have = std::fs::read_to_string(&stamp).unwrap_or_default();
    if !a.regen && have == want {
        println!("reusing the corpus in {}", root.display());
        return (read_history(root), None);
    }
    let _ = std::fs::remove_file(&stamp);
    std::fs::create_dir_all(root).expect("corpus directory");
    println!("(gen) {want}");
    let usage = measure(&mut c);
    std::fs::write(&stamp, want).expect("stamp");
    let h = read_history(root);
    let all: Vec<PathBuf> = h.days.iter().flat_map(|d| d.inputs.clone()).collect();
    let written = bytes_of(&all);
    println!(
        "(gen) {} days, {} rows, {:.1} MB gz in {:.1} s ({:.1} s CPU): {:.2} M rows/s, {:.1} MB/s gz",
        h.days.len(),
        h.rows,
        written as f64 / 1e6,
        usage.wall,
        usage.cpu,
        h.rows as f64 / usage.wall / 1e6,
        written as f64 / usage.wall / 1e6
    );
    let row = Row {
        step: "covmerge gen".into(),
        runs: 1,
        usage,
        read: 0,
        written,
        same: None,
    };
    (h, Some(row))
}

/// Total size of files, or of every file in directories.
fn bytes_of(paths: &[PathBuf]) -> u64 {
    paths
        .iter()
        .map(|p| {
            if p.is_dir() {
                let files: Vec<PathBuf> = std::fs::read_dir(p)
                    .expect("read_dir")
                    .map(|e| e.expect("entry").path())
                    .collect();
                bytes_of(&files)
            } else {
                std::fs::metadata(p).map_or(0, |m| m.len())
            }
        })
        .sum()
}

/// What the covmerge binary can do with partials.
struct Abilities {
    partial_out: bool,
    rollup: bool,
    partial_input: bool,
}

fn help(bin: &Path, sub: &str) -> Option<String> {
    let out = Command::new(bin).args([sub, "--help"]).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn abilities(bin: &Path) -> Abilities {
    let merge =
        help(bin, "merge").unwrap_or_else(|| panic!("{} merge --help failed", bin.display()));
    let rollup = help(bin, "rollup").unwrap_or_default();
    // The `--input-format` values, as clap lists them: `[possible values: auto, csv, ...]`.
    let partial_input = merge
        .split("--input-format")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .is_some_and(|vals| vals.contains("partial"));
    Abilities {
        partial_out: merge.contains("--partial-out"),
        rollup: rollup.contains("--partial-out"),
        partial_input,
    }
}

/// Says what is missing for (b)-(d), if anything.
fn missing(bin: &Path, ab: &Abilities) -> Vec<String> {
    let b = bin.display();
    let mut out = Vec::new();
    if !ab.partial_out {
        out.push(format!("covmerge {b} has no --partial-out (merge)"));
    }
    if !ab.rollup {
        out.push(format!("covmerge {b} has no rollup --partial-out"));
    }
    if !ab.partial_input {
        out.push(format!(
            "covmerge {b} has no partial input (merge --input-format partial)"
        ));
    }
    out
}

/// `covmerge merge --quiet` of `inputs` against `base`, for the period ending `date_to`.
fn merge_cmd(
    bin: &Path,
    h: &History,
    base: &str,
    date_to: &str,
    days: usize,
    out: &Path,
    inputs: &[PathBuf],
) -> Command {
    let mut c = Command::new(bin);
    c.arg("merge")
        .arg("--quiet")
        .arg("--source")
        .arg(format!("dir:{}", h.sources.display()))
        .args(["--base-repo", BASE_REPO, "--base-commit", base])
        .args(["--date-to", date_to, "--duration", &days.to_string()])
        .args(["--shards", SHARDS])
        .arg("--out")
        .arg(out)
        .arg("--input")
        .args(inputs);
    c.stdout(Stdio::null());
    c
}

/// The shard count of every merge and partial: a result is the same byte for byte for
/// the same rows *and shard count* (the parts are concatenated in shard order), and the
/// default count follows the inputs' size, which partials shrink.
const SHARDS: &str = "8";

/// `covmerge rollup --input PARTIAL... --partial-out OUT`.
fn rollup_cmd(bin: &Path, inputs: &[PathBuf], out: &Path) -> Command {
    let mut c = Command::new(bin);
    c.arg("rollup")
        .args(["--shards", SHARDS])
        .arg("--input")
        .args(inputs)
        .arg("--partial-out")
        .arg(out);
    c.stdout(Stdio::null());
    c
}

/// The command line, with a long input list shortened to its first two and a count.
fn shown(c: &Command) -> String {
    let mut words = vec![c.get_program().to_string_lossy().into_owned()];
    let args: Vec<String> = c
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut i = 0;
    while i < args.len() {
        words.push(args[i].clone());
        if args[i] == "--input" {
            let n = args[i + 1..]
                .iter()
                .take_while(|a| !a.starts_with("--"))
                .count();
            if n > 3 {
                words.push(format!("{} {} ... ({n} inputs)", args[i + 1], args[i + 2]));
                i += n;
            }
        }
        i += 1;
    }
    words.join(" ")
}

/// A result's decompressed header (without the job fields of one run) and records.
fn comparable(path: &Path) -> (serde_json::Value, Vec<u8>) {
    let text = covmerge_integration_tests::gunzip(path);
    let nl = text.iter().position(|&b| b == b'\n').unwrap_or(text.len());
    let mut head: serde_json::Value = serde_json::from_slice(&text[..nl]).expect("header");
    let obj = head.as_object_mut().expect("header object");
    for k in ["Session", "Time", "Duration", "DateTo", "TotalRows"] {
        obj.remove(k);
    }
    (head, text[nl..].to_vec())
}

/// Whether `got` is `want` but for the header's job fields; prints where they part.
fn same_result(want: &Path, got: &Path) -> bool {
    let (wh, wr) = comparable(want);
    let (gh, gr) = comparable(got);
    if wh != gh {
        println!("  header differs: {wh} / {gh}");
        return false;
    }
    if wr != gr {
        let line = wr
            .iter()
            .zip(&gr)
            .take_while(|(a, b)| a == b)
            .filter(|(a, _)| **a == b'\n')
            .count();
        println!(
            "  records differ from line {} ({} / {} bytes)",
            line + 2,
            wr.len(),
            gr.len()
        );
        return false;
    }
    true
}

/// One row of the table.
struct Row {
    step: String,
    runs: usize,
    usage: Usage,
    read: u64,
    written: u64,
    same: Option<bool>,
}

fn add(total: &mut Usage, u: &Usage) {
    total.wall += u.wall;
    total.cpu += u.cpu;
    total.max_rss_kb = total.max_rss_kb.max(u.max_rss_kb);
}

fn zero() -> Usage {
    Usage {
        wall: 0.0,
        cpu: 0.0,
        max_rss_kb: 0,
    }
}

fn fresh(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("create");
}

fn main() {
    let a = Args::parse();
    let bin = a.covmerge.clone().unwrap_or_else(covmerge_beside_this_exe);
    let ab = abilities(&bin);
    let lacking = missing(&bin, &ab);
    for m in &lacking {
        println!("note: {m}; steps (b)-(d) will not run");
    }
    let (h, generated) = ensure_corpus(&a, &bin, &a.dir.join("corpus"));
    if a.fleet_gcs {
        // The coordinator takes merge's job flags (--partial-out, partial inputs).
        if !lacking.is_empty() {
            eprintln!("error: {}: the fleet steps cannot run", lacking.join("; "));
            std::process::exit(2);
        }
        let ok = fleet::run(&a, &bin, &h, &a.dir.join("fleet-out"));
        std::process::exit(if ok { 0 } else { 1 });
    }
    let out = a.dir.join("out");
    fresh(&out);
    let mut rows = Vec::new();
    let raw = step_a(&bin, &h, &out, &mut rows);
    rows.extend(generated);
    if a.raw_only || !lacking.is_empty() {
        print_table(&rows, &h);
        if !lacking.is_empty() && !a.raw_only {
            eprintln!("error: {}: steps (b)-(d) cannot run", lacking.join("; "));
            std::process::exit(2);
        }
        return;
    }
    let day_parts = step_b(&bin, &h, &out, &mut rows);
    let (months, quarter) = step_c(&bin, &a, &day_parts, &out, &mut rows);
    let mut ok = true;
    for (name, inputs) in [
        ("day", day_parts.clone()),
        ("month", months.clone()),
        ("quarter", vec![quarter.clone()]),
    ] {
        ok &= step_d(&bin, &h, &out, name, &inputs, &raw, &mut rows);
    }
    print_table(&rows, &h);
    print_sizes(&day_parts, &months, &quarter, &rows);
    if !ok {
        eprintln!("error: a merge of partials differs from the merge of the raw rows");
        std::process::exit(1);
    }
}

/// (a) the quarter from every day's raw rows.
fn step_a(bin: &Path, h: &History, out: &Path, rows: &mut Vec<Row>) -> PathBuf {
    let all: Vec<PathBuf> = h.days.iter().flat_map(|d| d.inputs.clone()).collect();
    let last = h.days.last().expect("a day");
    let res = out.join("quarter-raw.jsonl.gz");
    let mut c = merge_cmd(bin, h, &h.base, &last.date, h.days.len(), &res, &all);
    println!("(a) {}", shown(&c));
    let usage = measure(&mut c);
    rows.push(Row {
        step: "(a) quarter from raw rows".into(),
        runs: 1,
        usage,
        read: bytes_of(&all),
        written: bytes_of(std::slice::from_ref(&res)),
        same: None,
    });
    res
}

/// (b) each day without and with `--partial-out`; returns the day partials.
fn step_b(bin: &Path, h: &History, out: &Path, rows: &mut Vec<Row>) -> Vec<PathBuf> {
    let (mut without, mut with) = (zero(), zero());
    let mut read = 0;
    let mut parts = Vec::new();
    let mut overheads = Vec::new();
    fresh(&out.join("days"));
    for (d, day) in h.days.iter().enumerate() {
        let res = out.join("days").join(format!("{d:03}.jsonl.gz"));
        let part = out.join("partials").join(format!("day-{d:03}"));
        let mut plain = merge_cmd(bin, h, &day.commit, &day.date, 1, &res, &day.inputs);
        let mut writing = merge_cmd(bin, h, &day.commit, &day.date, 1, &res, &day.inputs);
        writing.arg("--partial-out").arg(&part);
        if d == 0 {
            println!("(b) {}", shown(&plain));
            println!("(b) {}", shown(&writing));
        }
        let u0 = measure(&mut plain);
        let u1 = measure(&mut writing);
        overheads.push(u1.wall / u0.wall - 1.0);
        add(&mut without, &u0);
        add(&mut with, &u1);
        read += bytes_of(&day.inputs);
        parts.push(part);
    }
    overheads.sort_by(f64::total_cmp);
    let n = h.days.len();
    println!(
        "(b) --partial-out adds {:+.1} % wall, {:+.1} % CPU over {n} days (per day: median {:+.1} %, \
         max {:+.1} %; target ≤ +15 %)",
        (with.wall / without.wall - 1.0) * 100.0,
        (with.cpu / without.cpu - 1.0) * 100.0,
        overheads[n / 2] * 100.0,
        overheads[n - 1] * 100.0
    );
    let written = bytes_of(&parts);
    rows.push(Row {
        step: "(b) days, no partial".into(),
        runs: n,
        usage: without,
        read,
        written: 0,
        same: None,
    });
    rows.push(Row {
        step: "(b) days, --partial-out".into(),
        runs: n,
        usage: with,
        read,
        written,
        same: None,
    });
    parts
}

/// (c) the days rolled up into months, the months into the quarter.
fn step_c(
    bin: &Path,
    a: &Args,
    days: &[PathBuf],
    out: &Path,
    rows: &mut Vec<Row>,
) -> (Vec<PathBuf>, PathBuf) {
    let n = a.months.clamp(1, days.len());
    let per = days.len() / n;
    let mut months = Vec::new();
    let mut total = zero();
    let mut read = 0;
    for g in 0..n {
        // The last month takes the days left over.
        let end = if g + 1 == n {
            days.len()
        } else {
            (g + 1) * per
        };
        let chunk = &days[g * per..end];
        let m = out.join("partials").join(format!("month-{g}"));
        let mut c = rollup_cmd(bin, chunk, &m);
        if g == 0 {
            println!("(c) {}", shown(&c));
        }
        add(&mut total, &measure(&mut c));
        read += bytes_of(chunk);
        months.push(m);
    }
    rows.push(Row {
        step: "(c) roll up days into months".into(),
        runs: months.len(),
        usage: total,
        read,
        written: bytes_of(&months),
        same: None,
    });
    let quarter = out.join("partials").join("quarter");
    let mut c = rollup_cmd(bin, &months, &quarter);
    println!("(c) {}", shown(&c));
    let usage = measure(&mut c);
    rows.push(Row {
        step: "(c) roll up months into the quarter".into(),
        runs: 1,
        usage,
        read: bytes_of(&months),
        written: bytes_of(std::slice::from_ref(&quarter)),
        same: None,
    });
    (months, quarter)
}

/// (d) the quarter from partials, checked against (a)'s result.
fn step_d(
    bin: &Path,
    h: &History,
    out: &Path,
    name: &str,
    inputs: &[PathBuf],
    raw: &Path,
    rows: &mut Vec<Row>,
) -> bool {
    let last = h.days.last().expect("a day");
    let res = out.join(format!("quarter-from-{name}.jsonl.gz"));
    let mut c = merge_cmd(bin, h, &h.base, &last.date, h.days.len(), &res, inputs);
    println!("(d) {}", shown(&c));
    let usage = measure(&mut c);
    let same = same_result(raw, &res);
    rows.push(Row {
        step: format!("(d) quarter from {} {name} partial(s)", inputs.len()),
        runs: 1,
        usage,
        read: bytes_of(inputs),
        written: bytes_of(std::slice::from_ref(&res)),
        same: Some(same),
    });
    same
}

fn print_table(rows: &[Row], h: &History) {
    println!();
    println!("{} days, {} raw rows", h.days.len(), h.rows);
    println!(
        "| step | runs | wall s | CPU s | peak RSS MB | read MB | written MB | wall, read vs (a) | = (a) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let raw = &rows[0];
    for r in rows {
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.0} | {:.2} | {:.2} | {} | {} |",
            r.step,
            r.runs,
            r.usage.wall,
            r.usage.cpu,
            r.usage.max_rss_kb as f64 / 1024.0,
            r.read as f64 / 1e6,
            r.written as f64 / 1e6,
            if r.read == 0 {
                "".to_string()
            } else {
                format!(
                    "{:.1}× / {:.1}× less",
                    raw.usage.wall / r.usage.wall,
                    raw.read as f64 / r.read as f64
                )
            },
            match r.same {
                Some(true) => "identical",
                Some(false) => "DIFFERS",
                None => "",
            }
        );
    }
}

fn print_sizes(days: &[PathBuf], months: &[PathBuf], quarter: &Path, rows: &[Row]) {
    let sizes: Vec<u64> = days
        .iter()
        .map(|d| bytes_of(std::slice::from_ref(d)))
        .collect();
    let day_mean = sizes.iter().sum::<u64>() as f64 / sizes.len().max(1) as f64;
    let day_max = sizes.iter().copied().max().unwrap_or(0);
    let month_mean = bytes_of(months) as f64 / months.len().max(1) as f64;
    let q = bytes_of(&[quarter.to_path_buf()]) as f64;
    println!();
    println!(
        "partial sizes: day {:.2} MB mean ({:.2} max), month {:.2} MB mean, quarter {:.2} MB: \
         quarter {:.2}× a mean day (target ≤ 3×)",
        day_mean / 1e6,
        day_max as f64 / 1e6,
        month_mean / 1e6,
        q / 1e6,
        q / day_mean
    );
    let raw = &rows[0];
    for r in rows.iter().filter(|r| r.same.is_some()) {
        println!(
            "{}: {:.1}× less wall, {:.1}× less CPU, {:.1}× fewer bytes read than (a) (target ≥ 10×)",
            r.step,
            raw.usage.wall / r.usage.wall,
            raw.usage.cpu / r.usage.cpu,
            raw.read as f64 / r.read.max(1) as f64
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn result(dir: &Path, name: &str, head: &str, records: &str) -> PathBuf {
        let p = dir.join(name);
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&p).unwrap(),
            flate2::Compression::fast(),
        );
        gz.write_all(format!("{head}\n{records}").as_bytes())
            .unwrap();
        gz.finish().unwrap();
        p
    }

    /// A merge of partials runs as another job (session, time, period, rows read):
    /// those header fields are not compared, everything else is, byte for byte.
    #[test]
    fn results_compare_without_the_job_fields() {
        let dir = tempfile::tempdir().unwrap();
        let rec = "{\"MCR\":{\"Manager\":\"*\",\"FilePath\":\"a.c\"}}\n";
        let head = |session: &str, commit: &str, rows: u64| {
            format!(
                r#"{{"Session":"{session}","Time":"2024-09-30T00:00:00Z","Namespace":"upstream","Repo":"r","Commit":"{commit}","Duration":90,"DateTo":"2024-09-30","TotalRows":{rows}}}"#
            )
        };
        let raw = result(dir.path(), "raw", &head("s1", "c", 10), rec);
        let same = result(dir.path(), "same", &head("s2", "c", 7), rec);
        let commit = result(dir.path(), "commit", &head("s1", "d", 10), rec);
        let records = result(
            dir.path(),
            "records",
            &head("s1", "c", 10),
            &rec.replace("a.c", "b.c"),
        );
        assert!(same_result(&raw, &same));
        assert!(!same_result(&raw, &commit));
        assert!(!same_result(&raw, &records));
    }
}
