//! lcov's differential coverage categories of one file's lines, between an OLD result
//! and a NEW result, possibly on different base commits (contract §9).
//!
//! A line is *instrumented* in a result when it is in the `LinesInstrumented` of the
//! file's `*` record, and *covered* when its `HitCounts` entry is above 0. Whether a
//! line is *unchanged* between the bases is the line diff of contract §3
//! ([`covmerge_source::project::line_map`] from the file's text at OLD's base to its
//! text at NEW's base): an OLD line that maps is unchanged, and the NEW line it maps to
//! is the same line; an OLD line that does not map was deleted or changed, a NEW line
//! nothing maps to is new or changed.
//!
//! Every line instrumented in OLD or in NEW gets exactly one category:
//!
//! | category | line | OLD | NEW |
//! |---|---|---|---|
//! | CBC / LBC / GBC / UBC | unchanged | instrumented | instrumented; covered in both / OLD only / NEW only / neither |
//! | ECB / EUB | unchanged | instrumented, covered / not | not instrumented |
//! | GIC / UIC | unchanged | not instrumented | instrumented, covered / not |
//! | GNC / UNC | new or changed in NEW | — | instrumented, covered / not |
//! | DCB / DUB | deleted or changed from OLD | instrumented, covered / not | — |
//!
//! Line numbers are NEW's, except for DCB and DUB (OLD's). So, per file:
//! OLD instrumented = CBC+LBC+GBC+UBC+ECB+EUB+DCB+DUB, NEW instrumented =
//! CBC+LBC+GBC+UBC+GIC+UIC+GNC+UNC, OLD covered = CBC+LBC+ECB+DCB, NEW covered =
//! CBC+GBC+GIC+GNC.

use covmerge_source::project::LineMap;
use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::read::LineHits;

/// One of lcov's twelve categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Category {
    /// Unchanged, instrumented in both, covered in both.
    Cbc,
    /// Unchanged, instrumented in both, covered in OLD only (lost).
    Lbc,
    /// Unchanged, instrumented in both, covered in NEW only.
    Gbc,
    /// Unchanged, instrumented in both, covered in neither.
    Ubc,
    /// Unchanged, instrumented in OLD only, covered there (lost).
    Ecb,
    /// Unchanged, instrumented in OLD only, not covered.
    Eub,
    /// Unchanged, instrumented in NEW only, covered.
    Gic,
    /// Unchanged, instrumented in NEW only, not covered.
    Uic,
    /// New or changed in NEW, covered.
    Gnc,
    /// New or changed in NEW, not covered.
    Unc,
    /// Deleted from OLD, was covered.
    Dcb,
    /// Deleted from OLD, was not covered.
    Dub,
}

/// Every category, in lcov's order (the order of the output's objects).
pub const ALL: [Category; 12] = [
    Category::Cbc,
    Category::Lbc,
    Category::Gbc,
    Category::Ubc,
    Category::Ecb,
    Category::Eub,
    Category::Gic,
    Category::Uic,
    Category::Gnc,
    Category::Unc,
    Category::Dcb,
    Category::Dub,
];

impl Category {
    /// Its upper-case name, as lcov writes it.
    pub fn name(self) -> &'static str {
        [
            "CBC", "LBC", "GBC", "UBC", "ECB", "EUB", "GIC", "UIC", "GNC", "UNC", "DCB", "DUB",
        ][self as usize]
    }

    /// The category named `s` (upper case, as lcov writes it).
    pub fn parse(s: &str) -> Option<Category> {
        ALL.into_iter().find(|c| c.name() == s)
    }

    /// Whether the line numbers are OLD's (the line is not at NEW's base).
    pub fn at_old_base(self) -> bool {
        matches!(self, Category::Dcb | Category::Dub)
    }
}

/// How the OLD text of a file relates to its NEW text.
#[derive(Debug, Clone, Copy)]
pub enum Relation<'a> {
    /// The same text (one base, or the same blob at both): every line unchanged.
    Same,
    /// The line map of OLD's text onto NEW's.
    Map(&'a LineMap),
    /// Nothing in common (the file is absent at one base, or its text is unknown):
    /// every OLD line deleted, every NEW line new.
    Disjoint,
}

/// Per category, its lines (ascending).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatLines(pub [Vec<u32>; 12]);

impl CatLines {
    /// The lines of category `c`.
    pub fn get(&self, c: Category) -> &[u32] {
        &self.0[c as usize]
    }

    /// How many lines per category.
    pub fn counts(&self) -> CatCounts {
        CatCounts(std::array::from_fn(|i| self.0[i].len() as u64))
    }

    /// Whether every line is CBC or UBC: no coverage changed.
    pub fn only_unchanged(&self) -> bool {
        ALL.iter()
            .all(|&c| matches!(c, Category::Cbc | Category::Ubc) || self.0[c as usize].is_empty())
    }
}

impl Serialize for CatLines {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for c in ALL {
            let l = &self.0[c as usize];
            if !l.is_empty() {
                m.serialize_entry(c.name(), l)?;
            }
        }
        m.end()
    }
}

/// Per category, how many lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatCounts(pub [u64; 12]);

impl CatCounts {
    /// How many lines in category `c`.
    pub fn get(&self, c: Category) -> u64 {
        self.0[c as usize]
    }

    /// Adds `o`'s counts.
    pub fn add(&mut self, o: &CatCounts) {
        for (a, b) in self.0.iter_mut().zip(o.0) {
            *a += b;
        }
    }

    /// LBC + ECB: covered lines that stay but are no longer covered (the report's
    /// "lost"; DCB are covered lines whose code went away).
    pub fn lost(&self) -> u64 {
        self.get(Category::Lbc) + self.get(Category::Ecb)
    }

    fn sum(&self, cs: &[Category]) -> u64 {
        cs.iter().map(|&c| self.get(c)).sum()
    }

    /// (instrumented, covered) in OLD as the categories say.
    pub fn old_counts(&self) -> (u64, u64) {
        use Category::*;
        (
            self.sum(&[Cbc, Lbc, Gbc, Ubc, Ecb, Eub, Dcb, Dub]),
            self.sum(&[Cbc, Lbc, Ecb, Dcb]),
        )
    }

    /// (instrumented, covered) in NEW as the categories say.
    pub fn new_counts(&self) -> (u64, u64) {
        use Category::*;
        (
            self.sum(&[Cbc, Lbc, Gbc, Ubc, Gic, Uic, Gnc, Unc]),
            self.sum(&[Cbc, Gbc, Gic, Gnc]),
        )
    }
}

impl Serialize for CatCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for c in ALL {
            let n = self.get(c);
            if n > 0 {
                m.serialize_entry(c.name(), &n)?;
            }
        }
        m.end()
    }
}

/// Classifies every line instrumented in `old` or `new` (a file's `*` lines in OLD and
/// in NEW) given how the texts relate.
pub fn classify(old: &LineHits, new: &LineHits, rel: Relation<'_>) -> CatLines {
    use Category::*;
    let fwd = |l: u32| -> Option<u32> {
        match rel {
            Relation::Same => Some(l),
            Relation::Map(m) => m.project(l),
            Relation::Disjoint => None,
        }
    };
    let back = |l: u32| -> Option<u32> {
        match rel {
            Relation::Same => Some(l),
            // The map is its unchanged runs: looked up backward, not inverted into a
            // vector over every line.
            Relation::Map(m) => m.project_back(l),
            Relation::Disjoint => None,
        }
    };
    let mut out = CatLines::default();
    let mut put = |c: Category, l: u32| out.0[c as usize].push(l);
    for (&l, &h) in old.lines.iter().zip(&old.hits) {
        let was = h > 0;
        let Some(m) = fwd(l) else {
            put(if was { Dcb } else { Dub }, l);
            continue;
        };
        match new.get(m) {
            Some(nh) => put(
                match (was, nh > 0) {
                    (true, true) => Cbc,
                    (true, false) => Lbc,
                    (false, true) => Gbc,
                    (false, false) => Ubc,
                },
                m,
            ),
            None => put(if was { Ecb } else { Eub }, m),
        }
    }
    for (&m, &h) in new.lines.iter().zip(&new.hits) {
        let is = h > 0;
        match back(m) {
            None => put(if is { Gnc } else { Unc }, m),
            Some(o) if old.get(o).is_none() => put(if is { Gic } else { Uic }, m),
            Some(_) => {} // instrumented in both: classified above
        }
    }
    debug_assert!(out.0.iter().all(|v| v.windows(2).all(|w| w[0] < w[1])));
    out
}

/// The category counts of a same-base diff (every line unchanged), from its lines
/// gained, lost, and instrumented added and removed.
pub fn same_base_counts(d: &super::FileDiff) -> CatCounts {
    use Category::*;
    let both =
        |a: &[u32], b: &[u32]| a.iter().filter(|l| b.binary_search(l).is_ok()).count() as u64;
    let ecb = both(&d.lost, &d.instrumented_removed);
    let gic = both(&d.gained, &d.instrumented_added);
    let mut c = CatCounts::default();
    c.0[Ecb as usize] = ecb;
    c.0[Eub as usize] = d.instrumented_removed.len() as u64 - ecb;
    c.0[Gic as usize] = gic;
    c.0[Uic as usize] = d.instrumented_added.len() as u64 - gic;
    c.0[Lbc as usize] = d.lost.len() as u64 - ecb;
    c.0[Gbc as usize] = d.gained.len() as u64 - gic;
    c.0[Cbc as usize] = d.old.covered - c.get(Lbc) - ecb;
    c.0[Ubc as usize] =
        d.old.instrumented - c.get(Cbc) - c.get(Lbc) - c.get(Gbc) - ecb - c.get(Eub);
    c
}

/// A `--fail-on` threshold: `CAT>=N` (or `lost>=N`, LBC + ECB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailOn {
    /// The category (`None`: lost).
    pub cat: Option<Category>,
    /// The threshold N.
    pub at_least: u64,
}

impl FailOn {
    /// Parses `CAT>=N`; the error says what is wrong and what is expected.
    pub fn parse(spec: &str) -> Result<FailOn, String> {
        let bad = |why: &str| {
            format!(
                "--fail-on {spec:?}: {why}; expected CAT>=N with CAT one of {} or lost (LBC+ECB), N a whole number (e.g. 'LBC>=50')",
                ALL.map(|c| c.name()).join(", ")
            )
        };
        let (cat, n) = spec.split_once(">=").ok_or_else(|| bad("no `>=`"))?;
        let cat = cat.trim();
        let cat = if cat.eq_ignore_ascii_case("lost") {
            None
        } else {
            Some(
                Category::parse(&cat.to_ascii_uppercase())
                    .ok_or_else(|| bad(&format!("unknown category {cat:?}")))?,
            )
        };
        let at_least = n
            .trim()
            .parse::<u64>()
            .map_err(|_| bad(&format!("{:?} is not a whole number", n.trim())))?;
        if at_least == 0 {
            return Err(bad("N must be at least 1 (every file reaches 0)"));
        }
        Ok(FailOn { cat, at_least })
    }

    /// The category's name, or `lost`.
    pub fn name(&self) -> &'static str {
        self.cat.map_or("lost", |c| c.name())
    }

    /// The file's count, if it reaches the threshold.
    pub fn reached(&self, c: &CatCounts) -> Option<u64> {
        let n = self.cat.map_or_else(|| c.lost(), |k| c.get(k));
        (n >= self.at_least).then_some(n)
    }
}

#[cfg(test)]
#[path = "categories_tests.rs"]
mod tests;
