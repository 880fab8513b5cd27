//! A builder's `lines` and `funcs` sums as flat entries: appended as rows come (one
//! entry per key while a small table of recent keys finds it), summed per key by
//! sorting when their vector is full, their memory counted by capacity.

use crate::bucket::{buckets_of, sort_by_bucket};
use crate::sorted::{FuncAcc, LineAcc};

/// Bytes of a `lines` and of a `funcs` entry.
const LINE_BYTES: usize = std::mem::size_of::<LineAcc>();
const FUNC_BYTES: usize = std::mem::size_of::<FuncAcc>();

/// Entries a vector of entries grows by (when the limit has room), and shrinks to
/// beside its entries.
const MIN_GROW: usize = 1024;

/// Entries a full vector takes past the limit (a limit too small for any).
const FEW: usize = 4;

/// Slots of each table of recent keys at most (a power of two); fewer for a small
/// limit (one slot for 512 bytes of it), none below 64 KiB.
const RECENT: usize = 1 << 13;

/// A slot of a table of recent keys: a key and the index of its last entry. The key
/// is kept beside the index so that a key seen once (most of them) is told apart
/// without reading its entry, a random place of a large vector.
#[derive(Clone, Copy)]
struct RecentSlot {
    key: (u32, u32, u32),
    at: u32,
}

/// No entry.
const NONE: RecentSlot = RecentSlot {
    key: (0, 0, 0),
    at: u32::MAX,
};

/// The entries, several of a key until [`Entries::compact`] sums them.
#[derive(Default)]
pub(crate) struct Entries {
    pub(crate) lines: Vec<LineAcc>,
    pub(crate) funcs: Vec<FuncAcc>,
    /// By a hash of a key: the key and the index of its last entry (or [`NONE`]).
    /// Rows of one key come close together (one (file, commit)'s managers, or one
    /// version's commits): their sums go to one entry.
    recent_lines: Vec<RecentSlot>,
    recent_funcs: Vec<RecentSlot>,
    /// log2 of the tables' slots (0: no tables).
    bits: u32,
}

impl Entries {
    /// Entries of a builder of `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        let slots = (limit / 512).min(RECENT);
        let bits = if limit < 64 << 10 {
            0
        } else {
            usize::BITS - 1 - slots.leading_zeros()
        };
        Entries {
            bits,
            ..Entries::default()
        }
    }

    /// The slot of key (a, b, c) in a table of recent keys (made when first used).
    fn slot(&self, (a, b, c): (u32, u32, u32)) -> usize {
        let h = u64::from(a).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ u64::from(b).wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            ^ u64::from(c).wrapping_mul(0x1656_67b1_9e37_79f9);
        (h >> (64 - self.bits)) as usize
    }

    /// Adds a `lines` entry (to its key's recent entry when there is one).
    pub(crate) fn push_line(&mut self, e: LineAcc) {
        if self.bits == 0 {
            self.lines.push(e);
            return;
        }
        if self.recent_lines.is_empty() {
            self.recent_lines = vec![NONE; 1 << self.bits];
        }
        let key = (e.pv, e.manager, e.line);
        let s = self.slot(key);
        let r = self.recent_lines[s];
        if r.key == key {
            // The entry's own key checked too (a hit: a recent entry, in cache).
            if let Some(held) = self
                .lines
                .get_mut(r.at as usize)
                .filter(|h| (h.pv, h.manager, h.line) == key)
            {
                held.hits = held.hits.saturating_add(e.hits);
                held.rows = held.rows.saturating_add(e.rows);
                return;
            }
        }
        self.recent_lines[s] = RecentSlot {
            key,
            at: self.lines.len() as u32,
        };
        self.lines.push(e);
    }

    /// Adds a `funcs` entry (to its key's recent entry when there is one).
    pub(crate) fn push_func(&mut self, e: FuncAcc) {
        if self.bits == 0 {
            self.funcs.push(e);
            return;
        }
        if self.recent_funcs.is_empty() {
            self.recent_funcs = vec![NONE; 1 << self.bits];
        }
        let key = (e.pv, e.line, e.func);
        let s = self.slot(key);
        let r = self.recent_funcs[s];
        if r.key == key {
            if let Some(held) = self
                .funcs
                .get_mut(r.at as usize)
                .filter(|h| (h.pv, h.line, h.func) == key)
            {
                held.rows = held.rows.saturating_add(e.rows);
                return;
            }
        }
        self.recent_funcs[s] = RecentSlot {
            key,
            at: self.funcs.len() as u32,
        };
        self.funcs.push(e);
    }

    /// Whether a vector is full (the next push would grow it).
    pub(crate) fn full(&self) -> bool {
        self.lines.len() == self.lines.capacity() || self.funcs.len() == self.funcs.capacity()
    }

    /// Bytes held: the vectors by capacity, the tables of recent keys.
    pub(crate) fn bytes(&self) -> usize {
        LINE_BYTES * self.lines.capacity()
            + FUNC_BYTES * self.funcs.capacity()
            + std::mem::size_of::<RecentSlot>()
                * (self.recent_lines.len() + self.recent_funcs.len())
    }

    /// Bytes of the entries themselves.
    pub(crate) fn used(&self) -> usize {
        LINE_BYTES * self.lines.len() + FUNC_BYTES * self.funcs.len()
    }

    /// Grows the full vectors within `room` bytes, each by half of it at most (so that
    /// neither starves the other); returns whether both have room.
    pub(crate) fn grow(&mut self, room: usize) -> bool {
        let mut half = room / 2;
        let lines = grow(&mut self.lines, &mut half, LINE_BYTES);
        half += room / 2;
        lines && grow(&mut self.funcs, &mut half, FUNC_BYTES)
    }

    /// Sums the entries of each key of a full vector into one (sorted by ids), and
    /// shrinks the vectors to their entries.
    pub(crate) fn compact(&mut self) {
        // Only a full vector: the other has room still.
        if self.lines.len() == self.lines.capacity() {
            let n = buckets_of(&self.lines, |e| e.pv);
            sort_by_bucket(&mut self.lines, n, |e| e.pv, |e| (e.manager, e.line));
            dedup_lines(&mut self.lines);
        }
        if self.funcs.len() == self.funcs.capacity() {
            let n = buckets_of(&self.funcs, |e| e.pv);
            sort_by_bucket(&mut self.funcs, n, |e| e.pv, |e| (e.line, e.func));
            dedup_funcs(&mut self.funcs);
        }
        self.lines.shrink_to(self.lines.len() + FEW);
        self.funcs.shrink_to(self.funcs.len() + FEW);
        self.forget_recent();
    }

    /// Makes room for a few more entries in each vector, whatever the limit.
    pub(crate) fn room_for_one(&mut self) {
        if self.lines.len() == self.lines.capacity() {
            self.lines.reserve_exact(FEW);
        }
        if self.funcs.len() == self.funcs.capacity() {
            self.funcs.reserve_exact(FEW);
        }
    }

    /// Forgets the recent keys (the entries moved).
    pub(crate) fn forget_recent(&mut self) {
        self.recent_lines.fill(NONE);
        self.recent_funcs.fill(NONE);
    }
}

/// Grows `v` when full by its size (at least [`MIN_GROW`] entries of `size` bytes), or
/// what `room` (bytes) allows of it; returns whether it has room now.
fn grow<T>(v: &mut Vec<T>, room: &mut usize, size: usize) -> bool {
    if v.len() < v.capacity() {
        return true;
    }
    let add = v.capacity().max(MIN_GROW).min(*room / size);
    // Growing by little would copy the whole vector for it.
    if add == 0 || (add < MIN_GROW && v.capacity() >= MIN_GROW) {
        return false;
    }
    v.reserve_exact(add);
    *room -= add * size;
    true
}

/// Sums adjacent entries of one key into the first (the entries sorted by key).
pub(crate) fn dedup_lines(lines: &mut Vec<LineAcc>) {
    lines.dedup_by(|later, kept| {
        let same = (later.pv, later.manager, later.line) == (kept.pv, kept.manager, kept.line);
        if same {
            kept.hits = kept.hits.saturating_add(later.hits);
            kept.rows = kept.rows.saturating_add(later.rows);
        }
        same
    });
}

/// [`dedup_lines`] of `funcs` entries.
pub(crate) fn dedup_funcs(funcs: &mut Vec<FuncAcc>) {
    funcs.dedup_by(|later, kept| {
        let same = (later.pv, later.line, later.func) == (kept.pv, kept.line, kept.func);
        if same {
            kept.rows = kept.rows.saturating_add(later.rows);
        }
        same
    });
}
