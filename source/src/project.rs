//! Projecting lines of one version of a file onto the base version.
//!
//! The diff is imara-diff's **Histogram** algorithm (modelled on git's `--histogram`, a
//! patience-style diff that anchors on rare lines) followed by imara-diff's
//! line post-processing (git's indent heuristic for sliding ambiguous hunks). With
//! repeated lines (`}`, `return ret;`) any diff must choose an alignment; this is the
//! one covmerge documents and applies deterministically. It is not byte-for-byte git:
//! imara-diff strips the common prefix and suffix before diffing the middle, git diffs
//! the whole files, so on some inputs with repeated lines the two align differently
//! (version `c x } x` against base `b } c x`: covmerge maps 3→2 and 4→4, git 1→3 and
//! 2→4). Both are valid line diffs; the test crate's oracle, which uses git, agrees on
//! the generated corpora. A line maps to the base only
//! inside an unchanged run; changed, deleted and out-of-range lines map to nothing.
//!
//! Bounds: imara-diff's Myers fallback carries git's heuristics, so time stays near
//! linear even when every line differs. Beyond that, a pair whose line counts
//! multiply past [`MAX_DIFF_CELLS`] is not diffed at all: only a common prefix and
//! suffix are mapped, and the pair is counted in `diffs_capped`.

use std::sync::{Arc, Mutex};

use imara_diff::{Algorithm, Diff, InternedInput};
use rustc_hash::FxHashMap;

use crate::{BlobId, FileVersion};

/// A pair with more than this many `from_lines × to_lines` is mapped by prefix and
/// suffix only (10^12: two 1,000,000-line files).
pub const MAX_DIFF_CELLS: u64 = 1_000_000_000_000;

/// `map[i]` is the 1-based base line of line `i + 1`, or 0 when it has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineMap {
    map: Vec<u32>,
    /// Whether the pair was over [`MAX_DIFF_CELLS`] and mapped by common prefix and suffix only.
    pub capped: bool,
}

impl LineMap {
    /// The base line of 1-based line `sl`, if it maps.
    pub fn project(&self, sl: u32) -> Option<u32> {
        if sl == 0 {
            return None;
        }
        self.map.get(sl as usize - 1).copied().filter(|&t| t != 0)
    }

    /// How many lines the mapped version has (`project` answers for `1..=from_lines()`).
    pub fn from_lines(&self) -> u32 {
        self.map.len() as u32
    }

    /// Bytes of the map to count against a cache's budget.
    pub fn bytes(&self) -> usize {
        self.map.len() * 4 + 64
    }
}

/// Computes the line map of `from` onto `to`. The lines are interned straight from
/// the texts, without a vector of line slices (16 bytes a line: 320 MB for two
/// versions of a 10 M-line file).
pub fn line_map(from: &FileVersion, to: &FileVersion) -> LineMap {
    let (n, m) = (from.lines().count(), to.lines().count());
    if (n as u64) * (m as u64) > MAX_DIFF_CELLS {
        let a: Vec<&[u8]> = from.lines().collect();
        let b: Vec<&[u8]> = to.lines().collect();
        return line_map_lines(&a, &b);
    }
    let mut input: InternedInput<&[u8]> = InternedInput::default();
    input.reserve(n as u32, m as u32);
    input.update_before(from.lines());
    input.update_after(to.lines());
    if input.before == input.after {
        return identity(n);
    }
    diff_map(&input)
}

/// [`line_map`] over already split lines.
pub fn line_map_lines(a: &[&[u8]], b: &[&[u8]]) -> LineMap {
    if a == b {
        return identity(a.len());
    }
    if (a.len() as u64) * (b.len() as u64) > MAX_DIFF_CELLS {
        let mut map = vec![0u32; a.len()];
        let pre = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        for (i, m) in map.iter_mut().enumerate().take(pre) {
            *m = i as u32 + 1;
        }
        let suf = a[pre..]
            .iter()
            .rev()
            .zip(b[pre..].iter().rev())
            .take_while(|(x, y)| x == y)
            .count();
        for k in 0..suf {
            map[a.len() - 1 - k] = (b.len() - k) as u32;
        }
        return LineMap { map, capped: true };
    }
    let mut input: InternedInput<&[u8]> = InternedInput::default();
    input.reserve(a.len() as u32, b.len() as u32);
    input.update_before(a.iter().copied());
    input.update_after(b.iter().copied());
    diff_map(&input)
}

/// Every line onto itself.
fn identity(lines: usize) -> LineMap {
    LineMap {
        map: (1..=lines as u32).collect(),
        capped: false,
    }
}

/// The line map of an interned pair, by the histogram diff.
fn diff_map(input: &InternedInput<&[u8]>) -> LineMap {
    let mut diff = Diff::compute(Algorithm::Histogram, input);
    diff.postprocess_lines(input);
    let (n, m) = (input.before.len() as u32, input.after.len() as u32);
    let mut map = vec![0u32; n as usize];
    let (mut i, mut j) = (0u32, 0u32);
    while i < n {
        if diff.is_removed(i) {
            i += 1;
            continue;
        }
        while j < m && diff.is_added(j) {
            j += 1;
        }
        debug_assert!(j < m, "unchanged line without a partner");
        if j >= m {
            break;
        }
        map[i as usize] = j + 1;
        i += 1;
        j += 1;
    }
    LineMap { map, capped: false }
}

type MapsByPair = FxHashMap<(BlobId, BlobId), Arc<LineMap>>;

/// Line maps keyed by (from blob, to blob), shared by a worker's merge threads, up to
/// a byte budget (then cleared: maps are cheap to recompute relative to the budget).
pub struct ProjectionCache {
    budget: usize,
    /// The maps and their bytes.
    inner: Mutex<(MapsByPair, usize)>,
}

impl ProjectionCache {
    /// An empty cache holding up to `budget_bytes` of line maps.
    pub fn new(budget_bytes: usize) -> Self {
        ProjectionCache {
            budget: budget_bytes,
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
        let m = Arc::new(line_map(from, to));
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
