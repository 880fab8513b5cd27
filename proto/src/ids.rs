use std::fmt;

use serde::{Deserialize, Serialize};

/// A job: one merge of one input set onto one base revision.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct JobId(String);

/// Decoding checks the id like [`JobId::parse`]: a job id from a message becomes a
/// store prefix, so `../../x` must never get that far.
impl<'de> Deserialize<'de> for JobId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        JobId::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// 16 random hex digits (from a v4 UUID): job ids, lease owners, attempt names.
pub fn random_hex() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..16].to_string()
}

impl JobId {
    /// A fresh random id.
    pub fn new_random() -> Self {
        JobId(random_hex())
    }

    /// Accepts ids made of `[A-Za-z0-9._-]`, 1..=64 chars: they become object-store
    /// prefixes and queue routing keys, so nothing else is allowed.
    pub fn parse(s: &str) -> Result<Self, String> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
        if !ok {
            Err(format!(
                "job id {s:?} must be 1-64 characters of [A-Za-z0-9._-]"
            ))
        } else if s == "." || s == ".." {
            Err(format!(
                "job id {s:?} names a directory step (the job's objects would be written outside its own prefix): give a name"
            ))
        } else {
            Ok(JobId(s.to_string()))
        }
    }

    /// The id as given (1-64 characters of `[A-Za-z0-9._-]`).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

macro_rules! index_id {
    ($(#[$m:meta])* $name:ident, $fmt:literal) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The number as an index into a vector of them.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, $fmt, self.0)
            }
        }
    };
}

index_id!(
    /// A shard of the merge phase: every row of a file path lands in the same shard.
    ShardId,
    "{:05}"
);
index_id!(
    /// A split task of the map phase: one input object (or a part of one).
    SplitId,
    "{:05}"
);
index_id!(
    /// How many times a task has been delivered (1 = first delivery).
    Attempt,
    "{}"
);

/// Names a task within its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TaskRef {
    /// The split task of that number (map phase).
    Split(SplitId),
    /// The merge task of that shard (reduce phase).
    Merge(ShardId),
}

impl std::fmt::Display for TaskRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskRef::Split(s) => write!(f, "split {s}"),
            TaskRef::Merge(s) => write!(f, "shard {s}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_id_is_checked_when_decoded() {
        let ok: JobId = serde_json::from_str("\"job-1.a_b\"").unwrap();
        assert_eq!(ok.as_str(), "job-1.a_b");
        for bad in ["\"../../x\"", "\"..\"", "\"\"", "\"a/b\""] {
            assert!(serde_json::from_str::<JobId>(bad).is_err(), "{bad}");
        }
    }
}
