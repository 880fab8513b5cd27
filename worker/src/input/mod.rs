//! Reading input: opening local files or store objects, gzip detection (magic bytes,
//! multi-member streams), decompression on its own thread or inline, and CSV rows found by
//! header name with the bad-input rules of SPEC §6.

mod csv_rows;
pub mod go;
mod open;

pub use csv_rows::{
    for_each_unquoted, for_each_unquoted_record, parse_count_fast, valid_file_path, valid_name,
    Columns, Fields, Header, InputError, Pos, Row, RowProblem, RowReader, MAX_ROW,
};
pub use open::{open_input, ChannelReader, Inflate};
