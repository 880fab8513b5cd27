//! The site's HTML, with maud: `index.html` (totals, filters and the tree, whose top
//! level is rendered here so the first page shows numbers before any script runs) and
//! `file.html` (the shell that `assets/file.js` fills from a file's data script). Rows
//! rendered here and by `assets/app.js` have the same cells and classes.

use std::path::Path;

use anyhow::Result;
use maud::{html, Markup, DOCTYPE};

use super::data::{children, dir_row, script_path, Row};
use super::{APP_JS, FILE_JS, STYLE_CSS};
use crate::diff::across::CatTotals;
use crate::diff::categories::ALL;
use crate::diff::Totals;
use crate::read::Header;
use crate::tree::Tree;

/// Coverage in % with one decimal, or `–` with nothing instrumented.
pub(super) fn pct_text(instrumented: u64, covered: u64) -> String {
    if instrumented == 0 {
        "–".into()
    } else {
        format!("{:.1}", covered as f64 * 100.0 / instrumented as f64)
    }
}

/// The heat colour of a coverage cell: red at 0 %, green at 100 % (as app.js's `heat`).
pub(super) fn heat(instrumented: u64, covered: u64) -> Option<String> {
    (instrumented > 0).then(|| {
        let hue = (covered as f64 * 120.0 / instrumented as f64).round();
        format!("background:hsl({hue},70%,80%)")
    })
}

fn pct_cell(i: u64, c: u64, title: Option<String>) -> Markup {
    html! {
        td.pct style=[heat(i, c)] title=[title] { (pct_text(i, c)) }
    }
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) }
            link rel="stylesheet" href="assets/style.css";
        }
    }
}

/// A row's `[instrumented, covered, unique]` for every manager column (one pass over
/// its sparse lists, not one search per column).
fn dense(r: &Row<'_>, managers: usize) -> Vec<[u64; 3]> {
    let mut v = vec![[0, 0, 0]; managers];
    for m in &r.m {
        v[m[0] as usize] = [m[1], m[2], 0];
    }
    for u in &r.u {
        v[u[0] as usize][2] = u[1];
    }
    v
}

/// One tree row (the same as app.js's `rowEl`).
fn row(r: &Row<'_>, t: &Tree, diff: bool) -> Markup {
    let cats = r.c.unwrap_or_default();
    let dir = r.k == "d";
    html! {
        tr.row.dir[dir].file[!dir].del[r.del] data-id=(r.id) data-kind=(r.k) data-depth="0" {
            td.name {
                @if dir {
                    button.tog type="button" aria-expanded="false" { "▸" }
                    span.dname { (r.name) "/" }
                } @else if r.del {
                    span.fname title="only in the older result" { (r.name) }
                } @else {
                    a href={ "file.html#" (r.id) } { (r.name) }
                }
            }
            td.num { (r.n[0]) }
            td.num { (r.n[1]) }
            (pct_cell(r.n[0], r.n[1], None))
            @if diff {
                td.num.gained { @if r.g > 0 { "+" (r.g) } }
                td.num.lost { @if r.l > 0 { "−" (r.l) } }
            }
            @if r.c.is_some() {
                @for n in cats {
                    td.num.cat { @if n > 0 { (n) } }
                }
            }
            @for (col, c) in dense(r, t.managers.len()).into_iter().enumerate() {
                @let group = is_group(t, col);
                @let title = (c[0] > 0).then(|| if group {
                    format!("{} / {}", c[1], c[0])
                } else {
                    format!("{} / {}, {} unique", c[1], c[0], c[2])
                });
                td.pct.grp[group] style=[heat(c[0], c[1])] title=[title] { (pct_text(c[0], c[1])) }
            }
        }
    }
}

fn is_group(t: &Tree, col: usize) -> bool {
    t.groups.iter().any(|g| g.0 as usize == col)
}

/// The category columns' headers (sorted by `k0`..`k11`).
fn cat_heads() -> Markup {
    html! {
        @for (i, c) in ALL.iter().enumerate() {
            th.cat data-sort={ "k" (i) } title=(cat_title(c.name())) { (c.name()) }
        }
    }
}

/// What a category means, for its column's title.
fn cat_title(name: &str) -> &'static str {
    match name {
        "CBC" => "unchanged line, covered in both",
        "LBC" => "unchanged line, covered before, not now (lost)",
        "GBC" => "unchanged line, covered now, not before",
        "UBC" => "unchanged line, instrumented in both, covered in neither",
        "ECB" => "unchanged line no longer instrumented, was covered (lost)",
        "EUB" => "unchanged line no longer instrumented, was not covered",
        "GIC" => "unchanged line newly instrumented, covered",
        "UIC" => "unchanged line newly instrumented, not covered",
        "GNC" => "new or changed line, covered",
        "UNC" => "new or changed line, not covered",
        "DCB" => "deleted line, was covered",
        _ => "deleted line, was not covered",
    }
}

fn index(
    h: &Header,
    t: &Tree,
    diff: Option<&(String, Totals)>,
    cats: Option<&(String, CatTotals)>,
) -> Result<Markup> {
    let root = dir_row(&t.dirs[0]);
    let top = children(t, &t.dirs[0])?;
    let title = format!("Coverage of {} at {}", h.repo, short(&h.commit));
    Ok(html! {
        (DOCTYPE)
        html lang="en" {
            (head(&title))
            body data-page="tree" {
                header {
                    h1 { "Coverage of " code { (h.repo) } " at " code title=(h.commit) { (short(&h.commit)) } }
                    p.sub {
                        (h.namespace) " · up to " (h.date_to) " · " (h.duration) " days · "
                        (t.managers.len() - t.groups.len()) " managers · "
                        @if !t.groups.is_empty() { (t.groups.len()) " groups · " }
                        (t.files) " files"
                    }
                }
                table.totals id="totals" {
                    tr { th { "Instrumented" } th { "Covered" } th { "Coverage %" }
                        @if diff.is_some() { th { "Gained" } th { "Lost" } th { "Before" } } }
                    tr {
                        td.num id="total-instrumented" { (root.n[0]) }
                        td.num id="total-covered" { (root.n[1]) }
                        (pct_cell(root.n[0], root.n[1], None))
                        @if let Some((old, d)) = diff {
                            td.num.gained id="total-gained" { "+" (d.gained) }
                            td.num.lost id="total-lost" { "−" (d.lost) }
                            td title=(old) { (d.old.covered) " / " (d.old.instrumented) " (" (pct_text(d.old.instrumented, d.old.covered)) " %)" }
                        }
                    }
                }
                @if let (Some((old, _)), None) = (diff, cats) {
                    p.sub { "Gained and lost lines against " code { (old) } " (same base commit)." }
                }
                @if let (Some((old, _)), Some((base, ct))) = (diff, cats) {
                    p.sub {
                        "Changes against " code { (old) } " on base " code title=(base) { (short(base)) }
                        ", in lcov's categories: gained = GBC + GIC + GNC, lost = LBC + ECB."
                    }
                    table.totals.cats id="cat-totals" {
                        tr { @for c in ALL { th title=(cat_title(c.name())) { (c.name()) } } }
                        tr { @for c in ALL { td.num data-cat=(c.name()) { (ct.categories.get(c)) } } }
                    }
                }
                div.controls {
                    label { input id="f-signal" type="checkbox"; " has signal" }
                    label { input id="f-below" type="checkbox"; " below " input id="f-below-pct" type="number" value="50" min="0" max="100" step="1"; " %" }
                    label { "path " input id="f-text" type="search" placeholder="e.g. fs/ext4" autocomplete="off"; }
                    label title="per manager column: lines that manager covered and no other manager did (groups aside)" {
                        input id="f-unique" type="checkbox"; " unique lines"
                    }
                    @if diff.is_some() { button id="sort-drop" type="button" { "Coverage drop" } }
                    span id="status" {}
                }
                div.scroll {
                    table.tree id="tree" {
                        thead { tr {
                            th data-sort="name" { "Path" }
                            th data-sort="i" { "Instr." }
                            th data-sort="c" { "Covered" }
                            th data-sort="p" { "%" }
                            @if diff.is_some() { th data-sort="g" { "Gained" } th data-sort="l" { "Lost" } }
                            @if cats.is_some() { (cat_heads()) }
                            @for (col, m) in t.managers.iter().enumerate() {
                                @if let Some((_, glob)) = t.groups.iter().find(|g| g.0 as usize == col) {
                                    th.mgr.grp data-sort={ "m" (col) } title={ "group " (m) " = " (glob) ": the sum of the managers matching " (glob) } { span { "Σ " (m) } }
                                } @else {
                                    th.mgr data-sort={ "m" (col) } title=(m) { span { (m) } }
                                }
                            }
                        } }
                        tbody id="rows" {
                            @for r in &top { (row(r, t, diff.is_some())) }
                        }
                    }
                }
                script src="assets/app.js" {}
                script src="data/meta.js" {}
                script src=(script_path("d", 0)) {}
            }
        }
    })
}

fn file_page(h: &Header, diff: bool) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head("Coverage: file"))
            body data-page="file" {
                nav { a href="index.html" { "← tree" } " " span id="crumbs" {} }
                h1 id="path" { "loading…" }
                p.note id="note" {}
                div.controls {
                    label { "Manager " select id="manager" {} }
                    span id="fsum" {}
                }
                h2 { "Functions" }
                table.funcs id="funcs" {
                    thead { tr { th { "Function" } th { "Lines" } th { "Covered" } th { "%" } } }
                    tbody {}
                }
                h2 { "Source at " code title=(h.commit) { (short(&h.commit)) } }
                div.controls id="pages" hidden {
                    button id="prev" type="button" { "‹ previous" }
                    " " span id="pageno" {} " "
                    button id="next" type="button" { "next ›" }
                }
                table.src id="src" {
                    thead { tr { th { "Line" } th { "Hits" } th title="the one manager that covered the line, if only one did (groups aside)" { "Only" } @if diff { th { "Δ" } } th { "Source" } } }
                    tbody {}
                }
                script src="assets/file.js" {}
            }
        }
    }
}

/// Writes the pages and the assets; returns the bytes written.
pub(super) fn write_pages(
    out: &Path,
    h: &Header,
    t: &Tree,
    diff: Option<&(String, Totals)>,
    cats: Option<&(String, CatTotals)>,
) -> Result<u64> {
    let files: [(&str, String); 5] = [
        ("index.html", index(h, t, diff, cats)?.into_string()),
        ("file.html", file_page(h, diff.is_some()).into_string()),
        ("assets/app.js", APP_JS.to_string()),
        ("assets/file.js", FILE_JS.to_string()),
        ("assets/style.css", STYLE_CSS.to_string()),
    ];
    let mut n = 0;
    for (rel, body) in files {
        n += body.len() as u64;
        super::write(out, rel, body.as_bytes())?;
    }
    Ok(n)
}
