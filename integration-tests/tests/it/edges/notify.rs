//! What `notify` hands the dashboard, the places `diff` and `status` read and write,
//! and how a `git:` source refuses what it cannot read: hostile-tester rounds.

use super::*;

/// A result of the semantics fixture, merged into `dir` (`good.jsonl.gz`, its
/// manifest `good.json`).
fn good_result(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let d = fixture("semantics");
    let src = format!("dir:{}", d.join("sources").display());
    let (out, manifest) = (dir.join("good.jsonl.gz"), dir.join("good.json"));
    let (code, _, err) = run_in(
        dir,
        &[
            "merge",
            "--quiet",
            "--source",
            &src,
            "--base-repo",
            "git://example/linux",
            "--base-commit",
            "base",
            "--date-to",
            "2024-04-08",
            "--input",
            d.join("input-a.csv").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--manifest",
            manifest.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{err}");
    (out, manifest)
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// `notify --result` copied any file to the dashboard's object and called
/// save_coverage: text, an empty file, cut gzip, gzip with bytes after it, counts the
/// arrays contradict, a file without its `*` record, no header. Each is now refused
/// before the dashboard is called at all.
#[test]
pub(super) fn notify_sent_any_file_to_the_dashboard_unchecked() {
    let tmp = tempfile::tempdir().unwrap();
    let (good, _) = good_result(tmp.path());
    let bytes = std::fs::read(&good).unwrap();
    let text = String::from_utf8(gunzip(&good)).unwrap();
    let (header, records) = text.split_once('\n').unwrap();
    let mut with_garbage = bytes.clone();
    with_garbage.extend_from_slice(b"garbage");
    let no_star: String = records
        .lines()
        .filter(|l| !l.contains("\"Manager\":\"*\""))
        .map(|l| format!("{l}\n"))
        .collect();
    let wrong_count = text.replacen("\"Instrumented\":", "\"Instrumented\":9", 1);
    // A header the dashboard cannot decode, or with counts below zero.
    let head = |from: &str, to: &str| {
        assert!(header.contains(from), "{header}");
        gzip(format!("{}\n{records}", header.replacen(from, to, 1)).as_bytes())
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("text", b"not a result\n".to_vec()),
        ("empty", Vec::new()),
        ("cut gzip", bytes[..bytes.len() / 2].to_vec()),
        ("bytes after the gzip", with_garbage),
        ("counts the arrays contradict", gzip(wrong_count.as_bytes())),
        (
            "no * record",
            gzip(format!("{header}\n{no_star}").as_bytes()),
        ),
        ("no header", gzip(records.as_bytes())),
        (
            "DateTo not a date",
            head("\"DateTo\":\"2024-04-08\"", "\"DateTo\":\"yesterday\""),
        ),
        ("Time not a time", head("\"Time\":\"", "\"Time\":\"x")),
        ("Duration negative", head("\"Duration\":", "\"Duration\":-")),
        (
            "TotalRows negative",
            head("\"TotalRows\":", "\"TotalRows\":-"),
        ),
        (
            "Repo empty",
            head("\"Repo\":\"git://example/linux\"", "\"Repo\":\"\""),
        ),
    ];
    let dash = Http::start(json_reply("\"bkt/x.upload\"".into()));
    for (what, data) in cases {
        let f = tmp.path().join("bad.jsonl.gz");
        std::fs::write(&f, &data).unwrap();
        let (code, _, err) = run_in(
            tmp.path(),
            &[
                "notify",
                "--dashboard",
                &dash.url,
                "--dashboard-client",
                "ci",
                "--result",
                f.to_str().unwrap(),
            ],
            &[("COVMERGE_DASHBOARD_KEY", KEY)],
        );
        assert_eq!(code, Some(1), "{what}: {err}");
        assert!(
            err.contains("is not sent to the dashboard"),
            "{what}: {err}"
        );
        assert_eq!(dash.hits(), 0, "{what}: the dashboard was called");
    }
}

/// `notify --job J --store S` sent the job's result even when its bytes were not the
/// ones the job's manifest describes (the same records gzip'd again, or another
/// result). Now the result must be the manifest's, byte for byte.
#[test]
pub(super) fn notify_job_sent_a_result_its_manifest_does_not_describe() {
    let tmp = tempfile::tempdir().unwrap();
    let (good, manifest) = good_result(tmp.path());
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let job = m["job"].as_str().unwrap().to_string();
    let dir = tmp.path().join("store/jobs").join(&job);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&manifest, dir.join("manifest.json")).unwrap();
    // The same records, one gzip member: what a reader reads is equal, the bytes
    // the manifest names are not.
    let regzipped = gzip(&gunzip(&good));
    std::fs::write(dir.join("result.jsonl.gz"), regzipped).unwrap();
    let dash = Http::start(json_reply("\"bkt/x.upload\"".into()));
    let store = format!("file://{}", tmp.path().join("store").display());
    let (code, _, err) = run_in(
        tmp.path(),
        &[
            "notify",
            "--dashboard",
            &dash.url,
            "--dashboard-client",
            "ci",
            "--job",
            &job,
            "--store",
            &store,
        ],
        &[("COVMERGE_DASHBOARD_KEY", KEY)],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("does not belong to the result"), "{err}");
    assert_eq!(dash.hits(), 0, "the dashboard was called");
}

/// `notify --upload` took any location to save_coverage: empty, `..`, a query,
/// credentials, another bucket syntax. Each is now refused before any call, and no
/// password is shown.
#[test]
pub(super) fn notify_upload_location_was_not_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let dash = Http::start(json_reply("7".into()));
    for (upload, why) in [
        ("", "names no object"),
        ("../../etc/passwd", "not a GCS bucket name"),
        ("bkt/../x.upload", "`..` segment"),
        ("gs://bkt/x.upload?x=1", "holds '?'"),
        ("gs://user:hunter2@bkt/x.upload", "not a GCS bucket name"),
        ("user:hunter2@bkt/x.upload", "not a GCS bucket name"),
        ("gs://bkt/x.json", "does not end in `.upload`"),
        ("gs://Bkt/x.upload", "not a GCS bucket name"),
        ("user:p@ss@bkt/x.upload", "not a GCS bucket name"),
        ("a..b/x.upload", "an empty part between dots"),
        ("192.168.1.1/x.upload", "an IP address"),
        ("googbucket/x.upload", "`goog` first"),
        ("my.google.bkt/x.upload", "`google` in it"),
        ("-bkt/x.upload", "a letter or digit first and last"),
    ] {
        let (code, _, err) = run_in(
            tmp.path(),
            &[
                "notify",
                "--dashboard",
                &dash.url,
                "--dashboard-client",
                "ci",
                &format!("--upload={upload}"),
            ],
            &[("COVMERGE_DASHBOARD_KEY", KEY)],
        );
        assert_eq!(code, Some(1), "{upload}: {err}");
        assert!(err.contains(why), "{upload}: {err}");
        assert!(!err.contains("hunter2"), "{upload}: {err}");
        assert!(!err.contains("p@ss"), "{upload}: {err}");
        assert_eq!(dash.hits(), 0, "{upload}: the dashboard was called");
    }
    let long = format!("bkt/{}.upload", "n".repeat(1100));
    let (code, _, err) = run_in(
        tmp.path(),
        &[
            "notify",
            "--dashboard",
            &dash.url,
            "--dashboard-client",
            "ci",
            "--upload",
            &long,
        ],
        &[("COVMERGE_DASHBOARD_KEY", KEY)],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("GCS allows 1,024"), "{err}");
    assert_eq!(dash.hits(), 0, "the dashboard was called");
}

/// A `--dashboard` that is not an http(s) URL with a host failed with the HTTP
/// client's bare "builder error" (after the merge). Now it is refused naming why,
/// without its password.
#[test]
pub(super) fn dashboard_url_failed_with_builder_error() {
    let tmp = tempfile::tempdir().unwrap();
    for (url, why) in [
        ("ftp://host/x", "over http:// or https://, not ftp://"),
        ("nonsense", "is not a URL"),
        ("http://user:hunter2@:80/", "empty host"),
        ("http://host/?key=1", "no query or fragment"),
        ("http://127.0.0.1:99999", "is not a URL"),
        ("http://ho st/", "is not a URL"),
        ("u:hunter2@host?key=hunter2", "over http:// or https://"),
        ("hunter2@host?key=hunter2", "is not a URL"),
    ] {
        let (code, _, err) = run_in(
            tmp.path(),
            &[
                "notify",
                "--dashboard",
                url,
                "--dashboard-client",
                "ci",
                "--upload",
                "bkt/x.upload",
            ],
            &[("COVMERGE_DASHBOARD_KEY", KEY)],
        );
        assert_eq!(code, Some(1), "{url}: {err}");
        assert!(err.contains(why), "{url}: {err}");
        assert!(!err.contains("builder error"), "{url}: {err}");
        assert!(!err.contains("hunter2"), "{url}: {err}");
    }
}

/// Two results across bases over `dir:s`, with `f.c` of two lines at both bases:
/// OLD covers line 1; NEW's lines are `new_lines` (hits 9).
fn across(dir: &Path, new_lines: &[u32], new_star: bool) -> (String, String, String) {
    for c in ["c1", "c2"] {
        std::fs::create_dir_all(dir.join("s").join(c)).unwrap();
        std::fs::write(dir.join("s").join(c).join("f.c"), "a\nb\n").unwrap();
    }
    let head = |c: &str| {
        format!(
            "{{\"Session\":\"\",\"Time\":\"0001-01-01T00:00:00Z\",\"Namespace\":\"upstream\",\"Repo\":\"r\",\"Commit\":\"{c}\",\"Duration\":0,\"DateTo\":\"2024-04-08\",\"TotalRows\":1}}\n"
        )
    };
    let rec = |m: &str, lines: &[u32]| {
        format!(
            "{{\"MCR\":{{\"Manager\":\"{m}\",\"FilePath\":\"f.c\",\"FileData\":{{\"Instrumented\":{},\"Covered\":{},\"LinesInstrumented\":{lines:?},\"HitCounts\":{:?}}}}},\"FL\":null}}\n",
            lines.len(),
            lines.len(),
            vec![9; lines.len()]
        )
    };
    let old = format!("{}{}{}", head("c1"), rec("*", &[1]), rec("m", &[1]));
    let mut new = head("c2");
    if new_star {
        new += &rec("*", new_lines);
    }
    new += &rec("m", new_lines);
    let (o, n) = (dir.join("old.jsonl.gz"), dir.join("new.jsonl.gz"));
    std::fs::write(&o, gzip(old.as_bytes())).unwrap();
    std::fs::write(&n, gzip(new.as_bytes())).unwrap();
    (
        o.display().to_string(),
        n.display().to_string(),
        format!("dir:{}", dir.join("s").display()),
    )
}

/// `diff` across bases took NEW's line 999 of a two-line file for a line of the
/// base and called it "unchanged, instrumented in NEW only". A line past the end of
/// its base text is now refused, naming the file and the line.
#[test]
pub(super) fn diff_took_a_line_past_the_end_of_the_base_text_for_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let (o, n, s) = across(tmp.path(), &[1, 999], true);
    let (code, out, err) = run_in(tmp.path(), &["diff", &o, &n, "--source", &s], &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains("f.c: line 999 is past the end of its text at c2 (2 lines)"),
        "{err}"
    );
    // The same results within the text: compared.
    let (o, n, s) = across(tmp.path(), &[1, 2], true);
    let (code, out, err) = run_in(tmp.path(), &["diff", &o, &n, "--source", &s], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("\"lines\":{\"CBC\":[1],\"GIC\":[2]}"), "{out}");
}

/// A file of NEW without its `*` record was compared as if it had no coverage (and
/// said "changed"). Now the result is refused naming the file.
#[test]
pub(super) fn diff_compared_a_file_without_its_star_record_as_uncovered() {
    let tmp = tempfile::tempdir().unwrap();
    let (o, n, s) = across(tmp.path(), &[1, 2], false);
    let (code, out, err) = run_in(tmp.path(), &["diff", &o, &n, "--source", &s], &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains("file \"f.c\" has no MCR record of manager \"*\""),
        "{err}"
    );
    // Hits past int64 (Go's type of the counts) were compared too.
    let (o, n, s) = across(tmp.path(), &[1, 2], true);
    let text = String::from_utf8(gunzip(Path::new(&n))).unwrap();
    let text = text.replace("[9, 9]", &format!("[9, {}]", u64::MAX));
    std::fs::write(&n, gzip(text.as_bytes())).unwrap();
    let (code, out, err) = run_in(tmp.path(), &["diff", &o, &n, "--source", &s], &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains("line 2 has 18446744073709551615 hits, past int64"),
        "{err}"
    );
}

/// `diff --out` wrote its JSON lines over a file of the source it read the texts
/// from (OLD and NEW were guarded, the source was not).
#[test]
pub(super) fn diff_out_overwrote_a_source_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (o, n, s) = across(tmp.path(), &[1, 2], true);
    let target = tmp.path().join("s/c1/f.c");
    let (code, _, err) = run_in(
        tmp.path(),
        &[
            "diff",
            &o,
            &n,
            "--source",
            &s,
            "--out",
            target.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("source"), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "a\nb\n");
}

/// `status` on a store it cannot reach retried for the fleet's 300 s, whatever
/// `COVMERGE_STORE_OUTAGE_BUDGET` said. It now takes `--store-outage-budget` (and
/// the variable), 30 s by default.
#[test]
pub(super) fn status_waited_300s_on_an_unreachable_store() {
    let tmp = tempfile::tempdir().unwrap();
    let env = [
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "x"),
        ("AWS_SECRET_ACCESS_KEY", "y"),
        ("COVMERGE_STORE_OUTAGE_BUDGET", "1"),
    ];
    let (code, _, err) = run_in(
        tmp.path(),
        &[
            "status",
            "--store",
            "s3://bkt/p",
            "--job",
            "e494712fc8d5479f",
        ],
        &env,
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("giving up"), "{err}");
    let (_, out, _) = run_in(tmp.path(), &["status", "--help"], &[]);
    assert!(out.contains("--store-outage-budget"), "{out}");
    assert!(out.contains("[default: 30]"), "{out}");
}

/// `notify --result` of a `merge --group` result was refused ("* has 257 hits, its
/// managers sum to 303": the group's record taken for a manager's): without the
/// manifest the groups are not known, and the managers' records may sum to more than
/// `*`, not less. A `--result` naming credentials or a token showed them.
#[test]
pub(super) fn notify_refused_a_group_result_and_showed_the_results_credentials() {
    let tmp = tempfile::tempdir().unwrap();
    let d = fixture("semantics");
    let src = format!("dir:{}", d.join("sources").display());
    let out = tmp.path().join("grouped.jsonl.gz");
    let (code, _, err) = run_in(
        tmp.path(),
        &[
            "merge",
            "--quiet",
            "--source",
            &src,
            "--base-repo",
            "git://example/linux",
            "--base-commit",
            "base",
            "--date-to",
            "2024-04-08",
            "--group",
            "all=*",
            "--input",
            d.join("input-a.csv").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{err}");
    // create_upload_url answers a number: the call fails, but it was made, so the
    // result passed the checks.
    let dash = Http::start(json_reply("7".into()));
    let (code, _, err) = run_in(
        tmp.path(),
        &[
            "notify",
            "--dashboard",
            &dash.url,
            "--dashboard-client",
            "ci",
            "--result",
            out.to_str().unwrap(),
        ],
        &[("COVMERGE_DASHBOARD_KEY", KEY)],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(!err.contains("is not sent to the dashboard"), "{err}");
    assert!(dash.hits() >= 1, "the dashboard was not called: {err}");
    // A manager's record summing to less than `*` is still refused.
    let text = String::from_utf8(gunzip(&out)).unwrap();
    let star_first = text.find("\"Manager\":\"*\"").unwrap();
    let hits = text[star_first..].find("\"HitCounts\":[").unwrap() + star_first + 13;
    let bumped = format!("{}9{}", &text[..hits], &text[hits..]);
    let bad = tmp.path().join("bumped.jsonl.gz");
    std::fs::write(&bad, gzip(bumped.as_bytes())).unwrap();
    let before = dash.hits();
    let (code, _, err) = run_in(
        tmp.path(),
        &[
            "notify",
            "--dashboard",
            &dash.url,
            "--dashboard-client",
            "ci",
            "--result",
            bad.to_str().unwrap(),
        ],
        &[("COVMERGE_DASHBOARD_KEY", KEY)],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("is not sent to the dashboard"), "{err}");
    assert_eq!(dash.hits(), before, "the dashboard was called");
    for r in [
        "s3://AKIAX:S3SECRET@bkt/x.jsonl.gz",
        "gs://bkt/x.jsonl.gz?access_token=TOKSECRET",
        "gs://bkt/x.jsonl.gz#TOKSECRET",
    ] {
        let (code, _, err) = run_in(
            tmp.path(),
            &[
                "notify",
                "--dashboard",
                &dash.url,
                "--dashboard-client",
                "ci",
                "--result",
                r,
            ],
            &[("COVMERGE_DASHBOARD_KEY", KEY)],
        );
        assert_eq!(code, Some(1), "{r}: {err}");
        assert!(!err.contains("SECRET"), "{r}: {err}");
        assert!(
            !err.contains("publish gate"),
            "{r}: a read failure is not the result's: {err}"
        );
    }
    assert_eq!(dash.hits(), before, "the dashboard was called");
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// An annotated tag's id as `--base-commit` was refused as "does not hold the base
/// commit (a full commit id ..., e.g. git rev-parse of it)", which gives back that
/// very id; a SHA-256 repository as "invalid source spec: Repository configuration
/// could not be loaded". Each refusal now says what the id or the repository is.
#[test]
pub(super) fn git_source_refusals_named_the_wrong_cause() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("r");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("f.c"), "a\nb\n").unwrap();
    git(&repo, &["add", "f.c"]);
    git(&repo, &["commit", "-q", "-m", "x"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    git(&repo, &["tag", "-a", "-m", "ann", "v1"]);
    let tag = git(&repo, &["rev-parse", "v1"]);
    assert_ne!(tag, commit);
    let csv = tmp.path().join("in.csv");
    std::fs::write(
        &csv,
        format!("kernel_repo,kernel_commit,file_path,func_name,manager,sl,hit_count\ngit://k,{commit},f.c,f,m,2,5\n"),
    )
    .unwrap();
    let out = tmp.path().join("out.jsonl.gz");
    let merge = |source: &str, base: &str| {
        run_in(
            tmp.path(),
            &[
                "merge",
                "--source",
                source,
                "--base-repo",
                "git://k",
                "--base-commit",
                base,
                "--input",
                csv.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
            &[],
        )
    };
    let src = format!("git:{}", repo.display());
    let (code, _, err) = merge(&src, &tag);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("it is an annotated tag of commit {commit}")),
        "{err}"
    );
    let (code, _, err) = merge(&src, &commit);
    assert_eq!(code, Some(0), "{err}");
    // A SHA-256 repository (where this git makes one).
    let s256 = tmp.path().join("s256");
    std::fs::create_dir_all(&s256).unwrap();
    let made = Command::new("git")
        .args(["init", "-q", "--object-format=sha256"])
        .current_dir(&s256)
        .status()
        .unwrap();
    assert!(made.success(), "git init --object-format=sha256");
    let (code, _, err) = merge(&format!("git:{}", s256.display()), &commit);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("a SHA-256 repository"), "{err}");
}
