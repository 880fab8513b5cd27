//! The report against an older result on another base: lcov's categories.

use super::*;

/// The report against an older result on another base (a generated git history): the
/// category totals, a category column sorted, and a file page's category labels.
pub(super) async fn across_view(c: &Client, dir: &Path) {
    let spec = covmerge_corpus::CorpusSpec {
        seed: 5,
        files: 12,
        lines: 120,
        commits: 5,
        managers: 2,
        manager_commit_share: 0.6,
        no_edge_cases: true,
        ..covmerge_corpus::CorpusSpec::default()
    };
    let corpus = covmerge_corpus::generate(&spec, &dir.join("history")).unwrap();
    let src = format!("git:{}", corpus.git.as_ref().unwrap().display());
    let merged = |input: &Path, base: &str, name: &str| {
        let out = dir.join(name);
        merge_ok(&[
            "--source",
            &src,
            "--base-repo",
            &corpus.base_repo,
            "--base-commit",
            base,
            "--date-to",
            "2024-04-08",
            "--input",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        out
    };
    let old = merged(&corpus.inputs[0], &corpus.commits[1], "h-old.gz");
    let new = merged(&corpus.inputs[1], &corpus.commits[4], "h-new.gz");
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
    let lines: Vec<Value> = std::fs::read_to_string(&d)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let totals = &lines.last().unwrap()["totals"]["categories"];
    let site = dir.join("across-site");
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
    // The totals table says what the diff says.
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
    std::fs::write(shot_dir().join("across.png"), c.screenshot().await.unwrap()).unwrap();

    // A changed file's page labels each of its lines at the new base with its
    // category, as the diff has them.
    let changed = lines
        .iter()
        .find(|v| {
            v["status"] == "changed"
                && v["text"] == "changed"
                && v["categories"]["GNC"].as_u64().is_some()
        })
        .expect("a changed file with covered new lines");
    let path = changed["file"].as_str().unwrap();
    js(
        c,
        &format!("document.getElementById('f-text').value = '{path}'; document.getElementById('f-text').dispatchEvent(new Event('input'))"),
    )
    .await;
    let name = path.rsplit('/').next().unwrap();
    let t = Instant::now();
    loop {
        ready(c).await;
        let found = js(c, &format!("const a = [...document.querySelectorAll('#rows a')].find(a => a.textContent === '{name}'); if (a) a.click(); return !!a")).await;
        if found == true {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{path} not found by the filter"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ready_at(c, "file.html").await;
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
    std::fs::write(
        shot_dir().join("across-file.png"),
        c.screenshot().await.unwrap(),
    )
    .unwrap();
}
