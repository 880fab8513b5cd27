//! The checks of a row's fields (contract §6).

use super::problem::parse_count;
use super::{Columns, Row, RowProblem};

/// The row in a record's fields (`field(i)` is the i-th), checked as contract §6 says.
pub(super) fn row_of<'a>(
    c: &Columns,
    groups: &[covmerge_proto::group::Group],
    field: impl Fn(usize) -> &'a [u8],
) -> Result<Row<'a>, RowProblem> {
    let file = field(c.file);
    if let Err(why) = covmerge_proto::path::canonical_path(file) {
        return Err(RowProblem::BadPath {
            value: String::from_utf8_lossy(file).into(),
            why,
        });
    }
    for (column, i) in [
        ("file_path", c.file),
        ("func_name", c.func),
        ("manager", c.manager),
        ("kernel_repo", c.repo),
        ("kernel_commit", c.commit),
    ] {
        let v = field(i);
        if !valid_name(v) {
            return Err(RowProblem::NotUtf8 {
                column,
                value: v.escape_ascii().to_string(),
            });
        }
    }
    let manager = field(c.manager);
    if let Err(why) = covmerge_proto::group::check_manager(manager, groups) {
        return Err(RowProblem::BadManager {
            value: String::from_utf8_lossy(manager).into(),
            why,
        });
    }
    // A line number is not a count the dashboard sums: one past i64 (or u64) is
    // past the end of any file and lost (contract §3.3), not a bad row.
    let sl = match parse_count("sl", field(c.sl)) {
        Err(RowProblem::Overflow { .. }) => u64::MAX,
        r => r?,
    };
    let hits = parse_count("hit_count", field(c.hits))?;
    Ok(Row {
        repo: field(c.repo),
        commit: field(c.commit),
        file,
        func: field(c.func),
        manager,
        // A line past u32 is past the end of any file: it is lost, not bad.
        sl: sl.min(u32::MAX as u64) as u32,
        hits,
    })
}

/// Whether `p` is a `file_path` contract §6 accepts (canonical as
/// [`covmerge_proto::path::canonical_path`] says, UTF-8): the checks [`Fields::row`]
/// makes of it.
pub fn valid_file_path(p: &[u8]) -> bool {
    covmerge_proto::path::canonical_path(p).is_ok() && valid_name(p)
}

/// Whether a name column's value is accepted (UTF-8): the check [`Fields::row`] makes
/// of `func_name`, `manager`, `kernel_repo` and `kernel_commit`.
#[inline]
pub fn valid_name(v: &[u8]) -> bool {
    v.is_ascii() || std::str::from_utf8(v).is_ok()
}

/// `v` as a count when it is a plain run of 1 to 18 digits (below `i64::MAX`, the
/// form of every count a fuzzer writes); `None` otherwise, and the row's own parse
/// ([`Fields::row`]) decides.
#[inline]
pub fn parse_count_fast(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 18 {
        return None;
    }
    let mut n = 0u64;
    let mut digits = true;
    for &b in v {
        let d = b.wrapping_sub(b'0');
        digits &= d < 10;
        n = n.wrapping_mul(10).wrapping_add(d as u64);
    }
    digits.then_some(n)
}
