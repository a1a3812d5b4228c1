// Building elements and writing numbers and times as people read them. Text always goes in as text.

export const $ = (id) => document.getElementById(id);

// el("button", {class: "primary", onclick}, "Send"): attributes, listeners (on...), then children.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "class") node.className = value;
    else if (name === "html") node.innerHTML = value;  // only ever markup this page made from escaped text
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function seconds(ms) {
  if (ms === undefined || ms === null) return "";
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  const s = Math.round(ms / 1000);
  return Math.floor(s / 60) + " min " + (s % 60) + " s";
}

export function count(n) {
  if (n < 1000) return String(n);
  if (n < 1e6) return (n / 1000).toFixed(n < 10000 ? 1 : 0) + "k";
  return (n / 1e6).toFixed(1) + "M";
}

// A wall-clock time (seconds since the epoch): the time of day today, else the date with it.
export function clock(at) {
  if (!at) return "";
  const when = new Date(at * 1000), now = new Date();
  const time = when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  if (when.toDateString() === now.toDateString()) return time;
  return when.toLocaleDateString([], { month: "short", day: "numeric" }) + ", " + time;
}

export function ago(at) {
  const s = Math.max(0, Date.now() / 1000 - at);
  if (s < 60) return "just now";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  if (s < 86400) return Math.floor(s / 3600) + " h ago";
  if (s < 86400 * 7) return Math.floor(s / 86400) + " d ago";
  return new Date(at * 1000).toLocaleDateString([], { year: "numeric", month: "short", day: "numeric" });
}

export function textOf(content) {
  if (typeof content === "string") return content;
  return (content || []).filter((p) => p.type === "text").map((p) => p.text).join("\n");
}

export function imagesOf(content) {
  if (typeof content === "string") return [];
  // Only inline images are drawn: the page never fetches an address a message names.
  return (content || []).filter((p) => p.type === "image" && /^data:image\/(png|jpeg|gif|webp);base64,/.test(p.url));
}
