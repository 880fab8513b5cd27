//! Kernel-like C source: the line [`Arena`] every file version lives in, the word
//! tables ([`words`]), the generator of files and their edits between commits
//! ([`generate`]) and the parser that finds functions and instrumented lines
//! ([`parse`]).

mod generate;
mod parse;
mod words;

pub(crate) use generate::{choose_paths, FileGen};
pub(crate) use parse::{code_ratio, instrumented, parse_funcs, Instr};

/// Append-only store of every line ever generated. A file version is a list
/// of line ids into it, so unchanged lines are shared between versions.
#[derive(Default)]
pub(crate) struct Arena {
    text: String,
    starts: Vec<usize>,
}

impl Arena {
    pub(crate) fn push(&mut self, line: &str) -> u32 {
        let id = self.starts.len() as u32;
        self.starts.push(self.text.len());
        self.text.push_str(line);
        id
    }

    pub(crate) fn get(&self, id: u32) -> &str {
        let i = id as usize;
        let start = self.starts[i];
        let end = self.starts.get(i + 1).copied().unwrap_or(self.text.len());
        &self.text[start..end]
    }

    /// Renders a version as file text (every line newline-terminated).
    pub(crate) fn render(&self, lines: &[u32]) -> Vec<u8> {
        let mut out = Vec::with_capacity(lines.len() * 32);
        for &id in lines {
            out.extend_from_slice(self.get(id).as_bytes());
            out.push(b'\n');
        }
        out
    }
}
