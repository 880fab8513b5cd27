//! Helpers for covmerge's end-to-end tests: locating the `covmerge` binary, running
//! it, and reducing a result to a canonical form that ignores record order but checks
//! syzkaller's exact field names.

/// A fake syzkaller dashboard (create_upload_url, save_coverage).
pub mod dashboard;
/// Processes of a test fleet.
pub mod fleet;
/// A generated corpus as one job: the setup the end-to-end tests share.
pub mod fleet_corpus;
/// The GCS emulator.
pub mod gcs;
/// A benchmark corpus over a real git history.
pub mod history;
/// Wall time, CPU and peak RSS of one child process, for the bench binaries.
pub mod measure;
/// A plain second merge that the property tests compare covmerge with.
pub mod oracle;
/// A TCP relay that cuts connections, for outages.
pub mod relay;
/// Inputs that grow one dimension other than rows (memory tests and bench).
pub mod shapes;

pub use fleet_corpus::{CorpusJob, FleetCorpus};

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Map, Value};

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The `covmerge` binary built by the same `cargo test`/`nextest` invocation.
pub fn bin() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    // The test binary lives in target/<profile>/deps; the binary in target/<profile>.
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|d| d.parent()).map(Path::to_path_buf);
    for dir in profile_dir
        .into_iter()
        .chain([target.join("debug"), target.join("release")])
    {
        let p = dir.join("covmerge");
        if p.is_file() {
            return p;
        }
    }
    panic!("covmerge binary not found: build the workspace (cargo build) before the tests");
}

/// The path of fixture `name` under `integration-tests/fixtures`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// Runs `covmerge ARGS`.
pub fn covmerge(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run covmerge")
}

/// Runs `covmerge merge` and asserts success; returns stdout.
pub fn merge_ok(args: &[&str]) -> String {
    let mut full = vec!["merge", "--quiet"];
    full.extend_from_slice(args);
    let out = covmerge(&full);
    assert!(
        out.status.success(),
        "covmerge {:?} failed:\n{}",
        full,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The decompressed bytes of a (multi-member) gzip file.
pub fn gunzip(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(&raw[..])
        .read_to_end(&mut out)
        .expect("valid gzip");
    out
}

/// The shard files (`*.parquet`) of a partial directory, by name, with their bytes.
pub fn partial_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .map(|p: PathBuf| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    v.sort();
    v
}

/// The decompressed bytes of (multi-member) gzip data.
pub fn gunzip_bytes(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(raw)
        .read_to_end(&mut out)
        .expect("valid gzip");
    out
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
    k.sort();
    k
}

fn sorted(xs: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = xs.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// Canonical form of a result: `{"files": {path: {"managers": {mgr: {line: hits}},
/// "funcs": {name: [lines]}}}, "totals": {...}}` — the same shape as the project's
/// snapshot files. Panics on anything syzkaller's dashboard would not read.
pub fn canon(path: &Path) -> Value {
    let text = String::from_utf8(gunzip(path)).expect("utf-8");
    let mut lines = text.lines();
    let head: Value = serde_json::from_str(lines.next().expect("header line")).unwrap();
    assert_eq!(
        keys(&head),
        sorted(&[
            "Session",
            "Time",
            "Namespace",
            "Repo",
            "Commit",
            "Duration",
            "DateTo",
            "TotalRows"
        ])
    );
    // path → (manager → line → hits, function → lines)
    type PerFile = (Map<String, Value>, Map<String, Value>);
    let mut files: BTreeMap<String, PerFile> = BTreeMap::new();
    let (mut inst, mut cov) = (0u64, 0u64);
    for (n, l) in lines.enumerate() {
        let o: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("line {}: {e}", n + 2));
        assert_eq!(keys(&o), sorted(&["MCR", "FL"]), "line {}", n + 2);
        match (&o["MCR"], &o["FL"]) {
            (Value::Object(m), Value::Null) => {
                assert_eq!(
                    keys(&o["MCR"]),
                    sorted(&["Manager", "FilePath", "FileData"])
                );
                let d = &m["FileData"];
                assert_eq!(
                    keys(d),
                    sorted(&["Instrumented", "Covered", "LinesInstrumented", "HitCounts"])
                );
                let li: Vec<u64> = serde_json::from_value(d["LinesInstrumented"].clone()).unwrap();
                let hc: Vec<u64> = serde_json::from_value(d["HitCounts"].clone()).unwrap();
                assert_eq!(li.len(), hc.len());
                assert_eq!(d["Instrumented"].as_u64().unwrap(), li.len() as u64);
                assert_eq!(
                    d["Covered"].as_u64().unwrap(),
                    hc.iter().filter(|&&h| h > 0).count() as u64
                );
                assert!(
                    li.windows(2).all(|w| w[0] < w[1]),
                    "LinesInstrumented ascending"
                );
                let path = m["FilePath"].as_str().unwrap().to_string();
                let mgr = m["Manager"].as_str().unwrap().to_string();
                let per: Map<String, Value> = li
                    .iter()
                    .zip(&hc)
                    .map(|(l, h)| (l.to_string(), json!(h)))
                    .collect();
                if mgr == "*" {
                    inst += li.len() as u64;
                    cov += hc.iter().filter(|&&h| h > 0).count() as u64;
                }
                let e = files.entry(path).or_default();
                assert!(
                    e.0.insert(mgr, Value::Object(per)).is_none(),
                    "duplicate MCR"
                );
            }
            (Value::Null, Value::Object(f)) => {
                assert_eq!(keys(&o["FL"]), sorted(&["FilePath", "FuncName", "Lines"]));
                let e = files
                    .entry(f["FilePath"].as_str().unwrap().to_string())
                    .or_default();
                let mut lines: Vec<u64> = serde_json::from_value(f["Lines"].clone()).unwrap();
                lines.sort();
                assert!(e
                    .1
                    .insert(f["FuncName"].as_str().unwrap().to_string(), json!(lines))
                    .is_none());
            }
            _ => panic!("line {}: exactly one of MCR/FL must be set", n + 2),
        }
    }
    let files: Map<String, Value> = files
        .into_iter()
        .map(|(p, (m, f))| {
            assert!(m.contains_key("*"), "{p}: no '*' record");
            (p, json!({"managers": m, "funcs": f}))
        })
        .collect();
    json!({"files": files, "totals": {"instrumented": inst, "covered": cov}})
}

/// [`canon`] of gzip bytes held in memory.
pub fn canon_bytes(gz: &[u8]) -> Value {
    let tmp = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tmp.path(), gz).unwrap();
    canon(tmp.path())
}

/// The manifest at `path`.
pub fn manifest(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}
