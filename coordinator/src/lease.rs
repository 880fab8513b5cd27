//! One coordinator at a time drives a job: it holds the job's lease, the object
//! `jobs/<id>/lease.json` ([`covmerge_proto::layout::lease`]), naming an owner (a random
//! id, with host and pid for people) and rewritten every heartbeat interval.
//!
//! - A coordinator takes the lease before it writes `job.json` or publishes a task. The
//!   lease is created only if absent (an atomic create on every store covmerge builds).
//! - A lease whose last heartbeat is recent ([`stale_after`] of the interval the lease
//!   states) belongs to a live coordinator: a second one says so and exits, touching
//!   nothing.
//! - A lease that looks stale by the clock, or whose content is not a lease, is watched
//!   for one heartbeat interval on this machine's monotonic clock: if it changes, its
//!   owner is alive (a clock skewed between machines is not mistaken for a dead
//!   coordinator). If it does not, it is taken over with a conditional write naming
//!   the version read, so that of two coordinators taking over at once one wins.
//! - `--resume` ([`Lease::acquire_for_resume`]) does not refuse a lease whose heartbeat
//!   is recent: it watches it until it would be stale. If it changes meanwhile its
//!   owner is alive and the resume is refused; if not, its owner is gone (killed a
//!   moment ago) and it is taken over as above. The wait is at most the lease's stale
//!   bound (20 s by default) and a signal ends it.
//! - Every heartbeat is a conditional write naming the version written last. When it
//!   finds another owner's lease (or none), the coordinator has lost the job: it stops
//!   at once and exits non-zero without writing a result, a manifest or a dashboard
//!   upload. It also reads the lease just before each of those writes.
//! - The lease is deleted when the job ends, success or failure (if it is still ours).
//!
//! Residual races: on `file://` the store has no conditional update (object_store's
//! local store does creates atomically, not updates), so a heartbeat or a takeover
//! there is read, compare, write ([`Atomicity::ReadCompareWrite`]): two coordinators
//! taking over the same stale lease within milliseconds of each other could both
//! believe they won, until the next heartbeat shows one of them the other's owner id.
//! On every store, a coordinator paused for longer than the stale bound between its
//! last lease check and a write of its result could write it after another took over;
//! both would write the same result from the same parts.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use covmerge_proto::layout as keys;
use covmerge_proto::JobId;
use covmerge_storage::{Atomicity, ObjectVersion, Store};
use serde::{Deserialize, Serialize};
use tokio::sync::{watch, Mutex};
use tracing::{info, warn};

use crate::JobError;

/// Default time between heartbeats (`coordinator --lease-heartbeat-secs`).
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// A lease is stale when its last heartbeat is older than this many of its intervals...
pub const STALE_BEATS: u32 = 3;
/// ... plus this margin (a slow store write, a little clock skew).
pub const STALE_MARGIN: Duration = Duration::from_secs(5);
/// The longest heartbeat interval a lease may state; a longer one is read as this
/// (a forged lease must not hold a job for days).
pub const MAX_HEARTBEAT: Duration = Duration::from_secs(300);

/// How old a heartbeat may be, for a lease beating every `interval`, before the lease
/// is stale: [`STALE_BEATS`] × `interval` + [`STALE_MARGIN`] (20 s by default).
pub fn stale_after(interval: Duration) -> Duration {
    interval.clamp(Duration::from_secs(1), MAX_HEARTBEAT) * STALE_BEATS + STALE_MARGIN
}

/// The content of `lease.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct LeaseBody {
    /// Random, one per coordinator run.
    owner: String,
    host: String,
    pid: u32,
    /// The owner's interval between heartbeats.
    heartbeat_secs: u64,
    /// The owner's clock at its last heartbeat (Unix milliseconds).
    heartbeat_unix_ms: u64,
    /// Heartbeats written so far (every write differs).
    beats: u64,
}

impl LeaseBody {
    fn encode(&self) -> Bytes {
        Bytes::from(serde_json::to_vec_pretty(self).expect("lease encodes"))
    }

    fn interval(&self) -> Duration {
        Duration::from_secs(self.heartbeat_secs).clamp(Duration::from_secs(1), MAX_HEARTBEAT)
    }

    fn who(&self) -> String {
        format!(
            "owner {} on host {:?} pid {}",
            self.owner.chars().take(64).collect::<String>(),
            self.host.chars().take(64).collect::<String>(),
            self.pid
        )
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_default()
}

/// What a lease object read from the store says about its owner.
enum Seen {
    /// A heartbeat within the stale bound: its owner is alive.
    Fresh { body: LeaseBody, age: Duration },
    /// To be watched before it is taken: stale by the clock, from the future, or not a
    /// lease at all.
    Doubtful { why: String, watch_for: Duration },
}

fn judge(bytes: &[u8]) -> Seen {
    let Ok(body) = serde_json::from_slice::<LeaseBody>(bytes) else {
        return Seen::Doubtful {
            why: format!("its content ({} bytes) is not a lease", bytes.len()),
            watch_for: HEARTBEAT + Duration::from_secs(1),
        };
    };
    let interval = body.interval();
    let bound = stale_after(interval);
    let now = now_ms();
    let watch_for = interval + Duration::from_secs(1);
    if body.heartbeat_unix_ms > now {
        let ahead = Duration::from_millis(body.heartbeat_unix_ms - now);
        if ahead < bound {
            return Seen::Fresh {
                body,
                age: Duration::ZERO,
            };
        }
        return Seen::Doubtful {
            why: format!(
                "{}: its last heartbeat is {}s ahead of this machine's clock",
                body.who(),
                ahead.as_secs()
            ),
            watch_for,
        };
    }
    let age = Duration::from_millis(now - body.heartbeat_unix_ms);
    if age < bound {
        Seen::Fresh { body, age }
    } else {
        Seen::Doubtful {
            why: format!(
                "{}: no heartbeat for {}s (stale after {}s)",
                body.who(),
                age.as_secs(),
                bound.as_secs()
            ),
            watch_for,
        }
    }
}

/// `Some(description)` when `job` has a lease with a fresh heartbeat: another
/// coordinator drives it. Only reads.
pub async fn live_owner(store: &Store, job: &JobId) -> Result<Option<String>, JobError> {
    Ok(match store.get_versioned(&keys::lease(job)).await? {
        Some(v) => match judge(&v.bytes) {
            Seen::Fresh { body, age } => Some(format!(
                "{}, last heartbeat {}s ago",
                body.who(),
                age.as_secs()
            )),
            Seen::Doubtful { .. } => None,
        },
        None => None,
    })
}

/// A lease held by this coordinator; its heartbeat runs until [`Lease::release`].
pub struct Lease {
    store: Store,
    key: String,
    job: JobId,
    owner: String,
    lost: watch::Receiver<Option<String>>,
    beat: tokio::task::JoinHandle<()>,
}

/// A lease being taken: by whom, for which job, with which heartbeat.
struct Taking<'a> {
    store: &'a Store,
    job: &'a JobId,
    key: String,
    owner: String,
    interval: Duration,
}

impl Taking<'_> {
    /// The lease's body as this coordinator writes it now.
    fn body(&self, beats: u64) -> LeaseBody {
        LeaseBody {
            owner: self.owner.clone(),
            host: hostname(),
            pid: std::process::id(),
            heartbeat_secs: self.interval.as_secs(),
            heartbeat_unix_ms: now_ms(),
            beats,
        }
    }

    /// Whether `v` is this coordinator's lease.
    fn mine(&self, v: &ObjectVersion) -> bool {
        serde_json::from_slice::<LeaseBody>(&v.bytes).is_ok_and(|b| b.owner == self.owner)
    }

    /// Creates the absent lease; refuses when another coordinator created it first.
    async fn create(&self) -> Result<ObjectVersion, JobError> {
        let (store, job, key) = (self.store, self.job, &self.key);
        let (created, atomicity) = store.put_new(key, self.body(0).encode()).await?;
        if atomicity == Atomicity::ReadCompareWrite {
            warn!(store = %store, "this store has no create-if-absent write: the lease is taken by a look then a write");
        }
        let now = store.get_versioned(key).await?;
        match now {
            Some(v) if created && self.mine(&v) => Ok(v),
            Some(v) => Err(busy(job, store, who_of(&v.bytes))),
            None => Err(busy(
                job,
                store,
                "its lease was deleted as this one took it".into(),
            )),
        }
    }

    /// Takes over the lease `seen` once it shows no heartbeat while watched (`wait`:
    /// a fresh one is watched too, for `--resume`); `None`: it was released
    /// meanwhile.
    async fn take_over(
        &self,
        seen: ObjectVersion,
        wait: bool,
    ) -> Result<Option<ObjectVersion>, JobError> {
        let (store, job, key) = (self.store, self.job, &self.key);
        let (why, watch_for) = self.how_to_watch(&seen, wait)?;
        match watch_lease(store, key, &seen, watch_for).await? {
            Watched::Still => {}
            Watched::Changed(again) => {
                return Err(busy(
                    job,
                    store,
                    format!(
                        "{}, alive: its lease changed while watched",
                        who_of(&again.bytes)
                    ),
                ));
            }
            Watched::Gone => return Ok(None),
        }
        let (written, atomicity) = store.put_if(key, self.body(0).encode(), &seen).await?;
        if atomicity == Atomicity::ReadCompareWrite {
            warn!(store = %store, "this store has no conditional update: the lease is taken over by read, compare, write");
        }
        match written {
            Some(v) => {
                warn!(job = %job, "took over the job's stale lease ({why})");
                Ok(Some(v))
            }
            None => Err(busy(
                job,
                store,
                "another coordinator took its stale lease first".into(),
            )),
        }
    }

    /// Why the lease `seen` may be taken over, and how long to watch it first;
    /// refuses a fresh one unless `wait`.
    fn how_to_watch(
        &self,
        seen: &ObjectVersion,
        wait: bool,
    ) -> Result<(String, Duration), JobError> {
        let job = self.job;
        match judge(&seen.bytes) {
            Seen::Fresh { body, age } if !wait => Err(busy(
                job,
                self.store,
                format!("{}, last heartbeat {}s ago", body.who(), age.as_secs()),
            )),
            // `--resume` right after a crash: the lease is young, but its owner
            // may be gone. Watched until it would be stale: a heartbeat
            // meanwhile shows its owner alive.
            Seen::Fresh { body, age } => {
                let left = stale_after(body.interval()).saturating_sub(age);
                let watch_for = left.max(body.interval() + Duration::from_secs(1));
                info!(
                    job = %job,
                    "the job's lease is held ({}, last heartbeat {}s ago): waiting up to {}s for its next heartbeat; if none comes, its coordinator is gone and the lease is taken over (interrupt to give up)",
                    body.who(),
                    age.as_secs(),
                    watch_for.as_secs()
                );
                Ok((
                    format!(
                        "{}: no heartbeat for {}s while watched",
                        body.who(),
                        watch_for.as_secs()
                    ),
                    watch_for,
                ))
            }
            Seen::Doubtful { why, watch_for } => {
                info!(job = %job, "the job's lease looks stale ({why}); watching it for {}s before taking it over", watch_for.as_secs());
                Ok((why, watch_for))
            }
        }
    }

    /// The lease taken (`version`: as written), its heartbeat started.
    fn start(self, version: ObjectVersion) -> Lease {
        let (store, job) = (self.store, self.job);
        info!(job = %job, owner = %self.owner, heartbeat_secs = self.interval.as_secs(), "lease taken");
        let current = Arc::new(Mutex::new(version));
        let (tx, lost) = watch::channel(None);
        let beat = tokio::spawn(heartbeat(
            store.clone(),
            self.key.clone(),
            job.clone(),
            self.owner.clone(),
            self.interval,
            current.clone(),
            tx,
            self.body(0),
        ));
        Lease {
            store: store.clone(),
            key: self.key,
            job: job.clone(),
            owner: self.owner,
            lost,
            beat,
        }
    }
}

pub(crate) fn busy(job: &JobId, store: &Store, what: String) -> JobError {
    JobError::Busy(format!(
        "job {job} is driven by another coordinator ({what}; lease {} in {store}); \
         this one exits without touching the job. Wait for it to end; if it is gone, \
         --resume waits for its lease to go stale (no heartbeat for {}s by default) and \
         takes it over",
        keys::lease(job),
        stale_after(HEARTBEAT).as_secs()
    ))
}

impl Lease {
    /// Takes the lease of `job`: creates it if absent, takes over a stale one, and
    /// refuses with [`JobError::Busy`] when another coordinator holds it.
    pub async fn acquire(
        store: &Store,
        job: &JobId,
        interval: Duration,
    ) -> Result<Lease, JobError> {
        Self::acquire_inner(store, job, interval, false).await
    }

    /// As [`Lease::acquire`], for `--resume`: a lease whose heartbeat is recent is
    /// watched until it would be stale (at most [`stale_after`] its interval) rather
    /// than refused at once. A heartbeat meanwhile refuses ([`JobError::Busy`], its
    /// owner is alive); none, and the lease is taken over. A coordinator killed a
    /// moment ago is thus resumed by a retry that comes at once (a cron job, a
    /// Kubernetes restart).
    pub async fn acquire_for_resume(
        store: &Store,
        job: &JobId,
        interval: Duration,
    ) -> Result<Lease, JobError> {
        Self::acquire_inner(store, job, interval, true).await
    }

    async fn acquire_inner(
        store: &Store,
        job: &JobId,
        interval: Duration,
        wait: bool,
    ) -> Result<Lease, JobError> {
        let interval = interval.clamp(Duration::from_secs(1), MAX_HEARTBEAT);
        let taking = Taking {
            store,
            job,
            key: keys::lease(job),
            owner: covmerge_proto::ids::random_hex(),
            interval,
        };
        let version = match store.get_versioned(&taking.key).await? {
            None => taking.create().await?,
            Some(seen) => match taking.take_over(seen, wait).await? {
                Some(v) => v,
                // Released meanwhile: start again from the top, once.
                None => return Box::pin(Self::acquire_inner(store, job, interval, false)).await,
            },
        };
        Ok(taking.start(version))
    }

    /// Resolves when the lease is lost (another owner in the object, or none).
    pub async fn lost(&self) -> JobError {
        let mut rx = self.lost.clone();
        loop {
            if let Some(why) = rx.borrow_and_update().clone() {
                return JobError::LeaseLost(why);
            }
            if rx.changed().await.is_err() {
                // The heartbeat ended without a loss: wait forever.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Reads the lease now: `Ok` only if it is still this coordinator's. Called before
    /// each write that publishes something.
    pub async fn ensure_held(&self) -> Result<(), JobError> {
        if let Some(why) = self.lost.borrow().clone() {
            return Err(JobError::LeaseLost(why));
        }
        match self.store.get_versioned(&self.key).await? {
            Some(v) if owner_of(&v.bytes).as_deref() == Some(&self.owner) => Ok(()),
            Some(v) => Err(JobError::LeaseLost(lost_to(&self.job, &who_of(&v.bytes)))),
            None => Err(JobError::LeaseLost(lost_to(
                &self.job,
                "nobody: the lease was deleted",
            ))),
        }
    }

    /// Stops the heartbeat and deletes the lease if it is still this coordinator's.
    pub async fn release(self) {
        self.beat.abort();
        let _ = self.beat.await;
        match self.store.get_versioned(&self.key).await {
            Ok(Some(v)) if owner_of(&v.bytes).as_deref() == Some(&self.owner) => {
                if let Err(e) = self.store.delete(&self.key).await {
                    warn!(job = %self.job, error = %e, "cannot delete the job's lease; it goes stale");
                } else {
                    info!(job = %self.job, "lease released");
                }
            }
            Ok(_) => {}
            Err(e) => {
                warn!(job = %self.job, error = %e, "cannot read the job's lease to release it")
            }
        }
    }
}

/// What a lease watched for a while did.
enum Watched {
    /// Not a byte changed.
    Still,
    /// It changed: its owner is alive (or another coordinator took it).
    Changed(ObjectVersion),
    /// It was deleted (released).
    Gone,
}

/// Reads the lease `key` about every second for `watch_for` (on this machine's
/// monotonic clock), until it differs from `seen`.
async fn watch_lease(
    store: &Store,
    key: &str,
    seen: &ObjectVersion,
    watch_for: Duration,
) -> Result<Watched, JobError> {
    let deadline = tokio::time::Instant::now() + watch_for;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        tokio::time::sleep(left.min(WATCH_POLL)).await;
        match store.get_versioned(key).await? {
            Some(again) if again.bytes == seen.bytes => {}
            Some(again) => return Ok(Watched::Changed(again)),
            None => return Ok(Watched::Gone),
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(Watched::Still);
        }
    }
}

/// How often a watched lease is read.
const WATCH_POLL: Duration = Duration::from_secs(1);

fn owner_of(bytes: &[u8]) -> Option<String> {
    serde_json::from_slice::<LeaseBody>(bytes)
        .ok()
        .map(|b| b.owner)
}

fn who_of(bytes: &[u8]) -> String {
    match serde_json::from_slice::<LeaseBody>(bytes) {
        Ok(b) => b.who(),
        Err(_) => format!(
            "a lease object of {} bytes that is not a lease",
            bytes.len()
        ),
    }
}

fn lost_to(job: &JobId, who: &str) -> String {
    format!(
        "job {job}: this coordinator's lease was taken over ({who}); it stopped without \
         publishing a result or a manifest"
    )
}

#[allow(clippy::too_many_arguments)]
async fn heartbeat(
    store: Store,
    key: String,
    job: JobId,
    owner: String,
    interval: Duration,
    current: Arc<Mutex<ObjectVersion>>,
    lost: watch::Sender<Option<String>>,
    mut body: LeaseBody,
) {
    loop {
        tokio::time::sleep(interval).await;
        body.beats += 1;
        body.heartbeat_unix_ms = now_ms();
        let mut cur = current.lock().await;
        match store.put_if(&key, body.encode(), &cur).await {
            Ok((Some(v), _)) => *cur = v,
            Ok((None, _)) => {
                // Another write came in between: ours retried after a lost reply, or
                // another coordinator's.
                match store.get_versioned(&key).await {
                    Ok(Some(v)) if owner_of(&v.bytes).as_deref() == Some(&owner) => *cur = v,
                    Ok(Some(v)) => {
                        let why = lost_to(&job, &who_of(&v.bytes));
                        warn!("{why}");
                        let _ = lost.send(Some(why));
                        return;
                    }
                    Ok(None) => {
                        let why = lost_to(&job, "nobody: the lease was deleted");
                        warn!("{why}");
                        let _ = lost.send(Some(why));
                        return;
                    }
                    Err(e) => warn!(job = %job, error = %e, "cannot read the job's lease"),
                }
            }
            Err(e) => warn!(job = %job, error = %e, "cannot write the job's heartbeat"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobId {
        JobId::parse("lease-test").unwrap()
    }

    #[tokio::test]
    async fn a_second_lease_on_a_live_job_is_refused_and_a_released_one_is_free() {
        let store = Store::open("memory:").unwrap();
        let a = Lease::acquire(&store, &job(), Duration::from_secs(1))
            .await
            .unwrap();
        let e = Lease::acquire(&store, &job(), Duration::from_secs(1))
            .await
            .err()
            .unwrap();
        assert!(
            matches!(&e, JobError::Busy(m) if m.contains("job lease-test is driven by another coordinator")),
            "{e}"
        );
        a.ensure_held().await.unwrap();
        a.release().await;
        assert!(!store.exists(&keys::lease(&job())).await.unwrap());
        let b = Lease::acquire(&store, &job(), Duration::from_secs(1))
            .await
            .unwrap();
        b.release().await;
    }

    #[tokio::test]
    async fn a_stale_or_garbage_lease_is_taken_over_and_its_owner_notices() {
        for stale in [
            serde_json::to_vec(&LeaseBody {
                owner: "gone".into(),
                host: "h".into(),
                pid: 1,
                heartbeat_secs: 1,
                heartbeat_unix_ms: now_ms() - 60_000,
                beats: 9,
            })
            .unwrap(),
            b"\x00not json".to_vec(),
        ] {
            let store = Store::open("memory:").unwrap();
            store
                .put(&keys::lease(&job()), Bytes::from(stale))
                .await
                .unwrap();
            let l = Lease::acquire(&store, &job(), Duration::from_secs(1))
                .await
                .unwrap();
            l.ensure_held().await.unwrap();
            // Someone else takes it: the heartbeat sees another owner.
            let other = LeaseBody {
                owner: "other".into(),
                host: "h".into(),
                pid: 2,
                heartbeat_secs: 1,
                heartbeat_unix_ms: now_ms(),
                beats: 0,
            };
            store
                .put(&keys::lease(&job()), other.encode())
                .await
                .unwrap();
            let e = tokio::time::timeout(Duration::from_secs(5), l.lost())
                .await
                .unwrap();
            assert!(e.to_string().contains("taken over"), "{e}");
            assert!(l.ensure_held().await.is_err());
            l.release().await;
            // Not ours: left alone.
            assert!(store.exists(&keys::lease(&job())).await.unwrap());
        }
    }

    fn lease_of(owner: &str, beats: u64) -> Bytes {
        LeaseBody {
            owner: owner.into(),
            host: "h".into(),
            pid: 7,
            heartbeat_secs: 1,
            heartbeat_unix_ms: now_ms(),
            beats,
        }
        .encode()
    }

    #[tokio::test]
    async fn resume_right_after_a_crash_was_refused_for_the_lease_s_stale_time() {
        // A lease written a moment ago by a coordinator that is gone (no heartbeat).
        let store = Store::open("memory:").unwrap();
        store
            .put(&keys::lease(&job()), lease_of("killed", 3))
            .await
            .unwrap();
        let t0 = std::time::Instant::now();
        let l = Lease::acquire_for_resume(&store, &job(), Duration::from_secs(1))
            .await
            .unwrap();
        // Stale after 3 x 1 s + 5 s: taken once that long passed unchanged, not before.
        let waited = t0.elapsed();
        assert!(
            waited >= Duration::from_secs(7) && waited < Duration::from_secs(15),
            "{waited:?}"
        );
        l.ensure_held().await.unwrap();
        l.release().await;
    }

    #[tokio::test]
    async fn resume_on_a_live_lease_is_refused_once_its_heartbeat_advances() {
        let store = Store::open("memory:").unwrap();
        let key = keys::lease(&job());
        store.put(&key, lease_of("alive", 0)).await.unwrap();
        // Its owner beats every second.
        let beating = {
            let (store, key) = (store.clone(), key.clone());
            tokio::spawn(async move {
                for beats in 1.. {
                    tokio::time::sleep(Duration::from_millis(700)).await;
                    store.put(&key, lease_of("alive", beats)).await.unwrap();
                }
            })
        };
        let t0 = std::time::Instant::now();
        let e = Lease::acquire_for_resume(&store, &job(), Duration::from_secs(1))
            .await
            .err()
            .unwrap();
        beating.abort();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert!(
            matches!(&e, JobError::Busy(m) if m.contains("owner alive") && m.contains("alive: its lease changed while watched")),
            "{e}"
        );
        let now = store.get(&key).await.unwrap();
        assert_eq!(owner_of(&now).as_deref(), Some("alive"), "left alone");
    }
}
