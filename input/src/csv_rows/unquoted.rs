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

/// The fields of one record of a piece, as byte ranges of the piece.
#[derive(Clone, Copy)]
pub struct Fields<'a> {
    piece: &'a [u8],
    spans: &'a [(usize, usize)],
}

impl<'a> Fields<'a> {
    /// The `i`-th field.
    #[inline]
    pub fn get(&self, i: usize) -> &'a [u8] {
        let (a, b) = self.spans[i];
        &self.piece[a..b]
    }

    /// The row these fields hold, checked as contract §6 says ([`for_each_unquoted`]'s row).
    pub fn row(&self, h: &Header) -> Result<Row<'a>, RowProblem> {
        row_of(&h.cols, &h.groups, |i| self.get(i))
    }
}

/// [`for_each_unquoted`] without the checks of the fields themselves: `f` gets the
/// fields of each record with the right number of fields (not a repeated header, not
/// over the cap), or the problem of one without. Callers that look each field up in
/// a table check a value once, when it is first seen ([`valid_file_path`],
/// [`valid_name`], [`parse_count_fast`]), and build the problem of a bad row with
/// [`Fields::row`].
pub fn for_each_unquoted_record(
    h: &Header,
    piece: &[u8],
    first_line: u64,
    mut f: impl FnMut(Pos, Result<Fields<'_>, RowProblem>) -> bool,
) {
    debug_assert!(!piece.contains(&b'"'));
    let want = h.record.len();
    let mut fields: Vec<(usize, usize)> = Vec::with_capacity(want + 1);
    let mut start = 0; // of the current field
    let mut rec_start = 0;
    let mut line = first_line; // of rec_start
    let mut record = |fields: &[(usize, usize)], rec_start: usize, line: u64| -> bool {
        let pos = Pos {
            line,
            byte: rec_start as u64,
        };
        // Fields and commas: the record's text up to the end of its last field.
        let end = fields.last().map_or(rec_start, |&(_, b)| b);
        if end - rec_start > h.max_row {
            return f(pos, Err(RowProblem::TooLong { max: h.max_row }));
        }
        if fields.len() != want {
            return f(
                pos,
                Err(RowProblem::FieldCount {
                    want,
                    got: fields.len(),
                }),
            );
        }
        let fields = Fields {
            piece,
            spans: fields,
        };
        if fields.get(0) == &h.record[0] && (1..want).all(|i| fields.get(i) == &h.record[i]) {
            return true; // a repeated header
        }
        f(pos, Ok(fields))
    };
    // The delimiters, walked bit by bit in each 64-byte block's mask, inline: a
    // callback per delimiter (seven a row) cost a call, and a fifth of the parse in
    // saving and restoring registers.
    for (base, mut m) in delimiter_masks(piece) {
        while m != 0 {
            let i = base + m.trailing_zeros() as usize;
            m &= m - 1;
            if piece[i] == b',' {
                fields.push((start, i));
                start = i + 1;
                continue;
            }
            if !(fields.is_empty() && start == i) {
                fields.push((start, i));
                if !record(&fields, rec_start, line) {
                    return;
                }
            }
            fields.clear();
            if piece[i] == b'\n' {
                line += 1;
            }
            start = i + 1;
            rec_start = i + 1;
        }
    }
    if start < piece.len() || !fields.is_empty() {
        fields.push((start, piece.len()));
        record(&fields, rec_start, line);
    }
}

/// The offset of each 64-byte block of `buf` and its mask of `,`, `\n` and `\r` (bit
/// `j` for `buf[offset + j]`); the last block is padded with zero bytes. A mask costs a
/// few instructions per delimiter to walk, where an iterator of SIMD searches pays a
/// call and a restart for each (rows have one every ~20 bytes).
#[inline]
pub(super) fn delimiter_masks(buf: &[u8]) -> impl Iterator<Item = (usize, u64)> + '_ {
    buf.chunks(64).enumerate().map(|(k, block)| {
        let mask = match <&[u8; 64]>::try_from(block) {
            Ok(full) => delimiter_mask(full),
            Err(_) => {
                let mut padded = [0u8; 64];
                padded[..block.len()].copy_from_slice(block);
                delimiter_mask(&padded)
            }
        };
        (64 * k, mask)
    })
}

/// Bit `j` set iff `block[j]` is a delimiter: SSE2, part of every x86-64 CPU, compares
/// 16 bytes at once.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(super) fn delimiter_mask(block: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let mut m = 0u64;
    for (k, lane) in block.chunks_exact(16).enumerate() {
        // SAFETY: SSE2 is in the x86-64 baseline, so the intrinsics exist on every CPU
        // this runs on; the unaligned load reads exactly the 16 bytes of `lane`.
        let bits = unsafe {
            let v = _mm_loadu_si128(lane.as_ptr().cast::<__m128i>());
            let hit = _mm_or_si128(
                _mm_or_si128(
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(b',' as i8)),
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8)),
                ),
                _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\r' as i8)),
            );
            _mm_movemask_epi8(hit) as u32 as u64
        };
        m |= bits << (16 * k);
    }
    m
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub(super) fn delimiter_mask(block: &[u8; 64]) -> u64 {
    delimiter_mask_words(block)
}

/// Bit `j` set iff `block[j]` is a delimiter: eight bytes per word, found with the
/// exact zero-byte test (no borrow runs into the next byte). Other CPUs use it; on
/// x86-64 the tests check it against the SSE2 mask.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline]
pub(super) fn delimiter_mask_words(block: &[u8; 64]) -> u64 {
    const LOW: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_bytes = |y: u64| !(((y & !HIGH).wrapping_add(!HIGH)) | y) & HIGH;
    let mut m = 0u64;
    for (k, w) in block.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        let mut z = zero_bytes(x ^ (LOW * b',' as u64))
            | zero_bytes(x ^ (LOW * b'\n' as u64))
            | zero_bytes(x ^ (LOW * b'\r' as u64));
        while z != 0 {
            m |= 1 << (8 * k + (z.trailing_zeros() / 8) as usize);
            z &= z - 1;
        }
    }
    m
}
