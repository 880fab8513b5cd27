//! Writes kernel-like C: plausible file paths, a first version of each file, and the
//! edits between commits (functions added, statements changed or deleted, functions
//! removed), all drawn from the seeded [`Rng`] so a seed always gives the same tree.

use super::parse::parse_funcs;
use super::words::{Subsystem, CONSTS, ERRNOS, SUBSYSTEMS, VERBS};
use super::Arena;
use crate::rng::Rng;

/// Per-file generator state kept across the whole history.
pub(crate) struct FileGen {
    pub(crate) path: String,
    sub: usize,
    next_func: u32,
    /// Names of functions generated so far (callees for new statements).
    funcs: Vec<String>,
}

/// Chooses `n` unique plausible kernel file paths.
pub(crate) fn choose_paths(rng: &mut Rng, n: usize) -> Vec<FileGen> {
    let mut used = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let mut sub = rng.below(SUBSYSTEMS.len());
        let mut name = *rng.pick(SUBSYSTEMS[sub].names);
        // Prefer fresh plausible names; number them once the lists run dry.
        for _ in 0..32 {
            if !used.contains(&format!("{}/{}.c", SUBSYSTEMS[sub].dir, name)) {
                break;
            }
            sub = rng.below(SUBSYSTEMS.len());
            name = *rng.pick(SUBSYSTEMS[sub].names);
        }
        let s = &SUBSYSTEMS[sub];
        let mut path = format!("{}/{}.c", s.dir, name);
        let mut k = 2;
        while used.contains(&path) {
            path = format!("{}/{}{}.c", s.dir, name, k);
            k += 1;
        }
        used.insert(path.clone());
        out.push(FileGen {
            path,
            sub,
            next_func: 1,
            funcs: Vec::new(),
        });
    }
    out
}

impl FileGen {
    fn sub(&self) -> &'static Subsystem {
        &SUBSYSTEMS[self.sub]
    }

    fn new_func_name(&mut self, rng: &mut Rng) -> String {
        let name = format!(
            "{}_{}_{}",
            self.sub().prefix,
            rng.pick(VERBS),
            self.next_func
        );
        self.next_func += 1;
        self.funcs.push(name.clone());
        name
    }

    fn callee(&self, rng: &mut Rng) -> String {
        if !self.funcs.is_empty() && rng.chance(0.6) {
            rng.pick(&self.funcs).clone()
        } else {
            format!("{}_{}", self.sub().prefix, rng.pick(VERBS))
        }
    }

    /// One simple statement: one line, or a braceless `if` plus its body.
    /// Lines are indented by `ind` tabs.
    fn simple_stmt(&self, rng: &mut Rng, ind: usize, has_out: bool) -> Vec<String> {
        let t = "\t".repeat(ind);
        let v = self.sub().var;
        match rng.below(16) {
            0 | 1 => vec![format!("{t}ret = {}({v}, flags);", self.callee(rng))],
            2 => vec![
                format!("{t}if (ret)"),
                if has_out {
                    format!("{t}\tgoto out;")
                } else {
                    format!("{t}\treturn ret;")
                },
            ],
            3 => vec![
                format!("{t}if (!{v})"),
                format!("{t}\treturn {};", rng.pick(ERRNOS)),
            ],
            4 => vec![format!("{t}spin_lock(&{v}->lock);")],
            5 => vec![format!("{t}spin_unlock(&{v}->lock);")],
            6 => vec![format!("{t}flags |= {};", rng.pick(CONSTS))],
            7 => vec![format!("{t}WARN_ON_ONCE(!{v});")],
            8 => vec![format!("{t}{}({v});", self.callee(rng))],
            9 => vec![format!("{t}rcu_read_lock();")],
            10 => vec![format!("{t}rcu_read_unlock();")],
            11 => vec![format!("{t}ret = {};", rng.pick(ERRNOS))],
            12 => vec![format!("{t}count += {};", rng.range(1, 64))],
            13 => vec![format!(
                "{t}pr_debug(\"{}: %s failed: %d\\n\", __func__, ret);",
                self.sub().prefix
            )],
            14 => vec![format!("{t}{v}->flags &= ~{};", rng.pick(CONSTS))],
            _ => vec![format!("{t}might_sleep();")],
        }
    }

    fn block(&self, rng: &mut Rng, has_out: bool, out: &mut Vec<String>) {
        let v = self.sub().var;
        if rng.chance(0.5) {
            out.push(format!("\tif ({v}->flags & {}) {{", rng.pick(CONSTS)));
        } else {
            out.push("\tfor (i = 0; i < count; i++) {".to_string());
        }
        for _ in 0..rng.range(1, 3) {
            out.extend(self.simple_stmt(rng, 2, has_out));
        }
        out.push("\t}".to_string());
    }

    /// A whole function block: signature..closing brace, optional
    /// EXPORT_SYMBOL line, then one blank line.
    pub(crate) fn function(&mut self, rng: &mut Rng, target: usize) -> Vec<String> {
        let name = self.new_func_name(rng);
        let s = self.sub();
        let kind = rng.below(10);
        let (ret_ty, exported) = match kind {
            0 => ("void", false),
            1 => ("int", true),
            _ => ("int", false),
        };
        let stat = if exported { "" } else { "static " };
        let mut f = vec![
            format!(
                "{stat}{ret_ty} {name}(struct {} *{}, unsigned int flags)",
                s.ty, s.var
            ),
            "{".to_string(),
        ];
        let has_out = ret_ty == "int" && rng.chance(0.5);
        if ret_ty == "int" {
            f.push("\tint ret = 0;".to_string());
        }
        f.push("\tint i, count = 0;".to_string());
        f.push(String::new());
        let target = target.max(8);
        while f.len() + 3 < target {
            match rng.below(10) {
                0 | 1 => self.block(rng, has_out, &mut f),
                2 => f.push(String::new()),
                _ => f.extend(self.simple_stmt(rng, 1, has_out)),
            }
        }
        if f.last().is_some_and(|l| !l.is_empty()) {
            f.push(String::new());
        }
        if has_out {
            f.push("out:".to_string());
            f.push("\treturn ret;".to_string());
        } else if ret_ty == "int" {
            f.push(
                if rng.chance(0.5) {
                    "\treturn 0;"
                } else {
                    "\treturn ret;"
                }
                .to_string(),
            );
        }
        f.push("}".to_string());
        if exported {
            f.push(format!("EXPORT_SYMBOL({name});"));
        }
        f.push(String::new());
        f
    }

    /// The initial version of the file with roughly `lines` lines.
    pub(crate) fn initial(&mut self, rng: &mut Rng, lines: usize, arena: &mut Arena) -> Vec<u32> {
        let s = self.sub();
        let mut text: Vec<String> = vec![
            "// SPDX-License-Identifier: GPL-2.0".into(),
            "/*".into(),
            format!(" *  linux/{}", self.path),
            " *".into(),
            format!(
                " *  Copyright (C) {} Synthetic Corpus Authors",
                1991 + rng.below(30)
            ),
            " */".into(),
            String::new(),
            "#include <linux/kernel.h>".into(),
            "#include <linux/module.h>".into(),
        ];
        for inc in s.includes {
            text.push(format!("#include {inc}"));
        }
        text.push(String::new());
        text.push(format!("static DEFINE_MUTEX({}_mutex);", s.prefix));
        text.push(format!("static int {}_debug;", s.prefix));
        text.push(String::new());
        loop {
            let remaining = lines.saturating_sub(text.len() + 2);
            let target = rng.range(8, 36).min(remaining.max(8));
            text.extend(self.function(rng, target));
            if text.len() + 2 >= lines {
                break;
            }
        }
        text.push("MODULE_LICENSE(\"GPL\");".to_string());
        text.iter().map(|l| arena.push(l)).collect()
    }

    /// Applies 1..=4 random edits to `lines`, returning the new version.
    pub(crate) fn edit(&mut self, rng: &mut Rng, lines: &[u32], arena: &mut Arena) -> Vec<u32> {
        let mut v: Vec<u32> = lines.to_vec();
        let n_edits = rng.range(1, 4);
        for _ in 0..n_edits {
            let op = rng.below(100);
            let simple = simple_lines(&v, arena);
            if op < 35 && !simple.is_empty() {
                // insert a few statements after a simple statement
                let after = *rng.pick(&simple);
                let ind = indent_of(arena.get(v[after]));
                let at = after + 1;
                let mut new = Vec::new();
                for _ in 0..rng.range(1, 3) {
                    new.extend(self.simple_stmt(rng, ind, false));
                }
                let ids: Vec<u32> = new.iter().map(|l| arena.push(l)).collect();
                v.splice(at..at, ids);
            } else if op < 60 && simple.len() > 2 {
                // delete 1..3 consecutive simple statements
                let i = rng.below(simple.len());
                let mut end = i + 1;
                let want = rng.range(1, 3);
                while end < simple.len() && end - i < want && simple[end] == simple[end - 1] + 1 {
                    end += 1;
                }
                let (a, b) = (simple[i], simple[end - 1] + 1);
                v.drain(a..b);
            } else if op < 85 && !simple.is_empty() {
                // change one line
                let at = *rng.pick(&simple);
                let ind = indent_of(arena.get(v[at]));
                let new = loop {
                    let s = self.simple_stmt(rng, ind, false);
                    if s.len() == 1 {
                        break s.into_iter().next().unwrap_or_default();
                    }
                };
                v[at] = arena.push(&new);
            } else if op < 93 || parse_funcs(&v, arena).len() <= 2 {
                // add a whole function before an existing one
                let funcs = parse_funcs(&v, arena);
                let at = if funcs.is_empty() {
                    v.len().saturating_sub(1)
                } else {
                    rng.pick(&funcs).start
                };
                let len = rng.range(8, 30);
                let f = self.function(rng, len);
                let ids: Vec<u32> = f.iter().map(|l| arena.push(l)).collect();
                v.splice(at..at, ids);
            } else {
                // remove a whole function (with EXPORT_SYMBOL and blank line)
                let funcs = parse_funcs(&v, arena);
                let f = rng.pick(&funcs);
                let mut end = f.end + 1;
                if end < v.len() && arena.get(v[end]).starts_with("EXPORT_SYMBOL") {
                    end += 1;
                }
                if end < v.len() && arena.get(v[end]).is_empty() {
                    end += 1;
                }
                v.drain(f.start..end);
            }
        }
        v
    }
}

fn indent_of(l: &str) -> usize {
    l.bytes().take_while(|&b| b == b'\t').count().max(1)
}

/// Indices of single-line statements inside function bodies that can be
/// deleted or replaced without breaking the brace structure.
fn simple_lines(v: &[u32], arena: &Arena) -> Vec<usize> {
    let mut out = Vec::new();
    for f in parse_funcs(v, arena) {
        for i in f.start + 2..f.end {
            let l = arena.get(v[i]);
            let prev = arena.get(v[i - 1]);
            if l.starts_with('\t')
                && l.ends_with(';')
                && !prev.ends_with(')')
                && !l.starts_with("\tint ")
                && !l.trim_start().starts_with("return")
                && !l.trim_start().starts_with("goto")
            {
                out.push(i);
            }
        }
    }
    out
}
