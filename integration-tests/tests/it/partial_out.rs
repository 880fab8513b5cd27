//! `merge --partial-out` and `rollup` (contract §10): the partial a merge writes is
//! the partial of its raw rows, byte for byte, at any shard count; roll-ups of day
//! partials are the partial of all their rows; what is refused.

use std::path::{Path, PathBuf};

use covmerge_integration_tests::{covmerge, merge_ok, CorpusJob, FleetCorpus};
use covmerge_partial::{Builder, Description, Partial, RawRow};
use covmerge_source::BlobId;

/// The corpus of these tests: edge cases included (rows without line, past the end,
/// of a commit that exists nowhere, of a deleted file).
fn corpus(seed: u64) -> CorpusJob {
    FleetCorpus::local(seed)
        .files(12)
        .lines(80)
        .commits(4)
        .managers(5)
        .parts(3)
        .build()
}

/// The rows of CSV(.gz) inputs, as (path, commit, func, manager, sl, hits).
fn rows_of(inputs: &[String]) -> Vec<(String, String, String, String, u32, u64)> {
    let mut out = Vec::new();
    for i in inputs {
        let raw = std::fs::read(i).unwrap();
        let text = if raw.starts_with(&[0x1f, 0x8b]) {
            covmerge_integration_tests::gunzip_bytes(&raw)
        } else {
            raw
        };
        let mut r = csv::ReaderBuilder::new().from_reader(&text[..]);
        let h = r.headers().unwrap().clone();
        let col = |n: &str| h.iter().position(|c| c == n).unwrap();
        let (p, c, f, m, sl, hc) = (
            col("file_path"),
            col("kernel_commit"),
            col("func_name"),
            col("manager"),
            col("sl"),
            col("hit_count"),
        );
        for rec in r.records() {
            let rec = rec.unwrap();
            if rec.get(p) == Some("file_path") {
                continue; // a repeated header
            }
            out.push((
                rec[p].to_owned(),
                rec[c].to_owned(),
                rec[f].to_owned(),
                rec[m].to_owned(),
                rec[sl].parse().unwrap(),
                rec[hc].parse().unwrap(),
            ));
        }
    }
    out
}

/// The partial of `inputs`' rows made directly with a builder, versions from the
/// `dir:` source `root` (`root/<commit>/<path>`), in `out`.
fn direct(root: &Path, inputs: &[String], shards: u32, day: &str, out: &Path) -> Description {
    let d = day.parse().unwrap();
    let mut b = Builder::new("", d, d, shards, usize::MAX, out.parent().unwrap()).unwrap();
    for (path, commit, func, manager, line, hits) in rows_of(inputs) {
        let version = std::fs::read(root.join(&commit).join(&path))
            .ok()
            .map(|t| BlobId::of(&t).hex());
        b.add(&RawRow {
            path: &path,
            commit: &commit,
            version: version.as_deref(),
            manager: &manager,
            func_name: &func,
            line,
            hits,
            rows: 1,
        })
        .unwrap();
    }
    b.finish(out).unwrap()
}

/// The shard files of a partial directory, by name, with their bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    covmerge_integration_tests::partial_files(dir)
}

/// Sets the value of `flag` in `a` (a job's arguments, which hold it).
fn set<'a>(a: &mut [&'a str], flag: &str, value: &'a str) {
    let at = a.iter().position(|x| *x == flag).unwrap();
    a[at + 1] = value;
}

/// Merges `c` with `--partial-out dir` at `shards`.
fn merge_partial(c: &CorpusJob, shards: &str, dir: &Path, extra: &[&str]) {
    let out = c.path(&format!("out-{shards}.jsonl.gz"));
    let mut a = c.job_args();
    set(&mut a, "--shards", shards);
    a.extend_from_slice(&["--out", out.to_str().unwrap()]);
    a.extend_from_slice(&["--partial-out", dir.to_str().unwrap()]);
    a.extend_from_slice(extra);
    merge_ok(&a);
}

/// The manifest at `manifest` names the partial in `dir` exactly: its description's
/// bytes (by SHA-256), shard count and rows.
fn manifest_names_the_partial(manifest: &Path, dir: &Path, shards: u32) {
    let m = covmerge_integration_tests::manifest(manifest);
    let p = &m["partial"];
    let json = std::fs::read(dir.join("partial.json")).unwrap();
    let want = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&json));
    assert_eq!(p["description_sha256"], want.as_str(), "{m}");
    assert_eq!(p["shard_count"], shards, "{m}");
    assert_eq!(p["rows_in"], m["totals"]["rows_in"], "{m}");
    assert_eq!(p["date_to"], "2024-04-08", "{m}");
    assert!(p["url"].as_str().unwrap().contains("partial-"), "{m}");
}

#[test]
fn merge_partial_out_is_the_partial_of_the_raw_rows_at_1_3_and_7_shards() {
    let c = corpus(41);
    let root = &c.corpus.sources;
    for shards in [1u32, 3, 7] {
        let got = c.path(&format!("partial-{shards}"));
        let manifest = c.path(&format!("manifest-{shards}.json"));
        merge_partial(
            &c,
            &shards.to_string(),
            &got,
            &["--manifest", manifest.to_str().unwrap()],
        );
        manifest_names_the_partial(&manifest, &got, shards);
        let want_dir = c.path(&format!("want-{shards}"));
        let want = direct(root, &c.inputs, shards, "2024-04-08", &want_dir);
        let p = Partial::open(&got).unwrap();
        assert_eq!(p.description(), &want, "{shards} shards");
        assert_eq!(files(&got), files(&want_dir), "{shards} shards");
        // Read back whole: every file checked, the counts add up.
        let content = p.content().unwrap();
        assert_eq!(
            content,
            Partial::open(&want_dir).unwrap().content().unwrap()
        );
        assert!(want.counts.rows_without_line > 0 && want.counts.rows_without_version > 0);
        assert_eq!(want.counts.rows_in, c.corpus.rows);
    }
}

#[test]
fn a_rerun_replaces_a_partial_and_anything_else_is_refused() {
    let c = corpus(43);
    let dir = c.path("partial");
    merge_partial(&c, "4", &dir, &[]);
    let first = files(&dir);
    assert_eq!(first.len(), 16);
    // Again into the partial, with fewer shards: replaced, no file of the old one left.
    merge_partial(&c, "2", &dir, &[]);
    assert_eq!(files(&dir).len(), 8);
    assert_eq!(Partial::open(&dir).unwrap().description().shard_count, 2);
    // A directory holding something else is refused before any work.
    let other = c.path("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    let out = c.path("refused.jsonl.gz");
    let mut a = c.job_args();
    a.extend_from_slice(&[
        "--out",
        out.to_str().unwrap(),
        "--partial-out",
        other.to_str().unwrap(),
    ]);
    let o = covmerge(&[&["merge"], &a[..]].concat());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("notes.txt") && err.contains("not a partial"),
        "{err}"
    );
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 1);
}

#[test]
fn rollup_of_day_partials_is_the_partial_of_all_rows() {
    let c = corpus(47);
    let root = &c.corpus.sources;
    // One day per input part.
    let mut days = Vec::new();
    for (i, input) in c.inputs.iter().enumerate() {
        let dir = c.path(&format!("day-{i}"));
        let date = format!("2024-04-0{}", i + 1);
        let out = c.path(&format!("day-{i}.jsonl.gz"));
        let mut a = c.job_args_with(&c.source, std::slice::from_ref(input));
        // The job's --date-to is the day's.
        set(&mut a, "--date-to", &date);
        set(&mut a, "--shards", "3");
        a.extend_from_slice(&["--out", out.to_str().unwrap()]);
        a.extend_from_slice(&["--partial-out", dir.to_str().unwrap()]);
        merge_ok(&a);
        days.push(dir);
    }
    let all = c.path("all");
    let want = direct(root, &c.inputs, 5, "2024-04-01", &all);
    let got = c.path("rolled");
    let mut a = vec![
        "rollup",
        "--shards",
        "5",
        "--partial-out",
        got.to_str().unwrap(),
        "--input",
    ];
    a.extend(days.iter().map(|d| d.to_str().unwrap()));
    let o = covmerge(&a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d = Partial::open(&got).unwrap().description().clone();
    assert_eq!(
        (d.date_from.as_str(), d.date_to.as_str()),
        ("2024-04-01", "2024-04-03")
    );
    assert_eq!(
        Description {
            date_to: want.date_to.clone(),
            ..d
        },
        want
    );
    assert_eq!(files(&got), files(&all));
    rollup_past_the_budget_is_the_same(&c, &days);
}

/// `rollup --memory-budget 16MiB` holds two files open (6 MiB each): three day
/// partials are rolled up in levels, into the same files; an input that alone opens
/// more (3 shards into 2: all 3 files for each output shard) is refused naming it.
fn rollup_past_the_budget_is_the_same(c: &CorpusJob, days: &[PathBuf]) {
    let all = c.path("all-3");
    direct(&c.corpus.sources, &c.inputs, 3, "2024-04-01", &all);
    let got = c.path("rolled-in-levels");
    let mut a = vec![
        "rollup",
        "--memory-budget",
        "16MiB",
        "--partial-out",
        got.to_str().unwrap(),
        "--input",
    ];
    a.extend(days.iter().map(|d| d.to_str().unwrap()));
    let o = std::process::Command::new(covmerge_integration_tests::bin())
        .args(&a)
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("rolled up in levels") && err.contains("intermediate"),
        "{err}"
    );
    assert_eq!(files(&got), files(&all));
    let refused = c.path("refused-2");
    let o = covmerge(&[
        "rollup",
        "--memory-budget",
        "16MiB",
        "--shards",
        "2",
        "--partial-out",
        refused.to_str().unwrap(),
        "--input",
        days[0].to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains(days[0].to_str().unwrap()) && err.contains("--memory-budget"),
        "{err}"
    );
    assert!(!refused.join("partial.json").exists());
}

#[test]
fn rollup_refuses_two_namespaces_and_what_is_not_a_partial() {
    let c = corpus(53);
    let a_dir = c.path("a");
    let b_dir = c.path("b");
    merge_partial(&c, "2", &a_dir, &[]);
    // The same partial, said to be of another namespace.
    std::fs::create_dir_all(&b_dir).unwrap();
    for (name, bytes) in files(&a_dir) {
        std::fs::write(b_dir.join(name), bytes).unwrap();
    }
    let text = std::fs::read_to_string(a_dir.join("partial.json")).unwrap();
    let text = text.replace("\"namespace\": \"\"", "\"namespace\": \"android\"");
    std::fs::write(b_dir.join("partial.json"), text).unwrap();
    let out = c.path("out");
    let o = covmerge(&[
        "rollup",
        "--partial-out",
        out.to_str().unwrap(),
        "--input",
        a_dir.to_str().unwrap(),
        b_dir.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("two namespaces") && err.contains("android"),
        "{err}"
    );
    assert!(!out.join("partial.json").exists());
    // Raw rows are not a partial.
    let o = covmerge(&[
        "rollup",
        "--partial-out",
        out.to_str().unwrap(),
        "--input",
        &c.inputs[0],
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("not a partial"), "{err}");
}

#[test]
fn rollup_counted_the_same_partial_twice_and_replaced_its_input() {
    let c = corpus(59);
    let a_dir = c.path("a");
    merge_partial(&c, "2", &a_dir, &[]);
    let link = c.path("a-link");
    std::os::unix::fs::symlink(&a_dir, &link).unwrap();
    let out = c.path("out");
    let a = a_dir.to_str().unwrap();
    for twice in [[a, a], [a, link.to_str().unwrap()]] {
        let o = covmerge(&[
            "rollup",
            "--partial-out",
            out.to_str().unwrap(),
            "--input",
            twice[0],
            twice[1],
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        assert!(err.contains("counted twice"), "{err}");
        assert!(!out.join("partial.json").exists());
    }
    let before = files(&a_dir);
    let o = covmerge(&["rollup", "--partial-out", a, "--input", a]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("is --input"), "{err}");
    assert_eq!(files(&a_dir), before);
}

/// A merge of a partial of its own shard count reads it directly (no split task) and
/// feeds its `--partial-out` from those rows too: the partial it writes is the one it
/// read, file for file (these rows lost nothing on the way), at 3 shards; through the
/// splits (another shard count), the same.
#[test]
fn merge_of_a_direct_partial_with_partial_out_writes_the_partial_it_read() {
    let c = corpus(59);
    let first = c.path("first");
    merge_partial(&c, "3", &first, &[]);
    for shards in ["3", "2"] {
        let again = c.path(&format!("again-{shards}"));
        let want = c.path(&format!("want-{shards}"));
        merge_partial(&c, shards, &want, &[]);
        let input = vec![first.to_str().unwrap().to_owned()];
        let out = c.path(&format!("again-{shards}.jsonl.gz"));
        let mut a = c.job_args_with(&c.source, &input);
        set(&mut a, "--shards", shards);
        a.extend_from_slice(&["--out", out.to_str().unwrap()]);
        a.extend_from_slice(&["--partial-out", again.to_str().unwrap()]);
        merge_ok(&a);
        assert_eq!(files(&again), files(&want), "{shards} shards");
        let (g, w) = (
            Partial::open(&again).unwrap().description().clone(),
            Partial::open(&want).unwrap().description().clone(),
        );
        assert_eq!(g, w, "{shards} shards");
    }
}
