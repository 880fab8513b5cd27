//! What an input holds, told from its first bytes: the one place covmerge sniffs
//! formats. The planner asks [`detect`] of a local path before any work (to estimate
//! rows from gzip'd or plain bytes, and to refuse a directory that is not Go coverage
//! data); a split asks [`detect_stream`] of the stream it opened, decompressed, and
//! reads on from the same bytes.

use std::io::{self, Read};
use std::path::Path;

/// The content of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// A `GOCOVERDIR` directory (Go's binary coverage data: `covmeta.*` files).
    GoCovdata,
    /// A Go text profile (`go test -coverprofile`: it starts with `mode: `).
    GoText,
    /// syzkaller's CSV rows.
    Csv,
}

/// A local input as [`detect`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detected {
    /// What the input holds.
    pub kind: InputKind,
    /// A gzip stream (its first bytes are gzip's magic).
    pub gzip: bool,
    /// Bytes on disk: the file's size, or the sum of a directory's files.
    pub bytes: u64,
}

/// Why a local path is no input.
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    /// The path could not be read.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// A directory without a `covmeta.*` file.
    #[error("a directory, and not Go coverage data (no covmeta.* file)")]
    NotCovdata,
    /// Neither a regular file nor a directory (a socket, a device, ...).
    #[error("not a file")]
    NotAFile,
}

/// Gzip's magic bytes.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Whether `path` is a local directory holding at least one `covmeta.*` file.
pub fn is_covdata_dir(path: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(path) else {
        return false;
    };
    rd.flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("covmeta."))
}

/// What the local file or directory at `path` holds, from its first bytes (a gzip'd
/// file's first decompressed bytes): a directory is Go covdata or refused, a stream
/// starting `mode: ` a Go text profile, anything else CSV.
pub fn detect(path: &Path) -> Result<Detected, DetectError> {
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        if !is_covdata_dir(path) {
            return Err(DetectError::NotCovdata);
        }
        let bytes = std::fs::read_dir(path)?
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum();
        return Ok(Detected {
            kind: InputKind::GoCovdata,
            gzip: false,
            bytes,
        });
    }
    if !meta.is_file() {
        return Err(DetectError::NotAFile);
    }
    let mut file = std::fs::File::open(path)?;
    let mut magic = Vec::with_capacity(2);
    (&mut file).take(2).read_to_end(&mut magic)?;
    let gzip = magic == GZIP_MAGIC;
    let rest = std::io::Cursor::new(magic).chain(file);
    // A gzip stream too damaged to give its first bytes is CSV here: the split that
    // reads it names the input and the byte where it breaks.
    let head: Box<dyn Read> = if gzip {
        Box::new(flate2::read::MultiGzDecoder::new(rest))
    } else {
        Box::new(rest)
    };
    let kind = match detect_stream(head) {
        Ok((kind, _)) => kind,
        Err(_) if gzip => InputKind::Csv,
        Err(e) => return Err(e.into()),
    };
    Ok(Detected {
        kind,
        gzip,
        bytes: meta.len(),
    })
}

/// A stream whose first bytes were read to sniff it, handed back in front of the rest.
pub type Sniffed<R> = io::Chain<io::Cursor<Vec<u8>>, R>;

/// What an opened (decompressed) stream holds, Go text or CSV, from its first bytes,
/// and the stream with those bytes handed back in front of the rest.
pub fn detect_stream<R: Read>(mut reader: R) -> io::Result<(InputKind, Sniffed<R>)> {
    let mut head = Vec::with_capacity(8);
    (&mut reader).take(6).read_to_end(&mut head)?;
    let kind = if crate::go::text::looks_like_profile(&head) {
        InputKind::GoText
    } else {
        InputKind::Csv
    };
    Ok((kind, io::Cursor::new(head).chain(reader)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn files_directories_gzip_and_go_text_are_told_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let p = |n: &str| tmp.path().join(n);
        let csv = b"kernel_repo,kernel_commit\n".to_vec();
        let text = b"mode: set\nx.go:1.1,2.2 1 1\n".to_vec();
        std::fs::write(p("a.csv"), &csv).unwrap();
        std::fs::write(p("a.csv.gz"), gz(&csv)).unwrap();
        std::fs::write(p("t.out"), &text).unwrap();
        std::fs::write(p("t.out.gz"), gz(&text)).unwrap();
        std::fs::write(p("empty"), b"").unwrap();
        std::fs::write(p("broken.gz"), [0x1f, 0x8b, 0, 1, 2]).unwrap();
        std::fs::create_dir(p("cov")).unwrap();
        std::fs::write(p("cov/covmeta.abc"), b"xyz").unwrap();
        std::fs::create_dir(p("plain")).unwrap();
        let d = |n: &str| detect(&p(n)).map(|d| (d.kind, d.gzip, d.bytes));
        assert_eq!(
            d("a.csv").unwrap(),
            (InputKind::Csv, false, csv.len() as u64)
        );
        assert_eq!(d("a.csv.gz").unwrap().0, InputKind::Csv);
        assert!(d("a.csv.gz").unwrap().1);
        assert_eq!(d("t.out").unwrap().0, InputKind::GoText);
        assert_eq!(d("t.out.gz").unwrap().0, InputKind::GoText);
        assert_eq!(d("empty").unwrap(), (InputKind::Csv, false, 0));
        assert_eq!(d("broken.gz").unwrap(), (InputKind::Csv, true, 5));
        assert_eq!(d("cov").unwrap(), (InputKind::GoCovdata, false, 3));
        assert!(matches!(detect(&p("plain")), Err(DetectError::NotCovdata)));
        assert!(matches!(detect(&p("missing")), Err(DetectError::Io(_))));
        assert!(matches!(
            detect(Path::new("/dev/null")),
            Err(DetectError::NotAFile)
        ));
    }

    #[test]
    fn a_detected_stream_reads_from_its_first_byte() {
        for data in [&b"mode: count\nrest"[..], b"a,b\n1,2\n", b"mo", b""] {
            let (_, mut r) = detect_stream(data).unwrap();
            let mut all = Vec::new();
            r.read_to_end(&mut all).unwrap();
            assert_eq!(all, data);
        }
    }
}
