//! Go coverage as input: text profiles (`go test -coverprofile`, `go tool covdata
//! textfmt`) and Go's binary coverage directories (`covmeta.*` + `covcounters.*`, written
//! by `-cover` binaries under `GOCOVERDIR`), decoded natively.
//!
//! Both become [`Blocks`]: Go's coverable units, keyed by (file, start, end), with the
//! counts of every process summed (`set` mode ORs), as `go tool covdata merge` and `go
//! tool cover` do. [`Blocks::lines`] then turns them into one row per source line: a block
//! `file:L1.C1,L2.C2` covers lines L1..=L2, a line's hits are the max over the blocks
//! covering it, and its function is that of the first block (by start) covering it.
//! Import paths become repository paths by `--go-module MODULE=DIR` rules.

pub mod covdata;
pub mod text;

use std::collections::{BTreeMap, HashMap};

use covmerge_proto::input::GoModule;

/// Why a Go coverage input cannot be read. Every variant names the file (and, for
/// binary data, the byte offset; for text profiles, the line).
#[derive(Debug, thiserror::Error)]
pub enum GoError {
    /// The binary data does not decode.
    #[error("{file}: at byte {offset}: {problem}")]
    Corrupt {
        /// The file, as found under the input.
        file: String,
        /// Offset of the problem in the file.
        offset: u64,
        /// What was found.
        problem: String,
    },
    /// A file of the input could not be read.
    #[error("{file}: {source}")]
    Io {
        /// The file, as found under the input.
        file: String,
        /// The read error.
        #[source]
        source: std::io::Error,
    },
    /// A malformed line of a text profile.
    #[error("{input}:{line}: {problem}")]
    Line {
        /// The input, as the user named it.
        input: String,
        /// The line, counting from 1.
        line: u64,
        /// What is wrong with it.
        problem: String,
    },
    /// The input as a whole is wrong (an empty text profile, a GOCOVERDIR entry that is not a regular file, ...).
    #[error("{input}: {problem}")]
    Input {
        /// The input, as the user named it.
        input: String,
        /// What is wrong.
        problem: String,
    },
}

/// Go's counter modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `set`: a block ran or did not (0 or 1).
    Set,
    /// `count`: how many times a block ran.
    Count,
    /// `atomic`: as `count`, counted with atomic adds.
    Atomic,
}

impl Mode {
    /// The mode a profile's `mode:` line or a meta-data file names.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "set" => Some(Mode::Set),
            "count" => Some(Mode::Count),
            "atomic" => Some(Mode::Atomic),
            _ => None,
        }
    }

    /// The mode's name in Go's profiles.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Set => "set",
            Mode::Count => "count",
            Mode::Atomic => "atomic",
        }
    }
}

/// A block's position: start line, start column, end line, end column.
pub type Pos = [u32; 4];

/// The most lines one block may span: a larger span is corrupt data (and would
/// otherwise cost memory in proportion to a number read from the input).
pub const MAX_BLOCK_LINES: u32 = 1 << 20;

/// Checks a block's position; the problem otherwise.
pub fn check_pos(p: Pos) -> Result<(), String> {
    let [sl, sc, el, ec] = p;
    if sl == 0 || el < sl || (el == sl && ec < sc) {
        return Err(format!("block {sl}.{sc},{el}.{ec} does not run forward"));
    }
    if el - sl >= MAX_BLOCK_LINES {
        return Err(format!(
            "block {sl}.{sc},{el}.{ec} spans more than {MAX_BLOCK_LINES} lines"
        ));
    }
    Ok(())
}

#[derive(Debug, Clone, Copy)]
struct BlockVal {
    stmts: u32,
    count: u64,
    /// Function id in [`Blocks::funcs`] (0: none known, text profiles).
    func: u32,
}

/// The blocks of one input with their counts summed over processes.
#[derive(Debug)]
pub struct Blocks {
    mode: Option<Mode>,
    files: Vec<String>,
    file_ids: HashMap<String, u32>,
    funcs: Vec<String>,
    func_ids: HashMap<String, u32>,
    map: HashMap<(u32, Pos), BlockVal>,
}

impl Default for Blocks {
    fn default() -> Self {
        Blocks {
            mode: None,
            files: Vec::new(),
            file_ids: HashMap::new(),
            funcs: vec![String::new()],
            func_ids: HashMap::from([(String::new(), 0)]),
            map: HashMap::new(),
        }
    }
}

fn intern(names: &mut Vec<String>, ids: &mut HashMap<String, u32>, s: &str) -> u32 {
    if let Some(&id) = ids.get(s) {
        return id;
    }
    let id = names.len() as u32;
    names.push(s.to_string());
    ids.insert(s.to_string(), id);
    id
}

/// Why a block cannot be added.
#[derive(Debug, PartialEq, Eq)]
pub enum AddError {
    /// Another mode than the input's first.
    Mode(Mode, Mode),
    /// The same block with another statement count.
    Stmts(u32, u32),
    /// The summed count no longer fits Go's int64.
    Overflow,
}

impl std::fmt::Display for AddError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AddError::Mode(a, b) => write!(
                f,
                "counter mode {} differs from the input's mode {}",
                b.name(),
                a.name()
            ),
            AddError::Stmts(a, b) => write!(
                f,
                "the block was seen with {a} statements before, now {b} (two different builds in one input?)"
            ),
            AddError::Overflow => write!(f, "the block's summed count exceeds int64"),
        }
    }
}

impl Blocks {
    /// The counter mode of the input, once known.
    pub fn mode(&self) -> Option<Mode> {
        self.mode
    }

    /// Sets the input's mode; all of its data must share it.
    pub fn set_mode(&mut self, m: Mode) -> Result<(), AddError> {
        match self.mode {
            None => {
                self.mode = Some(m);
                Ok(())
            }
            Some(old) if old == m => Ok(()),
            Some(old) => Err(AddError::Mode(old, m)),
        }
    }

    /// Every block: (Go file, position) → (statements, count, function).
    pub fn entries(&self) -> BTreeMap<(String, Pos), (u32, u64, String)> {
        self.map
            .iter()
            .map(|(&(f, pos), b)| {
                (
                    (self.files[f as usize].clone(), pos),
                    (b.stmts, b.count, self.funcs[b.func as usize].clone()),
                )
            })
            .collect()
    }

    /// Number of distinct blocks.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no block was added.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Adds one block's count: summed with the counts already seen for it (`set` mode:
    /// OR). `pos` must have passed [`check_pos`].
    pub fn add(
        &mut self,
        file: &str,
        func: &str,
        pos: Pos,
        stmts: u32,
        count: u64,
    ) -> Result<(), AddError> {
        let file = intern(&mut self.files, &mut self.file_ids, file);
        let func = intern(&mut self.funcs, &mut self.func_ids, func);
        self.add_ids(file, func, pos, stmts, count)
    }

    /// The id of Go file `f`, for [`Blocks::add_ids`].
    pub(crate) fn file_id(&mut self, f: &str) -> u32 {
        intern(&mut self.files, &mut self.file_ids, f)
    }

    /// The id of function `f`, for [`Blocks::add_ids`].
    pub(crate) fn func_id(&mut self, f: &str) -> u32 {
        intern(&mut self.funcs, &mut self.func_ids, f)
    }

    pub(crate) fn add_ids(
        &mut self,
        file: u32,
        func: u32,
        pos: Pos,
        stmts: u32,
        count: u64,
    ) -> Result<(), AddError> {
        let set = self.mode == Some(Mode::Set);
        let count = if set { u64::from(count != 0) } else { count };
        match self.map.entry((file, pos)) {
            std::collections::hash_map::Entry::Vacant(v) => {
                if count > i64::MAX as u64 {
                    return Err(AddError::Overflow);
                }
                v.insert(BlockVal { stmts, count, func });
            }
            std::collections::hash_map::Entry::Occupied(mut o) => {
                let b = o.get_mut();
                if b.stmts != stmts {
                    return Err(AddError::Stmts(b.stmts, stmts));
                }
                b.count = if set {
                    b.count | count
                } else {
                    b.count
                        .checked_add(count)
                        .filter(|&c| c <= i64::MAX as u64)
                        .ok_or(AddError::Overflow)?
                };
                if b.func == 0 {
                    b.func = func;
                }
            }
        }
        Ok(())
    }

    /// One row per covered source line, files in path order and lines ascending; Go
    /// files mapped to repository paths by `modules`. A file no rule maps fails the
    /// input (named `input`). Collects [`Blocks::for_each_line`]: for tests and small
    /// inputs only, as it holds a row per line.
    pub fn lines(&self, input: &str, modules: &ModuleMap) -> Result<Vec<GoLine>, GoError> {
        let mut out = Vec::new();
        self.for_each_line(input, modules, |file, func, line, hits| {
            out.push(GoLine {
                file: file.to_string(),
                func: func.to_string(),
                line,
                hits,
            });
            Ok::<(), GoError>(())
        })?;
        Ok(out)
    }

    /// Calls `f(path, function, line, hits)` once per covered source line, files in
    /// path order and lines ascending, Go files mapped to repository paths by `modules`
    /// (a file no rule maps fails the input, named `input`, before any call). Holds
    /// the blocks of the input and nothing per line: a block's lines are swept, not
    /// expanded into a map, so that the caller's memory budget covers what the lines
    /// become (a 2^20-line block is 44 bytes of profile).
    pub fn for_each_line<E: From<GoError>>(
        &self,
        input: &str,
        modules: &ModuleMap,
        mut f: impl FnMut(&str, &str, u32, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut files: Vec<(String, usize)> = Vec::with_capacity(self.files.len());
        for (i, g) in self.files.iter().enumerate() {
            let path = modules.map(g).ok_or_else(|| GoError::Input {
                input: input.to_string(),
                problem: format!(
                    "Go file {g:?} is under no --go-module rule{}",
                    modules.describe()
                ),
            })?;
            if let Err(why) = covmerge_proto::path::canonical_path(path.as_bytes()) {
                return Err(GoError::Input {
                    input: input.to_string(),
                    problem: format!(
                        "Go file {g:?} maps to {path:?}, not a canonical path relative to the source root: it {why}"
                    ),
                }
                .into());
            }
            files.push((path, i));
        }
        files.sort();
        let mut per_file: Vec<Vec<(Pos, BlockVal)>> = vec![Vec::new(); self.files.len()];
        for (&(file, pos), b) in &self.map {
            per_file[file as usize].push((pos, *b));
        }
        for (path, i) in &files {
            let blocks = std::mem::take(&mut per_file[*i]);
            self.sweep(blocks, |line, func, hits| {
                f(path, &self.funcs[func as usize], line, hits)
            })?;
        }
        Ok(())
    }

    /// Calls `f(line, function id, hits)` for every line some block of one file covers,
    /// ascending: hits are the max over the blocks covering the line, the function that
    /// of the first of them by start (line, column), on a tie the smallest name. Two
    /// heaps of the blocks covering the current line, entries dropped once past their
    /// end: O(blocks × log blocks + lines) time, O(blocks) memory.
    fn sweep<E>(
        &self,
        mut blocks: Vec<(Pos, BlockVal)>,
        mut f: impl FnMut(u32, u32, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let name = |b: &BlockVal| self.funcs[b.func as usize].as_str();
        blocks.sort_by(|a, b| (a.0[0], a.0[1], name(&a.1)).cmp(&(b.0[0], b.0[1], name(&b.1))));
        // (count, last line) and (rank in `blocks`, last line): the rank orders by
        // start and function name, as sorted above.
        let mut hits: BinaryHeap<(u64, u32)> = BinaryHeap::new();
        let mut first: BinaryHeap<Reverse<(usize, u32)>> = BinaryHeap::new();
        let mut next = 0;
        // u64: a block may end on line u32::MAX.
        let mut line: u64 = 0;
        loop {
            if hits.is_empty() {
                match blocks.get(next) {
                    Some(b) => line = line.max(b.0[0] as u64),
                    None => return Ok(()),
                }
            }
            while let Some((pos, b)) = blocks.get(next) {
                if pos[0] as u64 > line {
                    break;
                }
                hits.push((b.count, pos[2]));
                first.push(Reverse((next, pos[2])));
                next += 1;
            }
            while hits.peek().is_some_and(|&(_, end)| (end as u64) < line) {
                hits.pop();
            }
            while first
                .peek()
                .is_some_and(|&Reverse((_, end))| (end as u64) < line)
            {
                first.pop();
            }
            if let (Some(&(count, _)), Some(&Reverse((rank, _)))) = (hits.peek(), first.peek()) {
                f(line as u32, blocks[rank].1.func, count)?;
                line += 1;
            }
        }
    }
}

/// One source line of Go coverage, as a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoLine {
    /// Repository path.
    pub file: String,
    /// The function from the meta-data (empty for text profiles).
    pub func: String,
    /// The line, counting from 1.
    pub line: u32,
    /// Its hits, summed over the blocks on it (0 or 1 in `set` mode).
    pub hits: u64,
}

/// `--go-module MODULE=DIR` rules: the longest MODULE that is a path prefix of a Go
/// file's import path wins.
#[derive(Debug, Clone, Default)]
pub struct ModuleMap {
    rules: Vec<GoModule>,
}

impl ModuleMap {
    /// The map of the given `--go-module` rules.
    pub fn new(rules: &[GoModule]) -> Self {
        let mut rules = rules.to_vec();
        rules.sort_by_key(|r| std::cmp::Reverse(r.module.len()));
        ModuleMap { rules }
    }

    /// The repository path of Go file `f` (an import path and file name), as the
    /// longest matching rule maps it; the caller checks that it is canonical.
    pub fn map(&self, f: &str) -> Option<String> {
        for r in &self.rules {
            let m = r.module.trim_end_matches('/');
            let Some(rest) = f.strip_prefix(m).and_then(|r| r.strip_prefix('/')) else {
                continue;
            };
            let dir = r.dir.trim_end_matches('/');
            let path = if dir == "." || dir.is_empty() {
                rest.to_string()
            } else {
                format!("{dir}/{rest}")
            };
            return Some(path);
        }
        None
    }

    fn describe(&self) -> String {
        if self.rules.is_empty() {
            " (none given: add --go-module MODULE=DIR)".to_string()
        } else {
            let r: Vec<String> = self
                .rules
                .iter()
                .map(|r| format!("{}={}", r.module, r.dir))
                .collect();
            format!(" (rules: {})", r.join(", "))
        }
    }
}

/// Parses `MODULE=DIR`: MODULE an import path, DIR a canonical path relative to the
/// repository root or `.` for the root, each written one way only (no `./`, no
/// trailing or doubled `/`): `X=./` and `X=.` were one rule spelled two ways, and
/// `X=a/` a path no other flag or row may use.
pub fn parse_module_rule(s: &str) -> Result<GoModule, String> {
    let (m, d) = s
        .split_once('=')
        .ok_or_else(|| format!("--go-module {s:?}: expected MODULE=DIR"))?;
    if m.is_empty() {
        return Err(format!("--go-module {s:?}: empty MODULE"));
    }
    if let Err(why) = covmerge_proto::path::canonical_path(m.as_bytes()) {
        return Err(format!(
            "--go-module {s:?}: MODULE must be an import path (segments joined by single `/`, none `.` or `..`): it {why}"
        ));
    }
    if d.is_empty() {
        return Err(format!(
            "--go-module {s:?}: empty DIR (`.` is the repository root)"
        ));
    }
    if d != "." {
        if let Err(why) = covmerge_proto::path::canonical_path(d.as_bytes()) {
            return Err(format!(
                "--go-module {s:?}: DIR must be `.` (the repository root) or a canonical path relative to it: it {why}"
            ));
        }
    }
    Ok(GoModule {
        module: m.to_string(),
        dir: d.to_string(),
    })
}

pub use covmerge_proto::input::default_manager;

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(m: &str, d: &str) -> GoModule {
        GoModule {
            module: m.into(),
            dir: d.into(),
        }
    }

    #[test]
    fn module_rules_map_import_paths_to_repository_paths() {
        let m = ModuleMap::new(&[
            rule("example.com/m", "."),
            rule("example.com/m/sub", "third_party/sub"),
        ]);
        assert_eq!(m.map("example.com/m/pkg/f.go").as_deref(), Some("pkg/f.go"));
        assert_eq!(m.map("example.com/m/f.go").as_deref(), Some("f.go"));
        // The longest module wins.
        assert_eq!(
            m.map("example.com/m/sub/x/y.go").as_deref(),
            Some("third_party/sub/x/y.go")
        );
        // Only at a path boundary.
        assert_eq!(m.map("example.com/mod/f.go"), None);
        assert_eq!(m.map("other.org/f.go"), None);
        assert!(parse_module_rule("example.com/m=.").is_ok());
        assert!(parse_module_rule("example.com/m=a/b").is_ok());
        assert!(parse_module_rule("example.com/m=../x").is_err());
        assert!(parse_module_rule("example.com/m=./x").is_err());
        assert!(parse_module_rule("example.com/m=a//x").is_err());
        assert!(parse_module_rule("example.com/m=/abs").is_err());
        assert!(parse_module_rule("nodir").is_err());
    }

    /// `--go-module X=./` was taken for `X=.` (and `X=a/` for `X=a`, `X=` for the
    /// root): a directory written another way than every path of the repository.
    /// Each non-canonical MODULE or DIR is refused, naming the flag, the value and why.
    #[test]
    fn go_module_dot_slash_was_accepted() {
        for (rule, why) in [
            ("X=./", "ends with `/`"),
            ("X=./x", "has a `.` segment"),
            ("X=a/", "ends with `/`"),
            ("X=a//b", "has an empty segment"),
            ("X=../x", "has a `..` segment"),
            ("X=x/..", "has a `..` segment"),
            ("X=/abs", "starts with `/`"),
            ("X=/", "starts with `/`"),
            ("X=", "empty DIR"),
            ("=.", "empty MODULE"),
            ("X/=.", "ends with `/`"),
            ("/=.", "starts with `/`"),
            ("a//b=.", "has an empty segment"),
            ("a/./b=.", "has a `.` segment"),
            ("X=a\\b", "backslash"),
        ] {
            let e = parse_module_rule(rule).unwrap_err();
            assert!(
                e.starts_with(&format!("--go-module {rule:?}: ")) && e.contains(why),
                "{rule}: {e}"
            );
        }
        for (rule, dir) in [
            ("X=.", "."),
            ("X=a", "a"),
            ("example.com/m=a/b.c/d", "a/b.c/d"),
        ] {
            assert_eq!(parse_module_rule(rule).unwrap().dir, dir, "{rule}");
        }
        // The first `=` ends MODULE: a DIR may hold one.
        assert_eq!(parse_module_rule("X=a=b").unwrap().dir, "a=b");
    }

    #[test]
    fn lines_take_the_max_over_blocks_and_sum_blocks_over_processes() {
        let mut b = Blocks::default();
        b.set_mode(Mode::Count).unwrap();
        b.add("example.com/m/a.go", "F", [3, 2, 5, 1], 2, 4)
            .unwrap();
        b.add("example.com/m/a.go", "F", [3, 2, 5, 1], 2, 3)
            .unwrap(); // another process
        b.add("example.com/m/a.go", "G", [5, 3, 6, 1], 1, 10)
            .unwrap();
        assert_eq!(
            b.add("example.com/m/a.go", "F", [3, 2, 5, 1], 9, 1),
            Err(AddError::Stmts(2, 9))
        );
        let m = ModuleMap::new(&[rule("example.com/m", "go")]);
        let lines = b.lines("in", &m).unwrap();
        let got: Vec<(u32, u64, &str)> = lines
            .iter()
            .map(|l| (l.line, l.hits, l.func.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![(3, 7, "F"), (4, 7, "F"), (5, 10, "F"), (6, 10, "G")]
        );
        assert!(lines.iter().all(|l| l.file == "go/a.go"));
        let err = b
            .lines("in", &ModuleMap::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("example.com/m/a.go") && err.contains("--go-module"),
            "{err}"
        );
    }

    #[test]
    fn go_files_mapped_to_non_canonical_paths_fail_the_input() {
        let m = ModuleMap::new(&[rule("example.com/m", ".")]);
        for f in [
            "example.com/m/../etc/passwd",
            "example.com/m/./a.go",
            "example.com/m/k//a.go",
            "example.com/m/k/",
        ] {
            let mut b = Blocks::default();
            b.set_mode(Mode::Set).unwrap();
            b.add(f, "F", [1, 1, 2, 1], 1, 1).unwrap();
            let err = b.lines("in", &m).unwrap_err().to_string();
            assert!(
                err.contains("in") && err.contains("not a canonical path"),
                "{f}: {err}"
            );
        }
    }

    #[test]
    fn set_mode_ors_and_counts_overflow_is_an_error() {
        let mut b = Blocks::default();
        b.set_mode(Mode::Set).unwrap();
        b.add("m/a.go", "", [1, 1, 1, 9], 1, 1).unwrap();
        b.add("m/a.go", "", [1, 1, 1, 9], 1, 1).unwrap();
        b.add("m/a.go", "", [2, 1, 2, 9], 1, 0).unwrap();
        let lines = b.lines("in", &ModuleMap::new(&[rule("m", ".")])).unwrap();
        assert_eq!(lines.iter().map(|l| l.hits).collect::<Vec<_>>(), vec![1, 0]);
        assert_eq!(
            b.set_mode(Mode::Count),
            Err(AddError::Mode(Mode::Set, Mode::Count))
        );
        let mut c = Blocks::default();
        c.set_mode(Mode::Count).unwrap();
        c.add("m/a.go", "", [1, 1, 1, 9], 1, i64::MAX as u64)
            .unwrap();
        assert_eq!(
            c.add("m/a.go", "", [1, 1, 1, 9], 1, 1),
            Err(AddError::Overflow)
        );
    }

    /// The sweep against the expansion it replaced (every line of every block in a
    /// map: max hits, the function of the first block by start, then by name), on
    /// random overlapping blocks, a block ending on the last u32 line included.
    #[test]
    fn swept_lines_equal_every_block_expanded() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as u32
        };
        let m = ModuleMap::new(&[rule("m", ".")]);
        for case in 0..300 {
            let mut b = Blocks::default();
            b.set_mode(Mode::Count).unwrap();
            // (path, line) -> (hits, start of the function's block, function).
            type Want = BTreeMap<(String, u32), (u64, (u32, u32), String)>;
            let mut want = Want::new();
            for _ in 0..1 + next(12) {
                let file = format!("m/f{}.go", next(3));
                let base = if case % 50 == 0 { u32::MAX - 40 } else { 1 };
                let sl = base + next(30);
                let el = sl + next(u32::MAX - sl).min(next(10));
                let sc = next(4);
                let func = ["", "a", "b"][next(3) as usize];
                let count = next(5) as u64;
                if b.add(&file, func, [sl, sc, el, 9], 1, count).is_err() {
                    continue;
                }
            }
            for ((file, pos), (_, count, func)) in b.entries() {
                for l in pos[0]..=pos[2] {
                    let path = file.strip_prefix("m/").unwrap().to_string();
                    let e = want
                        .entry((path, l))
                        .or_insert((0, (pos[0], pos[1]), func.clone()));
                    e.0 = e.0.max(count);
                    if ((pos[0], pos[1]), &func) < (e.1, &e.2) {
                        e.1 = (pos[0], pos[1]);
                        e.2 = func.clone();
                    }
                }
            }
            let got: Vec<(String, u32, u64, String)> = b
                .lines("in", &m)
                .unwrap()
                .into_iter()
                .map(|l| (l.file, l.line, l.hits, l.func))
                .collect();
            let want: Vec<(String, u32, u64, String)> = want
                .into_iter()
                .map(|((f, l), (h, _, func))| (f, l, h, func))
                .collect();
            assert_eq!(got, want, "case {case}");
        }
    }
}
