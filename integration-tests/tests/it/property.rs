//! The set of output records must not depend on `--shards` or `--workers`, and the
//! dir: and git: sources must agree, and the result must be the one the test crate's
//! own plain merge (`oracle`) computes; checked on generated corpora of several seeds.

use std::path::Path;

use covmerge_integration_tests::{
    canon, fixture, gunzip, manifest as manifest_of, merge_ok, oracle, FleetCorpus,
};
use serde_json::Value;

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
        let s = FleetCorpus::local(seed)
            .files(9)
            .lines(80)
            .commits(4)
            .build();
        let (c, src) = (&s.corpus, &s.source);
        let mut reference = None;
        // A small deterministic walk over shard/worker counts, different per seed.
        let mut x = seed;
        for _ in 0..4 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let shards = 1 + (x >> 33) as u32 % 17;
            let workers = 1 + (x >> 20) as u32 % 4;
            let out = s.path(&format!("out-{shards}-{workers}.gz"));
            let stdout = merge(c, src, &out, shards, workers);
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
        let a = s.path("a.gz");
        let b = s.path("b.gz");
        merge(c, src, &a, 5, 1);
        merge(c, src, &b, 5, 3);
        assert_eq!(
            gunzip(&a),
            gunzip(&b),
            "seed {seed}: output bytes depend on --workers"
        );
    }
}

#[test]
fn git_source_agrees_with_dir_source() {
    let s = FleetCorpus::local(5)
        .git()
        .files(8)
        .lines(100)
        .parts(2)
        .build();
    let a = s.path("dir.gz");
    let b = s.path("git.gz");
    merge(&s.corpus, &s.source, &a, 4, 2);
    merge(&s.corpus, &s.git_source(), &b, 4, 2);
    assert_eq!(gunzip(&a), gunzip(&b));
    let got = canon(&a);
    assert!(
        got["totals"]["instrumented"].as_u64().unwrap() > 100,
        "the corpus merges to real coverage"
    );
}

/// covmerge agrees with the project's own plain merge (`oracle`: the csv crate, the
/// `dir:` files and `git diff --histogram` hunks) on corpora with shuffled and sorted
/// rows, one to six managers, a file deleted before the base, rows of a commit that
/// exists nowhere, `sl` past the end and `sl=0`; the manifest's counters agree too.
#[test]
fn agrees_with_the_reference_merger() {
    let corpora = [
        FleetCorpus::local(17)
            .files(30)
            .lines(300)
            .commits(14)
            .parts(2),
        FleetCorpus::local(4)
            .files(14)
            .commits(7)
            .managers(6)
            .spec(|s| s.plain = true),
        FleetCorpus::local(23)
            .files(6)
            .lines(200)
            .commits(3)
            .managers(1)
            .parts(2)
            .spec(|s| {
                s.sorted = true;
                s.columns = covmerge_corpus::Columns::Required;
            }),
    ];
    for knobs in corpora {
        let s = knobs.build();
        let (seed, c, src) = (s.seed(), &s.corpus, &s.source);
        let out = s.path("out.gz");
        let manifest = s.path("manifest.json");
        let mut args = vec![
            "--source",
            src,
            "--base-repo",
            &c.base_repo,
            "--base-commit",
            &c.base_commit,
            "--out",
            out.to_str().unwrap(),
            "--manifest",
            manifest.to_str().unwrap(),
            "--shards",
            "3",
            "--workers",
            "2",
            "--input",
        ];
        args.extend(s.inputs.iter().map(String::as_str));
        merge_ok(&args);

        let want = oracle::merge(&c.inputs, &c.sources, &c.base_commit);
        let got = canon(&out);
        assert_same(&got, &want.canon, &format!("seed {seed}"));
        let totals = &manifest_of(&manifest)["totals"];
        for (k, v) in want.counts.as_object().unwrap() {
            assert_eq!(&totals[k], v, "seed {seed}: manifest totals.{k}");
        }
        // The corpus exercises what the comparison is about.
        let n = |k: &str| want.counts[k].as_u64().unwrap();
        assert_eq!(
            n("rows_in"),
            c.rows,
            "seed {seed}: the oracle read every row"
        );
        assert!(n("instrumented") > 100, "seed {seed}: real coverage");
        assert!(n("rows_lost") > 0, "seed {seed}: lost rows");
        assert!(n("rows_without_line") > 0, "seed {seed}: rows without line");
        assert!(n("files_deleted") > 0, "seed {seed}: a deleted file");
    }
}

/// `got` and `want` (canonical results) are equal; a difference names the file.
fn assert_same(got: &Value, want: &Value, what: &str) {
    assert_eq!(got["totals"], want["totals"], "{what}: totals");
    let (g, w) = (
        got["files"].as_object().unwrap(),
        want["files"].as_object().unwrap(),
    );
    assert_eq!(
        g.keys().collect::<Vec<_>>(),
        w.keys().collect::<Vec<_>>(),
        "{what}: files"
    );
    for (path, w) in w {
        assert_eq!(&g[path], w, "{what}: {path}");
    }
}

/// The oracle itself reproduces the reviewed snapshot of the semantics fixture, which
/// covers every rule of contract §3 (so a wrong oracle cannot agree with a wrong merge).
#[test]
fn oracle_reproduces_the_reviewed_semantics_snapshot() {
    let d = fixture("semantics");
    let want: Value =
        serde_json::from_slice(&std::fs::read(d.join("expected.json")).unwrap()).unwrap();
    let inputs = [d.join("input-a.csv"), d.join("input-b.csv.gz")];
    let got = oracle::merge(&inputs, &d.join("sources"), "base");
    assert_same(&got.canon, &want, "semantics fixture");
    for (k, v) in want["counts"].as_object().unwrap() {
        assert_eq!(&got.counts[k], v, "counts.{k}");
    }
}

/// The same rows in the 18-column BigQuery layout, shuffled, and in the 7 required
/// columns, sorted (the fast unquoted parse path; the BigQuery rows of the generator
/// hold no quotes either, so this also pins that path against the row order), merge
/// to the same bytes.
#[test]
fn column_layout_and_row_order_do_not_change_the_result() {
    let mut outs = Vec::new();
    for (name, columns, sorted) in [
        ("bq", covmerge_corpus::Columns::Bigquery, false),
        ("req", covmerge_corpus::Columns::Required, true),
    ] {
        let s = FleetCorpus::local(17)
            .files(12)
            .lines(120)
            .commits(5)
            .managers(4)
            .spec(|s| {
                s.columns = columns;
                s.sorted = sorted;
            })
            .build();
        let out = s.path(&format!("{name}.jsonl.gz"));
        merge(&s.corpus, &s.source, &out, 5, 2);
        outs.push(gunzip(&out));
    }
    assert!(outs[0].len() > 1000, "a real result");
    assert!(outs[0] == outs[1], "layouts and orders merged differently");
}
