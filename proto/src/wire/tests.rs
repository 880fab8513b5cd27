use super::*;
use crate::limits::MAX_CHUNK_BYTES;

fn chunk(key: &str, start: u64, len: u64) -> ChunkRef {
    ChunkRef {
        key: key.into(),
        start,
        len,
    }
}

fn task() -> Task {
    Task::Merge(MergeTask {
        job: JobId::parse("j1").unwrap(),
        shard: ShardId(3),
        base_commit: "c".into(),
        source: "dir:/x".into(),
        chunks: vec![chunk("a", 0, 10)],
        file_path_prefix: "fs/".into(),
        groups: vec![crate::group::Group::parse("gcc=*-gcc-*").unwrap()],
        partials: Vec::new(),
        rollup: false,
    })
}

#[test]
fn round_trip() {
    let b = encode(&task()).unwrap();
    assert_eq!(decode::<Task>(&b).unwrap(), task());
}

#[test]
fn forged_tasks_are_invalid() {
    assert!(
        task().validate().is_err(),
        "chunk outside the job's spill prefix"
    );
    let mut ok = task();
    if let Task::Merge(m) = &mut ok {
        m.chunks = vec![chunk("jobs/j1/spill/00000/n/00003.cms", 5, 10)];
    }
    assert_eq!(ok.validate(), Ok(()));
    let with_chunk = |c: ChunkRef| {
        let mut t = ok.clone();
        if let Task::Merge(m) = &mut t {
            m.chunks = vec![c];
        }
        t.validate()
    };
    let key = "jobs/j1/spill/00000/n/00003.cms";
    assert!(with_chunk(chunk(key, 0, 0)).is_err(), "an empty range");
    assert!(
        with_chunk(chunk(key, u64::MAX, 2)).is_err(),
        "a range past u64"
    );
    assert!(
        with_chunk(chunk(key, 0, MAX_CHUNK_BYTES + 1)).is_err(),
        "a chunk too large to hold"
    );
    assert!(with_chunk(chunk("jobs/j2/spill/0/n/1.cms", 0, 1)).is_err());
    let with_groups = |g: Vec<crate::group::Group>| {
        let mut t = ok.clone();
        if let Task::Merge(m) = &mut t {
            m.groups = g;
        }
        t.validate()
    };
    let g = |name: &str| crate::group::Group {
        name: name.into(),
        glob: "x*".into(),
    };
    assert!(with_groups(vec![g("*")]).is_err(), "a group named `*`");
    assert!(with_groups(vec![g("a"), g("a")]).is_err(), "a group twice");
    assert!(with_groups(vec![g("a"); crate::limits::MAX_GROUPS + 1]).is_err());
    assert!(with_groups(vec![g("a\n")]).is_err(), "a control character");
    assert!(with_chunk(chunk("jobs/j1/spill/../../x", 0, 1)).is_err());
    let split = |shards, input: &str| {
        Task::Split(SplitTask {
            namespace: None,
            job: JobId::parse("j1").unwrap(),
            split: SplitId(0),
            input: input.into(),
            shards,
            max_bad_rows: 0,
            read: Default::default(),
            more: Vec::new(),
        })
    };
    assert!(split(4, "/in.csv").validate().is_ok());
    let with_go = |read: crate::input::InputSpec| {
        let mut t = split(4, "/in.csv");
        if let Task::Split(s) = &mut t {
            s.read = read;
        }
        t.validate()
    };
    let rule = crate::input::GoModule {
        module: "example.com/m".into(),
        dir: ".".into(),
    };
    let with_rules = |n| crate::input::InputSpec {
        options: crate::input::InputOptions {
            partial_sha256: None,
            go_modules: vec![rule.clone(); n],
        },
        ..Default::default()
    };
    assert!(with_go(with_rules(3)).is_ok());
    assert!(with_go(with_rules(crate::limits::MAX_GO_MODULES + 1)).is_err());
    assert!(with_go(crate::input::InputSpec {
        manager: "m".repeat(5000),
        ..Default::default()
    })
    .is_err());
    assert!(split(u32::MAX, "/in.csv").validate().is_err());
    assert!(split(0, "/in.csv").validate().is_err());
    assert!(split(4, "").validate().is_err());
    assert!(split(4, &"x".repeat(5000)).validate().is_err());
}

#[test]
fn failures_travel_with_their_kind() {
    let r = TaskReport {
        job: JobId::parse("j1").unwrap(),
        task: TaskRef::Merge(ShardId(1)),
        attempt: Attempt(2),
        status: ReportStatus::Retrying(Failure::outage("store gone")),
    };
    let back: TaskReport = decode(&encode(&r).unwrap()).unwrap();
    assert_eq!(back, r);
    let ReportStatus::Retrying(f) = back.status else {
        panic!("status changed")
    };
    assert_eq!(f.kind, FailureKind::Outage);
    assert!(f.is_retryable());
    for k in [
        FailureKind::BadInput,
        FailureKind::Refused,
        FailureKind::Config,
        FailureKind::Internal,
    ] {
        assert!(!k.is_retryable(), "{}", k.as_str());
    }
    assert!(FailureKind::Transient.is_retryable());
    assert_eq!(
        Failure::bad_input("in.csv:3: bad").to_string(),
        "in.csv:3: bad"
    );
}

/// A task of the release before groups (4) or before the shared table (5) is
/// poison, as any other version: a worker of version 4 would drop a task's groups
/// and write a part without them, one of version 5 a split's `--namespace` and
/// merge every namespace.
#[test]
fn version_4_and_5_tasks_are_rejected() {
    for version in [4, 5] {
        let b = rmp_serde::to_vec_named(&Envelope {
            version,
            body: task(),
        })
        .unwrap();
        assert!(matches!(
            decode::<Task>(&b),
            Err(WireError::Version { got, want: PROTOCOL_VERSION }) if got == version
        ));
    }
}

/// A split task of the release before the input spec is poison: its `go` field
/// said how the input is read, and a worker of this release would not find it.
/// Without the envelope, its body does not decode as a split task either (the
/// spec is required, not defaulted to `auto`), where the new one does.
#[test]
fn a_version_7_split_task_is_rejected() {
    #[derive(Serialize)]
    struct V7Go {
        format: crate::input::InputFormat,
        modules: Vec<crate::input::GoModule>,
        manager: String,
        commit: String,
    }
    #[derive(Serialize)]
    struct V7Split {
        job: JobId,
        split: SplitId,
        input: String,
        shards: u32,
        max_bad_rows: u64,
        go: V7Go,
        more: Vec<SplitInput>,
    }
    #[derive(Serialize)]
    enum V7Task {
        Split(V7Split),
    }
    let old = V7Task::Split(V7Split {
        job: JobId::parse("j1").unwrap(),
        split: SplitId(0),
        input: "/in.out".into(),
        shards: 4,
        max_bad_rows: 0,
        go: V7Go {
            format: crate::input::InputFormat::GoText,
            modules: Vec::new(),
            manager: "m".into(),
            commit: "c".into(),
        },
        more: Vec::new(),
    });
    let b = rmp_serde::to_vec_named(&Envelope {
        version: 7,
        body: &old,
    })
    .unwrap();
    assert!(matches!(
        decode::<Task>(&b),
        Err(WireError::Version {
            got: 7,
            want: PROTOCOL_VERSION
        })
    ));
    let body = rmp_serde::to_vec_named(&old).unwrap();
    assert!(rmp_serde::from_slice::<Task>(&body).is_err());
    let new = Task::Split(SplitTask {
        job: JobId::parse("j1").unwrap(),
        split: SplitId(0),
        input: "/in.out".into(),
        shards: 4,
        max_bad_rows: 0,
        read: crate::input::InputSpec {
            format: crate::input::InputFormat::GoText,
            manager: "m".into(),
            commit: "c".into(),
            options: Default::default(),
        },
        more: Vec::new(),
        namespace: None,
    });
    assert_eq!(decode::<Task>(&encode(&new).unwrap()).unwrap(), new);
}

/// A merge report or `.done` marker of the release before the base checks is
/// poison (a marker is then merged again): it lists no base line counts and no
/// source id, and the gate would refuse its part. Without the envelope, such an
/// outcome still reads, its new fields empty.
#[test]
fn a_version_6_merge_outcome_is_rejected() {
    #[derive(Serialize)]
    struct V6 {
        counts: Counts,
        part: String,
        records: u64,
        bytes: u64,
        sha256: String,
    }
    let old = V6 {
        counts: Counts::default(),
        part: "jobs/j/parts/00000.jsonl.gz".into(),
        records: 3,
        bytes: 9,
        sha256: "ab".into(),
    };
    let b = rmp_serde::to_vec_named(&Envelope {
        version: 6,
        body: &old,
    })
    .unwrap();
    assert!(matches!(
        decode::<MergeOutcome>(&b),
        Err(WireError::Version {
            got: 6,
            want: PROTOCOL_VERSION
        })
    ));
    let o: MergeOutcome = rmp_serde::from_slice(&rmp_serde::to_vec_named(&old).unwrap()).unwrap();
    assert_eq!(
        (o.records, o.base_lines.len(), o.source_id.as_str()),
        (3, 0, "")
    );
    let new = MergeOutcome {
        base_lines: vec![("a.c".into(), 7)],
        source_id: "git tree 00".into(),
        worker: "w".into(),
        ..o
    };
    assert_eq!(decode::<MergeOutcome>(&encode(&new).unwrap()).unwrap(), new);
}

/// A roll-up's task projects nothing: it names no base, prefix or group, and a
/// merge's names its base. A version-9 task (before roll-ups) is poison: a worker of
/// version 9 would refuse a roll-up's empty base as forged.
#[test]
fn a_rollup_task_names_no_base_and_a_merge_one_does() {
    let merge = || {
        let Task::Merge(mut m) = task() else {
            unreachable!()
        };
        m.chunks = vec![chunk("jobs/j1/spill/00000/n/00003.cms", 0, 10)];
        m
    };
    let rollup = MergeTask {
        rollup: true,
        base_commit: String::new(),
        file_path_prefix: String::new(),
        groups: Vec::new(),
        ..merge()
    };
    assert_eq!(Task::Merge(rollup.clone()).validate(), Ok(()));
    let back: Task = decode(&encode(&Task::Merge(rollup.clone())).unwrap()).unwrap();
    assert_eq!(back, Task::Merge(rollup.clone()));
    for forged in [
        MergeTask {
            base_commit: "c".into(),
            ..rollup.clone()
        },
        MergeTask {
            file_path_prefix: "fs/".into(),
            ..rollup.clone()
        },
        MergeTask {
            groups: merge().groups,
            ..rollup.clone()
        },
    ] {
        let why = Task::Merge(forged).validate().unwrap_err();
        assert!(why.contains("roll-up"), "{why}");
    }
    // A roll-up of partials alone names no source; a merge's task must.
    let no_source = MergeTask {
        source: String::new(),
        chunks: Vec::new(),
        ..rollup.clone()
    };
    assert_eq!(Task::Merge(no_source.clone()).validate(), Ok(()));
    let merge_no_source = MergeTask {
        source: String::new(),
        ..merge()
    };
    let why = Task::Merge(merge_no_source).validate().unwrap_err();
    assert!(why.contains("source"), "{why}");
    // Protocol 10 workers would refuse it: its version is poison to them.
    let b = rmp_serde::to_vec_named(&Envelope {
        version: 10,
        body: Task::Merge(no_source),
    })
    .unwrap();
    assert!(matches!(
        decode::<Task>(&b),
        Err(WireError::Version { got: 10, .. })
    ));
    let no_base = MergeTask {
        rollup: false,
        ..rollup.clone()
    };
    assert!(Task::Merge(no_base)
        .validate()
        .unwrap_err()
        .contains("base commit"));
    // A merge's task is encoded as before: no `rollup` field.
    let plain = rmp_serde::to_vec_named(&merge()).unwrap();
    assert!(!plain.windows(6).any(|w| w == b"rollup"));
    let b = rmp_serde::to_vec_named(&Envelope {
        version: 9,
        body: Task::Merge(rollup),
    })
    .unwrap();
    assert!(matches!(
        decode::<Task>(&b),
        Err(WireError::Version {
            got: 9,
            want: PROTOCOL_VERSION
        })
    ));
}

#[test]
fn wrong_version_is_rejected() {
    let b = rmp_serde::to_vec_named(&Envelope {
        version: 99,
        body: task(),
    })
    .unwrap();
    assert!(matches!(
        decode::<Task>(&b),
        Err(WireError::Version { got: 99, .. })
    ));
}

#[test]
fn garbage_and_oversize_are_rejected() {
    assert!(matches!(
        decode::<Task>(b"\xff\x00garbage"),
        Err(WireError::Decode(_))
    ));
    let big = vec![0u8; MAX_MESSAGE_BYTES + 1];
    assert!(matches!(
        decode::<Task>(&big),
        Err(WireError::TooLarge { .. })
    ));
}
