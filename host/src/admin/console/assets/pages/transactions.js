// Transactions: the transaction coordinator's transactional ids with their age, and
// transactions open in this broker's partitions, hanging ones marked (with an abort).
import { api } from "../api.js";
import { h, replace, table, age, when } from "../dom.js";

export default function transactions(root) {
  const ids = h("div", { id: "transactional-ids" });
  const open = h("div", { id: "open-transactions" });
  const result = h("p", { id: "action-result" });
  replace(root, h("h2", {}, "Transactions"), h("h3", {}, "Transactional ids"), ids,
    h("h3", {}, "Open in this broker's partitions"), open, result);

  async function abort(t) {
    try {
      const r = await api("/v1/transactions/abort", { method: "POST",
        body: { topic: t.topic, partition: t.partition, producer_id: t.producer_id } });
      result.className = "ok";
      result.textContent = `aborted: marker at offset ${r.marker_offset}`;
      await refresh();
    } catch (e) {
      result.className = "error";
      result.textContent = e.message;
    }
  }

  async function refresh() {
    const [t, p] = await Promise.all([api("/v1/transactions"), api("/v1/transactions/partitions")]);
    const now = Date.now();
    replace(ids, table([
      ["transactional id", (x) => x.transactional_id, "mono"],
      ["producer", (x) => `${x.producer_id}/${x.producer_epoch}`, "num"],
      ["state", (x) => x.state],
      ["age", (x) => (x.start_ms > 0 ? age(now - x.start_ms) : "–"), "num"],
      ["timeout", (x) => age(x.timeout_ms), "num"],
      ["", (x) => (x.start_ms > 0 && x.state === "Ongoing" && now - x.start_ms > x.timeout_ms
        ? h("span", { class: "pill bad" }, "past its timeout") : "")],
      ["partitions", (x) => x.partitions.map((q) => `${q.topic}-${q.partition}`).join(", "), "mono"],
    ], t.transactions, (x) => x.transactional_id));
    replace(open, table([
      ["partition", (x) => `${x.topic}-${x.partition}`, "mono"],
      ["producer", (x) => `${x.producer_id}/${x.producer_epoch}`, "num"],
      ["transactional id", (x) => x.transactional_id || "–", "mono"],
      ["first offset", (x) => x.first_offset, "num"],
      ["last write", (x) => `${when(x.last_write_ms)} (${age(now - x.last_write_ms)} ago)`],
      ["", (x) => (x.hanging ? h("span", { class: "pill hanging" }, "hanging") : "")],
      ["", (x) => (x.hanging ? h("button", { class: "danger", type: "button", onclick: () => abort(x) }, "Abort") : "")],
    ], p.open, (x) => `${x.topic}-${x.partition}-${x.producer_id}`));
  }
  return { refresh };
}
