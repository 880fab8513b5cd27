//! Writing a pass's files as records into the part, in path order: per file `*`,
//! its managers by name, its groups, its functions by name (contract §3).

use std::io::Write;

use covmerge_proto::{output, Counts};

use super::acc::{FileAcc, FileState};
use super::groups::{GroupPlan, GroupSums};
use super::names::{add_names, line_names, BestNames};
use super::pass::Tables;
use super::MergeError;
use crate::spill::StringTable;

impl Tables {
    /// Writes the files of the pass in path order into `enc`; returns what was
    /// counted and the records written. `names`: for a pass over one path counted
    /// in name passes, the best names of the others. Each file's path and base line
    /// count go to `base_lines`, in the part's order.
    pub(super) fn write(
        self,
        groups: &[covmerge_proto::group::Group],
        mut names: Option<BestNames>,
        spilled: &mut u32,
        base_lines: &mut Vec<(String, u32)>,
        enc: &mut impl Write,
    ) -> Result<(Counts, u64), MergeError> {
        let Tables {
            strings,
            files,
            managers,
            mut counts,
        } = self;
        let plan = GroupPlan::new(groups, &managers, &strings)?;
        // Files in path order: the part's order is deterministic.
        let mut order: Vec<(u32, Box<FileAcc>)> = Vec::new();
        for (f, state) in files {
            match state {
                FileState::OutOfScope | FileState::Skipped => {}
                FileState::Deleted => counts.files_deleted += 1,
                FileState::Live(acc) => order.push((f, acc)),
            }
        }
        order.sort_by(|a, b| strings.get(a.0).cmp(strings.get(b.0)));
        let mut records = 0u64;
        for (file, acc) in order {
            counts.files += 1;
            base_lines.push((
                String::from_utf8_lossy(strings.get(file)).into_owned(),
                acc.base_lines,
            ));
            records += write_file(
                strings.get(file),
                *acc,
                &managers,
                &plan,
                &strings,
                names.take(),
                &mut counts,
                spilled,
                enc,
            )?;
        }
        Ok((counts, records))
    }
}

/// Writes one file's records: `*`, managers by name, groups as given, functions by
/// name (`names`: the best names of the file's other name passes).
#[allow(clippy::too_many_arguments)]
fn write_file(
    path: &[u8],
    acc: FileAcc,
    managers: &[u32],
    plan: &GroupPlan<'_>,
    strings: &StringTable,
    names: Option<BestNames>,
    counts: &mut Counts,
    spilled: &mut u32,
    out: &mut impl Write,
) -> Result<u64, MergeError> {
    let FileAcc {
        lines: slot_lines,
        star,
        name,
        other_names,
        per_mgr,
        ..
    } = acc;
    let mut records = 0;
    // Slots in line order.
    let mut order: Vec<u32> = (0..slot_lines.len() as u32).collect();
    order.sort_unstable_by_key(|&s| slot_lines[s as usize]);
    // `*` always, even when nothing projected.
    // Sums saturate at u64::MAX, so any sum past i64::MAX is still seen here; a
    // manager's sum never exceeds the `*` sum of its line.
    if let Some(&s) = order.iter().find(|&&s| star[s as usize] > i64::MAX as u64) {
        let sum = star[s as usize];
        return Err(MergeError::SumOverflow {
            file: String::from_utf8_lossy(path).into_owned(),
            line: slot_lines[s as usize],
            sum: if sum == u64::MAX {
                format!("at least {sum}")
            } else {
                sum.to_string()
            },
        });
    }
    let lines: Vec<u32> = order.iter().map(|&s| slot_lines[s as usize]).collect();
    let hits: Vec<u64> = order.iter().map(|&s| star[s as usize]).collect();
    counts.instrumented += lines.len() as u64;
    counts.covered += hits.iter().filter(|&&h| h > 0).count() as u64;
    output::write_mcr(out, b"*", path, &lines, &hits)?;
    records += 1;

    // Managers by name: those that hit a line of the file.
    let mut per_mgr = per_mgr.finish().map_err(MergeError::Scratch)?;
    *spilled += per_mgr.runs_spilled() as u32;
    let mut by_name: Vec<u32> = per_mgr.managers().to_vec();
    by_name.sort_unstable_by(|&a, &b| {
        strings
            .get(managers[a as usize])
            .cmp(strings.get(managers[b as usize]))
    });
    let (mut pairs, mut m_lines, mut m_hits) = (Vec::new(), Vec::new(), Vec::new());
    let mut group_sums = (!plan.is_empty()).then(|| GroupSums::new(plan, &lines));
    for &m in &by_name {
        per_mgr
            .pairs(m, &order, &slot_lines, &mut pairs)
            .map_err(MergeError::Scratch)?;
        if let Some(g) = &mut group_sums {
            g.add(m, &pairs);
        }
        m_lines.clear();
        m_hits.clear();
        m_lines.extend(pairs.iter().map(|p| p.0));
        m_hits.extend(pairs.iter().map(|p| p.1));
        output::write_mcr(
            out,
            strings.get(managers[m as usize]),
            path,
            &m_lines,
            &m_hits,
        )?;
        records += 1;
    }
    if let Some(g) = group_sums {
        records += g.write(&mut per_mgr, &by_name, &order, &slot_lines, path, out)?;
    }

    let best = line_names(&slot_lines, &name, &other_names, strings);
    drop(other_names);
    // Functions by name, and the lines of each in order.
    let all;
    let mut owned: Vec<(&[u8], u32)> = match names {
        None => best
            .into_iter()
            .map(|(line, (_, func))| (strings.get(func), line))
            .collect(),
        Some(mut names) => {
            add_names(&mut names, best, strings);
            all = names;
            all.lines
                .iter()
                .map(|(&line, (_, f))| (&f[..], line))
                .collect()
        }
    };
    owned.sort_unstable();
    let mut i = 0;
    while i < owned.len() {
        let func = owned[i].0;
        let end = i + owned[i..].iter().take_while(|(f, _)| *f == func).count();
        let lines: Vec<u32> = owned[i..end].iter().map(|(_, l)| *l).collect();
        output::write_fl(out, path, func, &lines)?;
        records += 1;
        i = end;
    }
    Ok(records)
}
