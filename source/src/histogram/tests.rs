use super::fallback::{prune_scan_steps, MAX_PRUNE_STEPS};
use super::*;
use imara_diff::InternedInput;

fn imara(input: &InternedInput<u32>) -> (Vec<bool>, Vec<bool>) {
    let d = Diff::compute(Algorithm::Histogram, input);
    let r = (0..input.before.len() as u32)
        .map(|i| d.is_removed(i))
        .collect();
    let a = (0..input.after.len() as u32)
        .map(|i| d.is_added(i))
        .collect();
    (r, a)
}

fn input(x: &[u32], y: &[u32]) -> InternedInput<u32> {
    let mut i = InternedInput::default();
    i.update_before(x.iter().copied());
    i.update_after(y.iter().copied());
    i
}

fn ours(input: &InternedInput<u32>) -> (Vec<bool>, Vec<bool>) {
    histogram_flags(&input.before, &input.after, input.interner.num_tokens())
}

/// A xorshift generator: the pairs are the same at every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// An edited copy of `base`: lines changed, inserted, deleted and moved.
fn edit(rng: &mut Rng, base: &[u32], alphabet: u64, edits: usize) -> Vec<u32> {
    let mut v = base.to_vec();
    for _ in 0..edits {
        let at = rng.below(v.len() as u64 + 1) as usize;
        match rng.below(5) {
            0 if at < v.len() => v[at] = rng.below(alphabet) as u32,
            1 if at < v.len() => {
                v.remove(at);
            }
            2 => {
                let len = 1 + rng.below(6) as usize;
                let end = (at + len).min(v.len());
                let block: Vec<u32> = v.drain(at.min(end)..end).collect();
                let to = rng.below(v.len() as u64 + 1) as usize;
                v.splice(to..to, block);
            }
            _ => v.insert(at, rng.below(alphabet) as u32),
        }
    }
    v
}

/// The flags equal imara-diff's histogram on pairs of every kind: distinct lines,
/// a few repeated lines, small alphabets (Myers fallbacks), runs of equal length.
/// imara-diff 0.2's preprocessing scan, step by step (its loops, counting).
fn scan_steps_by_walking(before: &[Token], after: &[Token]) -> u64 {
    let sqrt = |n: usize| -> u32 { 1 << ((usize::BITS - n.leading_zeros()) / 2) };
    let count = |f: &[Token], t: Token| f.iter().filter(|x| **x == t).count() as u32;
    let mut total = 0;
    for (file, other) in [(before, after), (after, before)] {
        let limit = sqrt(file.len()).min(1024);
        // 0: absent from the other file, 1: a few times, 2: very common.
        let status: Vec<u8> = file
            .iter()
            .map(|&t| match count(other, t) {
                0 => 0,
                n if n >= limit => 2,
                _ => 1,
            })
            .collect();
        for pos in 0..file.len() {
            if status[pos] != 2 {
                continue;
            }
            let start = if pos > 100 { 100 } else { 0 };
            for st in status[start..pos].iter().rev() {
                if *st == 1 {
                    break;
                }
                total += 1;
            }
        }
    }
    total
}

#[test]
fn the_prune_scan_is_counted_as_imara_diff_walks_it() {
    let mut r = Rng(99);
    for round in 0..40 {
        let n = 50 + r.below(1_500) as usize;
        let kinds = 2 + round % 7;
        let gen = |r: &mut Rng, side: u32| -> Vec<Token> {
            (0..n)
                .map(|_| match r.below(kinds) {
                    // Blank: very common on both sides.
                    0 | 1 => Token(0),
                    // A line of both files, a few times.
                    2 => Token(1 + r.below(40) as u32),
                    // A line of this file only.
                    _ => Token(1_000 + side * 100_000 + r.below(50_000) as u32),
                })
                .collect()
        };
        let (b, a) = (gen(&mut r, 0), gen(&mut r, 1));
        assert_eq!(
            prune_scan_steps(&b, &a),
            scan_steps_by_walking(&b, &a),
            "round {round}"
        );
    }
}

/// A region of 80,000 lines, every other one blank and the rest in one file only:
/// imara-diff's Myers pruned it in 12 s (quadratic). It is diffed in pieces now,
/// in linear time, a valid diff that keeps the blanks it can; at a tenth of the
/// size it is still diffed whole, as imara-diff diffs it.
#[test]
fn frequent_and_one_sided_lines_took_the_myers_fallback_quadratic_time() {
    let pair = |n: usize| {
        let side = |tag: u32| -> Vec<u32> {
            (0..n as u32)
                .map(|i| if i % 2 == 1 { 0 } else { tag + i })
                .collect()
        };
        input(&side(1_000_000), &side(3_000_000))
    };
    let big = pair(80_000);
    assert!(prune_scan_steps(&big.before, &big.after) > MAX_PRUNE_STEPS);
    let (r, a) = ours(&big);
    // Valid: the unchanged lines of both sides pair in order, with the same text.
    let kept = |side: &[Token], changed: &[bool]| -> Vec<Token> {
        side.iter()
            .zip(changed)
            .filter(|x| !*x.1)
            .map(|x| *x.0)
            .collect()
    };
    let (kept_b, kept_a) = (kept(&big.before, &r), kept(&big.after, &a));
    assert_eq!(kept_b, kept_a);
    assert!(kept_b.len() > 30_000, "{} blanks kept", kept_b.len());
    let small = pair(8_000);
    assert_eq!(ours(&small), imara(&small), "8,000 lines: diffed");
}

#[test]
fn flags_equal_imara_diff_histogram_on_generated_pairs() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut checked = 0;
    for case in 0..800 {
        let len = [0, 1, 2, 5, 20, 60, 200, 400][case % 8];
        let alphabet = [2, 3, 10, 60, 500, 1 << 30][(case / 8) % 6];
        let base: Vec<u32> = (0..len)
            .map(|i| {
                if alphabet == 1 << 30 {
                    i as u32
                } else {
                    rng.below(alphabet) as u32
                }
            })
            .collect();
        let edits = rng.below(len as u64 / 4 + 3) as usize;
        let other = edit(&mut rng, &base, alphabet.min(1 << 20) * 2, edits);
        for (x, y) in [(&base, &other), (&other, &base)] {
            let input = input(x, y);
            assert_eq!(ours(&input), imara(&input), "case {case}: {x:?} onto {y:?}");
            checked += 1;
        }
    }
    assert_eq!(checked, 1_600);
}

/// Distinct lines, one changed every `gap`: every run the same length, where the
/// scan stops early (the case imara-diff is quadratic on), and gaps that vary.
#[test]
fn flags_equal_imara_diff_with_evenly_and_unevenly_spaced_changes() {
    for (n, gap) in [(5_000u32, 100u32), (3_000, 7), (2_000, 1), (4_000, 250)] {
        let base: Vec<u32> = (0..n).collect();
        let even: Vec<u32> = (0..n)
            .map(|i| if i % gap == 0 { n + i } else { i })
            .collect();
        let uneven: Vec<u32> = (0..n)
            .map(|i| {
                if (i * i) % (3 * gap + 1) == 0 {
                    n + i
                } else {
                    i
                }
            })
            .collect();
        for other in [even, uneven] {
            for (x, y) in [(&base, &other), (&other, &base)] {
                let input = input(x, y);
                assert_eq!(ours(&input), imara(&input), "n {n} gap {gap}");
            }
        }
    }
}

/// A line occurring about as often as the histogram counts (64) in a region:
/// anchored up to 63 occurrences, a fallback to Myers from 64.
#[test]
fn flags_equal_imara_diff_around_the_chain_limit() {
    for k in 60..=68u32 {
        for (gap, other_gap) in [(1, 1), (1, 2), (3, 1), (2, 5)] {
            // Line 0 `k` times between distinct lines, against line 0 fewer times
            // between other distinct lines: line 0 is all they have in common.
            let spaced = |copies: u32, gap: u32, first: u32| -> Vec<u32> {
                (0..copies)
                    .flat_map(|i| {
                        std::iter::once(0).chain((0..gap).map(move |g| first + i * 8 + g))
                    })
                    .collect()
            };
            let base = spaced(k, gap, 1_000);
            let other = spaced(k - 7, other_gap, 100_000);
            for (x, y) in [(&base, &other), (&other, &base)] {
                let input = input(x, y);
                assert_eq!(ours(&input), imara(&input), "k {k} gaps {gap} {other_gap}");
            }
        }
    }
}

/// A `Diff` made from flags has those flags, whatever they are.
#[test]
fn a_diff_of_flags_has_those_flags() {
    let mut rng = Rng(7);
    for case in 0..2_000 {
        let (n, m) = (rng.below(40) as usize, rng.below(40) as usize);
        let density = 1 + rng.below(4);
        let mut removed: Vec<bool> = (0..n).map(|_| rng.below(density + 1) == 0).collect();
        let mut added: Vec<bool> = (0..m).map(|_| rng.below(density + 1) == 0).collect();
        // As many unchanged lines on each side.
        let kept = |f: &[bool]| f.iter().filter(|&&x| !x).count();
        while kept(&removed) > kept(&added) {
            let i = removed.iter().position(|&x| !x).unwrap();
            removed[i] = true;
        }
        while kept(&added) > kept(&removed) {
            let i = added.iter().position(|&x| !x).unwrap();
            added[i] = true;
        }
        let d = diff_of_flags(removed.clone(), added.clone());
        let r: Vec<bool> = (0..n as u32).map(|i| d.is_removed(i)).collect();
        let a: Vec<bool> = (0..m as u32).map(|i| d.is_added(i)).collect();
        assert_eq!((r, a), (removed, added), "case {case}");
    }
}
