//! syzkaller's shared table (#7598): one export holding every namespace's rows, told
//! apart by a `namespace` column. A job merges the rows of its `--namespace` only and
//! counts the others (contract §2, §7).

use std::path::Path;

use covmerge_integration_tests::{covmerge, gunzip, manifest, merge_ok};
use serde_json::json;

const HDR: &str = "kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count";

/// A `dir:` source at commit `c1`: two files of ten lines.
fn source(d: &Path) -> String {
    let root = d.join("src/c1");
    std::fs::create_dir_all(&root).unwrap();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(root.join("a.c"), &text).unwrap();
    std::fs::write(root.join("b.c"), &text).unwrap();
    format!("dir:{}", d.join("src").display())
}

/// The rows of namespace `ns` (`namespace,` prefixed when `column`), distinct per
/// namespace so that a row merged into the wrong one shows.
fn rows(ns: &str, column: bool, n: usize) -> Vec<String> {
    let seed = ns.bytes().map(|b| b as usize).sum::<usize>();
    (0..n)
        .map(|i| {
            let file = if (i + seed) % 2 == 0 { "a.c" } else { "b.c" };
            let line = 1 + (i * 7 + seed) % 10;
            let row = format!(
                "r,c1,{file},fn{},mgr-{ns}-{},{line},{}",
                i % 3,
                i % 2,
                i + seed
            );
            if column {
                format!("{ns},{row}")
            } else {
                row
            }
        })
        .collect()
}

fn args<'a>(src: &'a str, out: &'a str, man: &'a str, inputs: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "--source",
        src,
        "--base-repo",
        "r",
        "--base-commit",
        "c1",
        "--date-to",
        "2024-04-08",
        "--shards",
        "3",
        "--out",
        out,
        "--manifest",
        man,
        "--input",
    ];
    a.extend_from_slice(inputs);
    a
}

/// A three-namespace export with the column first, rows of the namespaces
/// interleaved: the result for `upstream` was that of every row, exit 0.
#[test]
fn rows_of_other_namespaces_were_merged_into_this_one() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let src = source(d);
    let (up, android, next) = (
        rows("upstream", true, 30),
        rows("android", true, 20),
        rows("linux-next", true, 10),
    );
    let mut shared = format!("namespace,{HDR}\n");
    for i in 0..30 {
        for r in [up.get(i), android.get(i), next.get(i)]
            .into_iter()
            .flatten()
        {
            shared.push_str(r);
            shared.push('\n');
        }
    }
    std::fs::write(d.join("shared.csv"), &shared).unwrap();
    let alone = format!("{HDR}\n{}\n", rows("upstream", false, 30).join("\n"));
    std::fs::write(d.join("alone.csv"), &alone).unwrap();
    let p = |n: &str| d.join(n).display().to_string();
    let (out_shared, man_shared, out_alone, man_alone) = (
        p("shared.gz"),
        p("shared.json"),
        p("alone.gz"),
        p("alone.json"),
    );
    let mut a = args(&src, &out_shared, &man_shared, &[]);
    let shared_in = p("shared.csv");
    a.push(&shared_in);
    a.extend(["--namespace", "upstream"]);
    merge_ok(&a);
    let alone_in = p("alone.csv");
    let mut a = args(&src, &out_alone, &man_alone, &[&alone_in]);
    a.extend(["--namespace", "upstream"]);
    merge_ok(&a);
    // The same records, header (TotalRows: the rows of upstream) included, byte for byte.
    assert_eq!(
        String::from_utf8(gunzip(Path::new(&out_shared))).unwrap(),
        String::from_utf8(gunzip(Path::new(&out_alone))).unwrap()
    );
    let m = manifest(Path::new(&man_shared));
    let t = &m["totals"];
    assert_eq!(t["rows_in"], 30);
    assert_eq!(t["rows_other_namespaces"], 30);
    assert_eq!(
        t["rows_merged"].as_u64().unwrap() + t["rows_lost"].as_u64().unwrap(),
        30
    );
    assert_eq!(
        m["other_namespaces"],
        json!({"listed": {"android": 20, "linux-next": 10}, "unlisted_rows": 0})
    );
    let alone_totals = &manifest(Path::new(&man_alone))["totals"];
    assert_eq!(alone_totals["rows_in"], 30);
    assert_eq!(alone_totals["rows_other_namespaces"], 0);
}

/// The shared export and no `--namespace` (whose header value defaults to
/// `upstream`): every namespace was merged. Refused before its rows, naming the input
/// and the column; nothing is written.
#[test]
fn a_shared_export_without_namespace_was_merged_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let src = source(d);
    let input = d.join("shared.csv");
    // Rewrite each row with the namespace last, as the header says.
    let body: Vec<String> = [rows("upstream", true, 3), rows("android", true, 3)]
        .concat()
        .iter()
        .map(|r| {
            let (ns, rest) = r.split_once(',').unwrap();
            format!("{rest},{ns}")
        })
        .collect();
    std::fs::write(&input, format!("{HDR},namespace\n{}\n", body.join("\n"))).unwrap();
    let out = d.join("out.gz");
    let man = d.join("m.json");
    let (o, m, i) = (
        out.display().to_string(),
        man.display().to_string(),
        input.display().to_string(),
    );
    let mut full = vec!["merge", "--quiet"];
    full.extend(args(&src, &o, &m, &[&i]));
    let r = covmerge(&full);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "{err}");
    assert!(
        err.contains(&i) && err.contains("`namespace`") && err.contains("--namespace"),
        "{err}"
    );
    assert!(!out.exists());
    // With it, the column last works as first.
    full.extend(["--namespace", "android"]);
    let r = covmerge(&full);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let t = &manifest(&man)["totals"];
    assert_eq!(
        (t["rows_in"].as_u64(), t["rows_other_namespaces"].as_u64()),
        (Some(3), Some(3))
    );
}

/// `--namespace` naming no row of the export (a typo, another case, a space): an
/// empty result was published as complete. The job fails naming the namespaces seen
/// with their rows, and publishes nothing. Matching is exact: `Upstream`, ` upstream`
/// and the empty value are namespaces of their own.
#[test]
fn a_namespace_matching_no_row_published_an_empty_result() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let src = source(d);
    let input = d.join("shared.csv");
    let text = format!(
        "namespace,{HDR}\n{}\n{}\n{}\n\"\",r,c1,a.c,f,m,1,1\n",
        rows("Upstream", true, 2).join("\n"),
        rows(" upstream", true, 1)
            .join("\n")
            .replacen(" upstream", "\" upstream\"", 1),
        rows("android", true, 4).join("\n"),
    );
    std::fs::write(&input, text).unwrap();
    let (out, man) = (d.join("out.gz"), d.join("m.json"));
    let (o, m, i) = (
        out.display().to_string(),
        man.display().to_string(),
        input.display().to_string(),
    );
    let mut full = vec!["merge", "--quiet"];
    full.extend(args(&src, &o, &m, &[&i]));
    full.extend(["--namespace", "upstream"]);
    let r = covmerge(&full);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "{err}");
    assert!(
        err.contains("--namespace \"upstream\"")
            && err.contains("\"\" (1 row)")
            && err.contains("\" upstream\" (1 row)")
            && err.contains("\"Upstream\" (2 rows)")
            && err.contains("\"android\" (4 rows)"),
        "{err}"
    );
    assert!(!out.exists());
    // The empty namespace is one like any other.
    let n = full.len();
    full[n - 1] = "";
    let r = covmerge(&full);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success() && err.contains("--namespace"), "{err}");
}

/// Two `namespace` columns: which one names the row's namespace is a guess. Refused
/// like any repeated column, naming both fields.
#[test]
fn a_header_with_two_namespace_columns_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let src = source(d);
    let input = d.join("two.csv");
    std::fs::write(
        &input,
        format!("namespace,{HDR},namespace\nupstream,r,c1,a.c,f,m,1,1,android\n"),
    )
    .unwrap();
    let (o, m, i) = (
        d.join("out.gz").display().to_string(),
        d.join("m.json").display().to_string(),
        input.display().to_string(),
    );
    let mut full = vec!["merge", "--quiet"];
    full.extend(args(&src, &o, &m, &[&i]));
    full.extend(["--namespace", "upstream"]);
    let r = covmerge(&full);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "{err}");
    assert!(
        err.contains("`namespace` appears more than once") && err.contains("fields 1 and 9"),
        "{err}"
    );
}

/// Inputs with and without the column in one job: rows of an input without it are
/// the job's namespace's; rows of other namespaces are neither merged nor bad (a
/// malformed row of another namespace is not this job's to judge).
#[test]
fn mixed_inputs_merge_rows_without_the_column_as_the_jobs() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let src = source(d);
    let shared = d.join("shared.csv");
    std::fs::write(
        &shared,
        format!("namespace,{HDR}\nupstream,r,c1,a.c,f,m,1,5\nandroid,r,c1,a.c,f,m,1,7\nandroid,r,c1,a.c,f,m,x,y\n"),
    )
    .unwrap();
    let plain = d.join("plain.csv");
    std::fs::write(&plain, format!("{HDR}\nr,c1,a.c,f,m,1,100\n")).unwrap();
    let (out, man) = (d.join("out.gz"), d.join("m.json"));
    let (o, m, s, p) = (
        out.display().to_string(),
        man.display().to_string(),
        shared.display().to_string(),
        plain.display().to_string(),
    );
    let mut a = args(&src, &o, &m, &[&s, &p]);
    a.extend(["--namespace", "upstream"]);
    merge_ok(&a);
    let got = covmerge_integration_tests::canon(&out);
    assert_eq!(got["files"]["a.c"]["managers"]["*"], json!({"1": 105}));
    let man = manifest(&man);
    assert_eq!(man["totals"]["rows_in"], 2);
    assert_eq!(man["totals"]["rows_bad"], 0);
    assert_eq!(man["totals"]["rows_other_namespaces"], 2);
    assert_eq!(man["other_namespaces"]["listed"], json!({"android": 2}));
}

/// On a fleet the split runs on a worker: the job's `--namespace` travels in the split
/// task. The shared export read from S3 by two workers gives the embedded result and
/// counts; the refusal without `--namespace` comes back from the worker.
#[test]
fn a_fleet_split_merged_every_namespace_of_a_shared_export() {
    use covmerge_integration_tests::fleet;
    let _g = fleet::lock();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let src = source(d);
    let mut shared = format!("{HDR},namespace\n");
    for r in [rows("upstream", true, 40), rows("android", true, 25)].concat() {
        let (ns, rest) = r.split_once(',').unwrap();
        shared.push_str(&format!("{rest},{ns}\n"));
    }
    let local = d.join("shared.csv");
    std::fs::write(&local, &shared).unwrap();
    let b = fleet::bucket("ns");
    fleet::upload(&b, "in/shared.csv", &local);
    let (want, want_man) = (d.join("embedded.gz"), d.join("embedded.json"));
    let (w, wm, l) = (
        want.display().to_string(),
        want_man.display().to_string(),
        local.display().to_string(),
    );
    let mut a = args(&src, &w, &wm, &[&l]);
    a.extend(["--namespace", "upstream"]);
    merge_ok(&a);

    let store = format!("file://{}", d.join("store").display());
    let _w1 = fleet::worker(d, 1, &store, &[], &[]);
    let _w2 = fleet::worker(d, 2, &store, &["--split-threads", "1"], &[]);
    let amqp = fleet::amqp();
    let (got, got_man) = (d.join("fleet.gz"), d.join("fleet.json"));
    let (g, gm, s3) = (
        got.display().to_string(),
        got_man.display().to_string(),
        format!("s3://{b}/in/shared.csv"),
    );
    let mut a = args(&src, &g, &gm, &[&s3]);
    a.extend(["--amqp", &amqp, "--store", &store]);
    let o = fleet::coordinator_run(&a, &[], std::time::Duration::from_secs(120));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("`namespace` column") && err.contains("--namespace"),
        "{err}"
    );
    assert!(!got.exists());
    a.extend(["--namespace", "upstream"]);
    let o = fleet::coordinator_run(&a, &[], std::time::Duration::from_secs(120));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(gunzip(&got), gunzip(&want));
    let (gt, wt) = (manifest(&got_man), manifest(&want_man));
    assert_eq!(gt["totals"]["rows_in"], 40);
    assert_eq!(gt["totals"]["rows_other_namespaces"], 25);
    assert_eq!(gt["totals"], wt["totals"]);
    assert_eq!(
        gt["other_namespaces"],
        json!({"listed": {"android": 25}, "unlisted_rows": 0})
    );
}
