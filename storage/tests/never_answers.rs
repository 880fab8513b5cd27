//! A store that accepts connections and never answers: an operation fails within the
//! `--store-outage-budget` plus one request timeout. Before, object_store's own retry
//! layer (10 retries for up to 3 minutes) ran inside each attempt of covmerge's, so one
//! operation outlasted the budget several times over.
//!
//! One test per binary: it points S3 and GCS at the silent server through the
//! environment before any thread starts.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use bytes::Bytes;
use covmerge_storage::Store;

/// Accepts every connection, reads what is sent, never writes a byte.
fn silent_server() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while matches!(c.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    format!("http://{addr}")
}

#[test]
fn a_store_that_never_answers_fails_within_the_outage_budget() {
    let ep = silent_server();
    let dir = tempfile::tempdir().unwrap();
    common::point_stores_at(&ep, dir.path());
    let budget = Duration::from_secs(2);
    // The budget, one request timeout (30 s) and slack; object_store's own retries
    // alone would take 10 attempts of 30 s.
    let bound = budget + Duration::from_secs(30 + 15);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let s3 = Store::open("s3://bkt/pre")
            .unwrap()
            .with_retry_budget(budget);
        let gcs = Store::open("gs://bkt/pre")
            .unwrap()
            .with_retry_budget(budget);
        let t0 = Instant::now();
        let (a, b, c, d) = tokio::join!(
            s3.get("k"),
            s3.put("k", Bytes::from_static(b"x")),
            gcs.get("k"),
            gcs.put("k", Bytes::from_static(b"x")),
        );
        let took = t0.elapsed();
        for (what, r) in [
            ("s3 get", a.map(|_| ())),
            ("s3 put", b),
            ("gcs get", c.map(|_| ())),
            ("gcs put", d),
        ] {
            let e = r.expect_err(what);
            assert!(e.is_transient(), "{what}: {e}");
        }
        assert!(
            took < bound,
            "the operations took {took:?}, over the {budget:?} budget plus one request timeout"
        );
    });
}
