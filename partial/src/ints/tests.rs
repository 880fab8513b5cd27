use std::fs::File;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::statistics::Statistics;

use crate::file::TableFile;
use crate::table::{LineRow, Table};

/// `rows` written as one `lines` file of one row group and read back with `parquet`'s
/// reader: the rows and the chunk statistics of `line`, `hits` and `rows`.
fn round_trip(rows: &[LineRow]) -> (Vec<LineRow>, Vec<Statistics>) {
    let dir = tempfile::tempdir().unwrap();
    let mut f = TableFile::<LineRow>::create(dir.path(), 0).unwrap();
    f.group(rows.len(), |rg| LineRow::write_group(rows, rg))
        .unwrap();
    let entry = f.finish().unwrap();
    let reader =
        SerializedFileReader::new(File::open(dir.path().join(&entry.name)).unwrap()).unwrap();
    let rg = reader.get_row_group(0).unwrap();
    let stats = (3..6)
        .map(|i| rg.metadata().column(i).statistics().unwrap().clone())
        .collect();
    (LineRow::read_group(rg.as_ref(), rows.len()).unwrap(), stats)
}

fn rows(lines: &[u32], hits: &[u64]) -> Vec<LineRow> {
    lines
        .iter()
        .zip(hits)
        .map(|(&line, &hits)| LineRow {
            path: "a.c".into(),
            version: "0".repeat(40),
            manager: "m".into(),
            line,
            hits,
            rows: hits.wrapping_mul(7) | 1,
        })
        .collect()
}

/// A small deterministic generator (no crate needed for a test's noise).
fn noise(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// Every length around the block and mini-block edges, with deltas that wrap at each
/// width (0 then the largest value and back), heavy tails (a huge value in a mini
/// block of small ones) and runs of equal values, reads back as written.
#[test]
fn integer_columns_read_back_at_every_block_edge_and_extreme() {
    let mut next = noise(42);
    for n in [
        1usize, 2, 3, 31, 32, 33, 64, 127, 128, 129, 130, 255, 256, 257, 1000, 8192,
    ] {
        for shape in 0..4 {
            let (lines, hits): (Vec<u32>, Vec<u64>) = (0..n)
                .map(|i| match shape {
                    // Wrapping deltas at both widths.
                    0 => {
                        if i % 2 == 0 {
                            (0, 0)
                        } else {
                            (u32::MAX, u64::MAX)
                        }
                    }
                    // Sorted lines, heavy-tailed sums.
                    1 => (
                        i as u32 + 1,
                        if i % 37 == 5 { 1 << 60 } else { next() % 50 },
                    ),
                    // Anything.
                    2 => (next() as u32, next()),
                    // Runs of one value.
                    _ => (7, 1 << 40),
                })
                .unzip();
            let want = rows(&lines, &hits);
            let (got, stats) = round_trip(&want);
            assert_eq!(got, want, "{n} values of shape {shape}");
            // Statistics in the columns' unsigned order.
            let Statistics::Int32(s) = &stats[0] else {
                panic!("{:?}", stats[0]);
            };
            assert_eq!(s.min_opt().map(|&v| v as u32), lines.iter().min().copied());
            assert_eq!(s.max_opt().map(|&v| v as u32), lines.iter().max().copied());
            let Statistics::Int64(s) = &stats[1] else {
                panic!("{:?}", stats[1]);
            };
            assert_eq!(s.min_opt().map(|&v| v as u64), hits.iter().min().copied());
            assert_eq!(s.max_opt().map(|&v| v as u64), hits.iter().max().copied());
            assert_eq!(s.null_count_opt(), Some(0));
        }
    }
}

/// The bytes of a page follow the format's layout: header, then per block the
/// smallest delta, four widths and the mini blocks (checked on a hand-made case).
#[test]
fn a_delta_page_is_laid_out_as_the_format_says() {
    let mut out = Vec::new();
    // 1, 2, 3, 10: deltas 1, 1, 7; smallest 1; above it 0, 0, 6: 3 bits.
    super::encode(&[1, 2, 3, 10], super::Width::W64, &mut out);
    let mut want = vec![0x80, 0x01, 4, 4, 2, 2, 3, 0, 0, 0];
    // 32 values of 3 bits: 0, 0, 6, then zeros: 12 bytes.
    let mut packed = vec![0u8; 12];
    packed[0] = (6u32 << 6) as u8;
    packed[1] = 6 >> 2;
    want.extend_from_slice(&packed);
    assert_eq!(out, want);
    // One value: the header only.
    out.clear();
    super::encode(&[5], super::Width::W32, &mut out);
    assert_eq!(out, vec![0x80, 0x01, 4, 1, 10]);
}
