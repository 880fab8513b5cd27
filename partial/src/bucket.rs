//! Sorting a builder's entries by (path, version) first: an in-place bucket pass by
//! the entry's (path, version) index, then each bucket sorted on the rest of the key.
//!
//! A day's shard holds about a million entries over a few hundred (path, version)s:
//! one comparison sort of them all takes ~20 levels of compares over tens of
//! megabytes; the bucket pass moves each entry once (no second buffer: the entries'
//! memory is the builder's budget), and each bucket, a few thousand entries, sorts
//! within the core's cache on one packed integer.

/// Sorts `v` by `(bucket(e), rest(e))`, every bucket below `buckets`. Unstable, as
/// `sort_unstable`: the caller sums entries of equal keys afterwards.
pub(crate) fn sort_by_bucket<T: Copy, K: Ord>(
    v: &mut [T],
    buckets: usize,
    bucket: impl Fn(&T) -> u32,
    rest: impl Fn(&T) -> K,
) {
    if v.len() < 2 {
        return;
    }
    // Buckets of a few entries each gain nothing, and their counters would be memory
    // beside the entries' budget: then one comparison sort (at most 2 bytes of
    // counters per entry otherwise).
    if buckets > v.len() / 4 || v.len() > u32::MAX as usize {
        v.sort_unstable_by_key(|e| (bucket(e), rest(e)));
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
    for b in 0..buckets {
        let part = &mut v[starts[b] as usize..starts[b + 1] as usize];
        if part.len() > 1 {
            part.sort_unstable_by_key(&rest);
        }
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
        ];
        for shape in shapes {
            let buckets = buckets_of(&shape, |e| e.0) + 3;
            let mut want = shape.clone();
            want.sort_unstable();
            let mut got = shape.clone();
            sort_by_bucket(&mut got, buckets, |e| e.0, |e| (e.1, e.2));
            assert_eq!(got, want);
        }
    }
}
