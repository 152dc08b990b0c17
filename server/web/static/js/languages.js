// Source and target languages (GET /languages): shown only when the server serves more
// than one direction; a request then names its direction with `source` and `target`, and
// "Detect language" sends source "auto" (the answer says what was detected).

import { call } from "./api.js";
import { $, h } from "./dom.js";

const AUTO = "auto";

export class LanguagesControl {
  constructor(onDirection) {
    this.onDirection = onDirection; // called with the chosen direction (GET /languages)
    this.directions = [];
    this.detected = null;
    this.field = $("#languages-field");
    this.source = $("#source-language");
    this.target = $("#target-language");
    this.source.addEventListener("change", () => this.fillTargets());
    this.target.addEventListener("change", () => this.changed());
    $("#swap-languages").addEventListener("click", () => this.swap());
  }

  async load() {
    try {
      this.directions = (await call("languages")).directions.filter((d) => d.source && d.target);
    } catch {
      this.directions = []; // an older server: one direction, no selectors
    }
    this.field.hidden = this.directions.length < 2;
    if (this.field.hidden) return;
    const sources = [...new Map(this.directions.map((d) => [d.source, d.source_name]))];
    this.source.replaceChildren(h("option", { value: AUTO, text: "Detect language" }),
      ...sources.map(([code, name]) => h("option", { value: code, text: `${name} (${code})` })));
    const fallback = this.directions.find((d) => d.default) || this.directions[0];
    this.source.value = fallback.source;
    this.fillTargets(fallback.target);
  }

  fillTargets(wanted) {
    const chosen = wanted || this.target.value;
    const source = this.source.value;
    const targets = new Map(this.directions
      .filter((d) => source === AUTO || d.source === source)
      .map((d) => [d.target, d.target_name]));
    this.target.replaceChildren(...[...targets].map(([code, name]) =>
      h("option", { value: code, text: `${name} (${code})` })));
    if (targets.has(chosen)) this.target.value = chosen;
    this.changed();
  }

  // The reverse direction, when served; "Detect language" swaps what was detected.
  swap() {
    const from = this.source.value === AUTO ? this.detected : this.source.value;
    const to = this.target.value;
    if (!from || !this.directions.some((d) => d.source === to && d.target === from)) return;
    this.source.value = to;
    this.fillTargets(from);
  }

  changed() {
    const source = this.source.value;
    const direction = this.directions.find((d) => d.source === source && d.target === this.target.value);
    if (direction) this.onDirection(direction);
  }

  // The request's fields: none when the selectors are hidden (the default direction).
  values() {
    if (this.field.hidden) return {};
    return { source: this.source.value, target: this.target.value };
  }

  showDetected(detected) {
    const line = $("#detected-language");
    this.detected = detected ? detected.language : null;
    line.hidden = !detected;
    if (detected) {
      line.textContent = `detected: ${detected.language} (${Math.round(detected.confidence * 100)}%)`;
    }
  }
}
