use super::encode::{Pending, PendingRows, PENDING_BLOCK};
use super::*;

#[test]
fn round_trip_and_aggregation() {
    let (mut st, mut b) = (StringTable::new(), EntryTable::new());
    let (f, c, func, m) = (
        st.intern(b"a.c"),
        st.intern(b"c1"),
        st.intern(b"fn"),
        st.intern(b"m"),
    );
    let k = RawKey {
        file: f,
        commit: c,
        func,
        manager: m,
        sl: 3,
    };
    b.add(k, 5, 1);
    b.add(k, 7, 1);
    // Already summed rows aggregate with single ones.
    b.add(k, 1 << 40, 3);
    b.add(RawKey { sl: 300_000, ..k }, u64::MAX, 1);
    assert_eq!(std::mem::size_of::<Pending>(), 28);
    let mut out = Vec::new();
    b.finish_into(&mut st, &mut out);
    assert!(b.is_empty());
    // A second block in the same chunk with its own table.
    st.clear();
    let x = st.intern(b"b.c");
    b.add(
        RawKey {
            file: x,
            commit: x,
            func: x,
            manager: x,
            sl: 1,
        },
        1,
        1,
    );
    b.finish_into(&mut st, &mut out);
    let mut seen = Vec::new();
    for_each_block(&out, |blk| {
        for (k, v) in blk.entries {
            seen.push((blk.strings[k.file as usize].to_vec(), k.sl, v.hits, v.rows));
        }
        Ok(())
    })
    .unwrap();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (b"a.c".to_vec(), 3, 12 + (1 << 40), 5),
            (b"a.c".to_vec(), 300_000, u64::MAX, 1),
            (b"b.c".to_vec(), 1, 1, 1)
        ]
    );
}

/// (file, sl) and its (hits, rows).
type Sum = ((Vec<u8>, u32), (u64, u64));

/// Decoded sums, and each block's files in the order their entries come.
fn decode(out: &[u8]) -> (Vec<Sum>, Vec<Vec<Vec<u8>>>) {
    let mut sums = std::collections::BTreeMap::new();
    let mut orders = Vec::new();
    for_each_block(out, |blk| {
        let mut order: Vec<Vec<u8>> = Vec::new();
        for (k, v) in &blk.entries {
            let f = blk.strings[k.file as usize].to_vec();
            if order.last() != Some(&f) {
                order.push(f.clone());
            }
            let e = sums.entry((f, k.sl)).or_insert((0, 0));
            e.0 += v.hits;
            e.1 += v.rows;
        }
        orders.push(order);
        Ok(())
    })
    .unwrap();
    (sums.into_iter().collect(), orders)
}

/// Runs of equal values in `seq`, each value once: `true` if no value comes back
/// after another one.
fn contiguous<T: PartialEq + Clone>(seq: &[T]) -> bool {
    let mut runs: Vec<T> = Vec::new();
    for x in seq {
        if runs.last() != Some(x) {
            if runs.contains(x) {
                return false;
            }
            runs.push(x.clone());
        }
    }
    true
}

#[test]
fn blocks_order_entries_by_file_then_commit_and_fall_back_to_file_order() {
    // (files, commits, rows): the last needs more buckets than it has entries.
    for (files, commits, rows) in [(4u32, 6u32, 240u32), (100, 100, 200)] {
        let mut st = StringTable::new();
        let f: Vec<u32> = (0..files)
            .map(|i| st.intern(format!("f{i}.c").as_bytes()))
            .collect();
        let c: Vec<u32> = (0..commits)
            .map(|i| st.intern(format!("c{i}").as_bytes()))
            .collect();
        let m = st.intern(b"m");
        let mut t = EntryTable::new();
        for i in 0..rows {
            let key = RawKey {
                file: f[(i % files) as usize],
                commit: c[(i * 7 % commits) as usize],
                func: m,
                manager: m,
                sl: i + 1,
            };
            t.add(key, i as u64, 1);
        }
        let mut out = Vec::new();
        t.finish_into(&mut st, &mut out);
        let mut seq = Vec::new();
        for_each_block(&out, |b| {
            for (k, v) in &b.entries {
                let s = |id: u32| b.strings[id as usize].to_vec();
                seq.push((s(k.file), s(k.commit), k.sl, v.hits));
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(seq.len(), rows as usize, "every row once");
        let by_file: Vec<_> = seq.iter().map(|e| e.0.clone()).collect();
        assert!(contiguous(&by_file), "a file's entries are split");
        let by_pair: Vec<_> = seq.iter().map(|e| (e.0.clone(), e.1.clone())).collect();
        if files * commits <= rows.max(4096) {
            assert!(contiguous(&by_pair), "a (file, commit)'s entries are split");
        }
        for (file, commit, sl, hits) in &seq {
            let i = sl - 1;
            assert_eq!(*hits, i as u64);
            assert_eq!(file, format!("f{}.c", i % files).as_bytes());
            assert_eq!(commit, format!("c{}", i * 7 % commits).as_bytes());
        }
    }
}

#[test]
fn blocks_with_few_repeated_keys_are_plain_and_sum_the_same() {
    let mut st = StringTable::new();
    let mut t = EntryTable::new();
    let files: Vec<u32> = (0..5)
        .map(|i| st.intern(format!("f{i}.c").as_bytes()))
        .collect();
    let m = st.intern(b"m");
    let key = |f: usize, sl: u32| RawKey {
        file: files[f],
        commit: m,
        func: m,
        manager: m,
        sl,
    };
    const KEYS: u32 = 20_000;
    let entries = |out: &[u8]| {
        let mut n = 0;
        for_each_block(out, |b| {
            n += b.entries.len();
            Ok(())
        })
        .unwrap();
        n
    };
    // Distinct keys, files interleaved, 2 % of them twice, and one already summed
    // entry: not worth summing, so every row is its own entry.
    let mut plain = Vec::new();
    for i in 0..KEYS {
        t.add(key(i as usize % 5, i), 1, 1);
        if i % 50 == 0 {
            t.add(key(i as usize % 5, i), 2, 1);
        }
    }
    t.add(key(2, 7), 10, 4); // row 7 is in f2.c
    t.finish_into(&mut st, &mut plain);
    assert_eq!(entries(&plain), (KEYS + KEYS / 50 + 1) as usize);
    let (sums, _) = decode(&plain);
    assert_eq!(sums.len(), KEYS as usize);
    for ((f, sl), (hits, rows)) in &sums {
        let mut want = if sl % 50 == 0 { (3, 2) } else { (1, 1) };
        if (f.as_slice(), *sl) == (&b"f2.c"[..], 7) {
            want = (want.0 + 10, want.1 + 4);
        }
        assert_eq!((*hits, *rows), want, "{f:?}:{sl}");
    }
    // Every key three times: summed, one entry per key.
    let mut summed = Vec::new();
    for _ in 0..3 {
        for i in 0..KEYS {
            t.add(key(i as usize % 5, i), 1, 1);
        }
    }
    t.finish_into(&mut st, &mut summed);
    assert_eq!(entries(&summed), KEYS as usize);
    assert!(decode(&summed).0.iter().all(|(_, v)| *v == (3, 3)));
    // A small block is summed whatever it holds.
    let mut small = Vec::new();
    t.add(key(0, 1), 1, 1);
    t.add(key(0, 1), 1, 1);
    t.add(key(1, 2), 1, 1);
    t.finish_into(&mut st, &mut small);
    assert_eq!(entries(&small), 2);
    // Every block holds each file's entries together, whatever the input order.
    for out in [&plain, &summed, &small] {
        for order in decode(out).1 {
            let mut seen = order.clone();
            seen.sort();
            seen.dedup();
            assert_eq!(
                seen.len(),
                order.len(),
                "a file's entries are split: {order:?}"
            );
        }
    }
}

#[test]
fn pending_rows_grow_a_block_at_a_time_and_keep_their_order() {
    let mut rows = PendingRows::default();
    let row = |i: u32| Pending {
        key: RawKey {
            file: i,
            commit: 0,
            func: 0,
            manager: 0,
            sl: i,
        },
        hits: [i, 0],
    };
    rows.push(row(0));
    assert!(rows.capacity() < 16, "a table with one row holds little");
    let n = 3 * PENDING_BLOCK as u32 + 1;
    for i in 1..n {
        rows.push(row(i));
    }
    assert_eq!(rows.len(), n as usize);
    // Four blocks, not a vector doubled to 4 * PENDING_BLOCK * 2 rows.
    assert_eq!(rows.capacity(), 4 * PENDING_BLOCK);
    assert!(rows.iter().map(|p| p.key.sl).eq(0..n));
    for i in [0, PENDING_BLOCK - 1, PENDING_BLOCK, n as usize - 1] {
        assert_eq!(rows.get(i).map(|p| p.hits[0]), Some(i as u32));
    }
    assert!(rows.get(n as usize).is_none());
}

#[test]
fn column_indexes_over_one_table_find_short_and_long_strings() {
    let mut st = StringTable::new();
    let (mut a, mut b) = (StringIndex::default(), StringIndex::default());
    let words: Vec<Vec<u8>> = (0..3000)
        .map(|i| {
            // 1 to 80 bytes: both sides of the inline limit, and the empty string.
            let n = i % 81;
            (0..n).map(|j| b'a' + ((i * 7 + j) % 26) as u8).collect()
        })
        .collect();
    let ids: Vec<u32> = words.iter().map(|w| a.intern(&mut st, w).0).collect();
    for (w, &id) in words.iter().zip(&ids) {
        assert_eq!(a.intern(&mut st, w), (id, false), "{w:?}");
        assert_eq!(st.get(id), w.as_slice());
    }
    // Another column's index adds its own ids for the same strings.
    let (other, new) = b.intern(&mut st, &words[5]);
    assert!(new && other != ids[5]);
    assert_eq!(st.get(other), words[5].as_slice());
    assert_eq!(b.intern(&mut st, &words[5]), (other, false));
    assert_eq!(st.intern(&words[9]), st.intern(&words[9]));
    assert!(a.intern(&mut st, b"not there before").1);
}

#[test]
fn corruption_is_an_error_not_a_panic() {
    let (mut st, mut b) = (StringTable::new(), EntryTable::new());
    let f = st.intern(b"a.c");
    let key = |file, func, sl| RawKey {
        file,
        commit: f,
        func,
        manager: f,
        sl,
    };
    b.add(key(f, f, 1), 1, 1);
    let mut out = Vec::new();
    b.finish_into(&mut st, &mut out);
    for cut in 0..out.len() {
        assert!(for_each_block(&out[..cut], |_| Ok(())).is_err() || cut == 0);
    }
    let mut bad = out.clone();
    let n = bad.len();
    bad[n - 7] = 0x7f; // the run's file index, far out of range
    assert!(for_each_block(&bad, |_| Ok(())).is_err());
    // Any byte of a two-run block set to anything: an error or a block, never a
    // panic or an allocation past the block's size.
    b.add(key(f, f, 2), 3, 2);
    let g = st.intern(b"b.c");
    b.add(key(g, g, 300), 1 << 40, 1);
    let mut two = Vec::new();
    b.finish_into(&mut st, &mut two);
    for i in 8..two.len() {
        for v in [0u8, 1, 2, 0x7f, 0x80, 0xff] {
            let mut bad = two.clone();
            bad[i] = v;
            let _ = for_each_block(&bad, |blk| {
                assert!(blk.entries.len() <= bad.len());
                Ok(())
            });
        }
    }
}

#[test]
fn blocks_of_a_shared_string_table_carry_only_their_own_strings() {
    let mut strings = StringTable::new();
    let (mut a, mut b) = (EntryTable::new(), EntryTable::new());
    let key = |st: &mut StringTable, f: &str, c: &str, sl| RawKey {
        file: st.intern(f.as_bytes()),
        commit: st.intern(c.as_bytes()),
        func: st.intern(b"fn"),
        manager: st.intern(b"m"),
        sl,
    };
    let unused = strings.intern(b"unused");
    let ka = key(&mut strings, "a.c", "c1", 1);
    a.add(ka, 2, 1);
    b.add(key(&mut strings, "b.c", "c2", 9), 3, 2);
    a.add(ka, 5, 1);
    let mut out = Vec::new();
    a.finish_into(&mut strings, &mut out);
    b.finish_into(&mut strings, &mut out);
    assert!(a.is_empty() && b.is_empty());
    assert_eq!(strings.get(unused), b"unused");
    let mut blocks = Vec::new();
    for_each_block(&out, |blk| {
        let mut names: Vec<Vec<u8>> = blk.strings.iter().map(|s| s.to_vec()).collect();
        names.sort();
        let (k, v) = blk.entries[0];
        let s = |i: u32| String::from_utf8(blk.strings[i as usize].to_vec()).unwrap();
        blocks.push((
            names.len(),
            s(k.file),
            s(k.commit),
            s(k.func),
            k.sl,
            v.hits,
            v.rows,
        ));
        Ok(())
    })
    .unwrap();
    assert_eq!(
        blocks,
        vec![
            (4, "a.c".into(), "c1".into(), "fn".into(), 1, 7, 2),
            (4, "b.c".into(), "c2".into(), "fn".into(), 9, 3, 2),
        ]
    );
}
