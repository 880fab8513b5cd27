//! The input seam: every input format behind one trait ([`Format`]), listed in one
//! registry ([`REGISTRY`]). Detection ([`detect`], [`detect_stream`]), opening
//! ([`open`]) and row reading ([`Opened::read`]) ask the registry; the worker's split,
//! the coordinator's planner and the CLI know formats only through it and through
//! [`InputFormat`], the one list of their names.
//!
//! A format reads an input in one of two ways ([`Reading`]): as CSV text, which the
//! split cuts and parses on several threads, or as rows it decodes itself
//! ([`RowSource`]), each a source line with its hits and the number of input rows
//! summed into it (1 for a raw row; more for a format whose rows are already summed).
//! A format whose rows are already summed per file version (a partial) hands over rows
//! of other kinds too ([`RowKind`]): function-name votes, and rows without a line or a
//! version; and it may say what namespace its rows are of ([`RowSource::namespace`]).
//!
//! Adding a format: a variant of [`InputFormat`] (proto), a file here implementing
//! [`Format`], and its line in [`REGISTRY`].

use std::io::Read;
use std::path::{Path, PathBuf};

pub use covmerge_proto::input::{InputFormat, InputOptions, InputSpec};

use crate::go::GoError;
use crate::InputError;

mod csv;
mod detect;
mod go_covdata;
mod go_text;
mod partial;
pub mod partial_ahead;
mod partial_store;

pub use detect::{detect, detect_stream, DetectError, Detected, Sniffed, HEAD};
pub use partial::{open_partial_shard, open_partial_shards, PartialShards};

/// Whether a store URL names a prefix read as a whole (a partial: `gs://b/day/`, or
/// its `partial.json`), not an object.
pub fn is_store_prefix(input: &str) -> bool {
    covmerge_storage::is_store_url(input)
        && (input.ends_with('/')
            || input.ends_with(&format!("/{}", covmerge_partial::desc::DESCRIPTION)))
}

/// Every format, in the order `auto` asks them: a local directory is the first
/// directory format's that claims it ([`Format::claims_dir`]), a stream the first
/// stream format's that claims its first bytes ([`Format::claims_head`]); CSV, last,
/// claims every stream.
pub static REGISTRY: &[&dyn Format] = &[
    &go_covdata::GoCovdata,
    &partial::PartialDir,
    &go_text::GoText,
    &csv::Csv,
];

/// The registered format `f` names (`None` for [`InputFormat::Auto`]).
pub fn format_of(f: InputFormat) -> Option<&'static dyn Format> {
    REGISTRY.iter().copied().find(|r| r.format() == f)
}

/// What a format whose inputs are local directories is called in messages.
#[derive(Debug, Clone, Copy)]
pub struct DirFormat {
    /// As an input's kind: "Go covdata" (`a Go covdata input must be a local directory`).
    pub named: &'static str,
    /// What a directory it claims is: "Go coverage data (no covmeta.* file)" (`a
    /// directory, and not ...`).
    pub what: &'static str,
    /// What a directory it claims looks like: "Go coverage data (GOCOVERDIR:
    /// covmeta.* files)".
    pub looks_like: &'static str,
}

/// One input format: how it is told from others, opened and read.
pub trait Format: Sync {
    /// The name it has on the command line and on the wire.
    fn format(&self) -> InputFormat;

    /// `Some` when its inputs are local directories (not streams).
    fn directory(&self) -> Option<DirFormat> {
        None
    }

    /// Whether the local directory `dir` holds this format (directory formats).
    fn claims_dir(&self, _dir: &Path) -> bool {
        false
    }

    /// Whether a decompressed stream whose first bytes are `head` (at most [`HEAD`],
    /// fewer when the stream is shorter) holds this format (stream formats).
    fn claims_head(&self, _head: &[u8]) -> bool {
        false
    }

    /// Whether its rows name no manager: they are recorded under their input's
    /// ([`InputSpec::manager`]), which the planner then checks before any work.
    fn rows_take_input_manager(&self) -> bool {
        false
    }

    /// Reads the input `input` (named so in messages), opened as `source`, with the
    /// job's `options`.
    fn read(
        &self,
        input: &str,
        source: Source,
        options: &InputOptions,
    ) -> Result<Reading, ReadError>;
}

/// An input's bytes as its format takes them.
pub enum Source {
    /// A local directory (directory formats).
    Dir(PathBuf),
    /// A decompressed stream, from its first byte.
    Stream(Box<dyn Read + Send>),
    /// A store prefix, read as a whole (partials) with the runtime its requests run
    /// on; the input names it.
    Store(tokio::runtime::Handle),
}

/// How an input's rows come out of its format.
pub enum Reading {
    /// CSV text (contract §2) from its first byte: the split cuts it into pieces and
    /// parses them on several threads.
    Csv(Box<dyn Read + Send>),
    /// Rows the format decodes itself.
    Rows(Box<dyn RowSource>),
}

impl std::fmt::Debug for Reading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reading::Csv(_) => "Reading::Csv",
            Reading::Rows(_) => "Reading::Rows",
        })
    }
}

/// What a [`LineRow`] is. A raw row is [`RowKind::Hits`]; the other kinds come from
/// formats whose rows are already summed per file version (partials, contract §10),
/// where a line's function names and the rows without a line or a version are kept
/// apart from the managers' hits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RowKind {
    /// A manager's hits on a line (`line` 0: rows without a line, contract §2).
    #[default]
    Hits,
    /// `rows` rows naming the function `func` on `line` of (`file`, `commit`): they
    /// vote for the line's name where the line lands, and count nothing else (the
    /// same rows are counted by their `Hits`). No manager, no hits.
    Votes,
    /// Rows without a line (`sl` 0) of `file`, of any manager and commit. `line` is 0.
    WithoutLine,
    /// Rows with a line whose commit does not hold `file` (no version), with their
    /// hits: lost wherever the file is at the base. No commit, no manager.
    WithoutVersion,
}

/// One row a format decodes: a source line's hits (or another [`RowKind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRow<'a> {
    /// Repository path.
    pub file: &'a str,
    /// The function the line is in.
    pub func: &'a str,
    /// 1-based line.
    pub line: u32,
    /// Hits, summed over `rows`.
    pub hits: u64,
    /// Input rows summed into this one: 1 for a raw row, more for a format whose rows
    /// are already summed. Counted as rows read.
    pub rows: u64,
    /// The row's manager, when the format records one per row (`None`: the input's,
    /// [`InputSpec::manager`]).
    pub manager: Option<&'a str>,
    /// The row's commit, when the format records one per row (`None`: the input's,
    /// [`InputSpec::commit`]).
    pub commit: Option<&'a str>,
    /// What the row is.
    pub kind: RowKind,
}

/// The namespace an input's rows are of, when its format records it (a partial's
/// description): without one, an input holds only the job's namespace (contract §2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputNamespace {
    /// The namespace of every row the input holds (`""`: made without `--namespace`).
    pub name: String,
    /// Whether the inputs it was made of had a `namespace` column.
    pub column: bool,
    /// The rows of other namespaces those inputs held (not among its rows).
    pub others: covmerge_proto::manifest::OtherNamespaces,
}

/// The bad lines of an input a format skipped (counted against `--max-bad-rows`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BadLines {
    /// Bad lines seen.
    pub count: u64,
    /// The first ones: 1-based line and problem, in input order.
    pub samples: Vec<(u64, String)>,
}

/// Returned by a row sink to stop the reading; the sink keeps its own error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

/// A row sink: called once per row, in input order.
pub type RowSink<'a> = dyn FnMut(&LineRow<'_>) -> Result<(), Stopped> + 'a;

/// The rows of an opened input, read once.
pub trait RowSource: Send {
    /// The namespace of the rows, when the format records one (`None`: the job's).
    fn namespace(&self) -> Option<&InputNamespace> {
        None
    }

    /// Calls `sink` once per row; reading stops with an error once more than
    /// `max_bad` lines were bad, and with [`ReadError::Stopped`] when `sink` says so.
    /// The bad lines returned count in the input's rows read (a partial's `rows_bad`).
    fn read_rows(
        self: Box<Self>,
        max_bad: u64,
        sink: &mut RowSink<'_>,
    ) -> Result<BadLines, ReadError>;
}

/// Why an input cannot be read. Every variant names the input (and the line, or the
/// byte of binary data, where there is one).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Opening or reading its bytes failed, or its CSV is refused.
    #[error(transparent)]
    Stream(#[from] InputError),
    /// Its Go coverage does not decode.
    #[error(transparent)]
    Go(#[from] GoError),
    /// The input as a whole is refused.
    #[error("{input}: {problem}")]
    Input {
        /// The input, as the user named it.
        input: String,
        /// What is wrong.
        problem: String,
    },
    /// The row sink stopped the reading ([`Stopped`]).
    #[error("the reading of the rows was stopped")]
    Stopped,
}

impl From<Stopped> for ReadError {
    fn from(_: Stopped) -> Self {
        ReadError::Stopped
    }
}

/// An input opened for its format.
pub struct Opened {
    input: String,
    format: &'static dyn Format,
    source: Source,
}

impl Opened {
    /// The format it is read as.
    pub fn format(&self) -> InputFormat {
        self.format.format()
    }

    /// The same input, its stream (if it is one) passed through `f` (e.g. one that
    /// fails once the task is cancelled).
    pub fn map_stream(self, f: impl FnOnce(Box<dyn Read + Send>) -> Box<dyn Read + Send>) -> Self {
        let source = match self.source {
            Source::Stream(r) => Source::Stream(f(r)),
            dir => dir,
        };
        Opened { source, ..self }
    }

    /// Its rows, as its format reads them with the job's `options`.
    pub fn read(self, options: &InputOptions) -> Result<Reading, ReadError> {
        self.format.read(&self.input, self.source, options)
    }
}

/// Opens `input` (a local path or an object-store URL) as `format` says, or as `auto`
/// finds it: a local directory by the directory formats, a stream by its first
/// decompressed bytes.
pub fn open(
    input: &str,
    format: InputFormat,
    rt: &tokio::runtime::Handle,
    inflate: crate::Inflate,
) -> Result<Opened, ReadError> {
    let local_dir = !covmerge_storage::is_store_url(input) && Path::new(input).is_dir();
    let chosen = format_of(format);
    let dir = |f: &'static dyn Format| Opened {
        input: input.to_string(),
        format: f,
        source: Source::Dir(PathBuf::from(input)),
    };
    let partial = || format_of(InputFormat::Partial).expect("partials are registered");
    let prefix = is_store_prefix(input);
    let store = |f: &'static dyn Format| Opened {
        input: input.to_string(),
        format: f,
        source: Source::Store(rt.clone()),
    };
    match chosen.and_then(|f| f.directory().map(|d| (f, d))) {
        Some((f, _)) if local_dir => return Ok(dir(f)),
        // A partial in a store: its prefix (a URL not ending in `/` names the same).
        Some((f, _))
            if f.format() == InputFormat::Partial && covmerge_storage::is_store_url(input) =>
        {
            return Ok(store(f))
        }
        Some((_, d)) => {
            return Err(ReadError::Input {
                input: input.to_string(),
                problem: format!("a {} input must be a local directory", d.named),
            })
        }
        None if chosen.is_none() && local_dir => return open_dir_auto(input).map(dir),
        None if chosen.is_none() && prefix => return Ok(store(partial())),
        None => {}
    }
    let reader = crate::open_input(input, rt, inflate)?;
    let (format, reader): (&'static dyn Format, Box<dyn Read + Send>) = match chosen {
        Some(f) => (f, reader),
        None => {
            let (f, r) = detect_stream(reader).map_err(|e| InputError::from_read(input, e))?;
            let f = format_of(f).expect("detect_stream names registered formats");
            (f, Box::new(r))
        }
    };
    Ok(Opened {
        input: input.to_string(),
        format,
        source: Source::Stream(reader),
    })
}

/// The directory format `auto` reads the local directory `input` as.
fn open_dir_auto(input: &str) -> Result<&'static dyn Format, ReadError> {
    let dirs = || REGISTRY.iter().copied().filter(|f| f.directory().is_some());
    dirs()
        .find(|f| f.claims_dir(Path::new(input)))
        .ok_or_else(|| ReadError::Input {
            input: input.to_string(),
            problem: detect::not_a_dir_input(),
        })
}

#[cfg(test)]
mod tests;
