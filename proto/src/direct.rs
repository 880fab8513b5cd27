//! Partials a merge task reads directly (contract §10): a partial input whose shard
//! count is the job's has its rows already split by the shuffle's file hash, so no
//! split task reads it; each merge task reads its own shard of it instead.

use serde::{Deserialize, Serialize};

use crate::manifest::NamespaceTally;

/// A partial input of a job read by the merge tasks directly, as planned: what its
/// description counted (the map phase's counts of an input that no split reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectPartial {
    /// Its index in the job's inputs.
    pub input: u32,
    /// SHA-256 (hex) of its `partial.json` as planned: a merge task refuses another.
    pub description_sha256: String,
    /// Its description's `rows_in` (bad rows included).
    pub rows_in: u64,
    /// Its description's `rows_bad`.
    pub rows_bad: u64,
    /// What it adds to the job's namespace tally.
    pub namespaces: NamespaceTally,
}

/// One partial a merge task reads its shard of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialShardRef {
    /// The partial: a local directory or a store prefix, as the job lists it.
    pub input: String,
    /// SHA-256 (hex) of its `partial.json` as planned.
    pub description_sha256: String,
}

/// A partial input as planned: its index in the job's inputs and the SHA-256 (hex) of
/// its `partial.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedSha {
    /// Its index in the job's inputs.
    pub input: u32,
    /// SHA-256 (hex) of its `partial.json` as planned.
    pub description_sha256: String,
}

/// Checks a job's planned partial inputs against its `inputs` count: each names an
/// input once, in ascending order, with a SHA-256.
pub fn check_planned(planned: &[PlannedSha], inputs: usize) -> Result<(), String> {
    if !planned.windows(2).all(|w| w[0].input < w[1].input) {
        return Err("planned partials must name ascending inputs".into());
    }
    for p in planned {
        if p.input as usize >= inputs || !is_sha256_hex(&p.description_sha256) {
            return Err(format!(
                "planned partial of input {}: not an input of the job's {inputs}, or no SHA-256",
                p.input
            ));
        }
    }
    Ok(())
}

/// Whether `s` is a SHA-256 in lowercase hex.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Checks a job's direct partials against its `inputs` count: each names an input
/// once, in ascending order, with a SHA-256.
pub fn check_direct(direct: &[DirectPartial], inputs: usize) -> Result<(), String> {
    if !direct.windows(2).all(|w| w[0].input < w[1].input) {
        return Err("direct partials must name ascending inputs".into());
    }
    for d in direct {
        if d.input as usize >= inputs {
            return Err(format!(
                "direct partial of input {}, the job has {inputs} inputs",
                d.input
            ));
        }
        if !is_sha256_hex(&d.description_sha256) {
            return Err(format!(
                "direct partial of input {}: description_sha256 is not a SHA-256",
                d.input
            ));
        }
    }
    Ok(())
}

/// Checks a merge task's partials: at most one per input of a job, each a named
/// input with a SHA-256.
pub fn check_shard_refs(refs: &[PartialShardRef]) -> Result<(), String> {
    use crate::limits::{MAX_INPUTS, MAX_NAME_BYTES};
    if refs.len() > MAX_INPUTS {
        return Err(format!("{} partials, more than {MAX_INPUTS}", refs.len()));
    }
    for r in refs {
        if r.input.is_empty()
            || r.input.len() > MAX_NAME_BYTES
            || r.input.chars().any(char::is_control)
        {
            return Err(format!(
                "a partial's input must be 1-{MAX_NAME_BYTES} bytes without control characters"
            ));
        }
        if !is_sha256_hex(&r.description_sha256) {
            return Err(format!(
                "partial {}: description_sha256 is not a SHA-256",
                r.input
            ));
        }
    }
    Ok(())
}

impl crate::JobSpec {
    /// The partials each merge task reads its shard of, in input order.
    pub fn partial_shard_refs(&self) -> Vec<PartialShardRef> {
        self.direct_partials
            .iter()
            .map(|d| PartialShardRef {
                input: self.inputs[d.input as usize].clone(),
                description_sha256: d.description_sha256.clone(),
            })
            .collect()
    }

    /// The input ranges split tasks read: [`crate::JobSpec::split_ranges`] but those of
    /// a direct partial (the planner gives each its own range).
    pub fn split_task_ranges(&self) -> Vec<std::ops::Range<usize>> {
        let direct: std::collections::HashSet<usize> = self
            .direct_partials
            .iter()
            .map(|d| d.input as usize)
            .collect();
        self.split_ranges()
            .into_iter()
            .filter(|r| !r.clone().all(|i| direct.contains(&i)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forged_partial_of_a_merge_task_is_refused() {
        let ok = PartialShardRef {
            input: "gs://b/day/".into(),
            description_sha256: "0f".repeat(32),
        };
        assert_eq!(check_shard_refs(std::slice::from_ref(&ok)), Ok(()));
        for bad in [
            PartialShardRef {
                description_sha256: "0F".repeat(32),
                ..ok.clone()
            },
            PartialShardRef {
                description_sha256: "0f".repeat(31),
                ..ok.clone()
            },
            PartialShardRef {
                input: String::new(),
                ..ok.clone()
            },
            PartialShardRef {
                input: "a\nb".into(),
                ..ok.clone()
            },
        ] {
            assert!(
                check_shard_refs(std::slice::from_ref(&bad)).is_err(),
                "{bad:?}"
            );
        }
        let d = |input| DirectPartial {
            input,
            description_sha256: "0f".repeat(32),
            rows_in: 1,
            rows_bad: 0,
            namespaces: NamespaceTally::default(),
        };
        assert_eq!(check_direct(&[d(0), d(2)], 3), Ok(()));
        assert!(check_direct(&[d(2), d(0)], 3).is_err(), "not ascending");
        assert!(check_direct(&[d(1), d(1)], 3).is_err(), "twice");
        assert!(check_direct(&[d(3)], 3).is_err(), "past the inputs");
    }
}
