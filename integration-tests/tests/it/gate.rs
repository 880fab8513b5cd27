//! The publish gate: a part tampered with between its merge and the
//! result's assembly fails the job and publishes nothing; and a fuzz of random rows,
//! names and flag values through `covmerge merge` whose every exit-0 result passes the
//! gate and equals the oracle's merge.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use covmerge_coordinator::gate::{check_part, PartCheck, PART_BUDGET};
use covmerge_integration_tests::{bin, canon, manifest, oracle};
use covmerge_proto::group::Group;
use covmerge_proto::ShardId;

use crate::bad_input::{Case, HDR};

fn wait_for(log: &Path, what: &str, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if std::fs::read_to_string(log).is_ok_and(|s| s.contains(what)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn parts_under(dir: &Path, found: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            parts_under(&p, found);
        } else if p.to_string_lossy().contains("/parts/")
            && p.to_string_lossy().ends_with(".jsonl.gz")
        {
            found.push(p);
        }
    }
}

#[test]
fn a_part_tampered_with_before_assembly_was_published() {
    let c = Case::new();
    let input = c.write("in.csv", &format!("{HDR}r,c1,a.c,f,m,1,5\n"));
    let tmp = c.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let (out, man, log) = (
        c.path("out.jsonl.gz"),
        c.path("manifest.json"),
        c.path("stderr.log"),
    );
    let src = format!("dir:{}", c.path("src").display());
    let mut child = Command::new(bin())
        .args([
            "merge",
            "--quiet",
            "--source",
            &src,
            "--base-repo",
            "r",
            "--base-commit",
            "c1",
        ])
        .args([
            "--out",
            out.to_str().unwrap(),
            "--manifest",
            man.to_str().unwrap(),
        ])
        .args(["--input", input.to_str().unwrap()])
        .env("TMPDIR", &tmp)
        .env("RUST_LOG", "warn")
        .env("COVMERGE_FAULT_SLEEP", "assemble:3000")
        .stderr(std::fs::File::create(&log).unwrap())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_for(&log, "fault point reached", Duration::from_secs(60)),
        "the job never reached its assembly"
    );
    let mut parts = Vec::new();
    parts_under(&tmp, &mut parts);
    assert_eq!(parts.len(), 1, "{parts:?}");
    // The `*` record says 6 hits where its one manager has 5.
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(&parts[0]).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    assert!(text.starts_with(r#"{"MCR":{"Manager":"*""#), "{text}");
    let tampered = text.replacen(r#""HitCounts":[5]"#, r#""HitCounts":[6]"#, 1);
    assert_ne!(tampered, text);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(tampered.as_bytes()).unwrap();
    std::fs::write(&parts[0], gz.finish().unwrap()).unwrap();

    let status = child.wait().unwrap();
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("publish gate: invariant \"the * record is the sum of its managers\" broken")
            && err.contains("line 1, file a.c: line 1: * has 6 hits, its managers sum to 5")
            && err.contains("nothing was published"),
        "{err}"
    );
    c.no_result();
    let m = manifest(&man);
    assert_eq!(m["status"], "failed", "{m}");
    assert!(
        m["failed"][0]["error"]
            .as_str()
            .unwrap()
            .contains("publish gate"),
        "{m}"
    );
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
}

const PATHS: [&str; 5] = ["a.c", "dir/b c.c", "ü/ünï.h", "x/y/z,q.c", "gone.c"];
const MANAGERS: [&str; 8] = [
    "ci-upstream",
    "ci-kasan",
    "ci2",
    "mgr \"q\"",
    "m,comma",
    "мгр",
    "ci-*x",
    " sp ",
];
const FUNCS: [&str; 5] = ["", "f", "g", "ünï", "f,g"];

/// Base `b`, version `v` (a line inserted at the top, one changed), `gone.c` only in `v`.
fn sources(root: &Path) {
    for p in PATHS {
        let base: Vec<String> = (1..=20).map(|i| format!("line {i} of {p}")).collect();
        let mut v = base.clone();
        v.insert(0, "new".into());
        v[10] = "changed".into();
        for (commit, lines) in [("b", &base), ("v", &v)] {
            if p == "gone.c" && commit == "b" {
                continue;
            }
            let f = root.join(commit).join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, lines.join("\n") + "\n").unwrap();
        }
    }
}

/// One CSV field, quoted when it needs to be.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) || s.starts_with(' ') || s.ends_with(' ') {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Random rows: (all rows as CSV, the good ones as CSV, bad rows).
fn rows(rng: &mut Rng) -> (String, String, u64) {
    let (mut all, mut good, mut bad) = (String::from(HDR), String::from(HDR), 0);
    let n = 1 + rng.below(120);
    for _ in 0..n {
        let commit = rng.pick(&["b", "b", "v", "nosuch"]);
        let path = rng.pick(&PATHS);
        let func = rng.pick(&FUNCS);
        let manager = rng.pick(&MANAGERS);
        let sl = rng.below(24).to_string();
        let hits = match rng.below(10) {
            0 => "0".to_string(),
            _ => rng.below(1000).to_string(),
        };
        let mut row = [
            "r".to_string(),
            commit.to_string(),
            field(path),
            field(func),
            field(manager),
            sl,
            hits,
        ];
        let is_bad = rng.below(25) == 0;
        if is_bad {
            match rng.below(7) {
                0 => row[5] = "x".into(),
                1 => row[6] = "-3".into(),
                2 => row[6] = "1.5".into(),
                // Names a record of its own cannot have: the file's `*` record, none.
                3 => row[4] = "*".into(),
                4 => row[4] = String::new(),
                _ => row[2] = "../up.c".into(),
            }
            bad += 1;
        }
        let line = row.join(",") + "\n";
        all.push_str(&line);
        if !is_bad {
            good.push_str(&line);
        }
    }
    (all, good, bad)
}

/// The result `out` without its header line, checked by the publish gate as one part
/// of a one-shard job; returns its (files, instrumented, covered).
fn gate_of_result(out: &Path, groups: &[Group]) -> (u64, u64, u64) {
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(out).unwrap())
        .read_to_end(&mut text)
        .unwrap();
    let body = &text[text.iter().position(|&b| b == b'\n').unwrap() + 1..];
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(body).unwrap();
    let part = PartCheck {
        key: "result",
        shard: ShardId(0),
        shards: 1,
        groups,
        base_lines: None,
        groups_unknown: false,
    };
    let s = check_part(
        part,
        std::io::Cursor::new(gz.finish().unwrap()),
        PART_BUDGET,
    )
    .unwrap_or_else(|e| panic!("an exit-0 result fails the gate: {e}"));
    (s.files, s.instrumented, s.covered)
}

#[test]
fn random_rows_names_and_flags_give_results_that_pass_the_gate_and_equal_the_oracle() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    sources(&root);
    let src = format!("dir:{}", root.display());
    let t0 = Instant::now();
    let (mut runs, mut ok) = (0u32, 0u32);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    while runs < 200 && t0.elapsed() < Duration::from_secs(40) {
        runs += 1;
        let (all, good, bad) = rows(&mut rng);
        let input = tmp.path().join("in.csv");
        let good_input = tmp.path().join("good.csv");
        std::fs::write(&input, &all).unwrap();
        std::fs::write(&good_input, &good).unwrap();
        let (out, man) = (tmp.path().join("out.gz"), tmp.path().join("m.json"));
        let _ = std::fs::remove_file(&out);
        let shards = [1, 2, 3, 7, 64][rng.below(5) as usize].to_string();
        let workers = (1 + rng.below(4)).to_string();
        let max_bad = rng.below(bad + 2);
        let groups: Vec<Group> = match rng.below(3) {
            0 => vec![],
            1 => vec![Group::parse("ci=ci-*").unwrap()],
            _ => vec![
                Group::parse("all=*").unwrap(),
                Group::parse("odd=?*").unwrap(),
            ],
        };
        let mut args: Vec<String> = [
            "merge",
            "--quiet",
            "--source",
            &src,
            "--base-repo",
            "r",
            "--base-commit",
            "b",
            "--date-to",
            "2024-01-01",
            "--shards",
            &shards,
            "--workers",
            &workers,
            "--max-bad-rows",
            &max_bad.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for g in &groups {
            args.extend(["--group".to_string(), format!("{}={}", g.name, g.glob)]);
        }
        args.extend(
            [
                "--out",
                out.to_str().unwrap(),
                "--manifest",
                man.to_str().unwrap(),
            ]
            .map(String::from),
        );
        args.extend(["--input".to_string(), input.display().to_string()]);
        let o = Command::new(bin()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        let what = format!("run {runs}: {args:?}\n{all}\n{err}");
        assert!(
            !err.contains("publish gate"),
            "the gate refused a merge: {what}"
        );
        if !o.status.success() {
            // Only more bad rows than allowed fail a job of these rows (rows only of files
            // deleted at the base are a result: the header alone), naming
            // the input and the line (`in.csv:4: column ...`).
            assert!(bad > max_bad, "failed: {what}");
            let named = err
                .split("in.csv:")
                .skip(1)
                .any(|s| s.starts_with(|c: char| c.is_ascii_digit()));
            assert!(named && err.contains("--max-bad-rows"), "unclear: {what}");
            assert!(!out.exists(), "published: {what}");
            continue;
        }
        assert!(bad <= max_bad, "more bad rows than allowed, exit 0: {what}");
        ok += 1;
        let (files, inst, cov) = gate_of_result(&out, &groups);
        let m = manifest(&man);
        assert_eq!(
            (files, inst, cov),
            (
                m["totals"]["files"].as_u64().unwrap(),
                m["totals"]["instrumented"].as_u64().unwrap(),
                m["totals"]["covered"].as_u64().unwrap()
            ),
            "{what}"
        );
        // Group records aside, the result is the oracle's merge of the good rows.
        let mut got = canon(&out);
        for f in got["files"].as_object_mut().unwrap().values_mut() {
            let mgrs = f["managers"].as_object_mut().unwrap();
            for g in &groups {
                mgrs.remove(&g.name);
            }
        }
        let want = oracle::merge(std::slice::from_ref(&good_input), &root, "b");
        assert_eq!(got["totals"], want.canon["totals"], "{what}");
        assert_eq!(got["files"], want.canon["files"], "{what}");
        assert_eq!(m["totals"]["rows_bad"].as_u64(), Some(bad), "{what}");
    }
    assert!(
        runs >= 20 && ok >= 10,
        "{runs} runs, {ok} exit 0 in {:?}",
        t0.elapsed()
    );
    eprintln!("{runs} runs, {ok} exit 0, in {:?}", t0.elapsed());
}
