//! One accountant for a process's memory, in the spirit of DataFusion's `MemoryPool`
//! and `MemoryReservation`: a [`MemoryPool`] holds the byte budget given by
//! `--memory-budget`, and every structure that grows with the input takes its share
//! through a named [`MemoryReservation`] ([`MemoryReservation::try_grow`],
//! [`MemoryReservation::shrink`]; dropped, it gives everything back).
//!
//! A consumer that cannot get what it asks for falls back to a bounded path (reads
//! again, streams, flushes earlier) with what it got; only where no bounded algorithm
//! exists does it refuse, with the [`MemoryError`], which names the consumer and the
//! flag. [`parse_bytes`] reads the flag's value (`256MiB`, `1GiB`, `512M`, `1000000`).
//!
//! How much each consumer may take is the plan's ([`plan`]): the budget divided once,
//! per role, into named byte limits.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub mod plan;

pub use plan::{line_diff_bytes, max_file_bytes, ReadBudget, Shares, TaskShare, MIN_LOOP_SHARE};

/// `covmerge merge`'s default budget.
pub const DEFAULT_MERGE_BUDGET: u64 = 256 << 20;
/// The default budget of a process that reads results: `covmerge report`,
/// `covmerge diff`.
pub const DEFAULT_READ_BUDGET: u64 = 256 << 20;
/// `covmerge worker`'s default budget: three quarters of the 512 MiB pod limit of
/// `deploy/k8s/worker.yaml`; the rest is code, thread stacks, the runtime and the
/// allocator's slack, which no reservation counts.
pub const DEFAULT_WORKER_BUDGET: u64 = 384 << 20;
/// The smallest budget accepted: below it the fixed costs of one task (a chunk, a
/// block of the spill format, buffers of the readers) do not fit.
pub const MIN_BUDGET: u64 = 16 << 20;
/// The largest budget accepted, 1 PiB: far beyond any machine, and small enough that
/// the plan's shares and the sizes derived from them never overflow (a budget near
/// 2^64 made the plan's arithmetic panic).
pub const MAX_BUDGET: u64 = 1 << 50;

/// A byte budget shared by the reservations taken from it. Cheap to share (`Arc`).
#[derive(Debug)]
pub struct MemoryPool {
    limit: usize,
    used: AtomicUsize,
}

impl MemoryPool {
    /// A pool of `limit` bytes.
    pub fn new(limit: usize) -> Arc<MemoryPool> {
        Arc::new(MemoryPool {
            limit,
            used: AtomicUsize::new(0),
        })
    }

    /// The budget, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes held by reservations now.
    pub fn reserved(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// Bytes no reservation holds.
    pub fn available(&self) -> usize {
        self.limit.saturating_sub(self.reserved())
    }

    /// An empty reservation for `consumer` (named in errors and logs).
    pub fn reservation(
        self: &Arc<Self>,
        consumer: impl Into<Cow<'static, str>>,
    ) -> MemoryReservation {
        MemoryReservation {
            pool: self.clone(),
            consumer: consumer.into(),
            size: 0,
        }
    }

    /// Takes up to `want` bytes, at least `min` (all or nothing below it); returns how
    /// many were taken.
    fn take(&self, want: usize, min: usize) -> Option<usize> {
        let mut used = self.used.load(Ordering::Acquire);
        loop {
            let free = self.limit.saturating_sub(used);
            let n = want.min(free);
            if n < min {
                return None;
            }
            match self.used.compare_exchange_weak(
                used,
                used + n,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(n),
                Err(now) => used = now,
            }
        }
    }

    fn give_back(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// What one consumer holds of a [`MemoryPool`]. Given back when dropped.
#[derive(Debug)]
pub struct MemoryReservation {
    pool: Arc<MemoryPool>,
    consumer: Cow<'static, str>,
    size: usize,
}

impl MemoryReservation {
    /// The consumer's name.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// Bytes held.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The pool this reservation is taken from.
    pub fn pool(&self) -> &Arc<MemoryPool> {
        &self.pool
    }

    /// Grows by `bytes`, or fails without taking anything.
    pub fn try_grow(&mut self, bytes: usize) -> Result<(), MemoryError> {
        match self.pool.take(bytes, bytes) {
            Some(n) => {
                self.size += n;
                Ok(())
            }
            None => Err(self.error(bytes)),
        }
    }

    /// Grows by as much of `want` as the pool has free, but by at least `min` (or
    /// fails without taking anything); returns the bytes added. The way a consumer
    /// with a bounded fallback asks: it works within whatever it got.
    pub fn grow_up_to(&mut self, want: usize, min: usize) -> Result<usize, MemoryError> {
        match self.pool.take(want, min.min(want)) {
            Some(n) => {
                self.size += n;
                Ok(n)
            }
            None => Err(self.error(min)),
        }
    }

    /// Gives back `bytes` (at most what is held).
    pub fn shrink(&mut self, bytes: usize) {
        let n = bytes.min(self.size);
        self.size -= n;
        self.pool.give_back(n);
    }

    /// Grows or shrinks to exactly `bytes`.
    pub fn try_resize(&mut self, bytes: usize) -> Result<(), MemoryError> {
        if bytes > self.size {
            self.try_grow(bytes - self.size)
        } else {
            self.shrink(self.size - bytes);
            Ok(())
        }
    }

    /// Gives everything back; returns how much was held.
    pub fn free(&mut self) -> usize {
        let n = self.size;
        self.shrink(n);
        n
    }

    /// Moves `bytes` of this reservation (at most what is held) to a new one for
    /// `consumer`, without asking the pool again.
    pub fn split(&mut self, bytes: usize, consumer: impl Into<Cow<'static, str>>) -> Self {
        let n = bytes.min(self.size);
        self.size -= n;
        MemoryReservation {
            pool: self.pool.clone(),
            consumer: consumer.into(),
            size: n,
        }
    }

    fn error(&self, requested: usize) -> MemoryError {
        MemoryError {
            consumer: self.consumer.to_string(),
            requested,
            available: self.pool.available(),
            limit: self.pool.limit,
        }
    }
}

impl Drop for MemoryReservation {
    fn drop(&mut self) {
        self.free();
    }
}

/// A reservation the pool could not grant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{consumer} needs {} more, but only {} of the {} memory budget is free (raise --memory-budget)",
    format_bytes(*requested as u64),
    format_bytes(*available as u64),
    format_bytes(*limit as u64)
)]
pub struct MemoryError {
    /// The reservation's name (what holds the memory).
    pub consumer: String,
    /// Bytes it asked for beyond what it held.
    pub requested: usize,
    /// Bytes of the budget still free when it asked.
    pub available: usize,
    /// The whole budget, in bytes.
    pub limit: usize,
}

/// A value of `--memory-budget` that is not a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a byte size: {reason} (examples: 256MiB, 1GiB, 512M, 300000000)")]
pub struct ParseBytesError {
    /// The text given.
    pub value: String,
    /// Why it is not a size.
    pub reason: &'static str,
}

/// Reads a byte size: a number (a decimal fraction allowed when a unit follows) and
/// an optional unit, case-insensitive, spaces allowed between. `K`, `Ki`, `KiB`
/// (and `M`, `G`, `T`, `P` alike) are powers of 1024; `KB`, `MB`, `GB`, `TB`, `PB` powers of
/// 1000; `B` or none, bytes.
pub fn parse_bytes(s: &str) -> Result<u64, ParseBytesError> {
    let err = |reason| ParseBytesError {
        value: s.to_string(),
        reason,
    };
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    if num.is_empty() {
        return Err(err("no number"));
    }
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "ki" | "kib" => 1 << 10,
        "m" | "mi" | "mib" => 1 << 20,
        "g" | "gi" | "gib" => 1 << 30,
        "t" | "ti" | "tib" => 1 << 40,
        "p" | "pi" | "pib" => 1 << 50,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "pb" => 1_000_000_000_000_000,
        _ => return Err(err("unknown unit")),
    };
    let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
    if whole.is_empty() || frac.contains('.') || (num.contains('.') && frac.is_empty()) {
        return Err(err("not a number"));
    }
    if !frac.is_empty() && mult == 1 {
        return Err(err("a fraction of a byte"));
    }
    let too_large = || err("too large");
    let whole: u64 = whole.parse().map_err(|_| too_large())?;
    let mut n = whole.checked_mul(mult).ok_or_else(too_large)?;
    if !frac.is_empty() {
        let digits = &frac[..frac.len().min(12)];
        let f: u128 = digits.parse().map_err(|_| err("not a number"))?;
        let scale = 10u128.pow(digits.len() as u32);
        let part = (f * mult as u128 / scale) as u64;
        n = n.checked_add(part).ok_or_else(too_large)?;
    }
    Ok(n)
}

/// Reads `--memory-budget`: a size ([`parse_bytes`]) of at least [`MIN_BUDGET`].
/// The CLI's value parser for the flag (clap shows its message).
pub fn parse_budget(s: &str) -> Result<u64, String> {
    let n = parse_bytes(s).map_err(|e| e.to_string())?;
    if n < MIN_BUDGET {
        return Err(format!(
            "{s:?} is below the smallest memory budget, {}",
            format_bytes(MIN_BUDGET)
        ));
    }
    if n > MAX_BUDGET {
        return Err(format!(
            "{s:?} is above the largest memory budget, {}",
            format_bytes(MAX_BUDGET)
        ));
    }
    Ok(n)
}

/// A byte count for people: `256 MiB`, `1.5 GiB`, `812 KiB`, `17 B`.
pub fn format_bytes(n: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if n >= size {
            let tenths = (n as u128 * 10 / size as u128) as u64;
            return if tenths.is_multiple_of(10) {
                format!("{} {unit}", tenths / 10)
            } else {
                format!("{}.{} {unit}", tenths / 10, tenths % 10)
            };
        }
    }
    format!("{n} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("1 gib"), Ok(1 << 30));
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("512Mi"), Ok(512 << 20));
        assert_eq!(parse_bytes("300MB"), Ok(300_000_000));
        assert_eq!(parse_bytes("1000000"), Ok(1_000_000));
        assert_eq!(parse_bytes("64k"), Ok(65_536));
        assert_eq!(parse_bytes("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_bytes(" 17 B "), Ok(17));
    }

    #[test]
    fn bad_sizes_are_refused_naming_the_value() {
        for bad in [
            "",
            "MiB",
            "12 parsecs",
            "1.5",
            "1..5M",
            "-1M",
            "99999999999999999999",
            "20000000T",
        ] {
            let e = parse_bytes(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn a_budget_below_the_minimum_is_refused() {
        assert_eq!(parse_budget("1GiB"), Ok(1 << 30));
        let e = parse_budget("1MiB").unwrap_err();
        assert!(e.contains("\"1MiB\"") && e.contains("16 MiB"), "{e}");
        assert!(parse_budget("lots")
            .unwrap_err()
            .contains("not a byte size"));
    }

    #[test]
    fn a_budget_near_the_largest_integer_is_refused_not_a_panic() {
        let e = parse_budget("15000000000000000000").unwrap_err();
        assert!(e.contains("above the largest memory budget"), "{e}");
        assert_eq!(parse_budget("1024TiB"), Ok(MAX_BUDGET));
        assert_eq!(parse_budget("1PiB"), Ok(MAX_BUDGET));
        assert!(parse_budget("2PiB").unwrap_err().contains("largest"));
        // The largest budget accepted is planned without overflow.
        let s = super::plan::Shares::of(MAX_BUDGET as usize, 64).unwrap();
        assert!(s.source_cache < s.sources && s.per_loop > 0);
    }

    #[test]
    fn sizes_format_for_people() {
        assert_eq!(format_bytes(256 << 20), "256 MiB");
        assert_eq!(format_bytes(3 << 29), "1.5 GiB");
        assert_eq!(format_bytes(17), "17 B");
    }

    #[test]
    fn reservations_stay_within_the_pool_and_give_back_on_drop() {
        let pool = MemoryPool::new(100);
        let mut a = pool.reservation("a");
        a.try_grow(60).unwrap();
        let mut b = pool.reservation("b");
        let e = b.try_grow(50).unwrap_err();
        assert_eq!((e.requested, e.available, e.limit), (50, 40, 100));
        assert!(e.to_string().contains("--memory-budget") && e.to_string().starts_with("b needs"));
        assert_eq!(b.size(), 0, "a failed grow takes nothing");
        assert_eq!(b.grow_up_to(50, 10), Ok(40));
        assert_eq!(pool.available(), 0);
        assert!(b.grow_up_to(5, 1).is_err());
        a.shrink(20);
        assert_eq!(pool.reserved(), 80);
        let c = a.split(30, "c");
        assert_eq!((a.size(), c.size(), pool.reserved()), (10, 30, 80));
        drop(c);
        drop(b);
        assert_eq!(pool.reserved(), 10);
        a.try_resize(100).unwrap();
        assert_eq!(a.free(), 100);
        assert_eq!(pool.available(), 100);
    }

    #[test]
    fn concurrent_reservations_never_exceed_the_limit() {
        let pool = MemoryPool::new(1000);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let pool = pool.clone();
                std::thread::spawn(move || {
                    let mut r = pool.reservation("t");
                    for _ in 0..10_000 {
                        if r.try_grow(7).is_ok() {
                            assert!(pool.reserved() <= 1000);
                            r.shrink(7);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(pool.reserved(), 0);
    }
}
