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
    #[error(
        "is the NAME of --group {name}={glob}: its records and the group's would have one name"
    )]
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

/// The length of the character of `s` at `i`: a byte and the UTF-8 continuation bytes
/// after it.
fn char_len(s: &[u8], i: usize) -> usize {
    1 + s[i + 1..].iter().take_while(|&&b| b & 0xC0 == 0x80).count()
}

/// The start of the character of `s` that ends at `end` (> 0).
fn char_start(s: &[u8], end: usize) -> usize {
    let mut i = end - 1;
    while i > 0 && s[i] & 0xC0 == 0x80 {
        i -= 1;
    }
    i
}

/// A run of a glob between two `*`s (or an end).
#[derive(Debug, Clone)]
struct Piece {
    /// Its bytes; `?` is any one character.
    bytes: Vec<u8>,
    /// Its characters (a `?` or a character of the glob).
    chars: usize,
    /// How the piece is found between two `*`s.
    search: Search,
}

/// How a piece is found in a name.
#[derive(Debug, Clone)]
enum Search {
    /// No `?`: a substring.
    Bytes(Box<memchr::memmem::Finder<'static>>),
    /// With a `?`: Shift-And, with the masks of `words` words of each ASCII character
    /// (`ascii`, 128 rows), of the piece's other characters (`other`, sorted) and of
    /// any other character (`any`: the `?`s).
    ShiftAnd {
        words: usize,
        ascii: Vec<u64>,
        other: Vec<(Vec<u8>, Vec<u64>)>,
        any: Vec<u64>,
    },
}

impl Piece {
    fn new(bytes: &[u8]) -> Piece {
        let mut chars = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let l = char_len(bytes, i);
            chars.push(&bytes[i..i + l]);
            i += l;
        }
        let search = if !bytes.contains(&b'?') {
            Search::Bytes(Box::new(memchr::memmem::Finder::new(bytes).into_owned()))
        } else {
            let words = chars.len().div_ceil(64);
            let set = |m: &mut Vec<u64>, i: usize| m[i / 64] |= 1 << (i % 64);
            let mut any = vec![0u64; words];
            for (i, c) in chars.iter().enumerate() {
                if *c == b"?" {
                    set(&mut any, i);
                }
            }
            let mut lits: Vec<(Vec<u8>, Vec<u64>)> = Vec::new();
            for (i, c) in chars.iter().enumerate().filter(|(_, c)| **c != b"?") {
                let at = match lits.iter().position(|(l, _)| l == c) {
                    Some(at) => at,
                    None => {
                        lits.push((c.to_vec(), any.clone()));
                        lits.len() - 1
                    }
                };
                set(&mut lits[at].1, i);
            }
            lits.sort();
            let mut ascii: Vec<u64> = (0..128).flat_map(|_| any.iter().copied()).collect();
            let other = lits
                .into_iter()
                .filter(|(c, m)| match c[..] {
                    [b] if b < 128 => {
                        ascii[b as usize * words..][..words].copy_from_slice(m);
                        false
                    }
                    _ => true,
                })
                .collect();
            Search::ShiftAnd {
                words,
                ascii,
                other,
                any,
            }
        };
        Piece {
            bytes: bytes.to_vec(),
            chars: chars.len(),
            search,
        }
    }

    /// The end of the piece matched at the start of `s`, if it matches there.
    fn prefix(&self, s: &[u8]) -> Option<usize> {
        let mut n = 0;
        let mut p = 0;
        while p < self.bytes.len() {
            if n >= s.len() {
                return None;
            }
            if self.bytes[p] == b'?' {
                n += char_len(s, n);
                p += 1;
            } else if self.bytes[p] == s[n] {
                n += 1;
                p += 1;
            } else {
                return None;
            }
        }
        Some(n)
    }

    /// The start of the piece matched at the end of `s`, if it matches there.
    fn suffix(&self, s: &[u8]) -> Option<usize> {
        let (mut n, mut p) = (s.len(), self.bytes.len());
        while p > 0 {
            if n == 0 {
                return None;
            }
            if self.bytes[p - 1] == b'?' {
                n = char_start(s, n);
                p -= 1;
            } else if self.bytes[p - 1] == s[n - 1] {
                n -= 1;
                p -= 1;
            } else {
                return None;
            }
        }
        Some(n)
    }

    /// The end of the leftmost place the piece (not empty) matches in `hay`: a
    /// substring search, or with a `?` Shift-And over the characters of `hay` (bit `i`
    /// of the state: the piece's first `i + 1` characters end here).
    fn find(&self, hay: &[u8]) -> Option<usize> {
        let (words, ascii, other, any) = match &self.search {
            Search::Bytes(f) => return f.find(hay).map(|at| at + self.bytes.len()),
            Search::ShiftAnd {
                words,
                ascii,
                other,
                any,
            } => (*words, ascii, other, any),
        };
        let last = self.chars - 1;
        // One word of state for a piece of up to 64 characters (almost every one).
        let mut one = 0u64;
        let mut state = vec![0u64; if words > 1 { words } else { 0 }];
        let mut j = 0;
        while j < hay.len() {
            let mask = if hay[j] < 128 {
                j += 1;
                &ascii[hay[j - 1] as usize * words..][..words]
            } else {
                let c = &hay[j..j + char_len(hay, j)];
                j += c.len();
                match other.binary_search_by(|(l, _)| l.as_slice().cmp(c)) {
                    Ok(at) => &other[at].1,
                    Err(_) => any,
                }
            };
            if words == 1 {
                one = ((one << 1) | 1) & mask[0];
                if one >> last & 1 == 1 {
                    return Some(j);
                }
                continue;
            }
            let mut carry = 1;
            for (s, m) in state.iter_mut().zip(mask) {
                let out = *s >> 63;
                *s = ((*s << 1) | carry) & m;
                carry = out;
            }
            if state[last / 64] >> (last % 64) & 1 == 1 {
                return Some(j);
            }
        }
        None
    }
}

/// A glob ready to match names: `*` matches any run of characters (also none), `?`
/// exactly one character (a whole UTF-8 sequence), every other character itself.
///
/// Time linear in the name: the pieces between `*`s are found left to right, each at
/// its leftmost place (the first anchored at the start, the last at the end), by a
/// substring search, or, for a piece with a `?`, by a bit-parallel search costing a
/// step per character of the name and 64 characters of the piece. The backtracking
/// matcher it replaces took up to `glob × name` steps: 4.5 s for a 1 MB name against
/// a 4 KB glob. Names are UTF-8 (rows with other bytes are bad rows).
#[derive(Debug, Clone)]
pub struct Glob {
    /// The pieces between `*`s: at least one (the glob's only one when it has no `*`).
    pieces: Vec<Piece>,
}

impl Glob {
    /// Compiles `pattern`.
    pub fn new(pattern: &[u8]) -> Glob {
        Glob {
            pieces: pattern.split(|&b| b == b'*').map(Piece::new).collect(),
        }
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &[u8]) -> bool {
        let (first, rest) = self.pieces.split_first().expect("at least one piece");
        let Some((last, middle)) = rest.split_last() else {
            return first.prefix(name) == Some(name.len());
        };
        let Some(start) = first.prefix(name) else {
            return false;
        };
        let Some(end) = last.suffix(name) else {
            return false;
        };
        if start > end {
            return false; // the first and last pieces overlap
        }
        let mut hay = &name[start..end];
        for piece in middle.iter().filter(|p| !p.bytes.is_empty()) {
            match piece.find(hay) {
                Some(after) => hay = &hay[after..],
                None => return false,
            }
        }
        true
    }
}

/// Whether `name` matches `pattern` (see [`Glob`]; compile it once to match many names).
pub fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    Glob::new(pattern).matches(name)
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
        assert!(
            matched > tried / 20 && matched < tried * 19 / 20,
            "{matched} of {tried}"
        );
        // Pieces longer than one word of the bit-parallel search.
        let long: String = "ab?".repeat(50);
        let name = format!("xx{}yy{}", "abc".repeat(50), "abé".repeat(50));
        for glob in [
            format!("*{long}*"),
            format!("xx*{long}"),
            format!("*{long}*{long}"),
        ] {
            assert_eq!(
                glob_match(glob.as_bytes(), name.as_bytes()),
                reference(&glob, &name),
                "{glob:?}"
            );
        }
        assert!(glob_match(
            format!("*{long}*{long}").as_bytes(),
            name.as_bytes()
        ));
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
        assert!(
            e.to_string()
                .contains("is 1025 bytes, longer than the 1024"),
            "{e}"
        );
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
        assert!(
            e.contains("NAME is 1025 bytes: it must be 1-1024 bytes"),
            "{e}"
        );
        let e = Group::parse(&format!("x={at_cap}*")).unwrap_err();
        assert!(
            e.contains("GLOB is 1025 bytes: it must be 1-1024 bytes"),
            "{e}"
        );
    }
}
