//! syzkaller's dashboard reads the result with Go's `encoding/json` into
//! `coveragedb.HistoryRecord`, `MergedCoverageRecord` and `FuncLines`. Field names here
//! are exact and nothing else may appear. Records are written straight to the writer,
//! no `serde_json::Value` in between.

use std::io::{self, Write};

use serde::Serialize;

/// Line 1 of the output.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct HistoryRecord<'a> {
    /// `Session` (covmerge writes it empty).
    pub session: &'a str,
    /// `Time` (covmerge writes Go's zero time, `0001-01-01T00:00:00Z`).
    pub time: &'a str,
    /// The dashboard namespace.
    pub namespace: &'a str,
    /// The repository of the base.
    pub repo: &'a str,
    /// The base commit.
    pub commit: &'a str,
    /// Days the rows span.
    pub duration: i64,
    /// Last day of the rows, `YYYY-MM-DD`.
    pub date_to: &'a str,
    /// `TotalRows`: data rows read (or as `--total-rows` says).
    pub total_rows: i64,
}

/// Writes the header line (with its `\n`).
pub fn write_header<W: Write>(w: &mut W, h: &HistoryRecord<'_>) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(&mut *w, OneLine);
    h.serialize(&mut ser).map_err(io::Error::other)?;
    w.write_all(b"\n")
}

fn write_str<W: Write>(w: &mut W, s: &[u8]) -> io::Result<()> {
    let s = String::from_utf8_lossy(s);
    let mut ser = serde_json::Serializer::with_formatter(&mut *w, OneLine);
    s.as_ref().serialize(&mut ser).map_err(io::Error::other)
}

/// serde_json's compact form, with the three characters that Unicode calls line
/// breaks and JSON leaves unescaped (U+0085, U+2028, U+2029) written as `\u` escapes,
/// as Go's `encoding/json` writes U+2028 and U+2029: a reader that splits the output
/// at every line break (Python's `str.splitlines`) reads one record a line. A name
/// holding one was written raw, and such a reader saw a record cut in two.
struct OneLine;

impl serde_json::ser::Formatter for OneLine {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        // Each is led by 0xC2 or 0xE2 in UTF-8: most names have neither.
        if !fragment.bytes().any(|b| b == 0xC2 || b == 0xE2) {
            return w.write_all(fragment.as_bytes());
        }
        let mut from = 0;
        for (i, c) in fragment.char_indices() {
            let escape: &[u8] = match c {
                '\u{85}' => b"\\u0085",
                '\u{2028}' => b"\\u2028",
                '\u{2029}' => b"\\u2029",
                _ => continue,
            };
            w.write_all(&fragment.as_bytes()[from..i])?;
            w.write_all(escape)?;
            from = i + c.len_utf8();
        }
        w.write_all(&fragment.as_bytes()[from..])
    }
}

fn write_nums<W: Write, T: Copy + Into<u64>>(w: &mut W, xs: &[T]) -> io::Result<()> {
    w.write_all(b"[")?;
    let mut buf = itoa_buf();
    for (i, x) in xs.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        w.write_all(fmt_u64(&mut buf, (*x).into()))?;
    }
    w.write_all(b"]")
}

fn itoa_buf() -> [u8; 20] {
    [0u8; 20]
}

fn fmt_u64(buf: &mut [u8; 20], mut v: u64) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

/// One `{"MCR":{...},"FL":null}` line. `lines` ascending, `hits` aligned.
pub fn write_mcr<W: Write>(
    w: &mut W,
    manager: &[u8],
    file_path: &[u8],
    lines: &[u32],
    hits: &[u64],
) -> io::Result<()> {
    debug_assert_eq!(lines.len(), hits.len());
    let covered = hits.iter().filter(|&&h| h > 0).count() as u64;
    let mut buf = itoa_buf();
    w.write_all(b"{\"MCR\":{\"Manager\":")?;
    write_str(w, manager)?;
    w.write_all(b",\"FilePath\":")?;
    write_str(w, file_path)?;
    w.write_all(b",\"FileData\":{\"Instrumented\":")?;
    w.write_all(fmt_u64(&mut buf, lines.len() as u64))?;
    w.write_all(b",\"Covered\":")?;
    w.write_all(fmt_u64(&mut buf, covered))?;
    w.write_all(b",\"LinesInstrumented\":")?;
    write_nums(w, lines)?;
    w.write_all(b",\"HitCounts\":")?;
    write_nums(w, hits)?;
    w.write_all(b"}},\"FL\":null}\n")
}

/// One `{"MCR":null,"FL":{...}}` line. `lines` ascending.
pub fn write_fl<W: Write>(
    w: &mut W,
    file_path: &[u8],
    func: &[u8],
    lines: &[u32],
) -> io::Result<()> {
    w.write_all(b"{\"MCR\":null,\"FL\":{\"FilePath\":")?;
    write_str(w, file_path)?;
    w.write_all(b",\"FuncName\":")?;
    write_str(w, func)?;
    w.write_all(b",\"Lines\":")?;
    write_nums(w, lines)?;
    w.write_all(b"}}\n")
}

/// The closing line syz-covermerger prints.
pub fn totals_line(instrumented: u64, covered: u64) -> String {
    let pct = if instrumented == 0 {
        0.0
    } else {
        // As syz-covermerger computes it (the ratio, then times 100): the other
        // order rounds otherwise at some .xx5 boundaries (23 of 160: 14.38, not 14.37).
        covered as f64 / instrumented as f64 * 100.0
    };
    format!("total instrumented({instrumented}), covered({covered}), {pct:.2}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function name holding U+2028 was written raw: valid JSON, but a reader that
    /// splits at every Unicode line break (Python's `splitlines`) read the record cut in
    /// two. The three such characters JSON leaves raw are escaped; the text reads back.
    #[test]
    fn a_name_holding_a_unicode_line_separator_was_written_raw() {
        let name = "f\u{2028}g\u{85}h\u{2029}\u{e9}\u{20ac}";
        let mut v = Vec::new();
        write_fl(&mut v, "a\u{2028}.c".as_bytes(), name.as_bytes(), &[1]).unwrap();
        let text = String::from_utf8(v).unwrap();
        assert!(
            !text.contains(['\u{85}', '\u{2028}', '\u{2029}']),
            "{text:?}"
        );
        assert!(
            text.contains("f\\u2028g\\u0085h\\u2029\u{e9}\u{20ac}"),
            "{text}"
        );
        assert_eq!(text.matches('\n').count(), 1);
        let back: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(back["FL"]["FuncName"], name);
        assert_eq!(back["FL"]["FilePath"], "a\u{2028}.c");
        let mut h = Vec::new();
        let rec = HistoryRecord {
            session: "",
            time: "",
            namespace: "n\u{2029}",
            repo: "",
            commit: "",
            duration: 0,
            date_to: "",
            total_rows: 0,
        };
        write_header(&mut h, &rec).unwrap();
        assert!(String::from_utf8(h)
            .unwrap()
            .contains(r#""Namespace":"n\u2029""#));
    }

    #[test]
    fn mcr_line_is_exact() {
        let mut v = Vec::new();
        write_mcr(&mut v, b"*", b"a\"b.c", &[10, 11, 14], &[5, 0, 7]).unwrap();
        assert_eq!(
            String::from_utf8(v).unwrap(),
            "{\"MCR\":{\"Manager\":\"*\",\"FilePath\":\"a\\\"b.c\",\"FileData\":{\"Instrumented\":3,\"Covered\":2,\"LinesInstrumented\":[10,11,14],\"HitCounts\":[5,0,7]}},\"FL\":null}\n"
        );
    }

    #[test]
    fn fl_and_empty_arrays() {
        let mut v = Vec::new();
        write_fl(&mut v, b"f.c", b"fn", &[1, 2]).unwrap();
        write_mcr(&mut v, b"*", b"f.c", &[], &[]).unwrap();
        let s = String::from_utf8(v).unwrap();
        let mut it = s.lines();
        assert_eq!(
            it.next().unwrap(),
            r#"{"MCR":null,"FL":{"FilePath":"f.c","FuncName":"fn","Lines":[1,2]}}"#
        );
        assert!(it
            .next()
            .unwrap()
            .contains(r#""Instrumented":0,"Covered":0,"LinesInstrumented":[],"HitCounts":[]"#));
    }

    #[test]
    fn totals_line_format() {
        assert_eq!(
            totals_line(48, 45),
            "total instrumented(48), covered(45), 93.75%"
        );
        assert_eq!(
            totals_line(0, 0),
            "total instrumented(0), covered(0), 0.00%"
        );
    }

    /// The percentage was computed as covered × 100 / instrumented, which rounds
    /// otherwise than syz-covermerger's covered / instrumented × 100 at some .xx5
    /// boundaries; the values here are Go's `%.2f` of its expression.
    #[test]
    fn the_percentage_rounded_otherwise_than_syz_covermergers() {
        for (i, c, want) in [
            (160, 23, "14.37"),
            (160, 49, "30.63"),
            (160, 51, "31.87"),
            (320, 186, "58.13"),
            (8, 1, "12.50"),
            (32, 1, "3.12"),
        ] {
            assert_eq!(
                totals_line(i, c),
                format!("total instrumented({i}), covered({c}), {want}%")
            );
        }
    }
}
