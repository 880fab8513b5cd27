//! The ids of a row's (file, commit, manager) and its repository's check, remembered
//! for the recent rows of a piece: one row of an export is one of a few (session,
//! file) streams interleaved, each repeating the same values, so three hashed lookups
//! and a check a row become one probe of a small table and four byte comparisons.

/// Slots of the table (a power of two): more than the streams an export interleaves.
const SLOTS: usize = 64;

/// The first and the last 8 bytes of `s` as words (fewer: zero-padded), read without
/// a loop: the parts of a value that tell values apart (paths share their start,
/// hex commits differ at once, managers often differ at the end).
#[inline(always)]
fn ends(s: &[u8]) -> (u64, u64) {
    if s.len() >= 8 {
        let head = u64::from_le_bytes(s[..8].try_into().expect("8 bytes"));
        let tail = u64::from_le_bytes(s[s.len() - 8..].try_into().expect("8 bytes"));
        (head, tail)
    } else {
        let mut w = [0u8; 8];
        w[..s.len()].copy_from_slice(s);
        let v = u64::from_le_bytes(w);
        (v, v)
    }
}

/// One remembered row: its three values (borrowed from the piece) and what their
/// lookups gave.
#[derive(Clone, Copy)]
struct Slot<'a> {
    file: &'a [u8],
    commit: &'a [u8],
    manager: &'a [u8],
    repo: &'a [u8],
    got: Group,
}

/// The ids and checks of a row's file, commit and manager, and its repository's check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Group {
    pub(super) file: (u32, bool),
    pub(super) commit: (u32, bool),
    pub(super) manager: (u32, bool),
    pub(super) repo_ok: bool,
}

/// Nothing remembered yet (an id no lookup gives: a slot never matches).
const EMPTY: Slot<'static> = Slot {
    file: &[],
    commit: &[],
    manager: &[],
    repo: &[],
    got: Group {
        file: (u32::MAX, false),
        commit: (u32::MAX, false),
        manager: (u32::MAX, false),
        repo_ok: false,
    },
};

/// The recent rows' (file, commit, manager) of one piece. Values are borrowed from
/// the piece, so the table lives no longer than its parse, and the ids it holds stay
/// valid (the thread's strings are only flushed between pieces).
pub(super) struct Recent<'a> {
    slots: [Slot<'a>; SLOTS],
}

impl<'a> Recent<'a> {
    pub(super) fn new() -> Self {
        Recent {
            slots: [EMPTY; SLOTS],
        }
    }

    /// The ids of (`file`, `commit`, `manager`) and the check of `repo`: a recent
    /// row's when all four are the same bytes, else `lookup`'s, remembered in place of
    /// the slot's row. (The repository is the same on almost every row: it is compared,
    /// not hashed.)
    #[inline(always)]
    pub(super) fn get(
        &mut self,
        [file, commit, manager, repo]: [&'a [u8]; 4],
        lookup: impl FnOnce() -> Group,
    ) -> Group {
        let (_, f) = ends(file);
        let (c, _) = ends(commit);
        let (_, m) = ends(manager);
        let h = f.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ c.wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            ^ m.wrapping_mul(0x1656_67b1_9e37_79f9)
            ^ (file.len() as u64) << 32;
        let i = (h.wrapping_mul(0x2545_f491_4f6c_dd1d) >> (64 - SLOTS.trailing_zeros())) as usize;
        let s = &mut self.slots[i];
        let same = s.got.file.0 != u32::MAX
            && crate::spill::same_bytes(file, s.file)
            && crate::spill::same_bytes(commit, s.commit)
            && crate::spill::same_bytes(manager, s.manager)
            && crate::spill::same_bytes(repo, s.repo);
        if !same {
            *s = Slot {
                file,
                commit,
                manager,
                repo,
                got: lookup(),
            };
        }
        s.got
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_differing_in_one_value_is_looked_up_again() {
        let mut r = Recent::new();
        let mut calls = 0;
        let mut get = |r: &mut Recent<'static>, f: &'static [u8], c: &'static [u8], m, id| {
            r.get([f, c, m, b"git://r"], || {
                calls += 1;
                Group {
                    file: (id, true),
                    commit: (id, true),
                    manager: (id, true),
                    repo_ok: true,
                }
            })
        };
        assert_eq!(get(&mut r, b"a/b.c", b"c1", b"m", 1).file.0, 1);
        assert_eq!(get(&mut r, b"a/b.c", b"c1", b"m", 9).file.0, 1);
        // The same ends, another middle: not the same value.
        assert_eq!(get(&mut r, b"a/x/b.c", b"c1", b"m", 2).file.0, 2);
        assert_eq!(get(&mut r, b"a/b.c", b"c2", b"m", 3).file.0, 3);
        assert_eq!(get(&mut r, b"a/b.c", b"c1", b"mm", 4).file.0, 4);
        assert_eq!(get(&mut r, b"a/b.c", b"c1", b"", 5).file.0, 5);
        // An empty row's values are looked up too (the empty slot never matches).
        assert_eq!(get(&mut r, b"", b"", b"", 6).file.0, 6);
        assert_eq!(get(&mut r, b"", b"", b"", 7).file.0, 6);
        let long = b"drivers/net/ethernet/intel/e1000e/netdev.c";
        let other = b"drivers/net/ethernet/intel/e1000e/netdev.c".map(|b| b);
        assert_eq!(get(&mut r, long, b"c1", b"m", 8).file.0, 8);
        let other: &'static [u8] = Box::leak(Box::new(other));
        assert_eq!(get(&mut r, other, b"c1", b"m", 10).file.0, 8);
        assert_eq!(calls, 7);
        // Another repository: looked up (and checked) again, and so is the first one
        // after it (one slot per file, commit and manager).
        let mut looked = 0;
        for (repo, ok) in [
            (&b"bad repo"[..], false),
            (b"git://r", true),
            (b"git://r", true),
        ] {
            let got = r.get([b"a/b.c", b"c1", b"m", repo], || {
                looked += 1;
                Group {
                    file: (1, true),
                    commit: (1, true),
                    manager: (1, true),
                    repo_ok: ok,
                }
            });
            assert_eq!(got.repo_ok, ok);
        }
        assert_eq!(looked, 2);
    }
}
