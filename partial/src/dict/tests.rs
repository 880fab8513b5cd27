use std::fs::File;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::statistics::Statistics;

use super::*;
use crate::file::TableFile;

/// `rows` written as one `lines` file of one row group, opened with `parquet`'s reader
/// (the file stays open once its directory is gone).
fn written(rows: &[LineRow]) -> SerializedFileReader<File> {
    let dir = tempfile::tempdir().unwrap();
    let mut f = TableFile::<LineRow>::create(dir.path(), 0).unwrap();
    f.group(rows.len(), |rg| LineRow::write_group(rows, rg))
        .unwrap();
    let entry = f.finish().unwrap();
    SerializedFileReader::new(File::open(dir.path().join(&entry.name)).unwrap()).unwrap()
}

/// Writes `rows` as one `lines` file of one row group and reads it back: the rows, and
/// each string column's chunk statistics.
fn round_trip(rows: &[LineRow]) -> (Vec<LineRow>, Vec<Statistics>) {
    let reader = written(rows);
    let rg = reader.get_row_group(0).unwrap();
    let stats = (0..3)
        .map(|i| rg.metadata().column(i).statistics().unwrap().clone())
        .collect();
    (LineRow::read_group(rg.as_ref(), rows.len()).unwrap(), stats)
}

fn row(path: &str, version: &str, manager: &str, line: u32) -> LineRow {
    LineRow {
        path: path.into(),
        version: version.into(),
        manager: manager.into(),
        line,
        hits: u64::from(line) * 3,
        rows: 1,
    }
}

fn bytes_of(s: &Statistics) -> (&[u8], &[u8]) {
    match s {
        Statistics::ByteArray(v) => (v.min_bytes_opt().unwrap(), v.max_bytes_opt().unwrap()),
        other => panic!("not a string column's statistics: {other:?}"),
    }
}

#[test]
fn runs_of_every_length_and_indexes_of_every_width_read_back() {
    // Run lengths 1..=20 around the 8 that makes an RLE run, across group boundaries;
    // up to 70,000 distinct managers (indexes of 17 bits).
    for distinct in [1usize, 2, 3, 255, 256, 257, 70_000] {
        let mut rows = Vec::new();
        let mut k = 0;
        while rows.len() < 8192.min(distinct * 4).max(300) {
            let m = format!("m{}", k % distinct);
            for _ in 0..(k % 20 + 1) {
                rows.push(row("a/b.c", &"0".repeat(40), &m, rows.len() as u32 + 1));
            }
            k += 1;
        }
        if distinct == 70_000 {
            rows = (0..8192)
                .map(|i| row("p", &"1".repeat(40), &format!("m{}", i * 8), i + 1))
                .collect();
        }
        let (back, _) = round_trip(&rows);
        assert_eq!(back, rows, "{distinct} distinct values");
    }
}

#[test]
fn a_value_repeated_in_separate_runs_is_one_dictionary_entry() {
    let rows: Vec<LineRow> = (0..100)
        .map(|i| {
            row(
                "p",
                &"a".repeat(40),
                if i % 30 < 15 { "x" } else { "y" },
                i + 1,
            )
        })
        .collect();
    let reader = written(&rows);
    let rg = reader.get_row_group(0).unwrap();
    let mut pages = rg.get_column_page_reader(2).unwrap();
    let dict = pages.get_next_page().unwrap().unwrap();
    assert_eq!(dict.num_values(), 2, "x and y once each");
    assert_eq!(LineRow::read_group(rg.as_ref(), rows.len()).unwrap(), rows);
}

#[test]
fn statistics_bound_every_value_also_past_64_bytes_and_in_multibyte_text() {
    let long_ascii = "z".repeat(63) + "~~~~~";
    let long_multi = "é".repeat(40);
    let all_top = "\u{7f}".repeat(70);
    let cjk = "\u{4e2d}".repeat(30);
    let surrogate_gap = "\u{d7ff}".repeat(30);
    let mixed = "a".repeat(62) + &"\u{10ffff}".repeat(3);
    let paths = [
        "a".repeat(100),
        long_ascii,
        long_multi,
        all_top,
        cjk,
        surrogate_gap,
        mixed,
        "b".into(),
    ];
    for p in &paths {
        let rows = vec![
            row(p, &"0".repeat(40), "m", 1),
            row("a", &"0".repeat(40), "m", 2),
        ];
        let (back, stats) = round_trip(&rows);
        assert_eq!(back, rows);
        let (min, max) = bytes_of(&stats[0]);
        assert!(
            min.len() <= 64 && max.len() <= 65,
            "{p:?}: cut to 64 bytes or so"
        );
        assert!(
            std::str::from_utf8(max).is_ok(),
            "the max of {p:?} is UTF-8"
        );
        assert!(
            std::str::from_utf8(min).is_ok(),
            "the min of {p:?} is cut at a character"
        );
        for r in &rows {
            assert!(min <= r.path.as_bytes(), "min {min:?} above {:?}", r.path);
            assert!(max >= r.path.as_bytes(), "max {max:?} below {:?}", r.path);
        }
    }
}

#[test]
fn shared_and_copied_strings_write_the_same_bytes() {
    // The builder's rows share their names' bytes; a roll-up's rows own copies.
    let shared: &'static str = Box::leak("drivers/x.c".to_string().into_boxed_str());
    let dir = tempfile::tempdir().unwrap();
    let write = |values: Vec<&[u8]>, shard: u32| {
        let mut f = TableFile::<PathRow>::create(dir.path(), shard).unwrap();
        f.group(values.len(), |rg| {
            write_strings::<PathRow, _>(rg, 0, values.into_iter())?;
            for i in 1..4 {
                crate::table::write_u64::<PathRow, _>(rg, i, (0..3).map(|_| 0))?;
            }
            Ok(())
        })
        .unwrap();
        f.finish().unwrap().sha256
    };
    let copies: Vec<String> = (0..3).map(|_| shared.to_string()).collect();
    assert_eq!(
        write(vec![shared.as_bytes(); 3], 0),
        write(copies.iter().map(|s| s.as_bytes()).collect(), 1)
    );
}

#[test]
fn hybrid_runs_cut_where_the_format_says() {
    let mut out = Vec::new();
    encode_hybrid(&[(1, 3), (2, 10)], 2, &mut out);
    // 3 ones and 5 twos fill a packed group; the 5 twos left are under 8, so they are
    // packed too, in a group padded with zeros. 8 values of 2 bits: 2 bytes a group.
    let packed = |v: [u8; 8]| -> [u8; 2] {
        let x = v
            .iter()
            .enumerate()
            .fold(0u16, |a, (i, &b)| a | u16::from(b) << (2 * i));
        x.to_le_bytes()
    };
    let mut want = vec![(1 << 1) | 1];
    want.extend(packed([1, 1, 1, 2, 2, 2, 2, 2]));
    want.push((1 << 1) | 1);
    want.extend(packed([2, 2, 2, 2, 2, 0, 0, 0]));
    assert_eq!(out, want);
    let mut out = Vec::new();
    encode_hybrid(&[(1, 3), (2, 20)], 2, &mut out);
    assert_eq!(out[0], (1 << 1) | 1, "one packed group");
    assert_eq!(out[3], 15 << 1, "then an RLE run of the 15 twos left");
    assert_eq!(out[4], 2);
    assert_eq!(out.len(), 5);
}

#[test]
fn a_max_that_cannot_be_cut_gives_no_statistics_rather_than_the_whole_value() {
    let top = "\u{10ffff}".repeat(20);
    assert_eq!(truncate_max(top.as_bytes()), None);
    let rows = vec![row(&top, &"0".repeat(40), "m", 1)];
    let reader = written(&rows);
    let rg = reader.get_row_group(0).unwrap();
    let stats = rg.metadata().column(0).statistics();
    assert!(
        stats.is_none_or(|s| s.min_bytes_opt().is_none()),
        "{stats:?}"
    );
    assert_eq!(LineRow::read_group(rg.as_ref(), 1).unwrap(), rows);
}
