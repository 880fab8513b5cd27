//! Why a row is bad (contract §6), and how its value is shown in the message.

/// Why a row is malformed (contract §6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowProblem {
    /// The row has another number of fields than the header.
    FieldCount {
        /// Fields in the header.
        want: usize,
        /// Fields in the row.
        got: usize,
    },
    /// A count that is not an integer.
    BadInteger {
        /// The column's name.
        column: &'static str,
        /// The field as found.
        value: String,
    },
    /// A count below 0.
    Negative {
        /// The column's name.
        column: &'static str,
        /// The field as found.
        value: String,
    },
    /// A count that overflows 64 bits.
    Overflow {
        /// The column's name.
        column: &'static str,
        /// The field as found.
        value: String,
    },
    /// A `file_path` that is not a canonical relative path.
    BadPath {
        /// The path as found.
        value: String,
        /// Which rule it breaks.
        why: covmerge_proto::path::PathError,
    },
    /// A name that is not UTF-8.
    NotUtf8 {
        /// The column's name.
        column: &'static str,
        /// The field, lossily decoded.
        value: String,
    },
    /// A `manager` that cannot be a record's own name: empty, `*`, a `--group`'s NAME,
    /// or past the cap.
    BadManager {
        /// The manager as found.
        value: String,
        /// Which rule it breaks.
        why: covmerge_proto::group::ManagerNameError,
    },
    /// A row longer than the cap.
    TooLong {
        /// The cap in bytes ([`MAX_ROW`] unless set lower).
        max: usize,
    },
    /// A malformed record with a quoted field that runs over lines (an unclosed `"`
    /// takes the lines up to the next `"`).
    OverLines {
        /// The lines the record took, its first included.
        lines: u64,
        /// What is wrong with it.
        problem: Box<RowProblem>,
    },
}

impl std::fmt::Display for RowProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RowProblem::FieldCount { want, got } => {
                write!(f, "expected {want} fields like the header, found {got}")
            }
            RowProblem::BadInteger { column, value } => {
                write!(f, "column `{column}`: {} is not an integer", Shown::quoted(value))
            }
            RowProblem::Negative { column, value } => {
                write!(f, "column `{column}`: {} is negative", Shown::quoted(value))
            }
            RowProblem::Overflow { column, value } => {
                write!(f, "column `{column}`: {} is past the largest count, 9223372036854775807 (Go's int64 on the dashboard)", Shown::quoted(value))
            }
            RowProblem::NotUtf8 { column, value } => write!(
                f,
                "column `{column}`: {} is not valid UTF-8 (names are kept exactly, never altered)",
                Shown::plain(value)
            ),
            RowProblem::TooLong { max } => write!(
                f,
                "row longer than the {max} byte cap on a row ({} MiB)",
                max >> 20
            ),
            RowProblem::OverLines { lines, problem } => write!(
                f,
                "{problem}: a quoted field runs over {lines} lines from this one, taking them into this row (an unclosed `\"`?)"
            ),
            RowProblem::BadManager { value, why } => write!(
                f,
                "column `manager`: {} {why}; every record of a file must have a name of its own",
                Shown::quoted(value)
            ),
            RowProblem::BadPath { value, why } => write!(
                f,
                "column `file_path`: {} is not a canonical path relative to the source root: it {why}",
                Shown::quoted(value)
            ),
        }
    }
}

/// A field's value in a message, cut after [`SHOWN`] characters with its length, so
/// that a 1 MiB field is not printed whole in each message (or twice): quoted, or
/// as it is (`plain`: a value already rendered lossily).
struct Shown<'a> {
    value: &'a str,
    plain: bool,
}

/// The characters of a value a message shows.
const SHOWN: usize = 200;

impl<'a> Shown<'a> {
    /// Quoted.
    fn quoted(value: &'a str) -> Self {
        Shown {
            value,
            plain: false,
        }
    }

    /// Unquoted (the value is already a lossy rendering).
    fn plain(value: &'a str) -> Self {
        Shown { value, plain: true }
    }
}

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.value;
        let (head, cut) = match v.char_indices().nth(SHOWN) {
            None => (v, false),
            Some((at, _)) => (&v[..at], true),
        };
        if self.plain {
            f.write_str(head)?;
        } else {
            write!(f, "{head:?}")?;
        }
        if cut {
            write!(f, "… ({} bytes in all)", v.len())?;
        }
        Ok(())
    }
}

/// Parses a non-negative decimal that must fit an i64 (Go's `int64` on the dashboard).
pub(super) fn parse_count(column: &'static str, v: &[u8]) -> Result<u64, RowProblem> {
    let v = v.trim_ascii();
    let show = || String::from_utf8_lossy(v).into_owned();
    let digits = match v.first() {
        Some(b'-') => {
            let rest = &v[1..];
            if !rest.is_empty() && rest.iter().all(u8::is_ascii_digit) {
                if rest.iter().all(|&b| b == b'0') {
                    return Ok(0);
                }
                return Err(RowProblem::Negative {
                    column,
                    value: show(),
                });
            }
            return Err(RowProblem::BadInteger {
                column,
                value: show(),
            });
        }
        Some(b'+') => &v[1..],
        _ => v,
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(RowProblem::BadInteger {
            column,
            value: show(),
        });
    }
    let mut n: u64 = 0;
    for &d in digits {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add((d - b'0') as u64))
            .ok_or_else(|| RowProblem::Overflow {
                column,
                value: show(),
            })?;
    }
    if n > i64::MAX as u64 {
        return Err(RowProblem::Overflow {
            column,
            value: show(),
        });
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_field_was_printed_whole_in_its_message() {
        let long = "d/".repeat(450_000) + "a.c";
        let msg = RowProblem::BadPath {
            value: long.clone(),
            why: covmerge_proto::path::PathError::TooLong,
        }
        .to_string();
        assert!(msg.len() < 600, "{} bytes", msg.len());
        assert!(
            msg.contains(&format!("({} bytes in all)", long.len())),
            "{msg}"
        );
        assert!(msg.contains("it is longer than 4095 bytes"), "{msg}");
        let short = RowProblem::BadInteger {
            column: "sl",
            value: "x1".into(),
        }
        .to_string();
        assert_eq!(short, "column `sl`: \"x1\" is not an integer");
    }
}
