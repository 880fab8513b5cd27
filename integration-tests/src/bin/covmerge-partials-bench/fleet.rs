//! `--fleet-gcs`: the bench's steps on a fleet on this machine, its inputs and partials
//! on fake-gcs-server.
//!
//! The day inputs are uploaded to a fresh bucket (`gs://B/raw/dNNN/`, not counted).
//! The fleet, a coordinator per job and two workers on a RabbitMQ vhost of the bench's
//! own, reaches the bucket only through a relay that counts the requests and the bytes
//! each way (headers included); the jobs' own objects (tasks' outputs, spill chunks,
//! the result) are in `gs://B/fleet`. File versions come from the corpus's local
//! `dir:` source, which the workers on this machine read.
//!
//! * (a) the quarter from every day's raw rows, `--input gs://B/raw/*`;
//! * (b) each day from `gs://B/raw/dNNN/*`, without and with
//!   `--partial-out gs://B/partials/dNNN/`;
//! * (c) the day partials rolled up into months and the quarter by `covmerge rollup`,
//!   which reads partials from local directories only: the day partials are downloaded
//!   and the roll-ups uploaded to `gs://B/partials/` (neither counted);
//! * (d) the quarter on the fleet from the 90 day partials, the month partials and the
//!   quarter partial on gs://, at the days' `--shards` (each merge task reads its
//!   shard's files itself: no split task, no spill), each compared with (a)'s result.
//!
//! A step's CPU is the coordinator's (from `wait4`) plus what the workers' counters
//! (`/proc/PID/stat` utime + stime) grew by while it ran; the emulator's (found by its
//! port in `/proc/*/cmdline`) and the relay's (this process's threads) are shown
//! apart. Each job's requests, in order with their times, go to `logs/STEP.requests.txt`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use covmerge_corpus::BASE_REPO;
use covmerge_integration_tests::fleet::{Proc, Vhost};
use covmerge_integration_tests::gcs;
use covmerge_integration_tests::measure::measure;
use covmerge_integration_tests::relay::Relay;

use super::{fresh, rollup_cmd, same_result, shown, Args, History, SHARDS};

/// What the store was sent and answered during a step, through the relay.
#[derive(Clone, Default)]
struct Traffic {
    requests: u64,
    /// Bytes from the store (replies, headers included).
    read: u64,
    /// Bytes to the store (requests and their bodies).
    written: u64,
    /// Requests by kind (`GET spill`, `PUT part`, `LIST`, ...).
    kinds: BTreeMap<String, u64>,
}

impl Traffic {
    fn since(&self, before: &Traffic) -> Traffic {
        let mut kinds = self.kinds.clone();
        for (k, n) in &before.kinds {
            *kinds.entry(k.clone()).or_default() -= n;
        }
        kinds.retain(|_, n| *n > 0);
        Traffic {
            requests: self.requests - before.requests,
            read: self.read - before.read,
            written: self.written - before.written,
            kinds,
        }
    }

    fn add(&mut self, o: &Traffic) {
        self.requests += o.requests;
        self.read += o.read;
        self.written += o.written;
        for (k, n) in &o.kinds {
            *self.kinds.entry(k.clone()).or_default() += n;
        }
    }

    /// Requests of spill objects (written by split tasks, read by merge tasks).
    fn spill(&self) -> u64 {
        self.kinds
            .iter()
            .filter(|(k, _)| k.ends_with(" spill"))
            .map(|(_, n)| n)
            .sum()
    }
}

/// One measured run (or the sum of a step's runs).
#[derive(Clone, Default)]
struct Run {
    wall: f64,
    /// The coordinator's (or the roll-up's) CPU.
    coordinator: f64,
    /// What the workers used meanwhile.
    workers: f64,
    /// What the GCS emulator used meanwhile.
    emulator: f64,
    /// What the relay (this process) used meanwhile.
    relay: f64,
    /// Seconds from the start to the first task's attempt record (the job's planning).
    planning: f64,
    traffic: Traffic,
}

impl Run {
    fn add(&mut self, o: &Run) {
        self.wall += o.wall;
        self.coordinator += o.coordinator;
        self.workers += o.workers;
        self.emulator += o.emulator;
        self.relay += o.relay;
        self.planning += o.planning;
        self.traffic.add(&o.traffic);
    }

    /// Coordinator and workers.
    fn cpu(&self) -> f64 {
        self.coordinator + self.workers
    }
}

/// One row of the table.
struct Row {
    step: String,
    runs: usize,
    run: Run,
    /// Whether the step ran on the fleet (else a local `covmerge rollup`).
    fleet: bool,
    same: Option<bool>,
}

/// The workers, the relay in front of the emulator and the bucket.
struct Fleet {
    /// Dropped (killed) before the vhost they use.
    workers: Vec<Proc>,
    vhost: Vhost,
    relay: Relay,
    bin: PathBuf,
    bucket: String,
    /// The service-account file pointing at the relay.
    creds: PathBuf,
    logs: PathBuf,
    /// The emulator's process, if found on this machine.
    emulator: Option<u32>,
}

/// The process of this machine whose command line has `-port PORT` and names
/// fake-gcs-server.
fn emulator_pid(port: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.find_map(|e| {
        let e = e.ok()?;
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
        let named = args
            .first()
            .is_some_and(|a| String::from_utf8_lossy(a).contains("fake-gcs-server"));
        let on_port = args
            .windows(2)
            .any(|w| w[0] == b"-port" && w[1] == port.as_bytes());
        (named && on_port).then_some(pid)
    })
}

/// CPU seconds this process has used so far.
fn own_cpu() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// CPU seconds (user + system) process `pid` has used so far.
fn proc_cpu(pid: u32) -> f64 {
    let p = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    // Fields after the command name, which is in parentheses: state is the first,
    // utime and stime the 12th and 13th (fields 14 and 15 of proc(5)).
    let rest = &stat[stat.rfind(')').expect("comm") + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime");
    ticks as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

impl Fleet {
    fn start(bin: &Path, logs: &Path) -> Fleet {
        let endpoint = gcs::endpoint();
        let answers = Command::new("curl")
            .args([
                "-fsS",
                "-o",
                "/dev/null",
                &format!("{endpoint}/storage/v1/b"),
            ])
            .status()
            .is_ok_and(|s| s.success());
        if !answers {
            eprintln!(
                "error: no GCS emulator answers at {endpoint} (COVMERGE_TEST_GCS_ENDPOINT): \
                 start one with deploy/dev/start-gcs.sh"
            );
            std::process::exit(2);
        }
        let upstream = endpoint
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let relay = Relay::start(&upstream);
        relay.rewrite_host(&upstream);
        let creds = gcs::credentials_at(logs, &format!("http://{}", relay.addr()));
        let mut f = Fleet {
            workers: Vec::new(),
            vhost: Vhost::new("partials-bench"),
            relay,
            bin: bin.to_path_buf(),
            bucket: gcs::bucket("pbench"),
            creds,
            logs: logs.to_path_buf(),
            emulator: emulator_pid(upstream.rsplit(':').next().unwrap_or("")),
        };
        for n in 1..=2 {
            let mut c = Command::new(bin);
            c.args(["worker", "--amqp", &f.vhost.url, "--store", &f.store()])
                .env("GOOGLE_SERVICE_ACCOUNT", &f.creds)
                .env("RUST_LOG", "info");
            let p = Proc::spawn(
                c,
                logs.join(format!("worker-{n}.log")),
                &format!("worker {n}"),
            );
            p.wait_log("worker started", Duration::from_secs(30));
            f.workers.push(p);
        }
        println!(
            "fleet: 2 workers (pids {}), broker vhost {}, store gs://{}/fleet via relay {} -> {endpoint} \
             (emulator pid {:?})",
            f.workers
                .iter()
                .map(|w| w.child.id().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            f.vhost.name,
            f.bucket,
            f.relay.addr(),
            f.emulator
        );
        f
    }

    /// The jobs' store.
    fn store(&self) -> String {
        format!("gs://{}/fleet", self.bucket)
    }

    fn gs(&self, key: &str) -> String {
        format!("gs://{}/{key}", self.bucket)
    }

    fn traffic(&self) -> Traffic {
        let kinds = self.relay.requests();
        let (written, read) = self.relay.bytes();
        Traffic {
            requests: kinds.values().sum(),
            read,
            written,
            kinds,
        }
    }

    fn workers_cpu(&self) -> f64 {
        self.workers.iter().map(|w| proc_cpu(w.child.id())).sum()
    }

    /// Runs `cmd` (a covmerge process through the relay) to completion, measured; its
    /// stderr goes to `log` in the logs directory.
    fn measured(&self, mut cmd: Command, log: &str) -> Run {
        let log = self.logs.join(log);
        cmd.env("GOOGLE_SERVICE_ACCOUNT", &self.creds)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        let (t0, w0, r0) = (self.traffic(), self.workers_cpu(), own_cpu());
        let e0 = self.emulator.map_or(0.0, proc_cpu);
        let start = Instant::now();
        let usage = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| measure(&mut cmd)))
            .unwrap_or_else(|_| {
                panic!(
                    "{} failed; its log {}:\n{}",
                    shown(&cmd),
                    log.display(),
                    std::fs::read_to_string(&log).unwrap_or_default()
                )
            });
        let (workers, relay) = (self.workers_cpu() - w0, own_cpu() - r0);
        let emulator = self.emulator.map_or(0.0, proc_cpu) - e0;
        let planning = self.write_timeline(start, &log.with_extension("requests.txt"));
        Run {
            wall: usage.wall,
            coordinator: usage.cpu,
            workers,
            emulator,
            relay,
            planning,
            traffic: self.traffic().since(&t0),
        }
    }

    /// Writes the requests since `start` to `path` (seconds since the start, request
    /// line); returns the seconds until the first attempt record was written.
    fn write_timeline(&self, start: Instant, path: &Path) -> f64 {
        let mut text = String::new();
        let mut planning = None;
        for (t, line) in self.relay.timeline().iter().filter(|(t, _)| *t >= start) {
            let s = t.duration_since(start).as_secs_f64();
            if planning.is_none() && line.starts_with("POST") && line.contains("attempts") {
                planning = Some(s);
            }
            text.push_str(&format!("{s:9.3} {line}\n"));
        }
        std::fs::write(path, text).expect("requests file");
        planning.unwrap_or(0.0)
    }

    /// A coordinator of the job with `args`, on the fleet.
    fn coordinator(&self, args: &[String]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(["coordinator", "--quiet", "--amqp", &self.vhost.url])
            .args(["--store", &self.store()])
            .args(args);
        c
    }
}

/// The flags of a job merging `inputs` against `commit` for the `days` ending `date_to`.
fn job_args(
    h: &History,
    commit: &str,
    date_to: &str,
    days: usize,
    out: &Path,
    inputs: &[String],
) -> Vec<String> {
    let mut a: Vec<String> = [
        "--source",
        &format!("dir:{}", h.sources.display()),
        "--base-repo",
        BASE_REPO,
        "--base-commit",
        commit,
        "--date-to",
        date_to,
        "--duration",
        &days.to_string(),
        "--shards",
        SHARDS,
        "--out",
        &out.display().to_string(),
        "--input",
    ]
    .map(String::from)
    .to_vec();
    a.extend_from_slice(inputs);
    a
}

/// Uploads every day's inputs to `raw/dNNN/` (straight to the emulator, not counted).
fn upload_days(h: &History, bucket: &str) {
    let t0 = Instant::now();
    let mut bytes = 0;
    let mut n = 0;
    for (d, day) in h.days.iter().enumerate() {
        let mut names = std::collections::BTreeSet::new();
        for p in &day.inputs {
            let name = p.file_name().expect("file name").to_string_lossy();
            assert!(
                names.insert(name.to_string()),
                "day {d}: two inputs named {name}"
            );
            gcs::upload(bucket, &format!("raw/d{d:03}/{name}"), p);
            bytes += std::fs::metadata(p).map_or(0, |m| m.len());
            n += 1;
        }
    }
    println!(
        "(upload) {n} day inputs, {:.1} MB, to gs://{bucket}/raw/dNNN/ in {:.1} s",
        bytes as f64 / 1e6,
        t0.elapsed().as_secs_f64()
    );
}

/// Runs the fleet steps; returns whether every merge of partials equals (a)'s.
pub(crate) fn run(a: &Args, bin: &Path, h: &History, out: &Path) -> bool {
    fresh(out);
    let logs = out.join("logs");
    fresh(&logs);
    let f = Fleet::start(bin, &logs);
    upload_days(h, &f.bucket);
    let mut rows = Vec::new();
    let raw = step_a(&f, h, out, &mut rows);
    let day_parts = step_b(&f, a, h, out, &mut rows);
    let mut sets = vec![("day", day_parts)];
    sets.extend(step_c(&f, a, bin, h, out, &mut rows));
    let mut ok = true;
    for (name, inputs) in &sets {
        ok &= step_d(&f, h, out, name, inputs, &raw, &mut rows);
    }
    print_table(&rows, h, &f);
    ok
}

/// (a) the quarter from every day's raw rows on gs://.
fn step_a(f: &Fleet, h: &History, out: &Path, rows: &mut Vec<Row>) -> PathBuf {
    let last = h.days.last().expect("a day");
    let res = out.join("quarter-raw.jsonl.gz");
    let inputs = [f.gs("raw/*")];
    let args = job_args(h, &h.base, &last.date, h.days.len(), &res, &inputs);
    let c = f.coordinator(&args);
    println!("(a) {}", shown(&c));
    let run = f.measured(c, "a.log");
    let head = covmerge_integration_tests::gunzip(&res);
    let nl = head.iter().position(|&b| b == b'\n').expect("a header");
    let head: serde_json::Value = serde_json::from_slice(&head[..nl]).expect("header");
    assert_eq!(
        head["TotalRows"].as_u64(),
        Some(h.rows),
        "(a) read another number of rows than the corpus holds"
    );
    rows.push(Row {
        step: "(a) quarter from raw rows".into(),
        runs: 1,
        run,
        fleet: true,
        same: None,
    });
    res
}

/// (b) each day without and with `--partial-out`; returns the day partials' URLs.
fn step_b(f: &Fleet, a: &Args, h: &History, out: &Path, rows: &mut Vec<Row>) -> Vec<String> {
    let (mut without, mut with) = (Run::default(), Run::default());
    let mut walls = Vec::new();
    let mut parts = Vec::new();
    let res = out.join("day.jsonl.gz");
    for (d, day) in h.days.iter().enumerate() {
        let inputs = [f.gs(&format!("raw/d{d:03}/*"))];
        let args = job_args(h, &day.commit, &day.date, 1, &res, &inputs);
        let part = f.gs(&format!("partials/d{d:03}/"));
        let plain = f.coordinator(&args);
        let mut writing = f.coordinator(&args);
        writing.args(["--partial-out", &part]);
        if d == 0 {
            println!("(b) {}", shown(&plain));
            println!("(b) {}", shown(&writing));
        }
        if !a.no_plain_days {
            let r0 = f.measured(plain, "b.log");
            walls.push(r0.wall);
            without.add(&r0);
        }
        let r1 = f.measured(writing, "b-partial.log");
        with.add(&r1);
        parts.push(part);
    }
    let n = h.days.len();
    if walls.is_empty() {
        rows.push(Row {
            step: "(b) days, --partial-out".into(),
            runs: n,
            run: with,
            fleet: true,
            same: None,
        });
        return parts;
    }
    walls.sort_by(f64::total_cmp);
    println!(
        "(b) a day's job without --partial-out: wall min {:.2} s, median {:.2} s, max {:.2} s; \
         --partial-out adds {:+.1} % wall, {:+.1} % CPU over {n} days",
        walls[0],
        walls[n / 2],
        walls[n - 1],
        (with.wall / without.wall - 1.0) * 100.0,
        (with.cpu() / without.cpu() - 1.0) * 100.0
    );
    for (step, run) in [
        ("(b) days, no partial", without),
        ("(b) days, --partial-out", with),
    ] {
        rows.push(Row {
            step: step.into(),
            runs: n,
            run,
            fleet: true,
            same: None,
        });
    }
    parts
}

/// Downloads the partial under `prefix` of the bucket into `dir` (not counted).
fn download_partial(bucket: &str, prefix: &str, dir: &Path) {
    fresh(dir);
    for name in gcs::list(bucket, prefix) {
        let rel = name.strip_prefix(prefix).expect("listed under the prefix");
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("partial directory");
        std::fs::write(&p, gcs::download(bucket, &name)).expect("partial file");
    }
}

/// Uploads the partial in `dir` under `prefix` of the bucket, `partial.json` last (not
/// counted).
fn upload_partial(bucket: &str, prefix: &str, dir: &Path) {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                todo.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort_by_key(|p| p.ends_with("partial.json"));
    for p in files {
        let rel = p.strip_prefix(dir).expect("under the partial");
        gcs::upload(bucket, &format!("{prefix}{}", rel.display()), &p);
    }
}

/// (c) the day partials rolled up into months and the quarter (locally: `covmerge
/// rollup` reads local partials only), uploaded; returns the month and quarter
/// partials' URLs.
fn step_c(
    f: &Fleet,
    a: &Args,
    bin: &Path,
    h: &History,
    out: &Path,
    rows: &mut Vec<Row>,
) -> Vec<(&'static str, Vec<String>)> {
    let local = out.join("partials");
    let days: Vec<PathBuf> = (0..h.days.len())
        .map(|d| {
            let dir = local.join(format!("day-{d:03}"));
            download_partial(&f.bucket, &format!("partials/d{d:03}/"), &dir);
            dir
        })
        .collect();
    let n = a.months.clamp(1, days.len());
    let per = days.len() / n;
    let mut months = Vec::new();
    let mut month_urls = Vec::new();
    let mut total = Run::default();
    for g in 0..n {
        // The last month takes the days left over.
        let end = if g + 1 == n {
            days.len()
        } else {
            (g + 1) * per
        };
        let m = local.join(format!("month-{g}"));
        let c = rollup_cmd(bin, &days[g * per..end], &m);
        if g == 0 {
            println!("(c) {}", shown(&c));
        }
        total.add(&f.measured(c, "c.log"));
        let key = format!("partials/m{g}/");
        upload_partial(&f.bucket, &key, &m);
        month_urls.push(f.gs(&key));
        months.push(m);
    }
    let quarter = local.join("quarter");
    let c = rollup_cmd(bin, &months, &quarter);
    println!("(c) {}", shown(&c));
    let q = f.measured(c, "c.log");
    upload_partial(&f.bucket, "partials/q/", &quarter);
    for (step, runs, run) in [
        ("(c) roll up days into months (local)", n, total),
        ("(c) roll up months into the quarter (local)", 1, q),
    ] {
        rows.push(Row {
            step: step.into(),
            runs,
            run,
            fleet: false,
            same: None,
        });
    }
    vec![
        ("month", month_urls),
        ("quarter", vec![f.gs("partials/q/")]),
    ]
}

/// (d) the quarter on the fleet from partials on gs://, checked against (a)'s result.
fn step_d(
    f: &Fleet,
    h: &History,
    out: &Path,
    name: &str,
    inputs: &[String],
    raw: &Path,
    rows: &mut Vec<Row>,
) -> bool {
    let last = h.days.last().expect("a day");
    let res = out.join(format!("quarter-from-{name}.jsonl.gz"));
    let args = job_args(h, &h.base, &last.date, h.days.len(), &res, inputs);
    let c = f.coordinator(&args);
    println!("(d) {}", shown(&c));
    let run = f.measured(c, &format!("d-{name}.log"));
    let same = same_result(raw, &res);
    rows.push(Row {
        step: format!("(d) quarter from {} {name} partial(s)", inputs.len()),
        runs: 1,
        run,
        fleet: true,
        same: Some(same),
    });
    same
}

fn print_table(rows: &[Row], h: &History, f: &Fleet) {
    println!();
    println!(
        "{} days, {} raw rows; fleet of 2 workers, store gs://{}/ through a counting relay",
        h.days.len(),
        h.rows,
        f.bucket
    );
    println!(
        "| step | runs | wall s | of which planning s | CPU s: coordinator + workers | emulator, \
         relay CPU s | requests | read MB | written MB | spill requests | = (a) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let t = &r.run.traffic;
        let (req, read, written, spill) = if r.fleet {
            (
                t.requests.to_string(),
                format!("{:.2}", t.read as f64 / 1e6),
                format!("{:.2}", t.written as f64 / 1e6),
                t.spill().to_string(),
            )
        } else {
            ("local".into(), "".into(), "".into(), "".into())
        };
        let ru = &r.run;
        println!(
            "| {} | {} | {:.2} | {} | {:.2} = {:.2} + {:.2} | {:.2}, {:.2} | {req} | {read} | \
             {written} | {spill} | {} |",
            r.step,
            r.runs,
            ru.wall,
            if r.fleet {
                format!("{:.2}", ru.planning)
            } else {
                String::new()
            },
            ru.cpu(),
            ru.coordinator,
            ru.workers,
            ru.emulator,
            ru.relay,
            match r.same {
                Some(true) => "identical",
                Some(false) => "DIFFERS",
                None => "",
            }
        );
    }
    println!();
    let raw = &rows[0];
    let kinds = |t: &Traffic| {
        t.kinds
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "{}: requests by kind: {}",
        raw.step,
        kinds(&raw.run.traffic)
    );
    for r in rows.iter().filter(|r| r.same.is_some()) {
        let (ra, rd) = (&raw.run, &r.run);
        println!("{}: requests by kind: {}", r.step, kinds(&rd.traffic));
        println!(
            "  (a)/(d): {:.1}× less wall, {:.1}× less CPU, {:.1}× fewer requests, {:.1}× fewer \
             bytes read, {:.1}× fewer bytes written (target ≥ 10×)",
            ra.wall / rd.wall,
            ra.cpu() / rd.cpu(),
            ra.traffic.requests as f64 / rd.traffic.requests.max(1) as f64,
            ra.traffic.read as f64 / rd.traffic.read.max(1) as f64,
            ra.traffic.written as f64 / rd.traffic.written.max(1) as f64
        );
    }
}
