// The Translate view: text, domain (auto / a served domain / generic / a custom mixture),
// beam size and alternatives; HTML mode and a glossary where the API has them.

import { call } from "./api.js";
import { $, h, showError } from "./dom.js";
import { LanguagesControl } from "./languages.js";
import { ImproveBox } from "./improve.js";
import { memoryOption, showMatches } from "./memories.js";
import { summary } from "./routing.js";

const MIXTURE = "__mixture__";

export function parseGlossary(text) {
  const glossary = {};
  text.split("\n").forEach((line, index) => {
    if (!line.trim()) return;
    const parts = line.includes("\t") ? line.split("\t") : line.split("=");
    if (parts.length !== 2 || !parts[0].trim() || !parts[1].trim()) {
      throw new Error(`glossary line ${index + 1}: write "source = target" (got "${line.trim()}")`);
    }
    glossary[parts[0].trim()] = parts[1].trim();
  });
  return glossary;
}

function numberOrNull(input) {
  return input.value.trim() === "" ? null : Number(input.value);
}

export class TranslateView {
  constructor(app) {
    this.app = app;
    this.form = $("#translate-form");
    this.text = $("#source-text");
    this.domain = $("#domain-select");
    this.beam = $("#beam-size");
    this.nBest = $("#n-best");
    this.button = $("#translate-button");
    this.error = $("#translate-error");
    // another direction lists its own domains (GET /domains is the default direction's)
    this.direction = null;
    this.defaultDomains = [];
    this.languages = new LanguagesControl((direction) => {
      this.direction = direction;
      this.showDomains();
    });
    this.languages.load();
    this.improve = new ImproveBox();
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.translate();
    });
    this.text.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        this.form.requestSubmit();
      }
    });
    this.domain.addEventListener("change", () => {
      $("#mixture-editor").hidden = this.domain.value !== MIXTURE;
    });
  }

  // The API's optional fields decide which controls exist.
  setFields(fields) {
    $("#html-field").hidden = !fields.has("format");
    $("#glossary-field").hidden = !fields.has("glossary");
    $("#memory-field").hidden = !fields.has("memory");
  }

  setDomains(domains) {
    this.defaultDomains = domains;
    this.showDomains();
  }

  showDomains() {
    const other = this.direction && !this.direction.default;
    const domains = other ? this.direction.domains.map((name) => ({ name })) : this.defaultDomains;
    const chosen = this.domain.value || "auto";
    const options = [
      h("option", { value: "auto", text: "Automatic" }),
      ...domains.map((d) => h("option", { value: d.name,
        text: d.version === undefined ? d.name : `${d.name} (v${d.version})` })),
      h("option", { value: "generic", text: "Generic (plain backbone)" }),
      h("option", { value: MIXTURE, text: "Custom mixture…" }),
    ];
    this.domain.replaceChildren(...options);
    this.domain.value = [...this.domain.options].some((o) => o.value === chosen) ? chosen : "auto";
    const weights = $("#mixture-weights");
    const previous = Object.fromEntries([...weights.querySelectorAll("input")]
      .map((input) => [input.dataset.domain, input.value]));
    weights.replaceChildren(...[...domains.map((d) => d.name), "generic"].map((name) => {
      const id = `weight-${name}`;
      return h("div", { class: "field narrow" },
        h("label", { for: id, text: name }),
        h("input", { id, type: "number", min: "0", step: "0.1", inputmode: "decimal",
                     "data-domain": name, value: previous[name] ?? "", placeholder: "0",
                     "aria-label": `Weight of ${name}` }));
    }));
    $("#mixture-editor").hidden = this.domain.value !== MIXTURE;
  }

  domainValue() {
    const value = this.domain.value;
    if (!value || value === "auto") return undefined;
    if (value !== MIXTURE) return value;
    const weights = {};
    for (const input of $("#mixture-weights").querySelectorAll("input")) {
      if (input.value.trim() !== "") weights[input.dataset.domain] = Number(input.value);
    }
    return weights;
  }

  request() {
    const fields = this.app.fields;
    const body = { text: this.text.value, ...this.languages.values() };
    const domain = this.domainValue();
    if (domain !== undefined) body.domain = domain;
    const options = {};
    const beam = numberOrNull(this.beam);
    const nBest = numberOrNull(this.nBest);
    if (beam !== null) options.beam_size = beam;
    if (nBest !== null && nBest !== 1) options.n_best = nBest;
    if (Object.keys(options).length) body.options = options;
    if (fields.has("format") && $("#html-mode").checked) body.format = "html";
    if (fields.has("glossary") && $("#glossary").value.trim()) {
      body.glossary = parseGlossary($("#glossary").value);
    }
    const memory = fields.has("memory") ? memoryOption($("#memory-name").value) : undefined;
    if (memory !== undefined) body.memory = memory;
    if (fields.has("explain")) body.explain = true;
    return body;
  }

  async translate() {
    showError(this.error, null);
    let body;
    try {
      body = this.request();
    } catch (error) {
      showError(this.error, error);
      return;
    }
    this.button.disabled = true;
    this.form.setAttribute("aria-busy", "true");
    try {
      const result = await call("translate", { method: "POST", json: body });
      this.show(result);
      this.improve.offer(body, result);
      this.app.explain(body, result);
    } catch (error) {
      showError(this.error, error);
    } finally {
      this.button.disabled = false;
      this.form.removeAttribute("aria-busy");
    }
  }

  show(result) {
    $("#translation").replaceChildren(...colouredSentences(result));
    this.languages.showDetected(result.detected);
    const routing = $("#routing-summary");
    routing.hidden = false;
    routing.replaceChildren(
      h("span", { class: `mode mode-${result.routing.mode}`, text: result.routing.mode }), " ",
      h("span", { text: summary(result.routing) }), " ",
      h("a", { href: "#why", text: "Why?" }));
    const alternatives = result.alternatives || [];
    $("#alternatives").hidden = alternatives.length < 2;
    $("#alternatives-list").replaceChildren(...alternatives.map((a) =>
      h("li", {}, h("span", { class: "alt-text", text: a.translation }),
        h("span", { class: "alt-score", text: `score ${a.score.toFixed(3)}` }))));
    showMatches(result);
    const report = $("#glossary-report");
    const glossary = result.glossary;
    report.hidden = !glossary;
    if (glossary) {
      const applied = (glossary.applied || []).map((t) => (typeof t === "string" ? t : JSON.stringify(t)));
      const missed = (glossary.missed || []).map((t) => (typeof t === "string" ? t : JSON.stringify(t)));
      report.textContent = `Glossary: applied ${applied.join(", ") || "none"}` +
        (missed.length ? ` · missed ${missed.join(", ")}` : "");
    }
  }
}

// The translation with each sentence in a span coloured by its quality (docs/API.md,
// Quality): flagged below min_quality, middling under 0.6, unmarked otherwise. The
// sentences are found in order in the translation; the layout between them stays text.
function colouredSentences(result) {
  const text = result.translation;
  const out = [];
  let cursor = 0;
  for (const sentence of result.sentences || []) {
    const at = sentence.translation ? text.indexOf(sentence.translation, cursor) : -1;
    if (at < 0) continue;
    if (at > cursor) out.push(text.slice(cursor, at));
    const level = sentence.flagged ? "low" : sentence.quality < 0.6 ? "mid" : "high";
    const issues = sentence.issues.length ? ` · ${sentence.issues.join(", ")}` : "";
    const recovered = sentence.recovered ? ` · recovered from ${sentence.recovered}` : "";
    out.push(h("span", {
      class: `sentence q-${level}`, "data-quality": sentence.quality.toFixed(2),
      title: `quality ${sentence.quality.toFixed(2)}${issues}${recovered}`,
      text: sentence.translation }));
    cursor = at + sentence.translation.length;
  }
  if (cursor < text.length) out.push(text.slice(cursor));
  return out;
}
