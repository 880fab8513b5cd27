//! Sorting a builder's entries by (path, version) first: an in-place bucket pass by
//! the entry's (path, version) index, then each bucket sorted on the rest of the key.
//!
//! A day's shard holds about a million entries over a few hundred (path, version)s:
//! one comparison sort of them all takes ~20 levels of compares over tens of
//! megabytes; the bucket pass moves each entry once (no second buffer: the entries'
//! memory is the builder's budget), and each bucket, a few thousand entries, sorts
//! within the core's cache: by radix (least significant digit first, a scratch of the
//! bucket's size, at most [`RADIX_MAX`] entries) on the rest of the key made dense
//! (each part less its least in the bucket), else by a comparison sort.

/// Entries of a bucket sorted by radix at least (fewer: the counters' pass costs more
/// than the compares it saves)...
const RADIX_MIN: usize = 256;
/// ...and at most (the scratch: 2 MiB of 32-byte entries).
pub(crate) const RADIX_MAX: usize = 1 << 16;
/// Bits of a radix digit at most (2,048 counters, 8 KiB: within the core's cache).
const DIGIT_BITS: u32 = 11;
/// Digits of a dense key at most (past it, the comparison sort).
const MAX_PASSES: u32 = 4;

/// Sorts `v` by `(bucket(e), rest(e))`, every bucket below `buckets`. Unstable, as
/// `sort_unstable`: the caller sums entries of equal keys afterwards.
pub(crate) fn sort_by_bucket<T: Copy>(
    v: &mut [T],
    buckets: usize,
    bucket: impl Fn(&T) -> u32,
    rest: impl Fn(&T) -> (u32, u32),
) {
    if v.len() < 2 {
        return;
    }
    // Buckets of a few entries each gain nothing, and their counters would be memory
    // beside the entries' budget: then one comparison sort (at most 2 bytes of
    // counters per entry otherwise).
    if buckets > v.len() / 4 || v.len() > u32::MAX as usize {
        v.sort_unstable_by_key(|e| (bucket(e), key(&rest, e)));
        return;
    }
    // starts[b]..starts[b + 1]: where bucket b's entries go.
    let mut starts = vec![0u32; buckets + 1];
    for e in v.iter() {
        starts[bucket(e) as usize + 1] += 1;
    }
    for b in 0..buckets {
        starts[b + 1] += starts[b];
    }
    // In place (American flag sort): each place's entry is swapped along the cycle of
    // the buckets it belongs to until the entry for that place comes back.
    let mut next = starts[..buckets].to_vec();
    for b in 0..buckets {
        let end = starts[b + 1];
        while next[b] < end {
            let mut e = v[next[b] as usize];
            let mut t = bucket(&e) as usize;
            while t != b {
                let at = next[t] as usize;
                next[t] += 1;
                std::mem::swap(&mut e, &mut v[at]);
                t = bucket(&e) as usize;
            }
            v[next[b] as usize] = e;
            next[b] += 1;
        }
    }
    let mut radix = Radix::default();
    for b in 0..buckets {
        let part = &mut v[starts[b] as usize..starts[b + 1] as usize];
        if part.len() > 1 && !radix.sort(part, &rest) {
            part.sort_unstable_by_key(|e| key(&rest, e));
        }
    }
}

fn key<T>(rest: &impl Fn(&T) -> (u32, u32), e: &T) -> u64 {
    let (a, b) = rest(e);
    pack(a, b)
}

/// A radix sort's scratch and counters, kept from bucket to bucket.
struct Radix<T> {
    scratch: Vec<T>,
    counts: Vec<u32>,
}

impl<T> Default for Radix<T> {
    fn default() -> Self {
        Radix {
            scratch: Vec::new(),
            counts: Vec::new(),
        }
    }
}

impl<T: Copy> Radix<T> {
    /// Sorts `part` by `rest` (stable) when its size and its keys' spans suit a radix
    /// sort; returns whether it did.
    fn sort(&mut self, part: &mut [T], rest: &impl Fn(&T) -> (u32, u32)) -> bool {
        if !(RADIX_MIN..=RADIX_MAX).contains(&part.len()) {
            return false;
        }
        let (mut min_a, mut max_a, mut min_b, mut max_b) = (u32::MAX, 0, u32::MAX, 0);
        for e in part.iter() {
            let (a, b) = rest(e);
            (min_a, max_a) = (min_a.min(a), max_a.max(a));
            (min_b, max_b) = (min_b.min(b), max_b.max(b));
        }
        let span_b = u64::from(max_b - min_b) + 1;
        let Some(span) = (u64::from(max_a - min_a) + 1).checked_mul(span_b) else {
            return false;
        };
        let bits = 64 - (span - 1).leading_zeros();
        if bits == 0 {
            return true; // one key: in order already
        }
        let passes = bits.div_ceil(DIGIT_BITS);
        if passes > MAX_PASSES {
            return false;
        }
        let width = bits.div_ceil(passes);
        let dense = |e: &T| {
            let (a, b) = rest(e);
            u64::from(a - min_a) * span_b + u64::from(b - min_b)
        };
        self.scratch.clear();
        self.scratch.extend_from_slice(part);
        self.counts.resize(1 << width, 0);
        for p in 0..passes {
            let digit = |e: &T| ((dense(e) >> (p * width)) & ((1 << width) - 1)) as usize;
            if p % 2 == 0 {
                scatter(part, &mut self.scratch, &mut self.counts, digit);
            } else {
                scatter(&self.scratch, part, &mut self.counts, digit);
            }
        }
        if passes % 2 == 1 {
            part.copy_from_slice(&self.scratch);
        }
        true
    }
}

/// One stable counting pass: `src` into `dst` ordered by `digit`.
fn scatter<T: Copy>(src: &[T], dst: &mut [T], counts: &mut [u32], digit: impl Fn(&T) -> usize) {
    counts.fill(0);
    for e in src {
        counts[digit(e)] += 1;
    }
    let mut sum = 0;
    for c in counts.iter_mut() {
        (*c, sum) = (sum, sum + *c);
    }
    for e in src {
        let d = digit(e);
        dst[counts[d] as usize] = *e;
        counts[d] += 1;
    }
}

/// `(a, b)` as one integer of the same order.
#[inline]
pub(crate) fn pack(a: u32, b: u32) -> u64 {
    u64::from(a) << 32 | u64::from(b)
}

/// Buckets enough for every `bucket(e)` of `v`.
pub(crate) fn buckets_of<T>(v: &[T], bucket: impl Fn(&T) -> u32) -> usize {
    v.iter().map(|e| bucket(e) as usize + 1).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same order as a comparison sort on the whole key, for empty buckets, one
    /// bucket, entries already in order and reversed, and a bucket past every other.
    #[test]
    fn bucket_sort_orders_as_a_comparison_sort() {
        let mut seed = 7u64;
        let mut rnd = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let shapes: Vec<Vec<(u32, u32, u32)>> = vec![
            vec![],
            vec![(0, 1, 1)],
            (0..1000).map(|i| (0, i % 7, i)).collect(),
            (0..1000).map(|i| (i / 10, 0, i)).collect(),
            (0..1000).map(|i| (i, 0, i)).collect(),
            (0..1000).rev().map(|i| (i / 10, i % 3, i)).collect(),
            (0..5000)
                .map(|_| (rnd(40) as u32, rnd(5) as u32, rnd(100) as u32))
                .collect(),
            vec![(99, 0, 0), (0, 0, 0), (99, 0, 0), (50, 1, 1)],
            // Buckets the radix sort takes: keys of 1 to 4 digits, one key repeated,
            // the largest bucket it takes and one past it.
            (0..3000)
                .map(|_| (rnd(3) as u32, rnd(30) as u32, rnd(2000) as u32))
                .collect(),
            (0..3000)
                .map(|_| (rnd(2) as u32, rnd(1 << 20) as u32, rnd(1 << 13) as u32))
                .collect(),
            (0..3000)
                .map(|_| (rnd(2) as u32, rnd(1 << 22) as u32 + 7, rnd(1 << 22) as u32))
                .collect(),
            (0..3000).map(|_| (1, 5, 9)).collect(),
            (0..RADIX_MAX as u64 + 1)
                .map(|_| (0, rnd(40) as u32, rnd(1 << 16) as u32))
                .collect(),
            (0..RADIX_MAX as u64)
                .map(|_| (1, rnd(40) as u32, rnd(1 << 16) as u32))
                .collect(),
        ];
        for shape in shapes {
            let buckets = buckets_of(&shape, |e| e.0) + 3;
            let buckets = buckets
                .min(shape.len() / 4)
                .max(buckets_of(&shape, |e| e.0));
            let mut want = shape.clone();
            want.sort_unstable();
            let mut got = shape.clone();
            sort_by_bucket(&mut got, buckets, |e| e.0, |e| (e.1, e.2));
            assert_eq!(got, want);
        }
    }

    /// Keys whose spans overflow 64 bits or need more than 4 digits are sorted by
    /// compares; a radix sort of them is refused, not wrong.
    #[test]
    fn keys_too_wide_for_the_radix_sort_are_compared() {
        let v: Vec<(u32, u32)> = (0..1000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761), i.wrapping_mul(40_503)))
            .collect();
        let mut radix = Radix::default();
        let mut got = v.clone();
        assert!(!radix.sort(&mut got, &|e: &(u32, u32)| *e));
        let mut got = v.clone();
        sort_by_bucket(&mut got, 1, |_| 0, |e| *e);
        let mut want = v;
        want.sort_unstable();
        assert_eq!(got, want);
    }
}
