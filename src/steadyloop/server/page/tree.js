// The session's tree: every message of every branch, the path the session continues from marked, and
// "continue from here" on each entry. A straight stretch is one column; a fork indents its branches.

import { el, textOf } from "./dom.js";

function words(entry) {
  const m = entry.message || {};
  if (entry.read_files != null) return "summary of a branch left behind";
  if (m.role === "tool") return `result of ${m.name || "a call"}: ${textOf(m.content).slice(0, 60)}`;
  const text = textOf(m.content || "").trim();
  if (text) return text.split("\n")[0].slice(0, 100);
  if (m.tool_calls && m.tool_calls.length) return "calls " + m.tool_calls.map((c) => c.name).join(", ");
  return "(empty)";
}

export function drawTree(container, tree, onContinue) {
  const kids = new Map();
  for (const e of [...tree.entries].sort((a, b) => Number(a.id) - Number(b.id))) {
    const key = e.parent_id || "";
    if (!kids.has(key)) kids.set(key, []);
    kids.get(key).push(e);
  }
  const byId = new Map(tree.entries.map((e) => [e.id, e]));
  const path = new Set();
  for (let id = tree.leaf; id && byId.has(id); id = byId.get(id).parent_id) path.add(id);
  const summarise = el("input", { type: "checkbox", id: "tree-summarise" });
  const go = (id) => () => onContinue(id, summarise.checked);

  const row = (entry) => {
    const role = entry.read_files != null ? "summary" : entry.role;
    const here = entry.id === tree.leaf;
    return el("li", { class: `entry ${role}${path.has(entry.id) ? " on-path" : ""}${here ? " leaf" : ""}`, "data-entry": entry.id },
      el("span", { class: "role" }, role === "assistant" ? "AI" : role === "user" ? "You" : role),
      el("span", { class: "words" }, words(entry)),
      here ? el("span", { class: "here" }, "continues here")
        : el("button", { type: "button", class: "link", onclick: go(entry.id) }, "Continue from here"));
  };
  // A chain of single children stays in one list; each child of a fork starts an indented list.
  const branch = (entry) => {
    const list = el("ul", { class: "branch" });
    for (let node = entry; node;) {
      list.append(row(node));
      const children = kids.get(node.id) || [];
      if (children.length === 1) { node = children[0]; continue; }
      if (children.length > 1) list.append(el("li", { class: "fork" }, children.map(branch)));
      node = null;
    }
    return list;
  };
  const roots = kids.get("") || [];
  container.replaceChildren(
    el("label", { class: "option" }, summarise, " summarise what is left behind (asks the model)"),
    el("ul", { class: "branch" }, el("li", { class: `entry start${tree.leaf === null ? " leaf" : ""}` },
      el("span", { class: "role" }, "start"), el("span", { class: "words" }, "before the first message"),
      tree.leaf === null ? el("span", { class: "here" }, "continues here")
        : el("button", { type: "button", class: "link", onclick: go(null) }, "Continue from here"))),
    ...(roots.length > 1 ? [el("div", { class: "fork" }, roots.map(branch))] : roots.map(branch)));
}
