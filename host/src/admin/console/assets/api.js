// The admin API as the pages call it: JSON over fetch with `Authorization: Bearer`
// from sessionStorage (never in a URL), errors as ApiError with the HTTP status.
const KEY = "drover.admin.token";

export function token() {
  return sessionStorage.getItem(KEY);
}

export function signedIn() {
  return token() !== null;
}

export function setToken(value) {
  if (value === null) sessionStorage.removeItem(KEY);
  else sessionStorage.setItem(KEY, value);
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let unauthorized = () => {};

// Called with no argument whenever the API answers 401.
export function onUnauthorized(handler) {
  unauthorized = handler;
}

// One call: `method` and an optional JSON `body`; resolves to the parsed answer.
export async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = "Bearer " + t;
  const init = { method, headers, cache: "no-store", credentials: "omit" };
  if (method !== "GET") {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body === undefined ? {} : body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch (e) {
    data = { error: text };
  }
  if (response.status === 401) unauthorized();
  if (!response.ok) {
    throw new ApiError(response.status, (data && data.error) || "HTTP " + response.status);
  }
  return data;
}

// `?k=v&...` of the non-empty entries of `params`.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return s ? "?" + s : "";
}
