//! Snapshots and object names: blobs checked while streamed, names exactly as given,
//! the store apart from the inputs.

use super::*;

/// A `store:` snapshot in `c`'s directory with commit `c1` naming blob `id` for
/// `a.c`; returns the blob's path and the `--source`.
pub(super) fn snapshot(c: &crate::bad_input::Case, id: &str) -> (std::path::PathBuf, String) {
    let snap = c.path("snap");
    std::fs::create_dir_all(snap.join("blobs")).unwrap();
    std::fs::create_dir_all(snap.join("commits")).unwrap();
    std::fs::write(snap.join("commits/c1.idx"), format!("{id} a.c\n")).unwrap();
    (
        snap.join("blobs").join(id),
        format!("store:file://{}", snap.display()),
    )
}

pub(super) fn merge_from(c: &crate::bad_input::Case, source: &str) -> Command {
    let input = c.write(
        "in.csv",
        &format!("{}r,c1,a.c,f,m,1,5\n", crate::bad_input::HDR),
    );
    let mut cmd = Command::new(bin());
    cmd.args([
        "merge",
        "--quiet",
        "--source",
        source,
        "--base-repo",
        "r",
        "--base-commit",
        "c1",
        "--out",
        c.path("out.jsonl.gz").to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ])
    .env("RUST_LOG", "warn")
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::from(
        std::fs::File::create(c.path("stderr")).unwrap(),
    ));
    cmd
}

/// A snapshot blob far over the 256 MiB source-file cap (a sparse file: no disk) was
/// read whole before anything was checked (an 8 GB blob aborted the worker on its
/// allocation). Now its size is checked before a byte is read: the job fails at once
/// naming the limit, in little memory.
#[test]
pub(super) fn store_blob_over_the_cap_was_read_whole() {
    let c = crate::bad_input::Case::new();
    let (blob, source) = snapshot(&c, &"ab".repeat(20));
    std::fs::File::create(&blob)
        .unwrap()
        .set_len(600 << 20)
        .unwrap();
    let child = merge_from(&c, &source).spawn().unwrap();
    let (code, rss_kb) = wait_rss(child, Duration::from_secs(60), "merge from a huge blob");
    let err = std::fs::read_to_string(c.path("stderr")).unwrap();
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("c1:a.c") && err.contains("MiB limit on a source file"),
        "{err}"
    );
    assert!(
        rss_kb < 300 << 10,
        "peak RSS {rss_kb} KiB: the blob was read"
    );
    c.no_result();
}

/// A snapshot blob whose content does not match its id was retried to the delivery
/// limit (5 attempts) though every try reads the same bytes. Now it is a permanent
/// bad-input failure at the first attempt.
#[test]
pub(super) fn store_blob_not_matching_its_id_was_retried_to_the_delivery_limit() {
    let c = crate::bad_input::Case::new();
    let (blob, source) = snapshot(&c, &"0123456789".repeat(4));
    std::fs::write(&blob, "int a;\nint b;\nint c;\n").unwrap();
    let mut child = merge_from(&c, &source).spawn().unwrap();
    let st = wait_bounded(&mut child, Duration::from_secs(60), "merge from a bad blob");
    let err = std::fs::read_to_string(c.path("stderr")).unwrap();
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("does not match its blob id"), "{err}");
    assert!(err.contains("bad input"), "not a bad-input failure:\n{err}");
    assert!(
        !err.contains("will be retried"),
        "a damaged blob was retried:\n{err}"
    );
    c.no_result();
}

/// `--store` equal to an input prefix was not refused: the second job read the first
/// one's objects as inputs. Now a store equal to, inside or holding an input prefix is
/// refused before any work (no broker is even reached: the one given does not exist).
#[test]
pub(super) fn store_equal_to_an_input_prefix_was_not_refused() {
    let c = crate::bad_input::Case::new();
    std::fs::create_dir_all(c.path("in")).unwrap();
    c.write(
        "in/a.csv",
        &format!("{}r,c1,a.c,f,m,1,5\n", crate::bad_input::HDR),
    );
    let src = format!("dir:{}", c.path("src").display());
    let inp = format!("file://{}/in/*", c.dir_path().display());
    let cases = [
        (format!("file://{}/in", c.dir_path().display()), inp.clone()),
        (
            format!("file://{}/in/", c.dir_path().display()),
            inp.clone(),
        ),
        (
            format!("file://{}/in/jobs", c.dir_path().display()),
            inp.clone(),
        ),
        (format!("file://{}", c.dir_path().display()), inp.clone()),
        ("s3://bkt/in".to_string(), "s3://bkt/in/*".to_string()),
        ("s3://bkt".to_string(), "s3://bkt/in/".to_string()),
    ];
    let run = |store: &str, input: &str| {
        run_in(
            c.dir_path(),
            &[
                "coordinator",
                "--quiet",
                "--amqp",
                "amqp://guest:guest@127.0.0.1:1/%2f",
                "--broker-outage-budget",
                "1",
                "--store",
                store,
                "--source",
                &src,
                "--base-repo",
                "r",
                "--base-commit",
                "c1",
                "--out",
                c.path("out.jsonl.gz").to_str().unwrap(),
                "--input",
                input,
            ],
            &[],
        )
    };
    for (store, input) in &cases {
        let (code, _, err) = run(store, input);
        assert_eq!(code, Some(1), "--store {store} --input {input}: {err}");
        assert!(
            err.contains("--store") && err.contains("input prefix"),
            "--store {store} --input {input}: {err}"
        );
    }
    // A store beside the inputs passes the check (and fails on the missing broker).
    let apart = format!("file://{}/store", c.dir_path().display());
    let (code, _, err) = run(&apart, &inp);
    assert_ne!(code, Some(0));
    assert!(!err.contains("input prefix"), "{err}");
}

/// Where the object-name tests put their inputs and results: a directory behind
/// `file://`, a GCS emulator bucket, an S3 server bucket. Objects are written, listed and
/// read with clients independent of covmerge's (the file system, curl).
pub(super) enum Named {
    File(std::path::PathBuf),
    Gcs(String),
    S3(String),
}

/// Percent-encodes every byte but the unreserved ones (and `/` when `keep_slash`).
pub(super) fn pct(s: &str, keep_slash: bool) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            b'/' if keep_slash => "/".to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// curl against the S3 server (bounded), asserting success; returns the body.
pub(super) fn s3_curl(args: &[&str]) -> Vec<u8> {
    let o = Command::new("curl")
        .args(["-fsS", "--max-time", "30"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

impl Named {
    fn url(&self, key: &str) -> String {
        match self {
            Named::File(d) => format!("file://{}/{key}", d.display()),
            Named::Gcs(b) => format!("gs://{b}/{key}"),
            Named::S3(b) => format!("s3://{b}/{key}"),
        }
    }

    fn put(&self, key: &str, file: &Path) {
        match self {
            Named::File(d) => {
                let p = d.join(key);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::copy(file, p).unwrap();
            }
            Named::Gcs(b) => gcs::upload(b, key, file),
            Named::S3(b) => {
                let url = format!(
                    "{}/{b}/{}",
                    covmerge_integration_tests::fleet::s3_endpoint(),
                    pct(key, true)
                );
                s3_curl(&["-T", file.to_str().unwrap(), &url]);
            }
        }
    }

    /// The names of the objects under `dir/`, relative to it, sorted.
    fn list(&self, dir: &str) -> Vec<String> {
        let mut names: Vec<String> = match self {
            Named::File(d) => std::fs::read_dir(d.join(dir))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect(),
            Named::Gcs(b) => gcs::list(b, &format!("{dir}/")),
            Named::S3(b) => {
                let url = format!(
                    "{}/{b}?list-type=2&prefix={}",
                    covmerge_integration_tests::fleet::s3_endpoint(),
                    pct(&format!("{dir}/"), false)
                );
                let xml = String::from_utf8(s3_curl(&[&url])).unwrap();
                xml.split("<Key>")
                    .skip(1)
                    .map(|k| {
                        k.split("</Key>")
                            .next()
                            .unwrap()
                            .replace("&lt;", "<")
                            .replace("&gt;", ">")
                            .replace("&quot;", "\"")
                            .replace("&apos;", "'")
                            .replace("&#39;", "'")
                            .replace("&amp;", "&")
                    })
                    .collect()
            }
        };
        for n in &mut names {
            if let Some(rest) = n.strip_prefix(&format!("{dir}/")) {
                *n = rest.to_string();
            }
        }
        names.sort();
        names
    }

    fn get(&self, key: &str) -> Vec<u8> {
        match self {
            Named::File(d) => std::fs::read(d.join(key)).unwrap(),
            Named::Gcs(b) => gcs::download(b, key),
            Named::S3(b) => s3_curl(&[&format!(
                "{}/{b}/{}",
                covmerge_integration_tests::fleet::s3_endpoint(),
                pct(key, true)
            )]),
        }
    }
}

/// Object names with non-ASCII, spaces, `#`, `?` and `%` were unreadable and written
/// mangled: `gs://inb/s2/*` listed `ü.csv.gz`, then failed "object ü.csv.gz not found"
/// (object_store's `Path::from` percent-escaped the name it was given, so `ü` was
/// asked for as `%C3%BC`); `a#b`, `a?b` and `x%2Fy` the same, a `file://` prefix's
/// names were encoded twice, and `--out "gs://bkt/res ü#1.jsonl.gz"` exited 0 having
/// written `res %C3%BC%231.jsonl.gz` (a URL parser decoded `%`, cut at `#` and `?`).
/// Now, on `file://`, `gs://` and `s3://`, inputs listed from a prefix and inputs given
/// by URL are read by the names listed or given, the result equals the one merged from
/// local files, and the output object has exactly the name given, nothing else beside it.
#[test]
pub(super) fn object_names_with_non_ascii_hash_question_percent_were_unreadable_and_written_mangled(
) {
    let tmp = tempfile::tempdir().unwrap();
    let d = fixture("semantics");
    let src = format!("dir:{}", d.join("sources").display());
    let job = |ins: &[String], out: &str, man: &Path| -> Vec<String> {
        let mut a: Vec<String> = [
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
            "--out",
            out,
            "--manifest",
            man.to_str().unwrap(),
            "--input",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(ins.iter().cloned());
        a
    };
    // The same merge from the fixture's local files.
    let local_out = tmp.path().join("local.jsonl.gz");
    let ins = [
        d.join("input-a.csv").display().to_string(),
        d.join("input-b.csv.gz").display().to_string(),
    ];
    let a = job(
        &ins,
        local_out.to_str().unwrap(),
        &tmp.path().join("l.json"),
    );
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let (code, _, err) = run_in(tmp.path(), &a, &[]);
    assert_eq!(code, Some(0), "local merge: {err}");
    let want = gunzip(&local_out);

    let creds = gcs::credentials(tmp.path());
    let env = [("GOOGLE_SERVICE_ACCOUNT", creds.to_str().unwrap())];
    let fs_root = tmp.path().join("fs");
    std::fs::create_dir_all(&fs_root).unwrap();
    let stores = [
        Named::File(fs_root),
        Named::Gcs(gcs::bucket("names")),
        Named::S3(covmerge_integration_tests::fleet::bucket("names")),
    ];
    // Each name has characters a URL parser or object_store's escaping changes.
    // (Sorted as listings sort them: by bytes.)
    let names = ["x%2Fy#b%.csv.gz", "ü #a?.csv"];
    let out_name = "res ü#1?%41.jsonl.gz";
    for st in &stores {
        st.put(&format!("in/{}", names[0]), &d.join("input-b.csv.gz"));
        st.put(&format!("in/{}", names[1]), &d.join("input-a.csv"));
        assert_eq!(st.list("in"), names, "the objects were written as named");
        let listed: Vec<String> = names.iter().map(|n| st.url(&format!("in/{n}"))).collect();
        for (how, ins, out_dir) in [
            ("a prefix listing", vec![st.url("in/*")], "out-listed"),
            ("URLs", listed.clone(), "out-direct"),
        ] {
            let what = format!("{} from {how}", st.url(""));
            let out = st.url(&format!("{out_dir}/{out_name}"));
            let man = tmp.path().join("m.json");
            let _ = std::fs::remove_file(&man);
            let a = job(&ins, &out, &man);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            let (code, _, err) = run_in(tmp.path(), &a, &env);
            assert_eq!(code, Some(0), "{what}: {err}");
            let m = covmerge_integration_tests::manifest(&man);
            assert_eq!(m["inputs"], serde_json::json!(listed), "{what}");
            assert_eq!(m["result"], serde_json::json!(out), "{what}");
            assert_eq!(st.list(out_dir), [out_name], "{what}: the result's name");
            let got =
                covmerge_integration_tests::gunzip_bytes(&st.get(&format!("{out_dir}/{out_name}")));
            assert!(
                got == want,
                "{what}: the result differs from the local merge"
            );
        }
    }
}

/// object_store's local store (`file://`) leaves a file whose name ends in `#` and
/// digits (its partial-upload convention) out of a listing and refuses to read or
/// write one: a `file://` prefix holding `part#12` would have been merged without it,
/// and such a `--out` failed only after the merge. Now the listing is refused naming the
/// file, and such a `--out` is refused before any work; a `#` followed by other text
/// is read as any name.
#[test]
pub(super) fn file_names_ending_in_hash_digits_were_left_out_of_a_listing() {
    let c = crate::bad_input::Case::new();
    let hdr = crate::bad_input::HDR;
    std::fs::create_dir_all(c.path("in/sub")).unwrap();
    c.write("in/a#1x.csv", &format!("{hdr}r,c1,a.c,f,m,1,5\n"));
    c.write("in/sub/part#12", &format!("{hdr}r,c1,a.c,f,m,2,5\n"));
    let src = format!("dir:{}", c.path("src").display());
    let root = c.dir_path().display().to_string();
    let run = |input: &str, out: &str| {
        run_in(
            c.dir_path(),
            &[
                "merge",
                "--quiet",
                "--source",
                &src,
                "--base-repo",
                "r",
                "--base-commit",
                "c1",
                "--out",
                out,
                "--input",
                input,
            ],
            &[],
        )
    };
    let out = c.path("out.jsonl.gz");
    let out = out.to_str().unwrap();
    let (code, _, err) = run(&format!("file://{root}/in/*"), out);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("sub/part#12") && err.contains("partial upload"),
        "{err}"
    );
    assert!(!Path::new(out).exists(), "a result was written");
    // Given directly, the same file is refused by name, too.
    let (code, _, err) = run(&format!("file://{root}/in/sub/part#12"), out);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("part#12") && err.contains("partial upload"),
        "{err}"
    );
    // A listing without it merges; such an --out is refused before any work.
    let (code, _, err) = run(
        &format!("file://{root}/in/a*"),
        &format!("file://{root}/res#7"),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("res#7") && err.contains("nothing was read or written"),
        "{err}"
    );
    let (code, _, err) = run(
        &format!("file://{root}/in/a*"),
        &format!("file://{root}/res#7b"),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(c.path("res#7b").is_file());
}
