// Building elements without innerHTML: every text from the server or the user is set as
// text, never parsed as markup.

export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") element.className = value;
    else if (name === "text") element.textContent = value;
    else if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

export const $ = (selector) => document.querySelector(selector);

export function showError(box, error) {
  if (!error) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  box.hidden = false;
  box.textContent = typeof error.describe === "function" ? error.describe() : String(error);
}

export function percent(value, digits = 0) {
  return `${(value * 100).toFixed(digits)}%`;
}

// A labelled horizontal bar per entry, largest first; `marker` draws a threshold line.
export function bars(entries, { marker = null, highlight = null } = {}) {
  const sorted = [...entries].sort((a, b) => b[1] - a[1]);
  return sorted.map(([label, value]) => {
    const fill = h("span", { class: "bar-fill" });
    fill.style.width = percent(Math.max(0, Math.min(1, value)), 2);
    const track = h("span", { class: "bar-track", "aria-hidden": "true" }, fill);
    if (marker !== null) {
      const line = h("span", { class: "bar-marker", title: `threshold ${marker}` });
      line.style.left = percent(marker, 2);
      track.append(line);
    }
    const kind = label === highlight ? " chosen" : (label === "generic" ? " plain-backbone" : "");
    return h("div", { class: `bar${kind}` },
      h("span", { class: "bar-label", text: label }), track,
      h("span", { class: "bar-value", text: percent(value, 1) }));
  });
}
