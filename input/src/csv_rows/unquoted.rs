//! The fast path for pieces of an input without quotes: delimiters found 64 bytes at a
//! time.

use super::check::row_of;
use super::{Header, Pos, Row, RowProblem};

/// Calls `f` with every data row of `piece`, a headerless part of an input that holds
/// no `"` (so no field is quoted) and whose first line is line `first_line`: the same
/// rows, problems and skips as [`RowReader::for_each`] (`\r`, `\n` and `\r\n` end a
/// record, blank lines and repeated headers are skipped), found with a word-at-a-time
/// search for delimiters instead of csv's byte-at-a-time state machine. `Pos::line` is
/// exact here. Stops early when `f` returns `false`.
pub fn for_each_unquoted(
    h: &Header,
    piece: &[u8],
    first_line: u64,
    mut f: impl FnMut(Pos, Result<Row<'_>, RowProblem>) -> bool,
) {
    let c = h.cols;
    for_each_unquoted_record(h, piece, first_line, |pos, rec| match rec {
        Ok(fields) => f(pos, row_of(&c, &h.groups, |i| fields.get(i))),
        Err(problem) => f(pos, Err(problem)),
    });
}

/// The fields of one record of a piece: where the record starts and ends, and the
/// commas between its fields (one fewer than the header's fields).
#[derive(Clone, Copy)]
pub struct Fields<'p, 'c> {
    piece: &'p [u8],
    start: usize,
    end: usize,
    commas: &'c [usize],
}

impl<'p> Fields<'p, '_> {
    /// The `i`-th field.
    #[inline]
    pub fn get(&self, i: usize) -> &'p [u8] {
        let a = if i == 0 {
            self.start
        } else {
            self.commas[i - 1] + 1
        };
        let b = if i < self.commas.len() {
            self.commas[i]
        } else {
            self.end
        };
        &self.piece[a..b]
    }

    /// The row these fields hold, checked as contract §6 says ([`for_each_unquoted`]'s row).
    pub fn row(&self, h: &Header) -> Result<Row<'p>, RowProblem> {
        row_of(&h.cols, &h.groups, |i| self.get(i))
    }
}

/// Bytes whose delimiters are indexed at once (a multiple of 64): the index of a
/// chunk and the chunk itself stay in the core's own cache while its records are read.
const CHUNK: usize = 4096;

/// [`for_each_unquoted`] without the checks of the fields themselves: `f` gets the
/// fields of each record with the right number of fields (not a repeated header, not
/// over the cap), or the problem of one without. Callers that look each field up in
/// a table check a value once, when it is first seen ([`valid_file_path`],
/// [`valid_name`], [`parse_count_fast`]), and build the problem of a bad row with
/// [`Fields::row`].
pub fn for_each_unquoted_record<'p>(
    h: &Header,
    piece: &'p [u8],
    first_line: u64,
    f: impl FnMut(Pos, Result<&Fields<'p, '_>, RowProblem>) -> bool,
) {
    walk(h, piece, first_line, CHUNK, f)
}

/// The delimiters of a piece, a chunk at a time: first the positions of every comma
/// and every line end of the chunk, written out of each 64-byte block's masks with no
/// branch per delimiter ([`flatten`]); then each record, from one line end to the
/// next, takes the commas before its end. A record of the header's field count,
/// almost every one, is recognised by looking at two commas (its last and the one
/// after), not by walking them: the walk of every delimiter with a branch on its kind
/// was most of the parse.
pub(super) fn walk<'p>(
    h: &Header,
    piece: &'p [u8],
    first_line: u64,
    chunk: usize,
    f: impl FnMut(Pos, Result<&Fields<'p, '_>, RowProblem>) -> bool,
) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("popcnt") && std::is_x86_feature_detected!("bmi1") {
        // SAFETY: the CPU has the features `walk_counting` is compiled for.
        return unsafe { walk_counting(h, piece, first_line, chunk, f) };
    }
    walk_any(h, piece, first_line, chunk, f)
}

/// [`walk_any`] compiled for CPUs that count bits in one instruction (`popcnt`,
/// `tzcnt`): every x86-64 CPU of the last decade, but not the baseline the crate is
/// built for, where a count of a block's commas took a dozen instructions.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt,bmi1")]
unsafe fn walk_counting<'p>(
    h: &Header,
    piece: &'p [u8],
    first_line: u64,
    chunk: usize,
    f: impl FnMut(Pos, Result<&Fields<'p, '_>, RowProblem>) -> bool,
) {
    walk_any(h, piece, first_line, chunk, f)
}

/// [`walk`] on any CPU. `f` is called from one place, with the record's fields by
/// reference: passed by value, the caller's row code (not inlined: it is large) copied
/// them back from the stack in wider loads than they were stored with, a stall on
/// every row (12 % of that code's samples; gone by reference).
#[inline(always)]
fn walk_any<'p>(
    h: &Header,
    piece: &'p [u8],
    first_line: u64,
    chunk: usize,
    mut f: impl FnMut(Pos, Result<&Fields<'p, '_>, RowProblem>) -> bool,
) {
    debug_assert!(!piece.contains(&b'"'));
    debug_assert!(chunk > 0 && chunk.is_multiple_of(64));
    let want = h.record.len();
    let need = want.saturating_sub(1); // commas in a record of `want` fields
                                       // The header as a record of this piece would read: a record of `want` fields is
                                       // a repeated header iff its text is this (a header field holding a delimiter
                                       // would make the text's field count differ).
    let header_text = h.repeated().iter().collect::<Vec<_>>().join(&b","[..]);
    // Commas of the records not yet ended (at most `need` of them kept: a record
    // with more is bad, and only their number is kept, in `over`), then the chunk's.
    let mut commas = vec![0usize; need + chunk + 64];
    let mut eols = vec![0usize; chunk + 64];
    let (mut held, mut over) = (0usize, 0usize);
    let mut rec_start = 0;
    let mut line = first_line; // of rec_start
    for lo in (0..piece.len()).step_by(chunk) {
        let hi = (lo + chunk).min(piece.len());
        let mut ends = 0;
        for (base, (c, e)) in delimiter_masks(&piece[lo..hi]) {
            flatten::<8>(&mut commas, &mut held, lo + base, c);
            flatten::<2>(&mut eols, &mut ends, lo + base, e);
        }
        if hi == piece.len() {
            // The piece's end ends its last record (an empty one, if a line end
            // was last: skipped below).
            eols[ends] = hi;
            ends += 1;
        }
        let mut at = 0; // the first comma of the current record
        for &end in &eols[..ends] {
            let usual = at + need <= held
                && (need == 0 || commas[at + need - 1] < end)
                && (at + need == held || commas[at + need] > end);
            let upto = if usual {
                at + need
            } else {
                at + commas[at..held].partition_point(|&c| c < end)
            };
            let n = over + (upto - at);
            let start = rec_start;
            let pos = Pos {
                line,
                byte: start as u64,
            };
            (at, over) = (upto, 0);
            line += u64::from(piece.get(end) == Some(&b'\n'));
            rec_start = end + 1;
            // A line end right after another (`\r\n`, a blank line) ends no record.
            if n == 0 && end == start {
                continue;
            }
            // Fields and commas: the record's text up to the end of its last field.
            let rec = if end - start > h.max_row {
                Err(RowProblem::TooLong { max: h.max_row })
            } else if n != need {
                Err(RowProblem::FieldCount { want, got: n + 1 })
            } else if piece[start..end] == header_text[..] {
                continue; // a repeated header
            } else {
                Ok(Fields {
                    piece,
                    start,
                    end,
                    commas: &commas[at - n..at],
                })
            };
            let rec = match rec {
                Ok(ref fields) => Ok(fields),
                Err(problem) => Err(problem),
            };
            if !f(pos, rec) {
                return;
            }
        }
        // The commas of the record that goes on into the next chunk.
        let left = held - at;
        if over + left > need {
            (over, held) = (over + left, 0);
        } else {
            commas.copy_within(at..held, 0);
            held = left;
        }
    }
}

/// Appends the position of each set bit of `mask` (plus `base`) to `out` from
/// `*len`: `UNROLL` positions are written whatever the bits (those past the set bits
/// are overwritten later), so a block with at most `UNROLL` of them costs no branch
/// that depends on the data. `out` has room for 64 positions from `*len`.
#[inline(always)]
fn flatten<const UNROLL: usize>(out: &mut [usize], len: &mut usize, base: usize, mut mask: u64) {
    let n = mask.count_ones() as usize;
    let slots = &mut out[*len..*len + 64];
    for slot in &mut slots[..UNROLL] {
        *slot = base + mask.trailing_zeros() as usize;
        mask &= mask.wrapping_sub(1);
    }
    if n > UNROLL {
        for slot in &mut slots[UNROLL..n] {
            *slot = base + mask.trailing_zeros() as usize;
            mask &= mask.wrapping_sub(1);
        }
    }
    *len += n;
}

/// The offset of each 64-byte block of `buf` and its masks of commas and of line
/// ends (`\n`, `\r`) (bit `j` for `buf[offset + j]`); the last block is padded with
/// zero bytes.
#[inline]
pub(super) fn delimiter_masks(buf: &[u8]) -> impl Iterator<Item = (usize, (u64, u64))> + '_ {
    buf.chunks(64).enumerate().map(|(k, block)| {
        let masks = match <&[u8; 64]>::try_from(block) {
            Ok(full) => delimiter_mask(full),
            Err(_) => {
                let mut padded = [0u8; 64];
                padded[..block.len()].copy_from_slice(block);
                delimiter_mask(&padded)
            }
        };
        (64 * k, masks)
    })
}

/// Bits `j` set iff `block[j]` is a comma, and iff it is a line end: SSE2, part of
/// every x86-64 CPU, compares 16 bytes at once.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(super) fn delimiter_mask(block: &[u8; 64]) -> (u64, u64) {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let (mut c, mut e) = (0u64, 0u64);
    for (k, lane) in block.chunks_exact(16).enumerate() {
        // SAFETY: SSE2 is in the x86-64 baseline, so the intrinsics exist on every CPU
        // this runs on; the unaligned load reads exactly the 16 bytes of `lane`.
        let (comma, end) = unsafe {
            let v = _mm_loadu_si128(lane.as_ptr().cast::<__m128i>());
            let comma = _mm_cmpeq_epi8(v, _mm_set1_epi8(b',' as i8));
            let end = _mm_or_si128(
                _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8)),
                _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\r' as i8)),
            );
            (
                _mm_movemask_epi8(comma) as u32 as u64,
                _mm_movemask_epi8(end) as u32 as u64,
            )
        };
        c |= comma << (16 * k);
        e |= end << (16 * k);
    }
    (c, e)
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub(super) fn delimiter_mask(block: &[u8; 64]) -> (u64, u64) {
    delimiter_mask_words(block)
}

/// [`delimiter_mask`] eight bytes per word, found with the exact zero-byte test (no
/// borrow runs into the next byte). Other CPUs use it; on x86-64 the tests check it
/// against the SSE2 masks.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline]
pub(super) fn delimiter_mask_words(block: &[u8; 64]) -> (u64, u64) {
    const LOW: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_bytes = |y: u64| !(((y & !HIGH).wrapping_add(!HIGH)) | y) & HIGH;
    let bits = |k: usize, mut z: u64| {
        let mut m = 0u64;
        while z != 0 {
            m |= 1 << (8 * k + (z.trailing_zeros() / 8) as usize);
            z &= z - 1;
        }
        m
    };
    let (mut c, mut e) = (0u64, 0u64);
    for (k, w) in block.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        c |= bits(k, zero_bytes(x ^ (LOW * b',' as u64)));
        e |= bits(
            k,
            zero_bytes(x ^ (LOW * b'\n' as u64)) | zero_bytes(x ^ (LOW * b'\r' as u64)),
        );
    }
    (c, e)
}
