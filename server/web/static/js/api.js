// The public HTTP API, as the page calls it. Every error answer of the server has the
// shape {"error": {"code", "message", "field"}}: ApiError keeps its words as they are.

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }

  // "422 invalid_request (options.beam_size): ..." — the API's own message, labelled.
  describe() {
    const where = this.field ? ` (${this.field})` : "";
    return `${this.status} ${this.code}${where}: ${this.message}`;
  }
}

const TOKEN_KEY = "nmt-admin-token";

export const adminToken = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (token) => sessionStorage.setItem(TOKEN_KEY, token),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

const API_KEY = "nmt-api-key";

// The API key public calls send (X-API-Key): with tenants, it decides which domains,
// glossaries and memories the page sees and uses.
export const apiKey = {
  get: () => sessionStorage.getItem(API_KEY),
  set: (key) => (key ? sessionStorage.setItem(API_KEY, key) : sessionStorage.removeItem(API_KEY)),
};

// The headers of a public call made with fetch itself (a form upload, a file download):
// the page's API key, when it holds one.
export function keyHeaders() {
  const key = apiKey.get();
  return key ? { "x-api-key": key } : {};
}

// Paths are relative ("translate", not "/translate") so that the page also works behind a
// reverse proxy that serves the API under a prefix.
export async function call(path, { method = "GET", json, body, admin = false, signal } = {}) {
  const headers = {};
  if (json !== undefined) {
    headers["content-type"] = "application/json";
    body = JSON.stringify(json);
  }
  if (admin) {
    const token = adminToken.get();
    if (token) headers.authorization = `Bearer ${token}`;
  } else {
    Object.assign(headers, keyHeaders());
  }
  let response;
  try {
    response = await fetch(path, { method, headers, body, signal });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "network", `the server could not be reached (${error.message})`, null);
  }
  const text = await response.text();
  const type = response.headers.get("content-type") || "";
  const data = type.includes("json") && text ? JSON.parse(text) : text;
  if (!response.ok) {
    const error = data && data.error;
    if (error && typeof error.message === "string") {
      throw new ApiError(response.status, error.code || "error", error.message, error.field);
    }
    throw new ApiError(response.status, "error",
                       typeof data === "string" && data ? data : response.statusText, null);
  }
  return data;
}

// Which optional request fields this server's native API has (HTML mode, glossaries,
// explanations): read from its OpenAPI schema, so the page degrades on older servers.
export async function translateFields() {
  try {
    const schema = await call("openapi.json");
    const request = schema.components.schemas.TranslateRequest;
    return new Set(Object.keys(request.properties || {}));
  } catch {
    return new Set(["text", "domain", "options"]);
  }
}
