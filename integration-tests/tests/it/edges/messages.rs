//! Status and error messages that said the wrong thing.

use super::*;

/// Runs `covmerge ARGS` (bounded), stdout and stderr to files in `dir`; returns (exit
/// code, stdout, stderr).
pub(super) fn run_in(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String, String) {
    let mut cmd = fleet_cmd(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (o, e) = (dir.join("run.stdout"), dir.join("run.stderr"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::fs::File::create(&o).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&e).unwrap()))
        .spawn()
        .unwrap();
    let st = wait_bounded(&mut child, LONG, &format!("covmerge {args:?}"));
    (
        st.code(),
        std::fs::read_to_string(o).unwrap(),
        std::fs::read_to_string(e).unwrap(),
    )
}

/// `covmerge status` of a failed job counted its failed tasks as still running
/// ("7 running, 7 failed"). Now a failed task is failed, not running.
#[test]
pub(super) fn status_counted_failed_tasks_as_running() {
    let c = crate::bad_input::Case::new();
    let hdr = crate::bad_input::HDR;
    let good = c.write("good.csv", &format!("{hdr}r,c1,a.c,f,m,1,5\n"));
    let bad = c.write("bad.csv", &format!("{hdr}r,c1,a.c,f,m,x,1\n"));
    let vh = Vhost::new("edges-status");
    let store_dir = c.path("store");
    std::fs::create_dir_all(&store_dir).unwrap();
    let store = file_store(&store_dir);
    let mut w = fleet_cmd(&["worker", "--amqp", &vh.url, "--store", &store])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(c.path("worker.log")).unwrap(),
        ))
        .spawn()
        .unwrap();
    let src = format!("dir:{}", c.path("src").display());
    let job = format!("edges-status-{}", std::process::id());
    let (code, _, err) = run_in(
        c.dir_path(),
        &[
            "coordinator",
            "--quiet",
            "--amqp",
            &vh.url,
            "--store",
            &store,
            "--job",
            &job,
            "--source",
            &src,
            "--base-repo",
            "r",
            "--base-commit",
            "c1",
            "--shards",
            "2",
            "--out",
            c.path("out.jsonl.gz").to_str().unwrap(),
            "--input",
            good.to_str().unwrap(),
            bad.to_str().unwrap(),
        ],
        &[],
    );
    let _ = w.kill();
    let _ = w.wait();
    assert_ne!(code, Some(0), "a job with a bad row completed:\n{err}");
    let (code, out, err) = run_in(
        c.dir_path(),
        &["status", "--store", &store, "--job", &job, "--json"],
        &[],
    );
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["phase"], "failed", "{v}");
    assert_eq!(v["splits"]["failed"], 1, "{v}");
    assert_eq!(
        v["splits"]["running"], 0,
        "a failed split counted as running: {v}"
    );
    assert_eq!(v["merges"]["running"], 0, "{v}");
    let (_, text, _) = run_in(
        c.dir_path(),
        &["status", "--store", &store, "--job", &job],
        &[],
    );
    assert!(text.contains("0 running, 1 failed"), "{text}");
}

/// `--input-format go-text` on a GOCOVERDIR directory said "no covmeta.* file" of a
/// directory full of them. Now it says what the directory looks like and which
/// format reads it.
#[test]
pub(super) fn go_text_on_a_covdata_dir_said_no_covmeta_file() {
    let c = crate::bad_input::Case::new();
    std::fs::create_dir_all(c.path("cov")).unwrap();
    c.write("cov/covmeta.0123456789abcdef", "not read");
    let src = format!("dir:{}", c.path("src").display());
    let (code, _, err) = run_in(
        c.dir_path(),
        &[
            "merge",
            "--quiet",
            "--source",
            &src,
            "--base-repo",
            "r",
            "--base-commit",
            "c1",
            "--input-format",
            "go-text",
            "--out",
            c.path("out.jsonl.gz").to_str().unwrap(),
            "--input",
            c.path("cov").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("looks like Go coverage data") && err.contains("go-covdata"),
        "{err}"
    );
    assert!(!err.contains("no covmeta"), "{err}");
}
