// One group: state, members, assignment per partition with committed offset, lag and
// its trend, the assignor that ran and what it saw, the rebalance timeline; actions:
// reset offsets (preview, then apply) of an empty group, delete the group. A share
// group (KIP-932) has share-partitions instead of committed offsets: its window, the
// records in flight and available, what was acknowledged and archived, redeliveries,
// and its lag (records at or above the start offset not acknowledged or archived yet).
import { api, ApiError } from "../api.js";
import { h, replace, table, num, rate, when } from "../dom.js";
import { sparkline, History } from "../spark.js";

const lagHistory = new History(60);

export default function group(root, name) {
  const summary = h("div", { class: "cards", id: "group-summary" });
  const members = h("div", { id: "members" });
  const partitions = h("div", { id: "partitions" });
  const partitionsTitle = h("h3", {}, "Partitions");
  const shareTitle = h("h3", { hidden: true }, "Share partitions");
  const sharePartitions = h("div", { id: "share-partitions", hidden: true });
  const timeline = h("div", { id: "timeline" });
  const preview = h("div", { id: "reset-preview" });
  const result = h("p", { id: "action-result" });
  const strategy = h("select", { id: "reset-to" },
    ["earliest", "latest", "offset", "timestamp", "shift"].map((s) => h("option", { value: s }, s)));
  const value = h("input", { id: "reset-value", type: "number", placeholder: "offset / timestamp ms / shift" });
  const topicsInput = h("input", { id: "reset-topics", placeholder: "topics (comma-separated; empty: every committed)" });
  let planned = null;

  function resetBody(dryRun) {
    const body = { to: strategy.value, dry_run: dryRun };
    if (["offset", "timestamp", "shift"].includes(strategy.value)) body.value = Number(value.value);
    const topics = topicsInput.value.split(",").map((t) => t.trim()).filter((t) => t);
    if (topics.length) body.topics = topics;
    return body;
  }
  const apply = h("button", { id: "reset-apply", type: "button", disabled: true, onclick: async () => {
    try {
      const r = await api(`/v1/groups/${encodeURIComponent(name)}/offsets/reset`, { method: "POST", body: planned });
      result.className = "ok";
      result.textContent = `committed ${r.partitions.length} offsets`;
      apply.disabled = true;
      await refresh();
    } catch (e) {
      result.className = "error";
      result.textContent = e.message;
    }
  } }, "Apply");
  const previewButton = h("button", { id: "reset-preview-button", class: "secondary", type: "button", onclick: async () => {
    apply.disabled = true;
    try {
      const body = resetBody(true);
      const r = await api(`/v1/groups/${encodeURIComponent(name)}/offsets/reset`, { method: "POST", body });
      planned = { ...body, dry_run: false };
      replace(preview, table([
        ["topic", (p) => p.topic], ["partition", (p) => p.partition, "num"],
        ["current", (p) => num(p.current), "num"], ["new offset", (p) => num(p.target), "num"],
        ["log start", (p) => num(p.log_start_offset), "num"], ["log end", (p) => num(p.log_end_offset), "num"],
      ], r.partitions, (p) => `${p.topic}-${p.partition}`));
      result.className = "";
      result.textContent = "preview: nothing committed yet";
      apply.disabled = false;
    } catch (e) {
      replace(preview);
      result.className = "error";
      result.textContent = e.message;
    }
  } }, "Preview");
  const confirmDelete = h("button", { id: "delete-confirm", class: "danger", type: "button", hidden: true, onclick: async () => {
    try {
      await api(`/v1/groups/${encodeURIComponent(name)}`, { method: "DELETE" });
      location.hash = "#/groups";
    } catch (e) {
      result.className = "error";
      result.textContent = e.message;
    }
  } }, "Really delete");
  const del = h("button", { id: "delete", class: "secondary", type: "button",
    onclick: () => { confirmDelete.hidden = false; } }, "Delete group…");

  const resetPanel = h("section", { class: "panel" }, h("h3", {}, "Reset offsets (empty groups only)"),
    h("div", { class: "toolbar" }, strategy, value, topicsInput, previewButton, apply), preview);
  replace(root, h("h2", {}, "Group ", h("span", { class: "mono" }, name)), summary,
    h("h3", {}, "Members"), members,
    partitionsTitle, partitions,
    shareTitle, sharePartitions,
    h("h3", {}, "Rebalances"), timeline,
    resetPanel,
    h("section", { class: "panel" }, h("h3", {}, "Delete"), h("div", { class: "toolbar" }, del, confirmDelete)),
    result);

  function card(label, v) {
    return h("div", { class: "card" }, h("div", { class: "label" }, label), h("div", { class: "value" }, v));
  }

  // A share-partition's lag: records from its start offset to the log end that are
  // neither acknowledged nor archived (in flight and available ones included).
  function shareLag(p) {
    if (p.log_end_offset === null || p.log_end_offset === undefined) return null;
    return Math.max(0, p.log_end_offset - p.start_offset - p.acknowledged_in_window - p.archived_in_window);
  }

  function showShare(g) {
    const share = Array.isArray(g.share_partitions);
    partitionsTitle.hidden = share;
    partitions.hidden = share;
    shareTitle.hidden = !share;
    sharePartitions.hidden = !share;
    // A share group's start offsets move with AlterShareGroupOffsets, not OffsetCommit.
    resetPanel.hidden = share;
    if (!share) return;
    replace(sharePartitions, g.share_partitions.length === 0 ? h("p", { class: "muted" }, "none yet")
      : table([
        ["topic", (p) => p.topic],
        ["partition", (p) => p.partition, "num"],
        ["start", (p) => num(p.start_offset), "num"],
        ["end", (p) => num(p.end_offset), "num"],
        ["log end", (p) => num(p.log_end_offset), "num"],
        ["lag", (p) => h("span", { class: "lag" }, num(shareLag(p))), "num"],
        ["in flight", (p) => num(p.in_flight), "num"],
        ["available", (p) => num(p.available), "num"],
        ["acknowledged", (p) => num(p.acknowledged), "num"],
        ["archived", (p) => num(p.archived), "num"],
        ["redelivered", (p) => (p.delivery_counts
          ? num(p.delivery_counts.slice(1).reduce((s, n) => s + n, 0)) : "–"), "num"],
        ["trend", (p) => sparkline(lagHistory.push(`${name}:${p.topic}:${p.partition}`, shareLag(p) || 0))],
        ["loaded", (p) => (p.loaded ? "yes" : "no")],
      ], g.share_partitions, (p) => `${p.topic}-${p.partition}`));
  }

  async function refresh() {
    const g = await api(`/v1/groups/${encodeURIComponent(name)}`);
    const totalLag = Array.isArray(g.share_partitions)
      ? g.share_partitions.reduce((s, p) => s + (shareLag(p) || 0), 0)
      : g.partitions.reduce((s, p) => s + (p.lag || 0), 0);
    replace(summary, card("type", g.protocol), card("state", g.state),
      card("generation", g.generation === null ? "–" : g.generation),
      card("assignor", g.effective_assignor || g.assignor || "–"),
      card("total lag", h("span", { id: "total-lag" }, num(totalLag))));
    if (g.assignor_fallback) summary.append(h("p", { class: "warn" }, g.assignor_fallback));
    replace(members, table([
      ["member", (m) => m.consumer_id, "mono"],
      ["client id", (m) => m.client_id || "–"],
      ["host", (m) => m.host || "–"],
      ["rack", (m) => m.rack || "–"],
      ["weight", (m) => (m.weight === null || m.weight === undefined ? "–" : m.weight), "num"],
      ["subscription", (m) => m.subscription],
      ["partitions", (m) => m.partitions.join(", "), "mono"],
    ], g.members, (m) => m.consumer_id));
    replace(partitions, table([
      ["topic", (p) => p.topic],
      ["partition", (p) => p.partition, "num"],
      ["owner", (p) => p.owner || "–", "mono"],
      ["committed", (p) => num(p.committed_offset), "num"],
      ["log end", (p) => num(p.log_end_offset), "num"],
      ["lag", (p) => h("span", { class: "lag" }, num(p.lag)), "num"],
      ["trend", (p) => sparkline(lagHistory.push(`${name}:${p.topic}:${p.partition}`, p.lag))],
      ["assignor saw", (p) => (p.assigned_with
        ? `${rate(p.assigned_with.produce_bytes_per_sec, "B/s")}, lag ${num(p.assigned_with.lag)}` : "–")],
    ], g.partitions, (p) => `${p.topic}-${p.partition}`));
    showShare(g);
    if (Array.isArray(g.share_partitions)) {
      // The coordinator keeps no rebalance history for share groups (DescribeRebalances
      // answers GROUP_ID_NOT_FOUND): nothing to ask for.
      replace(timeline, h("p", { class: "muted" }, "not recorded for share groups"));
      return;
    }
    try {
      const r = await api(`/v1/groups/${encodeURIComponent(name)}/rebalances`);
      replace(timeline, r.rebalances.length === 0 ? h("p", { class: "muted" }, "none recorded")
        : h("ol", { class: "timeline" }, r.rebalances.slice().reverse().map((b) =>
          h("li", { "data-cause": b.cause },
            h("strong", { class: "cause" }, b.cause), ` — generation ${b.generation}, ${when(b.started_ms)}, `,
            b.duration_ms === null ? "running" : `${num(b.duration_ms)} ms`,
            b.partitions_moved === null ? "" : `, ${num(b.partitions_moved)} partitions moved`,
            `, ${num(b.members)} members`,
            b.assignor ? `, assignor ${b.assignor}` : ""))));
    } catch (e) {
      if (!(e instanceof ApiError) || e.status === 401) throw e;
      replace(timeline, h("p", { class: "muted" }, "not recorded: " + e.message));
    }
  }
  return { refresh };
}
