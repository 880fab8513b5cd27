//! `--group NAME=GLOB`: an extra record per file whose manager is NAME and whose hits
//! per line are the sums over the managers matching GLOB (contract §4). A group is part
//! of the job: it travels in `job.json` and in every merge task.

use serde::{Deserialize, Serialize};

use crate::limits::{MAX_GLOB_BYTES, MAX_GROUPS, MAX_MANAGER_BYTES};

/// One `--group NAME=GLOB`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Group {
    /// The `Manager` of the group's records.
    pub name: String,
    /// Managers whose sums it adds: `*` matches any run of characters, `?` one.
    pub glob: String,
}

impl Group {
    /// Parses `NAME=GLOB` (the first `=` separates them), checking NAME and GLOB.
    pub fn parse(s: &str) -> Result<Group, String> {
        let Some((name, glob)) = s.split_once('=') else {
            return Err(format!("--group {s:?}: expected NAME=GLOB"));
        };
        let g = Group {
            name: name.to_string(),
            glob: glob.to_string(),
        };
        g.check().map_err(|why| format!("--group {s:?}: {why}"))?;
        Ok(g)
    }

    /// Whether manager `name` is one of the group's.
    pub fn matches(&self, manager: &[u8]) -> bool {
        glob_match(self.glob.as_bytes(), manager)
    }

    fn check(&self) -> Result<(), String> {
        for (what, v, max) in [
            ("NAME", &self.name, MAX_MANAGER_BYTES),
            ("GLOB", &self.glob, MAX_GLOB_BYTES),
        ] {
            if v.is_empty() || v.len() > max || v.chars().any(char::is_control) {
                return Err(format!(
                    "{what} is {} bytes: it must be 1-{max} bytes without control characters",
                    v.len()
                ));
            }
        }
        if self.name == "*" {
            return Err("NAME `*` is the record of all managers".into());
        }
        Ok(())
    }
}

/// Checks a job's groups: each valid, at most [`MAX_GROUPS`], no NAME twice.
pub fn check_groups(groups: &[Group]) -> Result<(), String> {
    if groups.len() > MAX_GROUPS {
        return Err(format!("{} groups, more than {MAX_GROUPS}", groups.len()));
    }
    for (i, g) in groups.iter().enumerate() {
        g.check()
            .map_err(|why| format!("group {:?}: {why}", g.name))?;
        if groups[..i].iter().any(|o| o.name == g.name) {
            return Err(format!("group {:?} is given twice", g.name));
        }
    }
    Ok(())
}

/// Why a name cannot be the `Manager` of a record of its own (contract §6): the format
/// reserves it, it is a group's, or it is past the cap. A row with such a manager is a
/// bad row; a Go input's is refused up front.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManagerNameError {
    /// An empty name.
    #[error("is empty")]
    Empty,
    /// `*`, the record of all managers.
    #[error("is `*`, the name of the record of all managers")]
    All,
    /// Longer than [`MAX_MANAGER_BYTES`].
    #[error("is {len} bytes, longer than the {MAX_MANAGER_BYTES} byte cap on a manager name")]
    TooLong {
        /// The name's length in bytes.
        len: usize,
    },
    /// A `--group`'s NAME: its records and the group's would be one name twice.
    #[error("is the NAME of --group {name}={glob}: its records and the group's would have one name")]
    Group {
        /// The group's NAME.
        name: String,
        /// The group's GLOB.
        glob: String,
    },
}

/// Checks that `name` may be a manager's in a job with these groups: not empty, not
/// `*`, at most [`MAX_MANAGER_BYTES`], no group's NAME. (UTF-8 is checked apart.)
pub fn check_manager(name: &[u8], groups: &[Group]) -> Result<(), ManagerNameError> {
    if name.is_empty() {
        return Err(ManagerNameError::Empty);
    }
    if name == b"*" {
        return Err(ManagerNameError::All);
    }
    if name.len() > MAX_MANAGER_BYTES {
        return Err(ManagerNameError::TooLong { len: name.len() });
    }
    if let Some(g) = groups.iter().find(|g| g.name.as_bytes() == name) {
        return Err(ManagerNameError::Group {
            name: g.name.clone(),
            glob: g.glob.clone(),
        });
    }
    Ok(())
}

/// One character of a glob or a name: a byte and the UTF-8 continuation bytes after it.
fn chars(s: &[u8]) -> impl Iterator<Item = &[u8]> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        if i >= s.len() {
            return None;
        }
        let len = 1 + s[i + 1..].iter().take_while(|&&b| b & 0xC0 == 0x80).count();
        i += len;
        Some(&s[i - len..i])
    })
}

/// A character of a glob between its `*`s: `?` or itself.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    Any,
    Lit(&'a [u8]),
}

impl Tok<'_> {
    fn matches(self, c: &[u8]) -> bool {
        match self {
            Tok::Any => true,
            Tok::Lit(l) => l == c,
        }
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters (also
/// none), `?` exactly one character (a whole UTF-8 sequence) and every other character
/// itself. Time linear in the name: the pieces between `*`s are found left to right,
/// each at its leftmost place (the first anchored at the start, the last at the end),
/// by a bit-parallel search costing one step per character of the name and 64
/// characters of the piece. A backtracking matcher took `pattern × name` steps: 4.5 s
/// for a 1 MB name against a 4 KB glob.
pub fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    let name: Vec<&[u8]> = chars(name).collect();
    let toks: Vec<Option<Tok<'_>>> = chars(pattern)
        .map(|c| match c {
            b"*" => None,
            b"?" => Some(Tok::Any),
            c => Some(Tok::Lit(c)),
        })
        .collect();
    let mut pieces = toks.split(Option::is_none).map(|p| {
        p.iter()
            .map(|t| t.expect("split at the stars"))
            .collect::<Vec<Tok<'_>>>()
    });
    let first = pieces.next().unwrap_or_default();
    let rest: Vec<Vec<Tok<'_>>> = pieces.collect();
    let at = |piece: &[Tok<'_>], chars: &[&[u8]]| {
        piece.len() == chars.len() && piece.iter().zip(chars).all(|(t, c)| t.matches(c))
    };
    let Some((last, middle)) = rest.split_last() else {
        return at(&first, &name);
    };
    if first.len() + last.len() > name.len() {
        return false;
    }
    let end = name.len() - last.len();
    if !at(&first, &name[..first.len()]) || !at(last, &name[end..]) {
        return false;
    }
    let mut hay = &name[first.len()..end];
    for piece in middle.iter().filter(|p| !p.is_empty()) {
        match find(piece, hay) {
            Some(after) => hay = &hay[after..],
            None => return false,
        }
    }
    true
}

/// The end of the leftmost place `piece` (not empty) matches in `hay`, by Shift-And:
/// bit `i` of the state says that the piece's first `i + 1` characters end here.
fn find(piece: &[Tok<'_>], hay: &[&[u8]]) -> Option<usize> {
    let words = piece.len().div_ceil(64);
    let set = |m: &mut Vec<u64>, i: usize| m[i / 64] |= 1 << (i % 64);
    // Per character of the piece, the places it may take: its own and every `?`.
    let mut any = vec![0u64; words];
    for (i, t) in piece.iter().enumerate() {
        if *t == Tok::Any {
            set(&mut any, i);
        }
    }
    let mut masks: std::collections::HashMap<&[u8], Vec<u64>> = Default::default();
    for (i, t) in piece.iter().enumerate() {
        if let Tok::Lit(c) = *t {
            set(masks.entry(c).or_insert_with(|| any.clone()), i);
        }
    }
    let last = piece.len() - 1;
    let mut state = vec![0u64; words];
    for (j, c) in hay.iter().enumerate() {
        let mask = masks.get(c).unwrap_or(&any);
        let mut carry = 1;
        for (s, m) in state.iter_mut().zip(mask) {
            let out = *s >> 63;
            *s = ((*s << 1) | carry) & m;
            carry = out;
        }
        if state[last / 64] >> (last % 64) & 1 == 1 {
            return Some(j + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_star_and_question_mark() {
        let m = |p: &str, n: &str| glob_match(p.as_bytes(), n.as_bytes());
        assert!(m("*", ""));
        assert!(m("*", "ci-upstream-kasan-gce"));
        assert!(m("ci-*", "ci-upstream"));
        assert!(!m("ci-*", "ci2-upstream"));
        assert!(m("*-clang*", "ci-upstream-clang-kasan"));
        assert!(!m("*-clang*", "ci-upstream-gcc-kasan"));
        assert!(m("ci-?", "ci-a"));
        assert!(!m("ci-?", "ci-"));
        assert!(!m("ci-?", "ci-ab"));
        assert!(m("ci-?", "ci-ü"), "? is one character, not one byte");
        assert!(m("a*b*c", "a-x-b-y-b-c"));
        assert!(!m("a*b*c", "a-x-b-y-b-d"));
        assert!(m("exact", "exact"));
        assert!(!m("exact", "exactly"));
        assert!(!m("exact", "exac"));
        assert!(m("**a**", "bab"));
        assert!(!m("", "a"));
        assert!(m("", ""));
        // Backtracking stays linear-ish: a long name against many stars.
        let name = "a".repeat(2000);
        assert!(!m(&format!("{}b", "*a".repeat(50)), &name));
        assert!(m("?*?", "ab"));
        assert!(!m("?*?", "a"));
        assert!(m("a*a", "aa"));
        assert!(!m("a*a", "a"), "the first and last pieces may not overlap");
        assert!(m("*?b?*", "xébü"));
    }

    /// Whether `name` matches `pattern`, by the textbook table over (characters of the
    /// pattern, characters of the name): slow, and plainly right.
    fn reference(pattern: &str, name: &str) -> bool {
        let p: Vec<char> = pattern.chars().collect();
        let n: Vec<char> = name.chars().collect();
        // ok[j]: the pattern's first i characters match the name's first j.
        let mut ok = vec![false; n.len() + 1];
        ok[0] = true;
        for &pc in &p {
            let mut next = vec![false; n.len() + 1];
            for j in 0..=n.len() {
                next[j] = match pc {
                    '*' => ok[j] || (j > 0 && next[j - 1]),
                    '?' => j > 0 && ok[j - 1],
                    c => j > 0 && ok[j - 1] && n[j - 1] == c,
                };
            }
            ok = next;
        }
        ok[n.len()]
    }

    /// The linear matcher answers as the reference does on random globs and names of a
    /// few characters (one of them two bytes long, so `?` is checked on a character).
    #[test]
    fn the_linear_matcher_agrees_with_a_reference_on_random_globs() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |k: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % k
        };
        let (mut matched, mut tried) = (0, 0);
        for _ in 0..200_000 {
            let glob: String = (0..next(9))
                .map(|_| ['a', 'b', 'é', '*', '?', '*', 'a'][next(7) as usize])
                .collect();
            let name: String = (0..next(10))
                .map(|_| ['a', 'b', 'é'][next(3) as usize])
                .collect();
            let want = reference(&glob, &name);
            assert_eq!(
                glob_match(glob.as_bytes(), name.as_bytes()),
                want,
                "{glob:?} against {name:?}"
            );
            tried += 1;
            matched += usize::from(want);
        }
        assert!(matched > tried / 20 && matched < tried * 19 / 20, "{matched} of {tried}");
        // Pieces longer than one word of the bit-parallel search.
        let long: String = "ab?".repeat(50);
        let name = format!("xx{}yy{}", "abc".repeat(50), "abé".repeat(50));
        for glob in [format!("*{long}*"), format!("xx*{long}"), format!("*{long}*{long}")] {
            assert_eq!(
                glob_match(glob.as_bytes(), name.as_bytes()),
                reference(&glob, &name),
                "{glob:?}"
            );
        }
        assert!(glob_match(format!("*{long}*{long}").as_bytes(), name.as_bytes()));
    }

    /// A 1 MB name against a 4 KB glob took 4.5 s per (manager, group) pair with the
    /// backtracking matcher (`*a*a...*b` against `aaaa...`): every star retried every
    /// place. Now one pass: the answers are checked here, the time in a release run.
    #[test]
    fn a_megabyte_name_against_a_4k_glob_took_seconds_per_pair() {
        let name = "a".repeat(1 << 20);
        let glob = format!("{}b", "*a".repeat(2048));
        assert!(!glob_match(glob.as_bytes(), name.as_bytes()));
        let glob = format!("{}*", "*a".repeat(2048));
        assert!(glob_match(glob.as_bytes(), name.as_bytes()));
        let glob = format!("*{}*", "a?".repeat(2048));
        assert!(glob_match(glob.as_bytes(), name.as_bytes()));
    }

    #[test]
    fn managers_reserved_or_taken_by_a_group_are_refused() {
        let groups = [Group::parse("gcc=ci-*-gcc").unwrap()];
        assert_eq!(check_manager(b"ci-a-gcc", &groups), Ok(()));
        assert_eq!(check_manager(b"", &groups), Err(ManagerNameError::Empty));
        assert_eq!(check_manager(b"*", &groups), Err(ManagerNameError::All));
        assert_eq!(check_manager(b"**", &groups), Ok(()));
        let e = check_manager(b"gcc", &groups).unwrap_err();
        assert!(e.to_string().contains("--group gcc=ci-*-gcc"), "{e}");
        assert_eq!(check_manager(&[b'm'; MAX_MANAGER_BYTES], &[]), Ok(()));
        let e = check_manager(&[b'm'; MAX_MANAGER_BYTES + 1], &[]).unwrap_err();
        assert!(e.to_string().contains("is 1025 bytes, longer than the 1024"), "{e}");
    }

    #[test]
    fn group_names_are_checked() {
        let g = Group::parse("gcc=ci-*-gcc-*").unwrap();
        assert_eq!((g.name.as_str(), g.glob.as_str()), ("gcc", "ci-*-gcc-*"));
        assert_eq!(Group::parse("a=b=c").unwrap().glob, "b=c");
        assert!(Group::parse("nogrouphere")
            .unwrap_err()
            .contains("NAME=GLOB"));
        assert!(Group::parse("=x").is_err());
        assert!(Group::parse("x=").is_err());
        assert!(Group::parse("*=ci-*").unwrap_err().contains("NAME `*`"));
        let two = [Group::parse("a=x*").unwrap(), Group::parse("a=y*").unwrap()];
        assert!(check_groups(&two)
            .unwrap_err()
            .contains("\"a\" is given twice"));
        assert_eq!(check_groups(&two[..1]), Ok(()));
        let many: Vec<Group> = (0..=MAX_GROUPS)
            .map(|i| Group::parse(&format!("g{i}=x")).unwrap())
            .collect();
        assert!(check_groups(&many).is_err());
        // NAME and GLOB up to the cap on a manager name, not past it.
        let at_cap = "g".repeat(MAX_MANAGER_BYTES);
        assert!(Group::parse(&format!("{at_cap}={at_cap}")).is_ok());
        let e = Group::parse(&format!("{at_cap}g=x")).unwrap_err();
        assert!(e.contains("NAME is 1025 bytes: it must be 1-1024 bytes"), "{e}");
        let e = Group::parse(&format!("x={at_cap}*")).unwrap_err();
        assert!(e.contains("GLOB is 1025 bytes: it must be 1-1024 bytes"), "{e}");
    }
}
