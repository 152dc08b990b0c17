// Words for a routing decision (the `routing` object of a /translate answer).

import { percent } from "./dom.js";

export const MODES = {
  explicit: "the request named the domain",
  classifier: "the classifier was confident enough to pick one domain",
  generic: "the plain backbone: asked for, general text, or no classifier",
  ensemble: "several domains decode together, each step's distributions weighted",
  mixture: "a word-level mixture weighs its domains for every token",
};

export function versionsText(routing) {
  if (routing.module_versions) {
    return Object.entries(routing.module_versions).map(([d, v]) => `${d} v${v}`).join(", ");
  }
  return routing.module_version ? `v${routing.module_version}` : "none (backbone only)";
}

export function weightsText(weights) {
  return Object.entries(weights).sort((a, b) => b[1] - a[1])
    .map(([domain, weight]) => `${domain} ${percent(weight)}`).join(", ");
}

// One line: what translated the text and how it was chosen.
export function summary(routing) {
  const confidence = routing.confidence !== null && routing.confidence !== undefined
    ? ` (confidence ${percent(routing.confidence)})` : "";
  switch (routing.mode) {
    case "explicit":
      return `Domain ${routing.domain}, as requested · module ${versionsText(routing)}`;
    case "classifier":
      return `Routed by the classifier to ${routing.domain}${confidence} · module ${versionsText(routing)}`;
    case "mixture":
      return `Word-level mixture ${routing.domain} · module ${versionsText(routing)}`;
    case "ensemble":
      return `Ensemble of ${weightsText(routing.weights || {})}${confidence}`;
    default:
      return `Plain backbone (generic)${confidence}`;
  }
}

// The request `domain` that reproduces a decision exactly (for the side-by-side view).
export function domainOf(routing) {
  if (routing.mode === "ensemble") return routing.weights;
  return routing.domain || "generic";
}
