//! What a parsed Parquet footer holds in memory against its length on disk: the
//! bound a roll-up counts each open file's footer by (`FOOTER_FACTOR`). Measured on a
//! `lines`-shaped file of many one-row groups (another writer's shape: covmerge's own
//! groups hold 8,192 rows), alone in its test binary so that only it allocates.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use parquet::data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

mod counting;
use counting::{NOW, PEAK};

/// Writes `groups` one-row groups of a `lines`-shaped table to `path`, with chunk
/// statistics or without any (nor dictionary nor compression: the smallest column
/// chunk metadata, the most parsed memory a footer byte).
fn write_lines(path: &std::path::Path, groups: u32, stats: bool) {
    let schema = parse_message_type(
        "message lines { required binary file_path (UTF8); required binary version (UTF8);
         required binary manager (UTF8); required int32 line; required int64 hit_count;
         required int64 rows; }",
    )
    .unwrap();
    let props = if stats {
        WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .build()
    } else {
        WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::None)
            .set_dictionary_enabled(false)
            .set_compression(parquet::basic::Compression::UNCOMPRESSED)
            .build()
    };
    let f = std::fs::File::create(path).unwrap();
    let mut w = SerializedFileWriter::new(f, Arc::new(schema), Arc::new(props)).unwrap();
    for i in 0..groups {
        let mut rg = w.next_row_group().unwrap();
        let strings = [
            format!("drivers/net/ethernet/intel/e1000e/netdev-{i:08}.c"),
            format!("{:040x}", u64::from(i) * 7919),
            format!("ci-upstream-kasan-gce-{}", i % 50),
        ];
        for s in &strings {
            let mut c = rg.next_column().unwrap().unwrap();
            c.typed::<ByteArrayType>()
                .write_batch(&[ByteArray::from(s.as_str())], None, None)
                .unwrap();
            c.close().unwrap();
        }
        let mut c = rg.next_column().unwrap().unwrap();
        c.typed::<Int32Type>()
            .write_batch(&[i as i32 + 1], None, None)
            .unwrap();
        c.close().unwrap();
        for v in [i64::from(i) * 3, 1] {
            let mut c = rg.next_column().unwrap().unwrap();
            c.typed::<Int64Type>()
                .write_batch(&[v], None, None)
                .unwrap();
            c.close().unwrap();
        }
        rg.close().unwrap();
    }
    w.close().unwrap();
}

/// Writes one row group of a table of `columns` optional int32 columns, no
/// statistics: a footer that is mostly its schema.
fn write_wide(path: &std::path::Path, columns: u32) {
    let fields: String = (0..columns)
        .map(|i| format!("optional int32 c{i};"))
        .collect();
    let schema = parse_message_type(&format!("message wide {{ {fields} }}")).unwrap();
    let props = WriterProperties::builder()
        .set_statistics_enabled(EnabledStatistics::None)
        .set_dictionary_enabled(false)
        .build();
    let f = std::fs::File::create(path).unwrap();
    let mut w = SerializedFileWriter::new(f, Arc::new(schema), Arc::new(props)).unwrap();
    let mut rg = w.next_row_group().unwrap();
    while let Some(mut c) = rg.next_column().unwrap() {
        c.typed::<Int32Type>()
            .write_batch(&[], Some(&[0]), None)
            .unwrap();
        c.close().unwrap();
    }
    rg.close().unwrap();
    w.close().unwrap();
}

#[test]
fn a_parsed_footer_holds_at_most_footer_factor_bytes_a_byte_of_it() {
    let tmp = tempfile::tempdir().unwrap();
    for shape in ["statistics", "bare", "wide"] {
        let path = tmp.path().join(format!("lines-{shape}.parquet"));
        match shape {
            "wide" => write_wide(&path, 20_000),
            s => write_lines(&path, 20_000, s == "statistics"),
        }
        let data = std::fs::read(&path).unwrap();
        let n = data.len();
        let footer = u32::from_le_bytes(data[n - 8..n - 4].try_into().unwrap()) as usize;
        drop(data);
        let base = NOW.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let r = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        assert!(r.num_row_groups() >= 1);
        let held = NOW.load(Ordering::Relaxed) - base;
        let peak = PEAK.load(Ordering::Relaxed) - base;
        drop(r);
        eprintln!(
            "{shape}: footer {footer} bytes: held {held} ({:.2}x), peak {peak} ({:.2}x)",
            held as f64 / footer as f64,
            peak as f64 / footer as f64
        );
        assert!(footer > 1 << 20, "{footer}");
        assert!(
            peak <= covmerge_partial::FOOTER_FACTOR * footer,
            "a footer of {footer} bytes peaked at {peak} bytes parsed, past {} a byte",
            covmerge_partial::FOOTER_FACTOR
        );
    }
}
