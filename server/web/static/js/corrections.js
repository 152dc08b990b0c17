// The Operate view's corrections card: per domain, how many corrections are accepted
// (sent with a key), pending approval, approved, rejected, and not yet used by a refresh
// (GET /admin/corrections/summary).

import { call } from "./api.js";
import { $, h } from "./dom.js";

const COLUMNS = ["accepted", "pending", "approved", "rejected", "new"];

export async function refreshCorrections() {
  const answer = await call("admin/corrections/summary", { admin: true });
  const rows = Object.entries(answer.domains).map(([domain, counts]) =>
    h("tr", {}, h("th", { scope: "row", text: domain || "(no domain)" }),
      ...COLUMNS.map((name) => h("td", { text: String(counts[name] ?? 0) }))));
  $("#corrections-body").replaceChildren(...rows);
  $("#corrections-empty").hidden = rows.length > 0;
}
