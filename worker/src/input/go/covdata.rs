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
//! (One binary format, decoded in one place: the meta file, the counter files and their
//! two encodings share the reader and its bounds checks; a third of the file is tests.)

use std::collections::HashMap;
use std::path::Path;

use super::{check_pos, Blocks, GoError, Mode, Pos};

pub const META_MAGIC: [u8; 4] = [0x00, 0x63, 0x76, 0x6d];
pub const COUNTER_MAGIC: [u8; 4] = [0x00, 0x63, 0x77, 0x6d];
const META_HEADER: usize = 56;
const PKG_HEADER: usize = 44;
const COUNTER_HEADER: usize = 32;
const SEGMENT_HEADER: usize = 16;
const FOOTER: usize = 16;

/// A coverable unit (a basic block) of a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unit {
    pub pos: Pos,
    pub stmts: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaFunc {
    pub name: String,
    pub file: String,
    pub units: Vec<Unit>,
    pub lit: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaPkg {
    pub path: String,
    pub funcs: Vec<MetaFunc>,
}

/// A decoded meta-data file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub hash: [u8; 16],
    pub mode: Mode,
    /// One counter per function instead of one per unit.
    pub per_func: bool,
    pub pkgs: Vec<MetaPkg>,
}

/// The counter flavors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Raw,
    Uleb128,
}

/// A counter file's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterHeader {
    pub meta_hash: [u8; 16],
    pub flavor: Flavor,
    pub big_endian: bool,
    pub segments: u32,
}

/// A bounds-checked reader over one file's bytes (or a part of them starting at
/// `base`): every error names the file and the absolute offset.
struct Rd<'a> {
    file: &'a str,
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Rd<'a> {
    fn new(file: &'a str, buf: &'a [u8], base: usize) -> Self {
        Rd {
            file,
            buf,
            pos: 0,
            base,
        }
    }

    fn err_at(&self, at: usize, problem: impl Into<String>) -> GoError {
        GoError::Corrupt {
            file: self.file.to_string(),
            offset: (self.base + at) as u64,
            problem: problem.into(),
        }
    }

    fn err(&self, problem: impl Into<String>) -> GoError {
        self.err_at(self.pos, problem)
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], GoError> {
        if n > self.remaining() {
            return Err(self.err(format!(
                "truncated: {what} needs {n} bytes, {} left",
                self.remaining()
            )));
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    fn u8(&mut self, what: &str) -> Result<u8, GoError> {
        Ok(self.bytes(1, what)?[0])
    }

    fn u32(&mut self, what: &str, big: bool) -> Result<u32, GoError> {
        let b: [u8; 4] = self.bytes(4, what)?.try_into().expect("4 bytes");
        Ok(if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }

    fn u64(&mut self, what: &str) -> Result<u64, GoError> {
        let b: [u8; 8] = self.bytes(8, what)?.try_into().expect("8 bytes");
        Ok(u64::from_le_bytes(b))
    }

    /// A ULEB128 value of at most 32 bits (all that Go writes).
    fn uleb(&mut self, what: &str) -> Result<u32, GoError> {
        // Most counters and indexes are below 128: one byte.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u32::from(b));
            }
        }
        let start = self.pos;
        let mut v: u64 = 0;
        let mut shift = 0;
        loop {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(self.err_at(start, format!("truncated ULEB128 {what}")));
            };
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 28 {
                return Err(self.err_at(start, format!("ULEB128 {what} longer than 5 bytes")));
            }
        }
        u32::try_from(v)
            .map_err(|_| self.err_at(start, format!("ULEB128 {what} {v} exceeds 32 bits")))
    }

    fn seek(&mut self, to: usize, what: &str) -> Result<(), GoError> {
        if to > self.buf.len() {
            return Err(self.err(format!(
                "{what} at {} is past the end ({} bytes)",
                self.base + to,
                self.base + self.buf.len()
            )));
        }
        self.pos = to;
        Ok(())
    }

    /// A string table: ULEB128 count, then ULEB128 length + bytes per string.
    fn string_table(&mut self, what: &str) -> Result<Vec<&'a str>, GoError> {
        let n = self.uleb(&format!("{what} size"))? as usize;
        // Every string takes at least its length byte: checked before allocating.
        if n > self.remaining() {
            return Err(self.err(format!(
                "{what} claims {n} strings, only {} bytes left",
                self.remaining()
            )));
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let len = self.uleb(&format!("{what} string length"))? as usize;
            let at = self.pos;
            let b = self.bytes(len, what)?;
            let s = std::str::from_utf8(b)
                .map_err(|_| self.err_at(at, format!("{what}: string is not UTF-8")))?;
            out.push(s);
        }
        Ok(out)
    }
}

fn get_str<'a>(r: &Rd<'_>, tab: &[&'a str], idx: u32, what: &str) -> Result<&'a str, GoError> {
    tab.get(idx as usize).copied().ok_or_else(|| {
        r.err(format!(
            "{what}: string index {idx} out of range (table has {})",
            tab.len()
        ))
    })
}

/// Decodes a meta-data file. `file` names it in errors.
pub fn decode_meta(file: &str, data: &[u8]) -> Result<Meta, GoError> {
    let mut r = Rd::new(file, data, 0);
    if r.bytes(4, "magic")? != META_MAGIC {
        return Err(r.err_at(0, "not a Go coverage meta-data file (bad magic)"));
    }
    let version = r.u32("version", false)?;
    if version != 1 {
        return Err(r.err_at(
            4,
            format!("meta-data file version {version}, this reader knows 1"),
        ));
    }
    let total = r.u64("total length")?;
    if total != data.len() as u64 {
        return Err(r.err_at(
            8,
            format!("header says {total} bytes, the file has {}", data.len()),
        ));
    }
    let entries = r.u64("package count")?;
    let hash: [u8; 16] = r.bytes(16, "hash")?.try_into().expect("16");
    let strtab_off = r.u32("string table offset", false)? as usize;
    let strtab_len = r.u32("string table length", false)? as usize;
    let mode_at = r.pos;
    let mode = match r.u8("counter mode")? {
        1 => Mode::Set,
        2 => Mode::Count,
        3 => Mode::Atomic,
        m => return Err(r.err_at(mode_at, format!("counter mode {m} is not set/count/atomic"))),
    };
    let gran_at = r.pos;
    let per_func = match r.u8("granularity")? {
        1 => false,
        2 => true,
        g => return Err(r.err_at(gran_at, format!("counter granularity {g} unknown"))),
    };
    r.bytes(6, "header padding")?;
    let tables = entries
        .checked_mul(16)
        .filter(|&t| t <= (data.len() - META_HEADER) as u64)
        .ok_or_else(|| r.err_at(16, format!("{entries} packages do not fit in the file")))?
        as usize;
    let mut offs = Vec::with_capacity(entries as usize);
    for _ in 0..entries {
        offs.push(r.u64("package offset")?);
    }
    let mut lens = Vec::with_capacity(entries as usize);
    for _ in 0..entries {
        lens.push(r.u64("package length")?);
    }
    let payload_start = META_HEADER + tables;
    if strtab_off < payload_start
        || strtab_off
            .checked_add(strtab_len)
            .is_none_or(|e| e > data.len())
    {
        return Err(r.err_at(
            40,
            format!("string table {strtab_off}+{strtab_len} outside the file"),
        ));
    }
    let mut st = Rd::new(file, &data[..strtab_off + strtab_len], 0);
    st.pos = strtab_off;
    st.string_table("file string table")?;
    let mut pkgs = Vec::with_capacity(entries as usize);
    for (i, (&off, &len)) in offs.iter().zip(&lens).enumerate() {
        let at = META_HEADER + 8 * i;
        let end = off.checked_add(len).filter(|&e| e <= data.len() as u64);
        if off < payload_start as u64 || end.is_none() {
            return Err(r.err_at(at, format!("package {i} at {off}+{len} outside the file")));
        }
        let (off, len) = (off as usize, len as usize);
        pkgs.push(decode_pkg(file, &data[off..off + len], off, per_func)?);
    }
    Ok(Meta {
        hash,
        mode,
        per_func,
        pkgs,
    })
}

fn decode_pkg(file: &str, blob: &[u8], base: usize, _per_func: bool) -> Result<MetaPkg, GoError> {
    let mut r = Rd::new(file, blob, base);
    let length = r.u32("package length", false)? as usize;
    if length != blob.len() {
        return Err(r.err_at(
            0,
            format!("package blob says {length} bytes, its entry {}", blob.len()),
        ));
    }
    let _name = r.u32("package name", false)?;
    let path = r.u32("package path", false)?;
    let _module = r.u32("module path", false)?;
    r.bytes(16 + 4, "package hash")?;
    let _files = r.u32("file count", false)?;
    let nfuncs = r.u32("function count", false)? as usize;
    if nfuncs > (blob.len() - PKG_HEADER) / 4 {
        return Err(r.err_at(40, format!("{nfuncs} functions do not fit in the package")));
    }
    let mut foffs = Vec::with_capacity(nfuncs);
    for _ in 0..nfuncs {
        foffs.push(r.u32("function offset", false)? as usize);
    }
    let table_start = r.pos;
    let strs = r.string_table("package string table")?;
    let path = get_str(&r, &strs, path, "package path")?.to_string();
    let mut funcs = Vec::with_capacity(nfuncs);
    for (i, &foff) in foffs.iter().enumerate() {
        if foff < table_start || foff >= blob.len() {
            return Err(r.err_at(
                PKG_HEADER + 4 * i,
                format!("function {i} offset {foff} outside the package"),
            ));
        }
        r.seek(foff, "function")?;
        let n = r.uleb("unit count")? as usize;
        // Each unit takes at least 5 bytes: checked before allocating.
        if n > r.remaining() / 5 {
            return Err(r.err(format!("{n} units do not fit in the package")));
        }
        let name = r.uleb("function name")?;
        let name = get_str(&r, &strs, name, "function name")?.to_string();
        let f = r.uleb("function file")?;
        let f = get_str(&r, &strs, f, "function file")?.to_string();
        let mut units = Vec::with_capacity(n);
        for _ in 0..n {
            let at = r.pos;
            let pos = [
                r.uleb("start line")?,
                r.uleb("start column")?,
                r.uleb("end line")?,
                r.uleb("end column")?,
            ];
            check_pos(pos).map_err(|p| r.err_at(at, p))?;
            let stmts = r.uleb("statement count")?;
            units.push(Unit { pos, stmts });
        }
        let lit = r.uleb("literal flag")? != 0;
        funcs.push(MetaFunc {
            name,
            file: f,
            units,
            lit,
        });
    }
    Ok(MetaPkg { path, funcs })
}

/// Decodes a counter-data file, calling `visit(pkg, func, counters)` per function
/// entry; a problem `visit` returns becomes an error at that entry's offset.
pub fn decode_counters(
    file: &str,
    data: &[u8],
    mut visit: impl FnMut(u32, u32, &[u32]) -> Result<(), String>,
) -> Result<CounterHeader, GoError> {
    let mut r = Rd::new(file, data, 0);
    if r.bytes(4, "magic")? != COUNTER_MAGIC {
        return Err(r.err_at(0, "not a Go coverage counter-data file (bad magic)"));
    }
    let version = r.u32("version", false)?;
    if version != 1 {
        return Err(r.err_at(
            4,
            format!("counter file version {version}, this reader knows 1"),
        ));
    }
    let meta_hash: [u8; 16] = r.bytes(16, "meta hash")?.try_into().expect("16");
    let flavor = match r.u8("counter flavor")? {
        1 => Flavor::Raw,
        2 => Flavor::Uleb128,
        f => return Err(r.err_at(24, format!("counter flavor {f} unknown"))),
    };
    let big_endian = match r.u8("big-endian flag")? {
        0 => false,
        1 => true,
        b => return Err(r.err_at(25, format!("big-endian flag {b} is not 0 or 1"))),
    };
    r.bytes(6, "header padding")?;
    if data.len() < COUNTER_HEADER + FOOTER {
        return Err(r.err_at(data.len(), "truncated: no room for the footer"));
    }
    let footer_at = data.len() - FOOTER;
    let mut fr = Rd::new(file, &data[footer_at..], footer_at);
    if fr.bytes(4, "footer magic")? != COUNTER_MAGIC {
        return Err(fr.err_at(0, "bad footer magic (truncated or not a counter file)"));
    }
    fr.bytes(4, "footer padding")?;
    let segments = fr.u32("segment count", false)?;
    if segments == 0 {
        return Err(fr.err_at(8, "no segments"));
    }
    // Everything before the final footer.
    let mut r = Rd::new(file, &data[..footer_at], 0);
    r.pos = COUNTER_HEADER;
    let mut counters: Vec<u32> = Vec::new();
    for seg in 0..segments {
        if seg > 0 {
            let at = r.pos;
            if r.bytes(FOOTER, "segment footer")?[..4] != COUNTER_MAGIC {
                return Err(r.err_at(at, format!("bad footer magic after segment {}", seg - 1)));
            }
        }
        let hdr_at = r.pos;
        let fcn_entries = r.u64("function entry count")?;
        let strtab_len = r.u32("string table length", false)? as usize;
        let args_len = r.u32("args length", false)? as usize;
        let tab = r.bytes(strtab_len, "segment string table")?;
        let mut st = Rd::new(file, tab, hdr_at + SEGMENT_HEADER);
        let strs = st.string_table("segment string table")?;
        let args_at = r.pos;
        let args = r.bytes(args_len, "args table")?;
        let mut ar = Rd::new(file, args, args_at);
        let n = ar.uleb("args count")?;
        for _ in 0..n {
            let k = ar.uleb("arg key")?;
            get_str(&ar, &strs, k, "arg key")?;
            let v = ar.uleb("arg value")?;
            get_str(&ar, &strs, v, "arg value")?;
        }
        // Padding to 4 bytes (from the file's start, as Go's reader seeks).
        let pad = (4 - r.pos % 4) % 4;
        r.bytes(pad, "segment padding")?;
        let read = |r: &mut Rd<'_>, what: &str| -> Result<u32, GoError> {
            match flavor {
                Flavor::Raw => r.u32(what, big_endian),
                Flavor::Uleb128 => r.uleb(what),
            }
        };
        let min_size = match flavor {
            Flavor::Raw => 4,
            Flavor::Uleb128 => 1,
        };
        if fcn_entries > (r.remaining() / (3 * min_size)) as u64 {
            return Err(r.err_at(
                hdr_at,
                format!("{fcn_entries} function entries do not fit in the file"),
            ));
        }
        for _ in 0..fcn_entries {
            let at = r.pos;
            let nc = read(&mut r, "counter count")? as usize;
            let pkg = read(&mut r, "package index")?;
            let func = read(&mut r, "function index")?;
            if nc > r.remaining() / min_size {
                return Err(r.err_at(at, format!("{nc} counters do not fit in the file")));
            }
            counters.clear();
            for _ in 0..nc {
                counters.push(read(&mut r, "counter")?);
            }
            visit(pkg, func, &counters).map_err(|p| r.err_at(at, p))?;
        }
    }
    if r.pos != footer_at {
        return Err(r.err_at(
            r.pos,
            format!("{} unexpected bytes before the footer", footer_at - r.pos),
        ));
    }
    Ok(CounterHeader {
        meta_hash,
        flavor,
        big_endian,
        segments,
    })
}

/// What reading a directory took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirStats {
    pub meta_files: u64,
    pub counter_files: u64,
    /// Bytes of all files decoded.
    pub bytes: u64,
    pub function_entries: u64,
}

/// The counts of one meta-data file's units, summed over its counter files.
struct Pod {
    meta: Meta,
    name: String,
    /// Index of each function's first unit in `counts`, per package.
    first: Vec<Vec<usize>>,
    counts: Vec<u64>,
}

fn hex(h: &[u8; 16]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads a `GOCOVERDIR` directory: every `covmeta.*` and `covcounters.*` file (others
/// are ignored, as Go does). Counter files of every process are summed per unit (`set`
/// mode: ORed); units no counter file mentions count 0.
pub fn read_dir(dir: &Path) -> Result<(Blocks, DirStats), GoError> {
    let dname = dir.display().to_string();
    let io_err = |file: String| move |e: std::io::Error| GoError::Io { file, source: e };
    let mut metas = Vec::new();
    let mut counters = Vec::new();
    // Go writes regular files here: a symlink (to another run's file, /dev/zero, a file
    // outside the input), a FIFO or a device, or a second name of a file (a hard link)
    // would count hits twice, read outside the input or hang. Refused, naming it.
    let mut seen: HashMap<(u64, u64), String> = HashMap::new();
    for e in std::fs::read_dir(dir).map_err(io_err(dname.clone()))? {
        let e = e.map_err(io_err(dname.clone()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("covmeta.") && !name.starts_with("covcounters.") {
            continue;
        }
        let ft = e.file_type().map_err(io_err(name.clone()))?;
        if !ft.is_file() {
            return Err(GoError::Input {
                input: dname,
                problem: format!(
                    "{name} is not a regular file (a symlink, FIFO, device or directory): Go writes only regular files to a GOCOVERDIR"
                ),
            });
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let m = e.metadata().map_err(io_err(name.clone()))?;
            if m.nlink() > 1 {
                if let Some(first) = seen.insert((m.dev(), m.ino()), name.clone()) {
                    return Err(GoError::Input {
                        input: dname,
                        problem: format!(
                            "{name} is the same file as {first} (a hard link): its counts would be added twice"
                        ),
                    });
                }
            }
        }
        if name.starts_with("covmeta.") {
            metas.push(e.path());
        } else if name.starts_with("covcounters.") {
            counters.push(e.path());
        }
    }
    metas.sort();
    counters.sort();
    if metas.is_empty() {
        return Err(GoError::Input {
            input: dname,
            problem: "no covmeta.* file in the directory".into(),
        });
    }
    let mut stats = DirStats::default();
    let mut pods: Vec<Pod> = Vec::new();
    let mut by_hash: HashMap<[u8; 16], usize> = HashMap::new();
    for p in &metas {
        let name = p.display().to_string();
        let data = std::fs::read(p).map_err(io_err(name.clone()))?;
        stats.meta_files += 1;
        stats.bytes += data.len() as u64;
        let meta = decode_meta(&name, &data)?;
        let fname = p.file_name().unwrap_or_default().to_string_lossy();
        if fname.strip_prefix("covmeta.") != Some(hex(&meta.hash).as_str()) {
            return Err(GoError::Corrupt {
                file: name,
                offset: 24,
                problem: format!("hash {} does not match the file name", hex(&meta.hash)),
            });
        }
        let mut first = Vec::with_capacity(meta.pkgs.len());
        let mut n = 0usize;
        for pkg in &meta.pkgs {
            let mut f = Vec::with_capacity(pkg.funcs.len());
            for func in &pkg.funcs {
                f.push(n);
                n += func.units.len();
            }
            first.push(f);
        }
        by_hash.insert(meta.hash, pods.len());
        pods.push(Pod {
            meta,
            name,
            first,
            counts: vec![0; n],
        });
    }
    for p in &counters {
        let name = p.display().to_string();
        let data = std::fs::read(p).map_err(io_err(name.clone()))?;
        stats.counter_files += 1;
        stats.bytes += data.len() as u64;
        // The meta hash is at bytes 8..24: find the pod before decoding.
        let pod = data
            .get(8..24)
            .and_then(|h| by_hash.get(<&[u8; 16]>::try_from(h).expect("16")).copied());
        let Some(pod) = pod else {
            // A corrupt header is named by the decoder; a sound file lacks its meta.
            decode_counters(&name, &data, |_, _, _| Ok(()))?;
            let h: [u8; 16] = data[8..24].try_into().expect("a decoded header");
            return Err(GoError::Corrupt {
                file: name,
                offset: 8,
                problem: format!(
                    "no covmeta.{} in the directory for this counter file",
                    hex(&h)
                ),
            });
        };
        let pod = &mut pods[pod];
        let set = pod.meta.mode == Mode::Set;
        decode_counters(&name, &data, |pkg, func, ctrs| {
            stats.function_entries += 1;
            let f = pod
                .meta
                .pkgs
                .get(pkg as usize)
                .and_then(|p| p.funcs.get(func as usize))
                .ok_or_else(|| {
                    format!(
                        "function {pkg}/{func} is not in {} ({} packages)",
                        pod.name,
                        pod.meta.pkgs.len()
                    )
                })?;
            let first = pod.first[pkg as usize][func as usize];
            let units = f.units.len();
            let slots = &mut pod.counts[first..first + units];
            if pod.meta.per_func {
                if ctrs.len() != 1 {
                    return Err(format!(
                        "{} counters for function {}, per-function granularity has 1",
                        ctrs.len(),
                        f.name
                    ));
                }
                for s in slots.iter_mut() {
                    add(s, ctrs[0], set);
                }
            } else {
                if ctrs.len() != units {
                    return Err(format!(
                        "{} counters for function {}, which has {units} units",
                        ctrs.len(),
                        f.name
                    ));
                }
                for (s, &c) in slots.iter_mut().zip(ctrs) {
                    add(s, c, set);
                }
            }
            Ok(())
        })?;
    }
    let mut blocks = Blocks::default();
    for pod in &pods {
        blocks.set_mode(pod.meta.mode).map_err(|e| GoError::Input {
            input: pod.name.clone(),
            problem: e.to_string(),
        })?;
        for (pi, pkg) in pod.meta.pkgs.iter().enumerate() {
            for (fi, f) in pkg.funcs.iter().enumerate() {
                let first = pod.first[pi][fi];
                let file = blocks.file_id(&f.file);
                let func = blocks.func_id(&f.name);
                for (u, &c) in f.units.iter().zip(&pod.counts[first..]) {
                    blocks
                        .add_ids(file, func, u.pos, u.stmts, c)
                        .map_err(|e| GoError::Input {
                            input: pod.name.clone(),
                            problem: format!(
                                "{}:{}.{},{}.{}: {e}",
                                f.file, u.pos[0], u.pos[1], u.pos[2], u.pos[3]
                            ),
                        })?;
                }
            }
        }
    }
    Ok((blocks, stats))
}

fn add(slot: &mut u64, c: u32, set: bool) {
    if set {
        *slot |= u64::from(c != 0);
    } else {
        // At most 2^32 files of 2^32 each: saturates only past u64, never in practice.
        *slot = slot.saturating_add(u64::from(c));
    }
}

/// Encoders for tests and benchmarks: the format as Go writes it.
#[doc(hidden)]
pub mod encode {
    use super::*;

    fn uleb(out: &mut Vec<u8>, mut v: u32) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn strtab(strs: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        uleb(&mut out, strs.len() as u32);
        for s in strs {
            uleb(&mut out, s.len() as u32);
            out.extend_from_slice(s.as_bytes());
        }
        out
    }

    /// A meta-data file for `meta` (per-block granularity unless `meta.per_func`).
    pub fn meta(meta: &Meta) -> Vec<u8> {
        let mut blobs = Vec::new();
        for p in &meta.pkgs {
            let mut strs: Vec<&str> = vec![&p.path];
            let idx = |s: &str, strs: &[&str]| -> u32 {
                strs.iter().position(|x| *x == s).unwrap_or(usize::MAX) as u32
            };
            for f in &p.funcs {
                for s in [f.name.as_str(), f.file.as_str()] {
                    if idx(s, &strs) == u32::MAX {
                        strs.push(s);
                    }
                }
            }
            let tab = strtab(&strs);
            let mut funcs = Vec::new();
            let mut offs = Vec::new();
            let base = PKG_HEADER + 4 * p.funcs.len() + tab.len();
            for f in &p.funcs {
                offs.push((base + funcs.len()) as u32);
                uleb(&mut funcs, f.units.len() as u32);
                uleb(&mut funcs, idx(&f.name, &strs));
                uleb(&mut funcs, idx(&f.file, &strs));
                for u in &f.units {
                    for v in u.pos {
                        uleb(&mut funcs, v);
                    }
                    uleb(&mut funcs, u.stmts);
                }
                uleb(&mut funcs, u32::from(f.lit));
            }
            let mut b = Vec::new();
            let len = (base + funcs.len()) as u32;
            b.extend(len.to_le_bytes());
            b.extend(0u32.to_le_bytes()); // name
            b.extend(0u32.to_le_bytes()); // path
            b.extend(0u32.to_le_bytes()); // module
            b.extend([0xab; 16]);
            b.extend([0; 4]);
            b.extend(1u32.to_le_bytes());
            b.extend((p.funcs.len() as u32).to_le_bytes());
            for o in offs {
                b.extend(o.to_le_bytes());
            }
            b.extend(tab);
            b.extend(funcs);
            blobs.push(b);
        }
        let file_tab = strtab(&[""]);
        let start = META_HEADER + 16 * blobs.len();
        let total = start + file_tab.len() + blobs.iter().map(Vec::len).sum::<usize>();
        let mut out = Vec::with_capacity(total);
        out.extend(META_MAGIC);
        out.extend(1u32.to_le_bytes());
        out.extend((total as u64).to_le_bytes());
        out.extend((blobs.len() as u64).to_le_bytes());
        out.extend(meta.hash);
        out.extend((start as u32).to_le_bytes());
        out.extend((file_tab.len() as u32).to_le_bytes());
        out.push(match meta.mode {
            Mode::Set => 1,
            Mode::Count => 2,
            Mode::Atomic => 3,
        });
        out.push(if meta.per_func { 2 } else { 1 });
        out.extend([0; 6]);
        let mut off = start + file_tab.len();
        for b in &blobs {
            out.extend((off as u64).to_le_bytes());
            off += b.len();
        }
        for b in &blobs {
            out.extend((b.len() as u64).to_le_bytes());
        }
        out.extend(file_tab);
        for b in blobs {
            out.extend(b);
        }
        out
    }

    /// A function entry of a counter file: package, function, counters.
    pub type Entry = (u32, u32, Vec<u32>);

    /// A counter-data file with one segment per element of `segments`.
    pub fn counters(hash: [u8; 16], flavor: Flavor, big: bool, segments: &[Vec<Entry>]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(COUNTER_MAGIC);
        out.extend(1u32.to_le_bytes());
        out.extend(hash);
        out.push(match flavor {
            Flavor::Raw => 1,
            Flavor::Uleb128 => 2,
        });
        out.push(u8::from(big));
        out.extend([0; 6]);
        for (n, seg) in segments.iter().enumerate() {
            let tab = strtab(&["", "argc", "0"]);
            let mut args = Vec::new();
            uleb(&mut args, 1);
            uleb(&mut args, 1);
            uleb(&mut args, 2);
            let end = out.len() + SEGMENT_HEADER + tab.len() + args.len();
            args.extend(std::iter::repeat_n(0, (4 - end % 4) % 4));
            out.extend((seg.len() as u64).to_le_bytes());
            out.extend((tab.len() as u32).to_le_bytes());
            out.extend((args.len() as u32).to_le_bytes());
            out.extend(tab);
            out.extend(args);
            let val = |out: &mut Vec<u8>, v: u32| match (flavor, big) {
                (Flavor::Uleb128, _) => uleb(out, v),
                (Flavor::Raw, false) => out.extend(v.to_le_bytes()),
                (Flavor::Raw, true) => out.extend(v.to_be_bytes()),
            };
            for (pkg, func, ctrs) in seg {
                val(&mut out, ctrs.len() as u32);
                val(&mut out, *pkg);
                val(&mut out, *func);
                for &c in ctrs {
                    val(&mut out, c);
                }
            }
            out.extend(COUNTER_MAGIC);
            out.extend([0; 4]);
            out.extend((n as u32 + 1).to_le_bytes());
            out.extend([0; 4]);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::encode::Entry;
    use super::*;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    fn testdata() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/input/go/testdata")
    }

    #[test]
    fn gocoverdir_symlinks_fifos_and_hard_links_were_read() {
        let copy = || {
            let d = tempfile::tempdir().unwrap();
            for e in std::fs::read_dir(testdata()).unwrap() {
                let e = e.unwrap();
                std::fs::copy(e.path(), d.path().join(e.file_name())).unwrap();
            }
            d
        };
        let counters = |d: &Path| {
            std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| {
                    p.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with("covcounters.")
                })
                .unwrap()
        };
        let (_, base) = read_dir(copy().path()).unwrap();
        assert!(base.counter_files > 0);
        // A symlink to another counters file, to /dev/zero; a hard link; a FIFO.
        let d = copy();
        std::os::unix::fs::symlink(counters(d.path()), d.path().join("covcounters.x.1.1")).unwrap();
        let e = read_dir(d.path()).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let d = copy();
        std::os::unix::fs::symlink("/dev/zero", d.path().join("covcounters.x.1.1")).unwrap();
        assert!(read_dir(d.path()).is_err());
        let d = copy();
        std::fs::hard_link(counters(d.path()), d.path().join("covcounters.x.1.1")).unwrap();
        let e = read_dir(d.path()).unwrap_err().to_string();
        assert!(e.contains("same file"), "{e}");
        let d = copy();
        let fifo = std::ffi::CString::new(
            d.path()
                .join("covcounters.x.1.1")
                .as_os_str()
                .as_encoded_bytes(),
        )
        .unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let e = read_dir(d.path()).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }

    /// Real files written by a `go build -cover -covermode=count` program (Go 1.27, the
    /// fixture integration-tests/fixtures/goprog run 3 times) and what `go tool covdata
    /// textfmt` printed for them.
    #[test]
    fn real_go_directory_decodes_to_what_go_tool_covdata_textfmt_printed() {
        let (blocks, stats) = read_dir(&testdata()).unwrap();
        assert_eq!((stats.meta_files, stats.counter_files), (1, 3));
        let text = std::fs::read(testdata().join("textfmt.txt")).unwrap();
        let want = super::super::text::read_profile("textfmt.txt", &text[..], 0).unwrap();
        assert_eq!(blocks.mode(), Some(Mode::Count));
        let got = blocks.entries();
        let want = want.blocks.entries();
        assert_eq!(got.len(), 25);
        let strip =
            |m: &BTreeMap<(String, Pos), (u32, u64, String)>| -> Vec<((String, Pos), (u32, u64))> {
                m.iter().map(|(k, v)| (k.clone(), (v.0, v.1))).collect()
            };
        assert_eq!(strip(&got), strip(&want));
        let funcs: std::collections::BTreeSet<&str> = got.values().map(|v| v.2.as_str()).collect();
        assert_eq!(
            funcs.into_iter().collect::<Vec<_>>(),
            vec![
                "*Acc.Push",
                "Acc.Sum",
                "Add",
                "Parse",
                "Shout",
                "Unused",
                "main"
            ]
        );
    }

    fn sample_meta(mode: Mode, per_func: bool) -> Meta {
        let unit = |sl, el, stmts| Unit {
            pos: [sl, 2, el, 9],
            stmts,
        };
        Meta {
            hash: [0x5a; 16],
            mode,
            per_func,
            pkgs: vec![
                MetaPkg {
                    path: "example.com/m/a".into(),
                    funcs: vec![
                        MetaFunc {
                            name: "F".into(),
                            file: "example.com/m/a/a.go".into(),
                            units: vec![unit(3, 4, 2), unit(5, 5, 1), unit(300, 300, 1)],
                            lit: false,
                        },
                        MetaFunc {
                            name: "G".into(),
                            file: "example.com/m/a/a.go".into(),
                            units: vec![unit(10, 12, 3)],
                            lit: false,
                        },
                    ],
                },
                MetaPkg {
                    path: "example.com/m/b".into(),
                    funcs: vec![MetaFunc {
                        name: "*T.M".into(),
                        file: "example.com/m/b/b.go".into(),
                        units: vec![unit(1, 1, 1), unit(2, 3, 1)],
                        lit: false,
                    }],
                },
            ],
        }
    }

    fn visits(data: &[u8]) -> Result<Vec<Entry>, GoError> {
        let mut v = Vec::new();
        decode_counters("c", data, |p, f, c| {
            v.push((p, f, c.to_vec()));
            Ok(())
        })?;
        Ok(v)
    }

    #[test]
    fn raw_le_raw_be_and_uleb128_flavours_and_segments_decode_alike() {
        let m = sample_meta(Mode::Count, false);
        assert_eq!(decode_meta("m", &encode::meta(&m)).unwrap(), m);
        let segs: Vec<Vec<Entry>> = vec![
            vec![(0, 0, vec![1, 0, 70_000]), (1, 0, vec![u32::MAX, 3])],
            vec![(0, 1, vec![128])],
        ];
        let want: Vec<Entry> = segs.concat();
        for (flavor, big) in [
            (Flavor::Raw, false),
            (Flavor::Raw, true),
            (Flavor::Uleb128, false),
        ] {
            let data = encode::counters(m.hash, flavor, big, &segs);
            assert_eq!(visits(&data).unwrap(), want, "{flavor:?} big={big}");
            let mut h = None;
            let hdr = decode_counters("c", &data, |_, _, _| Ok(())).unwrap();
            h.get_or_insert(hdr);
            assert_eq!(hdr.segments, 2);
            assert_eq!((hdr.flavor, hdr.big_endian), (flavor, big));
        }
    }

    fn dir_with(meta: &Meta, counters: &[Vec<u8>]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join(format!("covmeta.{}", hex(&meta.hash))),
            encode::meta(meta),
        )
        .unwrap();
        for (i, c) in counters.iter().enumerate() {
            std::fs::write(
                d.path()
                    .join(format!("covcounters.{}.{i}.{i}", hex(&meta.hash))),
                c,
            )
            .unwrap();
        }
        d
    }

    #[test]
    fn processes_sum_per_unit_set_mode_ors_and_unrun_functions_count_zero() {
        for mode in [Mode::Count, Mode::Atomic, Mode::Set] {
            let m = sample_meta(mode, false);
            let c1 = encode::counters(
                m.hash,
                Flavor::Uleb128,
                false,
                &[vec![(0, 0, vec![1, 0, 7])]],
            );
            let c2 = encode::counters(m.hash, Flavor::Raw, false, &[vec![(0, 0, vec![2, 0, 0])]]);
            let d = dir_with(&m, &[c1, c2]);
            let (b, _) = read_dir(d.path()).unwrap();
            let e = b.entries();
            let count = |file: &str, sl: u32| {
                e.iter()
                    .find(|((f, p), _)| f == file && p[0] == sl)
                    .map(|(_, v)| v.1)
                    .unwrap()
            };
            let f = "example.com/m/a/a.go";
            let (first, last) = if mode == Mode::Set { (1, 1) } else { (3, 7) };
            assert_eq!(count(f, 3), first, "{mode:?}");
            assert_eq!(count(f, 5), 0);
            assert_eq!(count(f, 300), last);
            assert_eq!(count(f, 10), 0, "G never ran");
            assert_eq!(count("example.com/m/b/b.go", 2), 0);
        }
        // Per-function granularity: one counter for all units.
        let m = sample_meta(Mode::Count, true);
        let c = encode::counters(m.hash, Flavor::Uleb128, false, &[vec![(1, 0, vec![4])]]);
        let (b, _) = read_dir(dir_with(&m, &[c]).path()).unwrap();
        assert!(b
            .entries()
            .iter()
            .filter(|((f, _), _)| f.ends_with("b.go"))
            .all(|(_, v)| v.1 == 4));
    }

    fn corrupt(e: GoError) -> (String, u64, String) {
        match e {
            GoError::Corrupt {
                file,
                offset,
                problem,
            } => (file, offset, problem),
            other => panic!("expected a corrupt-file error, got {other}"),
        }
    }

    #[test]
    fn corrupt_files_are_errors_naming_file_and_offset() {
        let m = sample_meta(Mode::Count, false);
        let meta = encode::meta(&m);
        // Truncated meta: the header's length disagrees.
        let (f, off, p) = corrupt(decode_meta("covmeta.x", &meta[..meta.len() - 3]).unwrap_err());
        assert_eq!((f.as_str(), off), ("covmeta.x", 8));
        assert!(p.contains("header says"), "{p}");
        // Bad magic.
        let mut bad = meta.clone();
        bad[1] = b'X';
        assert_eq!(corrupt(decode_meta("m", &bad).unwrap_err()).1, 0);
        // A function offset pointing outside its package.
        let mut bad = meta.clone();
        let pkg0 = u64::from_le_bytes(meta[56..64].try_into().unwrap()) as usize;
        bad[pkg0 + PKG_HEADER..pkg0 + PKG_HEADER + 4].copy_from_slice(&9999u32.to_le_bytes());
        let (_, off, p) = corrupt(decode_meta("m", &bad).unwrap_err());
        assert_eq!(off as usize, pkg0 + PKG_HEADER);
        assert!(p.contains("outside the package"), "{p}");
        // Counter files: a ULEB128 longer than 5 bytes, a wrong counter count, a
        // missing footer, trailing bytes, an unknown function.
        let mut c = encode::counters(m.hash, Flavor::Uleb128, false, &[vec![(0, 1, vec![5])]]);
        let body = c.len() - FOOTER - 1; // the counter value
        c.splice(body..body + 1, [0x85, 0x80, 0x80, 0x80, 0x80, 0x01]);
        let (_, off, p) = corrupt(visits(&c).unwrap_err());
        assert_eq!(off as usize, body);
        assert!(p.contains("longer than 5 bytes"), "{p}");
        let wrong = encode::counters(m.hash, Flavor::Raw, false, &[vec![(0, 0, vec![1, 2])]]);
        let d = dir_with(&m, &[wrong]);
        let e = read_dir(d.path()).unwrap_err().to_string();
        assert!(
            e.contains("covcounters.")
                && e.contains("at byte")
                && e.contains("2 counters for function F, which has 3 units"),
            "{e}"
        );
        let c = encode::counters(
            m.hash,
            Flavor::Uleb128,
            false,
            &[vec![(0, 0, vec![1, 2, 3])]],
        );
        let (_, off, p) = corrupt(visits(&c[..c.len() - 1]).unwrap_err());
        assert!(p.contains("footer"), "{p} at {off}");
        let mut extra = c.clone();
        extra.splice(c.len() - FOOTER..c.len() - FOOTER, [0]);
        let (_, _, p) = corrupt(visits(&extra).unwrap_err());
        assert!(p.contains("unexpected bytes"), "{p}");
        let c = encode::counters(m.hash, Flavor::Uleb128, false, &[vec![(7, 0, vec![1])]]);
        let e = read_dir(dir_with(&m, &[c]).path()).unwrap_err().to_string();
        assert!(e.contains("function 7/0 is not in"), "{e}");
        // A counter file whose meta-data file is missing.
        let c = encode::counters([1; 16], Flavor::Uleb128, false, &[vec![]]);
        let e = read_dir(dir_with(&m, &[c]).path()).unwrap_err().to_string();
        assert!(e.contains("no covmeta.0101"), "{e}");
    }

    /// Counts read from the file are checked against the bytes left before anything is
    /// allocated for them: a header claiming 2^64-1 packages, 2^32-1 functions or
    /// strings, or 2^64-1 function entries is an error, not an allocation.
    #[test]
    fn huge_counts_in_headers_are_refused_before_allocating() {
        let m = sample_meta(Mode::Count, false);
        let meta = encode::meta(&m);
        let mut bad = meta.clone();
        bad[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        let (_, off, p) = corrupt(decode_meta("m", &bad).unwrap_err());
        assert_eq!(off, 16);
        assert!(p.contains("packages do not fit"), "{p}");
        let pkg0 = u64::from_le_bytes(meta[56..64].try_into().unwrap()) as usize;
        let mut bad = meta.clone();
        bad[pkg0 + 40..pkg0 + 44].copy_from_slice(&u32::MAX.to_le_bytes());
        let (_, off, p) = corrupt(decode_meta("m", &bad).unwrap_err());
        assert_eq!(off as usize, pkg0 + 40);
        assert!(p.contains("functions do not fit"), "{p}");
        // The package string table's count (right after 2 function offsets) as a
        // 5-byte ULEB128 of 2^32-1, in place of its 1-byte count and 4 more bytes.
        let mut bad = meta.clone();
        let tab = pkg0 + PKG_HEADER + 4 * 2;
        bad[tab..tab + 5].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        let (_, off, p) = corrupt(decode_meta("m", &bad).unwrap_err());
        assert_eq!(off as usize, tab + 5);
        assert!(p.contains("claims 4294967295 strings"), "{p}");
        let mut c = encode::counters(m.hash, Flavor::Raw, false, &[vec![(0, 0, vec![1, 2, 3])]]);
        c[COUNTER_HEADER..COUNTER_HEADER + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let (_, off, p) = corrupt(visits(&c).unwrap_err());
        assert_eq!(off as usize, COUNTER_HEADER);
        assert!(p.contains("function entries do not fit"), "{p}");
    }

    /// xorshift64*: a fixed-seed generator, so a failure replays.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    fn mutate(rng: &mut Rng, data: &[u8]) -> Vec<u8> {
        let mut d = data.to_vec();
        for _ in 0..1 + rng.below(4) {
            match rng.below(6) {
                0 if !d.is_empty() => {
                    let i = rng.below(d.len());
                    d[i] ^= 1 << rng.below(8);
                }
                1 if !d.is_empty() => {
                    let i = rng.below(d.len());
                    d[i] = [0, 0xff, 0x7f, 0x80][rng.below(4)];
                }
                2 => d.truncate(rng.below(d.len() + 1)),
                3 => {
                    let i = rng.below(d.len() + 1);
                    d.insert(i, rng.next() as u8);
                }
                4 if d.len() >= 4 => {
                    // A large little-endian number where a length or count may be.
                    let i = rng.below(d.len() - 3);
                    d[i..i + 4].copy_from_slice(&(rng.next() as u32 | 0x8000_0000).to_le_bytes());
                }
                _ if !d.is_empty() => {
                    let i = rng.below(d.len());
                    d.remove(i);
                }
                _ => {}
            }
        }
        d
    }

    /// Arbitrary and mutated bytes (real Go files and encoded ones of every flavour):
    /// the decoders return `Ok` or an error naming an offset inside the file, and never
    /// panic. Allocation is bounded by construction: every count is checked against the
    /// bytes left before anything is reserved for it.
    #[test]
    fn decoders_survive_arbitrary_and_mutated_bytes() {
        let m = sample_meta(Mode::Count, false);
        let mut seeds: Vec<(bool, Vec<u8>)> = vec![(true, encode::meta(&m))];
        for (flavor, big) in [
            (Flavor::Raw, false),
            (Flavor::Raw, true),
            (Flavor::Uleb128, false),
        ] {
            seeds.push((
                false,
                encode::counters(
                    m.hash,
                    flavor,
                    big,
                    &[vec![(0, 0, vec![1, 2, 3])], vec![(1, 0, vec![9, 9])]],
                ),
            ));
        }
        for e in std::fs::read_dir(testdata()).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("cov") {
                seeds.push((name.starts_with("covmeta"), std::fs::read(&p).unwrap()));
            }
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let check = |is_meta: bool, d: &[u8]| {
            let r = if is_meta {
                decode_meta("f", d).map(|_| ())
            } else {
                decode_counters("f", d, |_, _, _| Ok(())).map(|_| ())
            };
            if let Err(GoError::Corrupt { offset, .. }) = r {
                assert!(
                    offset <= d.len() as u64,
                    "offset {offset} past {} bytes",
                    d.len()
                );
            }
        };
        let mut ok = 0;
        for i in 0..40_000 {
            let (is_meta, seed) = &seeds[i % seeds.len()];
            let d = mutate(&mut rng, seed);
            check(*is_meta, &d);
            if is_meta
                .then(|| decode_meta("f", &d).is_ok())
                .unwrap_or(false)
            {
                ok += 1;
            }
        }
        // Pure noise, with and without a valid magic in front.
        for i in 0..20_000 {
            let n = rng.below(300);
            let mut d: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            if i % 2 == 0 && d.len() >= 4 {
                d[..4].copy_from_slice(if i % 4 == 0 {
                    &META_MAGIC
                } else {
                    &COUNTER_MAGIC
                });
            }
            check(true, &d);
            check(false, &d);
        }
        // Some mutations (e.g. of a padding byte) leave a decodable file.
        assert!(ok > 0);
    }
}
