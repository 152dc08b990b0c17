// The Documents view: drop a file (or pick one), follow its translation, download it.
// It calls POST translate/file: a small file comes back at once; a large one answers 202
// with a job, followed by long polling (translate/file/jobs/{id}?wait=) until it is done.
// The upload and the result's download send the page's API key (X-API-Key), so that a
// tenant's key translates documents with its own domains (the result is fetched as a blob:
// a plain link could not carry the key).
// On a server of several directions (GET /languages) the files' languages are chosen
// here: a direction, or "Detect language" into a target (source auto).

import { ApiError, call, keyHeaders } from "./api.js";
import { $, h, percent, showError } from "./dom.js";

const WAIT_S = 10;

async function apiError(response) {
  const text = await response.text();
  try {
    const error = JSON.parse(text).error;
    return new ApiError(response.status, error.code, error.message, error.field);
  } catch {
    return new ApiError(response.status, "error", text || response.statusText, null);
  }
}

function routingText(routing, detected) {
  if (!routing) return "";
  const language = detected
    ? `; detected: ${detected.language} (${Math.round(detected.confidence * 100)}%)` : "";
  if (routing.mode === "ensemble") {
    const parts = Object.entries(routing.weights || {}).map(([d, w]) => `${d} ${percent(w)}`);
    return `routed once for the whole file: ensemble (${parts.join(", ")})${language}`;
  }
  return `routed once for the whole file: ${routing.domain} (${routing.mode})${language}`;
}

// The choices: every direction, then "Detect language" into each target.
function directionOptions(directions) {
  const targets = new Map(directions.map((d) => [d.target, d.target_name]));
  return [
    ...directions.map((d) => h("option", {
      value: JSON.stringify({ source: d.source, target: d.target }),
      text: `${d.source_name} → ${d.target_name}` })),
    ...[...targets].map(([code, name]) => h("option", {
      value: JSON.stringify({ source: "auto", target: code }),
      text: `Detect language → ${name}` })),
  ];
}

export class DocumentsView {
  constructor(app) {
    this.app = app;
    this.directionsLoaded = false; // GET /languages, on the first visit
    const input = $("#document-file");
    const zone = $("#document-drop");
    input.addEventListener("change", () => {
      for (const file of input.files) this.send(file);
      input.value = "";
    });
    zone.addEventListener("dragover", (event) => {
      event.preventDefault();
      zone.classList.add("over");
    });
    zone.addEventListener("dragleave", () => zone.classList.remove("over"));
    zone.addEventListener("drop", (event) => {
      event.preventDefault();
      zone.classList.remove("over");
      for (const file of event.dataTransfer.files) this.send(file);
    });
  }

  async onShow() {
    try {
      await this.loadDirections();
      const answer = await call("domains");
      const select = $("#document-domain");
      const chosen = select.value;
      select.replaceChildren(h("option", { value: "", text: "automatic (once per file)" }),
        ...answer.domains.filter((d) => d.status === "ready")
          .map((d) => h("option", { value: d.name, text: d.name })),
        h("option", { value: "generic", text: "generic (plain backbone)" }));
      select.value = chosen;
    } catch (error) {
      showError($("#documents-error"), error);
    }
  }

  async loadDirections() {
    const field = $("#document-direction-field");
    if (this.directionsLoaded) return;
    let directions = [];
    try {
      directions = (await call("languages")).directions.filter((d) => d.source && d.target);
    } catch {
      directions = []; // an older server: one direction
    }
    this.directionsLoaded = true;
    field.hidden = directions.length < 2;
    if (field.hidden) return;
    const select = $("#document-direction");
    select.replaceChildren(...directionOptions(directions));
    const fallback = directions.find((d) => d.default) || directions[0];
    select.value = JSON.stringify({ source: fallback.source, target: fallback.target });
  }

  row(file) {
    const bar = h("progress", { max: 1, value: 0, "aria-label": `${file.name} progress` });
    const status = h("span", { class: "muted", text: "uploading…" });
    const link = h("span");
    const item = h("li", { class: "job" },
      h("div", { class: "job-head" }, h("strong", { text: file.name }), link), bar, status);
    $("#documents").prepend(item);
    $("#documents-empty").hidden = true;
    return { bar, status, link };
  }

  async send(file) {
    const shown = this.row(file);
    const form = new FormData();
    form.append("file", file, file.name);
    const domain = $("#document-domain").value;
    if (domain) form.append("domain", domain);
    if (!$("#document-direction-field").hidden) {
      const { source, target } = JSON.parse($("#document-direction").value);
      form.append("source", source);
      form.append("target", target);
    }
    try {
      const response = await fetch("translate/file", {
        method: "POST", body: form, headers: keyHeaders() });
      if (response.status === 202) {
        await this.follow(await response.json(), shown);
      } else if (response.ok) {
        const routing = JSON.parse(response.headers.get("x-nmt-routing") || "null");
        const detected = JSON.parse(response.headers.get("x-nmt-detected") || "null");
        const name = /filename="([^"]*)"/.exec(response.headers.get("content-disposition") || "");
        this.done(shown, URL.createObjectURL(await response.blob()),
                  name ? name[1] : file.name, routing, detected);
      } else {
        throw await apiError(response);
      }
    } catch (error) {
      shown.bar.hidden = true;
      shown.status.textContent = error.describe ? error.describe() : String(error);
      shown.status.className = "error-text";
    }
  }

  async follow(job, shown) {
    while (job.state === "queued" || job.state === "running") {
      shown.bar.value = job.progress.fraction;
      shown.status.textContent = `${job.state}: ${job.progress.done} of ${job.progress.total} `
        + "segments translated";
      job = await call(`translate/file/jobs/${job.id}?wait=${WAIT_S}`);
    }
    if (job.state === "failed") {
      throw new ApiError(409, job.error.code, `the job failed: ${job.error.message}`, null);
    }
    const result = await fetch(`translate/file/jobs/${job.id}/result`,
                               { headers: keyHeaders() });
    if (!result.ok) throw await apiError(result);
    this.done(shown, URL.createObjectURL(await result.blob()), job.output_name, job.routing,
              job.detected);
  }

  done(shown, href, name, routing, detected) {
    shown.bar.value = 1;
    shown.status.textContent = routingText(routing, detected);
    shown.link.replaceChildren(h("a", { href, download: name, class: "download",
                                        text: `Download ${name}` }));
  }
}
