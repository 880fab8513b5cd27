//! The site's numbers recomputed from hand-made results: every directory script's rows
//! against sums over the result's records.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::*;

/// (path, manager, lines, hits) records, written in this order as a result file.
type Rec<'a> = (&'a str, &'a str, &'a [u32], &'a [u64]);

fn write_result(p: &Path, commit: &str, recs: &[Rec<'_>]) {
    let mut s = format!(
        r#"{{"Session":"","Time":"0001-01-01T00:00:00Z","Namespace":"upstream","Repo":"git://r","Commit":"{commit}","Duration":30,"DateTo":"2024-04-08","TotalRows":1}}"#
    );
    s.push('\n');
    let mut v = Vec::new();
    for (path, m, lines, hits) in recs {
        mcr(&mut v, m, path, lines, hits);
    }
    s += &String::from_utf8(v).unwrap();
    std::fs::write(p, s).unwrap();
}

fn mcr(v: &mut Vec<u8>, m: &str, path: &str, lines: &[u32], hits: &[u64]) {
    let cov = hits.iter().filter(|&&h| h > 0).count();
    v.extend_from_slice(
        format!(
            r#"{{"MCR":{{"Manager":"{m}","FilePath":"{path}","FileData":{{"Instrumented":{},"Covered":{cov},"LinesInstrumented":{lines:?},"HitCounts":{hits:?}}}}},"FL":null}}"#,
            lines.len()
        )
        .as_bytes(),
    );
    v.push(b'\n');
}

/// The JSON argument of a `covmerge.NAME(...)` script.
fn script_arg(p: &Path) -> Value {
    let s = std::fs::read_to_string(p).unwrap();
    let start = s.find('(').unwrap() + 1;
    let end = s.rfind(");").unwrap();
    serde_json::from_str(&s[start..end]).unwrap()
}

/// The record of file `id` in its group script (found through data/groups.js).
fn file_data(out: &Path, id: u64) -> Value {
    let starts = script_arg(&out.join("data/groups.js"));
    let g = starts
        .as_array()
        .unwrap()
        .iter()
        .rposition(|s| s.as_u64().unwrap() <= id)
        .unwrap();
    let s = std::fs::read_to_string(out.join(data::script_path("f", g as u32))).unwrap();
    s.lines()
        .map(|l| {
            let l = l.strip_prefix("covmerge.file(").unwrap();
            serde_json::from_str::<Value>(l.strip_suffix(");").unwrap()).unwrap()
        })
        .find(|v| v["id"] == id)
        .unwrap()
}

const RECS: &[Rec<'static>] = &[
    ("fs/ext4/inode.c", "*", &[1, 2, 3, 4], &[5, 0, 1, 0]),
    ("fs/ext4/inode.c", "m2", &[1, 3], &[5, 0]),
    ("fs/ext4/inode.c", "m1", &[2], &[0]),
    ("fs/open.c", "*", &[7, 8], &[1, 1]),
    ("fs/open.c", "m1", &[7, 8], &[1, 1]),
    ("kernel/fork.c", "*", &[1], &[0]),
    ("kernel/fork.c", "m2", &[1], &[0]),
    ("README", "*", &[], &[]),
];

/// (instrumented, covered) per manager column name ("*" too) under `prefix`.
fn want(recs: &[Rec<'_>], prefix: &str) -> BTreeMap<String, (u64, u64)> {
    let mut m = BTreeMap::new();
    for (path, mgr, lines, hits) in recs {
        if path.starts_with(prefix) {
            let e = m.entry(mgr.to_string()).or_insert((0, 0));
            e.0 += lines.len() as u64;
            e.1 += hits.iter().filter(|&&h| h > 0).count() as u64;
        }
    }
    m
}

fn check_site(out: &Path, recs: &[Rec<'_>]) {
    let meta = script_arg(&out.join("data/meta.js"));
    let managers: Vec<String> = serde_json::from_value(meta["managers"].clone()).unwrap();
    assert_eq!(managers, vec!["m1", "m2"]);
    let paths = script_arg(&out.join("data/paths.js"));
    let mut dirs = 0;
    for d in paths["dirs"].as_array().unwrap() {
        dirs += 1;
        let id = d[0].as_u64().unwrap() as u32;
        let data = script_arg(&out.join(data::script_path("d", id)));
        let dpath = data["path"].as_str().unwrap();
        for row in data["rows"].as_array().unwrap() {
            let name = row["name"].as_str().unwrap();
            let full = if dpath.is_empty() {
                name.to_string()
            } else {
                format!("{dpath}/{name}")
            };
            let prefix = if row["k"] == "d" {
                format!("{full}/")
            } else {
                full
            };
            let w = want(recs, &prefix);
            let star = w.get("*").copied().unwrap_or_default();
            assert_eq!(row["n"], serde_json::json!([star.0, star.1]), "{prefix}");
            for (col, m) in managers.iter().enumerate() {
                let got = row["m"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|x| x[0] == col as u64)
                    .map(|x| (x[1].as_u64().unwrap(), x[2].as_u64().unwrap()))
                    .unwrap_or_default();
                assert_eq!(got, w.get(m).copied().unwrap_or_default(), "{prefix} {m}");
            }
        }
    }
    assert_eq!(dirs, 4, "root, fs, fs/ext4, kernel");
    let root = want(recs, "")["*"];
    assert_eq!(meta["total"]["n"], serde_json::json!([root.0, root.1]));
}

fn gen(result: &Path, out: &Path, diff: Option<&Path>) -> Stats {
    gen_with(result, out, diff, None)
}

fn gen_with(result: &Path, out: &Path, diff: Option<&Path>, manifest: Option<&Path>) -> Stats {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = Options {
        result: result.display().to_string(),
        source: None,
        out: out.to_path_buf(),
        diff: diff.map(|d| d.display().to_string()),
        threads: Some(2),
        manifest: manifest.map(|m| m.display().to_string()),
        budget: Budget::default(),
    };
    let h = rt.handle().clone();
    rt.block_on(
        async move { tokio::task::spawn_blocking(move || generate(&opts, &h).unwrap()).await },
    )
    .unwrap()
}

#[test]
fn directory_numbers_are_the_results() {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path().join("r.jsonl");
    write_result(&r, "c1", RECS);
    let out = tmp.path().join("site");
    let s = gen(&r, &out, None);
    assert_eq!((s.files, s.dirs, s.managers), (4, 4, 2));
    assert_eq!(s.sources_missing, 4);
    check_site(&out, RECS);
    assert!(s.first_page_bytes() > 0 && s.first_page.len() == 5);
    let f = file_data(&out, 0);
    assert_eq!(f["path"], "fs/ext4/inode.c");
    assert_eq!(f["text"], Value::Null);
    assert_eq!(f["cov"][0]["hits"], serde_json::json!([5, 0, 1, 0]));
    assert_eq!(f["cov"][1]["m"], "m1");
}

#[test]
fn records_of_a_file_apart_are_grouped() {
    let mut recs = RECS.to_vec();
    // inode.c's m1 record after kernel/fork.c's.
    let m1 = recs.remove(2);
    recs.push(m1);
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path().join("r.jsonl");
    write_result(&r, "c1", &recs);
    let out = tmp.path().join("site");
    let s = gen(&r, &out, None);
    assert_eq!(s.files, 4);
    check_site(&out, &recs);
}

#[test]
fn diff_marks_deleted_files_and_totals() {
    let tmp = tempfile::tempdir().unwrap();
    let (old, new) = (tmp.path().join("old.jsonl"), tmp.path().join("new.jsonl"));
    let mut old_recs = RECS.to_vec();
    old_recs.push(("mm/gone.c", "*", &[1, 2], &[3, 3]));
    old_recs[0] = ("fs/ext4/inode.c", "*", &[1, 2, 3, 4], &[5, 9, 0, 0]);
    write_result(&old, "c1", &old_recs);
    write_result(&new, "c1", RECS);
    let out = tmp.path().join("site");
    gen(&new, &out, Some(&old));
    let meta = script_arg(&out.join("data/meta.js"));
    let t = &meta["diff"][1];
    // inode.c: line 2 lost, line 3 gained; gone.c: 2 lost.
    assert_eq!(
        (t["gained"].as_u64(), t["lost"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(t["files_deleted"], 1);
    let root = script_arg(&out.join(data::script_path("d", 0)));
    let mm = root["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "mm")
        .unwrap();
    assert_eq!((mm["l"].as_u64(), mm["n"][0].as_u64()), (Some(2), Some(0)));
    let f = file_data(&out, 0);
    assert_eq!(f["diff"]["gained"], serde_json::json!([3]));
    assert_eq!(f["diff"]["lost"], serde_json::json!([2]));

    // A different base without a source to match lines through is refused before any
    // page is written.
    let other = tmp.path().join("other.jsonl");
    write_result(&other, "c2", RECS);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = Options {
        result: new.display().to_string(),
        source: None,
        out: tmp.path().join("site2"),
        diff: Some(other.display().to_string()),
        threads: None,
        manifest: None,
        budget: Budget::default(),
    };
    let e = generate(&opts, rt.handle()).unwrap_err().to_string();
    assert!(
        e.contains("base commit c2 but") && e.contains("give --source SRC"),
        "{e}"
    );
}

#[test]
fn report_does_not_embed_files_outside_the_source() {
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("secret.txt");
    std::fs::write(&secret, "TOPSECRET\n").unwrap();
    let root = tmp.path().join("src");
    std::fs::create_dir_all(root.join("c1")).unwrap();
    std::fs::write(root.join("c1/a.c"), "int a;\n").unwrap();
    let abs = secret.display().to_string();
    let recs: &[Rec<'_>] = &[
        ("a.c", "*", &[1], &[1]),
        ("../../secret.txt", "*", &[1], &[1]),
        (&abs, "*", &[1], &[0]),
        ("c1/./../../secret.txt", "*", &[1], &[1]),
    ];
    let result = tmp.path().join("r.jsonl");
    write_result(&result, "c1", recs);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = Options {
        result: result.display().to_string(),
        source: Some(format!("dir:{}", root.display())),
        out: tmp.path().join("site"),
        diff: None,
        threads: Some(2),
        manifest: None,
        budget: Budget::default(),
    };
    let h = rt.handle().clone();
    let o = opts.clone();
    let stats = rt
        .block_on(async move { tokio::task::spawn_blocking(move || generate(&o, &h)).await })
        .unwrap()
        .unwrap();
    // Every file is in the report with its numbers; only a.c has text.
    assert_eq!((stats.files, stats.bad_paths), (4, 3));
    assert_eq!(stats.sources_missing, 3);
    let mut scripts = vec![opts.out.join("data/f")];
    let mut texts = 0;
    while let Some(p) = scripts.pop() {
        if p.is_dir() {
            scripts.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let s = std::fs::read_to_string(&p).unwrap();
        assert!(
            !s.contains("TOPSECRET"),
            "{} embeds a file outside the source",
            p.display()
        );
        texts += usize::from(s.contains("int a;"));
    }
    assert_eq!(texts, 1);
    // The reader names the result, the line and the path.
    let input = std::io::BufReader::new(std::fs::File::open(&result).unwrap());
    let mut r = read::ResultReader::new("r.jsonl", Box::new(input)).unwrap();
    let mut problems = Vec::new();
    while let Some(f) = r.next_file().unwrap() {
        problems.extend(f.path_problem);
    }
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(
        problems[0].contains("r.jsonl, line 3: FilePath \"../../secret.txt\"")
            && problems[0].contains("`..`"),
        "{problems:?}"
    );
}

/// With the manifest naming `gcc` a group: its column comes after the managers' and
/// is marked in meta.js, its record is marked on the file page, and it takes no line
/// from a manager. Unique lines are counted per file and summed up the tree.
#[test]
fn groups_are_columns_of_their_own_and_not_managers_for_unique_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let recs: &[Rec<'_>] = &[
        ("fs/a.c", "*", &[1, 2, 3, 4], &[5, 3, 0, 2]),
        ("fs/a.c", "a", &[1, 2, 3], &[5, 1, 0]),
        ("fs/a.c", "b", &[2, 4], &[2, 2]),
        ("fs/a.c", "gcc", &[1, 2, 3], &[5, 1, 0]),
        ("fs/b.c", "*", &[1, 2], &[1, 1]),
        ("fs/b.c", "b", &[1, 2], &[1, 1]),
        ("fs/b.c", "gcc", &[1], &[0]),
    ];
    let plain = tmp.path().join("r.jsonl");
    write_result(&plain, "c1", recs);
    // As a job writes it: the header's gzip member, then its one part (the manifest's
    // shard, whose size and SHA-256 it lists).
    let text = std::fs::read_to_string(&plain).unwrap();
    let (head, body) = text.split_at(text.find('\n').unwrap() + 1);
    let gz = |t: &str| {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(t.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    let part = gz(body);
    let result = tmp.path().join("r.jsonl.gz");
    std::fs::write(&result, [gz(head), part.clone()].concat()).unwrap();
    let sha = {
        use sha2::Digest;
        let d = sha2::Sha256::digest(&part);
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let manifest = tmp.path().join("m.json");
    let m = |commit: &str| {
        serde_json::json!({
            "job": "j", "status": "complete", "base_repo": "r", "base_commit": commit,
            "result": null, "inputs": [], "totals": covmerge_proto::Counts::default(),
            "shards": [{"index": 0, "records": recs.len(), "bytes": part.len(),
                        "sha256": sha, "attempts": 1}],
            "groups": [{"name": "gcc", "glob": "*-gcc"}],
        })
        .to_string()
    };
    std::fs::write(&manifest, m("c1")).unwrap();
    let out = tmp.path().join("site");
    gen_with(&result, &out, None, Some(&manifest));
    let meta = script_arg(&out.join("data/meta.js"));
    assert_eq!(meta["managers"], serde_json::json!(["a", "b", "gcc"]));
    assert_eq!(meta["groups"], serde_json::json!([[2, "*-gcc"]]));
    // fs/a.c: line 1 only a, line 4 only b (line 2 both); fs/b.c: lines 1, 2 only b.
    assert_eq!(meta["total"]["u"], serde_json::json!([[0, 1], [1, 3]]));
    let root = script_arg(&out.join(data::script_path("d", 0)));
    let fs = &root["rows"][0];
    let files = script_arg(&out.join(data::script_path("d", fs["id"].as_u64().unwrap() as u32)));
    let a = files["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "a.c")
        .unwrap();
    assert_eq!(a["u"], serde_json::json!([[0, 1], [1, 1]]));
    let page = file_data(&out, a["id"].as_u64().unwrap());
    assert_eq!(
        page["only"],
        serde_json::json!([[1, 1], [4, 2]]),
        "cov[1] is a, cov[2] b"
    );
    let marked: Vec<(&str, bool)> = page["cov"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["m"].as_str().unwrap(), c.get("g").is_some()))
        .collect();
    assert_eq!(
        marked,
        [("*", false), ("a", false), ("b", false), ("gcc", true)]
    );

    // Without the manifest `gcc` is a manager: sorted among them, and line 1 of a.c
    // is no longer a's alone.
    let bare = tmp.path().join("bare");
    gen(&result, &bare, None);
    let meta = script_arg(&bare.join("data/meta.js"));
    assert!(meta.get("groups").is_none());
    assert_eq!(meta["total"]["u"], serde_json::json!([[1, 3]]));

    // A manifest of another base is refused, naming both commits.
    std::fs::write(&manifest, m("c0")).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = Options {
        result: result.display().to_string(),
        source: None,
        out: tmp.path().join("site3"),
        diff: None,
        threads: None,
        manifest: Some(manifest.display().to_string()),
        budget: Budget::default(),
    };
    let e = generate(&opts, rt.handle()).unwrap_err().to_string();
    assert!(e.contains("base commit c0") && e.contains("on c1"), "{e}");
}
