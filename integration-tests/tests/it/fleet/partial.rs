//! `--partial-out` on the fleet: the partial a fleet job writes to S3 is the embedded
//! merge's, byte for byte, also when a worker is killed with its shard's partial half
//! stored.

use super::*;
use covmerge_partial::Partial;

/// The files of a partial of `shards` shards in `bucket` under `prefix`, downloaded
/// into `dir`.
fn download_partial(bucket: &str, prefix: &str, shards: u32, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut names = vec!["partial.json".to_string()];
    for j in 0..shards {
        for t in ["lines", "funcs", "versions", "paths"] {
            names.push(format!("{t}-{j:05}.parquet"));
        }
    }
    for n in names {
        download(bucket, &format!("{prefix}/{n}"), &dir.join(&n));
    }
}

fn same_partial(a: &Path, b: &Path) {
    let (pa, pb) = (Partial::open(a).unwrap(), Partial::open(b).unwrap());
    assert_eq!(pa.description(), pb.description());
    assert_eq!(pa.content().unwrap(), pb.content().unwrap());
    for e in std::fs::read_dir(a).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap();
        assert!(
            std::fs::read(&p).unwrap() == std::fs::read(b.join(name)).unwrap(),
            "{name:?} differs"
        );
    }
}

/// A coordinator and two workers on S3, one of them killed once it stored the first
/// file of a shard's partial: the partial in the bucket is the embedded one.
#[test]
fn fleet_partial_on_s3_equals_embedded_with_a_worker_killed_mid_partial() {
    let s = FleetCorpus::new(59).build();
    let want = s.path("embedded-partial");
    s.embedded(
        "embedded.jsonl.gz",
        &["--partial-out", want.to_str().unwrap()],
    );
    let shards = Partial::open(&want).unwrap().description().shard_count;

    for kill in [false, true] {
        let b = bucket("partial");
        let store = format!("s3://{b}/fleet");
        let mut doomed = kill.then(|| {
            worker(
                s.dir(),
                30,
                &store,
                &[],
                &[("COVMERGE_FAULT_SLEEP", "partial:60000")],
            )
        });
        let partial = format!("s3://{b}/partials/day");
        let out = s.path(&format!("out-{kill}.gz"));
        let amqp = fleet::amqp();
        let mut a = s.coord_args(&amqp, &store, &out);
        a.extend_from_slice(&["--partial-out", &partial]);
        let coord = fleet::coordinator_spawn(&a);
        if let Some(w) = doomed.as_mut() {
            w.wait_log("fault point reached", Duration::from_secs(60));
            w.kill9();
        }
        let _w1 = worker(s.dir(), 31, &store, &[], &[]);
        let _w2 = worker(s.dir(), 32, &store, &["--split-threads", "1"], &[]);
        let o = coord.join().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(gunzip(&out), s.want, "the result is the embedded one");
        let got = s.path(&format!("fleet-partial-{kill}"));
        download_partial(&b, "partials/day", shards, &got);
        same_partial(&got, &want);
    }
}
