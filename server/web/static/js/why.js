// The Why view: the routing decision of the last translation, the classifier's posteriors
// and ensemble weights as bars, a word-level mixture's per-token domain proportions as a
// heatmap (layers selectable), and the same text through `generic` beside the chosen routing.

import { call } from "./api.js";
import { $, bars, h, percent, showError } from "./dom.js";
import { MODES, domainOf, summary, versionsText, weightsText } from "./routing.js";

const MEAN = "mean";

function fact(term, ...description) {
  return [h("dt", { text: term }), h("dd", {}, ...description)];
}

// Cell colour: from near-white (0) to deep blue (1); text flips to white on dark cells.
function heat(value) {
  const from = [248, 250, 252];
  const to = [30, 58, 138];
  const mix = from.map((c, i) => Math.round(c + (to[i] - c) * value));
  return `rgb(${mix.join(",")})`;
}

function shownPiece(piece) {
  return piece.replace(/^▁/, "").replace(/▁/g, " ") || "␣";
}

function layerRows(sentence, layer) {
  if (layer !== MEAN) return sentence.layers[Number(layer)];
  const count = sentence.layers.length;
  return sentence.layers[0].map((row, p) => row.map((_, d) =>
    sentence.layers.reduce((sum, rows) => sum + rows[p][d], 0) / count));
}

function heatmap(sentence, index, domains, layer) {
  const rows = layerRows(sentence, layer);
  const head = h("tr", {}, h("th", { scope: "col", class: "corner", text: "domain" }),
    ...sentence.pieces.map((piece) => h("th", { scope: "col", class: piece.startsWith("▁") ? "piece word" : "piece", text: shownPiece(piece) })));
  const body = domains.map((domain, d) => h("tr", {},
    h("th", { scope: "row", text: domain }),
    ...rows.map((row, p) => {
      const value = row[d];
      const cell = h("td", { title: `${shownPiece(sentence.pieces[p])} · ${domain}: ${percent(value, 1)}`,
                             class: value > 0.5 ? "dark" : "", text: Math.round(value * 100) });
      cell.style.background = heat(value);
      return cell;
    })));
  return h("div", { class: "heatmap-scroll", tabindex: "0", role: "group",
                    "aria-label": `Sentence ${index + 1} proportions` },
    h("table", { class: "heatmap" },
      h("caption", { text: `Sentence ${index + 1} (per cent of each piece)` }),
      h("thead", {}, head), h("tbody", {}, ...body)));
}

export class WhyView {
  constructor(app) {
    this.app = app;
    this.last = null;
    $("#layer-select").addEventListener("change", () => this.renderHeatmap());
    $("#compare-button").addEventListener("click", () => this.compare());
  }

  show(request, result) {
    this.last = { request, result };
    $("#why-empty").hidden = true;
    $("#why-content").hidden = false;
    $("#why-source").textContent = request.text;
    $("#compare").replaceChildren();
    showError($("#compare-error"), null);
    this.renderDecision();
    this.renderPosteriors();
    this.renderWeights();
    this.renderLayers();
  }

  renderDecision() {
    const { routing, explanation } = this.last.result;
    const threshold = explanation ? explanation.threshold : null;
    const items = [
      ...fact("Mode", h("span", { class: `mode mode-${routing.mode}`, text: routing.mode }),
              h("span", { class: "muted block", text: MODES[routing.mode] || "" })),
      ...fact("Chosen", routing.domain || "an ensemble"),
    ];
    if (routing.confidence !== null && routing.confidence !== undefined) {
      const versus = threshold === null ? "" : (routing.confidence >= threshold
        ? ` ≥ threshold ${percent(threshold)}` : ` < threshold ${percent(threshold)}`);
      items.push(...fact("Confidence", `${percent(routing.confidence, 1)}${versus}`));
    }
    items.push(...fact("Module versions", versionsText(routing)));
    const router = explanation && explanation.router;
    if (router) {
      items.push(...fact("Router", `${router.name} v${router.version} of ${router.backbone}` +
        (router.shared ? " (shared: this direction reads the same language and has none)" : "")));
    }
    const backbone = this.app.backbone;
    if (backbone) items.push(...fact("Backbone", `${backbone.name} v${backbone.version}`));
    items.push(...fact("In one line", summary(routing)));
    $("#decision").replaceChildren(...items);
  }

  renderPosteriors() {
    const { routing, explanation } = this.last.result;
    const posteriors = explanation && explanation.posteriors;
    $("#posteriors-card").hidden = !posteriors;
    if (!posteriors) return;
    $("#posteriors-note").textContent = `Calibrated probability of each label; the line marks the threshold (${percent(explanation.threshold)}) above which one domain is used alone.`;
    const predicted = Object.entries(posteriors).sort((a, b) => b[1] - a[1])[0];
    $("#posteriors").replaceChildren(...bars(Object.entries(posteriors), {
      marker: explanation.threshold, highlight: routing.domain || (predicted && predicted[0]) }));
  }

  renderWeights() {
    const weights = this.last.result.routing.weights;
    $("#weights-card").hidden = !weights;
    if (weights) $("#weights").replaceChildren(...bars(Object.entries(weights)));
  }

  renderLayers() {
    const proportions = this.last.result.proportions;
    $("#heatmap-card").hidden = !proportions;
    if (!proportions) return;
    const layers = proportions.sentences.length ? proportions.sentences[0].layers.length : 0;
    $("#layer-select").replaceChildren(
      h("option", { value: MEAN, text: "Mean of all layers" }),
      ...Array.from({ length: layers }, (_, i) => h("option", { value: String(i), text: `Layer ${i + 1}` })));
    this.renderHeatmap();
  }

  renderHeatmap() {
    const proportions = this.last && this.last.result.proportions;
    if (!proportions) return;
    const layer = $("#layer-select").value || MEAN;
    $("#heatmaps").replaceChildren(...proportions.sentences.map((sentence, index) =>
      heatmap(sentence, index, proportions.domains, layer)));
  }

  async compare() {
    const { request, result } = this.last;
    const button = $("#compare-button");
    showError($("#compare-error"), null);
    button.disabled = true;
    const base = { ...request };
    delete base.explain;
    if (base.options) base.options = { ...base.options, n_best: undefined };
    try {
      const chosen = domainOf(result.routing);
      const [generic, routed] = await Promise.all([
        call("translate", { method: "POST", json: { ...base, domain: "generic" } }),
        call("translate", { method: "POST", json: { ...base, domain: chosen } })]);
      const column = (title, answer) => h("div", { class: "compare-col" },
        h("h3", { text: title }), h("p", { class: "translation", text: answer.translation }),
        h("p", { class: "muted", text: answer.routing.mode === "generic" ? "Backbone only"
                                        : `Module ${versionsText(answer.routing)}` }));
      const routing = result.routing;
      const chosenTitle = routing.mode === "ensemble"
        ? `Chosen: ensemble of ${weightsText(routing.weights)}` : `Chosen: ${routing.domain}`;
      $("#compare").replaceChildren(
        column("Generic (plain backbone)", generic), column(chosenTitle, routed));
    } catch (error) {
      showError($("#compare-error"), error);
    } finally {
      button.disabled = false;
    }
  }
}
