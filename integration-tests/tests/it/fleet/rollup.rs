//! `coordinator --rollup` (contract §10): a roll-up on the fleet writes the partial
//! `covmerge rollup` writes for the same inputs and shard count, byte for byte (shard
//! files and `partial.json`), of raw rows (split tasks) and of partials (read directly
//! at the job's shard count, split at another), also when a worker is killed with its
//! shard's partial half stored. What is refused.

use super::*;
use covmerge_integration_tests::{covmerge, partial_files, CorpusJob};

const DATE: &str = "2024-04-08";

/// A corpus of three parts, edge cases included (rows without line, without version).
fn corpus(seed: u64) -> CorpusJob {
    FleetCorpus::local(seed)
        .files(12)
        .lines(80)
        .commits(4)
        .managers(5)
        .parts(3)
        .build()
}

/// `covmerge rollup` in one process, asserting success.
fn embedded_rollup(inputs: &[&str], out: &Path, flags: &[&str]) {
    let mut a = vec!["rollup", "--partial-out", out.to_str().unwrap()];
    a.extend_from_slice(flags);
    a.push("--input");
    a.extend_from_slice(inputs);
    let o = covmerge(&a);
    assert!(
        o.status.success(),
        "covmerge {}: {}",
        a.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The same partial, byte for byte: every shard file and `partial.json`.
fn same_bytes(got: &Path, want: &Path) {
    let files = partial_files(want);
    assert!(!files.is_empty(), "{}: no shard files", want.display());
    assert_eq!(partial_files(got), files, "shard files");
    let json =
        |d: &Path| String::from_utf8(std::fs::read(d.join("partial.json")).unwrap()).unwrap();
    assert_eq!(json(got), json(want), "partial.json");
}

/// Runs `coordinator --rollup` with `flags` on a `file://` store in `store`, with
/// two workers (and before them, with `kill`, one killed once it stored the first
/// file of a shard's partial); returns the coordinator's standard output.
fn fleet_rollup(c: &CorpusJob, store: &str, flags: &[&str], kill: bool) -> String {
    let mut doomed = kill.then(|| {
        let env = [("COVMERGE_FAULT_SLEEP", "partial:60000")];
        worker(c.dir(), 40, store, &[], &env)
    });
    let amqp = fleet::amqp();
    let mut a = vec!["--rollup", "--amqp", &amqp, "--store", store];
    a.extend_from_slice(flags);
    let coord = fleet::coordinator_spawn(&a);
    if let Some(w) = doomed.as_mut() {
        w.wait_log("fault point reached", Duration::from_secs(60));
        w.kill9();
    }
    let _w1 = worker(c.dir(), 41, store, &[], &[]);
    let _w2 = worker(c.dir(), 42, store, &["--split-threads", "1"], &[]);
    let o = coord.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// Raw rows, 2 workers, 3 shards: the fleet's partial is the embedded roll-up's, and
/// still is when a worker dies with a shard's partial half stored (its shard is
/// written again by another). The manifest names the partial.
#[test]
fn fleet_rollup_of_raw_rows_equals_embedded_rollup() {
    let _fleet = fleet::lock();
    let c = corpus(83);
    let inputs: Vec<&str> = c.inputs.iter().map(String::as_str).collect();
    let flags = ["--source", &c.source, "--shards", "3", "--date-to", DATE];
    let want = c.path("embedded");
    embedded_rollup(&inputs, &want, &flags);
    for kill in [false, true] {
        let got = c.path(&format!("fleet-{kill}"));
        let manifest_path = c.path(&format!("manifest-{kill}.json"));
        let store = file_store(&c.path(&format!("store-{kill}")));
        let mut a = flags.to_vec();
        a.extend_from_slice(&["--partial-out", got.to_str().unwrap()]);
        a.extend_from_slice(&["--manifest", manifest_path.to_str().unwrap()]);
        a.push("--input");
        a.extend_from_slice(&inputs);
        let out = fleet_rollup(&c, &store, &a, kill);
        assert!(
            out.contains("partial ") && out.contains("in 3 shards"),
            "{out}"
        );
        same_bytes(&got, &want);
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
        assert_eq!(m["status"], "complete", "{m}");
        assert!(m["result"].is_null(), "a roll-up has no result: {m}");
        assert_eq!(m["partial"]["shard_count"], 3, "{m}");
        let d = covmerge_partial::Partial::open(&want).unwrap();
        let d = d.description();
        assert_eq!(m["partial"]["rows_in"], d.counts.rows_in, "{m}");
        assert!(d.counts.rows_without_line > 0 && d.counts.rows_without_version > 0);
    }
}

/// Day partials, two of the job's shard count and one of another, rolled up with no
/// `--source` (each shard task reads the partials' files that map to its shard, no
/// split): the fleet's roll-up is the embedded one of the same partials, and the
/// partial of all the raw rows of the three days at once.
#[test]
fn fleet_rollup_of_day_partials_equals_embedded_and_all_rows() {
    let _fleet = fleet::lock();
    let c = corpus(89);
    let mut days = Vec::new();
    for (i, (day, shards)) in [("2024-04-06", "3"), ("2024-04-07", "2"), (DATE, "3")]
        .into_iter()
        .enumerate()
    {
        let dir = c.path(&format!("day-{day}"));
        let flags = ["--source", &c.source, "--shards", shards, "--date-to", day];
        embedded_rollup(&[&c.inputs[i]], &dir, &flags);
        days.push(dir.to_str().unwrap().to_owned());
    }
    let days: Vec<&str> = days.iter().map(String::as_str).collect();
    // No --shards: the largest of the partials' counts, on the fleet as embedded.
    let want = c.path("embedded");
    embedded_rollup(&days, &want, &[]);
    let all = c.path("all-rows");
    let inputs: Vec<&str> = c.inputs.iter().map(String::as_str).collect();
    let flags = [
        "--source",
        &c.source,
        "--shards",
        "3",
        "--date-to",
        DATE,
        "--duration",
        "3",
    ];
    embedded_rollup(&inputs, &all, &flags);
    same_bytes(&want, &all);

    // No --source (and the workers have none): partials alone need none.
    let got = c.path("fleet");
    let store_dir = c.path("store");
    let store = file_store(&store_dir);
    let mut a = vec!["--partial-out", got.to_str().unwrap(), "--input"];
    a.extend_from_slice(&days);
    let out = fleet_rollup(&c, &store, &a, false);
    assert!(
        out.contains("2024-04-06..2024-04-08") && out.contains("in 3 shards"),
        "{out}"
    );
    same_bytes(&got, &want);
    // The shard tasks read every partial directly, the one of 2 shards too (both
    // of its files for each shard of 3): no split task, no source.
    let job = job_id(&out);
    let spec: serde_json::Value = serde_json::from_slice(
        &std::fs::read(store_dir.join(format!("jobs/{job}/job.json"))).unwrap(),
    )
    .unwrap();
    let direct: Vec<u64> = spec["direct_partials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["input"].as_u64().unwrap())
        .collect();
    assert_eq!(direct, [0, 1, 2], "{spec}");
    assert_eq!(spec["source"], "", "{spec}");
    assert_eq!(spec["rollup"]["date_from"], "2024-04-06", "{spec}");
    assert!(spec["base_commit"].as_str().unwrap().is_empty(), "{spec}");
}

/// Raw rows and a partial together: the period runs from the partial's first day to
/// the raw rows' last (`--date-to`, `--duration`), as the embedded roll-up's.
#[test]
fn fleet_rollup_of_raw_rows_and_a_partial_equals_embedded() {
    let _fleet = fleet::lock();
    let c = corpus(103);
    let day = c.path("day");
    let flags = [
        "--source",
        &c.source,
        "--shards",
        "2",
        "--date-to",
        "2024-04-01",
    ];
    embedded_rollup(&[&c.inputs[0]], &day, &flags);
    let inputs = [day.to_str().unwrap(), &c.inputs[1], &c.inputs[2]];
    let flags = ["--source", &c.source, "--date-to", DATE, "--duration", "2"];
    let want = c.path("embedded");
    embedded_rollup(&inputs, &want, &[&flags[..], &["--shards", "3"]].concat());
    let got = c.path("fleet");
    let store = file_store(&c.path("store"));
    let mut a = flags.to_vec();
    a.extend_from_slice(&["--shards", "3", "--partial-out", got.to_str().unwrap()]);
    a.push("--input");
    a.extend_from_slice(&inputs);
    let out = fleet_rollup(&c, &store, &a, false);
    assert!(out.contains("2024-04-01..2024-04-08"), "{out}");
    same_bytes(&got, &want);
}

/// A finished roll-up job resumed (`--job ID --resume --rollup`, no worker): every
/// shard's files are in the store, and the partial is published again, the same; a
/// `--resume` of it as a merge job is refused naming the base.
#[test]
fn a_rollup_job_resumes_as_a_rollup_only() {
    let _fleet = fleet::lock();
    let c = corpus(107);
    let job = format!("rollup-resume-{}", std::process::id());
    let got = c.path("fleet");
    let store = file_store(&c.path("store"));
    let mut a = vec!["--job", &job, "--source", &c.source, "--shards", "2"];
    a.extend_from_slice(&["--date-to", DATE, "--partial-out", got.to_str().unwrap()]);
    a.push("--input");
    a.extend(c.inputs.iter().map(String::as_str));
    fleet_rollup(&c, &store, &a, false);
    let first = partial_files(&got);
    std::fs::remove_dir_all(&got).unwrap();
    let amqp = fleet::amqp();
    let mut r = vec!["--rollup", "--resume", "--amqp", &amqp, "--store", &store];
    r.extend_from_slice(&a);
    run_ok(&r, &[]);
    assert_eq!(partial_files(&got), first);
    r.retain(|x| *x != "--rollup");
    r.extend_from_slice(&["--base-repo", &c.corpus.base_repo]);
    r.extend_from_slice(&["--base-commit", &c.corpus.base_commit]);
    let o = fleet::coordinator_run(&r, &[], LONG);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("base_repo"), "{err}");
}

/// Day partials in an S3 bucket (which `covmerge rollup` does not read), rolled up on
/// the fleet into the bucket with no `--source`: the partial is the embedded
/// roll-up's of the same days as local directories.
#[test]
fn fleet_rollup_reads_and_writes_partials_in_s3() {
    let _fleet = fleet::lock();
    let c = corpus(101);
    let b = bucket("rollup");
    let mut local = Vec::new();
    let mut remote = Vec::new();
    for (i, (day, shards)) in [("2024-04-06", "2"), ("2024-04-07", "3"), (DATE, "2")]
        .into_iter()
        .enumerate()
    {
        let dir = c.path(&format!("day-{day}"));
        let flags = ["--source", &c.source, "--shards", shards, "--date-to", day];
        embedded_rollup(&[&c.inputs[i]], &dir, &flags);
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            upload(&b, &format!("days/{day}/{name}"), &p);
        }
        local.push(dir.to_str().unwrap().to_owned());
        remote.push(format!("s3://{b}/days/{day}/"));
    }
    let local: Vec<&str> = local.iter().map(String::as_str).collect();
    let want = c.path("embedded");
    embedded_rollup(&local, &want, &["--shards", "2"]);

    let store = format!("s3://{b}/fleet");
    let month = format!("s3://{b}/months/2024-04");
    let mut a = vec!["--shards", "2", "--partial-out", &month];
    a.push("--input");
    a.extend(remote.iter().map(String::as_str));
    fleet_rollup(&c, &store, &a, false);
    let got = c.path("fleet");
    std::fs::create_dir_all(&got).unwrap();
    let mut names = vec!["partial.json".to_string()];
    for j in 0..2 {
        for t in ["lines", "funcs", "versions", "paths"] {
            names.push(format!("{t}-{j:05}.parquet"));
        }
    }
    for n in names {
        download(&b, &format!("months/2024-04/{n}"), &got.join(&n));
    }
    same_bytes(&got, &want);
}

/// Day partials under a `file://` prefix, of 3, 2 and 3 shards rolled into 3, with a
/// `--source` that does not exist (a roll-up of partials alone reads none): the
/// embedded roll-up's partial. Then one shard file rewritten (its size kept): the
/// job fails, its shard task refusing the file by its SHA-256, naming the object.
#[test]
fn fleet_rollup_of_partials_in_a_file_store_reads_no_source_and_checks_each_file() {
    let _fleet = fleet::lock();
    let c = corpus(109);
    let days_dir = c.path("days");
    let mut local = Vec::new();
    let mut remote = Vec::new();
    for (i, (day, shards)) in [("2024-04-06", "3"), ("2024-04-07", "2"), (DATE, "3")]
        .into_iter()
        .enumerate()
    {
        let dir = c.path(&format!("day-{day}"));
        let flags = ["--source", &c.source, "--shards", shards, "--date-to", day];
        embedded_rollup(&[&c.inputs[i]], &dir, &flags);
        let copy = days_dir.join(day);
        std::fs::create_dir_all(&copy).unwrap();
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, copy.join(p.file_name().unwrap())).unwrap();
        }
        local.push(dir.to_str().unwrap().to_owned());
        remote.push(format!("{}/", file_store(&copy)));
    }
    let local: Vec<&str> = local.iter().map(String::as_str).collect();
    let want = c.path("embedded");
    embedded_rollup(&local, &want, &["--shards", "3"]);
    let missing = format!("dir:{}", c.path("no-such-source").display());
    let run = |name: &str| {
        let got = c.path(name);
        let store = file_store(&c.path(&format!("store-{name}")));
        let mut a: Vec<String> = ["--source", &missing, "--shards", "3", "--partial-out"]
            .map(String::from)
            .to_vec();
        a.push(got.to_str().unwrap().to_owned());
        a.push("--input".into());
        a.extend(remote.iter().cloned());
        (got, store, a)
    };
    let (got, store, a) = run("fleet");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    fleet_rollup(&c, &store, &a, false);
    same_bytes(&got, &want);

    // Rewrite shard 1's `lines` file of the last day with another's bytes, its size
    // kept: refused by its SHA-256 in the task of shard 1, naming the object.
    let victim = days_dir.join(DATE).join("lines-00001.parquet");
    let mut bytes = std::fs::read(&victim).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&victim, &bytes).unwrap();
    let (got, store, a) = run("corrupt");
    let amqp = fleet::amqp();
    let mut args = vec!["--rollup", "--amqp", &amqp, "--store", &store];
    args.extend(a.iter().map(String::as_str));
    let coord = fleet::coordinator_spawn(&args);
    let _w = worker(c.dir(), 43, &store, &[], &[]);
    let o = coord.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    let object = format!("{}/{DATE}/lines-00001.parquet", file_store(&days_dir));
    assert!(
        err.contains(&object) && err.contains("SHA-256"),
        "{object}: {err}"
    );
    assert!(
        !err.contains("covmerge-partial-"),
        "a local copy named: {err}"
    );
    assert!(!got.join("partial.json").exists());
}

/// Refused before any work, naming what is wrong: a result or a base given to a
/// roll-up, no --partial-out, {namespace} without --namespace, raw rows without
/// --source.
#[test]
fn fleet_rollup_refuses_a_base_a_result_and_no_partial() {
    let c = corpus(97);
    let store = file_store(&c.path("store"));
    let partial = c.path("p");
    let p = partial.to_str().unwrap();
    let base = [
        "coordinator",
        "--rollup",
        "--amqp",
        "amqp://127.0.0.1:1/%2f",
        "--store",
        &store,
        "--source",
        &c.source,
        "--input",
        &c.inputs[0],
    ];
    let cases: [(&[&str], &[&str]); 5] = [
        (
            &["--partial-out", p, "--out", "r.jsonl.gz"],
            &["--rollup", "--out"],
        ),
        (
            &["--partial-out", p, "--base-repo", "r"],
            &["--rollup", "--base-repo"],
        ),
        (
            &["--partial-out", p, "--base-commit", "c"],
            &["--rollup", "--base-commit"],
        ),
        (&[], &["--partial-out"]),
        (
            &["--partial-out", "/tmp/x/{namespace}/d"],
            &["--namespace", "covmerge rollup"],
        ),
    ];
    for (extra, named) in cases {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        let o = covmerge(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{extra:?} accepted");
        for n in named {
            assert!(err.contains(n), "{extra:?}: {err}");
        }
    }
    assert!(!partial.exists(), "nothing written");
    // Raw rows without --source: refused before any work (the broker is not even
    // reached), naming the input.
    let mut a = base.to_vec();
    a.retain(|x| *x != "--source" && *x != c.source);
    a.extend_from_slice(&["--partial-out", p]);
    let err = String::from_utf8_lossy(&covmerge(&a).stderr).into_owned();
    assert!(
        err.contains(&c.inputs[0]) && err.contains("needs --source") && !err.contains("amqp"),
        "{err}"
    );
    assert!(!partial.exists(), "nothing written");
    // Without --rollup, a coordinator still needs its base.
    let mut a = base.to_vec();
    a.retain(|x| *x != "--rollup");
    a.extend_from_slice(&["--out", "r.jsonl.gz"]);
    let err = String::from_utf8_lossy(&covmerge(&a).stderr).into_owned();
    assert!(err.contains("--base-repo"), "{err}");
}

/// Day partials made on commits that the roll-up's `--source` does not hold (last
/// month's partials were built on commits a later source need not keep), rolled up on
/// the fleet with raw rows: each partial's rows keep the partial's own versions, as
/// the embedded roll-up's do, and none is counted without version for want of its
/// commit in the source. One partial is of the job's shard count, one of another.
#[test]
fn fleet_rollup_of_raw_rows_and_partials_takes_the_partials_versions_not_the_source() {
    let _fleet = fleet::lock();
    // Two corpora of other seeds: other commits (and other texts of the same paths).
    let old = corpus(113);
    let c = corpus(127);
    let mut days = Vec::new();
    for (i, (day, shards)) in [("2024-04-06", "2"), ("2024-04-07", "3")]
        .into_iter()
        .enumerate()
    {
        let dir = c.path(&format!("day-{day}"));
        let flags = [
            "--source",
            &old.source,
            "--shards",
            shards,
            "--date-to",
            day,
        ];
        embedded_rollup(&[&old.inputs[i]], &dir, &flags);
        days.push(dir);
    }
    let mut inputs: Vec<&str> = days.iter().map(|d| d.to_str().unwrap()).collect();
    inputs.extend(c.inputs.iter().map(String::as_str));
    let flags = ["--source", &c.source, "--shards", "3", "--date-to", DATE];
    let want = c.path("embedded");
    embedded_rollup(&inputs, &want, &flags);
    // The raw rows alone, with the same source: what they count without version.
    let raw = c.path("raw-alone");
    let raw_inputs: Vec<&str> = c.inputs.iter().map(String::as_str).collect();
    embedded_rollup(&raw_inputs, &raw, &flags);
    let counts = |d: &Path| {
        let p = covmerge_partial::Partial::open(d).unwrap();
        p.description().counts.clone()
    };
    let (w, r) = (counts(&want), counts(&raw));
    let (d0, d1) = (counts(&days[0]), counts(&days[1]));
    assert_eq!(w.rows_in, r.rows_in + d0.rows_in + d1.rows_in);
    assert_eq!(
        w.rows_without_version,
        r.rows_without_version + d0.rows_without_version + d1.rows_without_version,
        "the embedded roll-up counts no partial's row without version"
    );

    let got = c.path("fleet");
    let manifest_path = c.path("manifest.json");
    let store_dir = c.path("store");
    let store = file_store(&store_dir);
    let mut a = flags.to_vec();
    a.extend_from_slice(&["--partial-out", got.to_str().unwrap()]);
    a.extend_from_slice(&["--manifest", manifest_path.to_str().unwrap()]);
    a.push("--input");
    a.extend_from_slice(&inputs);
    let out = fleet_rollup(&c, &store, &a, false);
    assert!(
        out.contains("2024-04-06..2024-04-08") && out.contains("in 3 shards"),
        "{out}"
    );
    // The counts first (a row looked up in the source would be without version).
    assert_eq!(counts(&got), w, "the fleet's counts");
    same_bytes(&got, &want);
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    assert_eq!(m["status"], "complete", "{m}");
    assert_eq!(m["partial"]["rows_in"], w.rows_in, "{m}");
    // Both partials are read by the shard tasks directly, whatever their shard
    // count; the splits read the raw rows only.
    let spec: serde_json::Value = serde_json::from_slice(
        &std::fs::read(store_dir.join(format!("jobs/{}/job.json", job_id(&out)))).unwrap(),
    )
    .unwrap();
    let direct: Vec<u64> = spec["direct_partials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["input"].as_u64().unwrap())
        .collect();
    assert_eq!(direct, [0, 1], "{spec}");
}

/// Raw rows with a `namespace` column and no `--namespace`, rolled up with a partial
/// of one namespace: refused, naming the input and `--namespace`, by the fleet as by
/// `covmerge rollup`, not read as rows of the partial's namespace.
#[test]
fn fleet_rollup_of_a_shared_table_without_namespace_is_refused_as_embedded() {
    let _fleet = fleet::lock();
    let c = corpus(131);
    let day = c.path("day");
    let flags = [
        "--source",
        &c.source,
        "--shards",
        "2",
        "--date-to",
        "2024-04-07",
    ];
    embedded_rollup(
        &[&c.inputs[0]],
        &day,
        &[&flags[..], &["--namespace", "upstream"]].concat(),
    );
    // Input 1's rows with a `namespace` column, every row of `upstream`.
    let raw = std::fs::read(&c.inputs[1]).unwrap();
    let raw = match raw.starts_with(&[0x1f, 0x8b]) {
        true => covmerge_integration_tests::gunzip_bytes(&raw),
        false => raw,
    };
    let text = String::from_utf8(raw).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().to_owned();
    let mut shared = format!("namespace,{header}\n");
    for l in lines {
        if l == header {
            continue;
        }
        shared += &format!("upstream,{l}\n");
    }
    let table = c.path("shared.csv");
    std::fs::write(&table, shared).unwrap();
    let table = table.to_str().unwrap();
    let inputs = [day.to_str().unwrap(), table];
    let flags = ["--source", &c.source, "--shards", "2", "--date-to", DATE];

    let mut a = vec!["rollup", "--partial-out"];
    let embedded = c.path("embedded");
    a.push(embedded.to_str().unwrap());
    a.extend_from_slice(&flags);
    a.push("--input");
    a.extend_from_slice(&inputs);
    let o = covmerge(&a);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "covmerge rollup accepted it");
    assert!(err.contains(table) && err.contains("--namespace"), "{err}");

    let got = c.path("fleet");
    let store = file_store(&c.path("store"));
    let amqp = fleet::amqp();
    let mut a = vec!["--rollup", "--amqp", &amqp, "--store", &store];
    a.extend_from_slice(&flags);
    a.extend_from_slice(&["--partial-out", got.to_str().unwrap(), "--input"]);
    a.extend_from_slice(&inputs);
    let coord = fleet::coordinator_spawn(&a);
    let _w = worker(c.dir(), 44, &store, &[], &[]);
    let o = coord.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "the fleet accepted it");
    assert!(err.contains(table) && err.contains("--namespace"), "{err}");
    assert!(!got.join("partial.json").exists());
}
