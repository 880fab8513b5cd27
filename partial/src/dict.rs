//! A partial's string columns, written as Parquet dictionary pages from their runs.
//!
//! A partial's tables are sorted on their strings: a `lines` row group of 8,192 rows
//! holds a few paths, versions and managers, each repeated in long runs. `parquet`'s
//! column writer takes every value of every row through its dictionary's hash table and
//! its statistics' compares, one at a time. This writer looks at a run once: the column
//! chunk is one dictionary page (`PLAIN`, the distinct values in order of first
//! appearance), one data page of the values' indexes (`RLE_DICTIONARY`: the RLE /
//! bit-packed hybrid, a run of 8 or more equal indexes as one RLE run) and the chunk's
//! statistics (min and max over the dictionary, truncated to 64 bytes as `parquet`'s
//! writer truncates them). The bytes are Parquet as any reader reads it, and equal
//! strings give equal bytes whichever path wrote them (a builder's interned names or a
//! roll-up's rows).

use std::io::Write;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parquet::basic::{Compression, Encoding, EncodingMask, PageType};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::data_type::ByteArray;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{ColumnChunkMetaData, PageEncodingStats};
use parquet::file::statistics::{Statistics, ValueStatistics};
use parquet::file::writer::{SerializedPageWriter, SerializedRowGroupWriter, TrackedWrite};
use parquet::schema::types::{ColumnDescPtr, SchemaDescriptor};
use rustc_hash::FxHashMap;

use crate::table::{schema, FuncRow, LineRow, PathRow, Table, VersionRow};

/// Bytes of a statistic's min or max at most, as `parquet`'s default.
const STATISTICS_BYTES: usize = 64;
/// Groups of 8 values in one bit-packed run at most (its header then fits one byte, as
/// `parquet`'s own encoder writes them).
const MAX_GROUPS: usize = 63;

/// The column descriptors of table `T`, parsed once.
pub(crate) fn columns<T: Table>() -> &'static SchemaDescriptor {
    static LINES: OnceLock<SchemaDescriptor> = OnceLock::new();
    static FUNCS: OnceLock<SchemaDescriptor> = OnceLock::new();
    static VERSIONS: OnceLock<SchemaDescriptor> = OnceLock::new();
    static PATHS: OnceLock<SchemaDescriptor> = OnceLock::new();
    let cell = match T::NAME {
        LineRow::NAME => &LINES,
        FuncRow::NAME => &FUNCS,
        VersionRow::NAME => &VERSIONS,
        PathRow::NAME => &PATHS,
        other => unreachable!("no table is named {other}"),
    };
    cell.get_or_init(|| SchemaDescriptor::new(Arc::new(schema::<T>())))
}

/// Writes column `i` of table `T`, a string column, as the next column of `rg`, from
/// its values in row order. A value equal to the one before it (the same bytes, found
/// by pointer first) joins that value's run.
pub(crate) fn write_strings<'a, T: Table, W: Write + Send>(
    rg: &mut SerializedRowGroupWriter<'_, W>,
    i: usize,
    values: impl Iterator<Item = &'a [u8]>,
) -> Result<()> {
    let mut dict = Dictionary::default();
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for v in values {
        match runs.last_mut() {
            Some(run) if same(dict.values[run.0 as usize], v) => run.1 += 1,
            _ => runs.push((dict.index(v), 1)),
        }
    }
    let (bytes, close) = dict.chunk(columns::<T>().column(i), &runs)?;
    rg.append_column(&bytes, close)
}

fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && (a.as_ptr() == b.as_ptr() || a == b)
}

/// The distinct values of one column chunk, in order of first appearance.
#[derive(Default)]
struct Dictionary<'a> {
    index: FxHashMap<&'a [u8], u32>,
    values: Vec<&'a [u8]>,
}

impl<'a> Dictionary<'a> {
    fn index(&mut self, v: &'a [u8]) -> u32 {
        let next = self.values.len() as u32;
        *self.index.entry(v).or_insert_with(|| {
            self.values.push(v);
            next
        })
    }

    /// The column chunk of `runs` ((index, length) in row order): its bytes, from the
    /// dictionary page, and what the row group records of it.
    fn chunk(
        &self,
        descr: ColumnDescPtr,
        runs: &[(u32, u32)],
    ) -> Result<(Bytes, ColumnCloseResult)> {
        let rows: u64 = runs.iter().map(|r| u64::from(r.1)).sum();
        let mut plain = Vec::with_capacity(self.values.iter().map(|v| v.len() + 4).sum());
        for v in &self.values {
            let len = u32::try_from(v.len())
                .map_err(|_| ParquetError::General("a string of 4 GiB or more".into()))?;
            plain.extend_from_slice(&len.to_le_bytes());
            plain.extend_from_slice(v);
        }
        let width = bit_width(self.values.len().saturating_sub(1) as u32);
        let mut indexes = vec![width];
        encode_hybrid(runs, width, &mut indexes);

        let mut sink = TrackedWrite::new(Vec::new());
        let mut pages = SerializedPageWriter::new(&mut sink);
        let dict_page = pages.write_page(compressed(plain, |buf| Page::DictionaryPage {
            buf,
            num_values: self.values.len() as u32,
            encoding: Encoding::PLAIN,
            is_sorted: false,
        }))?;
        let num_values = u32::try_from(rows)
            .map_err(|_| ParquetError::General("a row group of 2^32 rows or more".into()))?;
        let data_page = pages.write_page(compressed(indexes, |buf| Page::DataPage {
            buf,
            num_values,
            encoding: Encoding::RLE_DICTIONARY,
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        }))?;
        pages.close()?;
        let bytes = Bytes::from(sink.into_inner()?);

        let metadata = ColumnChunkMetaData::builder(descr)
            .set_compression(Compression::SNAPPY)
            .set_encodings_mask(EncodingMask::new_from_encodings(
                [Encoding::PLAIN, Encoding::RLE, Encoding::RLE_DICTIONARY].iter(),
            ))
            .set_page_encoding_stats(vec![
                PageEncodingStats {
                    page_type: PageType::DICTIONARY_PAGE,
                    encoding: Encoding::PLAIN,
                    count: 1,
                },
                PageEncodingStats {
                    page_type: PageType::DATA_PAGE,
                    encoding: Encoding::RLE_DICTIONARY,
                    count: 1,
                },
            ])
            .set_total_compressed_size(
                (dict_page.compressed_size + data_page.compressed_size) as i64,
            )
            .set_total_uncompressed_size(
                (dict_page.uncompressed_size + data_page.uncompressed_size) as i64,
            )
            .set_num_values(rows as i64)
            .set_dictionary_page_offset(Some(dict_page.offset as i64))
            .set_data_page_offset(data_page.offset as i64)
            .set_statistics(self.statistics())
            .build()?;
        let close = ColumnCloseResult {
            bytes_written: bytes.len() as u64,
            rows_written: rows,
            metadata,
            bloom_filter: None,
            column_index: None,
            offset_index: None,
        };
        Ok((bytes, close))
    }

    /// Min and max over the dictionary, each cut to [`STATISTICS_BYTES`] at a character
    /// boundary (the max then raised past every string it begins), no nulls; none
    /// where the max cannot be cut.
    fn statistics(&self) -> Statistics {
        let none = || Statistics::ByteArray(ValueStatistics::new(None, None, None, Some(0), false));
        let (Some(min), Some(max)) = (self.values.iter().min(), self.values.iter().max()) else {
            return none();
        };
        let (min, min_exact) = truncate_min(min);
        let Some((max, max_exact)) = truncate_max(max) else {
            return none();
        };
        Statistics::ByteArray(
            ValueStatistics::new(
                Some(ByteArray::from(min.to_vec())),
                Some(ByteArray::from(max)),
                None,
                Some(0),
                false,
            )
            .with_min_is_exact(min_exact)
            .with_max_is_exact(max_exact),
        )
    }
}

/// The page `page` makes of `data` compressed with Snappy, as the files' codec.
pub(crate) fn compressed(data: Vec<u8>, page: impl FnOnce(Bytes) -> Page) -> CompressedPage {
    let packed = snap::raw::Encoder::new()
        .compress_vec(&data)
        .expect("a page is far below Snappy's 4 GiB limit");
    CompressedPage::new(page(Bytes::from(packed)), data.len())
}

/// Bits an index up to `max` takes.
fn bit_width(max: u32) -> u8 {
    (32 - max.leading_zeros()) as u8
}

/// The longest prefix of `v` of at most [`STATISTICS_BYTES`] ending at a character
/// boundary, and whether it is all of `v`.
fn truncate_min(v: &[u8]) -> (&[u8], bool) {
    if v.len() <= STATISTICS_BYTES {
        return (v, true);
    }
    let mut end = STATISTICS_BYTES;
    while end > 0 && (v[end] & 0xc0) == 0x80 {
        end -= 1;
    }
    (&v[..end], false)
}

/// A string at least `v` and above every string beginning with `v`'s first
/// [`STATISTICS_BYTES`] (cut at a character): that prefix with its last character that
/// has a successor raised to it and cut there, as `parquet`'s writer cuts a max. `None`
/// where there is none (a prefix of U+10FFFF only, or bytes that are not UTF-8): no
/// statistics then.
fn truncate_max(v: &[u8]) -> Option<(Vec<u8>, bool)> {
    if v.len() <= STATISTICS_BYTES {
        return Some((v.to_vec(), true));
    }
    let prefix = std::str::from_utf8(truncate_min(v).0).ok()?;
    prefix.char_indices().rev().find_map(|(at, c)| {
        let next = match c {
            '\u{d7ff}' => Some('\u{e000}'),
            c => char::from_u32(u32::from(c) + 1),
        }?;
        let mut out = prefix.as_bytes()[..at].to_vec();
        out.extend_from_slice(next.encode_utf8(&mut [0; 4]).as_bytes());
        Some((out, false))
    })
}

/// Appends the RLE / bit-packed hybrid encoding of `runs` ((value, count)) at `width`
/// bits a value: a run of 8 or more as one RLE run, shorter ones as bit-packed groups
/// of 8 (the last padded with zeros, which a reader knows from the page's value count
/// to skip).
fn encode_hybrid(runs: &[(u32, u32)], width: u8, out: &mut Vec<u8>) {
    let mut literal: Vec<u32> = Vec::new();
    for &(value, count) in runs {
        let mut count = count as usize;
        if count >= 8 {
            // Literals so far fill their last group from this run first.
            let fill = (8 - literal.len() % 8) % 8;
            literal.extend(std::iter::repeat_n(value, fill));
            count -= fill;
            flush_literal(&mut literal, width, out);
            if count >= 8 {
                write_varint((count as u64) << 1, out);
                out.extend_from_slice(&value.to_le_bytes()[..usize::from(width).div_ceil(8)]);
                count = 0;
            }
        }
        literal.extend(std::iter::repeat_n(value, count));
    }
    flush_literal(&mut literal, width, out);
}

/// Writes `literal`, padded to groups of 8, as bit-packed runs of at most
/// [`MAX_GROUPS`] groups, and empties it.
fn flush_literal(literal: &mut Vec<u32>, width: u8, out: &mut Vec<u8>) {
    if literal.is_empty() {
        return;
    }
    literal.resize(literal.len().div_ceil(8) * 8, 0);
    for run in literal.chunks(MAX_GROUPS * 8) {
        write_varint(((run.len() / 8) as u64) << 1 | 1, out);
        let (mut acc, mut bits) = (0u64, 0u32);
        for &v in run {
            acc |= u64::from(v) << bits;
            bits += u32::from(width);
            while bits >= 8 {
                out.push(acc as u8);
                acc >>= 8;
                bits -= 8;
            }
        }
        debug_assert_eq!(bits, 0, "8 values of any width fill whole bytes");
    }
    literal.clear();
}

/// Appends `v` as an unsigned LEB128 varint (Parquet's ULEB128).
pub(crate) fn write_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests;
