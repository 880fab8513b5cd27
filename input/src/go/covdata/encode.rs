//! Encoders for tests and benchmarks: the format as Go writes it.

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
