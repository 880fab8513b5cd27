// covmerge report: a file page (file.html#ID). Loads data/f/B/ID.js, which calls
// covmerge.file() with the source lines, hits per manager, functions and, against an
// older result, the lines gained and lost. DOM built with createElement/textContent.
"use strict";
window.covmerge = (function () {
  let F = null;
  let rows = []; // rows[n - 1] = {tr, hits, mark} of line n
  let gained = new Set();
  let lost = new Set();
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
    note.textContent = F.text ? "" : "Source text not shown: " + F.text_missing + ".";
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
      const o = el("option", "", c.m === "*" ? "* (all managers)" : c.m);
      o.value = String(k);
      sel.appendChild(o);
    });
    sel.addEventListener("change", paint);

    const star = F.cov[0];
    let n = F.text ? F.text.length : 0;
    if (star.lines.length) n = Math.max(n, star.lines[star.lines.length - 1]);
    const body = document.querySelector("#src tbody");
    const frag = document.createDocumentFragment();
    for (let i = 1; i <= n; i++) {
      const tr = el("tr");
      tr.id = "L" + i;
      tr.appendChild(el("td", "ln", String(i)));
      const hits = el("td", "hits");
      tr.appendChild(hits);
      let mark = null;
      if (F.diff) {
        mark = el("td", "mark", gained.has(i) ? "+" : lost.has(i) ? "−" : "");
        if (cat.has(i)) {
          mark.textContent = cat.get(i);
          tr.dataset.cat = cat.get(i);
        }
        tr.appendChild(mark);
        if (gained.has(i)) tr.dataset.diff = "gained";
        if (lost.has(i)) tr.dataset.diff = "lost";
      }
      tr.appendChild(el("td", "code", F.text && i <= F.text.length ? F.text[i - 1] : ""));
      frag.appendChild(tr);
      rows.push({ tr: tr, hits: hits });
    }
    body.appendChild(frag);
    paint();
  }

  function jump(line) {
    const r = rows[line - 1];
    if (r) r.tr.scrollIntoView({ block: "center" });
  }

  // Colours lines and fills the function table for the selected manager.
  function paint() {
    const k = Number(document.getElementById("manager").value || 0);
    const h = hitsOf(k);
    let covered = 0;
    rows.forEach(function (r, i) {
      const v = h.get(i + 1);
      let cls = v === undefined ? "ni" : v > 0 ? "cov" : "unc";
      if (v > 0) covered++;
      if (gained.has(i + 1)) cls += " gained";
      if (lost.has(i + 1)) cls += " lost";
      r.tr.className = cls;
      r.hits.textContent = v === undefined ? "" : String(v);
    });
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

  const id = Number(location.hash.slice(1));
  if (location.hash.length > 1 && Number.isInteger(id) && id >= 0) {
    const s = document.createElement("script");
    s.src = "data/f/" + Math.floor(id / 1000) + "/" + id + ".js";
    s.onerror = function () {
      document.getElementById("path").textContent = "no file " + id + " in this report";
    };
    document.head.appendChild(s);
  } else {
    document.getElementById("path").textContent = "no file given (file.html#ID)";
  }
  window.addEventListener("hashchange", function () {
    location.reload();
  });

  return {
    file: function (d) {
      F = d;
      build();
    },
  };
})();
