//! After each chunk of a pass: whether its tables outgrew their share of the
//! budget, and what then becomes of the pass (see `passes.rs`): cut into ranges of
//! its paths, restarted around one path that holds it all, narrowed to that path
//! alone, or (for a path merged alone) its function names counted in passes.

use super::{Accumulated, Walk, MAX_NAME_PASSES, PER_FILE, SAMPLE};
use crate::merge::acc::FileState;
use crate::merge::passes::{How, PathRange, Todo};

impl Walk<'_, '_> {
    /// Checks the tables after a chunk (`over_now`: they went over at a new path;
    /// `left`: chunks still to read); returns how the pass ends, if it ends here.
    pub(super) fn after_chunk(&mut self, over_now: bool, left: usize) -> Option<Accumulated> {
        let Some(max) = self.limit else {
            return self.names_outgrown(left);
        };
        // Checked at each new path and at the end of each chunk (accumulators and
        // names grow within a chunk: one flush of a split, within the split's own
        // share of the budget).
        let bytes = self.table_bytes_now();
        if !over_now && bytes <= max {
            return None;
        }
        // With a limit no file is skipped: the pass's files are all those seen.
        if self.tables.files.len() > 1 {
            return Some(self.cut(bytes, max, left));
        }
        self.one_path_holds_all()
    }

    /// A pass over one path, without a limit: its tables are as large as its
    /// output, but for the function names of its lines, which are counted
    /// (contract §3.5) and may be many more. Past the share, they are
    /// counted in passes, each over part of them.
    fn names_outgrown(&mut self, left: usize) -> Option<Accumulated> {
        let share = self.name_limit?;
        let others = match self.tables.files.first() {
            Some((_, FileState::Live(acc))) => acc.other_names.capacity() * 17,
            _ => 0,
        };
        let held_names = self.name_bytes + others;
        if held_names <= share {
            return None;
        }
        let read = self.read;
        let whole = held_names as u128 * (read + left) as u128 / read as u128;
        let parts = whole.div_ceil(share as u128 * 5 / 8).clamp(2, 4096) as u32;
        let k = self.pass.bucket.map_or(1, |b| b.0);
        if k.saturating_mul(parts) > MAX_NAME_PASSES {
            self.name_limit = None;
            return None;
        }
        Some(Accumulated::Names {
            range: self.range.clone(),
            parts,
            later: std::mem::take(&mut self.later),
        })
    }

    /// The tables (`bytes`) outgrew the limit `max` with several paths seen: the
    /// range is cut into ranges by a sample of its paths, each weighted by what it
    /// held.
    fn cut(&mut self, bytes: usize, max: usize, left: usize) -> Accumulated {
        let seen = self.tables.files.len();
        let read = self.read;
        // The range's tables at the end, if its paths are spread like those
        // read so far; each pass to hold at most 5/8 of the limit.
        let whole = bytes as u128 * (read + left) as u128 / read as u128;
        let parts = whole.div_ceil(max as u128 * 5 / 8).clamp(2, SAMPLE as u128);
        let stride = seen.div_ceil(SAMPLE);
        let strings = &self.tables.strings;
        let sample = std::mem::take(&mut self.block_sample)
            .into_iter()
            .chain(self.tables.files.iter().step_by(stride).map(|(f, state)| {
                let path = strings.get(*f);
                let acc = match state {
                    FileState::Live(a) => a.approx_bytes(),
                    _ => 0,
                };
                (
                    path.to_vec(),
                    ((path.len() + PER_FILE + acc) * stride) as u64,
                )
            }))
            .collect();
        let ranges = self.range.split(sample, parts as usize);
        let sampled: u64 = ranges.iter().map(|r| r.1).sum();
        let n = ranges.len();
        let whole = whole.min(u64::MAX as u128) as u64;
        Accumulated::Over(
            ranges
                .into_iter()
                .enumerate()
                .map(|(i, (range, seen))| Todo {
                    range,
                    how: How::Bounded {
                        seen,
                        cut: 0,
                        tail: (i + 1 == n).then_some((whole, sampled)),
                        fresh: true,
                    },
                })
                .collect(),
        )
    }

    /// One path holds it all: no cut divides it, and it is merged alone without
    /// a limit. When no path of the range sorts before it, this pass goes on for
    /// it alone (the paths after it get passes of their own); else the paths
    /// before it must be written first: the pass starts again, in three.
    fn one_path_holds_all(&mut self) -> Option<Accumulated> {
        let (f, _) = self.tables.files.first()?;
        let path = self.tables.strings.get(*f).to_vec();
        let (below, above) = self.range.around(&path);
        if !below.is_empty() {
            let ranges = [
                Todo::bounded(below),
                Todo {
                    range: PathRange::only(&path),
                    how: How::Alone { k: 1, j: 0 },
                },
                Todo::bounded(above),
            ];
            return Some(Accumulated::Over(
                ranges.into_iter().filter(|r| !r.range.is_empty()).collect(),
            ));
        }
        self.later.extend(Some(above).filter(|r| !r.is_empty()));
        self.range = PathRange::only(&path);
        self.limit = None;
        if let Some((_, FileState::Live(acc))) = self.tables.files.first_mut() {
            acc.per_mgr.spill_past(self.pass.held.tables / 2);
        }
        None
    }
}
