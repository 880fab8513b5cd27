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
/// about 4 MiB of strings, with its columns' buffers, and a parsed footer of up to
/// [`FOOTER_IN_FILE_BYTES`]; a longer footer comes on top ([`FOOTER_FACTOR`]).
pub const OPEN_FILE_BYTES: usize = 6 << 20;

/// The footer [`OPEN_FILE_BYTES`] counts in: ~80 row groups' (the footers covmerge
/// writes for up to ~650,000 rows a file), 1 MiB parsed at most.
pub(crate) const FOOTER_IN_FILE_BYTES: usize = 64 << 10;

/// Bytes a parsed Parquet footer holds in memory per byte of it, at most: its bytes
/// read, then each column chunk's and schema field's metadata decoded. Measured by the
/// test `footer_memory` on 20,000 one-row groups of a `lines` table: 4.6 times at the
/// peak with statistics, 9.3 times without any (nor dictionary nor compression: the
/// fewest bytes a column chunk); 12.7 times on a schema of 20,000 columns. A partial
/// written by covmerge has row groups of 8,192 rows, so its footer is small; a file of
/// another writer's many tiny row groups, or a forged one, is not.
pub const FOOTER_FACTOR: usize = 16;

/// The files of one input open at once when its `m` shards are rolled into `n`.
fn open_files(m: u32, n: u32) -> usize {
    (m / gcd(m, n)) as usize
}

/// What one open file of `p` may hold: a row group ([`OPEN_FILE_BYTES`]) and the
/// parsed footer of the longest of its files of `shards`.
pub(crate) fn file_bytes(p: &Partial, shards: &[u32]) -> Result<usize, PartialError> {
    let footer = usize::try_from(p.largest_footer(shards)?).unwrap_or(usize::MAX);
    let over = footer.saturating_sub(FOOTER_IN_FILE_BYTES);
    Ok(OPEN_FILE_BYTES.saturating_add(over.saturating_mul(FOOTER_FACTOR)))
}

/// Cuts items of `costs` (in order) into consecutive groups whose costs add up to
/// `capacity` at most, each of `min` items at least (a group of `min` items may go
/// over: two are needed for a level of roll-ups to shrink).
pub(crate) fn groups(costs: &[usize], capacity: usize, min: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut held) = (0, 0usize);
    for (i, &c) in costs.iter().enumerate() {
        if i - start >= min && held.saturating_add(c) > capacity {
            out.push(start..i);
            (start, held) = (i, 0);
        }
        held = held.saturating_add(c);
    }
    if start < costs.len() {
        out.push(start..costs.len());
    }
    out
}

/// The bytes input `p` (of `m` shards, rolled into `n`) holds with `open` of its files
/// open at once, their footers the longest of its files of `shards`; refused, naming
/// it, past what `budget` holds (`max_open` files of [`OPEN_FILE_BYTES`]).
pub(crate) fn input_cost(
    p: &Partial,
    (m, n): (u32, u32),
    (open, shards): (usize, &[u32]),
    (max_open, budget): (usize, usize),
) -> Result<usize, PartialError> {
    if open > max_open {
        // A shard of the roll-up opens m / gcd(m, n) of the input's files: any multiple
        // of a divisor d of m with m / d within the budget does.
        let fits = (1..=m).find(|&d| m % d == 0 && (m / d) as usize <= max_open);
        let give = match fits {
            Some(d) if d == m => format!("give --shards {m} or a multiple of it, or "),
            Some(d) => format!("give --shards a multiple of {d} (such as {d} or {m}), or "),
            None => "give ".to_owned(),
        };
        return Err(PartialError::Invalid(format!(
            "{}: its {m} shards rolled into {n} open {open} files at once, past the {max_open} the memory budget holds ({budget} bytes, {OPEN_FILE_BYTES} a file): {give}a larger --memory-budget",
            p.dir().display()
        )));
    }
    let each = file_bytes(p, shards)?;
    let cost = open.saturating_mul(each);
    if cost > max_open * OPEN_FILE_BYTES {
        return Err(PartialError::Invalid(format!(
            "{}: its {open} file(s) open at once would hold {each} bytes each with their parsed Parquet footer ({OPEN_FILE_BYTES} bytes for a row group, {FOOTER_FACTOR} a footer byte past {FOOTER_IN_FILE_BYTES}), past the memory budget of {budget} bytes: give a larger --memory-budget, or write the partial with fewer, larger row groups",
            p.dir().display(),
        )));
    }
    Ok(cost)
}

/// The sum of `costs` (saturating).
pub(crate) fn total(costs: &[usize]) -> usize {
    costs.iter().fold(0, |a, &c| a.saturating_add(c))
}

/// How the inputs are rolled up within `budget`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FanIn {
    /// Input files open at once at most (two at least), without footers: files with
    /// large footers count for more.
    pub max_open: usize,
    /// Roll-ups done before the last (0: the inputs were rolled up at once).
    pub intermediate: usize,
}

/// Rolls up `inputs` into `out` as [`rollup`] does, holding at most `budget` bytes of
/// open row groups and parsed footers (and one row group being written): inputs past
/// that are rolled up in groups into partials under `scratch` first (removed when
/// done). An input that alone opens more than the budget holds (its shard count
/// against `shards`, or its footers) is refused, naming it.
pub fn rollup_within(
    inputs: &[PathBuf],
    out: &Path,
    shards: Option<u32>,
    budget: usize,
    scratch: &Path,
) -> Result<(Description, FanIn), PartialError> {
    let max_open = (budget / OPEN_FILE_BYTES).max(2);
    let capacity = max_open * OPEN_FILE_BYTES;
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
    let costs = parts
        .iter()
        .zip(&counts)
        .map(|(p, &m)| {
            let files = (open_files(m, n), &(0..m).collect::<Vec<_>>()[..]);
            input_cost(p, (m, n), files, (max_open, budget))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if total(&costs) <= capacity {
        // One level: the descriptions read above serve the roll-up too.
        return Ok((rollup_opened(&parts, out, n)?, fan));
    }
    let work = tempfile::Builder::new()
        .prefix("covmerge-rollup-level-")
        .tempdir_in(scratch)
        .map_err(|e| PartialError::io(scratch, e))?;
    let mut level: Vec<PathBuf> = Vec::new();
    for g in groups(&costs, capacity, 1) {
        level.push(roll_group(&inputs[g], work.path(), n, &mut fan)?);
    }
    // Each intermediate partial has `n` shards: one file open each from here on.
    let all: Vec<u32> = (0..n).collect();
    loop {
        let costs = level
            .iter()
            .map(|d| file_bytes(&Partial::open(d)?, &all))
            .collect::<Result<Vec<_>, _>>()?;
        if level.len() < 2 || total(&costs) <= capacity {
            break;
        }
        let mut next = Vec::new();
        for g in groups(&costs, capacity, 2) {
            next.push(roll_group(&level[g.clone()], work.path(), n, &mut fan)?);
            for done in &level[g] {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parquet::file::writer::SerializedFileWriter;
    use sha2::{Digest, Sha256};

    use super::*;
    use crate::build::{Builder, RawRow};
    use crate::table::{schema, LineRow, Table};
    use covmerge_proto::date::Date;

    /// A partial of one shard in `dir` whose `lines` file holds `rows` rows (of one
    /// path) in one-row groups: another writer's shape, its footer ~790 bytes a row.
    fn tiny_groups(dir: &Path, rows: u32) {
        let day: Date = "2026-11-01".parse().unwrap();
        let mut b = Builder::new("", day, day, 1, usize::MAX, dir.parent().unwrap()).unwrap();
        let version = "ab".repeat(20);
        for line in 1..=rows {
            b.add(&RawRow {
                path: "kernel/sched/core.c",
                commit: "c1",
                version: Some(&version),
                manager: "ci-qemu",
                func_name: "",
                line,
                hits: 1,
                rows: 1,
            })
            .unwrap();
        }
        let mut d = b.finish(dir).unwrap();
        let path = dir.join(&d.shards[0].lines.name);
        let rows: Vec<LineRow> = Partial::open(dir)
            .unwrap()
            .lines(0)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let f = std::fs::File::create(&path).unwrap();
        let props = parquet::file::properties::WriterProperties::builder().build();
        let mut w =
            SerializedFileWriter::new(f, Arc::new(schema::<LineRow>()), Arc::new(props)).unwrap();
        for r in &rows {
            let mut rg = w.next_row_group().unwrap();
            LineRow::write_group(std::slice::from_ref(r), &mut rg).unwrap();
            rg.close().unwrap();
        }
        w.close().unwrap();
        let data = std::fs::read(&path).unwrap();
        d.shards[0].lines.bytes = data.len() as u64;
        d.shards[0].lines.sha256 = hex::encode(Sha256::digest(&data));
        std::fs::write(dir.join("partial.json"), d.to_json()).unwrap();
    }

    /// The refusal of rolling `input` alone into one shard, within `files` files of
    /// budget, into `out` under the input's parent.
    fn refusal(input: &Path, out: &str, files: usize) -> String {
        let parent = input.parent().unwrap();
        let budget = files * OPEN_FILE_BYTES;
        rollup_within(
            &[input.to_owned()],
            &parent.join(out),
            Some(1),
            budget,
            parent,
        )
        .unwrap_err()
        .to_string()
    }

    /// Three inputs of one file open each fit a budget of four files by count, but
    /// their parsed footers (~1.6 MB on disk each, ~8 MB parsed) do not: they were
    /// opened at once, past the budget; now they are rolled up in groups, to the same
    /// files. One whose footer alone is past the budget is refused, naming it.
    #[test]
    fn inputs_whose_footers_outgrow_the_budget_were_opened_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let inputs: Vec<PathBuf> = (0..3)
            .map(|i| {
                let p = tmp.path().join(format!("day-{i}"));
                tiny_groups(&p, 2_000);
                p
            })
            .collect();
        let footer = Partial::open(&inputs[0])
            .unwrap()
            .largest_footer(&[0])
            .unwrap();
        assert!(footer > 1_000_000, "{footer}");
        let once = tmp.path().join("once");
        let want = crate::rollup(&inputs, &once, Some(1)).unwrap();
        let out = tmp.path().join("within");
        let (got, fan) =
            rollup_within(&inputs, &out, Some(1), 4 * OPEN_FILE_BYTES, tmp.path()).unwrap();
        assert_eq!(fan.max_open, 4);
        assert!(fan.intermediate > 0, "{fan:?}");
        assert_eq!(got, want);
        for f in [&want.shards[0].lines, &want.shards[0].paths] {
            assert_eq!(
                std::fs::read(out.join(&f.name)).unwrap(),
                std::fs::read(once.join(&f.name)).unwrap()
            );
        }
        let big = tmp.path().join("big");
        tiny_groups(&big, 4_000);
        let err = refusal(&big, "refused", 2);
        assert!(err.contains("big") && err.contains("footer"), "{err}");
        assert!(!tmp.path().join("refused").join("partial.json").exists());
        // Shard by shard, the same refusal.
        let p = Partial::open(&big).unwrap();
        let err = crate::rollup_shard_within(
            &[p],
            &tmp.path().join("refused-shard"),
            1,
            0,
            2 * OPEN_FILE_BYTES,
            tmp.path(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("big") && err.contains("footer"), "{err}");
    }

    /// A table file that is a FIFO hung a roll-up (its open waited for a writer, and
    /// Ctrl-C did not end it); a footer length claiming 4 GiB in a small file was
    /// refused as a memory budget too small. Both are corrupt files, named.
    #[test]
    fn a_fifo_or_a_footer_longer_than_its_file_was_not_refused_as_corrupt() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("fifo");
        tiny_groups(&p, 10);
        let lines = p.join(crate::file::file_name::<LineRow>(0));
        std::fs::remove_file(&lines).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&lines)
            .status()
            .unwrap();
        assert!(made.success());
        let err = refusal(&p, "out", 4);
        assert!(
            err.contains("lines-00000.parquet") && err.contains("not a regular file"),
            "{err}"
        );
        let q = tmp.path().join("claims");
        tiny_groups(&q, 10);
        let lines = q.join(crate::file::file_name::<LineRow>(0));
        let mut data = std::fs::read(&lines).unwrap();
        let n = data.len();
        data[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(&lines, &data).unwrap();
        let err = refusal(&q, "out2", 4);
        assert!(
            err.contains("lines-00000.parquet") && err.contains("past the file's"),
            "{err}"
        );
        assert!(!err.contains("--memory-budget"), "{err}");
    }

    #[test]
    fn groups_keep_within_the_capacity_and_take_the_fewest_items_asked() {
        assert_eq!(groups(&[3, 3, 3, 3], 6, 1), vec![0..2, 2..4]);
        assert_eq!(groups(&[7, 1, 1], 6, 1), vec![0..1, 1..3]);
        assert_eq!(groups(&[7, 7, 7], 6, 2), vec![0..2, 2..3]);
        assert_eq!(groups(&[], 6, 2), Vec::<std::ops::Range<usize>>::new());
        assert_eq!(groups(&[usize::MAX, 1], 6, 1), vec![0..1, 1..2]);
    }
}
