// The page: four views over the public API (Translate, Why, Documents, Operate), chosen by the URL
// hash so that every view has an address and the browser's back button works.

import { call, translateFields } from "./api.js";
import { DocumentsView } from "./documents.js";
import { $ } from "./dom.js";
import { MetricsPanel } from "./metrics.js";
import { OperateView } from "./operate.js";
import { TranslateView } from "./translate.js";
import { WhyView } from "./why.js";

const VIEWS = ["translate", "why", "documents", "operate"];

class App {
  constructor() {
    this.fields = new Set();
    this.backbone = null;
    this.translateView = new TranslateView(this);
    this.whyView = new WhyView(this);
    this.operateView = new OperateView(this);
    this.documentsView = new DocumentsView(this);
    this.metrics = new MetricsPanel();
    this.current = null;
    window.addEventListener("hashchange", () => this.route(true));
  }

  async start() {
    this.fields = await translateFields();
    this.translateView.setFields(this.fields);
    // The buttons stay disabled until the page knows what to send (no dead clicks).
    for (const button of document.querySelectorAll("#translate-button, #sign-in")) {
      button.disabled = false;
    }
    this.route(false);
    if (this.current !== "translate") await this.refreshDomains();
  }

  async refreshDomains() {
    try {
      const answer = await call("domains");
      this.backbone = answer.backbone;
      $("#backbone-info").textContent = answer.backbone
        ? `${answer.backbone.name} v${answer.backbone.version} · ${answer.domains.length} domains`
        : "no backbone loaded";
      this.translateView.setDomains(answer.domains);
    } catch (error) {
      $("#backbone-info").textContent = `unavailable: ${error.message}`;
    }
  }

  // Called by the Translate view after every translation.
  explain(request, result) {
    this.whyView.show(request, result);
  }

  route(moveFocus) {
    const wanted = location.hash.replace("#", "");
    // Other fragments (the skip link's #main) keep the current view.
    if (!VIEWS.includes(wanted) && this.current) return;
    const view = VIEWS.includes(wanted) ? wanted : "translate";
    if (view === this.current) return;
    if (this.current === "operate") {
      this.operateView.onHide();
      this.metrics.stop();
    }
    this.current = view;
    for (const name of VIEWS) $(`#view-${name}`).hidden = name !== view;
    for (const link of document.querySelectorAll("nav a")) {
      if (link.dataset.view === view) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    document.title = `${view[0].toUpperCase()}${view.slice(1)} · nmt-server`;
    if (view === "operate") {
      this.metrics.start();
      this.operateView.onShow();
    }
    if (view === "translate") this.refreshDomains();
    if (view === "documents") this.documentsView.onShow();
    if (moveFocus) {
      const target = view === "translate" ? $("#source-text") : $(`#${view}-title`);
      target.focus();
    }
  }
}

new App().start();
