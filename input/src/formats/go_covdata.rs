//! `GOCOVERDIR` directories of Go's binary coverage data: a local directory holding a
//! `covmeta.*` file; every meta and counter file is read ([`crate::go::covdata`]).

use std::path::{Path, PathBuf};

use super::go_text::go_rows;
use super::{
    BadLines, DirFormat, Format, InputFormat, InputOptions, ReadError, Reading, RowSink, RowSource,
    Source,
};
use crate::go::{covdata, ModuleMap};

/// A `GOCOVERDIR` directory.
pub(super) struct GoCovdata;

impl Format for GoCovdata {
    fn format(&self) -> InputFormat {
        InputFormat::GoCovdata
    }

    fn directory(&self) -> Option<DirFormat> {
        Some(DirFormat {
            named: "Go covdata",
            what: "Go coverage data (no covmeta.* file)",
            looks_like: "Go coverage data (GOCOVERDIR: covmeta.* files)",
        })
    }

    fn claims_dir(&self, dir: &Path) -> bool {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return false;
        };
        rd.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("covmeta."))
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
            Source::Dir(dir) => Ok(Reading::Rows(Box::new(DirRows {
                input: input.to_string(),
                dir,
                modules: ModuleMap::new(&options.go_modules),
            }))),
            Source::Stream(_) | Source::Store(_) => Err(ReadError::Input {
                input: input.to_string(),
                problem: "a Go covdata input must be a local directory".into(),
            }),
        }
    }
}

/// An opened directory.
struct DirRows {
    input: String,
    dir: PathBuf,
    modules: ModuleMap,
}

impl RowSource for DirRows {
    fn read_rows(self: Box<Self>, _: u64, sink: &mut RowSink<'_>) -> Result<BadLines, ReadError> {
        let (blocks, _) = covdata::read_dir(&self.dir)?;
        go_rows(&blocks, &self.input, &self.modules, sink)?;
        Ok(BadLines::default())
    }
}
