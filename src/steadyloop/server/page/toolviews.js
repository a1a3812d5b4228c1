// What a tool call will do, shown by the shape of its arguments: a file's new content, an edit as a diff,
// a shell command as the command line, anything else as its fields.

import { diffLines, diffStats, hunks } from "./diff.js";
import { el, textOf } from "./dom.js";
import { highlight } from "./markdown.js";

const str = (v) => typeof v === "string";
const PATH_KEYS = ["path", "file", "file_path", "filename", "target"];
const EDIT_KEYS = [["old", "new"], ["old_string", "new_string"], ["old_text", "new_text"], ["search", "replace"]];
const CONTENT_KEYS = ["content", "text", "contents", "data"];
const COMMAND_KEYS = ["command", "cmd", "script"];
const FOLDED_LINES = 40;

function pathOf(args) {
  const key = PATH_KEYS.find((k) => str(args[k]));
  return key ? args[key] : null;
}

// The call's kind, by its arguments: {kind, path?, old?, new?, content?, command?}.
export function shapeOf(args) {
  const path = pathOf(args);
  const edit = EDIT_KEYS.find(([a, b]) => str(args[a]) && str(args[b]));
  if (path && edit) return { kind: "edit", path, old: args[edit[0]], new: args[edit[1]] };
  const content = CONTENT_KEYS.find((k) => str(args[k]));
  if (path && content) return { kind: "write", path, content: args[content] };
  const command = COMMAND_KEYS.find((k) => str(args[k]));
  if (command) return { kind: "shell", command: args[command] };
  return { kind: "other" };
}

// A few words for the card's one line: the path, the command, or the first short value.
export function gist(args) {
  const shape = shapeOf(args);
  if (shape.path) return shape.path;
  if (shape.command) return shape.command.split("\n")[0];
  const first = Object.values(args).find((v) => str(v) || typeof v === "number");
  return first === undefined ? "" : String(first).split("\n")[0];
}

function language(path) {
  const ext = (path.match(/\.([A-Za-z0-9]+)$/) || [])[1] || "";
  return { js: "js", ts: "ts", py: "py", sh: "sh", md: "md", rs: "rust", go: "go", toml: "toml", yml: "yaml",
    yaml: "yaml", json: "json", sql: "sql", c: "c", h: "c", java: "java", rb: "ruby" }[ext.toLowerCase()] || ext;
}

function codeLines(text, lang) {
  const lines = text.split("\n");
  const shown = lines.length > FOLDED_LINES ? lines.slice(0, FOLDED_LINES) : lines;
  const table = el("div", { class: "lines" });
  const draw = (rows) => {
    table.replaceChildren(...rows.map((line, i) => el("div", { class: "line add" },
      el("span", { class: "ln" }, i + 1), el("span", { class: "lt", html: highlight(line, lang) || " " }))));
  };
  draw(shown);
  if (shown.length === lines.length) return table;
  const more = el("button", { type: "button", class: "link", onclick: () => { draw(lines); more.remove(); } },
    `show all ${lines.length} lines`);
  return el("div", {}, table, more);
}

function diffView(oldText, newText, lang) {
  const ops = diffLines(oldText.split("\n"), newText.split("\n"));
  const { added, removed } = diffStats(ops);
  const body = el("div", { class: "lines" });
  hunks(ops).forEach((hunk, i) => {
    if (i > 0) body.append(el("div", { class: "line gap" }, el("span", { class: "ln" }, "…"), el("span", { class: "lt" }, "")));
    for (const row of hunk) {
      const cls = row.op === "+" ? "add" : row.op === "-" ? "del" : "same";
      body.append(el("div", { class: "line " + cls },
        el("span", { class: "ln" }, row.op === "+" ? row.now : row.old),
        el("span", { class: "lt", html: (row.op === " " ? " " : row.op) + " " + highlight(row.text, lang) })));
    }
  });
  return el("div", {}, el("div", { class: "diffstat" }, el("span", { class: "plus" }, `+${added}`), " ",
    el("span", { class: "minus" }, `−${removed}`)), body);
}

// The arguments as a person checks them before deciding.
export function argumentsView(args) {
  const shape = shapeOf(args);
  if (shape.kind === "edit") {
    return el("div", { class: "view" }, el("div", { class: "file" }, "edit ", el("code", {}, shape.path)),
      diffView(shape.old, shape.new, language(shape.path)));
  }
  if (shape.kind === "write") {
    const lines = shape.content.split("\n").length;
    return el("div", { class: "view" },
      el("div", { class: "file" }, "write ", el("code", {}, shape.path), ` · ${lines} line${lines === 1 ? "" : "s"}`,
        el("span", { class: "note" }, " (the whole file as it will be)")),
      codeLines(shape.content, language(shape.path)));
  }
  if (shape.kind === "shell") {
    return el("div", { class: "view" }, el("pre", { class: "shell" }, el("span", { class: "prompt" }, "$ "), shape.command));
  }
  const rows = Object.entries(args).map(([key, value]) => el("div", { class: "field" },
    el("span", { class: "key" }, key),
    str(value) && !value.includes("\n") ? el("code", {}, value)
      : el("pre", {}, str(value) ? value : JSON.stringify(value, null, 2))));
  return el("div", { class: "view" }, rows.length ? rows : el("span", { class: "note" }, "no arguments"));
}

export function resultView(result) {
  const text = textOf(result.content);
  return el("pre", { class: "result" + (result.is_error ? " error" : "") }, text || "(no output)");
}
