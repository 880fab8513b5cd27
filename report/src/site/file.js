// covmerge report: a file page (file.html#ID). Loads data/groups.js (the first file
// id of each group), then the file's group script data/f/B/G.js, which calls
// covmerge.file() for each file of the group with the source lines, hits per manager,
// functions and, against an older result, the lines gained and lost. Lines are shown
// PAGE at a time; a tall text comes in pages (data/t/ID/P.js, covmerge.page()) loaded
// when shown. DOM built with createElement/textContent.
"use strict";
window.covmerge = (function () {
  const PAGE = 10000; // as PAGE_LINES in data.rs
  const id = Number(location.hash.slice(1));
  let F = null;
  let rows = []; // rows[i] = {tr, hits} of line first + i
  let first = 1; // the first line shown
  let page = 0;
  let pageText = new Map(); // page -> lines, for a paged text
  let hitMap = null;
  let gained = new Set();
  let lost = new Set();
  const only = new Map(); // line -> the one manager that covered it (groups aside)

  function load(src, onerror) {
    const s = document.createElement("script");
    s.src = src;
    s.onerror = onerror;
    document.head.appendChild(s);
    return s;
  }

  function missing(why) {
    document.getElementById("path").textContent = why;
  }
  let cat = new Map(); // line -> lcov category (an older result on another base)
  const CATS = ["CBC", "LBC", "GBC", "UBC", "ECB", "EUB", "GIC", "UIC", "GNC", "UNC", "DCB", "DUB"];

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function pctText(i, c) {
    return i === 0 ? "–" : ((c * 100) / i).toFixed(1);
  }

  function hitsOf(k) {
    const m = new Map();
    const cov = F.cov[k];
    for (let i = 0; i < cov.lines.length; i++) m.set(cov.lines[i], cov.hits[i]);
    return m;
  }

  function build() {
    document.title = "Coverage: " + F.path;
    document.getElementById("path").textContent = F.path;
    const crumbs = document.getElementById("crumbs");
    crumbs.textContent = F.path;
    const note = document.getElementById("note");
    note.textContent = F.text || F.pages ? "" : "Source text not shown: " + F.text_missing + ".";
    if (F.diff) {
      const d = F.diff;
      note.appendChild(
        el(
          "span",
          "diffnote",
          (note.textContent ? " " : "") +
            d.status +
            " against the older result: +" +
            d.gained.length +
            " gained, −" +
            d.lost.length +
            " lost (before: " +
            d.old.covered +
            " / " +
            d.old.instrumented +
            " lines covered)"
        )
      );
      gained = new Set(d.gained);
      lost = new Set(d.lost);
    }
    if (F.cats) {
      // Lines at this base get their category; DCB and DUB are lines of the older
      // base, gone from this one: listed in the note.
      const parts = [];
      for (const c of CATS) {
        const ls = F.cats[c];
        if (!ls) continue;
        if (c === "DCB" || c === "DUB") parts.push(c + " " + ls.length + " (older lines " + ls.join(", ") + ")");
        else {
          parts.push(c + " " + ls.length);
          for (const l of ls) cat.set(l, c);
        }
      }
      const s = el("span", "catnote", " Categories: " + (parts.length ? parts.join(", ") : "none") + ".");
      s.id = "cats";
      note.appendChild(s);
    }
    const sel = document.getElementById("manager");
    F.cov.forEach(function (c, k) {
      const o = el("option", "", c.m === "*" ? "* (all managers)" : c.g ? c.m + " (group)" : c.m);
      o.value = String(k);
      sel.appendChild(o);
    });
    sel.addEventListener("change", paint);

    for (const u of F.only || []) only.set(u[0], F.cov[u[1]].m);

    const nav = document.getElementById("pages");
    for (const [btn, d] of [["#prev", -1], ["#next", 1]]) {
      nav.querySelector(btn).addEventListener("click", function () {
        show(page + d);
      });
    }
    show(0);
  }

  function lineCount() {
    const star = F.cov[0];
    let n = F.text ? F.text.length : F.text_lines || 0;
    if (star.lines.length) n = Math.max(n, star.lines[star.lines.length - 1]);
    return n;
  }

  function pages() {
    return Math.max(1, Math.ceil(lineCount() / PAGE));
  }

  // The text of line i (1-based), if loaded.
  function textOf(i) {
    if (F.text) return i <= F.text.length ? F.text[i - 1] : "";
    const t = pageText.get(Math.floor((i - 1) / PAGE));
    return t && i - 1 - Math.floor((i - 1) / PAGE) * PAGE < t.length
      ? t[i - 1 - Math.floor((i - 1) / PAGE) * PAGE]
      : "";
  }

  // Shows page p of the lines (loading its text first when the text is paged), then
  // calls then().
  function show(p, then) {
    p = Math.max(0, Math.min(p, pages() - 1));
    if (F.pages && p < F.pages && !pageText.has(p)) {
      document.body.dataset.ready = "loading";
      load("data/t/" + F.id + "/" + p + ".js", function () {
        missing("cannot load page " + (p + 1) + " of the text of " + F.path);
      }).onload = function () {
        show(p, then);
      };
      return;
    }
    page = p;
    first = p * PAGE + 1;
    const last = Math.min(lineCount(), first + PAGE - 1);
    document.getElementById("pageno").textContent =
      "lines " + first + "–" + last + " (page " + (p + 1) + " of " + pages() + ")";
    document.getElementById("pages").hidden = pages() < 2;
    const body = document.querySelector("#src tbody");
    const frag = document.createDocumentFragment();
    rows = [];
    for (let i = first; i <= last; i++) {
      const tr = el("tr");
      tr.id = "L" + i;
      tr.appendChild(el("td", "ln", String(i)));
      const hits = el("td", "hits");
      tr.appendChild(hits);
      const who = only.get(i);
      const o = el("td", "only", who === undefined ? "" : who);
      if (who !== undefined) {
        tr.dataset.only = who;
        o.title = "covered by " + who + " only";
      }
      tr.appendChild(o);
      if (F.diff) {
        const mark = el("td", "mark", gained.has(i) ? "+" : lost.has(i) ? "−" : "");
        if (cat.has(i)) {
          mark.textContent = cat.get(i);
          tr.dataset.cat = cat.get(i);
        }
        tr.appendChild(mark);
        if (gained.has(i)) tr.dataset.diff = "gained";
        if (lost.has(i)) tr.dataset.diff = "lost";
      }
      tr.appendChild(el("td", "code", textOf(i)));
      frag.appendChild(tr);
      rows.push({ tr: tr, hits: hits });
    }
    body.replaceChildren(frag);
    paint();
    if (then) then();
  }

  function jump(line) {
    const go = function () {
      const r = rows[line - first];
      if (r) r.tr.scrollIntoView({ block: "center" });
    };
    if (line < first || line >= first + PAGE) show(Math.floor((line - 1) / PAGE), go);
    else go();
  }

  // Colours lines and fills the function table for the selected manager.
  function paint() {
    const k = Number(document.getElementById("manager").value || 0);
    if (!hitMap || hitMap.k !== k) hitMap = { k: k, h: hitsOf(k) };
    const h = hitMap.h;
    rows.forEach(function (r, j) {
      const i = first + j;
      const v = h.get(i);
      let cls = v === undefined ? "ni" : v > 0 ? "cov" : "unc";
      if (gained.has(i)) cls += " gained";
      if (lost.has(i)) cls += " lost";
      r.tr.className = cls;
      r.hits.textContent = v === undefined ? "" : String(v);
    });
    let covered = 0;
    for (const v of F.cov[k].hits) if (v > 0) covered++;
    const inst = F.cov[k].lines.length;
    document.getElementById("fsum").textContent =
      covered + " / " + inst + " lines covered (" + pctText(inst, covered) + " %)";
    const tb = document.querySelector("#funcs tbody");
    const frag = document.createDocumentFragment();
    for (const f of F.funcs) {
      let fi = 0;
      let fc = 0;
      for (const l of f.lines) {
        const v = h.get(l);
        if (v !== undefined) fi++;
        if (v > 0) fc++;
      }
      const tr = el("tr", fc > 0 ? "cov" : fi > 0 ? "unc" : "ni");
      const td = el("td", "fn");
      const b = el("button", "link", f.name);
      b.type = "button";
      b.addEventListener("click", function () {
        jump(f.lines[0]);
      });
      td.appendChild(b);
      tr.appendChild(td);
      tr.appendChild(el("td", "num", String(fi)));
      tr.appendChild(el("td", "num", String(fc)));
      tr.appendChild(el("td", "num", pctText(fi, fc)));
      frag.appendChild(tr);
    }
    tb.replaceChildren(frag);
    document.body.dataset.ready = "yes";
  }

  if (location.hash.length > 1 && Number.isInteger(id) && id >= 0) {
    load("data/groups.js", function () {
      missing("cannot load data/groups.js");
    });
  } else {
    missing("no file given (file.html#ID)");
  }
  window.addEventListener("hashchange", function () {
    location.reload();
  });

  return {
    groups: function (starts) {
      let g = -1;
      for (let lo = 0, hi = starts.length - 1; lo <= hi; ) {
        const mid = (lo + hi) >> 1;
        if (starts[mid] <= id) {
          g = mid;
          lo = mid + 1;
        } else {
          hi = mid - 1;
        }
      }
      const none = function () {
        missing("no file " + id + " in this report");
      };
      if (g < 0) return none();
      load("data/f/" + Math.floor(g / 1000) + "/" + g + ".js", none).onload = function () {
        if (!F) none();
      };
    },
    file: function (d) {
      if (d.id !== id || F) return;
      F = d;
      build();
    },
    page: function (p) {
      if (F && p.id === F.id) pageText.set(p.page, p.text);
    },
  };
})();
