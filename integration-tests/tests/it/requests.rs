//! Store requests of a fleet job, counted by a relay in front of the S3 server: a
//! bucket is tens of milliseconds away per request, so the count is pinned here and a
//! regression fails CI instead of making quarterly merges hours long.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use covmerge_integration_tests::fleet::{bucket, coordinator_run, s3_addr, worker_on, Vhost};
use covmerge_integration_tests::relay::Relay;
use covmerge_integration_tests::{gunzip, FleetCorpus};

use crate::fleet::LONG;

/// The store requests of one fleet job of 100 small inputs and 16 shards (two
/// workers, S3 through a counting relay), run once for the tests below; the result
/// is checked against an embedded merge of the same inputs.
fn job_requests() -> &'static BTreeMap<String, u64> {
    static REQUESTS: OnceLock<BTreeMap<String, u64>> = OnceLock::new();
    REQUESTS.get_or_init(run_job)
}

/// 100 small inputs and 16 shards: each input was its own split writing its own
/// spill object, and each shard's merge fetched one chunk per split, one after the
/// other: 1,400 chunk reads and 2,249 requests in all. Inputs are now grouped into
/// about 32 splits whose spills are written together: under 1,000 requests, and the
/// same result.
#[test]
fn many_small_inputs_made_a_chunk_read_per_input_and_shard() {
    let reqs = job_requests();
    let total: u64 = reqs.values().sum();
    let chunk_reads = reqs.get("GET spill").copied().unwrap_or(0);
    let spill_writes = reqs.get("PUT spill").copied().unwrap_or(0);
    assert!(
        (1..=40).contains(&spill_writes),
        "{spill_writes} spill objects for 100 inputs: {reqs:?}"
    );
    assert!(
        chunk_reads <= spill_writes * 16,
        "{chunk_reads} chunk reads: {reqs:?}"
    );
    assert!(total <= 1_000, "{total} store requests: {reqs:?}");
}

/// Each of those requests waited for the one before on a distant store: the
/// coordinator read every task's marker before publishing it (a phase of 1,000 tasks
/// started 20 s late at 20 ms a request) and deleted the job's spill objects and
/// attempt records one by one; every worker read a task's marker before running it.
/// Now a phase starts with one listing, a first delivery runs without looking for a
/// marker, and the cleanup deletes in bulk (S3's `DeleteObjects`). Each marker is read
/// once, by the coordinator when the task's report arrives (a report is settled with
/// its marker's outcome, never its own: a forged one settles nothing).
#[test]
fn a_request_per_task_at_phase_start_task_start_and_cleanup() {
    let reqs = job_requests();
    let get = |k: &str| reqs.get(k).copied().unwrap_or(0);
    assert!(get("PUT marker") > 0, "{reqs:?}");
    assert_eq!(
        get("GET marker"),
        get("PUT marker"),
        "markers read other than once a report: {reqs:?}"
    );
    assert_eq!(
        get("DELETE spill") + get("DELETE attempt"),
        0,
        "spill objects and attempt records deleted one by one: {reqs:?}"
    );
    // Two per phase start, one of attempt records, two for the cleanup, two per
    // reconciliation tick (every 30 s).
    assert!(get("LIST") <= 12, "listings: {reqs:?}");
}

fn run_job() -> BTreeMap<String, u64> {
    let s = FleetCorpus::new(251)
        .files(40)
        .lines(300)
        .commits(4)
        .parts(100)
        .shards(16)
        .unlocked()
        .build();
    let vh = Vhost::new("requests");
    let relay = Relay::start(&s3_addr());
    let endpoint = format!("http://{}", relay.addr());
    let env = [("AWS_ENDPOINT_URL", endpoint.as_str())];
    let store = format!("s3://{}/jobs", bucket("requests"));
    let _w: Vec<_> = (1..=2)
        .map(|n| worker_on(&vh.url, s.dir(), n, &store, &[], &env))
        .collect();
    let out = s.path("out.jsonl.gz");
    let o = coordinator_run(&s.coord_args(&vh.url, &store, &out), &env, LONG);
    assert!(
        o.status.success(),
        "coordinator failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(gunzip(&out), s.want);
    relay.requests()
}
