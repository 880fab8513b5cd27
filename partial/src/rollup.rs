//! The roll-up: any number of partials summed into one by a k-way merge of their sorted
//! shard files, one output shard and one table at a time.
//!
//! Memory: one decoded row group (at most 8,192 rows and about 4 MiB of strings) per
//! input file open at once, plus one being written. The files open at once are those
//! of one table for one output shard: one per input when the shard counts match (or
//! the input's count is a multiple of the output's: `m / n` per input), else
//! `m / gcd(m, n)` per input of `m` shards. Nothing grows with the number of rows.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};

use covmerge_proto::shard_hash::shard_of;

use crate::desc::{
    parse_date, Description, FileEntry, PartialCounts, ShardFiles, FORMAT, FORMAT_VERSION,
};
use crate::file::{TableReader, TableWriter};
use crate::table::{FuncRow, LineRow, PathRow, Table, VersionRow};
use crate::{check_rows_in, Partial, PartialError};

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// One input file's rows that belong to one output shard.
struct Stream<T: Table> {
    reader: TableReader<T>,
    input: usize,
    /// `Some(n)`: keep only rows whose path is in output shard `target` of `n`.
    filter: Option<u32>,
    target: u32,
    /// The last path tested against the filter and its verdict.
    last_path: Option<(String, bool)>,
}

impl<T: Table> Stream<T> {
    fn next(&mut self) -> Result<Option<T>, PartialError> {
        while let Some(row) = self.reader.next_row()? {
            let Some(n) = self.filter else {
                return Ok(Some(row));
            };
            let keep = match &self.last_path {
                Some((p, k)) if p == row.path() => *k,
                _ => {
                    let k = shard_of(row.path().as_bytes(), n).0 == self.target;
                    self.last_path = Some((row.path().to_owned(), k));
                    k
                }
            };
            if keep {
                return Ok(Some(row));
            }
        }
        Ok(None)
    }
}

struct Head<T: Table> {
    row: T,
    stream: usize,
}

impl<T: Table> PartialEq for Head<T> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o).is_eq()
    }
}
impl<T: Table> Eq for Head<T> {}
impl<T: Table> PartialOrd for Head<T> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<T: Table> Ord for Head<T> {
    fn cmp(&self, o: &Self) -> Ordering {
        self.row.cmp_key(&o.row).then(self.stream.cmp(&o.stream))
    }
}

/// Merges table `T` of output shard `target` (of `n`) from every input into `out`.
/// `rows_of[i]` adds the input rows input `i`'s kept rows stand for.
fn merge_table<T: Table>(
    inputs: &[Partial],
    entry: impl Fn(&ShardFiles) -> &FileEntry,
    target: u32,
    n: u32,
    out: &Path,
    rows_of: &mut [u64],
) -> Result<FileEntry, PartialError> {
    let to = WriteTo::<T> {
        out,
        index: target,
        seen: None,
    };
    merge_table_into(inputs, entry, target, n, to, rows_of)
}

/// A `paths` row's rows without line, rows without version and their hits.
fn path_sums(r: &PathRow) -> [u64; 3] {
    [
        r.rows_without_line,
        r.rows_without_version,
        r.hits_without_version,
    ]
}

/// Where [`merge_table_into`] writes: the file of shard `index` in `out`, each row
/// written shown to `seen` (if any) first.
pub(crate) struct WriteTo<'a, T> {
    pub(crate) out: &'a Path,
    pub(crate) index: u32,
    pub(crate) seen: Option<&'a mut dyn FnMut(&T)>,
}

/// [`merge_table`], its rows written to `to` (a file of another index: an
/// intermediate partial of one shard).
pub(crate) fn merge_table_into<T: Table>(
    inputs: &[Partial],
    entry: impl Fn(&ShardFiles) -> &FileEntry,
    target: u32,
    n: u32,
    mut to: WriteTo<'_, T>,
    rows_of: &mut [u64],
) -> Result<FileEntry, PartialError> {
    let mut streams: Vec<Stream<T>> = Vec::new();
    for (input, p) in inputs.iter().enumerate() {
        let m = p.description().shard_count;
        let g = gcd(m, n);
        // A path of input shard i and output shard j has i ≡ j (mod gcd(m, n)); when n
        // divides m every row of those input shards is in the output shard.
        let filter = if m % n == 0 { None } else { Some(n) };
        for i in (0..m).filter(|i| i % g == target % g) {
            let e = entry(&p.description().shards[i as usize]);
            streams.push(Stream {
                reader: TableReader::open(p.dir(), i, m, e)?,
                input,
                filter,
                target,
                last_path: None,
            });
        }
    }
    let mut heap = BinaryHeap::with_capacity(streams.len());
    for (i, s) in streams.iter_mut().enumerate() {
        if let Some(row) = s.next()? {
            heap.push(Reverse(Head { row, stream: i }));
        }
    }
    let mut w = TableWriter::<T>::create(to.out, to.index)?;
    while let Some(Reverse(Head { row, stream })) = heap.pop() {
        let s = &mut streams[stream];
        rows_of[s.input] = rows_of[s.input].saturating_add(row.input_rows());
        if let Some(next) = s.next()? {
            heap.push(Reverse(Head { row: next, stream }));
        }
        if let Some(seen) = to.seen.as_mut() {
            seen(&row);
        }
        w.push(row)?;
    }
    w.finish()
}

/// Sums the partials in `inputs` into a new partial in `out` (a directory that does not
/// exist yet, or is empty) of `shards` shards (default: the largest shard count of the
/// inputs). The period spans the inputs' periods; their namespaces must be one.
/// Equal content gives equal files: any grouping of the same rows into partials, rolled
/// up in any order and nesting, gives the same shard files byte for byte (the
/// description differs at most in its dates).
pub fn rollup(
    inputs: &[PathBuf],
    out: &Path,
    shards: Option<u32>,
) -> Result<Description, PartialError> {
    if inputs.is_empty() {
        return Err(PartialError::Invalid(
            "a roll-up needs at least one partial".into(),
        ));
    }
    let parts: Vec<Partial> = inputs
        .iter()
        .map(|p| Partial::open(p))
        .collect::<Result<_, _>>()?;
    let first = &parts[0];
    for p in &parts[1..] {
        if p.description().namespace != first.description().namespace {
            return Err(PartialError::Namespaces {
                a: first.description().namespace.clone(),
                a_path: first.dir().to_owned(),
                b: p.description().namespace.clone(),
                b_path: p.dir().to_owned(),
            });
        }
    }
    let n = shards.unwrap_or_else(|| {
        parts
            .iter()
            .map(|p| p.description().shard_count)
            .max()
            .unwrap_or(1)
    });
    rollup_opened(&parts, out, n)
}

/// [`rollup`] of partials opened already (of one namespace) into `n` shards.
pub(crate) fn rollup_opened(
    parts: &[Partial],
    out: &Path,
    n: u32,
) -> Result<Description, PartialError> {
    if !(1..=covmerge_proto::limits::MAX_SHARDS).contains(&n) {
        return Err(PartialError::Invalid(format!(
            "{n} shards: a partial has 1 to {}",
            covmerge_proto::limits::MAX_SHARDS
        )));
    }
    prepare_out(out)?;
    rollup_into(parts, out, n).inspect_err(|_| clear_out(out))
}

/// Rolls `parts` up into `out` (prepared, empty) in `n` shards.
fn rollup_into(parts: &[Partial], out: &Path, n: u32) -> Result<Description, PartialError> {
    let first = &parts[0];
    let mut d = Description {
        format: FORMAT.to_owned(),
        format_version: FORMAT_VERSION,
        namespace: first.description().namespace.clone(),
        date_from: String::new(),
        date_to: String::new(),
        counts: Default::default(),
        other_namespaces: Default::default(),
        shard_count: n,
        shards: Vec::with_capacity(n as usize),
    };
    let mut from = None;
    let mut to = None;
    for p in parts {
        let pd = p.description();
        let (f, t) = (
            parse_date(&pd.date_from).expect("checked on open"),
            parse_date(&pd.date_to).expect("checked on open"),
        );
        from = Some(from.map_or(f, |x: covmerge_proto::date::Date| x.min(f)));
        to = Some(to.map_or(t, |x: covmerge_proto::date::Date| x.max(t)));
        add_counts(&mut d, pd);
    }
    d.date_from = from.expect("an input").to_string();
    d.date_to = to.expect("an input").to_string();
    let mut rows_of = vec![0u64; parts.len()];
    // The `paths` sums the output's tables hold: the inputs' descriptions must say
    // the same (a description that does not would be copied into the output's).
    let mut held = [0u64; 3];
    for j in 0..n {
        let mut seen = |r: &PathRow| {
            for (a, b) in held.iter_mut().zip(path_sums(r)) {
                *a = a.saturating_add(b);
            }
        };
        let to = WriteTo {
            out,
            index: j,
            seen: Some(&mut seen),
        };
        d.shards.push(ShardFiles {
            index: j,
            lines: merge_table::<LineRow>(parts, |s| &s.lines, j, n, out, &mut rows_of)?,
            funcs: merge_table::<FuncRow>(parts, |s| &s.funcs, j, n, out, &mut rows_of)?,
            versions: merge_table::<VersionRow>(parts, |s| &s.versions, j, n, out, &mut rows_of)?,
            paths: merge_table_into::<PathRow>(parts, |s| &s.paths, j, n, to, &mut rows_of)?,
        });
    }
    for (p, rows) in parts.iter().zip(rows_of) {
        let pd = p.description();
        check_rows_in(p.dir(), pd, rows.saturating_add(pd.counts.rows_bad))?;
    }
    let c = &d.counts;
    let said = [
        c.rows_without_line,
        c.rows_without_version,
        c.hits_without_version,
    ];
    if said != held {
        let names: Vec<String> = parts
            .iter()
            .map(|p| p.dir().join(crate::desc::DESCRIPTION).display().to_string())
            .collect();
        return Err(PartialError::Invalid(format!(
            "the inputs' descriptions ({}) say rows_without_line, rows_without_version and hits_without_version are {said:?}, but their paths tables hold {held:?}",
            names.join(", ")
        )));
    }
    d.write(out)?;
    Ok(d)
}

/// Adds `o`'s counts into `d`'s (saturating, as the manifest's).
pub(crate) fn add_counts(d: &mut Description, o: &Description) {
    add_partial_counts(&mut d.counts, &o.counts);
    d.other_namespaces.add(&o.other_namespaces);
}

/// Adds the counts `oc` into `c` (saturating, as the manifest's).
pub fn add_partial_counts(c: &mut PartialCounts, oc: &PartialCounts) {
    let f = |a: &mut u64, b: u64| *a = a.saturating_add(b);
    f(&mut c.rows_in, oc.rows_in);
    f(&mut c.rows_bad, oc.rows_bad);
    f(&mut c.rows_without_line, oc.rows_without_line);
    f(&mut c.rows_without_version, oc.rows_without_version);
    f(&mut c.hits_without_version, oc.hits_without_version);
    f(&mut c.rows_other_namespaces, oc.rows_other_namespaces);
    c.namespace_column |= oc.namespace_column;
}

/// Removes what a failed write left in `out` (prepared empty, so all of it is the
/// write's): a later try with the same directory starts clean.
pub(crate) fn clear_out(out: &Path) {
    if let Ok(entries) = std::fs::read_dir(out) {
        for e in entries.flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Creates `out`, or accepts it empty: shard files of another partial must not stay
/// beside the new ones.
pub(crate) fn prepare_out(out: &Path) -> Result<(), PartialError> {
    match std::fs::read_dir(out) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(PartialError::Invalid(format!(
                    "{}: the directory of a new partial must be empty",
                    out.display()
                )));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(out).map_err(|e| PartialError::io(out, e))
        }
        Err(e) => Err(PartialError::io(out, e)),
    }
}
