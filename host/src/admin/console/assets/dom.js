// Building the DOM without HTML strings: every value goes in as text.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// A table: `columns` are [header, cell(row), className?]; `key(row)` sets data-key.
export function table(columns, rows, key) {
  return h("table", {},
    h("thead", {}, h("tr", {}, columns.map(([title, , cls]) => h("th", { class: cls }, title)))),
    h("tbody", {}, rows.map((row) => h("tr", { "data-key": key ? key(row) : null },
      columns.map(([, cell, cls]) => h("td", { class: cls }, cell(row)))))));
}

export function num(n) {
  if (n === null || n === undefined) return "–";
  return Number(n).toLocaleString("en-US");
}

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return (i === 0 ? v : v.toFixed(1)) + " " + units[i];
}

export function rate(n, unit) {
  if (n === null || n === undefined) return "–";
  return (n >= 100 ? Math.round(n).toLocaleString("en-US") : Number(n).toFixed(1)) + " " + unit;
}

export function age(ms) {
  if (ms === null || ms === undefined || ms < 0) return "–";
  const s = Math.floor(ms / 1000);
  if (s < 120) return s + " s";
  if (s < 7200) return Math.floor(s / 60) + " min";
  return Math.floor(s / 3600) + " h";
}

export function when(ms) {
  return ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "–";
}

// A pager with search: calls `change({q, page})`.
export function pager(state, total, change) {
  const pages = Math.max(1, Math.ceil(total / state.size));
  const search = h("input", { type: "search", placeholder: "search", value: state.q, id: "search" });
  search.addEventListener("change", () => change({ q: search.value, page: 0 }));
  return h("div", { class: "toolbar" }, search,
    h("div", { class: "pager" },
      h("button", { class: "secondary", type: "button", disabled: state.page <= 0,
        onclick: () => change({ page: state.page - 1 }) }, "‹"),
      h("span", { id: "page-info" }, `page ${state.page + 1} of ${pages} (${num(total)})`),
      h("button", { class: "secondary", type: "button", disabled: state.page + 1 >= pages,
        onclick: () => change({ page: state.page + 1 }) }, "›")));
}
