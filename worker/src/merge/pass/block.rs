//! One spill block in a pass: its strings interned into the pass's table (only those
//! of the pass's paths and name bucket, in a pass over part of them), and its
//! entries added to the files' accumulators.

use super::{Walk, NAME_BYTES, PER_FILE, PER_MANAGER, SAMPLE};
use crate::merge::acc::{FileAcc, FileState};
use crate::merge::passes::PathRange;
use crate::merge::MergeError;
use crate::spill::{self, RawKey, RawVal, StringTable};

/// Per string of the block being read: what it is in the pass.
#[derive(Default)]
pub(super) struct BlockIds {
    /// Its id in the pass's string table (`u32::MAX`: not interned, unused).
    remap: Vec<u32>,
    /// Its id as a function name (`None` for the empty name, which is no name), so
    /// an entry does not look its name up to ask.
    func_of: Vec<Option<u32>>,
    /// In a pass over part of the paths: whether it is a path of the range (0: not
    /// asked yet, 1: yes, 2: no), whether an entry kept uses it, and whether as a
    /// function name counted (0: not asked yet, 1: yes, 2: a name of another
    /// bucket).
    in_range: Vec<u8>,
    used: Vec<bool>,
    as_func: Vec<u8>,
}

impl Walk<'_, '_> {
    /// Interns the strings of `block` into the pass's table. In a pass over part of
    /// the paths (or of the names), the entries of other paths are dropped first,
    /// and only the strings the entries kept use are interned.
    pub(super) fn intern_block(&mut self, block: &mut spill::Block<'_>) {
        let ids = &mut self.ids;
        let strings = &mut self.tables.strings;
        ids.remap.clear();
        ids.func_of.clear();
        if self.range.is_all() && self.pass.bucket.is_none() {
            ids.remap
                .extend(block.strings.iter().map(|s| strings.intern(s)));
            ids.func_of.extend(
                block
                    .strings
                    .iter()
                    .zip(&ids.remap)
                    .map(|(s, &id)| (!s.is_empty()).then_some(id)),
            );
        } else {
            // Only the entries of the range, and only the strings they use:
            // the other paths (and their names, and names of other buckets)
            // are for other passes.
            keep_range(
                block,
                &self.range,
                self.pass.bucket,
                &mut ids.in_range,
                &mut ids.used,
                &mut ids.as_func,
            );
            let before = strings.len();
            ids.remap
                .extend(block.strings.iter().zip(&ids.used).map(|(s, &u)| {
                    if u {
                        strings.intern(s)
                    } else {
                        u32::MAX
                    }
                }));
            for ((s, &id), &f) in block.strings.iter().zip(&ids.remap).zip(&ids.as_func) {
                let counted = f == 1 && !s.is_empty();
                ids.func_of.push(counted.then_some(id));
                if counted && id as usize >= before {
                    self.name_bytes += s.len() + NAME_BYTES;
                }
            }
        }
        if self.file_slot.len() < strings.len() {
            self.file_slot.resize(strings.len(), 0);
        }
    }

    /// Adds the entries of `block` (interned) to their files; returns whether the
    /// tables went over the limit at a new path (the block's other entries are then
    /// left: the pass ends after this chunk).
    pub(super) fn add_entries(&mut self, block: &spill::Block<'_>) -> Result<bool, MergeError> {
        for &(k, v) in &block.entries {
            let file = self.ids.remap[k.file as usize];
            if file != self.last_file {
                if self.limit.is_some() {
                    self.accs = super::settle(
                        &mut self.tables.files,
                        &self.file_slot,
                        self.last_file,
                        self.accs,
                    );
                }
                self.last_file = file;
            }
            let mut slot = self.file_slot[file as usize];
            if slot == 0 {
                slot = self.open_file(file)?;
                // A new path: are the tables still within the limit? (Once a
                // path; with one path only, the pass may go on for it alone.)
                if self.limit.is_some_and(|max| {
                    self.tables.files.len() > 1
                        && super::tables_bytes(&self.tables) + self.accs > max
                }) {
                    self.sample_block(block);
                    return Ok(true);
                }
            }
            let kind = if !block.strings[k.manager as usize].is_empty() {
                Kind::Row
            } else if block.strings[k.func as usize].is_empty() {
                Kind::WithoutVersion
            } else {
                Kind::Votes
            };
            self.add_entry(slot, file, (k, v), kind)?;
        }
        Ok(false)
    }

    /// The first entry of `file` in the pass: whether it is in the pass's range
    /// (narrowed within this block), in scope, and its base version. Returns its slot.
    fn open_file(&mut self, file: u32) -> Result<u32, MergeError> {
        let path = self.tables.strings.get(file);
        let acc = if !self.range.contains(path) {
            FileState::Skipped
        } else if path.starts_with(self.pass.file_prefix) {
            match self.pass.source.get(self.pass.base_commit, path)? {
                Some(b) => {
                    let lines = b.lines().count();
                    self.held.hold_base(file, b);
                    let mut acc = Box::new(FileAcc::new());
                    acc.base_lines = u32::try_from(lines).unwrap_or(u32::MAX);
                    if self.limit.is_none() {
                        // Merged alone: its sums spill past their share.
                        acc.per_mgr.spill_past(self.pass.held.tables / 2);
                    }
                    FileState::Live(acc)
                }
                None => FileState::Deleted,
            }
        } else {
            FileState::OutOfScope
        };
        self.tables.files.push((file, acc));
        let slot = self.tables.files.len() as u32;
        self.file_slot[file as usize] = slot;
        Ok(slot)
    }

    /// Samples the paths of `block`, whose reading took the tables over the limit.
    /// The block's strings were interned before its entries were read: its paths
    /// are part of what went over, though most are not files of the pass yet. They
    /// are sampled too (a block of paths in order held more than the share with two
    /// files seen, and each cut then split off one path).
    #[cold]
    fn sample_block(&mut self, block: &spill::Block<'_>) {
        let mut ids: Vec<u32> = block.entries.iter().map(|e| e.0.file).collect();
        ids.sort_unstable();
        ids.dedup();
        let stride = ids.len().div_ceil(SAMPLE).max(1);
        self.block_sample
            .extend(ids.iter().step_by(stride).map(|&i| {
                let path = block.strings[i as usize];
                (path.to_vec(), ((path.len() + PER_FILE) * stride) as u64)
            }));
    }

    /// Adds one entry (of `kind`) to the accumulator of its file (`file`, in `slot`),
    /// or counts why not.
    #[inline]
    fn add_entry(
        &mut self,
        slot: u32,
        file: u32,
        (k, v): (RawKey, RawVal),
        kind: Kind,
    ) -> Result<(), MergeError> {
        let counts = &mut self.tables.counts;
        // Votes count no rows: the rows they name are counted by their lines' entries.
        let rows = if kind == Kind::Votes { 0 } else { v.rows };
        let acc = match &mut self.tables.files[slot as usize - 1].1 {
            FileState::OutOfScope => {
                counts.rows_outside_prefix = counts.rows_outside_prefix.saturating_add(rows);
                return Ok(());
            }
            FileState::Deleted => {
                counts.rows_deleted = counts.rows_deleted.saturating_add(rows);
                return Ok(());
            }
            FileState::Skipped => return Ok(()),
            FileState::Live(acc) => acc,
        };
        if k.sl == 0 {
            counts.rows_without_line = counts.rows_without_line.saturating_add(rows);
            return Ok(());
        }
        if kind == Kind::WithoutVersion {
            // No version of the file: lost at any base where it is, as a raw row
            // whose commit does not hold the file (no source lookup).
            counts.rows_lost = counts.rows_lost.saturating_add(rows);
            counts.hits_lost = counts.hits_lost.saturating_add(v.hits);
            return Ok(());
        }
        // A vote of a name outside the pass's bucket names no line in this pass.
        let func = self.ids.func_of[k.func as usize];
        if kind == Kind::Votes && func.is_none() {
            return Ok(());
        }
        let commit = self.ids.remap[k.commit as usize];
        // Blocks hold each (file, commit)'s entries together: one lookup per
        // run of them.
        if self.last_map.0 != (file, commit) {
            let map = self.held.line_map(
                self.pass.source,
                self.pass.cache,
                self.pass.base_commit,
                &self.tables.strings,
                (file, commit),
                counts,
            )?;
            self.last_map = ((file, commit), map);
        }
        let projected = self.last_map.1.as_ref().and_then(|m| m.project(k.sl));
        if kind == Kind::Votes {
            if let (Some(line), Some(func)) = (projected, func) {
                acc.add_votes(line, func, v.rows);
            }
            return Ok(());
        }
        let Some(line) = projected else {
            counts.rows_lost = counts.rows_lost.saturating_add(v.rows);
            counts.hits_lost = counts.hits_lost.saturating_add(v.hits);
            return Ok(());
        };
        counts.rows_merged = counts.rows_merged.saturating_add(v.rows);
        let mgr = self.ids.remap[k.manager as usize];
        if self.mgr_slot.len() <= mgr as usize {
            self.mgr_slot.resize(mgr as usize + 1, u32::MAX);
        }
        if self.mgr_slot[mgr as usize] == u32::MAX {
            self.mgr_slot[mgr as usize] = self.tables.managers.len() as u32;
            self.tables.managers.push(mgr);
            self.manager_bytes += self.tables.strings.get(mgr).len() + PER_MANAGER;
            if self.limit.is_none() && self.manager_bytes > self.pass.held.manager_names {
                return Err(manager_names(
                    &self.tables.strings,
                    file,
                    self.tables.managers.len(),
                    self.manager_bytes,
                    self.pass.held.manager_names,
                ));
            }
        }
        acc.add(
            line,
            self.mgr_slot[mgr as usize] as usize,
            func,
            v.hits,
            v.rows,
        );
        if acc.per_mgr.is_full() {
            // Merged alone, past its share: the sums go to a run on disk.
            acc.per_mgr.spill().map_err(MergeError::Scratch)?;
        }
        Ok(())
    }
}

/// What a spill entry is. Raw rows always name a manager; the entries of a partial's
/// votes and rows without a version have an empty one (`split/rows.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A manager's rows on a line (or without a line, `sl` 0).
    Row,
    /// Rows naming a function on a line: votes for the line's name, nothing else.
    Votes,
    /// Rows (and hits) with a line but no version of the file: lost where it lives.
    WithoutVersion,
}

/// The error of a file merged alone whose managers' names outgrew their cap.
#[cold]
fn manager_names(
    strings: &StringTable,
    file: u32,
    managers: usize,
    bytes: usize,
    cap: usize,
) -> MergeError {
    MergeError::ManagerNames {
        file: String::from_utf8_lossy(strings.get(file)).into_owned(),
        managers: managers as u64,
        bytes: bytes as u64,
        cap: cap as u64,
    }
}

/// Keeps the entries of `block` whose path is in `range`, marks in `used` the
/// strings they use, and in `as_func` (1) the function names they use of `bucket`
/// (`(k, j)`: those whose hash is `j` modulo `k`; `None`: all). A name of another
/// bucket is not used, as if absent: it names no line in this pass.
fn keep_range(
    block: &mut spill::Block<'_>,
    range: &PathRange,
    bucket: Option<(u32, u32)>,
    in_range: &mut Vec<u8>,
    used: &mut Vec<bool>,
    as_func: &mut Vec<u8>,
) {
    let n = block.strings.len();
    in_range.clear();
    in_range.resize(n, 0);
    used.clear();
    used.resize(n, false);
    as_func.clear();
    as_func.resize(n, 0);
    let strings = &block.strings;
    block.entries.retain(|(k, _)| {
        let f = k.file as usize;
        if in_range[f] == 0 {
            in_range[f] = if range.contains(strings[f]) { 1 } else { 2 };
        }
        let keep = in_range[f] == 1;
        if keep {
            for i in [k.file, k.commit, k.manager] {
                used[i as usize] = true;
            }
            let func = k.func as usize;
            if as_func[func] == 0 {
                let counted = bucket.is_none_or(|(k, j)| name_bucket(strings[func], k) == j);
                as_func[func] = if counted { 1 } else { 2 };
            }
            if as_func[func] == 1 {
                used[func] = true;
            }
        }
        keep
    });
}

/// The bucket of function name `name` of `k`. Not the string index's hash modulo
/// `k`: the names of one bucket would share its low bits, and collide in the index.
pub(in crate::merge) fn name_bucket(name: &[u8], k: u32) -> u32 {
    // splitmix64's finalizer over the index's hash.
    let mut z = spill::hash_bytes(name);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z % u64::from(k)) as u32
}
