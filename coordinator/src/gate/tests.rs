//! The gate's unit tests: one or more per invariant, on parts written by hand.

use std::io::Write;

use covmerge_proto::job::HeaderSpec;
use covmerge_proto::{JobId, ShardEntry};
use flate2::{write::GzEncoder, Compression};

use super::*;

fn mcr(m: &str, p: &str, lines: &[u32], hits: &[u64]) -> String {
    let cov = hits.iter().filter(|&&h| h > 0).count();
    format!(
        r#"{{"MCR":{{"Manager":"{m}","FilePath":"{p}","FileData":{{"Instrumented":{},"Covered":{cov},"LinesInstrumented":{lines:?},"HitCounts":{hits:?}}}}},"FL":null}}"#,
        lines.len()
    )
}

fn fl(p: &str, f: &str, lines: &[u32]) -> String {
    format!(r#"{{"MCR":null,"FL":{{"FilePath":"{p}","FuncName":"{f}","Lines":{lines:?}}}}}"#)
}

fn gz(records: &[String]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::new(1));
    for r in records {
        writeln!(e, "{r}").unwrap();
    }
    e.finish().unwrap()
}

fn groups() -> Vec<Group> {
    vec![Group::parse("ci=ci-*").unwrap()]
}

/// Checks `records` as part 0 of a job of `shards` shards with the group `ci=ci-*`.
fn check(records: &[String], shards: u32) -> Result<PartSummary, Refused> {
    check_with(records, shards, None)
}

/// [`check`] with what the part's merge reported of its base files.
fn check_with(
    records: &[String],
    shards: u32,
    base_lines: Option<&[(String, u32)]>,
) -> Result<PartSummary, Refused> {
    let g = groups();
    let part = PartCheck {
        key: "jobs/j/parts/00000.jsonl.gz",
        shard: ShardId(0),
        shards,
        groups: &g,
        base_lines,
        groups_unknown: false,
    };
    check_part(part, std::io::Cursor::new(gz(records)), PART_BUDGET)
}

fn refused(records: &[String]) -> Refused {
    check(records, 1).expect_err("refused")
}

fn good() -> Vec<String> {
    vec![
        mcr("*", "a.c", &[1, 2, 5], &[3, 0, 7]),
        mcr("ci-1", "a.c", &[1, 5], &[1, 7]),
        mcr("m", "a.c", &[1, 2], &[2, 0]),
        mcr("ci", "a.c", &[1, 5], &[1, 7]),
        fl("a.c", "f", &[1, 2]),
        fl("a.c", "g", &[5]),
        mcr("*", "b.c", &[], &[]),
    ]
}

#[test]
fn a_good_part_passes_with_its_numbers() {
    let s = check(&good(), 1).unwrap();
    assert_eq!(
        (s.files, s.instrumented, s.covered, s.records),
        (2, 3, 2, 7)
    );
    assert_eq!(s.bytes, gz(&good()).len() as u64);
    assert_eq!(s.sha256, hex_of(&Sha256::digest(gz(&good()))));
}

fn reported(list: &[(&str, u32)]) -> Vec<(String, u32)> {
    list.iter().map(|(p, n)| (p.to_string(), *n)).collect()
}

#[test]
fn a_line_past_the_end_of_the_base_file_was_published() {
    // good(): a.c's lines reach 5, b.c has none.
    let ok = reported(&[("a.c", 5), ("b.c", 0)]);
    check_with(&good(), 1, Some(&ok)).unwrap();
    let e = check_with(&good(), 1, Some(&reported(&[("a.c", 4), ("b.c", 0)]))).unwrap_err();
    assert_eq!(e.invariant, Invariant::WithinBase, "{e}");
    let s = e.to_string();
    assert!(
        s.contains("line 1, file a.c")
            && s.contains("line 5: manager \"*\" has it, the base file has 4 line(s)")
            && s.contains("lines within the base file"),
        "{s}"
    );
    // A manager's or a function's line alone past it (the * record then breaks
    // its own invariant, but the line is named as outside the base first).
    let mut r = good();
    r[2] = mcr("m", "a.c", &[1, 2, 9], &[2, 0, 0]);
    let e = check_with(&r, 1, Some(&ok)).unwrap_err();
    assert_eq!(e.invariant, Invariant::WithinBase, "{e}");
    assert!(e.to_string().contains("line 9: manager \"m\""), "{e}");
    r = good();
    r[5] = fl("a.c", "g", &[5, 6]);
    let e = check_with(&r, 1, Some(&ok)).unwrap_err();
    assert!(e.to_string().contains("line 6: function \"g\""), "{e}");
    // A base of zero lines: no line at all.
    let e = check_with(&good(), 1, Some(&reported(&[("a.c", 0), ("b.c", 0)]))).unwrap_err();
    assert!(
        e.to_string()
            .contains("line 5: manager \"*\" has it, the base file has 0"),
        "{e}"
    );
}

#[test]
fn a_part_whose_files_are_not_its_merges_report_is_refused() {
    for (list, what) in [
        (
            vec![("a.c", 5)],
            "file b.c: the file is in the part, but its merge did not report it",
        ),
        (
            vec![("a.c", 5), ("b.c", 0), ("c.c", 3)],
            "its merge reported file c.c, the part does not have it",
        ),
        (
            vec![("a.c", 5), ("b.c", 0), ("a.c", 5)],
            "reported the base line count of a.c twice",
        ),
        (
            vec![],
            "file a.c: the file is in the part, but its merge did not report it",
        ),
    ] {
        let e = check_with(&good(), 1, Some(&reported(&list))).unwrap_err();
        assert_eq!(e.invariant, Invariant::PartAsReported, "{e}");
        assert!(e.to_string().contains(what), "{what}: {e}");
    }
    // An empty part with an empty report passes.
    check_with(&[], 1, Some(&[])).unwrap();
}

#[test]
fn two_star_records_are_refused() {
    let mut r = good();
    r.insert(1, mcr("*", "a.c", &[1], &[3]));
    let e = refused(&r);
    assert_eq!(e.invariant, Invariant::OneStar, "{e}");
    assert!(e.to_string().contains("line 2"), "{e}");
    // A file without one.
    let e = refused(&[mcr("m", "a.c", &[1], &[1]), fl("a.c", "f", &[1])]);
    assert_eq!(e.invariant, Invariant::OneStar, "{e}");
}

#[test]
fn a_star_not_the_sum_of_its_managers_is_refused() {
    let mut r = good();
    r[0] = mcr("*", "a.c", &[1, 2, 5], &[4, 0, 7]);
    let e = refused(&r);
    assert_eq!(e.invariant, Invariant::StarIsSum);
    let s = e.to_string();
    assert!(
        s.contains("line 1: * has 4 hits, its managers sum to 3") && s.contains("file a.c"),
        "{s}"
    );
    // A manager line the star lacks, a star line no manager has.
    r[0] = mcr("*", "a.c", &[1, 5], &[3, 7]);
    assert!(refused(&r)
        .to_string()
        .contains("line 2: manager \"m\" has it"));
    r[0] = mcr("*", "a.c", &[1, 2, 5, 9], &[3, 0, 7, 0]);
    assert!(refused(&r)
        .to_string()
        .contains("line 9: * has it, no manager does"));
}

#[test]
fn a_group_not_the_sum_of_its_managers_is_refused() {
    let mut r = good();
    r[3] = mcr("ci", "a.c", &[1, 2, 5], &[1, 0, 7]);
    assert_eq!(refused(&r).invariant, Invariant::GroupIsSum);
    r.remove(3);
    let e = refused(&r);
    assert!(e.to_string().contains("group \"ci\" has no record"), "{e}");
}

#[test]
fn lines_descending_or_misaligned_are_refused() {
    let mut r = good();
    r[2] = mcr("m", "a.c", &[2, 1], &[0, 2]);
    let e = refused(&r);
    assert_eq!(e.invariant, Invariant::Readable);
    assert!(
        e.to_string()
            .contains("line 3: MCR of manager \"m\": LinesInstrumented not ascending"),
        "{e}"
    );
    r[2] = mcr("m", "a.c", &[1, 2], &[2, 0])
        .replace("[2,0]", "[2]")
        .replace("[2, 0]", "[2]");
    assert!(refused(&r)
        .to_string()
        .contains("2 LinesInstrumented but 1 HitCounts"));
}

#[test]
fn functions_owning_a_line_twice_or_outside_star_are_refused() {
    let mut r = good();
    r[5] = fl("a.c", "g", &[2, 5]);
    let e = refused(&r);
    assert_eq!(e.invariant, Invariant::Functions);
    assert!(
        e.to_string().contains("line 2: owned by two functions"),
        "{e}"
    );
    r[5] = fl("a.c", "g", &[6]);
    assert!(refused(&r)
        .to_string()
        .contains("line 6: function \"g\" owns it"));
    r[5] = fl("a.c", "f", &[5]);
    assert_eq!(refused(&r).invariant, Invariant::UniqueNames);
}

#[test]
fn a_row_without_manager_gave_a_record_of_manager_empty() {
    // What `merge --max-bad-rows 3` published for a row `r,b,f.c,g,,11,742`.
    let r = [
        mcr("*", "a.c", &[11], &[742]),
        mcr("", "a.c", &[11], &[742]),
    ];
    let e = refused(&r);
    assert_eq!(e.invariant, Invariant::UniqueNames);
    assert!(e.to_string().contains("manager \"\""), "{e}");
}

#[test]
fn a_file_in_another_shards_part_is_refused() {
    // With two shards, one of a.c and b.c is not shard 0's.
    let other = ["a.c", "b.c", "c.c"]
        .into_iter()
        .find(|p| shard_of(p.as_bytes(), 2) != ShardId(0))
        .unwrap();
    let e = check(&[mcr("*", other, &[], &[])], 2).unwrap_err();
    assert_eq!(e.invariant, Invariant::OnePart);
    assert!(e.to_string().contains(&format!("file {other}")), "{e}");
    // Records of a file in two runs.
    let e = refused(&[
        mcr("*", "a.c", &[], &[]),
        mcr("*", "b.c", &[], &[]),
        fl("a.c", "f", &[]),
    ]);
    assert!(e.to_string().contains("not contiguous"), "{e}");
}

/// The gate matched every manager record of every file against every glob,
/// compiling the glob again each time (a hostile run: 4,000 rows of 200 managers
/// with 1 KiB names over 20 files and 16 groups `?*?*...b` took 177 s to check).
/// Each (manager, glob) pair is matched once per part now.
#[test]
fn every_manager_record_of_every_file_was_matched_against_every_glob() {
    let globs: Vec<Group> = (0..16)
        .map(|i| Group::parse(&format!("G{i}={}b", "?*".repeat(511))).unwrap())
        .collect();
    let mut m = Matcher::new(&globs);
    let name = "x".repeat(1024);
    for _file in 0..20 {
        for k in 0..10 {
            assert!(m.groups_of(&format!("{k}{name}")).is_empty());
        }
    }
    assert_eq!(m.matched, 10 * 16, "one match per (manager, glob) pair");
    let hit = format!("{}b", "a".repeat(511));
    assert_eq!(&*m.groups_of(&hit), &(0..16).collect::<Vec<_>>()[..]);
    assert_eq!(m.matched, 11 * 16);
}

#[test]
fn hits_past_int64_are_refused() {
    let big = i64::MAX as u64;
    let e = refused(&[
        mcr("*", "a.c", &[1], &[big + 1]),
        mcr("m", "a.c", &[1], &[big + 1]),
    ]);
    assert_eq!(e.invariant, Invariant::Int64);
    let e = refused(&[
        mcr("*", "a.c", &[1], &[big]),
        mcr("m", "a.c", &[1], &[u64::MAX]),
        mcr("n", "a.c", &[1], &[2]),
    ]);
    assert_eq!(e.invariant, Invariant::Int64, "{e}");
}

fn spec() -> JobSpec {
    JobSpec {
        job: JobId::parse("j1").unwrap(),
        inputs: vec!["in.csv".into()],
        base_repo: "git://r".into(),
        base_commit: "c1".into(),
        source: "dir:/s".into(),
        shards: 1,
        max_bad_rows: 0,
        file_path_prefix: String::new(),
        header: HeaderSpec {
            namespace: "upstream".into(),
            duration: 3,
            date_to: "2024-04-08".into(),
            total_rows: None,
        },
        input: Default::default(),
        splits: Vec::new(),
        groups: groups(),
        namespace: None,
        input_ids: Vec::new(),
        partial_out: None,
        partial_inputs: Vec::new(),
        direct_partials: Vec::new(),
        rollup: None,
    }
}

fn header(ns: &str, commit: &str, duration: i64, date: &str, total: i64) -> Vec<u8> {
    gz(&[format!(
        r#"{{"Session":"","Time":"0001-01-01T00:00:00Z","Namespace":"{ns}","Repo":"git://r","Commit":"{commit}","Duration":{duration},"DateTo":"{date}","TotalRows":{total}}}"#
    )])
}

fn manifest(s: &PartSummary) -> Manifest {
    let mut m = Manifest::default();
    m.totals.files = s.files;
    m.totals.instrumented = s.instrumented;
    m.totals.covered = s.covered;
    m.totals.rows_merged = 4;
    m.totals.rows_in = 4;
    m.shards.push(ShardEntry {
        index: s.shard,
        records: s.records,
        bytes: s.bytes,
        sha256: s.sha256.clone(),
        attempts: 1,
        outages: 0,
    });
    m
}

#[test]
fn totals_or_parts_differing_from_the_manifest_are_refused() {
    let s = check(&good(), 1).unwrap();
    let h = header("upstream", "c1", 3, "2024-04-08", 9);
    check_result(&spec(), &h, &manifest(&s), std::slice::from_ref(&s)).unwrap();
    let mut m = manifest(&s);
    m.totals.covered += 1;
    let e = check_result(&spec(), &h, &m, std::slice::from_ref(&s)).unwrap_err();
    assert_eq!(e.invariant, Invariant::Totals);
    assert!(
        e.to_string()
            .contains("2 covered in the parts, the manifest says 3"),
        "{e}"
    );
    let mut m = manifest(&s);
    m.shards[0].sha256 = "00".into();
    assert_eq!(
        check_result(&spec(), &h, &m, std::slice::from_ref(&s))
            .unwrap_err()
            .invariant,
        Invariant::PartAsReported
    );
    let mut m = manifest(&s);
    m.shards[0].records -= 1;
    assert_eq!(
        check_result(&spec(), &h, &m, std::slice::from_ref(&s))
            .unwrap_err()
            .invariant,
        Invariant::PartAsReported
    );
    // Rows merged and nothing instrumented.
    let empty = check(&[mcr("*", "b.c", &[], &[])], 1).unwrap();
    let e = check_result(&spec(), &h, &manifest(&empty), &[empty]).unwrap_err();
    assert_eq!(e.invariant, Invariant::NotEmpty, "{e}");
}

/// Every row read accounted for once: a `rows_in` the counts do not make (a partial's
/// description read directly said 5 over 2 rows), a count saturated while `rows_in` is
/// small (a forged `paths` table), and other namespaces no merge could count.
#[test]
fn counts_that_do_not_account_for_every_row_are_refused() {
    let s = check(&good(), 1).unwrap();
    let h = header("upstream", "c1", 3, "2024-04-08", 9);
    let refused = |m: &Manifest, want: &str| {
        let e = check_result(&spec(), &h, m, std::slice::from_ref(&s)).unwrap_err();
        assert_eq!(e.invariant, Invariant::Totals, "{e}");
        assert!(e.to_string().contains(want), "{e}");
    };
    let mut m = manifest(&s);
    m.totals.rows_in = 5;
    refused(&m, "rows_in is 5 but merged 4");
    let mut m = manifest(&s);
    m.totals.rows_lost = u64::MAX;
    m.totals.rows_in = 80;
    refused(&m, "rows_in is 80");
    // Past 2^63 and not saturated: still exact.
    let mut m = manifest(&s);
    m.totals.rows_merged = 1 << 63;
    m.totals.rows_in = (1 << 63) + 12345;
    refused(&m, "make 9223372036854775808");
    // Saturated sums of sums: the rows read (rows_in and the rows outside the prefix)
    // saturated, the counts cannot be checked row for row.
    let mut m = manifest(&s);
    m.totals.rows_merged = u64::MAX;
    m.totals.rows_in = u64::MAX - (1 << 62);
    m.totals.rows_outside_prefix = 1 << 62;
    check_result(&spec(), &h, &m, std::slice::from_ref(&s)).unwrap();
    // Other namespaces' rows saturated too: their list's sum saturates the same way.
    let mut m = manifest(&s);
    m.totals.rows_other_namespaces = u64::MAX;
    m.other_namespaces.listed.insert("y".into(), 1 << 63);
    m.other_namespaces.listed.insert("z".into(), 1 << 63);
    check_result(&spec(), &h, &m, std::slice::from_ref(&s)).unwrap();
    let mut m = manifest(&s);
    m.totals.rows_other_namespaces = 3;
    m.other_namespaces.listed.insert("a".into(), 2);
    refused(&m, "other_namespaces counts 2");
    for (name, rows, why) in [
        ("a", 0, "listed with no rows"),
        ("upstream", 3, "the job's own namespace"),
        (&*"z".repeat(300), 3, "longer than a listed name"),
    ] {
        let mut m = manifest(&s);
        m.totals.rows_other_namespaces = rows;
        m.other_namespaces.listed.insert(name.into(), rows);
        refused(&m, why);
    }
}

#[test]
fn a_bad_header_is_refused() {
    let s = check(&good(), 1).unwrap();
    let m = manifest(&s);
    for (h, what) in [
        (
            header("other", "c1", 3, "2024-04-08", 9),
            "Namespace is \"other\"",
        ),
        (
            header("upstream", "c2", 3, "2024-04-08", 9),
            "Commit is \"c2\"",
        ),
        (
            header("upstream", "c1", 3, "2024-04-31", 9),
            "DateTo is \"2024-04-31\"",
        ),
        (
            header("upstream", "c1", 3, "2024-04-08", -1),
            "TotalRows -1 is negative",
        ),
        (
            header("upstream", "c1", -3, "2024-04-08", 9),
            "Duration -3 is negative",
        ),
        (gz(&["{}".into()]), "not a header line"),
    ] {
        let e = check_result(&spec(), &h, &m, std::slice::from_ref(&s)).unwrap_err();
        assert_eq!(e.invariant, Invariant::Header, "{e}");
        assert!(e.to_string().contains(what), "{what}: {e}");
    }
    // A job whose own DateTo or Duration is out of its domain.
    let mut bad = spec();
    bad.header.date_to = "2024-13-01".into();
    let h = header("upstream", "c1", 3, "2024-13-01", 9);
    let e = check_result(&bad, &h, &m, &[s]).unwrap_err();
    assert!(e.to_string().contains("month 13 does not exist"), "{e}");
}

/// A partial's description edited to say 2^64 - 1 rows read (or two saying 2^63 each)
/// saturated the job's `rows_in`, and the check of every row accounted for was skipped:
/// exit 0 with a manifest whose 381 rows accounted for said 18446744073709551615 read.
#[test]
fn a_saturated_rows_in_that_few_rows_account_for_was_published() {
    let s = check(&good(), 1).unwrap();
    let h = header("upstream", "c1", 3, "2024-04-08", 9);
    let mut m = manifest(&s);
    m.totals.rows_in = u64::MAX;
    let e = check_result(&spec(), &h, &m, std::slice::from_ref(&s)).unwrap_err();
    assert_eq!(e.invariant, Invariant::Totals, "{e}");
    assert!(
        e.to_string()
            .contains("(saturated, with 0 outside the prefix)"),
        "{e}"
    );
    assert!(e.to_string().contains("make only 4"), "{e}");
    // Saturated with the rows outside the prefix: the same.
    let mut m = manifest(&s);
    m.totals.rows_in = u64::MAX - 10;
    m.totals.rows_outside_prefix = 10;
    check_result(&spec(), &h, &m, std::slice::from_ref(&s)).unwrap_err();
    // Accounted rows that reach saturation only with the rows outside the prefix pass.
    let mut m = manifest(&s);
    m.totals.rows_merged = u64::MAX - (1 << 40);
    m.totals.rows_in = u64::MAX - (1 << 40);
    m.totals.rows_outside_prefix = 1 << 40;
    check_result(&spec(), &h, &m, std::slice::from_ref(&s)).unwrap();
    // One short of saturation: refused.
    m.totals.rows_merged -= 1;
    check_result(&spec(), &h, &m, std::slice::from_ref(&s)).unwrap_err();
}
