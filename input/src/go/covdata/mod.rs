//! Go's binary coverage data (Go ≥ 1.20, `GOCOVERDIR`), decoded from the file format of
//! Go's `internal/coverage` (meta-data and counter-data files, version 1):
//!
//! - `covmeta.<hash>`: a 56-byte header (magic `\0cvm`, version, total length, number of
//!   packages, hash, string table offset and length, counter mode, granularity), package
//!   offsets and lengths (u64 each), a file-level string table, then one blob per
//!   package: a 44-byte header (length, package name/path/module as string indexes,
//!   hash, number of files and functions), function offsets (u32), the package's string
//!   table (ULEB128 count, then ULEB128 length + bytes each), and per function ULEB128
//!   values: number of units, name, file, then per unit start line, start column, end
//!   line, end column, statements, and a literal flag.
//! - `covcounters.<hash>.<pid>.<nanotime>`: a 32-byte header (magic `\0cwm`, version,
//!   meta hash, counter flavor, big-endian flag), segments (a 16-byte header with the
//!   number of function entries and the string/args table lengths, the tables, padding
//!   to 4 bytes, then per function: number of counters, package index, function index,
//!   counters; u32 in the raw flavor, ULEB128 in the other), each followed by a 16-byte
//!   footer (magic, number of segments so far).
//!
//! Everything is checked against the bytes actually there: every length before it is
//! used, every index, every ULEB128 (at most 32 bits). A bad file is an error naming it
//! and the byte offset; nothing allocates more than the file's own size allows.
//!
//! The rooms: [`reader`] (the bounds-checked reader every decoder uses), [`meta`]
//! (meta-data files), [`counters`] (counter-data files, both flavors), [`dir`] (a
//! whole `GOCOVERDIR`, counters summed per unit), [`encode`] (the format as Go writes
//! it, for tests and benchmarks).

use super::{GoError, Mode, Pos};

mod counters;
mod dir;
#[doc(hidden)]
pub mod encode;
mod meta;
mod reader;

pub use counters::decode_counters;
pub use dir::{read_dir, DirStats};
pub use meta::decode_meta;

/// The first bytes of a `covmeta.*` file (`\0cvm`).
pub const META_MAGIC: [u8; 4] = [0x00, 0x63, 0x76, 0x6d];
/// The first bytes of a `covcounters.*` file (`\0cwm`).
pub const COUNTER_MAGIC: [u8; 4] = [0x00, 0x63, 0x77, 0x6d];
const META_HEADER: usize = 56;
const PKG_HEADER: usize = 44;
const COUNTER_HEADER: usize = 32;
const SEGMENT_HEADER: usize = 16;
const FOOTER: usize = 16;

/// A coverable unit (a basic block) of a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unit {
    /// Start line, start column, end line, end column in its Go file.
    pub pos: Pos,
    /// Statements in the unit.
    pub stmts: u32,
}

/// A function of a meta-data file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaFunc {
    /// The function's name.
    pub name: String,
    /// Its Go file, as an import path and file name.
    pub file: String,
    /// Its coverable units, in the order of its counters.
    pub units: Vec<Unit>,
    /// Whether it is a function literal (a closure).
    pub lit: bool,
}

/// A package of a meta-data file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaPkg {
    /// The package's import path.
    pub path: String,
    /// Its functions, in the order counter files index them.
    pub funcs: Vec<MetaFunc>,
}

/// A decoded meta-data file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// The meta-data's hash, which its counter files name.
    pub hash: [u8; 16],
    /// The counter mode the program was built with.
    pub mode: Mode,
    /// One counter per function instead of one per unit.
    pub per_func: bool,
    /// The packages, in the order counter files index them.
    pub pkgs: Vec<MetaPkg>,
}

/// The counter flavors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Counters as little- or big-endian u32s.
    Raw,
    /// Counters as ULEB128 varints (Go's default).
    Uleb128,
}

/// A counter file's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterHeader {
    /// Hash of the meta-data file the counters belong to.
    pub meta_hash: [u8; 16],
    /// How counter values are encoded.
    pub flavor: Flavor,
    /// Whether raw counters are big-endian.
    pub big_endian: bool,
    /// Segments of counter data in the file (at least 1).
    pub segments: u32,
}

#[cfg(test)]
mod tests;
