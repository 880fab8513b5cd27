//! An input that cannot be read at all, as opposed to one bad row.

use std::io;

/// An input that cannot be read at all (as opposed to one bad row).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The input could not be opened.
    #[error("{input}: cannot open: {source}")]
    Open {
        /// The input, as the user named it.
        input: String,
        /// Why it could not be opened.
        #[source]
        source: io::Error,
    },
    /// Reading the input's bytes failed (not a decoding error).
    #[error("{input}: reading: {source}")]
    Stream {
        /// The input, as the user named it.
        input: String,
        /// The read error.
        #[source]
        source: io::Error,
    },
    /// The header lacks a column contract §2 requires.
    #[error("{input}: required column `{column}` missing from the header")]
    MissingColumn {
        /// The input, as the user named it.
        input: String,
        /// The column's name.
        column: &'static str,
    },
    /// Which of the two would be the column is a guess: the input is refused.
    #[error("{input}:1: column `{column}` appears more than once in the header (fields {first} and {second})")]
    RepeatedColumn {
        /// The input, as the user named it.
        input: String,
        /// The column's name.
        column: &'static str,
        /// Its first field, counting from 1.
        first: usize,
        /// Its second field, counting from 1.
        second: usize,
    },
    /// The header has a `namespace` column (syzkaller's shared table of every
    /// namespace's rows) and the job was given no `--namespace` to choose its rows.
    #[error("{input}:1: the header has a `namespace` column (a table of several namespaces' rows): give --namespace NS to merge the rows of NS (it names the header's Namespace too)")]
    NamespaceNotGiven {
        /// The input, as the user named it.
        input: String,
    },
    /// Not even a header row.
    #[error("{input}: empty input, expected a header row")]
    Empty {
        /// The input, as the user named it.
        input: String,
    },
    /// The input's bytes are not valid gzip (or the stream ends early).
    #[error("{input}: at byte {offset}{}: {problem}", if *gzip { " of the gzip stream" } else { "" })]
    Decode {
        /// The input, as the user named it.
        input: String,
        /// Offset of the problem in the raw bytes.
        offset: u64,
        /// Whether the bytes were a gzip stream.
        gzip: bool,
        /// What the decoder found.
        problem: String,
    },
    /// The CSV could not be read at a line (a read error there, a header row past the cap).
    #[error("{input}:{line}: {problem}")]
    Read {
        /// The input, as the user named it.
        input: String,
        /// The record's line, counting from 1.
        line: u64,
        /// What is wrong with it.
        problem: String,
    },
}

impl InputError {
    /// An error reading `input`'s bytes: its offset when the decoder knows it.
    pub fn from_read(input: &str, e: io::Error) -> Self {
        if let Some(d) = e
            .get_ref()
            .and_then(|x| x.downcast_ref::<crate::open::DecodeFailure>())
        {
            return InputError::Decode {
                input: input.to_string(),
                offset: d.offset,
                gzip: d.gzip,
                problem: d.problem.clone(),
            };
        }
        InputError::Stream {
            input: input.to_string(),
            source: e,
        }
    }
}

pub(super) fn read_err(name: &str, e: &csv::Error) -> InputError {
    let line = e.position().map(|p| p.line()).unwrap_or(0);
    let problem = match e.kind() {
        csv::ErrorKind::Io(io) => io.to_string(),
        _ => e.to_string(),
    };
    InputError::Read {
        input: name.to_string(),
        line,
        problem,
    }
}
