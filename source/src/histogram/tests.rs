use super::fallback::{prune_scan_steps, MAX_PRUNE_STEPS};
use super::*;
use imara_diff::{Algorithm, Diff, InternedInput};

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

/// git's histogram diff (`xdiff/xhistogram.c`, its `max_chain_length` 64) written
/// plainly, with imara-diff's Myers for the regions it gives up on: what
/// [`histogram_flags`] must give, without its index.
fn reference(input: &InternedInput<u32>) -> (Vec<bool>, Vec<bool>) {
    let (before, after) = (&input.before[..], &input.after[..]);
    let mut removed = vec![false; before.len()];
    let mut added = vec![false; after.len()];
    reference_region(before, after, &mut removed, &mut added);
    (removed, added)
}

/// The reference of one region: the part before each run it takes recursively,
/// the part after it in a loop (as git and imara-diff do).
fn reference_region(mut b: &[Token], mut a: &[Token], mut rm: &mut [bool], mut ad: &mut [bool]) {
    loop {
        if b.is_empty() || a.is_empty() {
            rm.fill(true);
            ad.fill(true);
            return;
        }
        let Some((s1, s2, len)) = reference_lcs(b, a) else {
            super::fallback::diff(b, a, rm, ad);
            return;
        };
        if len == 0 {
            rm.fill(true);
            ad.fill(true);
            return;
        }
        let (rm_before, rm_rest) = rm.split_at_mut(s1);
        let (ad_before, ad_rest) = ad.split_at_mut(s2);
        reference_region(&b[..s1], &a[..s2], rm_before, ad_before);
        (b, a) = (&b[s1 + len..], &a[s2 + len..]);
        (rm, ad) = (&mut rm_rest[len..], &mut ad_rest[len..]);
    }
}

/// The rarest, then longest, common run of a region as (`b` start, `a` start,
/// length); `None` where no common run's rarest line occurs at most 64 times.
fn reference_lcs(b: &[Token], a: &[Token]) -> Option<(usize, usize, usize)> {
    // Each line's positions in `b`, and how often it occurs.
    let mut at: std::collections::HashMap<Token, Vec<usize>> = Default::default();
    for (i, t) in b.iter().enumerate() {
        at.entry(*t).or_default().push(i);
    }
    let count = |t: &Token| at.get(t).map_or(0, |v| v.len());
    // git's `index->cnt`, from `max_chain_length + 1`: a line more frequent than the
    // rarest run found so far is not tried.
    let (mut best, mut min_occ, mut common) = ((0, 0, 0), 65, false);
    let mut pos = 0;
    while pos < a.len() {
        let c = count(&a[pos]);
        common |= c != 0;
        if c == 0 || c > min_occ {
            pos += 1;
            continue;
        }
        let mut next = pos + 1;
        // git's `while (np <= ae)`: an occurrence inside the last run is not tried.
        let mut past = 0;
        for &p in &at[&a[pos]] {
            if p < past {
                continue;
            }
            let (mut s1, mut s2, mut occ) = (p, pos, c);
            while s1 > 0 && s2 > 0 && b[s1 - 1] == a[s2 - 1] {
                s1 -= 1;
                s2 -= 1;
                occ = occ.min(count(&b[s1]));
            }
            let (mut e1, mut e2) = (p + 1, pos + 1);
            while e1 < b.len() && e2 < a.len() && b[e1] == a[e2] {
                occ = occ.min(count(&b[e1]));
                e1 += 1;
                e2 += 1;
            }
            next = next.max(e2);
            if best.2 < e2 - s2 || min_occ > occ {
                (best, min_occ) = ((s1, s2, e2 - s2), occ);
            }
            past = e1;
        }
        pos = next;
    }
    (!common || min_occ <= 64).then_some(best)
}

/// Lines kept (unchanged) by a diff's flags of `before`.
fn kept(removed: &[bool]) -> usize {
    removed.iter().filter(|&&r| !r).count()
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

/// Files of 200 lines made of 14 lines repeated (`}`, `return ret;`, ...), five edits
/// each: imara-diff 0.2's histogram, whose scan tried the next occurrence of a line
/// past the end of a run *in the other file*, kept 124 of 200 lines unchanged where
/// `git diff --histogram` keeps 182 (its next occurrence is past the run in the same
/// file); covmerge used it for every pair under 32,768 lines, and rows on the lines
/// it dropped were counted lost.
#[test]
fn a_file_of_repeated_lines_lost_a_quarter_of_its_unchanged_lines() {
    let mut rng = Rng(0x5eed);
    let mut worse_by_imara = 0;
    for case in 0..200 {
        let base: Vec<u32> = (0..200).map(|_| rng.below(14) as u32).collect();
        let version = edit(&mut rng, &base, 16, 5);
        let input = input(&version, &base);
        let (r, a) = ours(&input);
        assert_eq!((r.clone(), a), reference(&input), "case {case}");
        // Lines of the version kept by `git diff --histogram -U0` on these pairs
        // (written out and diffed by git when this test was written).
        let by_git = match case {
            1 => Some(175),
            42 => Some(161),
            123 => Some(191),
            190 => Some(182),
            _ => None,
        };
        if let Some(g) = by_git {
            assert_eq!(kept(&r), g, "case {case}");
        }
        if kept(&imara(&input).0) + 30 <= kept(&r) {
            worse_by_imara += 1;
        }
    }
    assert_eq!(worse_by_imara, 2);
}

/// A 132-line file of 14 repeated lines (one character a line here) against a
/// version with a few lines edited: with its common first line and last 11 lines
/// taken off before the diff (imara-diff's way, kept when its scan was first made
/// git's), the histogram anchored its runs elsewhere and kept 69 of the 132 lines;
/// `git diff --histogram`, which diffs the whole files, keeps 126.
#[test]
fn a_common_prefix_taken_off_first_anchored_the_runs_elsewhere() {
    let version = "22a0b09b9c0c4a6bb477680897ddd133807070351d335c7a176b9a50bb769585b4723d77669\
                   04106a7964c62c1b939d0b111271724c33108c2682b843969c15c4b51";
    let base = "2a0b70099c0c4a6bb477680897ddd1338070351d335c7a176b9a50bb7695825b4723d7766904\
                106a7964c62c1b939d01111271724c33108c2b82b8430969c15c4b51";
    let tokens = |s: &str| -> Vec<u32> { s.bytes().map(u32::from).collect() };
    let input = input(&tokens(version), &tokens(base));
    let (r, a) = ours(&input);
    assert_eq!((r.clone(), a), reference(&input));
    assert_eq!(kept(&r), 126);
    // The same rules on the middle alone (the first line and the last 11 taken off
    // and kept): 69.
    let (b, a) = (&input.before, &input.after);
    let (p, q) = (1, 11);
    assert_eq!(b[..p], a[..p]);
    assert_eq!(b[b.len() - q..], a[a.len() - q..]);
    let mut rm = vec![false; b.len()];
    let mut ad = vec![false; a.len()];
    let (bm, am) = (b.len() - q, a.len() - q);
    reference_region(&b[p..bm], &a[p..am], &mut rm[p..bm], &mut ad[p..am]);
    assert_eq!(kept(&rm), 69);
}

/// Around git's chain limit, imara-diff's histogram differed from git's: its limit
/// was 63, not 64 (64 lines of `}` against `} z } }`: it kept 3 lines, where git
/// keeps 2), and it counted a line up to 64 times only, so a line of 66 was tried as
/// an anchor where git never tries it (66 lines `x` with a `q` and three `y`s against
/// 48 `x` and one `y`: 43 lines kept where git keeps 49). Which lines are kept also
/// depends on how hunks slide afterwards (git's and imara-diff's post-processing
/// differ); how many does not, and is `git diff --histogram`'s.
#[test]
fn a_line_of_64_or_66_copies_anchored_otherwise_than_in_git() {
    let tokens = |s: &str| -> Vec<u32> { s.bytes().map(u32::from).collect() };
    let braces = input(&tokens(&"}".repeat(64)), &tokens("}z}}"));
    let (r, a) = ours(&braces);
    assert_eq!((r.clone(), a), reference(&braces));
    assert_eq!(kept(&r), 2);
    assert_eq!(kept(&imara(&braces).0), 3);
    let mut version = "x".repeat(70).into_bytes();
    version[20] = b'q';
    for i in [32, 46, 66] {
        version[i] = b'y';
    }
    let mut base = "x".repeat(49).into_bytes();
    base[39] = b'y';
    let xs = input(
        &tokens(std::str::from_utf8(&version).unwrap()),
        &tokens(std::str::from_utf8(&base).unwrap()),
    );
    let (r, a) = ours(&xs);
    assert_eq!((r.clone(), a), reference(&xs));
    assert_eq!(kept(&r), 49);
}

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

/// The flags equal the reference's on pairs of every kind: distinct lines, a few
/// repeated lines, small alphabets (Myers fallbacks), runs of equal length.
#[test]
fn flags_equal_the_reference_on_generated_pairs() {
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
            assert_eq!(
                ours(&input),
                reference(&input),
                "case {case}: {x:?} onto {y:?}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 1_600);
}

/// Long files (16,484 lines, a tenth `}` and a tenth blank): evenly and unevenly
/// spaced changes, lines deleted and changed to `}`, the halves swapped.
#[test]
fn flags_equal_the_reference_on_long_files() {
    let n = 16_484u32;
    let base: Vec<u32> = (0..n)
        .map(|i| match i % 10 {
            0 => 0,
            1 => 1,
            _ => 2 + i,
        })
        .collect();
    let changed: Vec<u32> = base
        .iter()
        .enumerate()
        .map(|(i, &l)| if i % 100 == 0 { 2 * n + i as u32 } else { l })
        .collect();
    let deleted: Vec<u32> = base
        .iter()
        .enumerate()
        .filter(|(i, _)| (i * i) % 331 != 7)
        .map(|(i, &l)| if (i * 7) % 263 == 0 { 0 } else { l })
        .collect();
    let half = base.len() / 2;
    let swapped: Vec<u32> = base[half..].iter().chain(&base[..half]).copied().collect();
    for (k, v) in [changed, deleted, swapped].iter().enumerate() {
        for (x, y) in [(&base, v), (v, &base)] {
            let input = input(x, y);
            assert_eq!(ours(&input), reference(&input), "version {k}");
        }
    }
}

/// Distinct lines, one changed every `gap`: every run the same length, where the
/// scan stops early (the case imara-diff is quadratic on), and gaps that vary.
#[test]
fn flags_equal_the_reference_with_evenly_and_unevenly_spaced_changes() {
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
                assert_eq!(ours(&input), reference(&input), "n {n} gap {gap}");
            }
        }
    }
}

/// A line occurring about as often as git's chain limit (64) in a region: anchored
/// up to 64 occurrences, a fallback to Myers from 65.
#[test]
fn flags_equal_the_reference_around_the_chain_limit() {
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
                assert_eq!(
                    ours(&input),
                    reference(&input),
                    "k {k} gaps {gap} {other_gap}"
                );
            }
        }
    }
}
