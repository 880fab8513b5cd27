//! `--group NAME=GLOB`: an extra record per file whose manager is NAME and whose hits
//! per line are the sums over the managers matching GLOB (contract §4). A group is part
//! of the job: it travels in `job.json` and in every merge task.

use serde::{Deserialize, Serialize};

use crate::limits::{MAX_GROUPS, MAX_NAME_BYTES};

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
        for (what, v) in [("NAME", &self.name), ("GLOB", &self.glob)] {
            if v.is_empty() || v.len() > MAX_NAME_BYTES || v.chars().any(char::is_control) {
                return Err(format!(
                    "{what} must be 1-{MAX_NAME_BYTES} bytes without control characters"
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

/// Whether `name` matches `pattern`, where `*` matches any run of bytes (also none) and
/// `?` exactly one character (a whole UTF-8 sequence). Every other byte matches itself.
/// Linear backtracking on the last `*`: no pattern takes more than
/// `pattern.len() * name.len()` steps.
pub fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    // One character of `name` at `i`: a UTF-8 lead byte and its continuation bytes.
    let char_len = |i: usize| {
        1 + name[i + 1..]
            .iter()
            .take_while(|&&b| b & 0xC0 == 0x80)
            .count()
    };
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(b'?') => {
                p += 1;
                n += char_len(n);
            }
            Some(&c) if c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    // The last `*` takes one more character.
                    let sn = sn + char_len(sn);
                    star = Some((sp, sn));
                    p = sp + 1;
                    n = sn;
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
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
    }
}
