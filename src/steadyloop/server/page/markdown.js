// Markdown and code highlighting for the model's text. Everything the model wrote is escaped before any
// markup is made, and the markup made is a fixed set of tags with no attributes taken from the text but a
// link's http(s) address: a <script>, an <img onerror> or a javascript: link in the text stays text.

export function escapeHtml(text) {
  return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

// -- highlighting: one pass of a tokenizer that knows comments, strings, numbers and keywords ----------
const KEYWORDS = new Set(("and as assert async await break case catch class const continue def default del " +
  "defer do elif else enum except export extends false final finally fn for from func function go if impl " +
  "import in interface is lambda let loop match mod mut new nil none None not null or package pass pub " +
  "raise return self select static struct super switch this throw true True False try type typeof use var " +
  "void where while with yield local then end echo fi done esac SELECT FROM WHERE INSERT UPDATE DELETE " +
  "JOIN ON GROUP BY ORDER LIMIT AND OR NOT NULL CREATE TABLE").split(" "));
const HASH = new Set(["py", "python", "sh", "bash", "shell", "console", "zsh", "rb", "ruby", "toml", "yaml",
  "yml", "r", "perl", "conf", "ini", "dockerfile", "make", "makefile", "nginx"]);
const DASH = new Set(["sql", "lua", "haskell", "hs"]);
const TOKEN = /(\/\/[^\n]*|\/\*[\s\S]*?\*\/|#[^\n]*|--[^\n]*)|("""[\s\S]*?"""|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)|(\b(?:0x[\da-f]+|\d[\d_]*(?:\.\d+)?(?:e[+-]?\d+)?)\b)|([A-Za-z_][\w$]*)/gi;

export function highlight(code, language) {
  const lang = (language || "").toLowerCase();
  // Which comment marks the language has: "#" in a shell script is a comment, in C a directive.
  const marks = HASH.has(lang) ? "#" : DASH.has(lang) ? "-/" : lang ? "/" : "/#";
  const re = new RegExp(TOKEN.source, "gi");
  let out = "", last = 0, m;
  while ((m = re.exec(code)) !== null) {
    if (m[1] && !marks.includes(m[1][0])) { re.lastIndex = m.index + 1; continue; }
    const kind = m[1] ? "c" : m[2] ? "s" : m[3] ? "n" : KEYWORDS.has(m[4]) ? "k" : "";
    if (!kind) continue;
    out += escapeHtml(code.slice(last, m.index)) + `<span class="hl-${kind}">${escapeHtml(m[0])}</span>`;
    last = m.index + m[0].length;
  }
  return out + escapeHtml(code.slice(last));
}

// -- markdown: blocks first, inline marks inside them ---------------------------------------------
function inline(escaped) {
  const codes = [];
  const held = escaped.replace(/`([^`]+)`/g, (_, code) => { codes.push(code); return `\u0000${codes.length - 1}\u0000`; });
  return held
    .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^*\w])\*([^*\s][^*]*?)\*(?!\w)/g, "$1<em>$2</em>")
    .replace(/(^|[^\w])_([^_\s][^_]*?)_(?!\w)/g, "$1<em>$2</em>")
    .replace(/~~([^~]+)~~/g, "<del>$1</del>")
    .replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g, '<a href="$2" target="_blank" rel="noopener noreferrer">$1</a>')
    .replace(/(^|[\s(])(https?:\/\/[^\s<)]+[^\s<).,;:!?])/g, '$1<a href="$2" target="_blank" rel="noopener noreferrer">$2</a>')
    .replace(/\u0000(\d+)\u0000/g, (_, i) => `<code>${codes[Number(i)]}</code>`);
}

function codeBlock(info, body) {
  const lang = info.trim().split(/\s+/)[0] || "";
  const label = lang ? `<span class="lang">${escapeHtml(lang)}</span>` : "";
  return `<div class="code">${label}<button type="button" class="copy-code" title="Copy code">copy</button>` +
    `<pre><code>${highlight(body, lang)}</code></pre></div>`;
}

function table(rows) {
  const cells = (row) => row.replace(/^\s*\|/, "").replace(/\|\s*$/, "").split("|").map((c) => inline(escapeHtml(c.trim())));
  const head = cells(rows[0]).map((c) => `<th>${c}</th>`).join("");
  const body = rows.slice(2).map((r) => `<tr>${cells(r).map((c) => `<td>${c}</td>`).join("")}</tr>`).join("");
  return `<div class="table"><table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table></div>`;
}

export function markdown(source) {
  const out = [];
  const lines = String(source).replace(/\r\n?/g, "\n").split("\n");
  let i = 0, paragraph = [];
  const flush = () => { if (paragraph.length) out.push(`<p>${inline(escapeHtml(paragraph.join("\n"))).replace(/\n/g, "<br>")}</p>`); paragraph = []; };
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```+|~~~+)(.*)$/);
    if (fence) {
      flush();
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++;
      out.push(codeBlock(fence[2], body.join("\n")));
      continue;
    }
    if (/^\s*\|.*\|\s*$/.test(line) && i + 1 < lines.length && /^\s*\|?[\s:-]+\|[\s|:-]*$/.test(lines[i + 1])) {
      flush();
      const rows = [];
      while (i < lines.length && /^\s*\|.*\|\s*$/.test(lines[i])) rows.push(lines[i++]);
      out.push(table(rows));
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    const item = line.match(/^(\s*)([-*+]|\d+[.)])\s+(.*)$/);
    if (heading) { flush(); const n = Math.min(heading[1].length + 2, 6); out.push(`<h${n}>${inline(escapeHtml(heading[2]))}</h${n}>`); }
    else if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { flush(); out.push("<hr>"); }
    else if (/^\s*>/.test(line)) {
      flush();
      const quoted = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s*>\s?/, ""));
      out.push(`<blockquote>${markdown(quoted.join("\n"))}</blockquote>`);
      continue;
    } else if (item) {
      flush();
      const ordered = /\d/.test(item[2]);
      const items = [];
      while (i < lines.length) {
        const m = lines[i].match(/^(\s*)([-*+]|\d+[.)])\s+(.*)$/);
        if (m && /\d/.test(m[2]) === ordered) { items.push({ depth: m[1].length >= 2 ? 1 : 0, text: m[3] }); i++; }
        else if (items.length && /^\s{2,}\S/.test(lines[i])) { items[items.length - 1].text += " " + lines[i++].trim(); }
        else break;
      }
      const tag = ordered ? "ol" : "ul";
      out.push(`<${tag}>${items.map((it) => `<li class="d${it.depth}">${inline(escapeHtml(it.text))}</li>`).join("")}</${tag}>`);
      continue;
    } else if (!line.trim()) flush();
    else paragraph.push(line);
    i++;
  }
  flush();
  return out.join("");
}
