//! Groups and unique coverage in the report.
//!
//! A result of `merge --group NAME=GLOB` holds, per file, records whose `Manager` is a
//! group: sums over managers, not a manager. Nothing in a record says so (the records
//! are syzkaller's, contract §4), so the report learns the group names from the job's
//! manifest (`report --manifest FILE`, contract §7 lists them as `groups`), checked to
//! belong to the result ([`check_belongs`]: the result is the header's gzip member
//! followed by the manifest's shards, byte for byte). Without it every record is a
//! manager's.
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
    /// Reads the manifest at `spec` (a local path or a store URL) of the result
    /// `result` whose header is `header`: a manifest of another base commit, or of
    /// another job ([`check_belongs`]), is refused.
    pub fn from_manifest(
        spec: &str,
        result: &str,
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
        check_belongs(spec, &m, result, rt)?;
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

/// `s`, cut to 300 characters for a message.
fn cut(s: &str) -> String {
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}... ({} bytes)", &s[..i], s.len()),
        None => s.to_string(),
    }
}

/// Fails unless the manifest `m` (read from `spec`) is the one of the result
/// `result`. Nothing in the result names its job (the records and the header are
/// syzkaller's, contract §4), but the result is exactly the header's gzip member
/// followed by the parts in shard order, and the manifest gives each part's size and
/// SHA-256: so the bytes after the result's first gzip member must be the manifest's
/// shards, one after the other, and nothing else. A manifest of another job on the same
/// base would otherwise relabel real managers as groups and change the unique lines.
/// Parts can be byte-identical across jobs, so the header line must be the one the
/// manifest keeps (`header`, when it has one). Reads the result once more, as stored.
pub fn check_belongs(
    spec: &str,
    m: &Manifest,
    result: &str,
    rt: &tokio::runtime::Handle,
) -> Result<()> {
    use sha2::{Digest, Sha256};
    use std::io::{BufRead, BufReader, Read};
    let not_ours = |why: String| {
        anyhow::anyhow!(
            "--manifest {spec} (job {}) does not belong to the result {result}: {why}",
            m.job
        )
    };
    if m.status != covmerge_proto::manifest::JobStatus::Complete {
        return Err(not_ours(format!(
            "it says the job {}, with no result",
            m.status
        )));
    }
    let raw = covmerge_input::open_raw(result, rt).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut r = BufReader::with_capacity(1 << 20, raw);
    // The header member: decoded (to find where it ends), at most one line.
    let mut head = flate2::bufread::GzDecoder::new(&mut r);
    let mut line = Vec::new();
    let n = (&mut head)
        .take(1 << 20)
        .read_to_end(&mut line)
        .with_context(|| format!("{result}: reading its header member"))?;
    if n >= 1 << 20 {
        return Err(not_ours(
            "its first gzip member is not a header line".to_string(),
        ));
    }
    drop(head);
    // Parts can be byte-identical across jobs (the same rows, other --duration,
    // --group, ...): the header line tells them apart. A manifest written before it
    // was kept has none.
    if let Some(want) = &m.header {
        let got = String::from_utf8_lossy(&line);
        let got = got.trim_end_matches('\n');
        if got != want {
            return Err(not_ours(format!(
                "its header line is {}, the manifest's is {}",
                cut(got),
                cut(want)
            )));
        }
    }
    let mut at: u64 = 0;
    for (i, s) in m.shards.iter().enumerate() {
        if s.index as usize != i {
            return Err(not_ours(format!("its shard #{i} is numbered {}", s.index)));
        }
        let mut h = Sha256::new();
        let got = std::io::copy(&mut (&mut r).take(s.bytes), &mut HashWriter(&mut h))
            .with_context(|| format!("{result}: reading shard {i}'s part"))?;
        if got < s.bytes {
            return Err(not_ours(format!(
                "the result ends {got} bytes into shard {i}'s part, which the manifest says has {} bytes",
                s.bytes
            )));
        }
        let sum = hex(&h.finalize());
        if !sum.eq_ignore_ascii_case(&s.sha256) {
            return Err(not_ours(format!(
                "the {} bytes {at}..{} after its header member, shard {i}'s part, have SHA-256 {sum}, the manifest says {}",
                s.bytes,
                at + s.bytes,
                s.sha256
            )));
        }
        at += s.bytes;
    }
    if !r.fill_buf()?.is_empty() {
        return Err(not_ours(format!(
            "the result goes on after the manifest's {} shard(s) ({at} bytes after its header member)",
            m.shards.len()
        )));
    }
    Ok(())
}

struct HashWriter<'a>(&'a mut sha2::Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        sha2::Digest::update(self.0, b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
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
