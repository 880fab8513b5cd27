//! `report --diff` with OLD on another base: categories in the tree, the totals and
//! the file pages.

use std::path::Path;

use serde_json::Value;

use crate::site::{generate, Options};

fn write_result(p: &Path, commit: &str, recs: &[(&str, &[(u32, u64)])]) {
    let s = crate::test_results::star_result(commit, recs);
    std::fs::write(p, s).unwrap();
}

fn script_arg(p: &Path) -> Value {
    let s = std::fs::read_to_string(p).unwrap();
    let start = s.find('(').unwrap() + 1;
    let end = s.rfind(");").unwrap();
    serde_json::from_str(&s[start..end]).unwrap()
}

#[test]
fn categories_in_the_tree_totals_and_file_pages_across_bases() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src");
    let put = |commit: &str, path: &str, text: &str| {
        let p = src.join(commit).join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    // a.c: OLD's base a1..a4, NEW's deletes a2 and inserts n1 after a3.
    put("c1", "fs/a.c", "a1\na2\na3\na4\n");
    put("c2", "fs/a.c", "a1\na3\nn1\na4\n");
    // gone.c exists only at OLD's base.
    put("c1", "gone.c", "x\n");
    let (old, new) = (d.path().join("old.jsonl"), d.path().join("new.jsonl"));
    write_result(
        &old,
        "c1",
        &[
            ("fs/a.c", &[(1, 1), (2, 4), (3, 2), (4, 0)]),
            ("gone.c", &[(1, 9)]),
        ],
    );
    write_result(&new, "c2", &[("fs/a.c", &[(1, 3), (2, 0), (3, 1), (4, 0)])]);
    let out = d.path().join("site");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let opts = Options {
        result: new.display().to_string(),
        source: Some(format!("dir:{}", src.display())),
        out: out.clone(),
        diff: Some(old.display().to_string()),
        threads: Some(1),
        manifest: None,
        budget: crate::budget::Budget::default(),
    };
    generate(&opts, rt.handle()).unwrap();
    let meta = script_arg(&out.join("data/meta.js"));
    // a1 CBC, a2 DCB, a3 LBC (NEW line 2), n1 GNC (3), a4 UBC; gone.c's x DCB.
    let cats = &meta["cats"];
    assert_eq!(cats[0], "c1");
    assert_eq!(
        cats[1]["categories"],
        serde_json::json!({"CBC": 1, "LBC": 1, "UBC": 1, "GNC": 1, "DCB": 2})
    );
    // The root's row: categories in lcov's order; lost = LBC + ECB, gained = GNC.
    let root = &meta["total"];
    assert_eq!(
        root["c"],
        serde_json::json!([1, 1, 0, 1, 0, 0, 0, 0, 1, 0, 2, 0])
    );
    assert_eq!((root["l"].as_u64(), root["g"].as_u64()), (Some(1), Some(1)));
    let f = script_arg(&out.join("data/f/0/0.js"));
    assert_eq!(f["path"], "fs/a.c");
    assert_eq!(
        f["cats"],
        serde_json::json!({"CBC": [1], "LBC": [2], "UBC": [4], "GNC": [3], "DCB": [2]})
    );
    assert_eq!(f["diff"]["lost"], serde_json::json!([2]));
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        index.contains(r#"data-sort="k1""#) && index.contains("cat-totals"),
        "{index}"
    );
    // Without a source, two bases are refused saying what to give.
    let e = generate(
        &Options {
            source: None,
            ..opts
        },
        rt.handle(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("give --source SRC"), "{e}");
}
