// The server's API as the page uses it: JSON requests with the bearer token, and a session's event stream.

export const auth = {
  token: localStorage.getItem("steadyloop.token") || "",
  onRefused: null,  // called with the error when the server asks for a token
  set(token) {
    this.token = token;
    if (token) localStorage.setItem("steadyloop.token", token);
    else localStorage.removeItem("steadyloop.token");
  },
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function headers(extra = {}) {
  return auth.token ? { ...extra, Authorization: "Bearer " + auth.token } : { ...extra };
}

// A request; a body goes as JSON (the server takes no other type). Answers the parsed JSON, if any.
export async function api(method, path, body) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) throw refusal(response, data);
  return data;
}

function refusal(response, data) {
  const detail = data && data.error;
  const error = detail
    ? new ApiError(response.status, detail.code, detail.message + (detail.hint ? " (" + detail.hint + ")" : ""))
    : new ApiError(response.status, "http_" + response.status, response.statusText || "request failed");
  if (response.status === 401 && auth.onRefused) auth.onRefused(error);
  return error;
}

// A run on a new message. Its events come through the session's own stream, so only the answer's status
// is read here: the run goes on whether or not anyone reads this response.
export async function startRun(sessionId, body) {
  const response = await fetch(`/sessions/${encodeURIComponent(sessionId)}/messages`, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
    body: JSON.stringify(body),
  });
  if (!response.ok) {
    let data = null;
    try { data = await response.json(); } catch { data = null; }
    throw refusal(response, data);
  }
  response.body.cancel().catch(() => {});
}

// The session's record after `after`, then live: yields {id, name, data}; ends when the server ends it.
export async function* events(sessionId, after, signal) {
  const path = `/sessions/${encodeURIComponent(sessionId)}/events?follow=session&after=${after}`;
  const response = await fetch(path, { headers: headers({ Accept: "text/event-stream" }), signal });
  if (!response.ok) {
    let data = null;
    try { data = await response.json(); } catch { data = null; }
    throw refusal(response, data);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const parsed = parseFrame(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
      if (parsed) yield parsed;
    }
  }
}

function parseFrame(frame) {
  let id = null, name = "message";
  const data = [];
  for (const line of frame.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const at = line.indexOf(":");
    const field = at < 0 ? line : line.slice(0, at);
    let value = at < 0 ? "" : line.slice(at + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") id = parseInt(value, 10);
    else if (field === "event") name = value;
    else if (field === "data") data.push(value);
  }
  return data.length ? { id, name, data: JSON.parse(data.join("\n")) } : null;
}

export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // Without the clipboard API (a page served over plain http on another host) a selection still copies.
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "offscreen";
    document.body.append(area);
    area.select();
    const done = document.execCommand("copy");
    area.remove();
    return done;
  }
}
