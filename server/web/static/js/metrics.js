// Live throughput, latency and queue depth from the Prometheus text of /metrics: counters
// and histogram buckets are differenced between two scrapes, so the tiles show the last
// interval, not the averages since start-up.

import { call } from "./api.js";
import { $, h, showError } from "./dom.js";

const TRANSLATE_ROUTES = new Set(["/translate", "/translate/batch"]);
const HISTORY = 60;

// [{name, labels: {...}, value}] from the text exposition format.
export function parsePrometheus(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = line.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!match) continue;
    const labels = {};
    for (const pair of (match[2] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[pair[1]] = pair[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

function total(samples, name, keep = () => true) {
  return samples.filter((s) => s.name === name && keep(s.labels))
    .reduce((sum, s) => sum + s.value, 0);
}

// Cumulative bucket counts of the translation routes' latency histogram: le -> count.
function latencyBuckets(samples) {
  const buckets = new Map();
  for (const s of samples) {
    if (s.name !== "nmt_api_request_latency_seconds_bucket" || !TRANSLATE_ROUTES.has(s.labels.route)) continue;
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    buckets.set(le, (buckets.get(le) || 0) + s.value);
  }
  return buckets;
}

// The q-quantile of the requests between two scrapes (linear within a bucket, as
// Prometheus' histogram_quantile does); null without requests.
export function quantile(q, before, after) {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const counts = bounds.map((le) => (after.get(le) || 0) - (before.get(le) || 0));
  const count = counts[counts.length - 1] || 0;
  if (count <= 0) return null;
  const rank = q * count;
  for (let i = 0; i < bounds.length; i += 1) {
    if (counts[i] >= rank) {
      if (bounds[i] === Infinity) return bounds[i - 1] ?? null;
      const lower = i === 0 ? 0 : bounds[i - 1];
      const below = i === 0 ? 0 : counts[i - 1];
      const inside = counts[i] - below;
      return inside > 0 ? lower + (bounds[i] - lower) * ((rank - below) / inside) : bounds[i];
    }
  }
  return null;
}

function snapshot(samples) {
  return {
    at: performance.now(),
    requests: total(samples, "nmt_api_requests_total", (l) => TRANSLATE_ROUTES.has(l.route)),
    sentences: total(samples, "nmt_scheduler_batch_sentences_sum"),
    tokens: total(samples, "nmt_engine_target_tokens_total"),
    queue: total(samples, "nmt_scheduler_queue_depth"),
    latency: latencyBuckets(samples),
  };
}

function sparkline(values, label) {
  const width = 160;
  const height = 36;
  const top = Math.max(1, ...values);
  const step = width / Math.max(1, HISTORY - 1);
  const offset = HISTORY - values.length;
  const points = values.map((v, i) => `${((offset + i) * step).toFixed(1)},${(height - 2 - (v / top) * (height - 4)).toFixed(1)}`).join(" ");
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("class", "spark");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", points);
  svg.append(line);
  return svg;
}

const format = (value, digits = 1) => (value === null || Number.isNaN(value) ? "—" : value.toFixed(digits));
const ms = (seconds) => (seconds === null ? "—" : `${Math.round(seconds * 1000)} ms`);

const WINDOW_MS = 10_000;

export class MetricsPanel {
  constructor() {
    this.snapshots = []; // the scrapes of the last WINDOW_MS (oldest first)
    this.history = [];
    this.timer = null;
  }

  start() {
    if (this.timer) return;
    this.scrape();
    this.timer = setInterval(() => this.scrape(), 2000);
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
    this.snapshots = [];
  }

  async scrape() {
    let current;
    try {
      current = snapshot(parsePrometheus(await call("metrics")));
      showError($("#metrics-error"), null);
    } catch (error) {
      showError($("#metrics-error"), error);
      return;
    }
    // Rates and quantiles over the last 10 s (the oldest scrape in the window); the
    // sparkline over each 2 s interval.
    const last = this.snapshots[this.snapshots.length - 1];
    this.snapshots = [...this.snapshots.filter((s) => current.at - s.at <= WINDOW_MS), current];
    const before = this.snapshots.length > 1 ? this.snapshots[0] : null;
    const seconds = before ? (current.at - before.at) / 1000 : 0;
    const rate = (key) => (before && seconds > 0 ? Math.max(0, current[key] - before[key]) / seconds : null);
    if (last) {
      const interval = (current.at - last.at) / 1000;
      this.history = [...this.history, Math.max(0, current.tokens - last.tokens) / interval].slice(-HISTORY);
    }
    const p50 = before ? quantile(0.5, before.latency, current.latency) : null;
    const p95 = before ? quantile(0.95, before.latency, current.latency) : null;
    const tile = (label, value, unit, extra = null) => h("div", { class: "tile" },
      h("span", { class: "tile-label", text: label }),
      h("span", { class: "tile-value" }, value, h("span", { class: "tile-unit", text: unit })),
      extra);
    $("#metrics").replaceChildren(
      tile("Translation requests", format(rate("requests")), " /s"),
      tile("Sentences", format(rate("sentences")), " /s"),
      tile("Target tokens", format(rate("tokens"), 0), " /s",
           sparkline(this.history, "target tokens per second, last two minutes")),
      tile("Latency p50 · p95", `${ms(p50)} · ${ms(p95)}`, ""),
      tile("Queue depth", String(current.queue), " sentences"));
  }
}
