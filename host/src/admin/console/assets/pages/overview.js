// Overview: this broker and its cluster, plugins, the offset store (and a swap in
// progress), topic count, produce and fetch rates. Actions: rescan plugins, swap the
// offset store.
import { api } from "../api.js";
import { h, replace, table, num, rate, bytes, when } from "../dom.js";
import { sparkline, bar, History, Rates } from "../spark.js";

export default function overview(root) {
  const history = new History(60);
  const rates = new Rates();
  const cards = h("div", { class: "cards", id: "overview-cards" });
  const cluster = h("section", { class: "panel", id: "cluster" });
  const plugins = h("section", { class: "panel", id: "plugins" });
  const store = h("section", { class: "panel", id: "offset-store" });
  const actionOut = h("pre", { class: "mono", id: "action-result" });
  const swapPlugin = h("input", { id: "swap-plugin", placeholder: "offset-store plugin name" });
  const swapConfig = h("textarea", { id: "swap-config", placeholder: "its config (TOML)" });
  const rescan = h("button", { id: "rescan", type: "button", onclick: async () => {
    rescan.disabled = true;
    try {
      const r = await api("/v1/plugins/rescan", { method: "POST" });
      actionOut.textContent = JSON.stringify(r, null, 2);
    } catch (e) {
      actionOut.textContent = "rescan failed: " + e.message;
    } finally {
      rescan.disabled = false;
    }
  } }, "Rescan plugins");
  const swap = h("button", { id: "swap", type: "button", onclick: async () => {
    try {
      const r = await api("/v1/offset-store", { method: "POST",
        body: { plugin: swapPlugin.value.trim(), config: swapConfig.value } });
      actionOut.textContent = JSON.stringify(r, null, 2);
    } catch (e) {
      actionOut.textContent = "swap refused: " + e.message;
    }
  } }, "Swap the offset store");
  replace(root, h("h2", {}, "Overview"), cards, cluster, plugins, store,
    h("section", { class: "panel" }, h("h3", {}, "Actions"),
      h("div", { class: "toolbar" }, rescan),
      h("div", { class: "toolbar" }, swapPlugin, swap), swapConfig, actionOut));

  function card(label, value, extra) {
    return h("div", { class: "card" }, h("div", { class: "label" }, label),
      h("div", { class: "value" }, value), extra || null);
  }

  return {
    async refresh() {
      const o = await api("/v1/overview");
      const produceRecords = rates.sample("produce_records", o.log_end_offsets_total, o.now_ms);
      const fetches = rates.sample("fetch_requests", o.requests.fetch, o.now_ms);
      const produces = rates.sample("produce_requests", o.requests.produce, o.now_ms);
      const pr = history.push("produce", o.produce_bytes_per_sec);
      const fr = history.push("fetch", fetches);
      replace(cards,
        card("node", `${o.node_id}`, h("div", { class: "muted" }, o.cluster_id)),
        card("topics", num(o.topics), h("div", { class: "muted" }, num(o.partitions) + " partitions")),
        card("groups", num(o.groups)),
        card("produce", rate(o.produce_bytes_per_sec, "B/s"),
          h("div", {}, sparkline(pr), " ", h("span", { class: "muted" },
            rate(produceRecords, "rec/s") + ", " + rate(produces, "req/s")))),
        card("fetch", rate(fetches, "req/s"), h("div", {}, sparkline(fr))),
        card("traffic", bytes(o.bytes_in_total) + " in",
          h("div", { class: "muted" }, bytes(o.bytes_out_total) + " out")));
      if (o.cluster) {
        const c = o.cluster;
        replace(cluster, h("h3", {}, `Cluster: ${c.brokers.length} brokers, ${c.slot_count} coordinator slots`),
          table([
            ["broker", (b) => b.id + (b.id === c.broker ? " (this one)" : "")],
            ["address", (b) => b.host + ":" + b.port],
            ["coordinator slots", (b) => b.slots.join(", ") || "none", "mono"],
          ], c.brokers, (b) => b.id),
          c.connected ? null : h("p", { class: "warn" }, "ZooKeeper session not connected"));
      } else {
        replace(cluster, h("h3", {}, "Standalone broker"),
          h("p", { class: "muted" }, "No ZooKeeper: this broker coordinates every group."));
      }
      replace(plugins, h("h3", {}, "Plugins"), table([
        ["kind", (p) => p.kind],
        ["name", (p) => p.name],
        ["version", (p) => p.version],
        ["ABI", (p) => `${p.abi} (broker ${p.broker_abi})`],
        ["status", (p) => h("span", { class: p.status === "ok" ? "ok" : "error" }, p.status)],
        ["file", (p) => p.file, "mono"],
      ], o.plugins, (p) => p.file));
      const s = o.offset_store;
      const sw = s.swap;
      const idle = !sw.state || sw.state === "idle";
      const running = !idle && !["completed", "failed"].includes(sw.state);
      replace(store, h("h3", {}, "Offset store"),
        h("p", {}, "active: ", h("strong", { id: "active-store" }, s.active || "none"),
          s.recorded ? h("span", { class: "muted" }, ` (configured: ${s.configured}; a swap made it active)`) : null),
        idle ? null : h("p", { id: "swap-status" },
          `swap ${sw.from || "?"} → ${sw.to || "?"}: ${sw.state} `,
          running || sw.state === "completed" ? bar(sw.total ? sw.copied / sw.total : running ? 0 : 1) : null,
          ` ${num(sw.copied)} / ${num(sw.total)} offsets copied`,
          sw.started_ms ? h("span", { class: "muted" }, `, started ${when(sw.started_ms)}`) : null,
          sw.error ? h("span", { class: "error" }, " — " + sw.error) : null));
    },
  };
}
