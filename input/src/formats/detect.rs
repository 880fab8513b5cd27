//! What an input holds, told from its first bytes by the registered formats: the one
//! place covmerge sniffs formats. The planner asks [`detect`] of a local path before any work (to estimate
//! rows from gzip'd or plain bytes, and to refuse a directory that is not Go coverage
//! data); a split asks [`detect_stream`] of the stream it opened, decompressed, and
//! reads on from the same bytes.

use std::io::{self, Read};
use std::path::Path;

use super::{InputFormat, REGISTRY};

/// A local input as [`detect`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detected {
    /// What the input holds (never [`InputFormat::Auto`]).
    pub kind: InputFormat,
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
    /// A directory no directory format claims (without a `covmeta.*` file).
    #[error("{}", not_a_dir_input())]
    NotADirInput,
    /// Neither a regular file nor a directory (a socket, a device, ...).
    #[error("not a file")]
    NotAFile,
}

/// Gzip's magic bytes.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Why a directory is no input: "a directory, and not" what each directory format
/// reads.
pub(super) fn not_a_dir_input() -> String {
    let what: Vec<&str> = REGISTRY
        .iter()
        .filter_map(|f| f.directory().map(|d| d.what))
        .collect();
    format!("a directory, and not {}", what.join(" or "))
}

/// What the local file or directory at `path` holds, from its first bytes (a gzip'd
/// file's first decompressed bytes): a directory is a directory format's that claims
/// it (Go covdata) or refused, a stream the first stream format's that claims its
/// first bytes (`mode: `: a Go text profile), anything else CSV.
pub fn detect(path: &Path) -> Result<Detected, DetectError> {
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        let format = REGISTRY
            .iter()
            .find(|f| f.directory().is_some() && f.claims_dir(path))
            .ok_or(DetectError::NotADirInput)?;
        let bytes = std::fs::read_dir(path)?
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum();
        return Ok(Detected {
            kind: format.format(),
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
        Err(_) if gzip => InputFormat::Csv,
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

/// The most first bytes of a stream a format is told from.
pub const HEAD: usize = 6;

/// What an opened (decompressed) stream holds, from its first bytes: the first stream
/// format that claims them (Go text), else CSV; and the stream with those bytes
/// handed back in front of the rest.
pub fn detect_stream<R: Read>(mut reader: R) -> io::Result<(InputFormat, Sniffed<R>)> {
    let mut head = Vec::with_capacity(HEAD + 2);
    (&mut reader).take(HEAD as u64).read_to_end(&mut head)?;
    let kind = REGISTRY
        .iter()
        .find(|f| f.directory().is_none() && f.claims_head(&head))
        .map_or(InputFormat::Csv, |f| f.format());
    Ok((kind, io::Cursor::new(head).chain(reader)))
}
