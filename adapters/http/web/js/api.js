// The public HTTP API (/v1), read with the caller's bearer token.

const API = "/v1";
const TOKEN_KEY = "ctxstore.token";

// needsToken: unknown (null) until the service answers; then whether it asks for one.
export const session = { token: sessionStorage.getItem(TOKEN_KEY) || "", needsToken: null };
const listeners = [];

export function onAuthKnown(listener) { listeners.push(listener); }

export function useToken(token) {
  session.token = token;
  sessionStorage.setItem(TOKEN_KEY, token);
}

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

export function apiUrl(path, params = {}) {
  const url = new URL(API + path, location.origin);
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null || value === "") continue;
    if (Array.isArray(value)) value.forEach((v) => url.searchParams.append(key, v));
    else url.searchParams.set(key, value);
  }
  return url;
}

export function authHeaders(accept) {
  const headers = { Accept: accept };
  if (session.token) headers.Authorization = `Bearer ${session.token}`;
  return headers;
}

// What the service said of itself: a 401 means it needs a token; a tokenless answer that
// it did not refuse means it needs none.
function learn(response) {
  const needs = response.status === 401 ? true : !session.token && response.ok ? false : null;
  if (needs === null || needs === session.needsToken) return;
  session.needsToken = needs;
  for (const listener of listeners) listener(needs);
}

export async function failed(response) {
  const body = await response.json().catch(() => null);
  const said = body && (body.detail || body.title);
  return new ApiError(response.status, said || `${response.status} ${response.statusText}`);
}

export async function api(path, params = {}, { method = "GET", body } = {}) {
  const headers = authHeaders("application/json");
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(apiUrl(path, params), {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  learn(response);
  if (!response.ok) throw await failed(response);
  return response.json();
}

// An attachment or an export, read with the caller's token (a plain link could not send it).
export async function apiBlob(path) {
  const response = await fetch(apiUrl(path), { headers: authHeaders("*/*") });
  learn(response);
  if (!response.ok) throw await failed(response);
  return response.blob();
}
