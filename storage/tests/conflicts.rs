//! Answers that look final but are not, and the reverse: S3's 409
//! `ConditionalRequestConflict` to a create that raced another conditional write is
//! retried (object_store reports it as "already exists", which made a coordinator
//! refuse its own new job as "driven by another coordinator"), and a GCS JSON API 400
//! is a refusal at once (it was retried as an outage for the whole budget).
//!
//! One test per binary: it points S3 and GCS at the scripted server through the
//! environment before any thread starts.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use covmerge_storage::Store;

/// Answers each request by its request line: S3 PUTs get one 409 conflict, then 200;
/// GCS uploads always 400.
fn scripted_server(puts: Arc<AtomicU32>) -> String {
    common::http_server(move |request| {
        if request.contains("/upload/storage/") {
            (
                "400 Bad Request",
                r#"{"error":{"code":400,"message":"bad"}}"#.to_string(),
            )
        } else if request.starts_with("PUT ") {
            if puts.fetch_add(1, Ordering::SeqCst) == 0 {
                ("409 Conflict", "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>ConditionalRequestConflict</Code><Message>A conflicting conditional operation is currently in progress against this resource. Please try again.</Message></Error>".to_string())
            } else {
                ("200 OK", String::new())
            }
        } else {
            (
                "404 Not Found",
                "<Error><Code>NoSuchKey</Code></Error>".to_string(),
            )
        }
    })
}

#[test]
fn a_conflict_is_retried_and_a_gcs_refusal_is_final() {
    let puts = Arc::new(AtomicU32::new(0));
    let ep = scripted_server(puts.clone());
    let dir = tempfile::tempdir().unwrap();
    common::point_stores_at(&ep, dir.path());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let budget = Duration::from_secs(60);
        let s3 = Store::open("s3://bkt/pre")
            .unwrap()
            .with_retry_budget(budget);
        let (created, _) = s3
            .put_new("jobs/j/job.json", Bytes::from_static(b"{}"))
            .await
            .expect("a conflict is retried, not taken for an object there");
        assert!(created, "the retried create made the object");
        assert_eq!(puts.load(Ordering::SeqCst), 2, "one conflict, one create");

        let gcs = Store::open("gs://bkt/pre")
            .unwrap()
            .with_retry_budget(budget);
        let t0 = Instant::now();
        let e = gcs
            .put("k", Bytes::from_static(b"x"))
            .await
            .expect_err("a 400 fails");
        assert!(!e.is_transient(), "a 400 taken for an outage: {e}");
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "a 400 was retried for {:?}",
            t0.elapsed()
        );
    });
}
