//! Projecting lines of one version of a file onto the base version.
//!
//! The diff is git's: the **histogram** diff of `git diff --histogram` (a
//! patience-style diff that anchors on rare lines: [`crate::histogram`]) on the whole
//! files, with imara-diff's Myers for the regions it gives up on, and its hunks slid
//! among equal lines as git slides them ([`crate::compact`]: git's change compaction
//! and indent heuristic). With repeated lines (`}`, `return ret;`) any diff must choose
//! an alignment; this is the one covmerge documents and applies deterministically,
//! git's (the test crate's oracle, which runs git, agrees on the generated corpora).
//! A line maps to the base only inside an unchanged run; changed, deleted and
//! out-of-range lines map to nothing.
//!
//! imara-diff's own `Algorithm::Histogram` and post-processing are not used: after a
//! common run its histogram tries the line's next occurrence past the run's end in
//! the *other* file, so it skips occurrences that start longer runs, and on a file
//! made of repeated lines it kept 151 of 200 unchanged lines where git keeps 197
//! (`histogram::tests::a_file_of_repeated_lines_lost_a_quarter_of_its_unchanged_lines`);
//! its slider put hunks elsewhere than git on one pair in ten of files of two or three
//! distinct lines (`tests::hunks_among_equal_lines_slid_otherwise_than_in_git`).
//! [`crate::histogram`] also takes time near linear where imara-diff's rescans made
//! long files quadratic.
//!
//! Bounds: imara-diff's Myers fallback carries git's heuristics, so time stays near
//! linear even when every line differs. Memory: a diff holds both texts and, per line
//! of either, imara-diff's interned input, its histogram and its result
//! ([`diff_bytes`]); a pair whose estimate is over the limit its caller gives (a quarter
//! of `--memory-budget`: `covmerge_proto::memory::line_diff_bytes`), or whose line counts multiply past
//! [`MAX_DIFF_CELLS`], is not diffed at all: only a common prefix and suffix are mapped,
//! computed over the texts without a vector of lines, and the pair is counted in
//! `diffs_capped`. A map is held as its unchanged runs: a capped or identical pair's
//! map is one or two runs, whatever the lines.

use std::sync::{Arc, Condvar, Mutex};

use imara_diff::InternedInput;
use rustc_hash::FxHashMap;

use crate::{compact, histogram, BlobId, FileVersion};

/// A pair with more than this many `from_lines × to_lines` is mapped by prefix and
/// suffix only (10^12: two 1,000,000-line files).
pub const MAX_DIFF_CELLS: u64 = 1_000_000_000_000;

/// Bytes a diff holds per line of either version, besides the texts: the interned
/// lines (a token of 4 bytes a line, 16 bytes and a hash slot per distinct line),
/// the histogram (12 bytes a distinct line, its occurrence lists), the result flags
/// and the runs of the map. Measured peak, at most 50 bytes a line when every line is
/// distinct (pairs of 32,768 lines or more: [`crate::histogram`]'s index, then the
/// `Diff` rebuilt from its flags; `tests/diff_memory.rs` checks the estimate against
/// the allocator).
pub const DIFF_BYTES_PER_LINE: u64 = 56;

/// Bytes a diff holds whatever its size (buffers rounded up to a power of two).
const DIFF_FIXED_BYTES: u64 = 64 << 10;

/// The estimated peak of a line diff of `from` (`n` lines) onto `to` (`m` lines):
/// both texts and [`DIFF_BYTES_PER_LINE`] per line.
pub fn diff_bytes(from: &FileVersion, to: &FileVersion, n: usize, m: usize) -> u64 {
    (from.data.len() + to.data.len()) as u64
        + DIFF_BYTES_PER_LINE * (n + m) as u64
        + DIFF_FIXED_BYTES
}

/// An unchanged run: lines `from..from + len` of the mapped version are lines
/// `to..to + len` of the base (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    from: u32,
    to: u32,
    len: u32,
}

/// How the lines of one version map onto the base: its unchanged runs, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineMap {
    runs: Vec<Run>,
    /// Lines of the mapped version.
    lines: u32,
    /// Whether the pair was not diffed (over the caller's limit or [`MAX_DIFF_CELLS`])
    /// and mapped by common prefix and suffix only.
    pub capped: bool,
}

impl LineMap {
    /// The base line of 1-based line `sl`, if it maps.
    pub fn project(&self, sl: u32) -> Option<u32> {
        let i = self.runs.partition_point(|r| r.from <= sl);
        let r = self.runs.get(i.checked_sub(1)?)?;
        (sl - r.from < r.len).then(|| r.to + (sl - r.from))
    }

    /// The line of the mapped version that maps onto 1-based base line `tl`, if any
    /// (runs ascend in both versions, so this is the inverse of [`LineMap::project`]).
    pub fn project_back(&self, tl: u32) -> Option<u32> {
        let i = self.runs.partition_point(|r| r.to <= tl);
        let r = self.runs.get(i.checked_sub(1)?)?;
        (tl - r.to < r.len).then(|| r.from + (tl - r.to))
    }

    /// How many lines the mapped version has (`project` answers for `1..=from_lines()`).
    pub fn from_lines(&self) -> u32 {
        self.lines
    }

    /// Bytes of the map to count against a cache's budget.
    pub fn bytes(&self) -> usize {
        self.runs.capacity() * std::mem::size_of::<Run>() + 64
    }

    /// The map of a common prefix of `prefix` lines and suffix of `suffix` lines of an
    /// `n`-line version onto an `m`-line base.
    fn ends(prefix: usize, suffix: usize, n: usize, m: usize, capped: bool) -> LineMap {
        let mut runs = Vec::with_capacity(2);
        if prefix > 0 {
            runs.push(Run {
                from: 1,
                to: 1,
                len: prefix as u32,
            });
        }
        if suffix > 0 {
            runs.push(Run {
                from: (n - suffix + 1) as u32,
                to: (m - suffix + 1) as u32,
                len: suffix as u32,
            });
        }
        LineMap {
            runs,
            lines: n as u32,
            capped,
        }
    }
}

/// Lines of `v` (contract §3), as [`FileVersion::lines`] gives them.
fn line_count(v: &FileVersion) -> usize {
    let d = &v.data[..];
    let newlines = d.iter().filter(|&&b| b == b'\n').count();
    newlines + usize::from(d.last().is_some_and(|&b| b != b'\n'))
}

/// The lines of `v` last to first, without a vector of them.
fn lines_rev(v: &FileVersion) -> impl Iterator<Item = &[u8]> {
    let d = &v.data[..];
    let d = d.strip_suffix(b"\n").unwrap_or(d);
    let empty = v.data.is_empty();
    d.rsplit(|&b| b == b'\n')
        .take(if empty { 0 } else { usize::MAX })
}

/// The common prefix and suffix of `a` (`n` lines) and `b` (`m` lines), in lines,
/// not overlapping: one pass forward and one backward over the texts.
fn common_ends<'a, I, J>(a: I, b: I, ar: J, br: J, n: usize, m: usize) -> (usize, usize)
where
    I: Iterator<Item = &'a [u8]>,
    J: Iterator<Item = &'a [u8]>,
{
    let prefix = a.zip(b).take_while(|(x, y)| x == y).count();
    let room = n.min(m) - prefix;
    let suffix = ar.zip(br).take(room).take_while(|(x, y)| x == y).count();
    (prefix, suffix)
}

/// Computes the line map of `from` onto `to`, without a limit on its memory (but
/// within [`MAX_DIFF_CELLS`]).
pub fn line_map(from: &FileVersion, to: &FileVersion) -> LineMap {
    line_map_within(from, to, u64::MAX)
}

/// Computes the line map of `from` onto `to` if its [`diff_bytes`] is at most
/// `limit`; otherwise (or past [`MAX_DIFF_CELLS`]) maps the common prefix and suffix
/// only, in O(1) memory besides the texts, and marks the map `capped`. The lines are
/// interned straight from the texts, without a vector of line slices.
pub fn line_map_within(from: &FileVersion, to: &FileVersion, limit: u64) -> LineMap {
    map_within(from, to, limit, None)
}

/// [`line_map_within`]; a diff run takes its estimate from `gate` first (waiting for
/// room while other diffs hold it).
fn map_within(
    from: &FileVersion,
    to: &FileVersion,
    limit: u64,
    gate: Option<&DiffGate>,
) -> LineMap {
    let (n, m) = (line_count(from), line_count(to));
    if from.data == to.data {
        return LineMap::ends(n, 0, n, m, false);
    }
    let bytes = diff_bytes(from, to, n, m);
    if (n as u64) * (m as u64) > MAX_DIFF_CELLS || bytes > limit {
        let (prefix, suffix) = common_ends(
            from.lines(),
            to.lines(),
            lines_rev(from),
            lines_rev(to),
            n,
            m,
        );
        return LineMap::ends(prefix, suffix, n, m, true);
    }
    let _held = gate.map(|g| g.take(bytes));
    let mut input: InternedInput<&[u8]> = InternedInput::default();
    input.reserve(n as u32, m as u32);
    input.update_before(from.lines());
    input.update_after(to.lines());
    diff_map(&input)
}

/// The line diffs of a process together, within one byte limit: each diff takes its
/// [`diff_bytes`] before it runs and waits while others hold too much for it to fit
/// (a diff over the whole limit is capped instead, so none waits forever). Which
/// pairs are capped depends on the limit only, never on what runs beside them: a
/// result does not depend on how many merges ran at once.
#[derive(Debug)]
pub struct DiffGate {
    limit: u64,
    held: Mutex<u64>,
    room: Condvar,
}

/// A diff's bytes taken from a [`DiffGate`], given back when dropped.
struct Taken<'a> {
    gate: &'a DiffGate,
    bytes: u64,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        *self.gate.held.lock().unwrap() -= self.bytes;
        self.gate.room.notify_all();
    }
}

impl DiffGate {
    /// A gate letting diffs hold `limit` bytes together.
    pub fn new(limit: u64) -> Self {
        DiffGate {
            limit,
            held: Mutex::new(0),
            room: Condvar::new(),
        }
    }

    /// The limit, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes held by the diffs running now.
    pub fn held(&self) -> u64 {
        *self.held.lock().unwrap()
    }

    fn take(&self, bytes: u64) -> Taken<'_> {
        let mut held = self.held.lock().unwrap();
        while *held > 0 && *held + bytes > self.limit {
            held = self.room.wait(held).unwrap();
        }
        *held += bytes;
        Taken { gate: self, bytes }
    }

    /// The line map of `from` onto `to` ([`line_map_within`] the gate's limit).
    pub fn line_map(&self, from: &FileVersion, to: &FileVersion) -> LineMap {
        map_within(from, to, self.limit, Some(self))
    }
}

/// [`line_map`] over already split lines.
pub fn line_map_lines(a: &[&[u8]], b: &[&[u8]]) -> LineMap {
    let (n, m) = (a.len(), b.len());
    if a == b {
        return LineMap::ends(n, 0, n, m, false);
    }
    if (n as u64) * (m as u64) > MAX_DIFF_CELLS {
        let (prefix, suffix) = common_ends(
            a.iter().copied(),
            b.iter().copied(),
            a.iter().rev().copied(),
            b.iter().rev().copied(),
            n,
            m,
        );
        return LineMap::ends(prefix, suffix, n, m, true);
    }
    let mut input: InternedInput<&[u8]> = InternedInput::default();
    input.reserve(n as u32, m as u32);
    input.update_before(a.iter().copied());
    input.update_after(b.iter().copied());
    diff_map(&input)
}

/// The line map of an interned pair, by the histogram diff ([`crate::histogram`]).
fn diff_map(input: &InternedInput<&[u8]>) -> LineMap {
    let (mut removed, mut added) =
        histogram::histogram_flags(&input.before, &input.after, input.interner.num_tokens());
    let text = |t: imara_diff::Token| input.interner[t];
    compact::compact_both(
        compact::Side {
            ids: &input.before,
            text: &text,
            changed: &mut removed,
        },
        compact::Side {
            ids: &input.after,
            text: &text,
            changed: &mut added,
        },
    );
    let (n, m) = (input.before.len() as u32, input.after.len() as u32);
    let mut runs: Vec<Run> = Vec::new();
    let (mut i, mut j) = (0u32, 0u32);
    while i < n {
        if removed[i as usize] {
            i += 1;
            continue;
        }
        while j < m && added[j as usize] {
            j += 1;
        }
        debug_assert!(j < m, "unchanged line without a partner");
        if j >= m {
            break;
        }
        match runs.last_mut() {
            Some(r) if r.from + r.len == i + 1 && r.to + r.len == j + 1 => r.len += 1,
            _ => runs.push(Run {
                from: i + 1,
                to: j + 1,
                len: 1,
            }),
        }
        i += 1;
        j += 1;
    }
    runs.shrink_to_fit();
    LineMap {
        runs,
        lines: n,
        capped: false,
    }
}

type MapsByPair = FxHashMap<(BlobId, BlobId), Arc<LineMap>>;

/// Line maps keyed by (from blob, to blob), shared by a worker's merge threads, up to
/// a byte budget (then cleared: maps are cheap to recompute relative to the budget);
/// the maps not cached are computed through one [`DiffGate`].
pub struct ProjectionCache {
    budget: usize,
    diffs: DiffGate,
    /// The maps and their bytes.
    inner: Mutex<(MapsByPair, usize)>,
}

impl ProjectionCache {
    /// An empty cache holding up to `budget_bytes` of line maps, its diffs holding
    /// up to `diff_bytes` together (a pair over it is capped).
    pub fn new(budget_bytes: usize, diff_bytes: u64) -> Self {
        ProjectionCache {
            budget: budget_bytes,
            diffs: DiffGate::new(diff_bytes),
            inner: Mutex::default(),
        }
    }

    /// Drops every map (a worker gone idle gives its memory back).
    pub fn clear(&self) {
        let mut g = self.inner.lock().unwrap();
        *g = Default::default();
    }

    /// The map of `from` onto `to`, computed at most once while cached.
    pub fn get(&self, from: &FileVersion, to: &FileVersion) -> Arc<LineMap> {
        let key = (from.id, to.id);
        if let Some(m) = self.inner.lock().unwrap().0.get(&key) {
            return m.clone();
        }
        let m = Arc::new(self.diffs.line_map(from, to));
        let mut g = self.inner.lock().unwrap();
        if g.1 + m.bytes() > self.budget {
            g.0.clear();
            g.1 = 0;
        }
        g.1 += m.bytes();
        g.0.insert(key, m.clone());
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(a: &str, b: &str) -> Vec<Option<u32>> {
        let (a, b) = (FileVersion::new(a.into()), FileVersion::new(b.into()));
        let m = line_map(&a, &b);
        (1..=a.lines().count() as u32 + 1)
            .map(|l| m.project(l))
            .collect()
    }

    /// Hunks among equal lines slid where imara-diff's post-processing put them, not
    /// where git's change compaction does: a blank line mapped onto the last of five
    /// blank lines, a `}` and blanks kept at the end instead of the start, lines that
    /// could line up with a change of the other file left elsewhere. Each map here is
    /// `git diff --histogram`'s (its indent heuristic on, as by default).
    #[test]
    fn hunks_among_equal_lines_slid_otherwise_than_in_git() {
        let none = None;
        assert_eq!(map("\n", "\n\n\n\n\n"), vec![Some(1), none]);
        assert_eq!(map("\n}\n\n", "\n"), vec![Some(1), none, none, none]);
        assert_eq!(
            map("e\ne\ne\n\t}\n", "e\ne\n\t}\ne\n\t}\n"),
            vec![Some(1), none, Some(4), Some(5), none]
        );
        assert_eq!(
            map(
                "}\nreturn ret;\n{\n{\n{\n",
                "}\nreturn ret;\nreturn ret;\n{\n{\n"
            ),
            vec![Some(1), Some(2), Some(4), Some(5), none, none]
        );
    }

    #[test]
    fn identical_is_identity_and_beyond_end_is_none() {
        assert_eq!(map("a\nb\n", "a\nb\n"), vec![Some(1), Some(2), None]);
    }

    #[test]
    fn inserted_line_shifts_below() {
        assert_eq!(
            map("a\nb\nc\n", "a\nNEW\nb\nc\n"),
            vec![Some(1), Some(3), Some(4), None]
        );
    }

    #[test]
    fn changed_and_deleted_lines_are_lost() {
        assert_eq!(
            map("a\nb\nc\n", "a\nB\nc\n"),
            vec![Some(1), None, Some(3), None]
        );
        assert_eq!(map("a\nb\nc\n", "c\n"), vec![None, None, Some(1), None]);
    }

    /// Interned straight from the texts, the map is the one of the split lines.
    #[test]
    fn maps_from_texts_equal_maps_from_split_lines() {
        let texts = [
            "",
            "\n",
            "a",
            "a\n",
            "a\nb\nc\n",
            "a\nB\nc\nc\n}\n",
            "}\n}\nx\n}\n",
            "c\nx\n}\nx\n",
            "b\n}\nc\nx\n",
        ];
        for a in texts {
            for b in texts {
                let (va, vb) = (FileVersion::new(a.into()), FileVersion::new(b.into()));
                let la: Vec<&[u8]> = va.lines().collect();
                let lb: Vec<&[u8]> = vb.lines().collect();
                assert_eq!(
                    line_map(&va, &vb),
                    line_map_lines(&la, &lb),
                    "{a:?} onto {b:?}"
                );
            }
        }
    }

    #[test]
    fn crlf_differs_from_lf() {
        assert_eq!(map("a\r\nb\r\n", "a\nb\n"), vec![None, None, None]);
    }

    #[test]
    fn pathological_pairs_stay_bounded() {
        // Every line differs: a full Myers search would be quadratic.
        let a: String = (0..20_000).map(|i| format!("a{i}\n")).collect();
        let b: String = (0..20_000).map(|i| format!("b{i}\n")).collect();
        let m = map(&a, &b);
        assert!(m.iter().all(|x| x.is_none()));
    }

    /// The common ends of split lines, the slow way.
    fn ends_of(a: &[&[u8]], b: &[&[u8]]) -> (usize, usize) {
        let pre = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let suf = a[pre..]
            .iter()
            .rev()
            .zip(b[pre..].iter().rev())
            .take_while(|(x, y)| x == y)
            .count();
        (pre, suf)
    }

    const TEXTS: [&str; 12] = [
        "",
        "\n",
        "a",
        "a\n",
        "a\na\n",
        "a\nb\nc\n",
        "a\nB\nc\nc\n}\n",
        "}\n}\nx\n}\n",
        "c\nx\n}\nx\n",
        "b\n}\nc\nx\n",
        "a\r\nb\nc",
        "\n\na\n\n",
    ];

    /// Capped, a pair maps its common prefix and suffix exactly (not overlapping) and
    /// nothing between, computed from the texts as from the split lines.
    #[test]
    fn capped_pairs_map_exactly_their_common_prefix_and_suffix() {
        for a in TEXTS {
            for b in TEXTS {
                let (va, vb) = (FileVersion::new(a.into()), FileVersion::new(b.into()));
                let la: Vec<&[u8]> = va.lines().collect();
                let lb: Vec<&[u8]> = vb.lines().collect();
                let (n, m) = (la.len(), lb.len());
                assert_eq!((line_count(&va), lines_rev(&va).count()), (n, n), "{a:?}");
                let map = line_map_within(&va, &vb, 0);
                assert_eq!(map.capped, a != b, "{a:?} onto {b:?}");
                assert_eq!(map.from_lines() as usize, n);
                let (pre, suf) = if a == b { (n, 0) } else { ends_of(&la, &lb) };
                for sl in 0..=n as u32 + 1 {
                    let s = sl as usize;
                    let want = if s == 0 || s > n {
                        None
                    } else if s <= pre {
                        Some(sl)
                    } else if s > n - suf {
                        Some((m - (n - s)) as u32)
                    } else {
                        None
                    };
                    assert_eq!(map.project(sl), want, "{a:?} onto {b:?} line {sl}");
                    if let Some(t) = want {
                        assert_eq!(map.project_back(t), Some(sl));
                    }
                }
            }
        }
    }

    /// A capped map and an identity are one or two runs, whatever the lines.
    #[test]
    fn capped_and_identical_maps_take_constant_memory() {
        let big: String = (0..200_000).map(|i| format!("l{i}\n")).collect();
        let mut other = big.clone().into_bytes();
        other[8 * 100_000] = b'X';
        let (a, b) = (FileVersion::new(big.into()), FileVersion::new(other));
        let capped = line_map_within(&a, &b, 0);
        let same = line_map_within(&a, &a, 0);
        let exact = line_map(&a, &b);
        assert!(capped.capped && !same.capped && !exact.capped);
        assert!(capped.bytes() <= 64 + 2 * 12, "{}", capped.bytes());
        assert!(same.bytes() <= 64 + 2 * 12, "{}", same.bytes());
        assert_eq!(
            (same.project(200_000), same.project(200_001)),
            (Some(200_000), None)
        );
        // One line changed: the capped map loses only the lines between its ends,
        // which here is that line alone, as the exact diff does.
        for sl in 1..=200_000 {
            assert_eq!(capped.project(sl), exact.project(sl), "line {sl}");
        }
    }

    /// The diff runs only when its estimate fits the limit given; past it the pair is
    /// capped.
    #[test]
    fn a_pair_over_the_limit_is_capped_under_it_diffed() {
        let a = FileVersion::new(b"x\na\nb\nc\ny\n".to_vec());
        let b = FileVersion::new(b"x\nb\nNEW\nc\ny\n".to_vec());
        let need = diff_bytes(&a, &b, 5, 5);
        let exact = line_map_within(&a, &b, need);
        assert!(!exact.capped);
        assert_eq!(exact, line_map(&a, &b));
        assert_eq!((exact.project(3), exact.project(4)), (Some(2), Some(4)));
        let capped = line_map_within(&a, &b, need - 1);
        assert!(capped.capped);
        assert_eq!((capped.project(1), capped.project(3)), (Some(1), None));
        assert_eq!(capped.project(5), Some(5));
    }

    /// A gate caps a pair over its limit, diffs one under it, and holds nothing after.
    #[test]
    fn a_gate_caps_by_its_limit_and_gives_back() {
        let a = FileVersion::new(b"a\nb\nc\n".to_vec());
        let b = FileVersion::new(b"a\nB\nc\n".to_vec());
        let need = diff_bytes(&a, &b, 3, 3);
        assert!(DiffGate::new(need - 1).line_map(&a, &b).capped);
        let gate = DiffGate::new(need);
        let m = gate.line_map(&a, &b);
        assert!(!m.capped);
        assert_eq!((m.project(2), m.project(3)), (None, Some(3)));
        assert_eq!(gate.held(), 0);
    }

    /// A diff waits while others hold too much of the gate for it to fit.
    #[test]
    fn a_diff_waits_for_room_in_the_gate() {
        let gate = Arc::new(DiffGate::new(100));
        let first = gate.take(60);
        let (tx, rx) = std::sync::mpsc::channel();
        let g = gate.clone();
        let t = std::thread::spawn(move || {
            let _second = g.take(60);
            tx.send(g.held()).unwrap();
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(200))
                .is_err(),
            "admitted beside the first: 120 of 100 held"
        );
        drop(first);
        assert_eq!(rx.recv().unwrap(), 60);
        t.join().unwrap();
        assert_eq!(gate.held(), 0);
    }

    #[test]
    fn capped_pairs_map_prefix_and_suffix() {
        let a: Vec<&[u8]> = vec![b"x", b"y", b"z"];
        let b: Vec<&[u8]> = vec![b"x", b"q", b"z"];
        let m = line_map_lines(&a, &b);
        assert_eq!(
            (m.project(1), m.project(2), m.project(3)),
            (Some(1), None, Some(3))
        );
    }
}
