//! Go text profiles (`go test -coverprofile`): told by their first line, `mode: `;
//! their blocks become one row per covered source line ([`crate::go`]).

use std::io::{BufReader, Read};

use super::{
    BadLines, Format, InputFormat, InputOptions, LineRow, ReadError, Reading, RowKind, RowSink,
    RowSource, Source,
};
use crate::go::{text, Blocks, ModuleMap};

/// A Go text profile.
pub(super) struct GoText;

impl Format for GoText {
    fn format(&self) -> InputFormat {
        InputFormat::GoText
    }

    fn claims_head(&self, head: &[u8]) -> bool {
        text::looks_like_profile(head)
    }

    fn rows_take_input_manager(&self) -> bool {
        true
    }

    fn read(
        &self,
        input: &str,
        source: Source,
        options: &InputOptions,
    ) -> Result<Reading, ReadError> {
        match source {
            Source::Stream(stream) => Ok(Reading::Rows(Box::new(TextRows {
                input: input.to_string(),
                stream,
                modules: ModuleMap::new(&options.go_modules),
            }))),
            Source::Dir(_) | Source::Store(_) => Err(ReadError::Input {
                input: input.to_string(),
                problem: "a directory is no Go text profile".into(),
            }),
        }
    }
}

/// An opened profile.
struct TextRows {
    input: String,
    stream: Box<dyn Read + Send>,
    modules: ModuleMap,
}

impl RowSource for TextRows {
    fn read_rows(
        self: Box<Self>,
        max_bad: u64,
        sink: &mut RowSink<'_>,
    ) -> Result<BadLines, ReadError> {
        let r = BufReader::with_capacity(1 << 16, self.stream);
        let prof = text::read_profile(&self.input, r, max_bad)?;
        go_rows(&prof.blocks, &self.input, &self.modules, sink)?;
        Ok(BadLines {
            count: prof.bad,
            samples: prof.bad_samples,
        })
    }
}

/// Hands every covered source line of `blocks` to `sink` as a row of its input's
/// manager and commit (Go coverage names neither).
pub(super) fn go_rows(
    blocks: &Blocks,
    input: &str,
    modules: &ModuleMap,
    sink: &mut RowSink<'_>,
) -> Result<(), ReadError> {
    blocks.for_each_line(input, modules, |file, func, line, hits| {
        sink(&LineRow {
            file,
            func,
            line,
            hits,
            rows: 1,
            manager: None,
            commit: None,
            kind: RowKind::Hits,
        })
        .map_err(ReadError::from)
    })
}
