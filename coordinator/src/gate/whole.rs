//! A whole result checked as the gate checks a part: what `notify` hands the dashboard
//! must pass the same checks as what a job publishes.

use std::io::{BufReader, Read};

use covmerge_input::result::{Header, ResultReader};
use covmerge_proto::group::Group;
use covmerge_proto::ShardId;
use flate2::read::MultiGzDecoder;

use super::tally::{tally_end, Shared, Tally};
use super::{check_files, refuse, Invariant, PartCheck, PartSummary, Refused, PART_BUDGET};

/// Reads the result `data` (its bytes as stored: gzip, as the dashboard reads it),
/// named `name` in refusals, through the strict reader: a header line first, then
/// every file's records as [`super::check_part`] checks a part's (`groups`: the job's
/// groups; `None`: not known, so that a record of another name may be a group's and
/// the managers' records may sum to more than `*`, never to less). Returns what was
/// read (bytes and SHA-256 of the stored bytes). Bytes that are not gzip, or that
/// follow the last gzip member, are refused.
pub fn check_whole<R: Read + Send + 'static>(
    name: &str,
    data: R,
    groups: Option<&[Group]>,
) -> Result<PartSummary, Refused> {
    let tally = std::sync::Arc::new(std::sync::Mutex::new(Tally {
        inner: data,
        sha: sha2::Digest::new(),
        bytes: 0,
    }));
    let gz = MultiGzDecoder::new(Shared(tally.clone()));
    let reader = ResultReader::with_budget(
        name,
        Box::new(BufReader::with_capacity(1 << 16, gz)),
        PART_BUDGET,
    )
    .map_err(|e| refuse(Invariant::Header, name, e.to_string()))?;
    header_domains(reader.header())
        .map_err(|w| refuse(Invariant::Header, format!("{name}, line 1"), w))?;
    let part = PartCheck {
        key: name,
        shard: ShardId(0),
        shards: 1,
        groups: groups.unwrap_or(&[]),
        base_lines: None,
        groups_unknown: groups.is_none(),
    };
    let mut sum = check_files(reader, part, name)?;
    (sum.bytes, sum.sha256) = tally_end(tally, name.to_string())?;
    Ok(sum)
}

/// The header's fields in their domains, whatever the job (contract §6): `Commit` and
/// `Repo` not empty, `Duration` and `TotalRows` not negative, `DateTo` a date and
/// `Time`, where there is one, an RFC 3339 time (the dashboard decodes both).
pub(super) fn header_domains(h: &Header) -> Result<(), String> {
    if h.commit.is_empty() {
        return Err("Commit is empty".into());
    }
    if h.repo.is_empty() {
        return Err("Repo is empty".into());
    }
    if h.duration < 0 {
        return Err(format!("Duration {} is negative", h.duration));
    }
    if let Err(e) = h.date_to.parse::<covmerge_proto::date::Date>() {
        return Err(format!("DateTo {:?}: {e}", h.date_to));
    }
    if h.total_rows < 0 {
        return Err(format!("TotalRows {} is negative", h.total_rows));
    }
    if let Some(t) = &h.time {
        if !is_rfc3339(t) {
            return Err(format!(
                "Time {t:?} is not an RFC 3339 time (YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM))"
            ));
        }
    }
    Ok(())
}

/// Whether `t` has RFC 3339's form: `YYYY-MM-DDTHH:MM:SS`, an optional fraction, then
/// `Z` or `+HH:MM` / `-HH:MM` (what Go's `time.Time` decodes), its fields in range.
fn is_rfc3339(t: &str) -> bool {
    let b = t.as_bytes();
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let s = b.get(r)?;
        s.iter()
            .all(u8::is_ascii_digit)
            .then(|| s.iter().fold(0, |n, &d| n * 10 + u32::from(d - b'0')))
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let fields = (|| {
        let (mo, d) = (digits(5..7)?, digits(8..10)?);
        let (h, mi, s) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
        digits(0..4)?;
        Some((1..=12).contains(&mo) && (1..=31).contains(&d) && h < 24 && mi < 60 && s < 61)
    })();
    if fields != Some(true)
        || !(at(4, b'-') && at(7, b'-') && matches!(b.get(10), Some(b'T' | b't')))
        || !(at(13, b':') && at(16, b':'))
    {
        return false;
    }
    let mut i = 19;
    if at(i, b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match b.get(i) {
        Some(b'Z' | b'z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            let zone = (digits(i + 1..i + 3), digits(i + 4..i + 6));
            matches!(zone, (Some(h), Some(m)) if h < 24 && m < 60)
                && at(i + 3, b':')
                && i + 6 == b.len()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::is_rfc3339;

    #[test]
    fn times_the_dashboard_decodes() {
        for ok in [
            "0001-01-01T00:00:00Z",
            "2026-12-06T13:03:30.828001Z",
            "2024-04-08T23:59:59+02:00",
            "2024-04-08T00:00:00-07:30",
        ] {
            assert!(is_rfc3339(ok), "{ok}");
        }
        for bad in [
            "",
            "x",
            "2024-04-08",
            "2024-04-08 00:00:00Z",
            "2024-13-08T00:00:00Z",
            "2024-04-08T24:00:00Z",
            "2024-04-08T00:00:00",
            "2024-04-08T00:00:00.Z",
            "2024-04-08T00:00:00+0200",
            "2024-04-08T00:00:00Zjunk",
            "2024-04-08T00:00:00+02:00junk",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
    }
}
