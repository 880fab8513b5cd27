//! The hunks of a line diff slid as git slides them (`xdl_change_compact` of git's
//! `xdiff/xdiffi.c`, with its indent heuristic, which `git diff` uses by default):
//! a group of changed lines that could sit at several places among equal lines is
//! moved to line up with a change of the other file where it can, else to the place
//! the indent heuristic scores best. Which of several equal lines a hunk keeps
//! decides which base line a row's hits land on; imara-diff's own post-processing
//! chose otherwise on files of few distinct lines (about one pair in ten of files of
//! two or three distinct lines, blank lines near the end of a file).
//!
//! Each side is compacted with the other's flags beside it, first `before`, then
//! `after`, as git does; the number of changed lines never changes.

use imara_diff::Token;

/// A line indented more than this counts as this (git's `MAX_INDENT`).
const MAX_INDENT: i32 = 200;
/// Blank lines counted around a split at most (git's `MAX_BLANKS`).
const MAX_BLANKS: i32 = 20;
/// How far the indent heuristic slides a group at most.
const MAX_SLIDING: usize = 100;

const START_OF_FILE_PENALTY: i32 = 1;
const END_OF_FILE_PENALTY: i32 = 21;
const TOTAL_BLANK_WEIGHT: i32 = -30;
const POST_BLANK_WEIGHT: i32 = 6;
const RELATIVE_INDENT_PENALTY: i32 = -4;
const RELATIVE_INDENT_WITH_BLANK_PENALTY: i32 = 10;
const RELATIVE_OUTDENT_PENALTY: i32 = 24;
const RELATIVE_OUTDENT_WITH_BLANK_PENALTY: i32 = 17;
const RELATIVE_DEDENT_PENALTY: i32 = 23;
const RELATIVE_DEDENT_WITH_BLANK_PENALTY: i32 = 17;
const INDENT_WEIGHT: i32 = 60;

/// One side of a diff: its lines (equal lines have equal ids), their texts, and
/// which are changed.
pub(crate) struct Side<'a, T: AsRef<[u8]>> {
    pub(crate) ids: &'a [Token],
    pub(crate) text: &'a dyn Fn(Token) -> T,
    pub(crate) changed: &'a mut [bool],
}

/// Slides the changed groups of `before` (with `after`'s beside it), then those of
/// `after` (with `before`'s), as `git diff` does.
pub(crate) fn compact_both<T: AsRef<[u8]>>(before: Side<'_, T>, after: Side<'_, T>) {
    compact(before.ids, before.text, before.changed, after.changed);
    compact(after.ids, after.text, after.changed, before.changed);
}

/// A group of changed lines: `start..end` (empty: the place above line `start`).
#[derive(Clone, Copy)]
struct Group {
    start: usize,
    end: usize,
}

/// The changed flags of one side, with git's sentinels: unchanged before the first
/// line and past the last.
struct Flags<'a> {
    c: &'a mut [bool],
}

impl Flags<'_> {
    fn at(&self, i: isize) -> bool {
        i >= 0 && (i as usize) < self.c.len() && self.c[i as usize]
    }

    fn first(&self) -> Group {
        let mut end = 0;
        while self.at(end as isize) {
            end += 1;
        }
        Group { start: 0, end }
    }

    fn next(&self, g: &mut Group) -> bool {
        if g.end == self.c.len() {
            return false;
        }
        g.start = g.end + 1;
        g.end = g.start;
        while self.at(g.end as isize) {
            g.end += 1;
        }
        true
    }

    fn previous(&self, g: &mut Group) -> bool {
        if g.start == 0 {
            return false;
        }
        g.end = g.start - 1;
        g.start = g.end;
        while self.at(g.start as isize - 1) {
            g.start -= 1;
        }
        true
    }

    fn slide_down(&mut self, ids: &[Token], g: &mut Group) -> bool {
        if g.end < self.c.len() && ids[g.start] == ids[g.end] {
            self.c[g.start] = false;
            self.c[g.end] = true;
            g.start += 1;
            g.end += 1;
            while self.at(g.end as isize) {
                g.end += 1;
            }
            true
        } else {
            false
        }
    }

    fn slide_up(&mut self, ids: &[Token], g: &mut Group) -> bool {
        if g.start > 0 && ids[g.start - 1] == ids[g.end - 1] {
            g.start -= 1;
            g.end -= 1;
            self.c[g.start] = true;
            self.c[g.end] = false;
            while self.at(g.start as isize - 1) {
                g.start -= 1;
            }
            true
        } else {
            false
        }
    }
}

/// git's `xdl_change_compact` of one side (`changed`, its lines `ids`), the other
/// side's flags `other` kept in step.
fn compact<T: AsRef<[u8]>>(
    ids: &[Token],
    text: &dyn Fn(Token) -> T,
    changed: &mut [bool],
    other: &mut [bool],
) {
    let mut f = Flags { c: changed };
    let o = Flags { c: other };
    let mut g = f.first();
    let mut go = o.first();
    loop {
        if g.end != g.start {
            let (mut groupsize, mut earliest_end, mut end_matching_other);
            loop {
                groupsize = g.end - g.start;
                end_matching_other = None;
                while f.slide_up(ids, &mut g) {
                    assert!(o.previous(&mut go), "group sync broken sliding up");
                }
                earliest_end = g.end;
                if go.end > go.start {
                    end_matching_other = Some(g.end);
                }
                while f.slide_down(ids, &mut g) {
                    assert!(o.next(&mut go), "group sync broken sliding down");
                    if go.end > go.start {
                        end_matching_other = Some(g.end);
                    }
                }
                if groupsize == g.end - g.start {
                    break;
                }
            }
            if g.end == earliest_end {
                // No shifting was possible.
            } else if end_matching_other.is_some() {
                while go.end == go.start {
                    assert!(f.slide_up(ids, &mut g), "match disappeared");
                    assert!(o.previous(&mut go), "group sync broken sliding to match");
                }
            } else {
                let best = best_shift(ids, text, g, groupsize, earliest_end);
                while g.end > best {
                    assert!(f.slide_up(ids, &mut g), "best shift unreached");
                    assert!(
                        o.previous(&mut go),
                        "group sync broken sliding to blank line"
                    );
                }
            }
        }
        if !f.next(&mut g) {
            break;
        }
        assert!(o.next(&mut go), "group sync broken moving to next group");
    }
}

/// The end of the group (slid down as far as it goes, `g`) that the indent heuristic
/// scores best, from `earliest_end` on.
fn best_shift<T: AsRef<[u8]>>(
    ids: &[Token],
    text: &dyn Fn(Token) -> T,
    g: Group,
    groupsize: usize,
    earliest_end: usize,
) -> usize {
    let indent = |i: usize| indent_of(text(ids[i]).as_ref());
    let mut shift = earliest_end;
    if g.end > groupsize && g.end - groupsize - 1 > shift {
        shift = g.end - groupsize - 1;
    }
    if g.end >= MAX_SLIDING && g.end - MAX_SLIDING > shift {
        shift = g.end - MAX_SLIDING;
    }
    let mut best: Option<(usize, Score)> = None;
    while shift <= g.end {
        let mut score = Score::default();
        score.add(&measure(ids.len(), &indent, shift as isize));
        score.add(&measure(
            ids.len(),
            &indent,
            shift as isize - groupsize as isize,
        ));
        if best.as_ref().is_none_or(|(_, b)| score.cmp(b) <= 0) {
            best = Some((shift, score));
        }
        shift += 1;
    }
    best.map_or(g.end, |(s, _)| s)
}

/// git's `xget_indent`: a line's indent (a tab to the next multiple of 8), or -1 for a
/// line of whitespace only.
fn indent_of(line: &[u8]) -> i32 {
    let mut ret = 0;
    for &c in line {
        if !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
            return ret;
        }
        if c == b' ' {
            ret += 1;
        } else if c == b'\t' {
            ret += 8 - ret % 8;
        }
        if ret >= MAX_INDENT {
            return MAX_INDENT;
        }
    }
    -1
}

/// What git's `measure_split` measures about a split above line `split`.
struct Measure {
    end_of_file: bool,
    indent: i32,
    pre_blank: i32,
    pre_indent: i32,
    post_blank: i32,
    post_indent: i32,
}

fn measure(n: usize, indent: &dyn Fn(usize) -> i32, split: isize) -> Measure {
    let (end_of_file, at) = if split >= n as isize {
        (true, -1)
    } else {
        (false, indent(split as usize))
    };
    let before = (0..split.max(0) as usize).rev();
    let (pre_blank, pre_indent) = blanks_then_indent(indent, before);
    let after = (split + 1).max(0) as usize..n;
    let (post_blank, post_indent) = blanks_then_indent(indent, after);
    Measure {
        end_of_file,
        indent: at,
        pre_blank,
        pre_indent,
        post_blank,
        post_indent,
    }
}

/// The blank lines met first along `lines` and the indent of the line after them
/// (-1: none; 0 past [`MAX_BLANKS`] blanks), as each of `measure_split`'s two scans.
fn blanks_then_indent(
    indent: &dyn Fn(usize) -> i32,
    lines: impl Iterator<Item = usize>,
) -> (i32, i32) {
    let mut blanks = 0;
    for i in lines {
        let at = indent(i);
        if at != -1 {
            return (blanks, at);
        }
        blanks += 1;
        if blanks == MAX_BLANKS {
            return (blanks, 0);
        }
    }
    (blanks, -1)
}

/// git's `split_score`.
#[derive(Default, Clone, Copy)]
struct Score {
    effective_indent: i32,
    penalty: i32,
}

impl Score {
    /// git's `score_add_split`.
    fn add(&mut self, m: &Measure) {
        if m.pre_indent == -1 && m.pre_blank == 0 {
            self.penalty += START_OF_FILE_PENALTY;
        }
        if m.end_of_file {
            self.penalty += END_OF_FILE_PENALTY;
        }
        let post_blank = if m.indent == -1 { 1 + m.post_blank } else { 0 };
        let total_blank = m.pre_blank + post_blank;
        self.penalty += TOTAL_BLANK_WEIGHT * total_blank;
        self.penalty += POST_BLANK_WEIGHT * post_blank;
        let indent = if m.indent != -1 {
            m.indent
        } else {
            m.post_indent
        };
        let any_blanks = total_blank != 0;
        self.effective_indent += indent;
        if indent == -1 || m.pre_indent == -1 || indent == m.pre_indent {
            return;
        }
        self.penalty += if indent > m.pre_indent {
            if any_blanks {
                RELATIVE_INDENT_WITH_BLANK_PENALTY
            } else {
                RELATIVE_INDENT_PENALTY
            }
        } else if m.post_indent != -1 && m.post_indent > indent {
            if any_blanks {
                RELATIVE_OUTDENT_WITH_BLANK_PENALTY
            } else {
                RELATIVE_OUTDENT_PENALTY
            }
        } else if any_blanks {
            RELATIVE_DEDENT_WITH_BLANK_PENALTY
        } else {
            RELATIVE_DEDENT_PENALTY
        };
    }

    /// git's `score_cmp`: below 0 when `self` is the better split.
    fn cmp(&self, other: &Score) -> i32 {
        let indents = (self.effective_indent > other.effective_indent) as i32
            - (self.effective_indent < other.effective_indent) as i32;
        INDENT_WEIGHT * indents + (self.penalty - other.penalty)
    }
}
