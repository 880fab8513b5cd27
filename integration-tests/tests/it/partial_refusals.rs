//! Partials' edges found by attacking roll-ups.
//!
//! A `--partial-out` that overlaps an input is refused before any work, embedded and
//! on the fleet: a fleet roll-up given its own input as `--partial-out` replaced the
//! input partial with the sum of itself and the others (and grew on every rerun),
//! and an embedded roll-up did the same through `file://…/partial.json`. A partial's
//! bad rows count against a roll-up's `--max-bad-rows` as a merge's and the fleet's
//! roll-up count them (the embedded roll-up ignored them).

use std::path::Path;

use covmerge_integration_tests::{
    bin, covmerge, fleet, manifest, partial_files, CorpusJob, FleetCorpus,
};

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
    // Advice that works: 8 into 4 opens 2 files (it said "--shards dividing 8", and 1
    // divides 8 but opens all 8).
    assert!(
        err.contains("give --shards a multiple of 4 (such as 4 or 8)"),
        "{err}"
    );
    assert!(
        !c.dir().join("months").exists(),
        "left {:?}",
        std::fs::read_dir(c.dir().join("months/new")).map(|d| d.count())
    );
}

/// A merge that failed after its `--partial-out` was checked (a bad row past
/// `--max-bad-rows 0`) left the new output's directories, made by the check, behind,
/// empty. A merge that succeeds writes its partial there as before.
#[test]
fn a_failed_merge_left_its_new_partial_out_directories_behind() {
    let c = corpus(93);
    let text = covmerge_integration_tests::gunzip(Path::new(&c.inputs[0]));
    let bad_csv = c.dir().join("bad.csv");
    std::fs::write(&bad_csv, [text.as_slice(), b"not,a,row\n"].concat()).unwrap();
    let out = c.dir().join("partials/new/2024-04-06");
    let merge = |input: &str| {
        let inputs = [input.to_string()];
        let mut a = vec!["merge".to_string()];
        a.extend(
            c.job_args_with(&c.source, &inputs)
                .iter()
                .map(|s| s.to_string()),
        );
        a.extend(["--out", "/dev/null", "--partial-out", out.to_str().unwrap()].map(String::from));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        covmerge(&a)
    };
    let o = merge(bad_csv.to_str().unwrap());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "a bad row past --max-bad-rows 0 merged"
    );
    assert!(err.contains("bad.csv"), "{err}");
    assert!(
        !c.dir().join("partials").exists(),
        "left {:?}",
        std::fs::read_dir(c.dir().join("partials/new")).map(|d| d.count())
    );
    let o = merge(&c.inputs[0]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.join("partial.json").is_file());
}

/// A partial's write cut before its `partial.json` (a killed job) left its table files,
/// and the same command run again was refused: the location "holds N objects and no
/// partial.json". Table files alone are now replaced like a partial; anything else
/// there is still refused, named.
#[test]
fn a_cut_partial_write_refused_the_same_command_run_again() {
    let c = corpus(98);
    let out = c.dir().join("days/cut");
    day(&c, &c.inputs[0], &out);
    let whole = partial_files(&out);
    // What a kill between the files and the description leaves.
    std::fs::remove_file(out.join("partial.json")).unwrap();
    day(&c, &c.inputs[0], &out);
    assert_eq!(partial_files(&out), whole, "the rerun's partial differs");

    // A file of another kind beside them is still refused, and named.
    std::fs::remove_file(out.join("partial.json")).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let o = covmerge(&[
        "rollup",
        "--source",
        &c.source,
        "--shards",
        "2",
        "--date-to",
        "2024-04-06",
        "--partial-out",
        out.to_str().unwrap(),
        "--input",
        &c.inputs[0],
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a foreign file was written over");
    assert!(
        err.contains("holds 1 object(s) that are not a partial's files (notes.txt)"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine"
    );
}

/// A namespace `partial.json` filled `{namespace}` (and `--partial-out D/partial.json`
/// was taken): the partial went to a directory `partial.json`, which every reader
/// takes for the description of its parent, so it could not be named back, and beside
/// another namespace a `{namespace}` roll-up refused a false overlap.
#[test]
fn a_partial_written_as_a_directory_named_partial_json_could_not_be_read_back() {
    let c = corpus(99);
    let dir = c.dir().join("ns");
    for (args, says) in [
        (
            vec![
                "--namespace",
                "partial.json",
                "--partial-out",
                "{D}/{namespace}",
            ],
            "`partial.json` is the name of a partial's description",
        ),
        (
            vec!["--partial-out", "{D}/x/partial.json/"],
            "names a partial's description (partial.json)",
        ),
    ] {
        let d = dir.to_str().unwrap();
        let mut a = vec![
            "rollup".to_string(),
            "--source".into(),
            c.source.clone(),
            "--date-to".into(),
            "2024-04-06".into(),
            "--input".into(),
            c.inputs[0].clone(),
        ];
        a.extend(args.iter().map(|s| s.replace("{D}", d)));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let o = covmerge(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{a:?} succeeded");
        assert!(err.contains(says), "{a:?}: {err}");
        assert!(!dir.exists(), "{a:?} left {dir:?}");
    }
}

/// `rollup --input file://DIR/` (a listing of day partials) read them as raw rows: it
/// asked for --source, and with one wrote today's period and one shard (the rows
/// right). A listed prefix holding a partial's `partial.json` is that partial, as a
/// merge reads it.
#[test]
fn a_listing_of_partials_was_rolled_up_as_raw_rows_with_todays_period() {
    let c = corpus(100);
    let days = c.dir().join("listed");
    for (i, date) in [(0, "2024-05-01"), (1, "2024-05-03")] {
        let o = covmerge(&[
            "rollup",
            "--source",
            &c.source,
            "--shards",
            "2",
            "--date-to",
            date,
            "--partial-out",
            days.join(format!("d{i}")).to_str().unwrap(),
            "--input",
            &c.inputs[i],
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let named = c.dir().join("named");
    let listed = c.dir().join("from-listing");
    for (out, inputs) in [
        (
            &named,
            vec![
                days.join("d0").display().to_string(),
                days.join("d1").display().to_string(),
            ],
        ),
        (&listed, vec![format!("file://{}/", days.display())]),
    ] {
        let mut a = vec!["rollup", "--partial-out", out.to_str().unwrap(), "--input"];
        a.extend(inputs.iter().map(String::as_str));
        let o = covmerge(&a);
        assert!(
            o.status.success(),
            "{a:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert_eq!(partial_files(&listed), partial_files(&named));
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(listed.join("partial.json")).unwrap())
            .unwrap();
    assert_eq!(
        (
            d["date_from"].as_str(),
            d["date_to"].as_str(),
            d["shard_count"].as_u64()
        ),
        (Some("2024-05-01"), Some("2024-05-03"), Some(2)),
        "{d}"
    );
}

/// A `--partial-out` holding a `partial.json` of any content beside files of its own
/// (a README, a thesis) was taken for a partial, and the files the new partial did not
/// have were deleted once it was written.
#[test]
fn a_partial_json_beside_other_files_had_them_deleted() {
    let c = corpus(101);
    let out = c.dir().join("mine");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("partial.json"), "").unwrap();
    std::fs::write(out.join("thesis.tex"), "mine").unwrap();
    let o = covmerge(&[
        "rollup",
        "--source",
        &c.source,
        "--date-to",
        "2024-04-06",
        "--partial-out",
        out.to_str().unwrap(),
        "--input",
        &c.inputs[0],
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "written over thesis.tex");
    assert!(err.contains("(thesis.tex)"), "{err}");
    assert_eq!(
        std::fs::read_to_string(out.join("thesis.tex")).unwrap(),
        "mine"
    );
}

/// A partial kept inside another (a copy, `cp -r P P/backup`) was read twice through
/// a listing of the outer one (`merge --input file://P/` doubled every hit), and a
/// `--partial-out` inside a partial was written there.
#[test]
fn a_partial_inside_another_was_read_with_it_through_a_listing() {
    let c = corpus(102);
    let p = c.dir().join("p");
    day(&c, &c.inputs[0], &p);
    let o = covmerge(&[
        "rollup",
        "--source",
        &c.source,
        "--date-to",
        "2024-04-06",
        "--partial-out",
        p.join("inner").to_str().unwrap(),
        "--input",
        &c.inputs[1],
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("lies inside the partial"),
        "{err}"
    );
    // A copy put there by hand: the listing reads the outer partial alone.
    let backup = p.join("backup");
    std::fs::create_dir(&backup).unwrap();
    for (name, bytes) in partial_files(&p) {
        std::fs::write(backup.join(name), bytes).unwrap();
    }
    std::fs::copy(p.join("partial.json"), backup.join("partial.json")).unwrap();
    let (named, listed) = (c.dir().join("named"), c.dir().join("listed"));
    for (out, input) in [
        (&named, p.display().to_string()),
        (&listed, format!("file://{}/", p.display())),
    ] {
        let o = covmerge(&[
            "rollup",
            "--partial-out",
            out.to_str().unwrap(),
            "--input",
            &input,
        ]);
        assert!(
            o.status.success(),
            "{input}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert_eq!(partial_files(&listed), partial_files(&named));
}

/// A file that is not a partial's, put in `--partial-out` while the merge ran (after
/// its preflight): the result was published to `--out`, then the partial refused, exit
/// 1 with "nothing was read or written" and no manifest. Now the partial's
/// destination is checked again before anything is published: nothing is, and the
/// failed manifest names `--partial-out`.
#[test]
fn a_partial_out_refused_after_the_merge_left_the_result_published() {
    let c = corpus(93);
    let (po, out, man, log) = (
        c.dir().join("po"),
        c.dir().join("out.jsonl.gz"),
        c.dir().join("manifest.json"),
        c.dir().join("stderr.log"),
    );
    let mut a = vec!["merge"];
    a.extend(c.job_args_with(&c.source, &c.inputs));
    a.extend_from_slice(&["--out", out.to_str().unwrap()]);
    a.extend_from_slice(&["--manifest", man.to_str().unwrap()]);
    a.extend_from_slice(&["--partial-out", po.to_str().unwrap()]);
    let mut child = std::process::Command::new(bin())
        .args(&a)
        .env("RUST_LOG", "warn")
        .env("COVMERGE_FAULT_SLEEP", "assemble:3000")
        .stderr(std::fs::File::create(&log).unwrap())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(&log).is_ok_and(|s| s.contains("fault point reached")) {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "the job never reached its assembly"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::fs::create_dir_all(&po).unwrap();
    std::fs::write(po.join("notes.txt"), "an operator's notes\n").unwrap();
    let status = child.wait().unwrap();
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("not a partial's files (notes.txt)") && err.contains("nothing was published"),
        "{err}"
    );
    assert!(!err.contains("nothing was read"), "{err}");
    assert!(!out.exists(), "the result was published: {err}");
    let m = manifest(&man);
    assert_eq!(m["status"], "failed", "{m}");
    assert_eq!(m["failed"][0]["task"], "--partial-out", "{m}");
    assert!(m["result"].is_null(), "{m}");
    // The notes are left as they were, and no partial is beside them.
    let mut names: Vec<String> = std::fs::read_dir(&po)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["notes.txt"]);
}
