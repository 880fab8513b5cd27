//! Meta-data files (`covmeta.<hash>`).

use super::super::check_pos;
use super::reader::{get_str, Rd};
use super::*;

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
        let at = r.pos;
        let name = r.uleb("function name")?;
        let name = get_str(&r, &strs, name, "function name")?.to_string();
        // No row may hold a longer one (contract §6): a partial of these rows, whose
        // reader holds its rows to that cap, was written and then refused.
        if name.len() > crate::csv_rows::MAX_ROW {
            return Err(r.err_at(
                at,
                format!(
                    "function name of {} bytes, longer than the {} byte cap on a row",
                    name.len(),
                    crate::csv_rows::MAX_ROW
                ),
            ));
        }
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
