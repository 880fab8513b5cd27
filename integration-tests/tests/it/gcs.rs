//! `gs://` against the GCS emulator (fake-gcs-server) that `deploy/dev/test.sh` starts:
//! inputs listed from a glob, the embedded result written to GCS, a fleet job whose
//! store is a GCS bucket. Every result must equal the one merged from local files.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use covmerge_integration_tests::fleet::{self, coordinator_run, worker};
use covmerge_integration_tests::{
    bin, canon, canon_bytes, fixture, gcs, gunzip, gunzip_bytes, manifest, merge_ok,
};

/// The semantics fixture merged from local files: (decompressed result, manifest).
fn local_result(tmp: &Path) -> Vec<u8> {
    let d = fixture("semantics");
    let out = tmp.join("local.jsonl.gz");
    merge_ok(&[
        "--source",
        &format!("dir:{}", d.join("sources").display()),
        "--base-repo",
        "git://example/linux",
        "--base-commit",
        "base",
        "--date-to",
        "2024-04-08",
        "--out",
        out.to_str().unwrap(),
        "--input",
        d.join("input-a.csv").to_str().unwrap(),
        d.join("input-b.csv.gz").to_str().unwrap(),
    ]);
    gunzip(&out)
}

/// Uploads the fixture's inputs under `in/`, next to an object the glob must skip.
fn upload_inputs(bucket: &str) {
    let d = fixture("semantics");
    gcs::upload(bucket, "in/input-a.csv", &d.join("input-a.csv"));
    gcs::upload(bucket, "in/input-b.csv.gz", &d.join("input-b.csv.gz"));
    gcs::upload(bucket, "in/readme.txt", &d.join("expected.json"));
}

/// Inputs from `gs://bucket/in/input-*` and the result to `gs://…`: the object holds
/// exactly the bytes-after-gunzip of the local merge, and the manifest names the two
/// listed inputs only.
#[test]
fn gcs_glob_inputs_and_result_equal_local_files() {
    let tmp = tempfile::tempdir().unwrap();
    let want = local_result(tmp.path());
    let b = gcs::bucket("embedded");
    upload_inputs(&b);
    let d = fixture("semantics");
    let man = tmp.path().join("manifest.json");
    let o = Command::new(bin())
        .args(["merge", "--quiet", "--source"])
        .arg(format!("dir:{}", d.join("sources").display()))
        .args([
            "--base-repo",
            "git://example/linux",
            "--base-commit",
            "base",
        ])
        .args([
            "--date-to",
            "2024-04-08",
            "--manifest",
            man.to_str().unwrap(),
        ])
        .args(["--out", &format!("gs://{b}/out/result.jsonl.gz")])
        .args(["--input", &format!("gs://{b}/in/input-*")])
        .env("GOOGLE_SERVICE_ACCOUNT", gcs::credentials(tmp.path()))
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        gunzip_bytes(&gcs::download(&b, "out/result.jsonl.gz")) == want,
        "GCS result differs from the local one"
    );
    let m = manifest(&man);
    assert_eq!(
        m["inputs"],
        serde_json::json!([
            format!("gs://{b}/in/input-a.csv"),
            format!("gs://{b}/in/input-b.csv.gz")
        ])
    );
    assert_eq!(m["result"], format!("gs://{b}/out/result.jsonl.gz"));
}

/// A glob that matches nothing is refused before any work, naming the pattern.
#[test]
fn gcs_glob_matching_nothing_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let b = gcs::bucket("empty");
    let d = fixture("semantics");
    let o = Command::new(bin())
        .args(["merge", "--quiet", "--source"])
        .arg(format!("dir:{}", d.join("sources").display()))
        .args(["--base-repo", "r", "--base-commit", "base"])
        .args(["--out", tmp.path().join("o.gz").to_str().unwrap()])
        .args(["--input", &format!("gs://{b}/nothing-*")])
        .env("GOOGLE_SERVICE_ACCOUNT", gcs::credentials(tmp.path()))
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("nothing-*"), "{err}");
}

/// Two workers and a coordinator whose store is a GCS bucket, inputs listed from it,
/// `--out` in it: the result object, and the copy under the job's prefix, hold the
/// local merge's records (in shard order); the spill objects are gone (deleted through
/// the JSON API).
#[test]
fn fleet_with_gcs_store_equals_local_files() {
    let _g = fleet::lock();
    let tmp = tempfile::tempdir().unwrap();
    local_result(tmp.path());
    let want = canon(&tmp.path().join("local.jsonl.gz"));
    let b = gcs::bucket("fleet");
    upload_inputs(&b);
    let creds = gcs::credentials(tmp.path());
    let creds = creds.to_str().unwrap();
    let env = [("GOOGLE_SERVICE_ACCOUNT", creds)];
    let store = format!("gs://{b}/fleet");
    let _w1 = worker(tmp.path(), 1, &store, &[], &env);
    let _w2 = worker(tmp.path(), 2, &store, &["--split-threads", "1"], &env);
    let d = fixture("semantics");
    let source = format!("dir:{}", d.join("sources").display());
    let amqp = fleet::amqp();
    let out = format!("gs://{b}/out/result.jsonl.gz");
    let input = format!("gs://{b}/in/input-*");
    let o = coordinator_run(
        &[
            "--source",
            &source,
            "--base-repo",
            "git://example/linux",
            "--base-commit",
            "base",
            "--date-to",
            "2024-04-08",
            "--shards",
            "4",
            "--amqp",
            &amqp,
            "--store",
            &store,
            "--out",
            &out,
            "--input",
            &input,
        ],
        &env,
        Duration::from_secs(180),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8(o.stdout).unwrap();
    let job = stdout.lines().next().unwrap().strip_prefix("job ").unwrap();
    assert_eq!(canon_bytes(&gcs::download(&b, "out/result.jsonl.gz")), want);
    assert_eq!(
        canon_bytes(&gcs::download(
            &b,
            &format!("fleet/jobs/{job}/result.jsonl.gz")
        )),
        want
    );
    let m: serde_json::Value = serde_json::from_slice(&gcs::download(
        &b,
        &format!("fleet/jobs/{job}/manifest.json"),
    ))
    .unwrap();
    assert_eq!(m["status"], "complete");
    assert_eq!(m["shards"].as_array().unwrap().len(), 4);
    assert!(
        gcs::list(&b, &format!("fleet/jobs/{job}/spill")).is_empty(),
        "spill chunks left behind"
    );
}

/// `covmerge sources` exports a git repository's files to `gs://…` and `merge
/// --source store:gs://…` merges from that snapshot alone, as from the repository.
#[test]
fn store_source_in_gcs_merges_like_the_repository() {
    let s = covmerge_integration_tests::FleetCorpus::local(5)
        .git()
        .files(6)
        .lines(80)
        .commits(4)
        .managers(2)
        .parts(1)
        .build();
    let c = &s.corpus;
    let git = c.git.clone().expect("corpus with git");
    let creds = gcs::credentials(s.dir());
    let b = gcs::bucket("src");
    let snapshot = format!("gs://{b}/sources");
    let o = Command::new(bin())
        .args([
            "sources",
            "--git",
            git.to_str().unwrap(),
            "--store",
            &snapshot,
        ])
        .arg("--commit")
        .args(&c.commits)
        .env("GOOGLE_SERVICE_ACCOUNT", &creds)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let merge = |source: &str, out: &Path| {
        let o = Command::new(bin())
            .args([
                "merge",
                "--quiet",
                "--source",
                source,
                "--base-repo",
                &c.base_repo,
            ])
            .args(["--base-commit", &c.base_commit, "--date-to", "2024-04-08"])
            .args(["--out", out.to_str().unwrap(), "--input"])
            .args(&c.inputs)
            .env("GOOGLE_SERVICE_ACCOUNT", &creds)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        gunzip(out)
    };
    let want = merge(&s.git_source(), &s.path("git.gz"));
    let got = merge(&format!("store:{snapshot}"), &s.path("store.gz"));
    assert!(got == want, "store: source in GCS merges differently");
    assert!(want.len() > 1000);
}
