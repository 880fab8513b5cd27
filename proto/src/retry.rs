//! The one retry policy of covmerge: exponential backoff with jitter, bounded by a
//! number of retries or a time budget, for every place that waits before trying again
//! (AMQP reconnects and broker operations, task retries, store operations, GCS
//! requests, dashboard calls).
//!
//! A [`RetryPolicy`] is plain data; [`RetryPolicy::builder`] turns it into a
//! [`backon::ExponentialBuilder`], and the waiting itself is backon's
//! ([`backon::Retryable`], re-exported here as [`Retryable`]) with the caller's sleeper
//! (`.sleep(tokio::time::sleep)`): this crate stays free of a runtime.
//!
//! The delays: the `n`-th retry (1-based) waits `d(n) = min(first × factorⁿ⁻¹,
//! max_delay)`, and with `jitter` a random duration in `[d(n), 2·d(n))` (backon's
//! jitter adds up to one more `d(n)`), so that processes that lost the same broker do
//! not come back in step. What is worth retrying is the caller's decision
//! (`.when(...)`): this module only says how long to wait and when to give up, and,
//! for HTTP, which statuses are worth another try ([`retryable_http_status`]).

use std::time::Duration;

pub use backon::{BackoffBuilder, ExponentialBuilder, Retryable};

/// How long to wait between attempts and when to stop. See the module doc.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// The delay before the first retry (before jitter).
    pub first: Duration,
    /// No delay (before jitter) grows beyond this.
    pub max_delay: Duration,
    /// Each delay is the previous one times this (until `max_delay`).
    pub factor: f32,
    /// Each delay becomes a random duration in `[d, 2d)`.
    pub jitter: bool,
    /// Retries after the first attempt (`None`: unbounded, see `max_elapsed`).
    pub max_times: Option<usize>,
    /// The sum of the delays stays within this (`None`: unbounded). A caller that
    /// needs a wall-clock deadline (attempts included) checks it itself.
    pub max_elapsed: Option<Duration>,
}

impl RetryPolicy {
    /// Reconnecting to the broker (and restarting a consumer that stopped) within a
    /// total outage budget: 50 ms growing to 2.5 s, jittered to [50, 100) ms ..
    /// [2.5, 5) s between attempts.
    pub fn reconnect(budget: Duration) -> Self {
        RetryPolicy {
            first: Duration::from_millis(50),
            max_delay: Duration::from_millis(2500),
            factor: 2.0,
            jitter: true,
            max_times: None,
            max_elapsed: Some(budget),
        }
    }

    /// A broker operation (publish, declare, consume) that failed on a connection that
    /// broke: 4 more attempts, each after reconnecting (which has its own backoff,
    /// [`RetryPolicy::reconnect`]) and a short jittered pause.
    pub fn broker_operation() -> Self {
        RetryPolicy {
            first: Duration::from_millis(25),
            max_delay: Duration::from_millis(400),
            factor: 2.0,
            jitter: true,
            max_times: Some(4),
            max_elapsed: None,
        }
    }

    /// A task that failed transiently, before it goes back to the queue: the delay
    /// before retry `n` is `250 ms × 2ⁿ⁻¹` capped at 15 s, jittered to `[d, 2d)`.
    pub fn task() -> Self {
        RetryPolicy {
            first: Duration::from_millis(250),
            max_delay: Duration::from_secs(15),
            factor: 2.0,
            jitter: true,
            max_times: None,
            max_elapsed: None,
        }
    }

    /// A dashboard call (contract §8): 5 attempts in all, 250 ms growing to 15 s, jittered.
    pub fn dashboard() -> Self {
        RetryPolicy {
            first: Duration::from_millis(250),
            max_delay: Duration::from_secs(15),
            factor: 2.0,
            jitter: true,
            max_times: Some(4),
            max_elapsed: None,
        }
    }

    /// A store operation that failed transiently (the store unreachable, throttling,
    /// 5xx), within the store's outage budget: 125 ms growing to 5 s, jittered to
    /// [125, 250) ms .. [5, 10) s.
    pub fn store(budget: Duration) -> Self {
        RetryPolicy {
            first: Duration::from_millis(125),
            max_delay: Duration::from_secs(5),
            factor: 2.0,
            jitter: true,
            max_times: None,
            max_elapsed: Some(budget),
        }
    }

    /// One HTTP request to GCS's JSON API: 4 attempts in all, [100, 200) ms ..
    /// [400, 800) ms apart (the store operation around it has its own budget).
    pub fn gcs_request() -> Self {
        RetryPolicy {
            first: Duration::from_millis(100),
            max_delay: Duration::from_millis(400),
            factor: 2.0,
            jitter: true,
            max_times: Some(3),
            max_elapsed: None,
        }
    }

    /// The policy as a backon builder, for `op.retry(policy.builder())`.
    pub fn builder(&self) -> ExponentialBuilder {
        let b = ExponentialBuilder::new()
            .with_min_delay(self.first)
            .with_max_delay(self.max_delay)
            .with_factor(self.factor)
            .with_total_delay(self.max_elapsed);
        let b = match self.max_times {
            Some(n) => b.with_max_times(n),
            None => b.without_max_times(),
        };
        if self.jitter {
            b.with_jitter()
        } else {
            b
        }
    }

    /// The delay before retry `attempt` (1-based; 0 counts as 1), for a caller that
    /// waits by itself (a task nacked after a pause). Ignores `max_times` and
    /// `max_elapsed`: the caller counts attempts.
    pub fn delay(&self, attempt: u32) -> Duration {
        // After ~64 doublings every delay is `max_delay`; stop walking there.
        let n = attempt.clamp(1, 64) as usize;
        let unbounded = RetryPolicy {
            max_times: None,
            max_elapsed: None,
            ..*self
        };
        unbounded
            .builder()
            .build()
            .nth(n - 1)
            .unwrap_or(self.max_delay)
    }

    /// The delay before retry `attempt` without jitter: the lower bound of
    /// [`RetryPolicy::delay`].
    pub fn base_delay(&self, attempt: u32) -> Duration {
        RetryPolicy {
            jitter: false,
            ..*self
        }
        .delay(attempt)
    }
}

/// Whether an HTTP answer with this status is worth another try: 5xx and 429 (too
/// many requests). Any other 4xx says the request itself (or its credentials) is
/// wrong; contract §8 says so for the dashboard ("not on 4xx other than 429"), and the GCS
/// client follows the same rule, so 408 is final too.
pub fn retryable_http_status(status: u16) -> bool {
    (500..600).contains(&status) || status == 429
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_server_errors_and_throttling_are_retryable() {
        for s in [500, 502, 503, 504, 599, 429] {
            assert!(retryable_http_status(s), "{s}");
        }
        for s in [
            200, 204, 301, 308, 400, 401, 403, 404, 405, 408, 409, 412, 413, 422, 600,
        ] {
            assert!(!retryable_http_status(s), "{s}");
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn without_jitter_the_delays_double_up_to_the_cap() {
        let p = RetryPolicy {
            jitter: false,
            ..RetryPolicy::dashboard()
        };
        let got: Vec<Duration> = p.builder().build().collect();
        assert_eq!(got, [ms(250), ms(500), ms(1000), ms(2000)]);
        let p = RetryPolicy {
            max_times: Some(9),
            ..p
        };
        let got: Vec<Duration> = p.builder().build().collect();
        assert_eq!(got.len(), 9);
        assert_eq!(got[6], Duration::from_secs(15), "capped at max_delay");
        assert_eq!(got[8], Duration::from_secs(15));
        assert_eq!(p.delay(1), ms(250));
        assert_eq!(p.delay(0), ms(250));
        assert_eq!(p.delay(4), ms(2000));
        assert_eq!(p.delay(10_000), Duration::from_secs(15));
    }

    #[test]
    fn jitter_stays_within_one_more_delay_and_varies() {
        for p in [
            RetryPolicy::task(),
            RetryPolicy::dashboard(),
            RetryPolicy::reconnect(Duration::from_secs(600)),
            RetryPolicy::broker_operation(),
            RetryPolicy::store(Duration::from_secs(300)),
            RetryPolicy::gcs_request(),
        ] {
            let mut seen = std::collections::HashSet::new();
            for attempt in 1..=12 {
                let base = p.base_delay(attempt);
                assert!(base <= p.max_delay);
                for _ in 0..50 {
                    let d = p.delay(attempt);
                    assert!(d >= base && d < base * 2, "{p:?} #{attempt}: {d:?}");
                    seen.insert(d);
                }
            }
            // 600 draws from a continuous range: identical values mean no jitter.
            assert!(seen.len() > 500, "{p:?}: {} distinct delays", seen.len());
        }
    }

    #[test]
    fn retries_are_bounded_by_count_or_budget() {
        assert_eq!(RetryPolicy::dashboard().builder().build().count(), 4);
        assert_eq!(RetryPolicy::broker_operation().builder().build().count(), 4);
        let budget = Duration::from_secs(20);
        let delays: Vec<Duration> = RetryPolicy::reconnect(budget).builder().build().collect();
        let total: Duration = delays.iter().sum();
        assert!(total <= budget, "{total:?}");
        // A budget of 20 s with delays of at most 5 s: more than a handful of tries.
        assert!(delays.len() >= 4, "{delays:?}");
        assert!(delays.iter().all(|d| *d < Duration::from_secs(5)));
        // An unbounded policy keeps going.
        assert_eq!(
            RetryPolicy::task().builder().build().take(1000).count(),
            1000
        );
    }

    #[test]
    fn the_task_delays_keep_the_old_lower_bounds() {
        // The worker used to wait [b/2, 3b/2) with b = 500 ms × 2ⁿ⁻¹ capped at 30 s.
        let p = RetryPolicy::task();
        assert_eq!(p.base_delay(1), ms(250));
        assert_eq!(p.base_delay(2), ms(500));
        assert_eq!(p.base_delay(7), Duration::from_secs(15));
        assert_eq!(p.base_delay(40), Duration::from_secs(15));
    }
}
