//! The report of a result with groups (`merge --group`, `report --manifest`): group
//! columns after the managers', marked; unique lines per manager in the tree and on
//! the file pages, groups never counting as managers.

use super::*;

/// Per file: line -> the one manager (of `managers`) that covered it, if only one did.
fn unique(
    files: &BTreeMap<String, FileRec>,
    managers: &[String],
) -> BTreeMap<String, BTreeMap<u32, String>> {
    files
        .iter()
        .map(|(p, f)| {
            let mut by: BTreeMap<u32, Vec<&String>> = BTreeMap::new();
            for m in managers {
                for (&l, &h) in f.cov.get(m).into_iter().flatten() {
                    if h > 0 {
                        by.entry(l).or_default().push(m);
                    }
                }
            }
            let one = by
                .into_iter()
                .filter(|(_, ms)| ms.len() == 1)
                .map(|(l, ms)| (l, ms[0].clone()))
                .collect();
            (p.clone(), one)
        })
        .collect()
}

/// Columns: the managers by name, then the groups as given, marked as groups; group
/// cells hold the group records' numbers, `all` is the `*` record.
async fn assert_group_columns(c: &Client, files: &BTreeMap<String, FileRec>, managers: &[String]) {
    let heads: Vec<(String, bool)> = serde_json::from_value(
        js(
            c,
            "return [...document.querySelectorAll('#tree th.mgr')].map(th => [th.textContent, th.classList.contains('grp')])",
        )
        .await,
    )
    .unwrap();
    let want_heads: Vec<(String, bool)> = managers
        .iter()
        .map(|m| (m.clone(), false))
        .chain([("Σ san".to_string(), true), ("Σ all".to_string(), true)])
        .collect();
    assert_eq!(heads, want_heads);
    let sub = js(c, "return document.querySelector('p.sub').textContent").await;
    assert!(
        sub.as_str().unwrap().contains("3 managers · 2 groups"),
        "{sub}"
    );

    // Group cells hold the group records' numbers; `all` is the `*` record.
    let top = rows(c).await;
    for r in &top {
        let prefix = r[2].clone();
        for (k, g) in ["san", "all"].iter().enumerate() {
            let (gi, gc) = sums(files, &prefix, g);
            assert_eq!(r[6 + 3 + k], pct(gi, gc), "{prefix} group {g}");
        }
        assert_eq!(r[6 + 4], r[5], "{prefix}: all = *");
    }
    let grp_cells = js(c, "return document.querySelectorAll('#rows td.grp').length").await;
    assert_eq!(grp_cells, json!(2 * top.len()));
}

/// Unique lines: per manager column, the lines only it covered below each row
/// (`only`); nothing for the groups; sorting by a manager column sorts by them.
async fn assert_unique_lines(
    c: &Client,
    only: &BTreeMap<String, BTreeMap<u32, String>>,
    managers: &[String],
) {
    js(c, "const b = document.getElementById('f-unique'); b.checked = true; b.dispatchEvent(new Event('input'))").await;
    let uniq_rows = rows(c).await;
    let mut any = 0;
    for r in &uniq_rows {
        let prefix = r[2].clone();
        for (k, m) in managers.iter().enumerate() {
            let n: usize = only
                .iter()
                .filter(|(p, _)| p.starts_with(&prefix))
                .map(|(_, lines)| lines.values().filter(|w| *w == m).count())
                .sum();
            any += n;
            let want = if n == 0 { String::new() } else { n.to_string() };
            assert_eq!(r[6 + k], want, "{prefix}: lines only {m} covered");
        }
        assert_eq!(
            (r[6 + 3].as_str(), r[6 + 4].as_str()),
            ("", ""),
            "{prefix}: groups"
        );
    }
    assert!(any > 0, "the example has lines only one manager covered");
    std::fs::write(shot_dir().join("groups.png"), c.screenshot().await.unwrap()).unwrap();
    // Sorting by a manager column in this mode sorts by its unique lines.
    js(c, "document.querySelector('th[data-sort=m1]').click()").await;
    let sorted: Vec<i64> = rows(c)
        .await
        .iter()
        .map(|r| r[6 + 1].parse().unwrap_or(0))
        .collect();
    assert!(sorted.windows(2).all(|w| w[0] >= w[1]), "{sorted:?}");
    js(c, "const b = document.getElementById('f-unique'); b.checked = false; b.dispatchEvent(new Event('input'))").await;
}

/// The page of `path` (found by the path filter) marks each line covered by one
/// manager with that manager (`lines`), and labels the groups in the manager selector.
async fn assert_file_page_marks(c: &Client, path: &str, lines: &BTreeMap<u32, String>) {
    open_file_page(c, path).await;
    let marked: BTreeMap<u32, String> = serde_json::from_value::<Vec<(u32, String)>>(
        js(
            c,
            "return [...document.querySelectorAll('#src tbody tr[data-only]')].map(tr => [Number(tr.id.slice(1)), tr.dataset.only])",
        )
        .await,
    )
    .unwrap()
    .into_iter()
    .collect();
    assert_eq!(&marked, lines, "{path}: lines only one manager covered");
    assert!(!marked.is_empty());
    let options: Vec<String> = serde_json::from_value(
        js(
            c,
            "return [...document.querySelectorAll('#manager option')].map(o => o.textContent)",
        )
        .await,
    )
    .unwrap();
    assert!(options.contains(&"san (group)".to_string()), "{options:?}");
    assert!(
        options.contains(&"ci-upstream-kasan-gce-0".to_string()),
        "{options:?}"
    );
}

pub(super) async fn groups_view(c: &Client, dir: &Path) {
    let manifest = dir.join("groups.manifest.json");
    let result = merge_with(
        dir,
        "groups.jsonl.gz",
        &["input-00.csv.gz", "input-01.csv.gz"],
        &[
            "--manifest",
            manifest.to_str().unwrap(),
            "--group",
            "san=*san*",
            "--group",
            "all=*",
        ],
    );
    let files = parse(&result);
    let managers = [
        "ci-upstream-gce-leak-2",
        "ci-upstream-kasan-gce-0",
        "ci-upstream-kmsan-gce-1",
    ]
    .map(String::from);
    let only = unique(&files, &managers);

    let site = dir.join("groups-site");
    let out = report(&result, &site, &["--manifest", manifest.to_str().unwrap()]);
    assert!(out.contains("3 managers, 2 groups to"), "{out}");
    c.goto(&url(&site.join("index.html"))).await.unwrap();
    ready(c).await;
    assert_group_columns(c, &files, &managers).await;
    assert_unique_lines(c, &only, &managers).await;

    // A file page marks each line covered by one manager with that manager, and labels
    // the groups in the manager selector.
    let (path, lines) = only.iter().max_by_key(|(_, l)| l.len()).unwrap();
    assert_file_page_marks(c, path, lines).await;
}
