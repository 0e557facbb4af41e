// Groups of every type: a paged, searchable list.
import { api, query } from "../api.js";
import { h, replace, table, num, pager } from "../dom.js";

export default function groups(root) {
  const state = { q: "", page: 0, size: 50 };
  const head = h("div");
  const body = h("div", { id: "groups-table" });
  replace(root, h("h2", {}, "Consumer groups"), head, body);

  async function refresh() {
    const r = await api("/v1/groups" + query(state));
    replace(head, pager(state, r.total, (change) => {
      Object.assign(state, change);
      refresh();
    }));
    replace(body, table([
      ["group", (g) => h("a", { href: "#/group/" + encodeURIComponent(g.group) }, g.group)],
      ["type", (g) => g.protocol],
      ["state", (g) => g.state],
      ["members", (g) => num(g.members), "num"],
      ["generation", (g) => (g.generation === null ? "–" : g.generation), "num"],
      ["assignor", (g) => g.effective_assignor || g.assignor || "–"],
      ["", (g) => (g.assignor_fallback ? h("span", { class: "warn", title: g.assignor_fallback }, "fallback") : "")],
    ], r.items, (g) => g.group));
  }
  return { refresh };
}
