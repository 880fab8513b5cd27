//! Partials (contract §10) as a merge input: `merge --input` of partials, alone or
//! mixed with CSV, gives the merge of the raw rows they were made of, byte for byte
//! (but the header's Session and Time) and with the same manifest counts (but
//! `diffs_capped`). The partials are built here from the raw rows with
//! `covmerge_partial::Builder`, each row's version the git blob id of its file at its
//! commit, as the writer finds it.

use std::io::Read;
use std::path::{Path, PathBuf};

use covmerge_integration_tests::{covmerge, gunzip, manifest, merge_ok, FleetCorpus};
use covmerge_partial::{Builder, RawRow};
use serde_json::Value;

/// One raw row: path, commit, function, manager, line, hits; `None`: a bad row.
type Raw = Option<(String, String, String, String, u32, u64)>;

const HDR: &str = "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count";

/// The data rows of CSV(.gz) `inputs`, as the merge reads them: by header name, the
/// header repeated later skipped; a row that does not parse is a bad row.
fn raw_rows(inputs: &[PathBuf]) -> Vec<Raw> {
    let mut out = Vec::new();
    for p in inputs {
        let bytes = std::fs::read(p).unwrap();
        let text: Box<dyn Read> = if p.extension().is_some_and(|e| e == "gz") {
            Box::new(flate2::read::MultiGzDecoder::new(&bytes[..]))
        } else {
            Box::new(&bytes[..])
        };
        let mut r = csv::ReaderBuilder::new().flexible(true).from_reader(text);
        let h = r.headers().unwrap().clone();
        let col = |n: &str| h.iter().position(|c| c == n).unwrap();
        let cols = [
            "file_path",
            "kernel_commit",
            "func_name",
            "manager",
            "sl",
            "hit_count",
        ]
        .map(col);
        for rec in r.records() {
            let rec = rec.unwrap();
            if rec.iter().zip(h.iter()).all(|(a, b)| a == b) {
                continue;
            }
            let f = |i: usize| rec.get(cols[i]).unwrap_or("").to_string();
            let (sl, hits) = (f(4).parse().ok(), f(5).parse().ok());
            out.push(
                sl.zip(hits)
                    .map(|(sl, hits)| (f(0), f(1), f(2), f(3), sl, hits)),
            );
        }
    }
    out
}

/// The git blob id of `path` at `commit` in a `sources/<commit>/<path>` tree.
fn blob_id(sources: &Path, commit: &str, path: &str) -> Option<String> {
    let data = std::fs::read(sources.join(commit).join(path)).ok()?;
    Some(covmerge_source::BlobId::of(&data).hex())
}

/// Builds the partial of `rows` (namespace `ns`) in `shards` shards into `out`.
fn build(rows: &[&Raw], sources: &Path, shards: u32, ns: &str, out: &Path) {
    let day = "2024-04-08".parse().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut b = Builder::new(ns, day, day, shards, 64 << 10, scratch.path()).unwrap();
    for r in rows {
        let Some((p, c, f, m, l, h)) = r else {
            b.add_bad(1);
            continue;
        };
        let version = blob_id(sources, c, p);
        b.add(&RawRow {
            path: p,
            commit: c,
            version: version.as_deref(),
            manager: m,
            func_name: f,
            line: *l,
            hits: *h,
            rows: 1,
        })
        .unwrap();
    }
    b.finish(out).unwrap();
}

/// Writes `rows` as a CSV input.
fn write_csv(rows: &[&Raw], out: &Path) {
    let mut s = format!("{HDR}\n");
    for r in rows {
        match r {
            Some((p, c, f, m, l, h)) => s += &format!("r,{c},{p},{f},{m},{l},{h}\n"),
            None => s += "r,c,bad/row.c,f,m,1,lots\n",
        }
    }
    std::fs::write(out, s).unwrap();
}

/// A result without the header fields that differ between any two runs.
fn result_of(out: &Path) -> Vec<u8> {
    let text = gunzip(out);
    let end = text.iter().position(|&b| b == b'\n').unwrap();
    let mut head: serde_json::Map<String, Value> = serde_json::from_slice(&text[..end]).unwrap();
    head.remove("Session");
    head.remove("Time");
    let mut v = serde_json::to_vec(&head).unwrap();
    v.extend_from_slice(&text[end..]);
    v
}

/// The manifest's counts but `diffs_capped` (a partial counts capped versions, not
/// commits), and its other namespaces.
fn counts_of(man: &Path) -> Value {
    let mut m = manifest(man);
    let mut t = m["totals"].take();
    t.as_object_mut().unwrap().remove("diffs_capped");
    serde_json::json!({"totals": t, "other_namespaces": m["other_namespaces"].take()})
}

/// A generated corpus, an input of its own (names tied on a line, a bad row), its raw
/// rows, and the job's flags.
struct Setup {
    job: covmerge_integration_tests::CorpusJob,
    rows: Vec<Raw>,
    prefix: String,
}

fn setup(seed: u64) -> Setup {
    let job = FleetCorpus::local(seed)
        .files(10)
        .lines(60)
        .commits(4)
        .build();
    let c = &job.corpus;
    // In scope: the deleted file's top directory (another one is outside).
    let deleted = c.deleted_file.clone().unwrap();
    let prefix = format!("{}/", deleted.split('/').next().unwrap());
    let mut rows = raw_rows(&c.inputs);
    // Names tied on a line of a live file in scope, over several managers; and a bad
    // row.
    let base = &c.base_commit;
    let live = rows
        .iter()
        .flatten()
        .map(|r| r.0.clone())
        .find(|p| p.starts_with(&prefix) && blob_id(&c.sources, base, p).is_some())
        .unwrap();
    let mut extra = format!("{HDR}\n");
    for _ in 0..20 {
        for (f, m) in [
            ("tie_b", "m-x"),
            ("tie_a", "m-y"),
            ("tie_b", "m-y"),
            ("tie_a", "m-x"),
        ] {
            extra += &format!("r,{base},{live},{f},{m},2,3\n");
        }
    }
    // A row without line, one past the file's end and one whose commit holds no file
    // (both lost), on the live file in scope: the prefix may leave few files.
    extra += &format!("r,{base},{live},tie_a,m-x,0,5\n");
    extra += &format!("r,{base},{live},tie_a,m-x,999999,4\n");
    extra += &format!("r,0123456789abcdef0123456789abcdef01234567,{live},tie_a,m-y,3,7\n");
    extra += "r,c,bad/row.c,f,m,1,lots\n";
    let extra_path = job.path("extra.csv");
    std::fs::write(&extra_path, extra).unwrap();
    rows.extend(raw_rows(&[extra_path]));
    Setup { job, rows, prefix }
}

impl Setup {
    /// Merges `inputs` with the job's flags; returns the result and the manifest.
    fn merge(&self, name: &str, inputs: &[String], extra: &[&str]) -> (Vec<u8>, Value) {
        let out = self.job.path(&format!("{name}.jsonl.gz"));
        let man = self.job.path(&format!("{name}.manifest.json"));
        let mut a = self.job.job_args_with(&self.job.source, inputs);
        a.extend_from_slice(&[
            "--file-path-prefix",
            &self.prefix,
            "--max-bad-rows",
            "10",
            "--out",
            out.to_str().unwrap(),
            "--manifest",
            man.to_str().unwrap(),
        ]);
        a.extend_from_slice(extra);
        merge_ok(&a);
        (result_of(&out), counts_of(&man))
    }

    fn raw_inputs(&self) -> Vec<String> {
        let mut v = self.job.inputs.clone();
        v.push(self.job.path("extra.csv").display().to_string());
        v
    }
}

#[test]
fn a_merge_of_partials_is_the_merge_of_their_raw_rows() {
    let s = setup(53);
    let (want, want_counts) = s.merge("raw", &s.raw_inputs(), &[]);
    let t = &want_counts["totals"];
    for k in [
        "rows_deleted",
        "rows_outside_prefix",
        "rows_lost",
        "rows_without_line",
        "rows_bad",
    ] {
        assert!(t[k].as_u64().unwrap() > 0, "the corpus has no {k}: {t}");
    }
    let all: Vec<&Raw> = s.rows.iter().collect();
    let sources = &s.job.corpus.sources;
    // 6 is the job's shard count: that partial has no split, each merge task reads
    // its shard of it (its bad rows and counts from the description).
    for shards in [1u32, 3, 6] {
        let dir = s.job.path(&format!("partial-{shards}"));
        build(&all, sources, shards, "", &dir);
        let inputs = [dir.display().to_string()];
        let (got, counts) = s.merge(&format!("p{shards}"), &inputs, &[]);
        assert!(got == want, "{shards} shards: the results differ");
        assert_eq!(counts, want_counts, "{shards} shards");
        // Said, not found.
        let name = format!("forced{shards}");
        let (got, counts) = s.merge(&name, &inputs, &["--input-format", "partial"]);
        assert!(got == want && counts == want_counts);
    }
    assert!(String::from_utf8_lossy(&want).contains("tie_a"));
}

/// Random groupings of the rows into 1 to 5 partials of random shard counts, some
/// rolled up first, the rest of the rows as CSV: always the raw merge.
#[test]
fn any_grouping_of_rows_into_partials_and_csv_merges_the_same() {
    let s = setup(59);
    let (want, want_counts) = s.merge("raw", &s.raw_inputs(), &[]);
    let sources = &s.job.corpus.sources;
    let mut x = 0x5eed_u64;
    let mut next = |n: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    for round in 0..4 {
        let groups = 1 + next(5) as usize;
        // Group `groups` is CSV.
        let mut parts: Vec<Vec<&Raw>> = vec![Vec::new(); groups + 1];
        for r in &s.rows {
            parts[next(groups as u64 + 1) as usize].push(r);
        }
        let mut inputs = Vec::new();
        let mut to_roll = Vec::new();
        for (g, rows) in parts[..groups].iter().enumerate() {
            let dir = s.job.path(&format!("r{round}-p{g}"));
            build(rows, sources, 1 + next(4) as u32, "", &dir);
            if next(2) == 0 {
                to_roll.push(dir);
            } else {
                inputs.push(dir.display().to_string());
            }
        }
        if !to_roll.is_empty() {
            let dir = s.job.path(&format!("r{round}-rolled"));
            let shards = Some(1 + next(4) as u32);
            covmerge_partial::rollup(&to_roll, &dir, shards).unwrap();
            inputs.push(dir.display().to_string());
        }
        let csv = s.job.path(&format!("r{round}.csv"));
        write_csv(&parts[groups], &csv);
        inputs.push(csv.display().to_string());
        let (got, counts) = s.merge(&format!("r{round}"), &inputs, &[]);
        assert!(got == want, "round {round}: the results differ");
        assert_eq!(counts, want_counts, "round {round}");
    }
}

#[test]
fn partials_refused_are_named() {
    let s = setup(61);
    let all: Vec<&Raw> = s.rows.iter().collect();
    let sources = &s.job.corpus.sources;
    let fail = |inputs: &[&str], extra: &[&str]| -> String {
        let out = s.job.path("refused.jsonl.gz");
        let inputs: Vec<String> = inputs.iter().map(|i| i.to_string()).collect();
        let mut a = vec!["merge", "--quiet"];
        a.extend(s.job.job_args_with(&s.job.source, &inputs));
        a.extend_from_slice(&["--out", out.to_str().unwrap()]);
        a.extend_from_slice(extra);
        let o = covmerge(&a);
        assert!(!o.status.success(), "{a:?} succeeded");
        assert!(!out.exists(), "a result was published");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    // A corrupt shard file: named.
    let bad = s.job.path("corrupt");
    build(&all, sources, 2, "", &bad);
    let file = bad.join("lines-00001.parquet");
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&file, bytes).unwrap();
    let e = fail(&[bad.to_str().unwrap()], &[]);
    assert!(e.contains("lines-00001.parquet"), "{e}");
    // Another namespace than the job's, and a namespace without --namespace.
    let ns = s.job.path("ns-a");
    build(&all, sources, 1, "ns-a", &ns);
    let e = fail(&[ns.to_str().unwrap()], &["--namespace", "ns-b"]);
    assert!(
        e.contains(ns.to_str().unwrap()) && e.contains("\"ns-a\"") && e.contains("\"ns-b\""),
        "{e}"
    );
    let e = fail(&[ns.to_str().unwrap()], &[]);
    assert!(
        e.contains(ns.to_str().unwrap()) && e.contains("--namespace \"ns-a\""),
        "{e}"
    );
    // Of the job's namespace: merged.
    let out = s.job.path("ns-a.jsonl.gz");
    let inputs = [ns.display().to_string()];
    let mut a = s.job.job_args_with(&s.job.source, &inputs);
    a.extend_from_slice(&["--namespace", "ns-a", "--max-bad-rows", "10"]);
    a.extend_from_slice(&["--out", out.to_str().unwrap()]);
    merge_ok(&a);
    // `--input-format partial` on what is no partial.
    let csv = &s.job.inputs[0];
    let e = fail(&[csv], &["--input-format", "partial"]);
    assert!(e.contains(csv.as_str()) && e.contains("partial"), "{e}");
    let plain = s.job.path("plain");
    std::fs::create_dir(&plain).unwrap();
    let e = fail(&[plain.to_str().unwrap()], &["--input-format", "partial"]);
    assert!(
        e.contains(plain.to_str().unwrap()) && e.contains("no partial.json"),
        "{e}"
    );
}

/// A live file in scope and one of its lines at the base, with its base commit.
fn live_line(s: &Setup) -> (String, String) {
    let c = &s.job.corpus;
    let live = s
        .rows
        .iter()
        .flatten()
        .map(|r| r.0.clone())
        .find(|p| p.starts_with(&s.prefix) && blob_id(&c.sources, &c.base_commit, p).is_some())
        .unwrap();
    (live, c.base_commit.clone())
}

/// A partial's summed `rows` near 2^64 (a hand-made or a very long roll-up) added to
/// raw rows of the same line: the manifest's counts saturate (contract §10), they
/// never wrap to a small number, nor does the merge crash.
#[test]
fn a_partials_rows_near_u64_max_saturate_the_counts_not_wrap() {
    let s = setup(53);
    let (live, base) = live_line(&s);
    let sources = &s.job.corpus.sources;
    let dir = s.job.path("huge-rows");
    let scratch = tempfile::tempdir().unwrap();
    let day = "2024-04-08".parse().unwrap();
    let mut b = Builder::new("", day, day, 2, 64 << 10, scratch.path()).unwrap();
    let version = blob_id(sources, &base, &live).unwrap();
    b.add(&RawRow {
        path: &live,
        commit: &base,
        version: Some(&version),
        manager: "m-huge",
        func_name: "",
        line: 1,
        hits: 1,
        rows: u64::MAX - 1,
    })
    .unwrap();
    b.finish(&dir).unwrap();
    let mut inputs = s.raw_inputs();
    inputs.push(dir.display().to_string());
    let (_, counts) = s.merge("huge-rows", &inputs, &[]);
    let t = &counts["totals"];
    assert_eq!(t["rows_merged"].as_u64(), Some(u64::MAX), "{t}");
    // `rows_in` leaves out the rows outside the prefix (contract §10).
    let outside = t["rows_outside_prefix"].as_u64().unwrap();
    assert!(outside > 0, "{t}");
    assert_eq!(t["rows_in"].as_u64(), Some(u64::MAX - outside), "{t}");
}

/// Hits of a partial that pass Go's `int64` on a line that lands fail the job naming
/// the file and line, as raw rows' do (contract §6); nothing is published.
#[test]
fn a_partials_hits_past_int64_fail_the_job_naming_the_line() {
    let s = setup(59);
    let (live, base) = live_line(&s);
    let sources = &s.job.corpus.sources;
    let dir = s.job.path("huge-hits");
    let scratch = tempfile::tempdir().unwrap();
    let day = "2024-04-08".parse().unwrap();
    let mut b = Builder::new("", day, day, 1, 64 << 10, scratch.path()).unwrap();
    let version = blob_id(sources, &base, &live).unwrap();
    b.add(&RawRow {
        path: &live,
        commit: &base,
        version: Some(&version),
        manager: "m-huge",
        func_name: "",
        line: 1,
        hits: u64::MAX,
        rows: 1,
    })
    .unwrap();
    b.finish(&dir).unwrap();
    let out = s.job.path("huge-hits.jsonl.gz");
    let inputs = vec![dir.display().to_string()];
    let mut a = vec!["merge", "--quiet"];
    a.extend(s.job.job_args_with(&s.job.source, &inputs));
    a.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let o = covmerge(&a);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a line past int64 was merged");
    assert!(!out.exists(), "a result was published");
    assert!(e.contains(&live), "{e}");
}

/// Builds a partial of one row of `live` at `base`, on `line`, naming `func`.
fn one_row(s: &Setup, dir: &Path, (live, base): (&str, &str), line: u32, func: &str) {
    let raw: Raw = Some((
        live.into(),
        base.into(),
        func.into(),
        "m-one".into(),
        line,
        3,
    ));
    build(&[&raw], &s.job.corpus.sources, 1, "", dir);
}

/// A hand-edited partial whose `funcs` names a function on a line of a version that
/// has no `lines` row (its file and description otherwise whole): refused naming the
/// file and the line, not merged into a line of its own (which the publish gate then
/// refused without naming the input).
#[test]
fn a_partials_vote_on_a_line_without_a_lines_row_is_refused_naming_the_file() {
    let s = setup(61);
    let (live, base) = live_line(&s);
    let at = (live.as_str(), base.as_str());
    let plain = s.job.path("vote-plain");
    one_row(&s, &plain, at, 1, "");
    let voted = s.job.path("vote-other-line");
    one_row(&s, &voted, at, 2, "lonely_vote");
    // `plain`'s files with `voted`'s funcs (a row on line 2, where `plain` has none).
    let lied = s.job.path("vote-lied");
    std::fs::create_dir(&lied).unwrap();
    for f in std::fs::read_dir(&plain).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, lied.join(f.file_name().unwrap())).unwrap();
    }
    std::fs::copy(
        voted.join("funcs-00000.parquet"),
        lied.join("funcs-00000.parquet"),
    )
    .unwrap();
    let desc = |d: &Path| -> Value {
        serde_json::from_slice(&std::fs::read(d.join("partial.json")).unwrap()).unwrap()
    };
    let mut d = desc(&plain);
    d["shards"][0]["funcs"] = desc(&voted)["shards"][0]["funcs"].clone();
    std::fs::write(lied.join("partial.json"), serde_json::to_vec(&d).unwrap()).unwrap();
    // The partial it was edited from merges.
    s.merge("vote-plain", &[plain.display().to_string()], &[]);
    let out = s.job.path("vote-lied.jsonl.gz");
    let inputs = vec![lied.display().to_string()];
    let mut a = vec!["merge", "--quiet"];
    a.extend(s.job.job_args_with(&s.job.source, &inputs));
    a.extend_from_slice(&[
        "--file-path-prefix",
        &s.prefix,
        "--out",
        out.to_str().unwrap(),
    ]);
    let o = covmerge(&a);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "merged");
    assert!(!out.exists(), "a result was published");
    let file = lied.join("funcs-00000.parquet");
    assert!(e.contains(file.to_str().unwrap()), "{e}");
    assert!(e.contains("lonely_vote") && e.contains("line 2"), "{e}");
}

/// A function name longer than a raw row may be (1 MiB, contract §6) in a partial: no
/// raw rows hold it, and the partial is refused naming its `funcs` file.
#[test]
fn a_partials_function_name_past_the_row_cap_is_refused_naming_the_file() {
    let s = setup(53);
    let (live, base) = live_line(&s);
    let dir = s.job.path("big-func");
    let name = "f".repeat((1 << 20) + 1);
    one_row(&s, &dir, (&live, &base), 1, &name);
    let out = s.job.path("big-func.jsonl.gz");
    let inputs = vec![dir.display().to_string()];
    let mut a = vec!["merge", "--quiet"];
    a.extend(s.job.job_args_with(&s.job.source, &inputs));
    a.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let o = covmerge(&a);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "merged");
    assert!(!out.exists(), "a result was published");
    let file = dir.join("funcs-00000.parquet");
    assert!(
        e.contains(file.to_str().unwrap()) && e.contains("1048577 bytes"),
        "{e}"
    );
}

/// Many partials on a store (`file://` prefixes), read directly by the merge tasks,
/// which fetch several partials' shard files at once: the raw merge; and one shard
/// file of a partial past the first ones fetched corrupted (same size, a byte
/// flipped): the job is refused naming that object, and neither the result nor a
/// partial (`--partial-out`) is published.
#[test]
fn a_corrupt_shard_file_among_many_store_partials_fetched_at_once_is_named_and_nothing_published() {
    let s = setup(67);
    let (want, want_counts) = s.merge("raw", &s.raw_inputs(), &[]);
    let args = s.job.job_args_with(&s.job.source, &[]);
    let at = args.iter().position(|a| *a == "--shards").unwrap();
    let shards: u32 = args[at + 1].parse().unwrap();
    let sources = &s.job.corpus.sources;
    // 14 partials of the job's shard count (no split task reads them), a row in turn.
    let n = 14;
    let mut parts: Vec<Vec<&Raw>> = vec![Vec::new(); n];
    for (i, r) in s.rows.iter().enumerate() {
        parts[i % n].push(r);
    }
    let mut inputs = Vec::new();
    for (i, rows) in parts.iter().enumerate() {
        let dir = s.job.path(&format!("store/p{i:02}"));
        build(rows, sources, shards, "", &dir);
        inputs.push(format!("file://{}/", dir.display()));
    }
    let (got, counts) = s.merge("many", &inputs, &[]);
    assert!(got == want, "the merge of {n} store partials differs");
    assert_eq!(counts, want_counts);

    // Partial 11's largest shard file (beyond the first 8 fetched), a byte flipped.
    let dir = s.job.path("store/p11");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&file, &bytes).unwrap();
    let out = s.job.path("corrupt.jsonl.gz");
    let partial_out = s.job.path("corrupt-partial");
    let mut a = vec!["merge", "--quiet"];
    a.extend(s.job.job_args_with(&s.job.source, &inputs));
    a.extend_from_slice(&["--file-path-prefix", &s.prefix, "--max-bad-rows", "10"]);
    a.extend_from_slice(&["--out", out.to_str().unwrap()]);
    a.extend_from_slice(&["--partial-out", partial_out.to_str().unwrap()]);
    let o = covmerge(&a);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a corrupt shard file was merged: {e}");
    let name = file.file_name().unwrap().to_str().unwrap();
    let object = format!("file://{}/{name}", dir.display());
    assert!(e.contains(&format!("{object}: SHA-256")), "{e}");
    assert!(!out.exists(), "a result was published");
    assert!(
        !partial_out.join("partial.json").exists(),
        "a partial was published"
    );
}
