//! A partial made from rows: summed in memory up to a byte limit, then written as a
//! sorted run (itself a partial) in a scratch directory; the runs are rolled up into the
//! result at the end. Memory: the limit, then the roll-up's (one row group per run, in
//! levels past [`Builder::set_rollup_budget`]).
//!
//! The sums are held as flat entries (32 bytes a `lines` entry, 24 a `funcs` one),
//! appended as rows come and summed per key by sorting them when their vector is full
//! ([`Builder::make_room`]), not in hash maps: a day's rows, almost one per key, fit
//! about twice as many per byte, and a run or the files are written by sorting them
//! in place (no sorted copy).

use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use covmerge_proto::date::Date;
use covmerge_proto::manifest::OtherNamespaces;
use covmerge_proto::shard_hash::shard_of;
use rustc_hash::FxHashMap as HashMap;

use crate::bucket::sort_by_bucket;
use crate::desc::{Description, PartialCounts, ShardFiles, FORMAT, FORMAT_VERSION};
use crate::entries::{dedup_funcs, dedup_lines, Entries};
use crate::fan_in::rollup_within;
use crate::rollup::{clear_out, prepare_out};
use crate::shard_rollup::rollup_shard_within;
use crate::sorted::{FuncAcc, LineAcc, Pv, Sorted};
use crate::table::is_blob_id;
use crate::Partial;
use crate::PartialError;

/// One input row (or several with one key, `rows` of them), its version already found.
#[derive(Debug, Clone, Copy)]
pub struct RawRow<'a> {
    /// `file_path`.
    pub path: &'a str,
    /// `kernel_commit`.
    pub commit: &'a str,
    /// The blob id of `path` at `commit`, or `None` when the source has no such file
    /// (the rows are then lost at any base where the path exists, contract §3.2).
    /// Not looked at for a row without line.
    pub version: Option<&'a str>,
    /// `manager`.
    pub manager: &'a str,
    /// `func_name` (may be empty).
    pub func_name: &'a str,
    /// `sl`; 0 is a row without line (contract §2).
    pub line: u32,
    /// `hit_count`, summed over the rows.
    pub hits: u64,
    /// How many rows (1 for a row as read).
    pub rows: u64,
}

/// A row (or several of one key) of interned names ([`Builder::intern`]), its version
/// found: for [`Builder::add_ids`] (`manager` non-empty) and [`Builder::add_vote_ids`]
/// (`manager` not looked at).
#[derive(Debug, Clone, Copy)]
pub struct IdRow {
    /// `file_path`.
    pub path: u32,
    /// `kernel_commit`.
    pub commit: u32,
    /// The blob id of `path` at `commit`.
    pub version: u32,
    /// `manager`.
    pub manager: u32,
    /// `func_name` (may be empty).
    pub func_name: u32,
    /// `sl`, from 1.
    pub line: u32,
    /// `hit_count`, summed over the rows.
    pub hits: u64,
    /// How many rows.
    pub rows: u64,
}

/// Estimated bytes of one entry of a hash map beside its strings (slot, key, sums):
/// the paths, the (path, version)s.
const ENTRY_BYTES: usize = 64;

#[derive(Default)]
struct Interner {
    ids: HashMap<Box<str>, u32>,
    names: Vec<Box<str>>,
    bytes: usize,
}

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.into());
        self.ids.insert(s.into(), i);
        self.bytes += 2 * s.len() + ENTRY_BYTES;
        i
    }
}

/// Builds one partial from rows.
pub struct Builder {
    namespace: String,
    from: Date,
    to: Date,
    shards: u32,
    limit: usize,
    /// Bytes of open row groups the roll-up of the runs at the end may hold.
    rollup_budget: usize,
    scratch: Option<tempfile::TempDir>,
    scratch_parent: PathBuf,
    runs: Vec<PathBuf>,
    strings: Interner,
    /// The `lines` and `funcs` sums.
    entries: Entries,
    /// The (path, version)s of the entries, by index, and their indexes by ids.
    pvs: Vec<Pv>,
    pv_of: HashMap<(u32, u32), u32>,
    /// The (path, version, commit) ids of the last row and its (path, version)'s index.
    last_pv: Option<((u32, u32, u32), u32)>,
    paths: HashMap<u32, (u64, u64, u64)>,
    counts: PartialCounts,
    others: OtherNamespaces,
    /// `Some(j)`: one shard of `shards` ([`Builder::for_shard`]).
    only: Option<u32>,
}

/// One shard of a partial, written alone ([`Builder::finish_shard`]): its four files
/// and the counts of its rows (`rows_in` without bad rows: they name no path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardPartial {
    /// The shard's files, as the description lists them.
    pub files: ShardFiles,
    /// What its rows count: `rows_in`, `rows_without_line`, `rows_without_version`,
    /// `hits_without_version` (the rest is 0).
    pub counts: PartialCounts,
}

impl Builder {
    /// A builder of a partial of `namespace` over the days `from` to `to`, in `shards`
    /// shards, holding about `limit` bytes of sums in memory before it writes a run to
    /// a scratch directory under `scratch` (its entries sorted in place: a run is
    /// written within the limit, but for the names' copy). The runs are rolled up at
    /// the end, one row group open per run, in levels past what the roll-up budget
    /// holds ([`Builder::set_rollup_budget`], the limit unless set).
    pub fn new(
        namespace: &str,
        from: Date,
        to: Date,
        shards: u32,
        limit: usize,
        scratch: &Path,
    ) -> Result<Builder, PartialError> {
        if from > to {
            return Err(PartialError::Invalid(format!(
                "a partial's period from {from} to {to} ends before it starts"
            )));
        }
        if !(1..=covmerge_proto::limits::MAX_SHARDS).contains(&shards) {
            return Err(PartialError::Invalid(format!(
                "{shards} shards: a partial has 1 to {}",
                covmerge_proto::limits::MAX_SHARDS
            )));
        }
        Ok(Builder {
            namespace: namespace.to_owned(),
            from,
            to,
            shards,
            limit: limit.max(1),
            rollup_budget: limit.max(1),
            scratch: None,
            scratch_parent: scratch.to_owned(),
            runs: Vec::new(),
            strings: Interner::default(),
            entries: Entries::new(limit.max(1)),
            pvs: Vec::new(),
            pv_of: HashMap::default(),
            last_pv: None,
            paths: HashMap::default(),
            counts: PartialCounts::default(),
            others: OtherNamespaces::default(),
            only: None,
        })
    }

    /// A builder of shard `shard` of a partial of `shards` shards alone (a merge task's
    /// share of a job's partial): every path added must be of that shard, and
    /// [`Builder::finish_shard`] writes its four files exactly as a builder of the whole
    /// partial given the same rows would write them.
    pub fn for_shard(
        shard: u32,
        shards: u32,
        limit: usize,
        scratch: &Path,
    ) -> Result<Builder, PartialError> {
        if shard >= shards {
            return Err(PartialError::Invalid(format!(
                "shard {shard} of a partial of {shards} shards"
            )));
        }
        let day = Date {
            year: 1970,
            month: 1,
            day: 1,
        };
        let mut b = Builder::new("", day, day, shards, limit, scratch)?;
        b.only = Some(shard);
        Ok(b)
    }

    /// Sets what the roll-up of the runs at the end may hold, when more is free then
    /// than the builder's limit (a merge task's whole share, its merge done); never
    /// less than the limit.
    pub fn set_rollup_budget(&mut self, bytes: usize) {
        self.rollup_budget = bytes.max(self.limit);
    }

    /// The id of `path`, counted as a path of the partial (its `paths` row made).
    fn path_id(&mut self, path: &str) -> Result<u32, PartialError> {
        if path.is_empty() {
            return Err(PartialError::Invalid("a row with an empty path".into()));
        }
        let id = self.strings.id(path);
        self.path_of_id(id)
    }

    /// The id of `name` in this builder, for the `*_ids` adds: valid while
    /// [`Builder::runs`] stays the same (a run written forgets the names held).
    pub fn intern(&mut self, name: &str) -> u32 {
        self.strings.id(name)
    }

    /// How many runs the builder has written so far: the ids of [`Builder::intern`]
    /// hold until it changes.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// [`Builder::path_id`] of an interned path.
    fn path_of_id(&mut self, id: u32) -> Result<u32, PartialError> {
        if let Entry::Vacant(e) = self.paths.entry(id) {
            let path = &self.strings.names[id as usize];
            if path.is_empty() {
                return Err(PartialError::Invalid("a row with an empty path".into()));
            }
            if let Some(j) = self.only {
                let s = shard_of(path.as_bytes(), self.shards).0;
                if s != j {
                    return Err(PartialError::Invalid(format!(
                        "path {path:?} is of shard {s} of {}, not of shard {j}",
                        self.shards
                    )));
                }
            }
            e.insert(Default::default());
        }
        Ok(id)
    }

    /// [`Builder::add_without_line`] of an interned path.
    pub fn add_without_line_id(&mut self, path: u32, rows: u64) -> Result<(), PartialError> {
        let p = self.path_of_id(path)?;
        let e = self.paths.get_mut(&p).expect("made by path_of_id");
        e.0 = e.0.saturating_add(rows);
        self.counts.rows_in = self.counts.rows_in.saturating_add(rows);
        self.counts.rows_without_line = self.counts.rows_without_line.saturating_add(rows);
        self.spill_if_over()
    }

    /// [`Builder::add_without_version`] of an interned path.
    pub fn add_without_version_id(
        &mut self,
        path: u32,
        rows: u64,
        hits: u64,
    ) -> Result<(), PartialError> {
        let p = self.path_of_id(path)?;
        let e = self.paths.get_mut(&p).expect("made by path_of_id");
        e.1 = e.1.saturating_add(rows);
        e.2 = e.2.saturating_add(hits);
        self.counts.rows_in = self.counts.rows_in.saturating_add(rows);
        self.counts.rows_without_version = self.counts.rows_without_version.saturating_add(rows);
        self.counts.hits_without_version = self.counts.hits_without_version.saturating_add(hits);
        self.spill_if_over()
    }

    /// The index of version `v` of path `p` (interned names) at commit `c`, the
    /// smallest commit kept.
    fn version_of_ids(&mut self, p: u32, v: u32, c: u32) -> Result<u32, PartialError> {
        let names = &self.strings.names;
        match self.pv_of.entry((p, v)) {
            Entry::Vacant(e) => {
                let (version, commit) = (&names[v as usize], &names[c as usize]);
                if !is_blob_id(version) || commit.is_empty() {
                    let path = &names[p as usize];
                    return Err(PartialError::Invalid(format!(
                        "version {version:?} of {path:?} at commit {commit:?} is not a blob id with a commit"
                    )));
                }
                let i = self.pvs.len() as u32;
                self.pvs.push(Pv {
                    path: p,
                    version: v,
                    commit: c,
                });
                e.insert(i);
                Ok(i)
            }
            Entry::Occupied(e) => {
                let i = *e.get();
                let held = &mut self.pvs[i as usize].commit;
                if *held != c {
                    if names[c as usize].is_empty() {
                        return Err(PartialError::Invalid(format!(
                            "version {:?} of {:?} without a commit",
                            names[v as usize], names[p as usize]
                        )));
                    }
                    if names[c as usize] < names[*held as usize] {
                        *held = c;
                    }
                }
                Ok(i)
            }
        }
    }

    /// [`Builder::version_of_ids`] of the path `path` (its `paths` row made), held
    /// from one row to the next of the same ids.
    fn pv_of_ids(&mut self, path: u32, version: u32, commit: u32) -> Result<u32, PartialError> {
        let ids = (path, version, commit);
        if let Some((held, pv)) = self.last_pv {
            if held == ids {
                return Ok(pv);
            }
        }
        let p = self.path_of_id(path)?;
        let pv = self.version_of_ids(p, version, commit)?;
        self.last_pv = Some((ids, pv));
        Ok(pv)
    }

    /// [`Builder::add_vote`] of interned names.
    pub fn add_vote_ids(&mut self, r: &IdRow) -> Result<(), PartialError> {
        let names = &self.strings.names;
        if names[r.func_name as usize].is_empty() || r.line == 0 {
            return Err(PartialError::Invalid(format!(
                "a function vote of {:?} with an empty name or line 0",
                names[r.path as usize]
            )));
        }
        let pv = self.pv_of_ids(r.path, r.version, r.commit)?;
        self.entries.push_func(FuncAcc {
            pv,
            line: r.line,
            func: r.func_name,
            rows: r.rows,
        });
        self.after_add()
    }

    /// [`Builder::add`] of interned names, with a line and a version.
    pub fn add_ids(&mut self, r: &IdRow) -> Result<(), PartialError> {
        let names = &self.strings.names;
        if names[r.manager as usize].is_empty() || r.rows == 0 || r.line == 0 {
            return Err(PartialError::Invalid(format!(
                "a row of {:?} with an empty manager, no rows or line 0",
                names[r.path as usize]
            )));
        }
        let pv = self.pv_of_ids(r.path, r.version, r.commit)?;
        self.counts.rows_in = self.counts.rows_in.saturating_add(r.rows);
        self.push_line(pv, r.manager, r.line, r.hits, r.rows);
        if !self.strings.names[r.func_name as usize].is_empty() {
            self.entries.push_func(FuncAcc {
                pv,
                line: r.line,
                func: r.func_name,
                rows: r.rows,
            });
        }
        self.after_add()
    }

    /// Names `path` with `rows` rows without line (0: only the path, so that it is a
    /// file of the partial).
    pub fn add_without_line(&mut self, path: &str, rows: u64) -> Result<(), PartialError> {
        let p = self.path_id(path)?;
        let e = self.paths.get_mut(&p).expect("made by path_id");
        e.0 = e.0.saturating_add(rows);
        self.counts.rows_in = self.counts.rows_in.saturating_add(rows);
        self.counts.rows_without_line = self.counts.rows_without_line.saturating_add(rows);
        self.spill_if_over()
    }

    /// Adds `rows` rows of `path` with a line but without a version, and their `hits`.
    pub fn add_without_version(
        &mut self,
        path: &str,
        rows: u64,
        hits: u64,
    ) -> Result<(), PartialError> {
        let p = self.path_id(path)?;
        let e = self.paths.get_mut(&p).expect("made by path_id");
        e.1 = e.1.saturating_add(rows);
        e.2 = e.2.saturating_add(hits);
        self.counts.rows_in = self.counts.rows_in.saturating_add(rows);
        self.counts.rows_without_version = self.counts.rows_without_version.saturating_add(rows);
        self.counts.hits_without_version = self.counts.hits_without_version.saturating_add(hits);
        self.spill_if_over()
    }

    /// Adds `rows` votes for function `func` on line `line` of `version` of `path` (a
    /// `funcs` row of a partial read back): no input row, no hits, no manager.
    pub fn add_vote(
        &mut self,
        path: &str,
        version: &str,
        commit: &str,
        line: u32,
        func: &str,
        rows: u64,
    ) -> Result<(), PartialError> {
        if func.is_empty() || line == 0 {
            return Err(PartialError::Invalid(format!(
                "a function vote of {path:?} with an empty name or line 0"
            )));
        }
        let p = self.path_id(path)?;
        let pv = self.version_id(p, path, version, commit)?;
        let func = self.strings.id(func);
        self.entries.push_func(FuncAcc {
            pv,
            line,
            func,
            rows,
        });
        self.after_add()
    }

    /// The index of `version` of path `p`, its commit kept (the smallest).
    fn version_id(
        &mut self,
        p: u32,
        path: &str,
        version: &str,
        commit: &str,
    ) -> Result<u32, PartialError> {
        if !is_blob_id(version) || commit.is_empty() {
            return Err(PartialError::Invalid(format!(
                "version {version:?} of {path:?} at commit {commit:?} is not a blob id with a commit"
            )));
        }
        let v = self.strings.id(version);
        let c = self.strings.id(commit);
        self.version_of_ids(p, v, c)
    }

    /// Adds a `lines` entry (room was made by the last [`Builder::after_add`]).
    fn push_line(&mut self, pv: u32, manager: u32, line: u32, hits: u64, rows: u64) {
        self.entries.push_line(LineAcc {
            pv,
            manager,
            line,
            hits,
            rows,
        });
    }

    /// After an add: room for the next one's entries in their vectors
    /// ([`Builder::make_room`]), and a run written if what is held is over the limit.
    /// Ids stay valid within an add: a run is only ever written at its end.
    fn after_add(&mut self) -> Result<(), PartialError> {
        if self.entries.full() {
            self.make_room()?;
        }
        self.spill_if_over()
    }

    /// A full vector of entries grows (doubles, by a thousand entries at least) while
    /// what is held stays within the limit; else the entries are summed per key and
    /// the vectors shrunk to them (either may then grow into what the other freed),
    /// and when they still fill 3/4 of what is theirs (the limit but for the names),
    /// a run is written: each sort frees a quarter at least.
    fn make_room(&mut self) -> Result<(), PartialError> {
        let theirs = |b: &Builder| b.limit.saturating_sub(b.held_bytes() - b.entries.bytes());
        if self
            .entries
            .grow(theirs(self).saturating_sub(self.entries.bytes()))
        {
            return Ok(());
        }
        self.entries.compact();
        if self.entries.used() > theirs(self) / 4 * 3 {
            self.spill()?;
        }
        self.entries
            .grow(theirs(self).saturating_sub(self.entries.bytes()));
        // A limit too small for any entry still takes them a few at a time.
        self.entries.room_for_one();
        Ok(())
    }

    fn spill_if_over(&mut self) -> Result<(), PartialError> {
        if self.held_bytes() > self.limit {
            self.spill()?;
        }
        Ok(())
    }

    /// Bytes held now (estimated; the vectors of entries by their capacity).
    pub fn held_bytes(&self) -> usize {
        self.strings.bytes
            + self.entries.bytes()
            + ENTRY_BYTES * (self.pvs.len() + self.paths.len())
    }

    /// Adds rows of the partial's namespace.
    pub fn add(&mut self, r: &RawRow<'_>) -> Result<(), PartialError> {
        if r.path.is_empty() || r.manager.is_empty() || r.rows == 0 {
            return Err(PartialError::Invalid(format!(
                "a row of {:?} with an empty path or manager, or no rows",
                r.path
            )));
        }
        if r.line == 0 {
            return self.add_without_line(r.path, r.rows);
        }
        let Some(v) = r.version else {
            return self.add_without_version(r.path, r.rows, r.hits);
        };
        let path = self.path_id(r.path)?;
        let pv = self.version_id(path, r.path, v, r.commit)?;
        self.counts.rows_in = self.counts.rows_in.saturating_add(r.rows);
        let manager = self.strings.id(r.manager);
        self.push_line(pv, manager, r.line, r.hits, r.rows);
        if !r.func_name.is_empty() {
            let func = self.strings.id(r.func_name);
            self.entries.push_func(FuncAcc {
                pv,
                line: r.line,
                func,
                rows: r.rows,
            });
        }
        self.after_add()
    }

    /// Counts `rows` malformed rows skipped (in `rows_in` and `rows_bad`).
    pub fn add_bad(&mut self, rows: u64) {
        self.counts.rows_in = self.counts.rows_in.saturating_add(rows);
        self.counts.rows_bad = self.counts.rows_bad.saturating_add(rows);
    }

    /// Counts `rows` rows of another namespace `name` (outside `rows_in`).
    pub fn add_other_namespace(&mut self, name: &[u8], rows: u64) {
        self.others.add_rows(name, rows);
        self.counts.rows_other_namespaces = self.counts.rows_other_namespaces.saturating_add(rows);
    }

    /// Records that an input had a `namespace` column.
    pub fn saw_namespace_column(&mut self) {
        self.counts.namespace_column = true;
    }

    /// Writes what is held as a run in the scratch directory and starts afresh. A run
    /// of one shard's builder is a partial of one shard (its rows are all of it).
    fn spill(&mut self) -> Result<(), PartialError> {
        if self.scratch.is_none() {
            let d = tempfile::Builder::new()
                .prefix("covmerge-partial-")
                .tempdir_in(&self.scratch_parent)
                .map_err(|e| PartialError::io(&self.scratch_parent, e))?;
            self.scratch = Some(d);
        }
        let dir = self
            .scratch
            .as_ref()
            .expect("made above")
            .path()
            .join(format!("run-{:05}", self.runs.len()));
        let n = if self.only.is_some() { 1 } else { self.shards };
        self.write_held(&dir, n)?;
        self.runs.push(dir);
        Ok(())
    }

    /// Writes the partial into `out` (a directory that does not exist yet, or is empty).
    pub fn finish(mut self, out: &Path) -> Result<Description, PartialError> {
        if self.only.is_some() {
            return Err(PartialError::Invalid(
                "a builder of one shard writes that shard (finish_shard), not a partial".into(),
            ));
        }
        if self.runs.is_empty() {
            return self.write_held(out, self.shards);
        }
        self.spill()?;
        self.entries = Entries::new(self.limit);
        let scratch = self.scratch.as_ref().expect("runs were written").path();
        let (d, _) = rollup_within(
            &self.runs,
            out,
            Some(self.shards),
            self.rollup_budget,
            scratch,
        )?;
        Ok(d)
    }

    /// Writes the four files of the builder's shard ([`Builder::for_shard`]) into `out`
    /// (a directory that does not exist yet, or is empty), and no description.
    pub fn finish_shard(mut self, out: &Path) -> Result<ShardPartial, PartialError> {
        let Some(j) = self.only else {
            return Err(PartialError::Invalid(
                "finish_shard needs a builder of one shard (Builder::for_shard)".into(),
            ));
        };
        if !self.runs.is_empty() {
            self.spill()?;
            self.entries = Entries::new(self.limit);
            let scratch = self.scratch.as_ref().expect("runs were written").path();
            let runs: Vec<Partial> = self
                .runs
                .iter()
                .map(|r| Partial::open(r))
                .collect::<Result<_, _>>()?;
            let (p, _) =
                rollup_shard_within(&runs, out, self.shards, j, self.rollup_budget, scratch)?;
            return Ok(p);
        }
        prepare_out(out)?;
        let r = self.write_sorted(out, self.shards, Some(j));
        let (mut files, counts, _) = r.inspect_err(|_| clear_out(out))?;
        Ok(ShardPartial {
            files: files.pop().expect("one shard written"),
            counts,
        })
    }

    /// Writes the held sums as a partial of `n` shards in `dir` and empties them.
    fn write_held(&mut self, dir: &Path, n: u32) -> Result<Description, PartialError> {
        prepare_out(dir)?;
        self.write_held_into(dir, n).inspect_err(|_| clear_out(dir))
    }

    fn write_held_into(&mut self, dir: &Path, n: u32) -> Result<Description, PartialError> {
        let (shards, counts, other_namespaces) = self.write_sorted(dir, n, None)?;
        let d = Description {
            format: FORMAT.to_owned(),
            format_version: FORMAT_VERSION,
            namespace: self.namespace.clone(),
            date_from: self.from.to_string(),
            date_to: self.to.to_string(),
            counts,
            other_namespaces,
            shard_count: n,
            shards,
        };
        d.write(dir)?;
        Ok(d)
    }

    /// Writes the held sums' tables in `n` shards (only shard `only`'s when given) in
    /// `dir` and empties them; returns the files and the counts.
    fn write_sorted(
        &mut self,
        dir: &Path,
        n: u32,
        only: Option<u32>,
    ) -> Result<(Vec<ShardFiles>, PartialCounts, OtherNamespaces), PartialError> {
        let strings = std::mem::take(&mut self.strings);
        let names = &strings.names;
        // Byte-order rank of each string: keys then sort as integers.
        let mut order: Vec<u32> = (0..names.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
        let mut rank = vec![0u32; names.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i as usize] = r as u32;
        }
        let shard = |path: u32| shard_of(names[path as usize].as_bytes(), n).0;

        // The (path, version)s in key order, shard first; the entries then sort by
        // their (path, version)'s place and their ranks, in place.
        let pvs = std::mem::take(&mut self.pvs);
        self.pv_of.clear();
        self.last_pv = None;
        let pv_shard: Vec<u32> = pvs.iter().map(|p| shard(p.path)).collect();
        let mut versions: Vec<u32> = (0..pvs.len() as u32).collect();
        versions.sort_unstable_by_key(|&i| {
            let p = pvs[i as usize];
            (
                pv_shard[i as usize],
                rank[p.path as usize],
                rank[p.version as usize],
            )
        });
        let mut pv_pos = vec![0u32; pvs.len()];
        for (pos, &i) in versions.iter().enumerate() {
            pv_pos[i as usize] = pos as u32;
        }
        // Each entry's ids turned into places (its (path, version)'s and its names'
        // ranks) first, so that the sort compares plain fields.
        self.entries.forget_recent();
        let mut lines = std::mem::take(&mut self.entries.lines);
        for e in &mut lines {
            e.pv = pv_pos[e.pv as usize];
            e.manager = rank[e.manager as usize];
        }
        let places = pvs.len();
        sort_by_bucket(&mut lines, places, |e| e.pv, |e| (e.manager, e.line));
        dedup_lines(&mut lines);
        let mut funcs = std::mem::take(&mut self.entries.funcs);
        for e in &mut funcs {
            e.pv = pv_pos[e.pv as usize];
            e.func = rank[e.func as usize];
        }
        sort_by_bucket(&mut funcs, places, |e| e.pv, |e| (e.line, e.func));
        dedup_funcs(&mut funcs);
        let mut paths: Vec<_> = std::mem::take(&mut self.paths)
            .into_iter()
            .map(|(p, sums)| ((shard(p), rank[p as usize]), (p, sums)))
            .collect();
        paths.sort_unstable_by_key(|e| e.0);

        let sorted = Sorted {
            lines,
            funcs,
            pvs,
            pv_shard,
            versions,
            order,
            paths,
            names: names
                .iter()
                .map(|n| Bytes::copy_from_slice(n.as_bytes()))
                .collect(),
        };
        let shards = match only {
            Some(j) => vec![sorted.write_shard(dir, j, &mut [0; 4])?],
            None => sorted.write(dir, n)?,
        };
        // The vectors of entries back, empty, their capacity kept (and counted).
        let Sorted {
            mut lines,
            mut funcs,
            ..
        } = sorted;
        lines.clear();
        funcs.clear();
        self.entries.lines = lines;
        self.entries.funcs = funcs;
        Ok((
            shards,
            std::mem::take(&mut self.counts),
            std::mem::take(&mut self.others),
        ))
    }
}
