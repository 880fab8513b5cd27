//! contract §8 against a fake dashboard that answers as syzkaller's does and the GCS
//! emulator: create_upload_url, the result written to that object, save_coverage and
//! `created N DB rows`; retries (5xx, 429) and no retry on other 4xx; on failure the
//! result stays, its location and the `covmerge notify` command are printed, and
//! notify re-sends it without merging again. The key never appears in the output.
//! Which failures a call retries is checked on the client alone (5xx, 429 yes; other
//! 4xx no).

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use covmerge_coordinator::dashboard::Dashboard;
use covmerge_integration_tests::dashboard::FakeDashboard;
use covmerge_integration_tests::fleet::{self, coordinator_run, worker};
use covmerge_integration_tests::{
    bin, canon, canon_bytes, fixture, gcs, gunzip, gunzip_bytes, merge_ok,
};

const KEY: &str = "sup3r-s3cret-dashboard-key";

fn merge_args(out: Option<&Path>) -> Vec<String> {
    let d = fixture("semantics");
    let mut a: Vec<String> = vec![
        "merge".into(),
        "--quiet".into(),
        "--source".into(),
        format!("dir:{}", d.join("sources").display()),
        "--base-repo".into(),
        "git://example/linux".into(),
        "--base-commit".into(),
        "base".into(),
        "--date-to".into(),
        "2024-04-08".into(),
        "--input".into(),
        d.join("input-a.csv").display().to_string(),
        d.join("input-b.csv.gz").display().to_string(),
    ];
    if let Some(o) = out {
        a.extend(["--out".into(), o.display().to_string()]);
    }
    a
}

fn run(args: &[String], dash: &FakeDashboard, tmp: &Path, extra: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .args([
            "--dashboard",
            &dash.url,
            "--dashboard-client",
            "ci-covmerge",
        ])
        .args(extra)
        .env("COVMERGE_DASHBOARD_KEY", KEY)
        .env("GOOGLE_SERVICE_ACCOUNT", gcs::credentials(tmp))
        .env("RUST_LOG", "debug")
        .current_dir(tmp)
        .output()
        .unwrap()
}

fn texts(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

fn assert_no_key(o: &Output) {
    let (out, err) = texts(o);
    assert!(!out.contains(KEY) && !err.contains(KEY), "the key leaked");
}

fn local_result(tmp: &Path) -> Vec<u8> {
    let out = tmp.join("local.jsonl.gz");
    let a = merge_args(Some(&out));
    let a: Vec<&str> = a[2..].iter().map(|s| s.as_str()).collect();
    merge_ok(&a);
    gunzip(&out)
}

/// The whole flow without `--out`: one 503 on create_upload_url and one 429 on
/// save_coverage are retried; the object the dashboard named holds the result (checked
/// line by line against Go's field names by the fake), and its row count is printed.
#[test]
fn dashboard_flow_writes_the_upload_object_and_prints_db_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let want = local_result(tmp.path());
    let b = gcs::bucket("dash");
    let dash = FakeDashboard::start(KEY, &b, false);
    dash.fail("create_upload_url", &[503]);
    dash.fail("save_coverage", &[429]);
    let o = run(&merge_args(None), &dash, tmp.path(), &[]);
    let (stdout, stderr) = texts(&o);
    assert!(o.status.success(), "{stderr}");
    assert_no_key(&o);
    assert_eq!(dash.calls_of("create_upload_url"), 2);
    assert_eq!(dash.calls_of("save_coverage"), 2);
    for c in dash.calls() {
        assert_eq!(c.client, "ci-covmerge");
        assert_eq!(c.key, KEY);
    }
    let uploads = dash.uploads();
    assert_eq!(uploads.len(), 1);
    let saved = dash.saved();
    assert_eq!(saved.len(), 1);
    assert_eq!(
        saved[0].0, uploads[0],
        "save_coverage names the upload object"
    );
    assert!(
        stdout.contains(&format!("created {} DB rows", saved[0].1)),
        "{stdout}"
    );
    let (bucket, key) = uploads[0].split_once('/').unwrap();
    assert!(gunzip_bytes(&gcs::download(bucket, key)) == want);
}

/// save_coverage answers 403: not retried, the job fails naming the object that keeps
/// the result and the notify command; that command (the dashboard healthy again)
/// re-sends the same object without a new upload and prints the rows.
#[test]
fn dashboard_4xx_is_not_retried_and_notify_resends_the_kept_result() {
    let tmp = tempfile::tempdir().unwrap();
    let want = local_result(tmp.path());
    let b = gcs::bucket("dash4xx");
    let dash = FakeDashboard::start(KEY, &b, true);
    dash.fail("save_coverage", &[403]);
    let out = tmp.path().join("out.jsonl.gz");
    let o = run(&merge_args(Some(&out)), &dash, tmp.path(), &[]);
    let (_, stderr) = texts(&o);
    assert!(!o.status.success());
    assert_no_key(&o);
    assert_eq!(dash.calls_of("save_coverage"), 1, "a 403 is final");
    let upload = dash.uploads()[0].clone();
    assert!(upload.starts_with("gs://"));
    assert!(stderr.contains("HTTP 403"), "{stderr}");
    assert!(
        stderr.contains(&format!("the result stays at {upload}")),
        "{stderr}"
    );
    assert!(gunzip(&out) == want, "--out is written too");
    let cmd = stderr
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("COVMERGE_DASHBOARD_KEY=... covmerge ")
        })
        .unwrap_or_else(|| panic!("no notify command in:\n{stderr}"));
    let args: Vec<&str> = cmd.split_whitespace().collect();
    assert_eq!(&args[..1], &["notify"]);
    assert!(cmd.ends_with(&format!("--upload {upload}")), "{cmd}");
    let o = Command::new(bin())
        .args(&args)
        .env("COVMERGE_DASHBOARD_KEY", KEY)
        .env("GOOGLE_SERVICE_ACCOUNT", gcs::credentials(tmp.path()))
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    let (stdout, stderr) = texts(&o);
    assert!(o.status.success(), "{stderr}");
    assert_no_key(&o);
    assert_eq!(dash.uploads().len(), 1, "notify reuses the written object");
    let saved = dash.saved();
    assert_eq!(saved, vec![(upload.clone(), saved[0].1)]);
    assert!(
        stdout.contains(&format!("created {} DB rows", saved[0].1)),
        "{stdout}"
    );
}

/// save_coverage processed but its reply lost (the connection closed, as a timeout
/// would leave it): it was sent again and the result ingested twice. Now it is not
/// sent again: the job fails saying it may have been processed, and the result and
/// the notify command are kept. create_upload_url is still retried after a lost reply.
#[test]
fn save_coverage_whose_reply_was_lost_was_sent_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let b = gcs::bucket("dashlost");
    let dash = FakeDashboard::start(KEY, &b, true);
    dash.fail("create_upload_url", &[0]);
    dash.fail("save_coverage", &[0]);
    let out = tmp.path().join("out.jsonl.gz");
    let o = run(&merge_args(Some(&out)), &dash, tmp.path(), &[]);
    let (_, stderr) = texts(&o);
    assert!(!o.status.success(), "{stderr}");
    assert_no_key(&o);
    assert_eq!(dash.calls_of("create_upload_url"), 2, "idempotent: retried");
    assert_eq!(dash.saved().len(), 1, "ingested once");
    assert_eq!(dash.calls_of("save_coverage"), 1, "{stderr}");
    assert!(stderr.contains("may have been processed"), "{stderr}");
    assert!(stderr.contains("covmerge notify"), "{stderr}");
}

/// create_upload_url keeps failing (500 on every retry): the result written to
/// `--out` stays there and `covmerge notify --result` uploads and saves it.
#[test]
fn create_upload_url_failing_keeps_out_and_notify_result_sends_it() {
    let tmp = tempfile::tempdir().unwrap();
    let want = local_result(tmp.path());
    let b = gcs::bucket("dashcreate");
    let dash = FakeDashboard::start(KEY, &b, false);
    dash.fail("create_upload_url", &[500; 5]);
    let out = tmp.path().join("out.jsonl.gz");
    let o = run(&merge_args(Some(&out)), &dash, tmp.path(), &[]);
    let (_, stderr) = texts(&o);
    assert!(!o.status.success());
    assert_eq!(
        dash.calls_of("create_upload_url"),
        5,
        "retried, then given up"
    );
    assert_eq!(dash.calls_of("save_coverage"), 0);
    assert!(
        stderr.contains(&format!("the result stays at {}", out.display())),
        "{stderr}"
    );
    assert!(gunzip(&out) == want);
    let o = Command::new(bin())
        .args([
            "notify",
            "--dashboard",
            &dash.url,
            "--dashboard-client",
            "ci",
        ])
        .args(["--result", out.to_str().unwrap()])
        .env("COVMERGE_DASHBOARD_KEY", KEY)
        .env("GOOGLE_SERVICE_ACCOUNT", gcs::credentials(tmp.path()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", texts(&o).1);
    let u = dash.uploads();
    assert_eq!(u.len(), 1);
    let (bucket, key) = u[0].split_once('/').unwrap();
    assert!(gunzip_bytes(&gcs::download(bucket, key)) == want);
    assert!(texts(&o).0.contains("created "));
}

/// Without `--out`, when no upload location can be had, the result is not lost: it is
/// written to `./covmerge-<job>.jsonl.gz` and the error names that file.
#[test]
fn no_out_and_no_upload_url_keeps_the_result_in_the_working_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let want = local_result(tmp.path());
    let b = gcs::bucket("dashkeep");
    let dash = FakeDashboard::start(KEY, &b, false);
    dash.fail("create_upload_url", &[500, 500, 500, 500, 500]);
    let o = run(&merge_args(None), &dash, tmp.path(), &[]);
    let (_, stderr) = texts(&o);
    assert!(!o.status.success());
    let kept: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("covmerge-") && n.ends_with(".jsonl.gz"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        stderr.contains(&format!("the result stays at {}", kept[0])),
        "{stderr}"
    );
    assert!(gunzip(&tmp.path().join(&kept[0])) == want);
}

/// Fleet mode: the coordinator streams its concatenation of the parts straight to the
/// dashboard's object (its store is a GCS bucket too), without `--out`. save_coverage
/// fails (403): the coordinator fails, spill is gone, and `covmerge notify --store
/// --job` finds the written object in the job's manifest and sends it.
#[test]
fn fleet_coordinator_streams_the_result_to_the_dashboard_object() {
    let _g = fleet::lock();
    let tmp = tempfile::tempdir().unwrap();
    local_result(tmp.path());
    let want = canon(&tmp.path().join("local.jsonl.gz"));
    let b = gcs::bucket("dashfleet");
    let dash = FakeDashboard::start(KEY, &b, false);
    dash.fail("save_coverage", &[403]);
    let creds = gcs::credentials(tmp.path());
    let creds = creds.to_str().unwrap();
    let store = format!("gs://{b}/fleet");
    let _w = worker(
        tmp.path(),
        1,
        &store,
        &[],
        &[("GOOGLE_SERVICE_ACCOUNT", creds)],
    );
    let amqp = fleet::amqp();
    let a = merge_args(None);
    let mut args: Vec<&str> = a[2..].iter().map(|s| s.as_str()).collect();
    args.extend_from_slice(&[
        "--shards",
        "3",
        "--amqp",
        &amqp,
        "--store",
        &store,
        "--dashboard",
        &dash.url,
        "--dashboard-client",
        "ci-covmerge",
    ]);
    let env = [
        ("GOOGLE_SERVICE_ACCOUNT", creds),
        ("COVMERGE_DASHBOARD_KEY", KEY),
    ];
    let o = coordinator_run(&args, &env, Duration::from_secs(180));
    let (stdout, stderr) = texts(&o);
    assert!(!o.status.success(), "save_coverage was refused");
    assert_no_key(&o);
    let job = stdout.lines().next().unwrap().strip_prefix("job ").unwrap();
    let u = dash.uploads();
    assert_eq!(u.len(), 1);
    assert!(
        stderr.contains(&format!("the result stays at gs://{}", u[0])),
        "{stderr}"
    );
    let (bucket, key) = u[0].split_once('/').unwrap();
    assert_eq!(canon_bytes(&gcs::download(bucket, key)), want);
    assert!(
        gcs::list(&b, &format!("fleet/jobs/{job}/spill")).is_empty(),
        "spill left behind"
    );
    let o = Command::new(bin())
        .args([
            "notify",
            "--dashboard",
            &dash.url,
            "--dashboard-client",
            "ci",
        ])
        .args(["--store", &store, "--job", job])
        .env("COVMERGE_DASHBOARD_KEY", KEY)
        .env("GOOGLE_SERVICE_ACCOUNT", creds)
        .output()
        .unwrap();
    let (stdout, stderr) = texts(&o);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(
        dash.uploads().len(),
        1,
        "the object in the manifest is reused"
    );
    let saved = dash.saved();
    assert_eq!(saved[0].0, u[0]);
    assert!(
        stdout.contains(&format!("created {} DB rows", saved[0].1)),
        "{stdout}"
    );
}

/// One dashboard call against the fake: 500, 503 and 429 are retried (the second
/// request succeeds); 400, 401, 403, 404 and 408 end the call after one request (contract
/// §8); a 503 that lasts ends it after the policy's 5 requests. The key is in no error.
#[test]
fn dashboard_call_retries_server_errors_and_throttling_but_not_client_errors() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dash = FakeDashboard::start(KEY, "dash-retry", true);
    let mut d = Dashboard::new(&dash.url, "ci-covmerge", KEY.to_string());
    d.retry.first = Duration::from_millis(1);
    d.retry.max_delay = Duration::from_millis(4);
    let calls = || dash.calls_of("create_upload_url");
    for code in [500, 503, 429] {
        let before = calls();
        dash.fail("create_upload_url", &[code]);
        let got: String = rt
            .block_on(d.call("create_upload_url", None))
            .unwrap_or_else(|e| panic!("HTTP {code} then 200: {e}"));
        assert!(got.starts_with("gs://dash-retry/"), "{got}");
        assert_eq!(calls() - before, 2, "HTTP {code} is retried once");
    }
    for code in [400, 401, 403, 404, 408] {
        let before = calls();
        dash.fail("create_upload_url", &[code]);
        let err = rt
            .block_on(d.call::<String>("create_upload_url", None))
            .unwrap_err();
        assert_eq!(calls() - before, 1, "HTTP {code} is final: {err}");
        assert!(err.contains(&format!("HTTP {code}")), "{err}");
        assert!(!err.contains(KEY), "{err}");
    }
    let before = calls();
    dash.fail("create_upload_url", &[503; 6]);
    let err = rt
        .block_on(d.call::<String>("create_upload_url", None))
        .unwrap_err();
    assert_eq!(calls() - before, 5, "{err}");
    assert!(err.contains("HTTP 503"), "{err}");
    // The sixth 503 is still scripted: the next call sees it, then succeeds.
    let _: String = rt.block_on(d.call("create_upload_url", None)).unwrap();
}
