// "Improve this translation": the last translation, editable, sent as a correction
// (POST /corrections) with its source, the machine output and its routing. The answer
// (stored as pending or accepted, or why it was refused) is shown as the API words it.

import { call } from "./api.js";
import { $, showError } from "./dom.js";
import { AddToMemory } from "./memories.js";

export class ImproveBox {
  constructor() {
    this.box = $("#improve");
    this.text = $("#improve-text");
    this.status = $("#improve-status");
    this.error = $("#improve-error");
    this.last = null;
    $("#improve-send").addEventListener("click", () => this.send());
    this.memory = new AddToMemory();
    this.memory.onSend = () => {
      if (this.last) this.memory.add(this.last.request.text, this.text.value);
    };
  }

  // After every translation: the box starts from the machine output.
  offer(request, result) {
    this.last = { request, result };
    this.box.hidden = false;
    this.box.open = false;
    this.text.value = result.translation;
    this.status.textContent = "";
    showError(this.error, null);
    this.memory.reset(request.memory);
  }

  async send() {
    if (!this.last) return;
    const { request, result } = this.last;
    const body = { source: request.text, machine: result.translation, corrected: this.text.value,
                   routing: { mode: result.routing.mode, domain: result.routing.domain ?? null } };
    if (typeof request.domain === "string" && request.domain !== "generic") {
      body.domain = request.domain;
    }
    showError(this.error, null);
    this.status.textContent = "";
    try {
      const answer = await call("corrections", { method: "POST", json: body });
      const where = answer.domain ? ` for ${answer.domain}` : " (no domain known)";
      this.status.textContent = answer.status === "pending"
        ? `Thank you: stored${where}, waiting for an administrator's approval.`
        : `Thank you: stored${where}.`;
    } catch (error) {
      showError(this.error, error);
    }
  }
}
