//! `covmerge report` and `covmerge diff` on the bundled example, checked in a real
//! browser: Debian's chromium driven through chromedriver (WebDriver, with fantoccini).
//! The test starts chromedriver itself and fails if it cannot (deploy/dev/test.sh
//! installs both). Screenshots go to target/report-screenshots/. It is one test on
//! purpose: one browser session walks the whole report, step by named step, since
//! starting Chromium for each check would cost seconds each.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use covmerge_integration_tests::{covmerge, gunzip, merge_ok, root};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

mod across;
mod groups;
mod paged;

const BASE: &str = "e052b7c4bab6e041517151cef3dc8c0f4b4a43d6";

/// The `*` and per-manager records of one file, from a result.
#[derive(Default, Debug)]
struct FileRec {
    /// manager -> line -> hits
    cov: BTreeMap<String, BTreeMap<u32, u64>>,
    funcs: Vec<(String, Vec<u32>)>,
}

/// A result read straight from its JSON lines: the test's own recomputation.
fn parse(path: &Path) -> BTreeMap<String, FileRec> {
    let text = String::from_utf8(gunzip(path)).unwrap();
    let mut files: BTreeMap<String, FileRec> = BTreeMap::new();
    for l in text.lines().skip(1) {
        let v: Value = serde_json::from_str(l).unwrap();
        if v["MCR"].is_object() {
            let m = &v["MCR"];
            let f = files
                .entry(m["FilePath"].as_str().unwrap().to_string())
                .or_default();
            let d = &m["FileData"];
            let lines = d["LinesInstrumented"].as_array().unwrap();
            let hits = d["HitCounts"].as_array().unwrap();
            let map = lines
                .iter()
                .zip(hits)
                .map(|(l, h)| (l.as_u64().unwrap() as u32, h.as_u64().unwrap()))
                .collect();
            f.cov
                .insert(m["Manager"].as_str().unwrap().to_string(), map);
        } else {
            let fl = &v["FL"];
            let f = files
                .entry(fl["FilePath"].as_str().unwrap().to_string())
                .or_default();
            let lines = fl["Lines"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect();
            f.funcs
                .push((fl["FuncName"].as_str().unwrap().to_string(), lines));
        }
    }
    files
}

/// (instrumented, covered) of manager `m` over files under `prefix` (a path prefix).
fn sums(files: &BTreeMap<String, FileRec>, prefix: &str, m: &str) -> (u64, u64) {
    let mut s = (0, 0);
    for (p, f) in files {
        if p.starts_with(prefix) {
            if let Some(c) = f.cov.get(m) {
                s.0 += c.len() as u64;
                s.1 += c.values().filter(|&&h| h > 0).count() as u64;
            }
        }
    }
    s
}

fn pct(i: u64, c: u64) -> String {
    if i == 0 {
        "–".into()
    } else {
        format!("{:.1}", c as f64 * 100.0 / i as f64)
    }
}

fn merge(dir: &Path, name: &str, inputs: &[&str]) -> PathBuf {
    merge_with(dir, name, inputs, &[])
}

/// [`merge`] with `extra` flags.
fn merge_with(dir: &Path, name: &str, inputs: &[&str], extra: &[&str]) -> PathBuf {
    let ex = root().join("examples/small");
    let out = dir.join(name);
    let mut args = vec![
        "--source".to_string(),
        format!("dir:{}", ex.join("sources").display()),
        "--base-repo".into(),
        "git://example.invalid/linux.git".into(),
        "--base-commit".into(),
        BASE.into(),
        "--out".into(),
        out.display().to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    args.push("--input".into());
    args.extend(inputs.iter().map(|i| ex.join(i).display().to_string()));
    merge_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    out
}

fn report(result: &Path, out: &Path, extra: &[&str]) -> String {
    let src = format!("dir:{}", root().join("examples/small/sources").display());
    let mut args = vec![
        "report",
        result.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    if !extra.contains(&"--no-source") {
        args.extend_from_slice(&["--source", &src]);
    } else {
        args.retain(|a| *a != "--no-source");
    }
    let o = covmerge(&args);
    assert!(
        o.status.success(),
        "covmerge {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// chromedriver on a free port, killed on drop.
struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_driver() -> Driver {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver must be installed (deploy/dev/test.sh installs chromium-driver)");
    let d = Driver { child, port };
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "chromedriver did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    d
}

async fn browser(d: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1400,1000"],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", d.port))
        .await
        .expect("a chromium session through chromedriver")
}

async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.unwrap()
}

/// Waits until the page says it has rendered everything it was loading.
async fn ready(c: &Client) {
    ready_at(c, "").await
}

/// Waits until the page at a URL ending in `page` has rendered.
async fn ready_at(c: &Client, page: &str) {
    let t = Instant::now();
    let check = format!(
        "return location.pathname.endsWith('{page}') && document.body && document.body.dataset.ready === 'yes'"
    );
    loop {
        if js(c, &check).await == true {
            return;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "page never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The tree's visible rows: [kind, name, depth, instrumented, covered, %, cells...].
async fn rows(c: &Client) -> Vec<Vec<String>> {
    let v = js(
        c,
        "return [...document.querySelectorAll('#rows tr')].map(tr => \
         [tr.dataset.kind, tr.dataset.depth, \
         ...[...tr.cells].map((td, i) => (i ? td : td.querySelector('.dname, a, .fname')).textContent)])",
    )
    .await;
    serde_json::from_value(v).unwrap()
}

fn url(p: &Path) -> String {
    format!("file://{}", p.display())
}

fn shot_dir() -> PathBuf {
    let d = root().join("target/report-screenshots");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A script returning the text of the element `id`.
fn text(id: &str) -> String {
    format!("return document.getElementById('{id}').textContent")
}

/// Finds `path` with the tree's filter and opens its page.
async fn open_file_page(c: &Client, path: &str) {
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
}

/// The managers of a result, sorted (`*` left out).
fn managers_of(files: &BTreeMap<String, FileRec>) -> Vec<String> {
    let mut m: Vec<String> = files
        .values()
        .flat_map(|f| f.cov.keys().cloned())
        .filter(|m| m != "*")
        .collect();
    m.sort();
    m.dedup();
    m
}

/// Totals and the top level, recomputed from the result.
async fn assert_totals_and_top_level(
    c: &Client,
    files: &BTreeMap<String, FileRec>,
    managers: &[String],
) {
    let (ti, tc) = sums(files, "", "*");
    assert_eq!(js(c, &text("total-instrumented")).await, ti.to_string());
    assert_eq!(js(c, &text("total-covered")).await, tc.to_string());
    let top = rows(c).await;
    let mut want_top: Vec<String> = files
        .keys()
        .map(|p| match p.split_once('/') {
            Some((d, _)) => format!("{d}/"),
            None => p.clone(),
        })
        .collect();
    want_top.dedup();
    assert_eq!(
        top.iter().map(|r| r[2].clone()).collect::<Vec<_>>(),
        want_top,
        "top level, directories first"
    );
    for r in &top {
        let prefix = r[2].clone();
        let (i, cv) = sums(files, &prefix, "*");
        assert_eq!(
            (r[3].as_str(), r[4].as_str()),
            (&*i.to_string(), &*cv.to_string()),
            "{prefix}"
        );
        assert_eq!(r[5], pct(i, cv), "{prefix} %");
        for (k, m) in managers.iter().enumerate() {
            let (mi, mc) = sums(files, &prefix, m);
            assert_eq!(r[6 + k], pct(mi, mc), "{prefix} manager {m}");
        }
    }
}

/// Expanding fs/ loads its directory script and shows its children, with numbers.
async fn assert_fs_expands(c: &Client, files: &BTreeMap<String, FileRec>) {
    c.find(Locator::Css("tr[data-kind=d][data-id] td.name"))
        .await
        .unwrap();
    js(
        c,
        "[...document.querySelectorAll('#rows tr')].find(tr => tr.cells[0].textContent.endsWith('fs/')).querySelector('button').click()",
    )
    .await;
    ready(c).await;
    let after = rows(c).await;
    let fs_children: Vec<&Vec<String>> = after.iter().filter(|r| r[1] == "1").collect();
    let mut want: Vec<String> = files
        .keys()
        .filter_map(|p| p.strip_prefix("fs/"))
        .map(|p| match p.split_once('/') {
            Some((d, _)) => format!("{d}/"),
            None => p.to_string(),
        })
        .collect();
    want.dedup();
    want.sort_by_key(|n| (!n.ends_with('/'), n.clone()));
    assert_eq!(
        fs_children.iter().map(|r| r[2].clone()).collect::<Vec<_>>(),
        want
    );
    for r in &fs_children {
        let (i, cv) = sums(files, &format!("fs/{}", r[2]), "*");
        assert_eq!(
            (r[3].clone(), r[4].clone()),
            (i.to_string(), cv.to_string())
        );
    }
}

/// Sorting by % (descending on the first click), then the "below X %" and "has
/// signal" filters, each turned off again.
async fn assert_sort_and_filters(c: &Client) {
    js(c, "document.querySelector('th[data-sort=p]').click()").await;
    let sorted = rows(c).await;
    let top_pcts: Vec<f64> = sorted
        .iter()
        .filter(|r| r[1] == "0")
        .map(|r| r[5].parse().unwrap_or(-1.0))
        .collect();
    assert!(
        top_pcts.windows(2).all(|w| w[0] >= w[1]),
        "sorted by %: {top_pcts:?}"
    );

    // "below X %" with X the coverage of the best-covered file shown hides that file.
    let x = sorted
        .iter()
        .filter(|r| r[0] == "f")
        .map(|r| r[5].parse::<f64>().unwrap())
        .fold(0.0, f64::max)
        .floor();
    js(
        c,
        &format!("document.getElementById('f-below-pct').value = '{x}'; const b = document.getElementById('f-below'); b.checked = true; b.dispatchEvent(new Event('input'))"),
    )
    .await;
    let below = rows(c).await;
    for r in below.iter().filter(|r| r[0] == "f") {
        let p: f64 = r[5].parse().unwrap();
        assert!(p <= x, "{r:?} shown with below {x} %");
    }
    let hidden = sorted.iter().filter(|r| r[0] == "f").count()
        - below.iter().filter(|r| r[0] == "f").count();
    assert!(hidden > 0, "no file hidden by below {x} %");
    js(c, "const b = document.getElementById('f-below'); b.checked = false; b.dispatchEvent(new Event('input'))").await;

    // "has signal" keeps only rows with covered lines.
    js(c, "const b = document.getElementById('f-signal'); b.checked = true; b.dispatchEvent(new Event('input'))").await;
    let signal = rows(c).await;
    for r in &signal {
        assert_ne!(r[4], "0", "{r:?} has no signal");
    }
    assert_eq!(signal.len(), sorted.iter().filter(|r| r[4] != "0").count());
    js(c, "const b = document.getElementById('f-signal'); b.checked = false; b.dispatchEvent(new Event('input'))").await;
}

/// Back to name order, the path filter `ext4/` loads data/paths.js, expands down to
/// the matches and hides the rest; returns the names shown.
async fn assert_path_filter(c: &Client, files: &BTreeMap<String, FileRec>) -> Vec<String> {
    js(c, "document.querySelector('th[data-sort=name]').click()").await;
    c.find(Locator::Id("f-text"))
        .await
        .unwrap()
        .send_keys("ext4/")
        .await
        .unwrap();
    let t = Instant::now();
    let filtered = loop {
        ready(c).await;
        let r = rows(c).await;
        if r.iter().any(|r| r[1] == "2") {
            break r;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "filter never applied: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let names: Vec<String> = filtered.iter().map(|r| r[2].clone()).collect();
    let mut want = vec!["fs/".to_string(), "ext4/".to_string()];
    want.extend(
        files
            .keys()
            .filter_map(|p| p.strip_prefix("fs/ext4/"))
            .map(String::from),
    );
    assert_eq!(names, want);
    names
}

/// The open file page of `path` (record `f`): line colours, hits and text, then the
/// functions table.
async fn assert_file_page(c: &Client, path: &str, f: &FileRec) {
    assert_eq!(js(c, &text("path")).await, path);
    let source =
        std::fs::read_to_string(root().join("examples/small/sources").join(BASE).join(path))
            .unwrap();
    let src_lines: Vec<&str> = source.lines().collect();
    let lines: Vec<(String, String, String)> = serde_json::from_value(
        js(
            c,
            "return [...document.querySelectorAll('#src tbody tr')].map(tr => \
             [tr.className, tr.querySelector('.hits').textContent, tr.querySelector('.code').textContent])",
        )
        .await,
    )
    .unwrap();
    assert_eq!(lines.len(), src_lines.len());
    let star = &f.cov["*"];
    for (i, (class, hits, code)) in lines.iter().enumerate() {
        let n = i as u32 + 1;
        assert_eq!(code, src_lines[i], "text of line {n}");
        match star.get(&n) {
            None => assert_eq!((class.as_str(), hits.as_str()), ("ni", ""), "line {n}"),
            Some(&h) => {
                assert_eq!(class, if h > 0 { "cov" } else { "unc" }, "line {n}");
                assert_eq!(hits, &h.to_string(), "hits of line {n}");
            }
        }
    }
    assert!(lines.iter().any(|l| l.0 == "cov") && lines.iter().any(|l| l.0 == "unc"));
    let funcs: Vec<Vec<String>> = serde_json::from_value(
        js(
            c,
            "return [...document.querySelectorAll('#funcs tbody tr')].map(tr => [...tr.cells].map(td => td.textContent))",
        )
        .await,
    )
    .unwrap();
    assert_eq!(funcs.len(), f.funcs.len());
    for (row, (name, fl)) in funcs.iter().zip(&f.funcs) {
        let cov = fl
            .iter()
            .filter(|l| star.get(l).is_some_and(|&h| h > 0))
            .count();
        assert_eq!(
            row[..3],
            [name.clone(), fl.len().to_string(), cov.to_string()]
        );
    }
}

/// Each manager of the open file page (record `f`) colours the lines with its own
/// hits, and the summary says its numbers.
async fn assert_manager_selector(c: &Client, f: &FileRec) {
    for (k, (m, mc)) in f.cov.iter().filter(|(m, _)| *m != "*").enumerate() {
        c.find(Locator::Id("manager"))
            .await
            .unwrap()
            .select_by_value(&(k + 1).to_string())
            .await
            .unwrap();
        let classes: Vec<String> = serde_json::from_value(
            js(
                c,
                "return [...document.querySelectorAll('#src tbody tr')].map(tr => tr.className)",
            )
            .await,
        )
        .unwrap();
        for (i, class) in classes.iter().enumerate() {
            let want = match mc.get(&(i as u32 + 1)) {
                None => "ni",
                Some(0) => "unc",
                Some(_) => "cov",
            };
            assert_eq!(class, want, "manager {m}, line {}", i + 1);
        }
        let (mi, mcv) = (mc.len(), mc.values().filter(|&&h| h > 0).count());
        assert_eq!(
            js(c, &text("fsum")).await,
            format!(
                "{mcv} / {mi} lines covered ({} %)",
                pct(mi as u64, mcv as u64)
            )
            .as_str()
        );
    }
}

/// Without a source (a report of `full` into `bare`) the open file's page still
/// shows every instrumented line of `f`, with no text.
async fn assert_page_without_source(c: &Client, full: &Path, bare: &Path, f: &FileRec) {
    report(full, bare, &["--no-source"]);
    let id = js(c, "return location.hash.slice(1)").await;
    c.goto(&format!(
        "{}#{}",
        url(&bare.join("file.html")),
        id.as_str().unwrap()
    ))
    .await
    .unwrap();
    ready(c).await;
    let n: u64 = serde_json::from_value(
        js(
            c,
            "return document.querySelectorAll('#src tbody tr').length",
        )
        .await,
    )
    .unwrap();
    assert_eq!(n, *f.cov["*"].keys().max().unwrap() as u64);
    let note = js(c, &text("note")).await;
    assert!(
        note.as_str().unwrap().starts_with("Source text not shown"),
        "{note}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_in_a_real_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let full = merge(
        tmp.path(),
        "full.jsonl.gz",
        &["input-00.csv.gz", "input-01.csv.gz"],
    );
    let site = tmp.path().join("site");
    let out = report(&full, &site, &[]);
    assert!(out.contains("first page: "), "{out}");
    let files = parse(&full);
    let managers = managers_of(&files);
    assert_eq!(managers.len(), 3);

    let driver = start_driver();
    let c = browser(&driver).await;
    c.goto(&url(&site.join("index.html"))).await.unwrap();
    ready(&c).await;
    assert_totals_and_top_level(&c, &files, &managers).await;
    assert_fs_expands(&c, &files).await;
    std::fs::write(shot_dir().join("tree.png"), c.screenshot().await.unwrap()).unwrap();
    assert_sort_and_filters(&c).await;
    let shown = assert_path_filter(&c, &files).await;

    // A file page: line colours, hits, text, functions, the manager selector.
    let path = "fs/ext4/".to_string() + &shown[2];
    js(
        &c,
        &format!(
            "[...document.querySelectorAll('#rows a')].find(a => a.textContent === '{}').click()",
            shown[2]
        ),
    )
    .await;
    ready_at(&c, "file.html").await;
    let f = &files[&path];
    assert_file_page(&c, &path, f).await;
    std::fs::write(shot_dir().join("file.png"), c.screenshot().await.unwrap()).unwrap();
    assert_manager_selector(&c, f).await;
    assert_page_without_source(&c, &full, &tmp.path().join("bare"), f).await;

    groups::groups_view(&c, tmp.path()).await;
    diff_view(&c, tmp.path()).await;
    paged::paged_view(&c, tmp.path()).await;
    across::across_view(&c, tmp.path()).await;
    c.close().await.unwrap();
}

/// `covmerge diff` of the example's two parts, and the report's gained/lost view.
async fn diff_view(c: &Client, dir: &Path) {
    let a = merge(dir, "a.jsonl.gz", &["input-00.csv.gz"]);
    let b = merge(dir, "b.jsonl.gz", &["input-01.csv.gz"]);
    let d = dir.join("d.jsonl");
    let o = covmerge(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--out",
        d.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<Value> = std::fs::read_to_string(&d)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let totals = &lines.last().unwrap()["totals"];
    let (fa, fb) = (parse(&a), parse(&b));
    let (ai, ac) = sums(&fa, "", "*");
    let (bi, bc) = sums(&fb, "", "*");
    assert_eq!(totals["old"], json!({"instrumented": ai, "covered": ac}));
    assert_eq!(totals["new"], json!({"instrumented": bi, "covered": bc}));
    let (g, l) = (
        totals["gained"].as_i64().unwrap(),
        totals["lost"].as_i64().unwrap(),
    );
    assert_eq!(bc as i64 - ac as i64, g - l);
    assert!(
        g > 0 && l > 0,
        "the example's halves differ both ways: {totals}"
    );

    let site = dir.join("diff-site");
    report(&b, &site, &["--diff", a.to_str().unwrap()]);
    c.goto(&url(&site.join("index.html"))).await.unwrap();
    ready(c).await;
    assert_eq!(js(c, &text("total-gained")).await, format!("+{g}").as_str());
    assert_eq!(js(c, &text("total-lost")).await, format!("−{l}").as_str());
    js(c, "document.getElementById('sort-drop').click()").await;
    let r = rows(c).await;
    // Columns: kind, depth, name, instr, covered, %, gained, lost, managers...
    let lost: Vec<i64> = r
        .iter()
        .map(|r| r[7].trim_start_matches('−').parse().unwrap_or(0))
        .collect();
    assert!(
        lost.windows(2).all(|w| w[0] >= w[1]),
        "coverage drop order: {lost:?}"
    );
    std::fs::write(shot_dir().join("diff.png"), c.screenshot().await.unwrap()).unwrap();

    // A file with lost lines: its page marks exactly the diff's lines.
    let changed = lines
        .iter()
        .find(|v| v["lost"].as_array().is_some_and(|a| !a.is_empty()) && v["status"] == "changed")
        .expect("a changed file with lost lines");
    open_file_page(c, changed["file"].as_str().unwrap()).await;
    let marks: BTreeMap<String, Vec<u64>> = serde_json::from_value(
        js(
            c,
            "const o = {gained: [], lost: []}; document.querySelectorAll('#src tbody tr[data-diff]').forEach((tr, i) => o[tr.dataset.diff].push(Number(tr.id.slice(1)))); return o",
        )
        .await,
    )
    .unwrap();
    assert_eq!(json!(marks["lost"]), changed["lost"]);
    assert_eq!(json!(marks["gained"]), changed["gained"]);
}
