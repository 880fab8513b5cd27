//! Reading input: opening local files or store objects, gzip detection (magic bytes,
//! multi-member streams), decompression on its own thread or inline, and CSV rows found by
//! header name with the bad-input rules of contract §6, and Go coverage (text profiles and
//! `GOCOVERDIR` directories) turned into the same rows. Every format is told, opened
//! and read through one trait and one registry ([`formats`]).
//!
//! `covmerge-input` is used by the worker (splits), the coordinator's planner and
//! publish gate, the report (reading results through [`result`]) and the CLI. It reads; it never writes, and knows nothing
//! of shards, spills or queues.

pub mod budget;
mod csv_rows;
pub mod formats;
pub mod go;
mod open;
pub mod result;

pub use formats::{detect, DetectError, Detected};

pub use csv_rows::{
    for_each_unquoted, for_each_unquoted_record, parse_count_fast, valid_file_path, valid_name,
    Columns, Fields, Groups, Header, InputError, Pos, Row, RowProblem, RowReader, MAX_ROW,
    NAMESPACE,
};
pub use open::{open_input, open_raw, ChannelReader, Inflate};
