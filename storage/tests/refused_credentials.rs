//! A store that refuses the credentials (HTTP 403, as S3 answers an unknown access key
//! or a denied policy) fails every operation at once and as the configuration's fault.
//! Before, object_store reported a refused listing or multipart upload as a generic
//! error, which covmerge took for an outage: the worker retried it for the whole
//! `--store-outage-budget` instead of handing its task back.
//!
//! One test per binary: it points S3 at the refusing server through the environment
//! before any thread starts.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use covmerge_storage::Store;

/// Answers every request with S3's 403 for an unknown access key.
fn refusing_server() -> String {
    common::http_server(|_| {
        (
            "403 Forbidden",
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>InvalidAccessKeyId</Code><Message>The AWS Access Key Id you provided does not exist in our records.</Message></Error>".to_string(),
        )
    })
}

#[test]
fn refused_credentials_are_the_configurations_fault_at_once() {
    let ep = refusing_server();
    let dir = tempfile::tempdir().unwrap();
    common::point_stores_at(&ep, dir.path());
    // A refusal retried as an outage would take the whole budget.
    let budget = Duration::from_secs(60);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let s3 = Store::open("s3://bkt/pre")
            .unwrap()
            .with_retry_budget(budget);
        let t0 = Instant::now();
        let (get, put, list, exists, multipart) = tokio::join!(
            s3.get("k"),
            s3.put("k", Bytes::from_static(b"x")),
            s3.list("p"),
            s3.exists("k"),
            s3.concat("out", Bytes::from_static(b"H"), &s3, &[]),
        );
        let took = t0.elapsed();
        for (what, r) in [
            ("get", get.map(|_| ())),
            ("put", put),
            ("list", list.map(|_| ())),
            ("exists", exists.map(|_| ())),
            ("multipart upload", multipart.map(|_| ())),
        ] {
            let e = r.expect_err(what);
            assert!(
                !e.is_transient(),
                "{what}: a refusal taken for an outage: {e}"
            );
            let msg = e.to_string();
            assert!(!msg.contains("AKIAUNKNOWN"), "{what}: the key in {msg}");
        }
        assert!(
            took < Duration::from_secs(20),
            "refusals took {took:?}: retried as an outage"
        );
    });
}
