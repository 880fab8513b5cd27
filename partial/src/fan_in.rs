//! A roll-up within a memory budget: [`rollup`] holds one decoded row group per input
//! file open at once, so its memory grows with the number of inputs (a year of day
//! partials is 365 of them). [`rollup_within`] bounds that: past the files the budget
//! holds, the inputs are rolled up in groups into partials in a scratch directory, and
//! those are rolled up again, level by level. Roll-ups are exact and their files the
//! same byte for byte whatever the grouping (contract §10), so the result is that of
//! one roll-up of all the inputs.

use std::path::{Path, PathBuf};

use crate::desc::Description;
use crate::rollup::{rollup, rollup_opened};
use crate::{Partial, PartialError};

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// What one open input file may hold decoded: a row group of at most 8,192 rows and
/// about 4 MiB of strings, with its columns' buffers.
pub const OPEN_FILE_BYTES: usize = 6 << 20;

/// The files of one input open at once when its `m` shards are rolled into `n`.
fn open_files(m: u32, n: u32) -> usize {
    (m / gcd(m, n)) as usize
}

/// How the inputs are rolled up within `budget`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FanIn {
    /// Input files open at once at most (two at least).
    pub max_open: usize,
    /// Roll-ups done before the last (0: the inputs were rolled up at once).
    pub intermediate: usize,
}

/// Rolls up `inputs` into `out` as [`rollup`] does, holding at most `budget` bytes of
/// open row groups (and one being written): inputs past that are rolled up in groups
/// into partials under `scratch` first (removed when done). An input that alone opens
/// more files than the budget holds (its shard count against `shards`) is refused,
/// naming it.
pub fn rollup_within(
    inputs: &[PathBuf],
    out: &Path,
    shards: Option<u32>,
    budget: usize,
    scratch: &Path,
) -> Result<(Description, FanIn), PartialError> {
    let max_open = (budget / OPEN_FILE_BYTES).max(2);
    let mut fan = FanIn {
        max_open,
        intermediate: 0,
    };
    let parts: Vec<Partial> = inputs
        .iter()
        .map(|p| Partial::open(p))
        .collect::<Result<_, _>>()?;
    // Checked here, naming the inputs, not intermediate partials.
    if let Some(first) = parts.first() {
        let ns = &first.description().namespace;
        if let Some(p) = parts.iter().find(|p| &p.description().namespace != ns) {
            return Err(PartialError::Namespaces {
                a: ns.clone(),
                a_path: first.dir().to_owned(),
                b: p.description().namespace.clone(),
                b_path: p.dir().to_owned(),
            });
        }
    }
    let counts: Vec<u32> = parts.iter().map(|p| p.description().shard_count).collect();
    let n = shards.unwrap_or_else(|| counts.iter().copied().max().unwrap_or(1));
    for (p, &m) in inputs.iter().zip(&counts) {
        let open = open_files(m, n);
        if open > max_open {
            return Err(PartialError::Invalid(format!(
                "{}: its {m} shards rolled into {n} open {open} files at once, past the {max_open} the memory budget holds ({budget} bytes, {OPEN_FILE_BYTES} a file): give --shards dividing {m}, or a larger --memory-budget",
                p.display()
            )));
        }
    }
    if counts.iter().map(|&m| open_files(m, n)).sum::<usize>() <= max_open {
        // One level: the descriptions read above serve the roll-up too.
        return Ok((rollup_opened(&parts, out, n)?, fan));
    }
    let work = tempfile::Builder::new()
        .prefix("covmerge-rollup-level-")
        .tempdir_in(scratch)
        .map_err(|e| PartialError::io(scratch, e))?;
    let mut level: Vec<PathBuf> = Vec::new();
    let mut group: Vec<PathBuf> = Vec::new();
    let mut open = 0;
    for (p, &m) in inputs.iter().zip(&counts) {
        let cost = open_files(m, n);
        if open + cost > max_open {
            level.push(roll_group(&group, work.path(), n, &mut fan)?);
            group.clear();
            open = 0;
        }
        group.push(p.clone());
        open += cost;
    }
    level.push(roll_group(&group, work.path(), n, &mut fan)?);
    // Each intermediate partial has `n` shards: one file open each from here on.
    while level.len() > max_open {
        let mut next = Vec::with_capacity(level.len().div_ceil(max_open));
        for g in level.chunks(max_open) {
            next.push(roll_group(g, work.path(), n, &mut fan)?);
            for done in g {
                let _ = std::fs::remove_dir_all(done);
            }
        }
        level = next;
    }
    let d = rollup(&level, out, Some(n))?;
    Ok((d, fan))
}

/// Rolls `group` up into a new directory under `work`.
fn roll_group(
    group: &[PathBuf],
    work: &Path,
    n: u32,
    fan: &mut FanIn,
) -> Result<PathBuf, PartialError> {
    let dir = work.join(format!("r{}", fan.intermediate));
    fan.intermediate += 1;
    rollup(group, &dir, Some(n))?;
    Ok(dir)
}
