//! One shard of a roll-up, alone (`coordinator --rollup` of partials, contract §10):
//! shard `j` of `n` of the roll-up of some partials, from only their files that can
//! hold its rows ([`shards_for`]: `m / gcd(m, n)` of an input of `m` shards, one when
//! `m = n`), within a memory budget as [`crate::rollup_within`]. Its four files are
//! those the roll-up of the whole partials writes for shard `j`, byte for byte: the
//! same rows, summed by the same writer (the grouping changes nothing, §10).

use std::path::{Path, PathBuf};

use crate::build::ShardPartial;
use crate::desc::{Description, PartialCounts, ShardFiles, FORMAT, FORMAT_VERSION};
use crate::fan_in::{file_bytes, groups, input_cost, total, FanIn, OPEN_FILE_BYTES};
use crate::rollup::{clear_out, merge_table_into, prepare_out, WriteTo};
use crate::table::{FuncRow, LineRow, PathRow, VersionRow};
use crate::{Partial, PartialError};

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The shards of a partial of `m` shards that can hold rows of shard `j` of `n`: a
/// path of input shard `i` and output shard `j` has `i ≡ j (mod gcd(m, n))`.
pub fn shards_for(m: u32, n: u32, j: u32) -> Vec<u32> {
    let g = gcd(m, n);
    (0..m).filter(|i| i % g == j % g).collect()
}

/// Rolls shard `j` of `n` of the roll-up of `inputs` (partials of one namespace, only
/// their files of [`shards_for`] shard `j` need be there) into `out` (a directory that
/// does not exist yet, or is empty): its four files, no description, and what its
/// rows count (`rows_in` without bad rows: they name no path). Holds at most `budget`
/// bytes of open row groups and parsed footers: past that, the inputs' rows of shard
/// `j` are rolled up in groups into partials of one shard under `scratch` first
/// (removed when done). An input that alone opens more than the budget holds (files,
/// or footers) is refused, naming it.
///
/// The inputs' `rows_in` are not checked here (only a part of each is read): the
/// caller adds up the shards' counts.
pub fn rollup_shard_within(
    inputs: &[Partial],
    out: &Path,
    n: u32,
    j: u32,
    budget: usize,
    scratch: &Path,
) -> Result<(ShardPartial, FanIn), PartialError> {
    if !(1..=covmerge_proto::limits::MAX_SHARDS).contains(&n) || j >= n {
        return Err(PartialError::Invalid(format!(
            "shard {j} of {n}: a partial has 1 to {} shards",
            covmerge_proto::limits::MAX_SHARDS
        )));
    }
    let Some(first) = inputs.first() else {
        return Err(PartialError::Invalid(
            "a roll-up needs at least one partial".into(),
        ));
    };
    let ns = &first.description().namespace;
    if let Some(p) = inputs.iter().find(|p| &p.description().namespace != ns) {
        return Err(PartialError::Namespaces {
            a: ns.clone(),
            a_path: first.dir().to_owned(),
            b: p.description().namespace.clone(),
            b_path: p.dir().to_owned(),
        });
    }
    let max_open = (budget / OPEN_FILE_BYTES).max(2);
    let capacity = max_open * OPEN_FILE_BYTES;
    let mut fan = FanIn {
        max_open,
        intermediate: 0,
    };
    let costs = inputs
        .iter()
        .map(|p| {
            let m = p.description().shard_count;
            let files = shards_for(m, n, j);
            input_cost(p, (m, n), (files.len(), &files), (max_open, budget))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut work = None;
    let mut level: Vec<Partial> = inputs.to_vec();
    if total(&costs) > capacity {
        let dir = tempfile::Builder::new()
            .prefix("covmerge-rollup-shard-")
            .tempdir_in(scratch)
            .map_err(|e| PartialError::io(scratch, e))?;
        let mut next = Vec::new();
        for g in groups(&costs, capacity, 1) {
            next.push(roll_group(&inputs[g], dir.path(), (n, j), &mut fan)?);
        }
        // Each intermediate partial has one shard: one file open each from here on.
        loop {
            let costs = next
                .iter()
                .map(|p| file_bytes(p, &[0]))
                .collect::<Result<Vec<_>, _>>()?;
            if next.len() < 2 || total(&costs) <= capacity {
                break;
            }
            let mut up = Vec::new();
            for g in groups(&costs, capacity, 2) {
                up.push(roll_group(&next[g.clone()], dir.path(), (n, j), &mut fan)?);
                for done in &next[g] {
                    let _ = std::fs::remove_dir_all(done.dir());
                }
            }
            next = up;
        }
        level = next;
        work = Some(dir);
    }
    prepare_out(out)?;
    let r = roll_shard(&level, out, (n, j), j).inspect_err(|_| clear_out(out));
    drop(work);
    let (files, counts) = r?;
    Ok((ShardPartial { files, counts }, fan))
}

/// Rolls `group`'s rows of shard `j` of `n` into a new partial of one shard under
/// `work` (its rows all of shard `j`: read back as one file each).
fn roll_group(
    group: &[Partial],
    work: &Path,
    (n, j): (u32, u32),
    fan: &mut FanIn,
) -> Result<Partial, PartialError> {
    let dir: PathBuf = work.join(format!("r{}", fan.intermediate));
    fan.intermediate += 1;
    prepare_out(&dir)?;
    let (files, counts) = roll_shard(group, &dir, (n, j), 0)?;
    let first = group[0].description();
    let d = Description {
        format: FORMAT.to_owned(),
        format_version: FORMAT_VERSION,
        namespace: first.namespace.clone(),
        // Not looked at: only the shard files of an intermediate partial are read.
        date_from: first.date_from.clone(),
        date_to: first.date_to.clone(),
        counts,
        other_namespaces: Default::default(),
        shard_count: 1,
        shards: vec![files],
    };
    d.write(&dir)?;
    Partial::open(&dir)
}

/// Writes the rows of shard `j` of `n` of `parts` as the four files of shard `index`
/// in `out`; returns them and what the rows count.
fn roll_shard(
    parts: &[Partial],
    out: &Path,
    (n, j): (u32, u32),
    index: u32,
) -> Result<(ShardFiles, PartialCounts), PartialError> {
    let mut rows_of = vec![0u64; parts.len()];
    let mut c = PartialCounts::default();
    fn none<T>(out: &Path, index: u32) -> WriteTo<'_, T> {
        WriteTo {
            out,
            index,
            seen: None,
        }
    }
    let lines =
        merge_table_into::<LineRow>(parts, |s| &s.lines, j, n, none(out, index), &mut rows_of)?;
    let funcs =
        merge_table_into::<FuncRow>(parts, |s| &s.funcs, j, n, none(out, index), &mut rows_of)?;
    let versions = merge_table_into::<VersionRow>(
        parts,
        |s| &s.versions,
        j,
        n,
        none(out, index),
        &mut rows_of,
    )?;
    let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
    let mut seen = |r: &PathRow| {
        add(&mut c.rows_without_line, r.rows_without_line);
        add(&mut c.rows_without_version, r.rows_without_version);
        add(&mut c.hits_without_version, r.hits_without_version);
    };
    let to = WriteTo {
        out,
        index,
        seen: Some(&mut seen),
    };
    let paths = merge_table_into::<PathRow>(parts, |s| &s.paths, j, n, to, &mut rows_of)?;
    c.rows_in = rows_of.iter().fold(0u64, |a, &b| a.saturating_add(b));
    let files = ShardFiles {
        index,
        lines,
        funcs,
        versions,
        paths,
    };
    Ok((files, c))
}
