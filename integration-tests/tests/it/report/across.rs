//! The report against an older result on another base: lcov's categories.

use covmerge_integration_tests::{CorpusJob, FleetCorpus};

use super::*;

/// A generated git history's two parts merged onto two bases, and `covmerge diff` of
/// them: the OLD and NEW results and the diff's records.
fn two_bases(s: &CorpusJob, dir: &Path) -> (PathBuf, PathBuf, Vec<Value>) {
    let (corpus, src) = (&s.corpus, s.git_source());
    let (old, new) = (dir.join("h-old.gz"), dir.join("h-new.gz"));
    s.merge_onto(&src, &corpus.inputs[0], &corpus.commits[1], &old);
    s.merge_onto(&src, &corpus.inputs[1], &corpus.commits[4], &new);
    let d = dir.join("h-diff.jsonl");
    let o = covmerge(&[
        "diff",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
        "--source",
        &src,
        "--out",
        d.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = std::fs::read_to_string(&d)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (old, new, lines)
}

/// The totals table says what the diff says (`totals`), the top level's lost column
/// is LBC + ECB, and sorting by a category column orders the rows by it.
async fn assert_category_totals(c: &Client, totals: &Value) {
    let shown: BTreeMap<String, u64> = serde_json::from_value(
        js(
            c,
            "const o = {}; document.querySelectorAll('#cat-totals td[data-cat]').forEach(td => { if (td.textContent !== '0') o[td.dataset.cat] = Number(td.textContent); }); return o",
        )
        .await,
    )
    .unwrap();
    assert_eq!(json!(shown), *totals);
    let lost = totals["LBC"].as_u64().unwrap_or(0) + totals["ECB"].as_u64().unwrap_or(0);
    let root_lost: u64 = rows(c)
        .await
        .iter()
        .map(|r| r[7].trim_start_matches('−').parse::<u64>().unwrap_or(0))
        .sum();
    assert_eq!(root_lost, lost, "lost = LBC + ECB over the top level");
    // Sorting by a category column (GNC: new lines covered) orders the rows by it.
    js(
        c,
        "document.querySelector('#tree th[data-sort=\"k8\"]').click()",
    )
    .await;
    let r = rows(c).await;
    // Columns: kind, depth, name, instr, covered, %, gained, lost, CBC..DUB, managers.
    let gnc: Vec<u64> = r.iter().map(|r| r[16].parse().unwrap_or(0)).collect();
    assert!(gnc.windows(2).all(|w| w[0] >= w[1]), "GNC order: {gnc:?}");
    assert_eq!(gnc.iter().sum::<u64>(), totals["GNC"].as_u64().unwrap_or(0));
}

/// A changed file's page labels each of its lines at the new base with its category,
/// as the diff's record `changed` has them.
async fn assert_file_categories(c: &Client, changed: &Value) {
    open_file_page(c, changed["file"].as_str().unwrap()).await;
    let marks: BTreeMap<String, Vec<u64>> = serde_json::from_value(
        js(
            c,
            "const o = {}; document.querySelectorAll('#src tbody tr[data-cat]').forEach(tr => (o[tr.dataset.cat] = o[tr.dataset.cat] || []).push(Number(tr.id.slice(1)))); return o",
        )
        .await,
    )
    .unwrap();
    let mut want = changed["lines"].as_object().unwrap().clone();
    want.remove("DCB");
    want.remove("DUB");
    assert_eq!(json!(marks), Value::Object(want));
    let note = js(c, "return document.getElementById('cats').textContent").await;
    assert!(note.as_str().unwrap().contains("GNC"), "{note}");
}

/// The report against an older result on another base (a generated git history): the
/// category totals, a category column sorted, and a file page's category labels.
pub(super) async fn across_view(c: &Client, dir: &Path) {
    let s = FleetCorpus::local(5)
        .git()
        .lines(120)
        .managers(2)
        .parts(2)
        .manager_commit_share(0.6)
        .no_edge_cases()
        .build();
    let (old, new, lines) = two_bases(&s, dir);
    let totals = &lines.last().unwrap()["totals"]["categories"];
    let site = dir.join("across-site");
    let src = s.git_source();
    let args = [
        "report",
        new.to_str().unwrap(),
        "--out",
        site.to_str().unwrap(),
        "--diff",
        old.to_str().unwrap(),
        "--source",
        &src,
    ];
    let o = covmerge(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    c.goto(&url(&site.join("index.html"))).await.unwrap();
    ready(c).await;
    assert_category_totals(c, totals).await;
    std::fs::write(shot_dir().join("across.png"), c.screenshot().await.unwrap()).unwrap();

    let changed = lines
        .iter()
        .find(|v| {
            v["status"] == "changed"
                && v["text"] == "changed"
                && v["categories"]["GNC"].as_u64().is_some()
        })
        .expect("a changed file with covered new lines");
    assert_file_categories(c, changed).await;
    std::fs::write(
        shot_dir().join("across-file.png"),
        c.screenshot().await.unwrap(),
    )
    .unwrap();
}
