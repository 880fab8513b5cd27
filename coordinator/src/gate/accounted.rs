//! Every row read accounted for once, and the other namespaces' counts that add up:
//! the manifest's counts checked against each other before a result is published.

use covmerge_proto::manifest::{OtherNamespaces, MAX_LISTED_NAMESPACE_BYTES};
use covmerge_proto::Manifest;

use super::{refuse, Invariant, Refused};

/// Every row read accounted for once (contract §7): `rows_in` = merged + bad + without
/// line + lost + in deleted files (when the rows read saturated, those counts reach
/// saturation too); and the other
/// namespaces' list adds up to their rows, each listed name with rows, none the job's
/// own namespace, none longer than a listed name may be.
pub(super) fn accounted(manifest: &Manifest, namespace: &str) -> Result<(), Refused> {
    let t = &manifest.totals;
    let place = "the manifest's totals";
    let parts = [
        t.rows_merged,
        t.rows_bad,
        t.rows_without_line,
        t.rows_lost,
        t.rows_deleted,
    ];
    let sum: u128 = parts.iter().map(|&n| u128::from(n)).sum();
    // Counts saturate at 2^64 - 1 (contract §10: a partial's sums of sums), and
    // `rows_in` is then that less the rows outside the prefix: a job whose rows read
    // saturated cannot be checked row for row, but what accounts for them must reach
    // saturation too (a part saturated, or their true sum past it). Any other job is
    // checked exactly (a count saturated while the rows read are not is a forged one,
    // and so is a saturated `rows_in` that a few rows account for).
    let outside = u128::from(t.rows_outside_prefix);
    let saturated = t.rows_in.saturating_add(t.rows_outside_prefix) == u64::MAX;
    let adds_up = if saturated {
        sum + outside >= u128::from(u64::MAX)
    } else {
        sum == u128::from(t.rows_in)
    };
    if !adds_up {
        let (read, only) = if saturated {
            let r = format!(
                "{} (saturated, with {} outside the prefix)",
                t.rows_in, t.rows_outside_prefix
            );
            (r, "only ")
        } else {
            (t.rows_in.to_string(), "")
        };
        return Err(refuse(
            Invariant::Totals,
            place,
            format!(
                "rows_in is {read} but merged {} + bad {} + without line {} + lost {} + deleted {} make {only}{sum}",
                t.rows_merged, t.rows_bad, t.rows_without_line, t.rows_lost, t.rows_deleted
            ),
        ));
    }
    let o = &manifest.other_namespaces;
    // Saturating, as the counts are.
    let listed_total = o.total();
    if listed_total != t.rows_other_namespaces {
        return Err(refuse(
            Invariant::Totals,
            place,
            format!(
                "rows_other_namespaces is {} but other_namespaces counts {listed_total}",
                t.rows_other_namespaces
            ),
        ));
    }
    let ours = OtherNamespaces::shown_name(namespace.as_bytes());
    for (name, &n) in &o.listed {
        let why = if n == 0 {
            "listed with no rows"
        } else if *name == ours {
            "the job's own namespace, listed as another"
        } else if name.len() > MAX_LISTED_NAMESPACE_BYTES {
            "longer than a listed name may be"
        } else {
            continue;
        };
        return Err(refuse(
            Invariant::Totals,
            "the manifest's other_namespaces",
            format!("namespace {name:?} is {why}"),
        ));
    }
    Ok(())
}
