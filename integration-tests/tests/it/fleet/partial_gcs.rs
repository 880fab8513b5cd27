//! Partials on `gs://` on the fleet (contract §10): day partials written by
//! `coordinator --partial-out gs://…`, then merged from the bucket by a coordinator and
//! two workers, give the raw rows' merge at the same `--shards` byte for byte (but the
//! header's Session and Time). A partial of the job's shard count has no split task:
//! each merge task reads its shard's files itself, so the job reads fewer bytes from
//! the store than the raw merge (inputs, then spill chunks). Partials of another
//! shard count go through the split tasks, with the same result. Store traffic is
//! counted by a relay in front of fake-gcs-server.

use super::*;
use covmerge_integration_tests::gcs;
use covmerge_integration_tests::relay::Relay;

/// A result without the header fields that differ between any two runs.
fn result_of(text: &[u8]) -> Vec<u8> {
    let end = text.iter().position(|&b| b == b'\n').unwrap();
    let mut head: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&text[..end]).unwrap();
    head.remove("Session");
    head.remove("Time");
    let mut v = serde_json::to_vec(&head).unwrap();
    v.extend_from_slice(&text[end..]);
    v
}

/// What one fleet job sent to and got from the store, through the relay.
#[derive(Debug, Clone)]
struct Traffic {
    requests: u64,
    down: u64,
    up: u64,
    /// Requests of spill objects (written by splits, read by merges).
    spill: u64,
}

/// Runs a coordinator with `args` through `relay`; returns its stdout and traffic.
fn counted(relay: &Relay, args: &[&str], env: &[(&str, &str)]) -> (String, Traffic) {
    let spill = |r: &std::collections::BTreeMap<String, u64>| -> u64 {
        r.iter()
            .filter(|(k, _)| k.ends_with(" spill"))
            .map(|(_, n)| n)
            .sum()
    };
    let (up0, down0) = relay.bytes();
    let r0 = relay.requests();
    let o = coordinator_run(args, env, LONG);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (up1, down1) = relay.bytes();
    let r1 = relay.requests();
    let t = Traffic {
        requests: r1.values().sum::<u64>() - r0.values().sum::<u64>(),
        down: down1 - down0,
        up: up1 - up0,
        spill: spill(&r1) - spill(&r0),
    };
    (String::from_utf8(o.stdout).unwrap(), t)
}

#[test]
fn fleet_merge_of_gcs_day_partials_equals_the_raw_merge_and_reads_fewer_bytes() {
    // Many inputs of the same lines over commits that share file versions: what
    // partials sum.
    let s = FleetCorpus::new(4040)
        .files(16)
        .lines(200)
        .commits(6)
        .managers(3)
        .parts(8)
        .shards(4)
        .build();
    let upstream = gcs::endpoint()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let relay = Relay::start(&upstream);
    relay.rewrite_host(&upstream);
    let creds = gcs::credentials_at(s.dir(), &format!("http://{}", relay.addr()));
    let creds = creds.to_str().unwrap();
    let env = [("GOOGLE_SERVICE_ACCOUNT", creds)];
    let b = gcs::bucket("partials");
    for (i, p) in s.inputs.iter().enumerate() {
        let name = Path::new(p).file_name().unwrap().to_str().unwrap();
        gcs::upload(&b, &format!("raw/{i:02}-{name}"), Path::new(p));
    }
    let store = format!("gs://{b}/fleet");
    let _w1 = worker(s.dir(), 1, &store, &[], &env);
    let _w2 = worker(s.dir(), 2, &store, &["--split-threads", "1"], &env);
    let amqp = fleet::amqp();
    // A fleet job of `inputs` at `shards` shards into `out`, with `extra` flags.
    let job = |inputs: &[String], shards: &str, out: &Path, extra: &[String]| {
        let mut a: Vec<String> = s
            .job_args_with(&s.source, inputs)
            .into_iter()
            .map(String::from)
            .collect();
        let i = a.iter().position(|x| x == "--shards").unwrap();
        a[i + 1] = shards.into();
        let out = out.to_str().unwrap();
        a.extend(["--amqp", &amqp, "--store", &store, "--out", out].map(String::from));
        a.extend_from_slice(extra);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        counted(&relay, &a, &env).1
    };

    // Two days' partials, each from half of the raw inputs.
    let half = s.inputs.len() / 2;
    for (day, inputs) in [(0, &s.inputs[..half]), (1, &s.inputs[half..])] {
        let out = s.path(&format!("day{day}.jsonl.gz"));
        let to = ["--partial-out".into(), format!("gs://{b}/partials/d{day}")];
        job(inputs, "4", &out, &to);
    }

    // The raw merge, its inputs read from the bucket.
    let raw_out = s.path("raw.jsonl.gz");
    let raw = job(&[format!("gs://{b}/raw/*")], "4", &raw_out, &[]);
    let raw_result = gunzip(&raw_out);
    assert_eq!(
        raw_result, s.want,
        "the raw fleet merge is the embedded one"
    );

    // The merge of the two partials (prefixes, one with its partial.json named).
    let parts = [
        format!("gs://{b}/partials/d0/"),
        format!("gs://{b}/partials/d1/partial.json"),
    ];
    let out = s.path("partials.jsonl.gz");
    let partial = job(&parts, "4", &out, &[]);
    assert!(
        result_of(&gunzip(&out)) == result_of(&raw_result),
        "the merge of the partials differs from the raw merge"
    );
    // No split task read them: no spill object was written or read.
    assert_eq!(partial.spill, 0, "{partial:?}");
    assert!(raw.spill > 0, "{raw:?}");
    eprintln!("store traffic at --shards 4, 2 workers: raw {raw:?}, partials {partial:?}");
    assert!(
        partial.down < raw.down,
        "the partials' merge read {} bytes, the raw merge {}",
        partial.down,
        raw.down
    );
    assert!(partial.requests < raw.requests, "{partial:?} vs {raw:?}");
    // And writes no spill object: less is sent to the store.
    assert!(partial.up < raw.up, "{partial:?} vs {raw:?}");

    // The same partials merged at another shard count go through the split tasks:
    // the raw merge at that count.
    let raw3 = s.path("raw3.jsonl.gz");
    let mut a: Vec<&str> = s.job_args();
    let i = a.iter().position(|x| *x == "--shards").unwrap();
    a[i + 1] = "3";
    a.extend_from_slice(&["--out", raw3.to_str().unwrap()]);
    merge_ok(&a);
    let out3 = s.path("partials3.jsonl.gz");
    let other = job(&parts, "3", &out3, &[]);
    assert!(result_of(&gunzip(&out3)) == result_of(&gunzip(&raw3)));
    assert!(
        other.spill > 0,
        "partials of 4 shards split for 3: {other:?}"
    );
}
