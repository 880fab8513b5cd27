//! `diff` on hand-made pairs of results.

use super::*;
use crate::budget::Budget;
use crate::read::{Files, ResultReader};

fn result(commit: &str, files: &[(&str, &[(u32, u64)])]) -> Files {
    let s = crate::test_results::star_result(commit, files);
    Files::Stream(Box::new(
        ResultReader::new(
            &format!("{commit}.jsonl"),
            Box::new(std::io::Cursor::new(s.into_bytes())),
        )
        .unwrap(),
    ))
}

fn run(old: Files, mut new: Files) -> (Totals, Vec<serde_json::Value>) {
    let name = old.name().to_string();
    let old = OldSide::read(old, Budget::default()).unwrap();
    let mut out = Vec::new();
    let t = write_jsonl(&name, old, &mut new, &mut out).unwrap();
    let lines = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (t, lines)
}

#[test]
fn lines_gained_lost_and_instrumentation_changes() {
    // line 1 stays covered (hits change: no change), 2 gains, 3 loses, 4 is no longer
    // instrumented (was covered: lost too), 5 is newly instrumented and covered
    // (gained), 6 newly instrumented uncovered, 7 stays uncovered.
    let d = diff_file(
        "f.c",
        Some(&lh(&[(1, 5), (2, 0), (3, 4), (4, 1), (7, 0)])),
        Some(&lh(&[(1, 9), (2, 3), (3, 0), (5, 2), (6, 0), (7, 0)])),
    );
    assert_eq!(d.status, Status::Changed);
    assert_eq!(d.gained, vec![2, 5]);
    assert_eq!(d.lost, vec![3, 4]);
    assert_eq!(d.instrumented_added, vec![5, 6]);
    assert_eq!(d.instrumented_removed, vec![4]);
    assert_eq!(
        (d.old, d.new),
        (
            Counts {
                instrumented: 5,
                covered: 3
            },
            Counts {
                instrumented: 6,
                covered: 3
            }
        )
    );
    // The identities the numbers are explained by.
    assert_eq!(
        d.new.covered as i64 - d.old.covered as i64,
        d.gained.len() as i64 - d.lost.len() as i64
    );
    let same = diff_file(
        "g.c",
        Some(&lh(&[(1, 1), (2, 0)])),
        Some(&lh(&[(1, 7), (2, 0)])),
    );
    assert_eq!(same.status, Status::Unchanged);
}

fn lh(xs: &[(u32, u64)]) -> LineHits {
    let (lines, hits) = xs.iter().copied().unzip();
    LineHits { lines, hits }
}

#[test]
fn files_added_deleted_and_renamed() {
    let old = result(
        "c1",
        &[
            ("keep.c", &[(1, 1), (2, 0)]),
            ("gone.c", &[(1, 3), (2, 0), (3, 1)]),
            ("old_name.c", &[(10, 1), (11, 1)]),
            ("same.c", &[(4, 2)]),
        ],
    );
    let new = result(
        "c1",
        &[
            ("same.c", &[(4, 8)]),
            ("keep.c", &[(1, 1), (2, 6)]),
            ("new_name.c", &[(10, 1), (11, 0)]),
            ("fresh.c", &[(1, 0), (2, 5)]),
        ],
    );
    let (t, lines) = run(old, new);
    assert_eq!(lines[0]["old"]["commit"], "c1");
    assert_eq!(lines[0]["old"]["result"], "c1.jsonl");
    let files: Vec<(&str, &str)> = lines[1..lines.len() - 1]
        .iter()
        .map(|l| (l["file"].as_str().unwrap(), l["status"].as_str().unwrap()))
        .collect();
    // NEW's order, then OLD's deleted files in OLD's order; same.c is unchanged.
    assert_eq!(
        files,
        vec![
            ("keep.c", "changed"),
            ("new_name.c", "added"),
            ("fresh.c", "added"),
            ("gone.c", "deleted"),
            ("old_name.c", "deleted"),
        ]
    );
    let renamed_to = &lines[2];
    assert_eq!(renamed_to["gained"], serde_json::json!([10]));
    assert_eq!(
        renamed_to["instrumented_added"],
        serde_json::json!([10, 11])
    );
    let gone = &lines[4];
    assert_eq!(gone["lost"], serde_json::json!([1, 3]));
    assert_eq!(gone["instrumented_removed"], serde_json::json!([1, 2, 3]));
    assert_eq!(gone["new"]["instrumented"], 0);
    let want = Totals {
        files_changed: 1,
        files_unchanged: 1,
        files_added: 2,
        files_deleted: 2,
        gained: 1 + 1 + 1,
        lost: 2 + 2,
        instrumented_added: 2 + 2,
        instrumented_removed: 3 + 2,
        old: Counts {
            instrumented: 8,
            covered: 6,
        },
        new: Counts {
            instrumented: 7,
            covered: 5,
        },
    };
    assert_eq!(t, want);
    assert_eq!(
        serde_json::to_value(&want).unwrap(),
        lines.last().unwrap()["totals"]
    );
    assert_eq!(
        t.new.covered as i64 - t.old.covered as i64,
        t.gained as i64 - t.lost as i64
    );
    assert_eq!(
        t.new.instrumented as i64 - t.old.instrumented as i64,
        t.instrumented_added as i64 - t.instrumented_removed as i64
    );
}

#[test]
fn different_bases_are_refused_with_the_way_out() {
    let old = OldSide::read(result("aaa111", &[("a.c", &[(1, 1)])]), Budget::default()).unwrap();
    let mut new = result("bbb222", &[("a.c", &[(1, 1)])]);
    let e = write_jsonl("march.jsonl.gz", old, &mut new, &mut Vec::new())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "march.jsonl.gz is merged onto base commit aaa111 but bbb222.jsonl onto bbb222: line \
         numbers of different bases do not refer to the same text, so the two cannot be \
         compared. Merge the older period again onto the newer base (its inputs, same \
         --source) with `covmerge merge ... --base-commit bbb222`, then diff that result \
         against bbb222.jsonl"
    );
}

#[test]
fn identical_results_have_no_file_lines() {
    let files: &[(&str, &[(u32, u64)])] = &[("a.c", &[(1, 1), (2, 0)]), ("b.c", &[])];
    let (t, lines) = run(result("c", files), result("c", files));
    assert_eq!(lines.len(), 2, "header and totals only: {lines:?}");
    assert_eq!((t.files_unchanged, t.gained, t.lost), (2, 0, 0));
}
