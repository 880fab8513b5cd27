//! Workers with their own `--source`: a worker whose source lacks some (not
//! all) files of the base counted them as deleted for its shards, alone, and the job
//! published a result without them. Each merge now names the base as its worker's
//! source holds it; merges that disagree fail the job and publish nothing.

use covmerge_integration_tests::fleet::{self, coordinator_run, worker};
use covmerge_integration_tests::{gunzip, merge_ok};
use std::path::Path;

use super::{file_store, LONG};

/// `ROOT/c1/` with `f0.c` .. `f7.c` (all but `skip`), 5 lines each.
fn tree(root: &Path, skip: Option<usize>) -> String {
    let c = root.join("c1/k");
    std::fs::create_dir_all(&c).unwrap();
    for i in (0..8).filter(|&i| Some(i) != skip) {
        let text: String = (1..=5).map(|l| format!("int v{i}_{l};\n")).collect();
        std::fs::write(c.join(format!("f{i}.c")), text).unwrap();
    }
    format!("dir:{}", root.display())
}

/// An input of 8 files `k/f0.c` .. `k/f7.c` at `c1`, 5 lines each, two managers.
fn input(path: &Path) -> String {
    let mut csv =
        String::from("kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\n");
    for i in 0..8 {
        for l in 1..=5 {
            csv.push_str(&format!("r,c1,k/f{i}.c,f{i},m{},{l},{}\n", l % 2, i + l));
        }
    }
    std::fs::write(path, csv).unwrap();
    path.display().to_string()
}

/// The job's arguments: `source`, `input`, 4 shards, into `out`; on a fleet's `store`
/// unless it is empty.
fn job(source: &str, input: &str, out: &Path, store: &str) -> Vec<String> {
    let mut a: Vec<String> = [
        "--source",
        source,
        "--base-repo",
        "r",
        "--base-commit",
        "c1",
        "--shards",
        "4",
        "--date-to",
        "2024-04-08",
        "--input",
        input,
        "--out",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.push(out.display().to_string());
    if !store.is_empty() {
        a.extend([
            "--amqp".into(),
            fleet::amqp(),
            "--store".into(),
            store.into(),
        ]);
    }
    a
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A worker on `store` with its own `--source`, one task at a time, each merge held a
/// second (so that two workers both merge shards).
fn worker_with_source(dir: &Path, n: usize, store: &str, source: &str) -> fleet::Proc {
    let slow = [("COVMERGE_FAULT_SLEEP", "merge:1000")];
    worker(
        dir,
        n,
        store,
        &["--source", source, "--concurrency", "1"],
        &slow,
    )
}

#[test]
fn a_worker_source_lacking_one_base_file_published_a_result_without_it() {
    let _g = fleet::lock();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let full = tree(&dir.join("full"), None);
    let lacking = tree(&dir.join("lacking"), Some(3));
    let same = tree(&dir.join("same"), None);
    let input = input(&dir.join("in.csv"));
    let embedded = dir.join("embedded.gz");
    merge_ok(&strs(&job(&full, &input, &embedded, "")));
    let want = gunzip(&embedded);
    assert_eq!(
        String::from_utf8_lossy(&want)
            .matches(r#""Manager":"*""#)
            .count(),
        8
    );

    // Each worker takes one task at a time and holds it a second: both merge shards.
    let store = file_store(&dir.join("store"));
    let w1 = worker_with_source(dir, 1, &store, &full);
    let w2 = worker_with_source(dir, 2, &store, &lacking);
    let out = dir.join("fleet.gz");
    let o = coordinator_run(&strs(&job(&full, &input, &out, &store)), &[], LONG);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "a worker's source lacking k/f3.c gave a result: {err}\n{}\n{}",
        w1.log_text(),
        w2.log_text()
    );
    assert!(
        err.contains("the merges' sources do not hold the same base commit c1")
            && err.contains("(8 files)")
            && err.contains("(7 files)")
            && err.contains("no result published"),
        "{err}\n{}\n{}",
        w1.log_text(),
        w2.log_text()
    );
    assert!(!out.exists(), "a result was published");
    drop(w2);

    // The same files in another root: the same id, the embedded result.
    let w3 = worker_with_source(dir, 3, &store, &same);
    let o = coordinator_run(&strs(&job(&full, &input, &out, &store)), &[], LONG);
    assert!(
        o.status.success(),
        "identical sources failed: {}\n{}\n{}",
        String::from_utf8_lossy(&o.stderr),
        w1.log_text(),
        w3.log_text()
    );
    assert_eq!(
        gunzip(&out),
        want,
        "identical sources give the embedded result"
    );
    drop(w1);
}
