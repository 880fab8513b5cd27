//! Reads the generated C back: where functions start and end, and which of their lines
//! are instrumented (get a PC) in a build. The choice depends only on content, so every
//! commit instruments the same code.

use std::collections::HashMap;

use super::Arena;
use crate::rng::{hash_bytes, mix, unit};

/// A function in a file version (0-based line indices, inclusive).
#[derive(Clone, Debug)]
pub(crate) struct Func {
    pub(crate) name: String,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// Finds functions: a signature line at column 0 followed by a line `{`,
/// ending at the next line that is exactly `}`.
pub(crate) fn parse_funcs(v: &[u32], arena: &Arena) -> Vec<Func> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < v.len() {
        let l = arena.get(v[i]);
        if arena.get(v[i + 1]) == "{" && is_signature(l) {
            let name = func_name(l);
            let mut j = i + 2;
            while j < v.len() && arena.get(v[j]) != "}" {
                j += 1;
            }
            let end = j.min(v.len() - 1);
            out.push(Func {
                name,
                start: i,
                end,
            });
            i = end + 1;
        } else {
            i += 1;
        }
    }
    out
}

fn is_signature(l: &str) -> bool {
    !l.is_empty()
        && !l.starts_with(|c: char| {
            c.is_whitespace() || c == '#' || c == '/' || c == '*' || c == '}'
        })
        && l.contains('(')
        && !l.ends_with(';')
}

fn func_name(sig: &str) -> String {
    let before = &sig[..sig.find('(').unwrap_or(sig.len())];
    before
        .rsplit(|c: char| c.is_whitespace() || c == '*')
        .next()
        .unwrap_or("")
        .to_string()
}

/// One instrumented line of a file version (one CSV row per build).
pub(crate) struct Instr {
    /// 1-based line number.
    pub(crate) sl: u32,
    /// Index into the function name list of the version.
    pub(crate) func: u32,
    pub(crate) sc: u32,
    pub(crate) ec: u32,
    /// Stable per-content key: drives pc, inline, hotness.
    pub(crate) key: u64,
}

/// Whether a line in a function gets a PC at all.
fn is_code_line(l: &str) -> bool {
    let t = l.trim();
    !(t.is_empty()
        || t == "{"
        || (t.ends_with(':') && !l.starts_with('\t'))
        || (t == "}" && l.starts_with('\t')))
}

/// Ratio of all lines to code lines, used to turn the "share of a file's
/// lines" into a per-code-line probability (computed once per file).
pub(crate) fn code_ratio(v: &[u32], arena: &Arena) -> f64 {
    let mut code = 0usize;
    for f in parse_funcs(v, arena) {
        code += (f.start..=f.end)
            .filter(|&i| is_code_line(arena.get(v[i])))
            .count();
    }
    if code == 0 {
        1.0
    } else {
        v.len() as f64 / code as f64
    }
}

/// The instrumented lines of a version. The choice depends only on the
/// seed, path, function name, line content and its occurrence index within
/// the function, so every commit instruments the same code.
pub(crate) fn instrumented(
    v: &[u32],
    arena: &Arena,
    file_key: u64,
    p: f64,
    names: &mut Vec<String>,
    out: &mut Vec<Instr>,
) {
    names.clear();
    out.clear();
    let mut occ: HashMap<u64, u32> = HashMap::new();
    for f in parse_funcs(v, arena) {
        occ.clear();
        let fkey = mix(file_key, hash_bytes(1, f.name.as_bytes()));
        let fidx = names.len() as u32;
        names.push(f.name.clone());
        for (i, &id) in v.iter().enumerate().take(f.end + 1).skip(f.start) {
            let l = arena.get(id);
            if !is_code_line(l) {
                continue;
            }
            let ch = hash_bytes(2, l.trim().as_bytes());
            let o = occ.entry(ch).or_insert(0);
            *o += 1;
            let key = mix(mix(fkey, ch), u64::from(*o));
            if unit(key) < p {
                let indent = l.len() - l.trim_start().len();
                out.push(Instr {
                    sl: i as u32 + 1,
                    func: fidx,
                    sc: indent as u32,
                    ec: l.len() as u32,
                    key,
                });
            }
        }
    }
}
