//! Groups and unique coverage in the report.
//!
//! A result of `merge --group NAME=GLOB` holds, per file, records whose `Manager` is a
//! group: sums over managers, not a manager. Nothing in a record says so (the records
//! are syzkaller's, contract §4), so the report learns the group names from the job's
//! manifest (`report --manifest FILE`, contract §7 lists them as `groups`), checked to
//! be of the result's base commit. Without it every record is a manager's.
//!
//! A line is *unique* to a manager when that manager covered it (hits > 0) and no
//! other manager did (syzbot's `unique-only`). Groups never count: a group covering a
//! line with its one member does not take the line from the member.

use anyhow::{bail, Context, Result};
use covmerge_proto::group::Group;
use covmerge_proto::Manifest;

use crate::read::{FileCov, Header};

/// The groups of the result, from its manifest.
#[derive(Debug, Clone, Default)]
pub struct Groups {
    /// In the order the job gave them.
    pub groups: Vec<Group>,
}

impl Groups {
    /// Reads the manifest at `spec` (a local path or a store URL) of the result whose
    /// header is `header`: a manifest of another base commit is refused.
    pub fn from_manifest(
        spec: &str,
        header: &Header,
        rt: &tokio::runtime::Handle,
    ) -> Result<Groups> {
        use covmerge_input::{open_input, Inflate};
        use std::io::Read;
        let mut raw = open_input(spec, rt, Inflate::Pipelined)
            .map_err(|e| anyhow::anyhow!("--manifest {spec}: {e}"))?;
        let mut text = Vec::new();
        // A manifest lists shards and inputs: large for a big job, never 64 MiB.
        (&mut raw)
            .take(64 << 20)
            .read_to_end(&mut text)
            .with_context(|| format!("--manifest {spec}: reading"))?;
        let m: Manifest = serde_json::from_slice(&text)
            .with_context(|| format!("--manifest {spec}: not a covmerge manifest"))?;
        if m.base_commit != header.commit {
            bail!(
                "--manifest {spec}: a job on base commit {}, the result is on {}",
                m.base_commit,
                header.commit
            );
        }
        covmerge_proto::group::check_groups(&m.groups)
            .map_err(|why| anyhow::anyhow!("--manifest {spec}: {why}"))?;
        Ok(Groups { groups: m.groups })
    }

    /// Whether records of manager `name` are a group's.
    pub fn is_group(&self, name: &str) -> bool {
        self.groups.iter().any(|g| g.name == name)
    }

    /// Where group `name` is among the groups.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.groups.iter().position(|g| g.name == name)
    }
}

/// The lines of `f` covered by exactly one manager (groups aside), ascending, each
/// with that manager's index in [`FileCov::managers`].
pub fn unique_lines(f: &FileCov, groups: &Groups) -> Vec<(u32, u32)> {
    const NONE: u32 = u32::MAX;
    const MANY: u32 = u32::MAX - 1;
    // Per line of the `*` record: the one manager that covered it, or none, or many.
    // Every manager's line is a `*` line; one that is not (a hand-made result) is
    // looked up in vain and skipped.
    let mut owner = vec![NONE; f.star.lines.len()];
    for (k, (name, l)) in f.managers.iter().enumerate() {
        if groups.is_group(name) {
            continue;
        }
        let mut from = 0;
        for (&line, &h) in l.lines.iter().zip(&l.hits) {
            if h == 0 {
                continue;
            }
            let Ok(i) = f.star.lines[from..].binary_search(&line) else {
                continue;
            };
            let i = from + i;
            owner[i] = if owner[i] == NONE { k as u32 } else { MANY };
            from = i + 1;
        }
    }
    f.star
        .lines
        .iter()
        .zip(&owner)
        .filter(|(_, &o)| o < MANY)
        .map(|(&line, &o)| (line, o))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::LineHits;

    fn lh(lines: &[u32], hits: &[u64]) -> LineHits {
        LineHits {
            lines: lines.to_vec(),
            hits: hits.to_vec(),
        }
    }

    #[test]
    fn a_line_is_unique_to_the_one_manager_that_covered_it_groups_aside() {
        let f = FileCov {
            path: "f.c".into(),
            star: lh(&[1, 2, 3, 4, 5], &[3, 2, 0, 7, 1]),
            managers: vec![
                ("a".into(), lh(&[1, 2, 4], &[3, 1, 0])),
                ("b".into(), lh(&[2, 3, 4], &[1, 0, 7])),
                ("c".into(), lh(&[5], &[1])),
                ("grp".into(), lh(&[1, 2, 3, 4, 5], &[3, 2, 0, 7, 1])),
            ],
            ..FileCov::default()
        };
        let groups = Groups {
            groups: vec![Group::parse("grp=*").unwrap()],
        };
        // Line 2 is covered by a and b; line 3 by nobody; line 4 by b only (a has 0).
        assert_eq!(unique_lines(&f, &groups), vec![(1, 0), (4, 1), (5, 2)]);
        // Taken for a manager, the group covers every covered line too: nothing is
        // unique.
        assert_eq!(unique_lines(&f, &Groups::default()), vec![]);
    }
}
