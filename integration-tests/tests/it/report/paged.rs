//! A tall source file in the report: its text in pages, a function link opening its page.

use super::*;

/// A file page of a 25,000-line source: its text comes in pages of 10,000 lines, one
/// page shown at a time; a function's link opens its page. Its record and the next
/// file's share one group script.
pub(super) async fn paged_view(c: &Client, dir: &Path) {
    let src = dir.join("tall-src");
    std::fs::create_dir_all(src.join(BASE)).unwrap();
    let n = 25_000u32;
    let text: String = (1..=n).map(|i| format!("int tall_{i};\n")).collect();
    std::fs::write(src.join(BASE).join("tall.c"), text).unwrap();
    std::fs::write(src.join(BASE).join("small.c"), "int small;\n").unwrap();
    let head = format!(
        r#"{{"Session":"","Time":"0001-01-01T00:00:00Z","Namespace":"upstream","Repo":"git://r","Commit":"{BASE}","Duration":30,"DateTo":"2024-04-08","TotalRows":1}}"#
    );
    let mcr = |p: &str, l: &str, h: &str, i: usize, cv: usize| {
        format!(
            r#"{{"MCR":{{"Manager":"*","FilePath":"{p}","FileData":{{"Instrumented":{i},"Covered":{cv},"LinesInstrumented":[{l}],"HitCounts":[{h}]}}}},"FL":null}}"#
        )
    };
    let result = [
        head,
        mcr("tall.c", "3,12345,25000", "1,0,5", 3, 2),
        r#"{"MCR":null,"FL":{"FilePath":"tall.c","FuncName":"far","Lines":[24990,25000]}}"#
            .to_string(),
        mcr("small.c", "1", "4", 1, 1),
    ]
    .join("\n");
    let r = dir.join("tall.jsonl");
    std::fs::write(&r, result + "\n").unwrap();
    let site = dir.join("tall-site");
    let o = covmerge(&[
        "report",
        r.to_str().unwrap(),
        "--source",
        &format!("dir:{}", src.display()),
        "--out",
        site.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let group = std::fs::read_to_string(site.join("data/f/0/0.js")).unwrap();
    assert_eq!(
        group.matches("covmerge.file(").count(),
        2,
        "one group script"
    );
    assert_eq!(std::fs::read_dir(site.join("data/t/0")).unwrap().count(), 3);

    let shown = || async {
        let v: Vec<(String, String, String, String)> = serde_json::from_value(
            js(
                c,
                "return [...document.querySelectorAll('#src tbody tr')].map(tr => \
                 [tr.id, tr.className, tr.querySelector('.hits').textContent, tr.querySelector('.code').textContent])",
            )
            .await,
        )
        .unwrap();
        v
    };
    let pageno = "return document.getElementById('pageno').textContent";
    c.goto(&format!("{}#0", url(&site.join("file.html"))))
        .await
        .unwrap();
    ready(c).await;
    let p1 = shown().await;
    assert_eq!(p1.len(), 10_000);
    assert_eq!(js(c, pageno).await, "lines 1–10000 (page 1 of 3)");
    assert_eq!(
        p1[2],
        ("L3".into(), "cov".into(), "1".into(), "int tall_3;".into())
    );
    assert_eq!((p1[0].1.as_str(), p1[0].3.as_str()), ("ni", "int tall_1;"));
    js(c, "document.getElementById('next').click()").await;
    ready(c).await;
    let p2 = shown().await;
    assert_eq!(js(c, pageno).await, "lines 10001–20000 (page 2 of 3)");
    assert_eq!(p2[0].0, "L10001");
    assert_eq!(
        p2[2344],
        (
            "L12345".into(),
            "unc".into(),
            "0".into(),
            "int tall_12345;".into()
        )
    );
    // The function on page 3: its link loads that page.
    js(c, "document.querySelector('#funcs button').click()").await;
    ready(c).await;
    let p3 = shown().await;
    assert_eq!(js(c, pageno).await, "lines 20001–25000 (page 3 of 3)");
    assert_eq!(p3.len(), 5_000);
    assert_eq!(
        p3[4_999],
        (
            "L25000".into(),
            "cov".into(),
            "5".into(),
            "int tall_25000;".into()
        )
    );
    assert_eq!(
        js(c, "return document.getElementById('fsum').textContent").await,
        "2 / 3 lines covered (66.7 %)"
    );
    // The other file of the group, from the same script (a new page, not a new hash).
    c.goto("about:blank").await.unwrap();
    c.goto(&format!("{}#1", url(&site.join("file.html"))))
        .await
        .unwrap();
    ready(c).await;
    assert_eq!(
        shown().await,
        vec![("L1".into(), "cov".into(), "4".into(), "int small;".into())]
    );
    assert_eq!(
        js(c, "return document.getElementById('pages').hidden").await,
        true
    );
}
