// The Operate view (admin token, kept in session storage): domains and versions with
// activate / roll back / remove, module upload, adding a domain from TSV with a live
// progress bar of its training job.

import { adminToken, apiKey, call } from "./api.js";
import { refreshCorrections } from "./corrections.js";
import { $, h, showError } from "./dom.js";

const FINISHED = new Set(["published", "failed"]);

// Dev BLEU of a version against the plain backbone: sidecar jobs record module/backbone,
// the default recipe dev/backbone_dev.
function scoresText(scores) {
  if (!scores) return "";
  const own = (scores.module || scores.dev || {}).bleu;
  const backbone = (scores.backbone || scores.backbone_dev || {}).bleu;
  const parts = [];
  if (own !== undefined) parts.push(`BLEU ${own}` + (backbone !== undefined ? ` (backbone ${backbone})` : ""));
  if (scores.gate) parts.push(`gate ${scores.gate}`);
  return parts.join(" · ");
}

// What a job is doing, in words: queued, training (step, dev score), gating, published or
// refused with the reason.
export function jobStatus(job) {
  const training = (job.scores && job.scores.training) || {};
  switch (job.state) {
    case "queued":
      return "Queued: waiting for the training sidecar";
    case "running": {
      const parts = [`Training: step ${training.step ?? 0}`, `epoch ${training.epoch ?? 0}`];
      if (training.best_dev_bleu !== undefined) parts.push(`best dev BLEU ${training.best_dev_bleu}`);
      if (job.loss !== null && job.loss !== undefined) parts.push(`loss ${job.loss.toFixed(2)}`);
      return parts.join(" · ");
    }
    case "evaluating":
      return "Gating: module and backbone translate the dev set; the router is retrained";
    case "published": {
      const s = job.scores || {};
      const version = job.result && job.result.module_version ? ` as v${job.result.module_version}` : "";
      const gain = s.delta_bleu !== undefined ? ` (${s.delta_bleu >= 0 ? "+" : ""}${s.delta_bleu} BLEU over the backbone)` : "";
      return `Published${version}${gain}`;
    }
    default: {
      const refused = job.scores && job.scores.gate === "refused";
      return `${refused ? "Refused by the quality gate" : "Failed"}: ${job.error || "no reason given"}`;
    }
  }
}


// Every domain of the admin list, page after page (GET /admin/domains is paginated).
// Every entry of a paged admin list (`field` of each page), following `next_after`.
async function everyPage(path, field) {
  const entries = [];
  let after = null;
  do {
    const query = after === null ? "" : `&after=${encodeURIComponent(after)}`;
    const page = await call(`${path}?limit=1000${query}`, { admin: true });
    entries.push(...page[field]);
    after = page.next_after;
  } while (after !== null && after !== undefined);
  return entries;
}

async function adminDomains() {
  return everyPage("admin/domains", "domains");
}

export class OperateView {
  constructor(app) {
    this.app = app;
    this.jobsTimer = null;
    this.visible = false;
    $("#token-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.signIn();
    });
    $("#sign-out").addEventListener("click", () => this.signOut());
    $("#key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      apiKey.set($("#api-key").value.trim());
      window.location.reload();  // the lists of domains are the key's tenant's
    });
    $("#upload-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.upload();
    });
    $("#train-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.train();
    });
  }

  signedIn(yes) {
    $("#token-form").hidden = yes;
    $("#admin").hidden = !yes;
  }

  async onShow() {
    this.visible = true;
    this.signedIn(Boolean(adminToken.get()));
    if (adminToken.get()) await this.refresh();
  }

  onHide() {
    this.visible = false;
    clearTimeout(this.jobsTimer);
    this.jobsTimer = null;
  }

  async signIn() {
    const token = $("#admin-token").value.trim();
    showError($("#token-error"), null);
    if (!token) {
      showError($("#token-error"), "Enter the admin token.");
      return;
    }
    adminToken.set(token);
    try {
      await call("admin/domains", { admin: true });
    } catch (error) {
      adminToken.clear();
      showError($("#token-error"), error);
      return;
    }
    $("#admin-token").value = "";
    this.signedIn(true);
    await this.refresh();
    $("#domains-title").focus();
  }

  signOut() {
    adminToken.clear();
    this.onHide();
    this.visible = true;
    this.signedIn(false);
    $("#admin-token").focus();
  }

  notice(text) {
    $("#admin-notice").textContent = text;
  }

  // Runs an admin call; its error (as the API words it) goes to the admin error box.
  // `clear`: a new action replaces the last error; refreshes after it keep it visible.
  async act(work, { clear = true } = {}) {
    if (clear) showError($("#admin-error"), null);
    try {
      return await work();
    } catch (error) {
      if (error.status === 401 || error.status === 403) {
        adminToken.clear();
        this.signedIn(false);
        showError($("#token-error"), error);
      } else {
        showError($("#admin-error"), error);
      }
      return undefined;
    }
  }

  async refresh() {
    await this.act(async () => {
      const [domains, served] = await Promise.all([adminDomains(), call("domains")]);
      this.renderDomains(domains, served.domains);
      await refreshCorrections();
    }, { clear: false });
    await this.refreshJobs();
    await this.app.refreshDomains();
  }

  renderDomains(domains, served) {
    const status = Object.fromEntries(served.map((d) => [d.name, d.status]));
    $("#domain-names").replaceChildren(...domains.map((d) => h("option", { value: d.name })));
    const rows = [];
    for (const domain of domains) {
      const versions = [...domain.versions].sort((a, b) => b.version - a.version);
      versions.forEach((v, index) => {
        const active = v.version === domain.active_version;
        let state = active ? (status[domain.name] || "active") : "inactive";
        if (active && state === "ready") state = "serving";
        const actions = [];
        if (active) {
          actions.push(h("button", { type: "button", class: "danger",
            "aria-label": `Remove ${domain.name}`, text: "Remove",
            onclick: (event) => this.confirmRemove(event.currentTarget, domain.name) }));
        } else {
          const back = domain.active_version !== null && v.version < domain.active_version;
          const verb = back ? "Roll back" : "Activate";
          actions.push(h("button", { type: "button",
            "aria-label": `${verb} ${domain.name} to v${v.version}`, text: `${verb} to v${v.version}`,
            onclick: () => this.activate(domain.name, v.version) }));
        }
        rows.push(h("tr", { class: active ? "active" : "" },
          index === 0 ? h("th", { scope: "rowgroup", rowspan: versions.length, text: domain.name }) : null,
          h("td", { text: `v${v.version}` }), h("td", { text: v.family }),
          h("td", { text: new Date(v.created_at).toLocaleString() }),
          h("td", { text: scoresText(v.scores) }),
          h("td", {}, h("span", { class: `state state-${active ? "active" : "inactive"}`, text: state })),
          h("td", { class: "actions" }, ...actions)));
      });
      if (!versions.length) {
        rows.push(h("tr", {}, h("th", { scope: "row", text: domain.name }),
          h("td", { colspan: 6, class: "muted", text: "no version" })));
      }
    }
    $("#domains-body").replaceChildren(...(rows.length ? rows
      : [h("tr", {}, h("td", { colspan: 7, class: "muted", text: "No domain yet." }))]));
  }

  // Removing is the one destructive action: the first press asks, the second removes.
  confirmRemove(button, name) {
    if (button.dataset.armed) {
      this.remove(name);
      return;
    }
    button.dataset.armed = "yes";
    button.textContent = `Confirm: stop serving ${name}`;
    button.setAttribute("aria-label", `Confirm removing ${name}`);
  }

  async activate(name, version) {
    const answer = await this.act(() => call(`admin/domains/${encodeURIComponent(name)}/activate`,
      { method: "POST", json: { version }, admin: true }));
    if (answer) this.notice(`${name} now serves v${answer.version}.`);
    await this.refresh();
  }

  async remove(name) {
    const answer = await this.act(() => call(`admin/domains/${encodeURIComponent(name)}`,
      { method: "DELETE", admin: true }));
    if (answer) this.notice(`${name} no longer served (v${answer.deactivated_version} deactivated; its versions are kept).`);
    await this.refresh();
  }

  async upload() {
    const name = $("#upload-domain").value.trim();
    const file = $("#upload-file").files[0];
    if (!name || !file) {
      showError($("#admin-error"), "Upload a module: name the domain and choose a .tar.gz archive.");
      return;
    }
    const form = new FormData();
    form.append("file", file);
    const activate = $("#upload-activate").checked;
    const answer = await this.act(() => call(
      `admin/domains/${encodeURIComponent(name)}/versions?activate=${activate}`,
      { method: "POST", body: form, admin: true }));
    if (answer) {
      this.notice(`Uploaded ${answer.name} v${answer.version} (${answer.family})${answer.active ? ", now serving" : ", not active"}.`);
      $("#upload-form").reset();
    }
    await this.refresh();
  }

  async train() {
    const name = $("#train-name").value.trim();
    const trainFile = $("#train-file").files[0];
    const devFile = $("#dev-file").files[0];
    let config = { family: $("#train-family").value };
    const extra = $("#train-config").value.trim();
    if (extra) {
      try {
        config = { ...config, ...JSON.parse(extra) };
      } catch (error) {
        showError($("#admin-error"), `More options is not JSON: ${error.message}`);
        return;
      }
    }
    const form = new FormData();
    form.append("name", name);
    if (trainFile) form.append("train", trainFile);
    if (devFile) form.append("dev", devFile);
    form.append("config", JSON.stringify(config));
    const job = await this.act(() => call("admin/domains", { method: "POST", body: form, admin: true }));
    if (job) {
      this.notice(`Training job for ${job.domain} queued.`);
      $("#train-form").reset();
    }
    await this.refreshJobs();
  }

  async refreshJobs() {
    clearTimeout(this.jobsTimer);
    const listed = await this.act(() => everyPage("admin/jobs", "jobs"), { clear: false });
    if (!listed) return;
    const jobs = [...listed].reverse().slice(0, 12);
    $("#jobs-empty").hidden = jobs.length > 0;
    $("#jobs").replaceChildren(...jobs.map((job) => this.renderJob(job)));
    const running = jobs.some((job) => !FINISHED.has(job.state));
    // A job that has just been published changed the domains: show its new version.
    const states = this.jobStates || new Map();
    const justPublished = jobs.some((job) => job.state === "published"
      && states.has(job.id) && states.get(job.id) !== "published");
    this.jobStates = new Map(jobs.map((job) => [job.id, job.state]));
    if (justPublished) await this.refreshDomainsOnly();
    if (running && this.visible) this.jobsTimer = setTimeout(() => this.refreshJobs(), 1500);
  }

  async refreshDomainsOnly() {
    await this.act(async () => {
      const [domains, served] = await Promise.all([adminDomains(), call("domains")]);
      this.renderDomains(domains, served.domains);
    }, { clear: false });
  }

  renderJob(job) {
    const id = `job-${job.id}`;
    const progress = h("progress", { id, max: "1", value: String(job.progress),
                                     "aria-label": `Training ${job.domain}` });
    const failed = job.state === "failed";
    return h("li", { class: `job job-${job.state}` },
      h("div", { class: "job-head" },
        h("strong", { text: job.domain }),
        h("span", { class: `state state-${job.state}`, text: job.state === "evaluating" ? "gating" : job.state }),
        h("span", { class: "muted", text: `${Math.round(job.progress * 100)}%` })),
      progress,
      h("p", { class: failed ? "job-status error-text" : "job-status", text: jobStatus(job) }));
  }
}
