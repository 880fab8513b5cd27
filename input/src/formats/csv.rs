//! CSV rows (contract §2): the stream itself, which the split cuts and parses on
//! several threads with the CSV reader of [`crate::csv_rows`] (`RowReader`,
//! `for_each_unquoted_record`). The fallback of `auto`: it claims every stream.

use super::{Format, InputFormat, InputOptions, ReadError, Reading, Source};

/// syzkaller's CSV rows.
pub(super) struct Csv;

impl Format for Csv {
    fn format(&self) -> InputFormat {
        InputFormat::Csv
    }

    fn claims_head(&self, _head: &[u8]) -> bool {
        true
    }

    fn read(&self, input: &str, source: Source, _: &InputOptions) -> Result<Reading, ReadError> {
        match source {
            Source::Stream(r) => Ok(Reading::Csv(r)),
            Source::Dir(_) | Source::Store(_) => Err(ReadError::Input {
                input: input.to_string(),
                problem: "a directory is no CSV input".into(),
            }),
        }
    }
}
