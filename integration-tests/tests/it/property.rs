//! The set of output records must not depend on `--shards` or `--workers`, and the
//! dir: and git: sources must agree; checked on generated corpora of several seeds.

use std::path::Path;

use covmerge_corpus::{generate, CorpusSpec};
use covmerge_integration_tests::{canon, gunzip, merge_ok};

fn merge(
    c: &covmerge_corpus::Corpus,
    source: &str,
    out: &Path,
    shards: u32,
    workers: u32,
) -> String {
    let inputs: Vec<String> = c.inputs.iter().map(|p| p.display().to_string()).collect();
    let (s, w) = (shards.to_string(), workers.to_string());
    let mut args = vec![
        "--source",
        source,
        "--base-repo",
        &c.base_repo,
        "--base-commit",
        &c.base_commit,
        "--out",
        out.to_str().unwrap(),
        "--shards",
        &s,
        "--workers",
        &w,
        "--date-to",
        "2024-01-01",
        "--input",
    ];
    args.extend(inputs.iter().map(|s| s.as_str()));
    merge_ok(&args)
}

#[test]
fn records_are_independent_of_shards_and_workers() {
    for seed in [3u64, 11, 29] {
        let tmp = tempfile::tempdir().unwrap();
        let spec = CorpusSpec {
            seed,
            files: 9,
            lines: 80,
            commits: 4,
            managers: 3,
            parts: 3,
            no_git: true,
            ..CorpusSpec::default()
        };
        let c = generate(&spec, &tmp.path().join("corpus")).unwrap();
        let src = format!("dir:{}", c.sources.display());
        let mut reference = None;
        // A small deterministic walk over shard/worker counts, different per seed.
        let mut x = seed;
        for _ in 0..4 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let shards = 1 + (x >> 33) as u32 % 17;
            let workers = 1 + (x >> 20) as u32 % 4;
            let out = tmp.path().join(format!("out-{shards}-{workers}.gz"));
            let stdout = merge(&c, &src, &out, shards, workers);
            let got = canon(&out);
            match &reference {
                None => reference = Some((got, stdout)),
                Some((want, want_stdout)) => {
                    assert_eq!(
                        &got, want,
                        "seed {seed}: --shards {shards} --workers {workers} differs"
                    );
                    assert_eq!(&stdout, want_stdout);
                }
            }
        }
        // Same shard count, different workers: byte-identical.
        let a = tmp.path().join("a.gz");
        let b = tmp.path().join("b.gz");
        merge(&c, &src, &a, 5, 1);
        merge(&c, &src, &b, 5, 3);
        assert_eq!(
            gunzip(&a),
            gunzip(&b),
            "seed {seed}: output bytes depend on --workers"
        );
    }
}

#[test]
fn git_source_agrees_with_dir_source() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = CorpusSpec {
        seed: 5,
        files: 8,
        lines: 100,
        commits: 5,
        managers: 3,
        ..CorpusSpec::default()
    };
    let c = generate(&spec, &tmp.path().join("corpus")).unwrap();
    let a = tmp.path().join("dir.gz");
    let b = tmp.path().join("git.gz");
    merge(&c, &format!("dir:{}", c.sources.display()), &a, 4, 2);
    merge(
        &c,
        &format!("git:{}", c.git.as_ref().unwrap().display()),
        &b,
        4,
        2,
    );
    assert_eq!(gunzip(&a), gunzip(&b));
    let got = canon(&a);
    assert!(
        got["totals"]["instrumented"].as_u64().unwrap() > 100,
        "the corpus merges to real coverage"
    );
}

/// The project's merger agrees with the slow reference merger in shared/tools.
#[test]
fn agrees_with_the_reference_merger() {
    let refmerge = covmerge_integration_tests::root().join("../shared/tools/refmerge.py");
    assert!(
        refmerge.is_file(),
        "{} missing: CI lays shared/ beside the checkout",
        refmerge.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let spec = CorpusSpec {
        seed: 17,
        files: 10,
        lines: 120,
        commits: 5,
        managers: 3,
        no_git: true,
        ..CorpusSpec::default()
    };
    let c = generate(&spec, &tmp.path().join("corpus")).unwrap();
    let out = tmp.path().join("out.gz");
    merge(&c, &format!("dir:{}", c.sources.display()), &out, 3, 2);
    let mut cmd = std::process::Command::new("python3");
    cmd.arg(&refmerge)
        .args([
            "--source",
            c.sources.to_str().unwrap(),
            "--base-repo",
            &c.base_repo,
            "--base-commit",
            &c.base_commit,
        ])
        .args(["--diff", "git-histogram"])
        .args(&c.inputs);
    let o = cmd.output().expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let got = canon(&out);
    assert_eq!(got["totals"], want["totals"]);
    assert_eq!(got["files"], want["files"]);
}

/// The same rows in the 18-column BigQuery layout, shuffled, and in the 7 required
/// columns, sorted (the fast unquoted parse path; the BigQuery rows of the generator
/// hold no quotes either, so this also pins that path against the row order), merge
/// to the same bytes.
#[test]
fn column_layout_and_row_order_do_not_change_the_result() {
    let tmp = tempfile::tempdir().unwrap();
    let mut outs = Vec::new();
    for (name, columns, sorted) in [
        ("bq", covmerge_corpus::Columns::Bigquery, false),
        ("req", covmerge_corpus::Columns::Required, true),
    ] {
        let spec = CorpusSpec {
            seed: 17,
            files: 12,
            lines: 120,
            commits: 5,
            managers: 4,
            parts: 3,
            no_git: true,
            columns,
            sorted,
            ..CorpusSpec::default()
        };
        let c = generate(&spec, &tmp.path().join(name)).unwrap();
        let out = tmp.path().join(format!("{name}.jsonl.gz"));
        merge(&c, &format!("dir:{}", c.sources.display()), &out, 5, 2);
        outs.push(gunzip(&out));
    }
    assert!(outs[0].len() > 1000, "a real result");
    assert!(outs[0] == outs[1], "layouts and orders merged differently");
}
