//! Partials' edges found by attacking roll-ups.
//!
//! A `--partial-out` that overlaps an input is refused before any work, embedded and
//! on the fleet: a fleet roll-up given its own input as `--partial-out` replaced the
//! input partial with the sum of itself and the others (and grew on every rerun),
//! and an embedded roll-up did the same through `file://…/partial.json`. A partial's
//! bad rows count against a roll-up's `--max-bad-rows` as a merge's and the fleet's
//! roll-up count them (the embedded roll-up ignored them).

use std::path::Path;

use covmerge_integration_tests::{covmerge, fleet, partial_files, CorpusJob, FleetCorpus};

fn corpus(seed: u64) -> CorpusJob {
    FleetCorpus::local(seed)
        .files(6)
        .lines(40)
        .commits(2)
        .managers(2)
        .parts(2)
        .build()
}

/// A day partial of `input` in `dir` (`rollup` of raw rows, 2 shards).
fn day(c: &CorpusJob, input: &str, dir: &Path) {
    let o = covmerge(&[
        "rollup",
        "--source",
        &c.source,
        "--shards",
        "2",
        "--date-to",
        "2024-04-06",
        "--partial-out",
        dir.to_str().unwrap(),
        "--input",
        input,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Runs `covmerge args`, expecting a refusal that says the locations overlap.
fn refused_overlap(args: &[&str]) {
    let o = covmerge(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "covmerge {} succeeded", args.join(" "));
    // `rollup` names a partial input it reads as the same directory; every command
    // refuses any other overlap as such.
    assert!(
        err.contains("overlaps --input") || err.contains(" is --input "),
        "covmerge {}: {err}",
        args.join(" ")
    );
}

#[test]
fn partial_out_that_is_an_input_is_refused_and_the_input_kept() {
    let c = corpus(91);
    let d0 = c.dir().join("days/d0");
    let d1 = c.dir().join("days/d1");
    day(&c, &c.inputs[0], &d0);
    day(&c, &c.inputs[1], &d1);
    let before = partial_files(&d0);
    let json = std::fs::read(d0.join("partial.json")).unwrap();
    let link = c.dir().join("link-d0");
    std::os::unix::fs::symlink(&d0, &link).unwrap();
    let (d0s, d1s) = (d0.to_str().unwrap(), d1.to_str().unwrap());
    let file_json = format!("file://{d0s}/partial.json");
    let days_prefix = format!("file://{}/", c.dir().join("days").display());
    let inside = format!("{days_prefix}new/");
    let slash = format!("{d0s}/");
    // Embedded roll-up: the same directory, written another way each time.
    for (input, out) in [
        (file_json.as_str(), d0s),
        (d0s, slash.as_str()),
        (d0s, link.to_str().unwrap()),
        (days_prefix.as_str(), inside.as_str()),
    ] {
        refused_overlap(&["rollup", "--partial-out", out, "--input", input, d1s]);
    }
    // A merge with `--partial-out`.
    let days = [d0s.to_string(), d1s.to_string()];
    let mut a = vec!["merge"];
    a.extend(c.job_args_with(&c.source, &days));
    a.extend_from_slice(&["--out", "/dev/null", "--partial-out", d0s]);
    refused_overlap(&a);
    // The fleet's roll-up: refused before any task is published (no worker runs).
    let store = format!("file://{}", c.dir().join("store").display());
    refused_overlap(&[
        "coordinator",
        "--rollup",
        "--amqp",
        &fleet::amqp(),
        "--store",
        &store,
        "--source",
        &c.source,
        "--partial-out",
        link.to_str().unwrap(),
        "--input",
        d0s,
        d1s,
    ]);
    assert_eq!(
        partial_files(&d0),
        before,
        "the input partial's files were changed"
    );
    assert_eq!(std::fs::read(d0.join("partial.json")).unwrap(), json);
    // A location beside the inputs, whose name only starts like one, is fine.
    let beside = c.dir().join("days-out");
    let o = covmerge(&[
        "rollup",
        "--partial-out",
        beside.to_str().unwrap(),
        "--input",
        d0s,
        d1s,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // But not under a listed prefix `…/days*`, which would list it.
    let glob = format!("file://{}*", c.dir().join("days").display());
    let beside2 = c.dir().join("days-out2");
    refused_overlap(&[
        "rollup",
        "--partial-out",
        beside2.to_str().unwrap(),
        "--input",
        &glob,
    ]);
}

#[test]
fn rollup_counts_a_partials_bad_rows_against_max_bad_rows_as_merge_does() {
    let c = corpus(92);
    // The first part with one malformed row appended.
    let text = covmerge_integration_tests::gunzip(Path::new(&c.inputs[0]));
    let bad_csv = c.dir().join("bad.csv");
    std::fs::write(&bad_csv, [text.as_slice(), b"not,a,row\n"].concat()).unwrap();
    let dbad = c.dir().join("dbad");
    let o = covmerge(&[
        "rollup",
        "--source",
        &c.source,
        "--shards",
        "2",
        "--date-to",
        "2024-04-06",
        "--max-bad-rows",
        "1",
        "--partial-out",
        dbad.to_str().unwrap(),
        "--input",
        bad_csv.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d1 = c.dir().join("d1");
    day(&c, &c.inputs[1], &d1);
    let (dbad_s, d1_s) = (dbad.to_str().unwrap(), d1.to_str().unwrap());
    let out = c.dir().join("month");
    let o = covmerge(&[
        "rollup",
        "--partial-out",
        out.to_str().unwrap(),
        "--input",
        d1_s,
        dbad_s,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "a bad row past --max-bad-rows 0 was rolled up"
    );
    assert!(
        err.contains(dbad_s) && err.contains("--max-bad-rows 0"),
        "{err}"
    );
    assert!(!out.join("partial.json").exists(), "nothing is written");
    // A merge of the same partial refuses it the same way.
    let inputs = [dbad_s.to_string()];
    let mut a = vec!["merge"];
    a.extend(c.job_args_with(&c.source, &inputs));
    a.extend_from_slice(&["--out", "/dev/null"]);
    let o = covmerge(&a);
    assert!(!o.status.success(), "merge took the partial's bad row");
    // Allowed, it is counted in the roll-up's partial.
    let o = covmerge(&[
        "rollup",
        "--max-bad-rows",
        "1",
        "--partial-out",
        out.to_str().unwrap(),
        "--input",
        d1_s,
        dbad_s,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("partial.json")).unwrap()).unwrap();
    assert_eq!(json["counts"]["rows_bad"], 1, "{json}");
}

/// A roll-up refused after its `--partial-out` was checked (an input whose 8 shards
/// into 7 open more files than `--memory-budget` holds) left the output's directories,
/// made by the check, behind, empty.
#[test]
fn a_refused_rollup_left_its_new_output_directories_behind() {
    let c = corpus(97);
    let d8 = c.dir().join("days/d8");
    let o = covmerge(&[
        "rollup",
        "--source",
        &c.source,
        "--shards",
        "8",
        "--date-to",
        "2024-04-06",
        "--partial-out",
        d8.to_str().unwrap(),
        "--input",
        &c.inputs[0],
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = c.dir().join("months/new/2024-04");
    let o = covmerge(&[
        "rollup",
        "--shards",
        "7",
        "--memory-budget",
        "16MiB",
        "--partial-out",
        out.to_str().unwrap(),
        "--input",
        d8.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a roll-up past the budget succeeded");
    assert!(err.contains("open 8 files at once"), "{err}");
    assert!(
        !c.dir().join("months").exists(),
        "left {:?}",
        std::fs::read_dir(c.dir().join("months/new")).map(|d| d.count())
    );
}
