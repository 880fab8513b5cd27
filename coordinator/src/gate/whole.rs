//! A whole result checked as the gate checks a part: what `notify` hands the dashboard
//! must pass the same checks as what a job publishes.

use std::io::{BufReader, Read};

use covmerge_input::result::ResultReader;
use covmerge_proto::group::Group;
use covmerge_proto::ShardId;
use flate2::read::MultiGzDecoder;

use super::tally::{tally_end, Shared, Tally};
use super::{check_files, refuse, Invariant, PartCheck, PartSummary, Refused, PART_BUDGET};

/// Reads the result `data` (its bytes as stored: gzip, as the dashboard reads it),
/// named `name` in refusals, through the strict reader: a header line first, then
/// every file's records as [`super::check_part`] checks a part's (`groups`: the job's
/// groups, when known). Returns what was read (bytes and SHA-256 of the stored bytes).
/// Bytes that are not gzip, or that follow the last gzip member, are refused.
pub fn check_whole<R: Read + Send + 'static>(
    name: &str,
    data: R,
    groups: &[Group],
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
    let part = PartCheck {
        key: name,
        shard: ShardId(0),
        shards: 1,
        groups,
        base_lines: None,
    };
    let mut sum = check_files(reader, part, name)?;
    (sum.bytes, sum.sha256) = tally_end(tally, name.to_string())?;
    Ok(sum)
}
