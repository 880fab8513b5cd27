//! `--group NAME=GLOB` (contract §4): per file, a record whose hits per line are the
//! sums over the managers the glob matches, instrumented where any of them is.
//!
//! Computed from the per-manager sums when a file is written, never per row: which
//! managers a group holds is decided once per shard ([`GroupPlan`]), and each
//! manager's pairs, read once for its own record, are added into the sums of its
//! groups ([`GroupSums`]). A file holds at most [`GROUP_CELLS`] group sums at once;
//! groups past that are summed after the managers, one at a time, reading their
//! members' pairs again.

use std::io::Write;

use covmerge_proto::group::{Glob, Group};
use covmerge_proto::output;

use super::sums::FinishedSums;
use super::MergeError;
use crate::spill::StringTable;

/// Group sums (one per group and instrumented line) a file holds at once.
const GROUP_CELLS: usize = 4 << 20;

/// A line no member of the group instruments.
const ABSENT: u64 = u64::MAX;

/// The groups of a shard and, per manager (by the shard's index), the groups it is in.
pub(super) struct GroupPlan<'a> {
    groups: &'a [Group],
    /// Per manager: the indexes of its groups, ascending.
    member: Vec<Vec<u16>>,
}

impl<'a> GroupPlan<'a> {
    /// Matches every manager of the shard (`managers`: string ids by shard index)
    /// against every group. A group named like a manager is refused: its records
    /// would be that manager's.
    pub(super) fn new(
        groups: &'a [Group],
        managers: &[u32],
        strings: &StringTable,
    ) -> Result<Self, MergeError> {
        let mut member = vec![Vec::new(); if groups.is_empty() { 0 } else { managers.len() }];
        // Each glob compiled once, each (manager, group) matched once per shard, in
        // time linear in the manager's name.
        let globs: Vec<Glob> = groups
            .iter()
            .map(|g| Glob::new(g.glob.as_bytes()))
            .collect();
        for (m, &id) in managers.iter().enumerate().filter(|_| !groups.is_empty()) {
            let name = strings.get(id);
            for (g, group) in groups.iter().enumerate() {
                if group.name.as_bytes() == name {
                    return Err(MergeError::GroupIsManager {
                        group: group.name.clone(),
                        glob: group.glob.clone(),
                    });
                }
                if globs[g].matches(name) {
                    member[m].push(g as u16);
                }
            }
        }
        Ok(GroupPlan { groups, member })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    fn groups_of(&self, mgr: u32) -> &[u16] {
        self.member.get(mgr as usize).map_or(&[], |g| g.as_slice())
    }
}

/// One file's group sums while its managers are written.
pub(super) struct GroupSums<'p, 'a> {
    plan: &'p GroupPlan<'a>,
    /// The file's instrumented lines, ascending (the `*` record's).
    lines: &'p [u32],
    /// Groups `0..held` are summed as the managers go by; the others afterwards.
    held: usize,
    /// Per held group: its sum per line (empty: no member seen yet).
    sums: Vec<Vec<u64>>,
}

impl<'p, 'a> GroupSums<'p, 'a> {
    pub(super) fn new(plan: &'p GroupPlan<'a>, lines: &'p [u32]) -> Self {
        Self::with_cells(plan, lines, GROUP_CELLS)
    }

    fn with_cells(plan: &'p GroupPlan<'a>, lines: &'p [u32], cells: usize) -> Self {
        let held = (cells / lines.len().max(1)).max(1).min(plan.groups.len());
        GroupSums {
            plan,
            lines,
            held,
            sums: vec![Vec::new(); held],
        }
    }

    /// Adds manager `mgr`'s `(line, sum)` pairs into the held groups it is in.
    pub(super) fn add(&mut self, mgr: u32, pairs: &[(u32, u64)]) {
        for &g in self.plan.groups_of(mgr) {
            let g = g as usize;
            if g >= self.held {
                break;
            }
            add_pairs(&mut self.sums[g], self.lines, pairs);
        }
    }

    /// Writes a record per group with a line, in the order the groups were given:
    /// the held ones from their sums, the others by reading the pairs of their members
    /// (`by_name`, the file's managers) again. Returns the records written.
    pub(super) fn write(
        mut self,
        per_mgr: &mut FinishedSums,
        by_name: &[u32],
        order: &[u32],
        slot_lines: &[u32],
        path: &[u8],
        out: &mut impl Write,
    ) -> Result<u64, MergeError> {
        let (mut g_lines, mut g_hits, mut pairs) = (Vec::new(), Vec::new(), Vec::new());
        // Members read again in the shard's order, not by name: the sums do not care,
        // and spilled sums are read in that order (`runs.rs`), a read per many.
        let mut by_index = by_name.to_vec();
        by_index.sort_unstable();
        let mut spare = Vec::new();
        let mut records = 0;
        for (g, group) in self.plan.groups.iter().enumerate() {
            let sums = if g < self.held {
                std::mem::take(&mut self.sums[g])
            } else {
                spare.clear();
                for &m in &by_index {
                    if self.plan.groups_of(m).contains(&(g as u16)) {
                        per_mgr
                            .pairs(m, order, slot_lines, &mut pairs)
                            .map_err(MergeError::Scratch)?;
                        add_pairs(&mut spare, self.lines, &pairs);
                    }
                }
                std::mem::take(&mut spare)
            };
            g_lines.clear();
            g_hits.clear();
            for (&line, &h) in self.lines.iter().zip(&sums) {
                if h != ABSENT {
                    g_lines.push(line);
                    g_hits.push(h);
                }
            }
            spare = sums;
            if !g_lines.is_empty() {
                output::write_mcr(out, group.name.as_bytes(), path, &g_lines, &g_hits)?;
                records += 1;
            }
        }
        Ok(records)
    }
}

/// Adds `pairs` (ascending lines, each one of `lines`) into `sums` (per line of
/// `lines`; empty: none yet). Sums stay below [`ABSENT`]: a group's sum never exceeds
/// its line's `*` sum, which the merge checks against `i64::MAX` first.
fn add_pairs(sums: &mut Vec<u64>, lines: &[u32], pairs: &[(u32, u64)]) {
    if pairs.is_empty() {
        return;
    }
    if sums.is_empty() {
        sums.resize(lines.len(), ABSENT);
    }
    let mut from = 0;
    for &(line, h) in pairs {
        // Ascending: search only past the previous pair's line.
        let Ok(i) = lines[from..].binary_search(&line) else {
            debug_assert!(false, "a manager's line {line} is not a `*` line");
            continue;
        };
        let i = from + i;
        let s = &mut sums[i];
        *s = if *s == ABSENT {
            h
        } else {
            s.saturating_add(h).min(ABSENT - 1)
        };
        from = i + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::super::sums::ManagerSums;
    use super::*;

    /// Per file: the records of [`GroupSums`] equal sums computed line by line over the
    /// matching managers, whether the groups are held or summed afterwards.
    #[test]
    fn group_records_are_the_sums_of_their_managers() {
        let names = ["ci-gcc-a", "ci-gcc-b", "ci-clang-a", "other"];
        let mut strings = StringTable::new();
        let managers: Vec<u32> = names.iter().map(|n| strings.intern(n.as_bytes())).collect();
        let groups = vec![
            Group::parse("gcc=ci-gcc-*").unwrap(),
            Group::parse("ci=ci-*").unwrap(),
            Group::parse("none=nothing-*").unwrap(),
            Group::parse("a=*-?").unwrap(),
        ];
        let plan = GroupPlan::new(&groups, &managers, &strings).unwrap();
        // Slots 0..8 are lines 80, 70, ..., 10 (reverse order).
        let slot_lines: Vec<u32> = (0..8).map(|s| 80 - 10 * s).collect();
        let order: Vec<u32> = (0..8).rev().collect();
        let lines: Vec<u32> = order.iter().map(|&s| slot_lines[s as usize]).collect();
        let hits: [(u32, u32, u64); 9] = [
            (0, 0, 5),
            (0, 3, 0),
            (1, 3, 2),
            (1, 7, 1),
            (2, 0, 7),
            (2, 5, 0),
            (3, 1, 9),
            (3, 6, 4),
            (0, 0, 1),
        ];
        let mut sums = ManagerSums::default();
        for &(m, s, h) in &hits {
            sums.add(m, s, h);
        }
        let mut per_mgr = sums.finish().unwrap();
        let by_name: Vec<u32> = per_mgr.managers().to_vec();
        // What each group must hold: line -> sum over its managers' rows.
        let want = |g: &Group| -> Vec<(u32, u64)> {
            let mut m = std::collections::BTreeMap::new();
            for &(mgr, s, h) in &hits {
                if g.matches(names[mgr as usize].as_bytes()) {
                    *m.entry(slot_lines[s as usize]).or_insert(0) += h;
                }
            }
            m.into_iter().collect()
        };
        for cells in [GROUP_CELLS, 8, 1] {
            let mut g = GroupSums::with_cells(&plan, &lines, cells);
            let mut pairs = Vec::new();
            for &m in &by_name {
                per_mgr.pairs(m, &order, &slot_lines, &mut pairs).unwrap();
                g.add(m, &pairs);
            }
            let mut out = Vec::new();
            let n = g
                .write(
                    &mut per_mgr,
                    &by_name,
                    &order,
                    &slot_lines,
                    b"f.c",
                    &mut out,
                )
                .unwrap();
            let text = String::from_utf8(out).unwrap();
            let mut expected = Vec::new();
            for group in &groups {
                let w = want(group);
                if w.is_empty() {
                    continue;
                }
                let (l, h): (Vec<u32>, Vec<u64>) = w.into_iter().unzip();
                output::write_mcr(&mut expected, group.name.as_bytes(), b"f.c", &l, &h).unwrap();
            }
            assert_eq!(text, String::from_utf8(expected).unwrap(), "cells {cells}");
            assert_eq!(n, 3, "`none` matches no manager and has no record");
        }
        assert_eq!(plan.groups_of(0), &[0, 1, 3]);
        assert_eq!(plan.groups_of(2), &[1, 3]);
        assert!(plan.groups_of(3).is_empty());
    }

    #[test]
    fn a_group_named_like_a_manager_is_refused() {
        let mut strings = StringTable::new();
        let managers = vec![strings.intern(b"ci-a"), strings.intern(b"gcc")];
        let groups = vec![Group::parse("gcc=ci-*").unwrap()];
        let err = GroupPlan::new(&groups, &managers, &strings)
            .err()
            .expect("refused");
        assert!(err.to_string().contains("gcc"), "{err}");
        assert!(GroupPlan::new(&[], &managers, &strings).unwrap().is_empty());
    }
}
