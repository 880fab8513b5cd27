//! Unit tests of the job's tasks and of its publication.

use covmerge_proto::wire::{ChunkRef, MergeOutcome, Task};
use covmerge_proto::{JobId, JobSpec};

use super::publish::sources_differ;
use super::tasks::merge_tasks;

#[test]
fn a_worker_source_lacking_base_files_published_a_result() {
    let part = |shard: u32, id: &str, worker: &str| {
        (
            MergeOutcome {
                source_id: id.into(),
                worker: worker.into(),
                ..MergeOutcome::default()
            },
            covmerge_proto::ShardEntry {
                index: shard,
                records: 0,
                bytes: 0,
                sha256: String::new(),
                attempts: 1,
                outages: 0,
            },
        )
    };
    let split = |v: Vec<(MergeOutcome, covmerge_proto::ShardEntry)>| -> (Vec<_>, Vec<_>) {
        v.into_iter().unzip()
    };
    let (o, s) = split(vec![
        part(0, "x", "w1"),
        part(1, "x", "w2"),
        part(2, "x", "w1"),
    ]);
    assert_eq!(sources_differ(&o, &s), None, "one id");
    assert_eq!(sources_differ(&[], &[]), None, "no shard");
    let (o, s) = split(vec![
        part(0, "x", "w1"),
        part(1, "y", "w2"),
        part(2, "x", "w1"),
        part(3, "", ""),
    ]);
    let why = sources_differ(&o, &s).expect("ids differ");
    assert_eq!(
        why,
        "shard(s) 3 merged by a worker of protocol 6 or before saw no id (a marker of protocol 6 or before); shard(s) 0, 2 merged by w1 saw x; shard(s) 1 merged by w2 saw y"
    );
}

#[test]
fn merge_tasks_are_published_largest_shard_first() {
    let spec = JobSpec {
        namespace: None,
        job: JobId::parse("j1").unwrap(),
        inputs: vec!["in.csv".into()],
        base_repo: "r".into(),
        base_commit: "c".into(),
        source: "dir:/s".into(),
        shards: 4,
        max_bad_rows: 0,
        file_path_prefix: String::new(),
        header: covmerge_proto::job::HeaderSpec {
            namespace: "upstream".into(),
            duration: 0,
            date_to: "2026-12-01".into(),
            total_rows: None,
        },
        input: Default::default(),
        splits: Vec::new(),
        groups: Vec::new(),
        input_ids: Vec::new(),
        partial_out: None,
        partial_inputs: Vec::new(),
        direct_partials: Vec::new(),
        rollup: None,
    };
    let chunk = |len| ChunkRef {
        key: "jobs/j1/spill/00000/n/00000.cms".into(),
        start: 0,
        len,
    };
    let chunks = vec![
        vec![chunk(5)],
        vec![chunk(7), chunk(9)],
        vec![],
        vec![chunk(5)],
    ];
    let order: Vec<(u32, usize)> = merge_tasks(&spec, chunks)
        .iter()
        .map(|t| match t {
            Task::Merge(m) => (m.shard.0, m.chunks.len()),
            Task::Split(_) => panic!("a split"),
        })
        .collect();
    // 16 bytes, then the two of 5 in shard order, then the empty shard.
    assert_eq!(order, vec![(1, 2), (0, 1), (3, 1), (2, 0)]);
}

/// A roll-up job's partial gate: its tasks merge nothing, so only the total is
/// checked (`rows_in` = `rows_bad` + the shards' rows), every shard must have written
/// its files, and the period is the one planned.
#[test]
fn a_rollup_partial_is_gated_on_its_shards_files_and_rows() {
    use covmerge_proto::job::RollupSpec;
    use covmerge_proto::wire::{PartialFile, PartialShardOutcome};
    let spec = JobSpec {
        namespace: None,
        job: JobId::parse("j1").unwrap(),
        inputs: vec!["in.csv".into()],
        base_repo: String::new(),
        base_commit: String::new(),
        source: "dir:/s".into(),
        shards: 2,
        max_bad_rows: 1,
        file_path_prefix: String::new(),
        header: covmerge_proto::job::HeaderSpec {
            namespace: "upstream".into(),
            duration: 0,
            date_to: "2026-12-01".into(),
            total_rows: None,
        },
        input: Default::default(),
        splits: Vec::new(),
        groups: Vec::new(),
        input_ids: Vec::new(),
        partial_out: Some("/p".into()),
        partial_inputs: Vec::new(),
        direct_partials: Vec::new(),
        rollup: Some(RollupSpec {
            date_from: "2026-11-01".into(),
            date_to: "2026-11-30".into(),
            namespace: None,
        }),
    };
    assert_eq!(spec.validate(), Ok(()));
    for t in merge_tasks(&spec, vec![Vec::new(); 2]) {
        let Task::Merge(m) = &t else {
            panic!("a split")
        };
        assert!(m.rollup && m.base_commit.is_empty());
        assert_eq!(t.validate(), Ok(()));
    }
    let shard = |j: u32, rows_in: u64| MergeOutcome {
        partial: Some(PartialShardOutcome {
            files: ["lines", "funcs", "versions", "paths"]
                .map(|t| PartialFile {
                    name: format!("{t}-{j:05}.parquet"),
                    rows: 1,
                    bytes: 10,
                    sha256: "ab".repeat(32),
                })
                .to_vec(),
            rows_in,
            rows_without_line: 1,
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut manifest = covmerge_proto::Manifest::default();
    manifest.totals.rows_in = 10;
    manifest.totals.rows_bad = 1;
    let d = super::partial::describe(&spec, &manifest, false, &[shard(0, 4), shard(1, 5)])
        .expect("rows add up");
    assert_eq!(
        (d.date_from.as_str(), d.date_to.as_str()),
        ("2026-11-01", "2026-11-30")
    );
    assert_eq!((d.counts.rows_in, d.counts.rows_without_line), (10, 2));
    let e =
        super::partial::describe(&spec, &manifest, false, &[shard(0, 4), shard(1, 4)]).unwrap_err();
    assert!(e.to_string().contains("rows_in 10"), "{e}");
    let mut none = shard(1, 5);
    none.partial = None;
    let e = super::partial::describe(&spec, &manifest, false, &[shard(0, 4), none]).unwrap_err();
    assert!(e.to_string().contains("no partial files"), "{e}");
    let e = super::partial::describe(&spec, &manifest, false, &[shard(0, 9)]).unwrap_err();
    assert!(e.to_string().contains("1 of 2 shards"), "{e}");
}

/// A one-day partial's description of `rows_in` rows and the shards `shards` (a JSON
/// list of each shard's files).
fn description(rows_in: u64, shards: serde_json::Value) -> covmerge_partial::desc::Description {
    let shard_count = shards.as_array().map_or(0, Vec::len);
    serde_json::from_value(serde_json::json!({
        "format": "covmerge-partial", "format_version": 1, "namespace": "",
        "date_from": "2026-12-06", "date_to": "2026-12-06",
        "counts": {"rows_in": rows_in, "rows_bad": 0, "rows_without_line": 0,
            "rows_without_version": 0, "hits_without_version": 0,
            "rows_other_namespaces": 0, "namespace_column": false},
        "other_namespaces": {"listed": {}, "unlisted_rows": 0},
        "shard_count": shard_count, "shards": shards,
    }))
    .unwrap()
}

/// Replacing a partial by one whose files do not check against their description left
/// the old partial without its `partial.json` (deleted before the check), while the
/// refusal said nothing was published.
#[tokio::test]
async fn a_partial_replaced_by_one_whose_files_failed_their_check_lost_its_description() {
    use sha2::{Digest, Sha256};
    let (src, dest) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let old = br#"{"the old partial's description":1}"#;
    std::fs::write(dest.path().join("partial.json"), old).unwrap();
    std::fs::write(dest.path().join("lines-00000.parquet"), b"old rows").unwrap();
    let entry = |table: &str, good: bool| {
        let name = format!("{table}-00000.parquet");
        let body = format!("{table} rows");
        std::fs::write(src.path().join(&name), &body).unwrap();
        let sha = hex::encode(Sha256::digest(if good {
            body.as_bytes()
        } else {
            b"other"
        }));
        serde_json::json!({"name": name, "rows": 1, "bytes": body.len(), "sha256": sha})
    };
    let d = description(
        4,
        serde_json::json!([{"index": 0, "lines": entry("lines", true),
            "funcs": entry("funcs", true), "versions": entry("versions", false),
            "paths": entry("paths", true)}]),
    );
    let url = format!("file://{}", dest.path().display());
    let err = super::publish_local_partial(src.path(), &d, &url)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("versions-00000.parquet"), "{err}");
    assert_eq!(
        std::fs::read(dest.path().join("partial.json")).unwrap(),
        old,
        "the old partial keeps its description"
    );
    assert_eq!(
        std::fs::read(dest.path().join("lines-00000.parquet")).unwrap(),
        b"old rows"
    );
}

/// A directory where a shard file was due failed the upload after ~5 minutes of
/// retries with "Upload aborted", leaving staging files: refused before any work now.
#[tokio::test]
async fn a_partial_out_holding_a_directory_failed_after_minutes_of_retries() {
    let (src, dest) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(dest.path().join("partial.json"), b"{}").unwrap();
    std::fs::create_dir(dest.path().join("lines-00000.parquet")).unwrap();
    std::fs::write(dest.path().join("lines-00000.parquet/inner"), b"x").unwrap();
    let d = description(0, serde_json::json!([]));
    let url = format!("file://{}", dest.path().display());
    let err = super::publish_local_partial(src.path(), &d, &url)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("lines-00000.parquet/inner") && err.contains("directory"),
        "{err}"
    );
    assert!(dest.path().join("partial.json").exists());
}
