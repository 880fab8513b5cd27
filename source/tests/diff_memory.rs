//! The estimate of a line diff's memory ([`diff_bytes`]) against what the allocator
//! sees: the peak of live heap bytes while a pair is diffed, above what was live
//! before (the texts), is at most the estimate's per-line part, for pairs of every
//! kind (distinct lines, one line repeated, a few lines repeated, nothing in common).
//! A test binary of its own: the counting allocator sees every allocation of it.

use std::sync::atomic::Ordering::Relaxed;

mod common;
use common::{LIVE, ONE, PEAK};

use covmerge_source::project::{diff_bytes, line_map_within};
use covmerge_source::FileVersion;

fn text(lines: impl Iterator<Item = String>) -> FileVersion {
    let mut t = String::new();
    for l in lines {
        t.push_str(&l);
        t.push('\n');
    }
    FileVersion::new(t.into_bytes())
}

/// Diffs the pair `make` gives without a limit, alone (no other test allocates
/// meanwhile); checks the heap it held at its peak above the texts against the
/// estimate.
fn check(name: &str, make: impl FnOnce() -> (FileVersion, FileVersion)) {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (a, b) = make();
    let (a, b) = (&a, &b);
    let (n, m) = (a.lines().count(), b.lines().count());
    let texts = (a.data.len() + b.data.len()) as u64;
    let before = LIVE.load(Relaxed);
    PEAK.store(before, Relaxed);
    let map = line_map_within(a, b, u64::MAX);
    let peak = (PEAK.load(Relaxed) - before) as u64;
    assert!(!map.capped);
    drop(map);
    let estimate = diff_bytes(a, b, n, m) - texts;
    let per_line = peak as f64 / (n + m) as f64;
    println!("{name}: {n} + {m} lines, peak {peak} bytes above the texts, {per_line:.1} a line; estimate {estimate}");
    assert!(
        peak <= estimate,
        "{name}: the diff held {peak} bytes, over its estimate {estimate}"
    );
}

const N: usize = 50_000;

#[test]
fn distinct_lines_every_hundredth_changed() {
    check("distinct", || {
        let a = text((0..N).map(|i| format!("line {i}")));
        let b = text((0..N).map(|i| {
            if i % 100 == 0 {
                format!("changed {i}")
            } else {
                format!("line {i}")
            }
        }));
        (a, b)
    });
}

#[test]
fn nothing_in_common() {
    check("disjoint", || {
        let a = text((0..N).map(|i| format!("a{i}")));
        let b = text((0..N).map(|i| format!("b{i}")));
        (a, b)
    });
}

#[test]
fn one_line_repeated_falls_back_to_myers() {
    check("repeated", || {
        let a = text((0..N).map(|i| if i % 3 == 0 { "}" } else { "" }.to_string()));
        let b = text((0..N).map(|i| if i % 5 == 0 { "}" } else { "" }.to_string()));
        (a, b)
    });
}

#[test]
fn a_few_lines_shuffled() {
    check("shuffled", || {
        // A small alphabet in a pseudo-random order: the histogram and Myers both work.
        let mut x: u64 = 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let a = text((0..N).map(|_| format!("k{}", next() % 97)));
        let b = text((0..N).map(|_| format!("k{}", next() % 97)));
        (a, b)
    });
}

#[test]
fn a_large_version_onto_a_small_base() {
    check("uneven", || {
        let a = text((0..N).map(|i| format!("line {i}")));
        let b = text((0..N / 100).map(|i| format!("line {}", i * 100)));
        (a, b)
    });
}
