//! Kernel-like C source generation, edits between commits, function parsing
//! and the choice of instrumented lines.

use std::collections::HashMap;

use crate::rng::{hash_bytes, mix, unit, Rng};

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

/// A directory of the synthetic tree: path, identifier prefix, main struct
/// type and plausible file names.
struct Subsystem {
    dir: &'static str,
    prefix: &'static str,
    ty: &'static str,
    var: &'static str,
    names: &'static [&'static str],
    includes: &'static [&'static str],
}

const SUBSYSTEMS: &[Subsystem] = &[
    Subsystem {
        dir: "fs/ext4",
        prefix: "ext4",
        ty: "inode",
        var: "inode",
        names: &[
            "inode", "super", "extents", "namei", "balloc", "dir", "file", "xattr", "ialloc",
            "mballoc",
        ],
        includes: &[
            "<linux/fs.h>",
            "<linux/buffer_head.h>",
            "\"ext4.h\"",
            "\"ext4_jbd2.h\"",
        ],
    },
    Subsystem {
        dir: "fs/btrfs",
        prefix: "btrfs",
        ty: "btrfs_inode",
        var: "inode",
        names: &[
            "inode",
            "ctree",
            "disk-io",
            "extent-tree",
            "volumes",
            "ioctl",
            "send",
            "scrub",
        ],
        includes: &[
            "<linux/fs.h>",
            "<linux/slab.h>",
            "\"ctree.h\"",
            "\"disk-io.h\"",
        ],
    },
    Subsystem {
        dir: "fs/xfs",
        prefix: "xfs",
        ty: "xfs_inode",
        var: "ip",
        names: &[
            "xfs_inode",
            "xfs_iomap",
            "xfs_file",
            "xfs_log",
            "xfs_super",
            "xfs_buf",
        ],
        includes: &["\"xfs.h\"", "\"xfs_fs.h\"", "\"xfs_shared.h\""],
    },
    Subsystem {
        dir: "fs",
        prefix: "vfs",
        ty: "file",
        var: "file",
        names: &[
            "namei",
            "open",
            "read_write",
            "dcache",
            "splice",
            "pipe",
            "exec",
            "select",
        ],
        includes: &["<linux/fs.h>", "<linux/slab.h>", "<linux/uaccess.h>"],
    },
    Subsystem {
        dir: "net/core",
        prefix: "sock",
        ty: "sock",
        var: "sk",
        names: &[
            "sock",
            "dev",
            "skbuff",
            "filter",
            "rtnetlink",
            "neighbour",
            "flow_dissector",
        ],
        includes: &["<linux/skbuff.h>", "<linux/netdevice.h>", "<net/sock.h>"],
    },
    Subsystem {
        dir: "net/ipv4",
        prefix: "tcp",
        ty: "sock",
        var: "sk",
        names: &[
            "tcp_input",
            "tcp_output",
            "tcp",
            "route",
            "ip_output",
            "udp",
            "af_inet",
        ],
        includes: &["<linux/tcp.h>", "<net/tcp.h>", "<net/ip.h>"],
    },
    Subsystem {
        dir: "net/ipv6",
        prefix: "ip6",
        ty: "sk_buff",
        var: "skb",
        names: &["ip6_output", "route", "addrconf", "ndisc", "udp", "exthdrs"],
        includes: &["<linux/ipv6.h>", "<net/ipv6.h>", "<net/ip6_route.h>"],
    },
    Subsystem {
        dir: "net/netfilter",
        prefix: "nf",
        ty: "sk_buff",
        var: "skb",
        names: &[
            "nf_tables_api",
            "nf_conntrack_core",
            "nft_set_rbtree",
            "x_tables",
            "nf_nat_core",
        ],
        includes: &["<linux/netfilter.h>", "<net/netfilter/nf_tables.h>"],
    },
    Subsystem {
        dir: "net/bluetooth",
        prefix: "hci",
        ty: "hci_dev",
        var: "hdev",
        names: &[
            "hci_core",
            "hci_event",
            "l2cap_core",
            "rfcomm",
            "sco",
            "mgmt",
        ],
        includes: &["<net/bluetooth/bluetooth.h>", "<net/bluetooth/hci_core.h>"],
    },
    Subsystem {
        dir: "drivers/net/ethernet/intel/e1000e",
        prefix: "e1000",
        ty: "e1000_adapter",
        var: "adapter",
        names: &["netdev", "ethtool", "ich8lan", "phy", "mac"],
        includes: &["<linux/pci.h>", "<linux/netdevice.h>", "\"e1000.h\""],
    },
    Subsystem {
        dir: "drivers/usb/core",
        prefix: "usb",
        ty: "usb_device",
        var: "udev",
        names: &["hub", "message", "devio", "urb", "driver", "config"],
        includes: &["<linux/usb.h>", "<linux/usb/hcd.h>", "\"usb.h\""],
    },
    Subsystem {
        dir: "drivers/gpu/drm",
        prefix: "drm",
        ty: "drm_device",
        var: "dev",
        names: &[
            "drm_gem",
            "drm_ioctl",
            "drm_atomic",
            "drm_fb_helper",
            "drm_prime",
            "drm_vblank",
        ],
        includes: &["<drm/drm_device.h>", "<drm/drm_file.h>", "<linux/slab.h>"],
    },
    Subsystem {
        dir: "drivers/block",
        prefix: "blkdev",
        ty: "gendisk",
        var: "disk",
        names: &["loop", "nbd", "brd", "null_blk", "virtio_blk"],
        includes: &["<linux/blkdev.h>", "<linux/module.h>"],
    },
    Subsystem {
        dir: "drivers/tty",
        prefix: "tty",
        ty: "tty_struct",
        var: "tty",
        names: &["n_tty", "tty_io", "tty_ioctl", "pty", "vt"],
        includes: &["<linux/tty.h>", "<linux/sched.h>"],
    },
    Subsystem {
        dir: "kernel/sched",
        prefix: "sched",
        ty: "task_struct",
        var: "p",
        names: &["core", "fair", "rt", "deadline", "idle", "topology"],
        includes: &["<linux/sched.h>", "\"sched.h\""],
    },
    Subsystem {
        dir: "kernel/bpf",
        prefix: "bpf",
        ty: "bpf_prog",
        var: "prog",
        names: &["verifier", "syscall", "core", "btf", "hashtab", "arraymap"],
        includes: &["<linux/bpf.h>", "<linux/filter.h>"],
    },
    Subsystem {
        dir: "kernel",
        prefix: "kernel",
        ty: "task_struct",
        var: "task",
        names: &["fork", "exit", "signal", "sys", "workqueue", "module"],
        includes: &["<linux/sched.h>", "<linux/slab.h>", "<linux/syscalls.h>"],
    },
    Subsystem {
        dir: "mm",
        prefix: "mm",
        ty: "vm_area_struct",
        var: "vma",
        names: &[
            "memory",
            "mmap",
            "page_alloc",
            "slub",
            "vmscan",
            "shmem",
            "gup",
        ],
        includes: &["<linux/mm.h>", "<linux/mman.h>", "\"internal.h\""],
    },
    Subsystem {
        dir: "block",
        prefix: "blk",
        ty: "request_queue",
        var: "q",
        names: &["blk-core", "blk-mq", "bio", "genhd", "ioctl"],
        includes: &["<linux/blkdev.h>", "<linux/bio.h>", "\"blk.h\""],
    },
    Subsystem {
        dir: "security/selinux",
        prefix: "selinux",
        ty: "cred",
        var: "cred",
        names: &["hooks", "avc", "selinuxfs", "netlabel"],
        includes: &["<linux/security.h>", "\"avc.h\"", "\"objsec.h\""],
    },
    Subsystem {
        dir: "sound/core",
        prefix: "snd",
        ty: "snd_card",
        var: "card",
        names: &["pcm_native", "control", "timer", "seq", "rawmidi"],
        includes: &["<sound/core.h>", "<sound/pcm.h>"],
    },
    Subsystem {
        dir: "io_uring",
        prefix: "io",
        ty: "io_kiocb",
        var: "req",
        names: &["io_uring", "rw", "net", "poll", "rsrc", "sqpoll"],
        includes: &["<linux/io_uring.h>", "\"io_uring.h\""],
    },
    Subsystem {
        dir: "ipc",
        prefix: "ipc",
        ty: "kern_ipc_perm",
        var: "perm",
        names: &["msg", "sem", "shm", "mqueue"],
        includes: &["<linux/ipc.h>", "<linux/ipc_namespace.h>", "\"util.h\""],
    },
];

const VERBS: &[&str] = &[
    "map_blocks",
    "get_block",
    "alloc",
    "free",
    "init",
    "release",
    "lookup",
    "insert",
    "update",
    "write_begin",
    "write_end",
    "flush",
    "setup",
    "handle_event",
    "validate",
    "destroy",
    "prepare",
    "commit",
    "reclaim",
    "attach",
    "detach",
    "queue_work",
    "process",
    "do_ioctl",
    "check_perm",
    "parse_opts",
    "fill_super",
    "put_page",
    "grab_ref",
    "resize",
];

const CONSTS: &[&str] = &[
    "GFP_KERNEL",
    "O_NONBLOCK",
    "FMODE_WRITE",
    "MSG_DONTWAIT",
    "PAGE_SIZE",
    "SB_RDONLY",
    "IFF_UP",
    "BIT(3)",
    "0x10",
    "EXT_INIT_MAX_LEN",
    "VM_WRITE",
    "REQ_SYNC",
];

const ERRNOS: &[&str] = &[
    "-EINVAL", "-ENOMEM", "-EIO", "-EFAULT", "-EBUSY", "-ENOENT", "-EPERM", "-EAGAIN",
];

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
