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
    serde_json::to_writer(&mut *w, h).map_err(io::Error::other)?;
    w.write_all(b"\n")
}

fn write_str<W: Write>(w: &mut W, s: &[u8]) -> io::Result<()> {
    let s = String::from_utf8_lossy(s);
    serde_json::to_writer(&mut *w, s.as_ref()).map_err(io::Error::other)
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
        covered as f64 * 100.0 / instrumented as f64
    };
    format!("total instrumented({instrumented}), covered({covered}), {pct:.2}%")
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
