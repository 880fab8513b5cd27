//! Fault injection for the fleet's end-to-end tests.
//!
//! Every hook is inert unless the crate is built with the `enabled` feature (test builds
//! only: the integration-tests crate turns it on) *and* the environment asks:
//!
//! - `COVMERGE_FAULT_SLEEP=<point>:<ms>` pauses at a point so a test can kill or stop
//!   the worker exactly there. Points: `split` (after the first spill chunk is stored),
//!   `merge` (before a shard is merged), `upload` (part stored, marker not yet),
//!   `ack` (report sent, delivery not yet acknowledged), `partial` (the first file of a
//!   shard's partial stored, `--partial-out`), and in the coordinator
//!   `assemble` (every part in, the result not yet written).
//! - `COVMERGE_FAULT_FAIL_SHARD=<index>` makes merging that shard fail transiently,
//!   to exercise retries and the delivery limit.
//! - `COVMERGE_FAULT_LOSE_REPORTS=1` loses every report (not published, the task
//!   acknowledged as if it had been): the coordinator must find the markers itself.
//! - `COVMERGE_FAULT_FAIL_REPORTS=1` fails the first report publish of each task, as
//!   a broker that refused it would.
//!
//! - `COVMERGE_FAULT_DUPLICATE_TASKS=1` makes the coordinator publish every task twice,
//!   as a broker redelivering would.
//!
//! Each hook logs `fault point reached` with the point, which tests wait for.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

fn sleep_spec() -> Option<&'static (String, u64)> {
    if !cfg!(feature = "enabled") {
        return None;
    }
    static S: OnceLock<Option<(String, u64)>> = OnceLock::new();
    S.get_or_init(|| {
        let v = std::env::var("COVMERGE_FAULT_SLEEP").ok()?;
        let (p, ms) = v.split_once(':')?;
        Some((p.to_string(), ms.parse().ok()?))
    })
    .as_ref()
}

/// The pause configured for `point`, if any (logged).
pub fn pause(point: &str) -> Option<Duration> {
    let (p, ms) = sleep_spec()?;
    if p != point {
        return None;
    }
    tracing::warn!(point, ms, "fault point reached");
    Some(Duration::from_millis(*ms))
}

/// Blocking pause (split/merge threads).
pub fn pause_blocking(point: &str) {
    if let Some(d) = pause(point) {
        std::thread::sleep(d);
    }
}

/// Blocking pause that ends early once `stop()` is true (an abandoned task).
pub fn pause_blocking_unless(point: &str, stop: &dyn Fn() -> bool) {
    if let Some(d) = pause(point) {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < d && !stop() {
            std::thread::sleep(Duration::from_millis(20).min(d));
        }
    }
}

/// Async pause.
pub async fn pause_async(point: &str) {
    if let Some(d) = pause(point) {
        tokio::time::sleep(d).await;
    }
}

/// Whether merging `shard` should fail (transiently).
pub fn fail_shard(shard: u32) -> bool {
    static S: OnceLock<Option<u32>> = OnceLock::new();
    S.get_or_init(|| {
        if !cfg!(feature = "enabled") {
            return None;
        }
        std::env::var("COVMERGE_FAULT_FAIL_SHARD")
            .ok()?
            .parse()
            .ok()
    }) == &Some(shard)
}

fn flag(name: &str) -> bool {
    cfg!(feature = "enabled") && std::env::var(name).is_ok_and(|v| v == "1")
}

/// Whether the report of `task` is to be lost.
pub fn lose_report(_task: &str) -> bool {
    static S: OnceLock<bool> = OnceLock::new();
    *S.get_or_init(|| flag("COVMERGE_FAULT_LOSE_REPORTS"))
}

/// Whether publishing the report of `task` is to fail (the first time per task).
pub fn fail_report(task: &str) -> bool {
    static S: OnceLock<bool> = OnceLock::new();
    static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    if !*S.get_or_init(|| flag("COVMERGE_FAULT_FAIL_REPORTS")) {
        return false;
    }
    SEEN.lock()
        .unwrap()
        .get_or_insert_with(HashSet::new)
        .insert(task.to_string())
}

/// Whether the coordinator publishes every task twice.
pub fn duplicate_tasks() -> bool {
    static S: OnceLock<bool> = OnceLock::new();
    *S.get_or_init(|| flag("COVMERGE_FAULT_DUPLICATE_TASKS"))
}

#[cfg(test)]
mod tests {
    /// Run alone (`cargo test -p covmerge-fault`) the feature is off and the hooks must
    /// ignore the environment; in the workspace's test build it is on.
    #[test]
    fn hooks_follow_the_feature_not_just_the_environment() {
        std::env::set_var("COVMERGE_FAULT_SLEEP", "probe:5");
        std::env::set_var("COVMERGE_FAULT_FAIL_SHARD", "7");
        std::env::set_var("COVMERGE_FAULT_DUPLICATE_TASKS", "1");
        let on = cfg!(feature = "enabled");
        assert_eq!(super::pause("probe").is_some(), on);
        assert_eq!(super::fail_shard(7), on);
        assert_eq!(super::duplicate_tasks(), on);
        assert!(super::pause("other").is_none());
    }
}
