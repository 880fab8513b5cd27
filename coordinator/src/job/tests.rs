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
