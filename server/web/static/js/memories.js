// Translation memories on the page: the `memory` option of a translation (a memory's name),
// what the memories in play answered (`match`: the whole text from a pair; `matches`: fuzzy
// matches, best first), and adding the corrected sentence to a memory
// (POST /admin/memories/{name}/pairs with the admin token typed into Operate).

import { call } from "./api.js";
import { $, h, showError } from "./dom.js";

// The request's `memory` field from the input: a name, several separated by commas.
export function memoryOption(value) {
  const names = value.split(",").map((n) => n.trim()).filter(Boolean);
  if (!names.length) return undefined;
  return names.length === 1 ? names[0] : names;
}

function matchLine(match) {
  return h("li", {},
    h("span", { class: "match-score", text: `${Math.round(match.score)}%` }), " ",
    h("span", { class: "match-target", text: match.target }), " ",
    h("span", { class: "hint", text: `(${match.memory}, ${match.origin}: “${match.source}”)` }));
}

export function showMatches(result) {
  const box = $("#memory-matches");
  const exact = result.match ? [result.match] : [];
  const fuzzy = result.matches || [];
  box.hidden = !exact.length && !fuzzy.length;
  $("#memory-exact").hidden = !exact.length;
  $("#memory-exact").replaceChildren(...exact.map((m) =>
    h("span", { text: `Exact match from memory ${m.memory} (tuid ${m.tuid ?? "none"})` })));
  $("#memory-fuzzy").replaceChildren(...fuzzy.map(matchLine));
}

export class AddToMemory {
  constructor() {
    this.name = $("#improve-memory");
    this.status = $("#improve-memory-status");
    this.error = $("#improve-memory-error");
    $("#improve-memory-add").addEventListener("click", () => this.send());
  }

  reset(memory) {
    if (typeof memory === "string") this.name.value = memory;
    this.status.textContent = "";
    showError(this.error, null);
  }

  // source: the text translated; target: the corrected sentence of the improve box.
  async add(source, target) {
    const name = this.name.value.trim();
    showError(this.error, null);
    this.status.textContent = "";
    try {
      const pair = await call(`admin/memories/${encodeURIComponent(name)}/pairs`,
        { method: "POST", admin: true, json: { source, target, replace: "source" } });
      this.status.textContent = `Added to memory ${name} (pair ${pair.id}).`;
    } catch (error) {
      showError(this.error, error);
    }
  }

  send() {
    if (this.onSend) this.onSend();
  }
}
