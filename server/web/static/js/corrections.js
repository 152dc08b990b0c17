// The Operate view's corrections card: per domain, how many corrections are accepted
// (sent with a key), pending approval, approved, rejected, and not yet used by a refresh,
// and each domain's last refresh from its corrections with its gate's scores (the served
// and the refreshed module on the dev set and on the held-back corrections)
// (GET /admin/corrections/summary).

import { call } from "./api.js";
import { $, h } from "./dom.js";

const COLUMNS = ["accepted", "pending", "approved", "rejected", "new"];

const fixed = (value) => Number(value).toFixed(2);
const signed = (value) => `${value >= 0 ? "+" : ""}${fixed(value)}`;

function movement(scores, metric) {
  return `${fixed(scores.served[metric])} → ${fixed(scores.refreshed[metric])}`;
}

function refreshRow(domain, last) {
  const held = last.held_out_corrections;
  const interval = held?.delta_chrf_95
    ? ` (95%: ${signed(held.delta_chrf_95[0])} to ${signed(held.delta_chrf_95[1])})` : "";
  const version = last.module_version == null ? "—"
    : `v${last.module_version}${last.active ? " (active)" : " (inactive)"}`;
  return h("tr", { "data-domain": domain },
    h("th", { scope: "row", text: domain }),
    h("td", { text: last.state }),
    h("td", { text: version }),
    h("td", { class: "gate", text: last.gate ?? "—", title: last.error ?? "" }),
    h("td", { text: last.dev ? movement(last.dev, "bleu") : "—" }),
    h("td", { text: held ? `${movement(held, "chrf")}${interval}` : "—" }),
    h("td", { text: held ? movement(held, "bleu") : "—" }));
}

export async function refreshCorrections() {
  const answer = await call("admin/corrections/summary", { admin: true });
  const rows = Object.entries(answer.domains).map(([domain, counts]) =>
    h("tr", {}, h("th", { scope: "row", text: domain || "(no domain)" }),
      ...COLUMNS.map((name) => h("td", { text: String(counts[name] ?? 0) }))));
  $("#corrections-body").replaceChildren(...rows);
  $("#corrections-empty").hidden = rows.length > 0;
  const refreshes = Object.entries(answer.refreshes ?? {})
    .map(([domain, last]) => refreshRow(domain, last));
  $("#refreshes-body").replaceChildren(...refreshes);
  $("#refreshes").hidden = refreshes.length === 0;
}
