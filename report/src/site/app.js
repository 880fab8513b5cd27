// covmerge report: the tree page. Data comes as scripts (data/meta.js, data/d/B/ID.js,
// data/paths.js) that call the functions below: browsers refuse fetch() on file://.
// The DOM is built with createElement/textContent, never from HTML strings.
"use strict";
window.covmerge = (function () {
  const S = {
    meta: null,
    dirs: new Map(), // id -> {id, path, rows}
    expanded: new Set(),
    loading: new Set(),
    sort: { key: "name", desc: false },
    paths: null, // {dirs, files} once data/paths.js is loaded
    match: null, // Set of "d<id>"/"f<id>" matching the path filter, or null
    onPaths: null,
  };

  function scriptPath(kind, id) {
    return "data/" + kind + "/" + Math.floor(id / 1000) + "/" + id + ".js";
  }

  function load(src) {
    const s = document.createElement("script");
    s.src = src;
    s.onerror = function () {
      setStatus("cannot load " + src);
    };
    document.head.appendChild(s);
  }

  function setStatus(t) {
    const el = document.getElementById("status");
    if (el) el.textContent = t;
  }

  function pctText(i, c) {
    return i === 0 ? "–" : ((c * 100) / i).toFixed(1);
  }

  // Same as heat() in pages.rs.
  function heat(i, c) {
    return i === 0 ? "" : "hsl(" + Math.round((c * 120) / i) + ",70%,80%)";
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function pctCell(i, c, title) {
    const td = el("td", "pct", pctText(i, c));
    td.style.background = heat(i, c);
    if (title) td.title = title;
    return td;
  }

  function mgr(r, col) {
    for (const m of r.m) if (m[0] === col) return [m[1], m[2]];
    return [0, 0];
  }

  // Lines only manager `col` covered (no group is a manager: meta.groups).
  function uniq(r, col) {
    if (r.u) for (const u of r.u) if (u[0] === col) return u[1];
    return 0;
  }

  function isGroup(col) {
    return !!S.meta.groups && S.meta.groups.some((g) => g[0] === col);
  }

  function uniqueMode() {
    const b = document.getElementById("f-unique");
    return !!b && b.checked;
  }

  function ratio(i, c) {
    return i === 0 ? -1 : c / i;
  }

  function sortValue(r, key) {
    switch (key) {
      case "name":
        return r.name;
      case "i":
        return r.n[0];
      case "c":
        return r.n[1];
      case "p":
        return ratio(r.n[0], r.n[1]);
      case "g":
        return r.g;
      case "l":
        return r.l;
      default: {
        // kN: lines in category N (an older result on another base).
        if (key[0] === "k") return r.c ? r.c[Number(key.slice(1))] : 0;
        const col = Number(key.slice(1));
        if (uniqueMode()) return isGroup(col) ? -1 : uniq(r, col);
        const c = mgr(r, col);
        return ratio(c[0], c[1]);
      }
    }
  }

  function compare(a, b) {
    const k = S.sort.key;
    if (k === "name") {
      // Directories first, then by name.
      if (a.k !== b.k) return a.k === "d" ? -1 : 1;
      const r = a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
      return S.sort.desc ? -r : r;
    }
    const va = sortValue(a, k);
    const vb = sortValue(b, k);
    let r = va < vb ? -1 : va > vb ? 1 : 0;
    if (S.sort.desc) r = -r;
    return r !== 0 ? r : a.name < b.name ? -1 : 1;
  }

  function visible(r) {
    if (document.getElementById("f-signal").checked && r.n[1] === 0 && r.l === 0) return false;
    if (document.getElementById("f-below").checked) {
      const x = Number(document.getElementById("f-below-pct").value);
      if (r.k === "d") {
        if (r.lo === undefined || r.lo >= x) return false;
      } else if (r.n[0] === 0 || (r.n[1] * 100) / r.n[0] >= x) {
        return false;
      }
    }
    if (S.match && !S.match.has(r.k + r.id)) return false;
    return true;
  }

  function rowEl(r, depth) {
    const nm = S.meta.managers.length;
    const diff = !!S.meta.diff;
    const tr = el("tr", "row " + (r.k === "d" ? "dir" : "file") + (r.del ? " del" : ""));
    tr.dataset.id = r.id;
    tr.dataset.kind = r.k;
    tr.dataset.depth = depth;
    const name = el("td", "name");
    name.style.paddingLeft = 0.3 + depth * 1.2 + "em";
    if (r.k === "d") {
      const open = S.expanded.has(r.id);
      const b = el("button", "tog", open ? "▾" : "▸");
      b.type = "button";
      b.setAttribute("aria-expanded", open ? "true" : "false");
      b.addEventListener("click", function () {
        toggle(r.id);
      });
      name.appendChild(b);
      name.appendChild(el("span", "dname", r.name + "/"));
    } else if (r.del) {
      const s = el("span", "fname", r.name);
      s.title = "only in the older result";
      name.appendChild(s);
    } else {
      const a = el("a", "", r.name);
      a.href = "file.html#" + r.id;
      name.appendChild(a);
    }
    tr.appendChild(name);
    tr.appendChild(el("td", "num", String(r.n[0])));
    tr.appendChild(el("td", "num", String(r.n[1])));
    tr.appendChild(pctCell(r.n[0], r.n[1]));
    if (diff) {
      tr.appendChild(el("td", "num gained", r.g > 0 ? "+" + r.g : ""));
      tr.appendChild(el("td", "num lost", r.l > 0 ? "−" + r.l : ""));
    }
    if (S.meta.cats) {
      for (let i = 0; i < 12; i++) {
        const n = r.c ? r.c[i] : 0;
        tr.appendChild(el("td", "num cat", n > 0 ? String(n) : ""));
      }
    }
    const only = uniqueMode();
    // One pass over the row's sparse lists, not one search per column.
    const cells = new Array(nm);
    for (const m of r.m) cells[m[0]] = [m[1], m[2]];
    const uniqs = new Array(nm);
    if (r.u) for (const u of r.u) uniqs[u[0]] = u[1];
    for (let col = 0; col < nm; col++) {
      const c = cells[col] || [0, 0];
      const g = isGroup(col);
      const u = uniqs[col] || 0;
      const title = c[0] > 0 ? c[1] + " / " + c[0] + (g ? "" : ", " + u + " unique") : "";
      let td;
      if (only) {
        // Unique lines: a count per manager, nothing for groups.
        td = el("td", "num uniq", g || u === 0 ? "" : String(u));
        if (title) td.title = title;
      } else {
        td = pctCell(c[0], c[1], title);
      }
      if (g) td.classList.add("grp");
      tr.appendChild(td);
    }
    return tr;
  }

  function render() {
    const root = S.dirs.get(0);
    if (!root || !S.meta) return;
    const frag = document.createDocumentFragment();
    let shown = 0;
    (function walk(id, depth) {
      const d = S.dirs.get(id);
      if (!d) return;
      const rows = d.rows.filter(visible).sort(compare);
      for (const r of rows) {
        frag.appendChild(rowEl(r, depth));
        shown++;
        if (r.k === "d" && S.expanded.has(r.id)) walk(r.id, depth + 1);
      }
    })(0, 0);
    document.getElementById("rows").replaceChildren(frag);
    for (const th of document.querySelectorAll("#tree th[data-sort]")) {
      th.classList.toggle("sorted", th.dataset.sort === S.sort.key);
      th.classList.toggle("desc", th.dataset.sort === S.sort.key && S.sort.desc);
    }
    setStatus(
      shown + " rows" + (S.loading.size ? ", loading " + S.loading.size + " directories…" : "")
    );
    document.body.dataset.ready = S.loading.size ? "loading" : "yes";
  }

  function expand(id) {
    S.expanded.add(id);
    if (!S.dirs.has(id) && !S.loading.has(id)) {
      S.loading.add(id);
      load(scriptPath("d", id));
    }
  }

  function toggle(id) {
    if (S.expanded.has(id)) S.expanded.delete(id);
    else expand(id);
    render();
  }

  function fullPaths() {
    const dirPath = new Map();
    for (const d of S.paths.dirs) dirPath.set(d[0], d[2]);
    return dirPath;
  }

  // The path filter: files whose path contains the text, and the directories above
  // them; up to 200 such directories are expanded.
  function applyText() {
    const q = document.getElementById("f-text").value.trim().toLowerCase();
    if (!q) {
      S.match = null;
      render();
      return;
    }
    if (!S.paths) {
      S.onPaths = applyText;
      load("data/paths.js");
      setStatus("loading paths…");
      return;
    }
    const dirPath = fullPaths();
    const parent = new Map();
    for (const d of S.paths.dirs) parent.set(d[0], d[1]);
    const m = new Set();
    const up = function (id) {
      while (id !== null && id !== undefined && !m.has("d" + id)) {
        m.add("d" + id);
        id = parent.get(id);
      }
    };
    for (const f of S.paths.files) {
      const dp = dirPath.get(f[1]);
      const p = (dp ? dp + "/" : "") + f[2];
      if (p.toLowerCase().includes(q)) {
        m.add("f" + f[0]);
        up(f[1]);
      }
    }
    for (const d of S.paths.dirs) if (d[2].toLowerCase().includes(q)) up(d[0]);
    S.match = m;
    const dirs = [...m].filter((k) => k[0] === "d").map((k) => Number(k.slice(1)));
    if (dirs.length <= 200) for (const id of dirs) if (id !== 0) expand(id);
    render();
  }

  function start() {
    for (const th of document.querySelectorAll("#tree th[data-sort]")) {
      th.addEventListener("click", function () {
        const k = th.dataset.sort;
        if (S.sort.key === k) S.sort.desc = !S.sort.desc;
        else S.sort = { key: k, desc: k !== "name" };
        render();
      });
    }
    for (const id of ["f-signal", "f-below", "f-below-pct", "f-unique"]) {
      document.getElementById(id).addEventListener("input", render);
    }
    let timer = null;
    document.getElementById("f-text").addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(applyText, 150);
    });
    const drop = document.getElementById("sort-drop");
    if (drop) {
      drop.addEventListener("click", function () {
        S.sort = { key: "l", desc: true };
        render();
      });
    }
    render();
  }

  return {
    meta: function (m) {
      S.meta = m;
    },
    dir: function (d) {
      const first = !S.dirs.has(0) && d.id === 0;
      S.dirs.set(d.id, d);
      S.loading.delete(d.id);
      if (first) start();
      else render();
    },
    paths: function (p) {
      S.paths = p;
      if (S.onPaths) S.onPaths();
    },
  };
})();
