//! Counter-data files (`covcounters.<hash>.<pid>.<nanotime>`), both flavors.

use super::reader::{get_str, Rd};
use super::*;

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
