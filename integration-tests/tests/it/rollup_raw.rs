//! `covmerge rollup` of raw rows (contract §10): raw rows given to a roll-up are made
//! the partial `merge --partial-out` writes for them, byte for byte, and summed with
//! the partial inputs; with `{namespace}` in `--partial-out`, a shared-table export is
//! read once into one partial per namespace, each the partial of that namespace's
//! rows alone. What is refused.

use std::path::{Path, PathBuf};

use covmerge_integration_tests::{
    covmerge, gunzip, gunzip_bytes, merge_ok, CorpusJob, FleetCorpus,
};
use covmerge_partial::{Description, Partial};
use serde_json::Value;

const DATE: &str = "2024-04-08";

/// A corpus of three parts, edge cases included (rows without line, past the end,
/// of a commit that exists nowhere, of a deleted file, a repeated header).
fn corpus(seed: u64) -> CorpusJob {
    FleetCorpus::local(seed)
        .files(12)
        .lines(80)
        .commits(4)
        .managers(5)
        .parts(3)
        .build()
}

/// The shard files of a partial directory, by name, with their bytes (some).
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let v = covmerge_integration_tests::partial_files(dir);
    assert!(!v.is_empty(), "{}: no shard files", dir.display());
    v
}

fn desc(dir: &Path) -> Description {
    Partial::open(dir).unwrap().description().clone()
}

fn ok(args: &[&str]) {
    let o = covmerge(args);
    assert!(
        o.status.success(),
        "covmerge {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Runs `covmerge args` expecting a failure; returns its standard error.
fn refused(args: &[&str]) -> String {
    let o = covmerge(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "covmerge {} succeeded", args.join(" "));
    err
}

/// A job's arguments on `inputs` at `shards` shards.
fn job<'a>(c: &'a CorpusJob, inputs: &'a [String], shards: &'a str) -> Vec<&'a str> {
    let mut a = c.job_args_with(&c.source, inputs);
    let at = a.iter().position(|x| *x == "--shards").unwrap();
    a[at + 1] = shards;
    a
}

/// `merge` of `c`'s corpus on `inputs` at `shards` with `--partial-out dir` and
/// `extra` flags; returns the result's path.
fn merge_partial(
    c: &CorpusJob,
    inputs: &[String],
    shards: &str,
    dir: &Path,
    extra: &[&str],
) -> PathBuf {
    let out = c.path(&format!(
        "{}.jsonl.gz",
        dir.file_name().unwrap().to_string_lossy()
    ));
    let mut a = job(c, inputs, shards);
    a.extend_from_slice(&["--out", out.to_str().unwrap()]);
    a.extend_from_slice(&["--partial-out", dir.to_str().unwrap()]);
    a.extend_from_slice(extra);
    merge_ok(&a);
    out
}

/// `rollup --input inputs --partial-out out` with `extra` flags.
fn rollup(inputs: &[&str], out: &str, extra: &[&str]) {
    let mut a = vec!["rollup", "--partial-out", out];
    a.extend_from_slice(extra);
    a.push("--input");
    a.extend_from_slice(inputs);
    ok(&a);
}

#[test]
fn rollup_of_raw_rows_is_the_partial_merge_writes_at_1_and_3_shards() {
    let c = corpus(71);
    let inputs: Vec<&str> = c.inputs.iter().map(String::as_str).collect();
    for shards in ["1", "3"] {
        let want = c.path(&format!("merged-{shards}"));
        merge_partial(&c, &c.inputs, shards, &want, &[]);
        let got = c.path(&format!("rolled-{shards}"));
        let flags = ["--source", &c.source, "--shards", shards, "--date-to", DATE];
        rollup(&inputs, got.to_str().unwrap(), &flags);
        assert_eq!(desc(&got), desc(&want), "{shards} shards");
        assert_eq!(files(&got), files(&want), "{shards} shards");
        let d = desc(&got);
        assert!(d.counts.rows_without_line > 0 && d.counts.rows_without_version > 0);
    }
}

#[test]
fn raw_rows_and_partials_roll_up_together_as_all_rows_at_once() {
    let c = corpus(73);
    // Part 0 as a partial of its own, parts 1 and 2 raw.
    let day = c.path("day-0");
    merge_partial(&c, &c.inputs[..1], "2", &day, &[]);
    let all = c.path("all");
    merge_partial(&c, &c.inputs, "3", &all, &[]);
    let got = c.path("mixed");
    let inputs = [day.to_str().unwrap(), &c.inputs[1], &c.inputs[2]];
    let flags = ["--source", &c.source, "--shards", "3", "--date-to", DATE];
    rollup(&inputs, got.to_str().unwrap(), &flags);
    assert_eq!(files(&got), files(&all));
    assert_eq!(desc(&got), desc(&all));
}

#[test]
fn raw_rows_within_the_smallest_memory_budget_give_the_same_partial() {
    let c = corpus(79);
    let inputs: Vec<&str> = c.inputs.iter().map(String::as_str).collect();
    let want = c.path("want");
    let flags = ["--source", &c.source, "--shards", "2", "--date-to", DATE];
    rollup(&inputs, want.to_str().unwrap(), &flags);
    let got = c.path("small");
    let mut small = flags.to_vec();
    small.extend_from_slice(&["--memory-budget", "16MiB"]);
    rollup(&inputs, got.to_str().unwrap(), &small);
    assert_eq!(files(&got), files(&want));
    assert_eq!(desc(&got), desc(&want));
}

/// The text of a CSV(.gz) input.
fn text_of(input: &str) -> String {
    let raw = std::fs::read(input).unwrap();
    let raw = if raw.starts_with(&[0x1f, 0x8b]) {
        gunzip_bytes(&raw)
    } else {
        raw
    };
    String::from_utf8(raw).unwrap()
}

/// One shared-table export of the corpus' parts: part `i`'s rows of namespace
/// `namespaces[i]`, interleaved, a `namespace` column first; plus a bad row that names
/// no namespace (a wrong field count) and one of `namespaces[0]` (hits not a number).
fn shared_table(c: &CorpusJob, namespaces: &[&str]) -> PathBuf {
    let mut header = String::new();
    let mut parts: Vec<Vec<String>> = Vec::new();
    for (input, ns) in c.inputs.iter().zip(namespaces) {
        let text = text_of(input);
        let mut lines = text.lines();
        let h = lines.next().unwrap().to_owned();
        assert!(!h.contains('"') && !text.contains('"'), "quoted CSV");
        header = format!("namespace,{h}");
        parts.push(
            lines
                .map(|l| {
                    if l == h {
                        header.clone() // the repeated header
                    } else {
                        format!("{ns},{l}")
                    }
                })
                .collect(),
        );
    }
    let mut out = format!("{header}\n");
    let longest = parts.iter().map(Vec::len).max().unwrap();
    for i in 0..longest {
        for p in &parts {
            if let Some(l) = p.get(i) {
                out += l;
                out += "\n";
            }
        }
        if i == 7 {
            out += "too,few,fields\n";
            let cols = header.split(',').count();
            let mut bad = vec!["x"; cols];
            bad[0] = namespaces[0];
            out += &bad.join(",");
            out += "\n";
        }
    }
    let path = c.path("shared.csv");
    std::fs::write(&path, out).unwrap();
    path
}

/// `shared_table`'s export without its bad rows, cut in two: `first.csv` the rows of
/// namespace `upstream`, `rest.csv` the others' (each with the header).
fn upstream_apart(c: &CorpusJob, namespaces: &[&str]) -> (PathBuf, PathBuf) {
    let shared = std::fs::read_to_string(shared_table(c, namespaces)).unwrap();
    let mut lines = shared.lines();
    let header = lines.next().unwrap();
    let (mut first, mut rest) = (format!("{header}\n"), format!("{header}\n"));
    for l in lines.filter(|l| *l != header && l.split(',').count() > 3) {
        let to = if l.starts_with("upstream,") {
            &mut first
        } else {
            &mut rest
        };
        *to += l;
        *to += "\n";
    }
    let (first_p, rest_p) = (c.path("first.csv"), c.path("rest.csv"));
    std::fs::write(&first_p, first).unwrap();
    std::fs::write(&rest_p, rest).unwrap();
    (first_p, rest_p)
}

/// The flags of a roll-up of `shared_table`'s export: the corpus' source, 3 shards,
/// day `DATE`, its two bad rows allowed.
fn shared_flags(c: &CorpusJob) -> [&str; 8] {
    [
        "--source",
        &c.source,
        "--shards",
        "3",
        "--date-to",
        DATE,
        "--max-bad-rows",
        "2",
    ]
}

/// A result without the header fields that differ between any two runs.
fn result_of(out: &Path) -> Value {
    let text = gunzip(out);
    let end = text.iter().position(|&b| b == b'\n').unwrap();
    let mut head: serde_json::Map<String, Value> = serde_json::from_slice(&text[..end]).unwrap();
    head.remove("Session");
    head.remove("Time");
    head.remove("TotalRows");
    Value::Array(vec![
        Value::Object(head),
        Value::String(String::from_utf8(text[end..].to_vec()).unwrap()),
    ])
}

#[test]
fn a_shared_table_with_three_namespaces_read_once_gives_each_namespace_its_own_result() {
    let c = corpus(83);
    let namespaces = ["upstream", "android-6.1", "linux_next"];
    let shared = shared_table(&c, &namespaces);
    let shared_s = shared.to_str().unwrap().to_owned();
    let template = format!("{}/partials/{{namespace}}/2024-04-08/", c.dir().display());
    let flags = shared_flags(&c);
    rollup(&[&shared_s], &template, &flags);
    let written: Vec<String> = {
        let mut v: Vec<String> = std::fs::read_dir(c.path("partials"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let mut want_names: Vec<String> = namespaces.iter().map(|s| s.to_string()).collect();
    want_names.sort();
    assert_eq!(written, want_names);
    for ns in namespaces {
        let part = template.replace("{namespace}", ns);
        let part = Path::new(&part);
        // The partial of this namespace's rows alone, made by a merge of them.
        let alone = c.path(&format!("alone-{ns}"));
        let raw_out = merge_partial(
            &c,
            std::slice::from_ref(&shared_s),
            "3",
            &alone,
            &["--namespace", ns, "--max-bad-rows", "2"],
        );
        assert_eq!(desc(part), desc(&alone), "{ns}");
        assert_eq!(files(part), files(&alone), "{ns}");
        // And the one a roll-up of that namespace alone writes.
        let one = c.path(&format!("one-{ns}"));
        let mut f = flags.to_vec();
        f.extend_from_slice(&["--namespace", ns]);
        rollup(&[&shared_s], one.to_str().unwrap(), &f);
        assert_eq!(files(part), files(&one), "{ns}");
        assert_eq!(desc(part), desc(&one), "{ns}");
        // A merge of the namespace's partial is the merge of its rows.
        let from_partial = c.path(&format!("from-partial-{ns}.jsonl.gz"));
        let part_s = part.to_str().unwrap().to_owned();
        let mut a = job(&c, std::slice::from_ref(&part_s), "3");
        a.extend_from_slice(&["--namespace", ns, "--max-bad-rows", "2"]);
        a.extend_from_slice(&["--out", from_partial.to_str().unwrap()]);
        merge_ok(&a);
        assert_eq!(result_of(&from_partial), result_of(&raw_out), "{ns}");
        let d = desc(part);
        assert_eq!(d.namespace, ns);
        // Both bad rows of namespaces[0], only the one that names none elsewhere.
        let bad = if ns == namespaces[0] { 2 } else { 1 };
        assert_eq!(d.counts.rows_bad, bad, "{ns}");
        assert_eq!(d.other_namespaces.listed.len(), 2, "{ns}");
    }
}

/// One namespace's rows rolled up first, then rolled up with `{namespace}` beside the
/// raw rows of the two others. A partial of another namespace stands for its own rows
/// only (the other namespaces its read saw are in its description): it is not counted
/// in the others' partials, which list the other namespaces of the raw rows read here.
/// Every file is the one the same rows all raw give; the descriptions differ only in
/// the pre-rolled namespace's rows missing from the others' lists.
#[test]
fn a_partial_rolled_up_beside_a_shared_tables_rows_counts_only_in_its_own_namespace() {
    let c = corpus(89);
    let namespaces = ["upstream", "android-6.1", "linux_next"];
    let (first_p, rest_p) = upstream_apart(&c, &namespaces);
    let (first_s, rest_s) = (first_p.to_str().unwrap(), rest_p.to_str().unwrap());
    let flags = shared_flags(&c);
    let pre = c.path("pre-upstream");
    let mut f = flags.to_vec();
    f.extend_from_slice(&["--namespace", "upstream"]);
    rollup(&[first_s], pre.to_str().unwrap(), &f);
    let dir = c.dir().display().to_string();
    let (mixed, raw) = (
        format!("{dir}/mixed/{{namespace}}"),
        format!("{dir}/raw/{{namespace}}"),
    );
    rollup(&[pre.to_str().unwrap(), rest_s], &mixed, &flags);
    rollup(&[first_s, rest_s], &raw, &flags);
    for ns in namespaces {
        let (m, r) = (
            mixed.replace("{namespace}", ns),
            raw.replace("{namespace}", ns),
        );
        let (m, r) = (Path::new(&m), Path::new(&r));
        assert_eq!(files(m), files(r), "{ns}");
        let (dm, mut dr) = (desc(m), desc(r));
        if ns == "upstream" {
            assert_eq!(dm, dr, "{ns}");
            continue;
        }
        assert!(!dm.other_namespaces.listed.contains_key("upstream"), "{ns}");
        let upstream = dr.other_namespaces.listed.remove("upstream").unwrap();
        assert!(upstream > 0, "{ns}");
        dr.counts.rows_other_namespaces -= upstream;
        assert_eq!(dm, dr, "{ns}");
    }
}

/// The day's partials of every namespace, made by one read of the shared table, then
/// rolled up with `{namespace}` (a month of one day): each namespace's partial counted
/// every other namespace's partial as rows of another namespace, on top of the rows its
/// own read had counted (`rows_other_namespaces` doubled). Each is now the day's own.
#[test]
fn a_rollup_by_namespace_of_one_reads_partials_counted_the_other_namespaces_twice() {
    let c = corpus(91);
    let namespaces = ["upstream", "android-6.1", "linux_next"];
    let shared = shared_table(&c, &namespaces);
    let dir = c.dir().display().to_string();
    let (day, month) = (
        format!("{dir}/day/{{namespace}}"),
        format!("{dir}/month/{{namespace}}"),
    );
    let flags = shared_flags(&c);
    rollup(&[shared.to_str().unwrap()], &day, &flags);
    let days: Vec<String> = namespaces
        .iter()
        .map(|ns| day.replace("{namespace}", ns))
        .collect();
    let days: Vec<&str> = days.iter().map(String::as_str).collect();
    // The bad row that names no namespace is in each day's partial: counted once, as
    // a roll-up of each namespace alone counts it (upstream's two are the most).
    let over = format!("{dir}/over/{{namespace}}");
    let mut a = vec![
        "rollup",
        "--partial-out",
        &over,
        "--max-bad-rows",
        "1",
        "--input",
    ];
    a.extend_from_slice(&days);
    let err = refused(&a);
    assert!(err.contains("namespace \"upstream\""), "{err}");
    rollup(&days, &month, &["--max-bad-rows", "2"]);
    for ns in namespaces {
        let (d, m) = (
            day.replace("{namespace}", ns),
            month.replace("{namespace}", ns),
        );
        let (d, m) = (Path::new(&d), Path::new(&m));
        assert_eq!(files(m), files(d), "{ns}");
        assert_eq!(desc(m), desc(d), "{ns}");
        assert_eq!(desc(m).other_namespaces.listed.len(), 2, "{ns}");
    }
}

/// `rollup --namespace A` of a partial of A beside raw rows that hold only other
/// namespaces was refused ("no raw row is of --namespace"), where `{namespace}` and
/// `merge --namespace A --partial-out` write the partial of the same inputs. It is now
/// written, and is theirs.
#[test]
fn rollup_of_a_namespaces_partial_beside_raw_rows_of_others_only_was_refused() {
    let c = corpus(93);
    let namespaces = ["upstream", "android-6.1", "linux_next"];
    let (first_p, rest_p) = upstream_apart(&c, &namespaces);
    let (first_s, rest_s) = (first_p.to_str().unwrap(), rest_p.to_str().unwrap());
    let mut f = shared_flags(&c).to_vec();
    f.extend_from_slice(&["--namespace", "upstream"]);
    let pre = c.path("pre-upstream");
    rollup(&[first_s], pre.to_str().unwrap(), &f);
    let pre_s = pre.to_str().unwrap();
    let one = c.path("one");
    rollup(&[pre_s, rest_s], one.to_str().unwrap(), &f);
    let routed = format!("{}/routed/{{namespace}}", c.dir().display());
    rollup(&[pre_s, rest_s], &routed, &shared_flags(&c));
    let routed = routed.replace("{namespace}", "upstream");
    assert_eq!(files(&one), files(Path::new(&routed)));
    assert_eq!(desc(&one), desc(Path::new(&routed)));
    assert_eq!(desc(&one).other_namespaces.listed.len(), 2);
    // Raw rows alone, all of other namespaces: still a misspelt --namespace.
    let mut a = vec!["rollup", "--partial-out"];
    let lone = c.path("lone");
    a.push(lone.to_str().unwrap());
    a.extend_from_slice(&f);
    a.extend_from_slice(&["--input", rest_s]);
    let err = refused(&a);
    assert!(err.contains("no raw row is of --namespace"), "{err}");
}

#[test]
fn namespaces_that_cannot_name_a_directory_and_wrong_sources_are_refused() {
    let c = corpus(89);
    let dir = c.dir().display().to_string();
    let template = format!("{dir}/p/{{namespace}}/");
    let src = c.source.as_str();
    let base = ["--shards", "2", "--date-to", DATE, "--max-bad-rows", "2"];
    let run = |csv: &Path, extra: &[&str], out: &str| -> String {
        let mut a = vec!["rollup", "--partial-out", out];
        a.extend_from_slice(&base);
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--input", csv.to_str().unwrap()]);
        refused(&a)
    };
    for (bad_ns, why) in [
        ("", "empty"),
        ("..", ".."),
        ("a/b", "characters"),
        ("a b", "characters"),
        ("partial.json", "description"),
    ] {
        let csv = shared_table(&c, &["upstream", bad_ns, "android"]);
        let err = run(&csv, &["--source", src], &template);
        assert!(
            err.contains(&format!("{bad_ns:?}")) && err.contains(why),
            "{bad_ns:?}: {err}"
        );
        // The empty namespace's rows: no --namespace selects them (it advised one).
        assert_eq!(
            err.contains("no --namespace selects its rows"),
            bad_ns.is_empty(),
            "{bad_ns:?}: {err}"
        );
        assert!(
            !Path::new(&format!("{dir}/p")).exists(),
            "{bad_ns:?}: a partial was written"
        );
    }
    let csv = shared_table(&c, &["upstream", "android", "next"]);
    // A --namespace that cannot fill {namespace}: the local --partial-out is named as
    // given (it was `<unparseable URL>`).
    let err = run(&csv, &["--source", src, "--namespace", ".."], &template);
    assert!(err.contains(&template) && err.contains("\"..\""), "{err}");
    // Several namespaces, no {namespace} and no --namespace: refused, as merge does.
    let err = run(&csv, &["--source", src], &format!("{dir}/plain"));
    assert!(
        err.contains("--namespace") && err.contains("{namespace}"),
        "{err}"
    );
    // A source for a namespace no row has; two sources for one namespace.
    let err = run(
        &csv,
        &["--source", src, "--source", &format!("nope={src}")],
        &template,
    );
    assert!(err.contains("\"nope\"") && err.contains("no row"), "{err}");
    let err = run(
        &csv,
        &[
            "--source",
            &format!("next={src}"),
            "--source",
            &format!("next={src}"),
        ],
        &template,
    );
    assert!(err.contains("two sources"), "{err}");
    // A namespace without a source.
    let err = run(&csv, &["--source", &format!("next={src}")], &template);
    assert!(err.contains("no --source for them"), "{err}");
    // A misspelt placeholder.
    let err = run(
        &csv,
        &["--source", src],
        &format!("{dir}/p/{{namespaces}}/"),
    );
    assert!(err.contains("placeholder"), "{err}");
    assert!(!Path::new(&format!("{dir}/p")).exists());
    // `{namespace}` with --namespace: that namespace's partial, where it names.
    let mut a = vec!["rollup", "--partial-out", &template];
    a.extend_from_slice(&base);
    a.extend_from_slice(&["--source", src, "--namespace", "android", "--input"]);
    let csv_s = csv.to_str().unwrap();
    a.push(csv_s);
    ok(&a);
    assert_eq!(
        desc(Path::new(&format!("{dir}/p/android"))).namespace,
        "android"
    );
    assert_eq!(std::fs::read_dir(format!("{dir}/p")).unwrap().count(), 1);
}

#[test]
fn merge_partial_out_fills_namespace_with_its_namespace_and_refuses_it_without() {
    let c = corpus(97);
    let csv = shared_table(&c, &["upstream", "android", "next"]);
    let csv_s = csv.to_str().unwrap().to_owned();
    let template = format!("{}/m/{{namespace}}/day", c.dir().display());
    let out = c.path("m.jsonl.gz");
    let mut a = c.job_args_with(&c.source, std::slice::from_ref(&csv_s));
    a.extend_from_slice(&["--out", out.to_str().unwrap(), "--partial-out", &template]);
    a.extend_from_slice(&["--max-bad-rows", "2"]);
    let err = refused(&[&["merge"], &a[..]].concat());
    assert!(err.contains("{namespace} needs --namespace"), "{err}");
    assert!(!out.exists());
    a.extend_from_slice(&["--namespace", "android"]);
    merge_ok(&a);
    let d = desc(&c.path("m/android/day"));
    assert_eq!(d.namespace, "android");
}

/// A `dir:` source with `files` files of 50 lines at commit `c1`.
fn flat_source(dir: &Path, files: usize) -> String {
    let root = dir.join("src/c1");
    std::fs::create_dir_all(&root).unwrap();
    let text: String = (0..50).map(|i| format!("int x{i};\n")).collect();
    for f in 0..files {
        std::fs::write(root.join(format!("f{f}.c")), &text).unwrap();
    }
    format!("dir:{}", dir.join("src").display())
}

/// Runs `covmerge args` with its data segment limited to `limit` bytes.
fn limited(args: &[&str], limit: u64) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut c = std::process::Command::new(covmerge_integration_tests::bin());
    c.args(args).env("RUST_LOG", "warn");
    unsafe {
        c.pre_exec(move || {
            let r = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_DATA, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.output().unwrap()
}

#[test]
fn a_hundred_namespaces_of_many_versions_roll_up_within_the_memory_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let src = flat_source(tmp.path(), 400);
    let mut csv = String::from(
        "namespace,kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\n",
    );
    let mut per_ns = [0u64; 100];
    for i in 0..200_000usize {
        let ns = i * 7 % 100;
        per_ns[ns] += 1;
        csv += &format!(
            "ns{ns},r,c1,f{}.c,fn{},m{},{},{i}\n",
            i % 400,
            i % 9,
            i % 5,
            1 + i % 50
        );
    }
    let input = tmp.path().join("shared.csv");
    std::fs::write(&input, csv).unwrap();
    let out = format!("{}/p/{{namespace}}", tmp.path().display());
    let args = [
        "rollup",
        "--source",
        &src,
        "--shards",
        "16",
        "--date-to",
        DATE,
        "--memory-budget",
        "64MiB",
        "--partial-out",
        &out,
        "--input",
        input.to_str().unwrap(),
    ];
    let o = limited(&args, 256 << 20);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (ns, rows) in per_ns.iter().enumerate() {
        let d = desc(&tmp.path().join(format!("p/ns{ns}")));
        assert_eq!(d.counts.rows_in, *rows, "ns{ns}");
        assert_eq!(d.counts.rows_other_namespaces, 200_000 - rows, "ns{ns}");
    }
}

#[test]
fn one_namespace_past_the_most_one_read_routes_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let src = flat_source(tmp.path(), 1);
    let mut csv = String::from(
        "namespace,kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\n",
    );
    for i in 0..1025 {
        csv += &format!("ns{i},r,c1,f0.c,fn,m,1,1\n");
    }
    let input = tmp.path().join("shared.csv");
    std::fs::write(&input, csv).unwrap();
    let out = format!("{}/p/{{namespace}}", tmp.path().display());
    let err = refused(&[
        "rollup",
        "--source",
        &src,
        "--shards",
        "1",
        "--date-to",
        DATE,
        "--partial-out",
        &out,
        "--input",
        input.to_str().unwrap(),
    ]);
    assert!(
        err.contains("1024 namespaces")
            && err.contains("shared.csv:1026")
            && err.contains("\"ns1024\""),
        "{err}"
    );
    assert!(!tmp.path().join("p").exists());
}

/// A roll-up without `--source` given a local CSV or a misspelt partial directory
/// said `--input <unparseable URL>`: the input it could not take was not named (with
/// several days, which one was misspelt?).
#[test]
fn raw_rows_without_a_source_named_no_input() {
    let c = corpus(17);
    let dir = c.dir().to_str().unwrap().to_owned();
    let typo = format!("{dir}/days/typo-of-d1");
    for input in [c.inputs[0].as_str(), typo.as_str()] {
        let err = refused(&[
            "rollup",
            "--input",
            input,
            "--partial-out",
            &format!("{dir}/p"),
        ]);
        assert!(
            err.contains(&format!("--input {input}: raw rows")),
            "{input}: {err}"
        );
        assert!(!err.contains("unparseable"), "{err}");
    }
}

/// A `{namespace}` roll-up of a shared-table export and a partial of a namespace the
/// export does not hold wrote that namespace's partial as if the export had not been
/// read: no other namespace's rows, no bad row, the partial's own period, where each
/// namespace of the export counts the export's other rows (and the bad rows that name
/// no namespace) as a merge of its rows alone would. The namespace now gets the same
/// share of the read; its rows are the partial's.
#[test]
fn a_namespace_of_partials_alone_counted_none_of_the_raw_rows() {
    let c = corpus(89);
    let shared = shared_table(&c, &["upstream", "android-6.1"]);
    let shared_s = shared.to_str().unwrap().to_owned();
    // The third part as a partial of namespace linux_next, of another day.
    let day = c.path("linux_next-day");
    let mut a = job(&c, std::slice::from_ref(&c.inputs[2]), "3");
    let at = a.iter().position(|x| *x == "--date-to").unwrap();
    a[at + 1] = "2024-04-07";
    let day_out = c.path("linux_next-day.jsonl.gz");
    a.extend_from_slice(&["--out", day_out.to_str().unwrap()]);
    a.extend_from_slice(&["--partial-out", day.to_str().unwrap()]);
    a.extend_from_slice(&["--namespace", "linux_next"]);
    merge_ok(&a);
    let day_s = day.to_str().unwrap().to_owned();
    let template = format!("{}/partials/{{namespace}}/", c.dir().display());
    let flags = shared_flags(&c);
    rollup(&[&shared_s, &day_s], &template, &flags);
    let at = |ns: &str| desc(Path::new(&template.replace("{namespace}", ns)));
    let (got, up, android, alone) = (
        at("linux_next"),
        at("upstream"),
        at("android-6.1"),
        desc(&day),
    );
    // Every row of the export is another namespace's; the bad row naming none is its.
    let export_rows = up.counts.rows_in + android.counts.rows_in - 2;
    assert_eq!(got.counts.rows_other_namespaces, export_rows, "{got:?}");
    assert_eq!(got.other_namespaces.listed.len(), 2, "{got:?}");
    assert_eq!(got.counts.rows_bad, 1);
    assert_eq!(got.counts.rows_in, alone.counts.rows_in + 1);
    assert!(got.counts.namespace_column);
    assert_eq!(
        (got.date_from.as_str(), got.date_to.as_str()),
        ("2024-04-07", DATE)
    );
    // Its rows are the day partial's.
    let part = template.replace("{namespace}", "linux_next");
    assert_eq!(files(Path::new(&part)), files(&day));
}
