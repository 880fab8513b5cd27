//! Checks every [`Queue`] implementation must pass, run by the in-memory queue's unit
//! tests and by the integration tests against RabbitMQ (object_store's
//! `integration.rs` pattern). Each check uses its own job name so they can share a broker.

use std::time::Duration;

use crate::{Event, Queue};

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Drains tasks left over from earlier runs that belong to other jobs.
async fn next_task_of(q: &dyn Queue, job: &str, body_prefix: &[u8]) -> crate::Delivery {
    loop {
        let d = within("a task", q.next_task()).await.expect("next_task");
        if d.body.starts_with(body_prefix) {
            return d;
        }
        // Someone else's task (an earlier test run): put it back for its owner.
        let _ = job;
        d.ack().await.expect("ack foreign");
    }
}

/// Publish → deliver → ack; a report reaches the job's coordinator.
pub async fn ack_and_report(q: &dyn Queue, job: &str) {
    q.open_job(job).await.unwrap();
    let body = format!("{job}:t1").into_bytes();
    q.publish_task(job, body.clone()).await.unwrap();
    let d = next_task_of(q, job, job.as_bytes()).await;
    assert_eq!(d.body, body);
    assert_eq!(d.attempt, 1);
    d.ack().await.unwrap();
    q.publish_report(job, b"report-1".to_vec()).await.unwrap();
    assert_eq!(
        within("report", q.next_event(job)).await.unwrap(),
        Event::Report(b"report-1".to_vec())
    );
    q.close_job(job).await.unwrap();
}

/// `retry` redelivers with a growing attempt number; past the limit the task is
/// dead-lettered to its job.
pub async fn retry_until_dead_letter(q: &dyn Queue, job: &str, limit: u32) {
    q.open_job(job).await.unwrap();
    let body = format!("{job}:poison").into_bytes();
    q.publish_task(job, body.clone()).await.unwrap();
    for attempt in 1..=limit + 1 {
        let d = next_task_of(q, job, job.as_bytes()).await;
        assert_eq!(d.attempt, attempt, "attempt number");
        d.retry().await.unwrap();
    }
    match within("dead letter", q.next_event(job)).await.unwrap() {
        Event::DeadLetter { body: b, .. } => assert_eq!(b, body),
        other => panic!("expected a dead letter, got {other:?}"),
    }
    q.close_job(job).await.unwrap();
}

/// `reject` dead-letters at once.
pub async fn reject_dead_letters_now(q: &dyn Queue, job: &str) {
    q.open_job(job).await.unwrap();
    let body = format!("{job}:bad").into_bytes();
    q.publish_task(job, body.clone()).await.unwrap();
    let d = next_task_of(q, job, job.as_bytes()).await;
    d.reject().await.unwrap();
    match within("dead letter", q.next_event(job)).await.unwrap() {
        Event::DeadLetter { body: b, .. } => assert_eq!(b, body),
        other => panic!("expected a dead letter, got {other:?}"),
    }
    q.close_job(job).await.unwrap();
}

/// A delivery dropped without being settled comes back.
pub async fn dropped_delivery_comes_back(q: &dyn Queue, job: &str) {
    q.open_job(job).await.unwrap();
    let body = format!("{job}:dropped").into_bytes();
    q.publish_task(job, body.clone()).await.unwrap();
    let d = next_task_of(q, job, job.as_bytes()).await;
    drop(d);
    let again = next_task_of(q, job, job.as_bytes()).await;
    assert_eq!(again.body, body);
    assert!(again.attempt >= 2, "redelivery counts as an attempt");
    again.ack().await.unwrap();
    q.close_job(job).await.unwrap();
}

/// Closing a job ends a wait for its events with [`crate::QueueError::Closed`] (a
/// coordinator blocked in `next_event` must not hang once its job is closed), and a
/// closed job's events are not waited for again.
pub async fn close_ends_a_waiting_next_event(q: &dyn Queue, job: &str) {
    q.open_job(job).await.unwrap();
    let waiting = q.next_event(job);
    let close = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        q.close_job(job).await.unwrap();
    };
    let (got, ()) = within("next_event to end after close_job", async {
        tokio::join!(waiting, close)
    })
    .await;
    assert!(
        matches!(got, Err(crate::QueueError::Closed)),
        "a wait across close_job ended with {got:?}"
    );
    let again = within("next_event on a closed job", q.next_event(job)).await;
    assert!(
        matches!(again, Err(crate::QueueError::Closed)),
        "next_event on a closed job returned {again:?}"
    );
}
