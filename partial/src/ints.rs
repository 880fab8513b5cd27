//! A partial's integer columns (`UINT32` lines, `UINT64` sums), written as one
//! `DELTA_BINARY_PACKED` data page per column chunk.
//!
//! `parquet`'s column writer takes every value through its generic encoder, its page
//! statistics and its page index, a few hundred instructions a value on a day's
//! partial; this writer makes the page in one pass over the values, with the same
//! encoding (blocks of 128 values, four mini blocks of 32, each bit-packed at the width
//! of its largest delta above the block's smallest) and the chunk's min and max as
//! statistics. Like the string columns (`dict.rs`), no page statistics or page index.

use std::io::Write;

use bytes::Bytes;
use parquet::basic::{Compression, Encoding, EncodingMask, PageType};
use parquet::column::page::{Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{ColumnChunkMetaData, PageEncodingStats};
use parquet::file::statistics::{Statistics, ValueStatistics};
use parquet::file::writer::{SerializedPageWriter, SerializedRowGroupWriter, TrackedWrite};

use crate::dict::{columns, compressed, write_varint};
use crate::table::Table;

/// Values of a block.
const BLOCK: usize = 128;
/// Mini blocks of a block.
const MINI_BLOCKS: usize = 4;
/// Values of a mini block.
const MINI: usize = BLOCK / MINI_BLOCKS;

/// The physical width of a column: `UINT32` is stored in `INT32`, `UINT64` in
/// `INT64`, bit for bit; deltas wrap at that width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Width {
    /// `INT32`.
    W32,
    /// `INT64`.
    W64,
}

impl Width {
    /// `a - b` at this width, sign-extended.
    fn delta(self, a: u64, b: u64) -> i64 {
        match self {
            Width::W32 => (a as i32).wrapping_sub(b as i32) as i64,
            Width::W64 => (a as i64).wrapping_sub(b as i64),
        }
    }

    /// `a - b` at this width, as the unsigned value packed.
    fn above(self, a: i64, b: i64) -> u64 {
        match self {
            Width::W32 => (a as i32).wrapping_sub(b as i32) as u32 as u64,
            Width::W64 => a.wrapping_sub(b) as u64,
        }
    }
}

/// Writes column `i` of table `T`, an integer column of `width`, as the next column of
/// `rg`, from its values in row order (`UINT32` values below 2^32).
pub(crate) fn write_ints<T: Table, W: Write + Send>(
    rg: &mut SerializedRowGroupWriter<'_, W>,
    i: usize,
    width: Width,
    values: impl Iterator<Item = u64>,
) -> Result<()> {
    let values: Vec<u64> = values.collect();
    let (bytes, close) = chunk(columns::<T>().column(i), width, &values)?;
    rg.append_column(&bytes, close)
}

/// The column chunk of `values`: its bytes and what the row group records of it.
fn chunk(
    descr: parquet::schema::types::ColumnDescPtr,
    width: Width,
    values: &[u64],
) -> Result<(Bytes, ColumnCloseResult)> {
    let num_values = u32::try_from(values.len())
        .map_err(|_| ParquetError::General("a row group of 2^32 rows or more".into()))?;
    let mut data = Vec::with_capacity(values.len() * 2 + 16);
    encode(values, width, &mut data);
    let page = compressed(data, |buf| Page::DataPage {
        buf,
        num_values,
        encoding: Encoding::DELTA_BINARY_PACKED,
        def_level_encoding: Encoding::RLE,
        rep_level_encoding: Encoding::RLE,
        statistics: None,
    });
    let mut sink = TrackedWrite::new(Vec::new());
    let mut pages = SerializedPageWriter::new(&mut sink);
    let data_page = pages.write_page(page)?;
    pages.close()?;
    let bytes = Bytes::from(sink.into_inner()?);
    let metadata = ColumnChunkMetaData::builder(descr)
        .set_compression(Compression::SNAPPY)
        .set_encodings_mask(EncodingMask::new_from_encodings(
            [Encoding::RLE, Encoding::DELTA_BINARY_PACKED].iter(),
        ))
        .set_page_encoding_stats(vec![PageEncodingStats {
            page_type: PageType::DATA_PAGE,
            encoding: Encoding::DELTA_BINARY_PACKED,
            count: 1,
        }])
        .set_total_compressed_size(data_page.compressed_size as i64)
        .set_total_uncompressed_size(data_page.uncompressed_size as i64)
        .set_num_values(values.len() as i64)
        .set_data_page_offset(data_page.offset as i64)
        .set_statistics(statistics(width, values))
        .build()?;
    let close = ColumnCloseResult {
        bytes_written: bytes.len() as u64,
        rows_written: values.len() as u64,
        metadata,
        bloom_filter: None,
        column_index: None,
        offset_index: None,
    };
    Ok((bytes, close))
}

/// Min and max (unsigned order, as the columns' logical types sort), no nulls.
fn statistics(width: Width, values: &[u64]) -> Statistics {
    let min = values.iter().copied().min();
    let max = values.iter().copied().max();
    match width {
        Width::W32 => Statistics::Int32(ValueStatistics::new(
            min.map(|v| v as i32),
            max.map(|v| v as i32),
            None,
            Some(0),
            false,
        )),
        Width::W64 => Statistics::Int64(ValueStatistics::new(
            min.map(|v| v as i64),
            max.map(|v| v as i64),
            None,
            Some(0),
            false,
        )),
    }
}

/// Appends the `DELTA_BINARY_PACKED` encoding of `values`: the header (block size,
/// mini blocks, value count, first value), then each block of the deltas that follow:
/// its smallest delta, its mini blocks' bit widths, the mini blocks (the last one padded
/// with zeros; mini blocks past the values get width 0 and no bytes).
pub(crate) fn encode(values: &[u64], width: Width, out: &mut Vec<u8>) {
    write_varint(BLOCK as u64, out);
    write_varint(MINI_BLOCKS as u64, out);
    write_varint(values.len() as u64, out);
    let Some(&first) = values.first() else {
        write_varint(0, out);
        return;
    };
    let first_signed = match width {
        Width::W32 => first as i32 as i64,
        Width::W64 => first as i64,
    };
    write_zigzag(first_signed, out);
    let mut deltas = [0i64; BLOCK];
    let mut prev = first;
    for block in values[1..].chunks(BLOCK) {
        let deltas = &mut deltas[..block.len()];
        let mut min = i64::MAX;
        for (d, &v) in deltas.iter_mut().zip(block) {
            *d = width.delta(v, prev);
            min = min.min(*d);
            prev = v;
        }
        write_zigzag(min, out);
        let widths_at = out.len();
        out.resize(widths_at + MINI_BLOCKS, 0);
        for (m, mini) in deltas.chunks(MINI).enumerate() {
            // The values above the smallest delta, zeros past the last; the widest's
            // bits are those of all of them or-ed.
            let mut above = [0u64; MINI];
            let mut any = 0u64;
            for (a, &d) in above.iter_mut().zip(mini) {
                *a = width.above(d, min);
                any |= *a;
            }
            let bits = 64 - any.leading_zeros();
            out[widths_at + m] = bits as u8;
            pack(&above, bits, out);
        }
    }
}

/// Appends `values` at `bits` bits each, least significant bit first (32 values of
/// any width fill whole bytes: `4 * bits`).
fn pack(values: &[u64; MINI], bits: u32, out: &mut Vec<u8>) {
    if bits == 0 {
        return;
    }
    let start = out.len();
    out.resize(start + MINI / 8 * bits as usize, 0);
    let dst = &mut out[start..];
    let (mut acc, mut held, mut at) = (0u64, 0u32, 0usize);
    for &v in values {
        acc |= v << held;
        let room = 64 - held;
        if bits >= room {
            dst[at..at + 8].copy_from_slice(&acc.to_le_bytes());
            at += 8;
            acc = if room < 64 { v >> room } else { 0 };
            held = bits - room;
        } else {
            held += bits;
        }
    }
    let rest = (held / 8) as usize;
    dst[at..at + rest].copy_from_slice(&acc.to_le_bytes()[..rest]);
    debug_assert_eq!(at + rest, dst.len());
}

fn write_zigzag(v: i64, out: &mut Vec<u8>) {
    write_varint(((v << 1) ^ (v >> 63)) as u64, out);
}

#[cfg(test)]
mod tests;
