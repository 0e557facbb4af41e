// Topics: a paged, searchable list; a topic's partitions (log start and end, size,
// produce rate over time) and configs, edited with IncrementalAlterConfigs semantics.
import { api, query } from "../api.js";
import { h, replace, table, num, bytes, rate, pager } from "../dom.js";
import { sparkline, History } from "../spark.js";

const history = new History(60);

export function topics(root) {
  const state = { q: "", page: 0, size: 50 };
  const head = h("div");
  const body = h("div", { id: "topics-table" });
  replace(root, h("h2", {}, "Topics"), head, body);
  let last = null;

  async function refresh() {
    const r = await api("/v1/topics" + query(state));
    last = r;
    replace(head, pager(state, r.total, (change) => {
      Object.assign(state, change);
      refresh();
    }));
    replace(body, table([
      ["topic", (t) => h("a", { href: "#/topic/" + encodeURIComponent(t.name) }, t.name)],
      ["partitions", (t) => num(t.partitions), "num"],
      ["records (end offsets)", (t) => num(t.log_end_offsets), "num"],
      ["size", (t) => bytes(t.size_bytes), "num"],
      ["produce", (t) => rate(t.produce_bytes_per_sec, "B/s"), "num"],
      ["over time", (t) => sparkline(history.push("t:" + t.name, t.produce_bytes_per_sec))],
    ], r.items, (t) => t.name));
    return last;
  }
  return { refresh };
}

export function topic(root, name) {
  const state = { q: "", page: 0, size: 100 };
  const info = h("p", { class: "muted" });
  const head = h("div");
  const parts = h("div", { id: "partitions" });
  const configs = h("div", { id: "configs" });
  const out = h("p", { id: "config-result" });
  const cfgName = h("input", { id: "config-name", placeholder: "config name, e.g. retention.ms" });
  const cfgValue = h("input", { id: "config-value", placeholder: "value" });
  const cfgOp = h("select", { id: "config-op" },
    ["set", "delete", "append", "subtract"].map((o) => h("option", { value: o }, o)));
  async function alter(validateOnly) {
    const change = { name: cfgName.value.trim(), op: cfgOp.value };
    if (cfgOp.value !== "delete") change.value = cfgValue.value;
    try {
      await api(`/v1/topics/${encodeURIComponent(name)}/configs`, { method: "POST",
        body: { validate_only: validateOnly, configs: [change] } });
      out.className = "ok";
      out.textContent = validateOnly ? "valid" : "applied";
      if (!validateOnly) await refresh();
    } catch (e) {
      out.className = "error";
      out.textContent = e.message;
    }
  }
  replace(root, h("h2", {}, "Topic ", h("span", { class: "mono" }, name)), info,
    h("h3", {}, "Partitions"), head, parts,
    h("h3", {}, "Configs"), configs,
    h("section", { class: "panel" }, h("h3", {}, "Change a config (IncrementalAlterConfigs)"),
      h("div", { class: "toolbar" }, cfgName, cfgOp, cfgValue,
        h("button", { class: "secondary", type: "button", onclick: () => alter(true) }, "Validate"),
        h("button", { id: "config-apply", type: "button", onclick: () => alter(false) }, "Apply")),
      out));

  async function refresh() {
    const t = await api(`/v1/topics/${encodeURIComponent(name)}` + query({ page: state.page, size: state.size }));
    info.textContent = `id ${t.id}`;
    replace(head, pager(state, t.partitions.total, (change) => {
      Object.assign(state, change);
      refresh();
    }));
    replace(parts, table([
      ["partition", (p) => p.partition, "num"],
      ["log start", (p) => num(p.log_start_offset), "num"],
      ["log end", (p) => num(p.log_end_offset), "num"],
      ["size", (p) => bytes(p.size_bytes), "num"],
      ["produce", (p) => rate(p.produce_bytes_per_sec, "B/s"), "num"],
      ["over time", (p) => sparkline(history.push(`p:${name}:${p.partition}`, p.produce_bytes_per_sec))],
    ], t.partitions.items, (p) => p.partition));
    replace(configs, table([
      ["name", (c) => c.name, "mono"],
      ["value", (c) => c.value, "mono"],
      ["source", (c) => c.source],
    ], t.configs, (c) => c.name));
  }
  return { refresh };
}
