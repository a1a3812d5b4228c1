// A session drawn from its event record: each run a section (the prompt, its steps, how it ended), each
// step its thinking, answer, tool cards and timings. One card per call: the approval, the run and the
// result of a call all land on it. Deltas (no id) preview text that the next recorded update replaces.

import { clock, count, el, imagesOf, seconds, textOf } from "./dom.js";
import { markdown } from "./markdown.js";
import { argumentsView, gist, resultView } from "./toolviews.js";

const CHIPS = {
  retry: (e) => `retry ${e.attempt} after ${seconds(e.delay_s * 1000)}: ${e.reason}`,
  downgrade: (e) => `downgrade: ${e.field}${e.value ? " → " + e.value : " dropped"} (${e.reason})`,
  failover: (e) => `failover to ${e.to_model} (${e.kind || "failed"}: ${e.cause})`,
  context_compacted: (e) => `folded ${e.folded} messages: ${count(e.tokens_before)} → ${count(e.tokens_after)} tokens`,
  context_pruned: (e) => `pruned ${e.cleared} old tool results (${count(e.chars)} characters)`,
  loop_detected: (e) => `loop detected: ${e.tool} (${e.kind})`,
  hook_denied: (e) => `hook ${e.hook} refused: ${e.reason}`,
  side_task: (e) => `${e.kind.replace("_", " ")}${e.error ? " failed: " + e.error : ""}`,
  notice: (e) => e.text,
  prefix_rewritten: (e) => `prompt cache lost from message ${e.index}`,
};

export class Conversation {
  // hooks: decide(approvalId, decision), act(action, run, extra), model() -> the session's model name
  constructor(log, hooks) {
    this.log = log;
    this.hooks = hooks;
    this.reset();
  }

  reset() {
    this.runs = [];
    this.run = null;
    this.cards = new Map();
    this.waiting = new Map();
    this.users = 0;
    this.log.replaceChildren();
  }

  get running() { return Boolean(this.run && !this.run.ended); }

  firstWaiting() { return this.waiting.values().next().value || null; }

  handle(name, data, seq) {
    if (name === "delta") { this.preview(data); return; }
    const run = name === "agent_start" ? this.startRun(data) : this.run || this.startRun({});
    if (seq !== null) run.events.push({ seq, name, data });
    const step = run.steps.get(data.step) || run.current;
    switch (name) {
      case "turn_start": this.startStep(run, data); break;
      case "message_start": if (data.message.role === "assistant") this.messageOf(run, true); break;
      case "message_update": this.update(run, data); break;
      case "message_end": this.endMessage(run, data.message); break;
      case "approval_required": this.ask(run, data); break;
      case "approval_decided": this.decided(data); break;
      case "tool_execution_start": this.cardFor(run, data.call_id, data.name, data.arguments).setState("running"); break;
      case "tool_execution_update": this.cardFor(run, data.call_id, data.name).progress(data.text); break;
      case "tool_execution_end": this.cardFor(run, data.call_id, data.name).finish(data); break;
      case "usage": if (step) step.usage(data, this.hooks.model()); break;
      case "turn_end": if (data.error && step) step.chip("error", data.error); break;
      case "agent_end": this.endRun(run, data); break;
      default:
        if (CHIPS[name]) (step || run).chip(name, CHIPS[name](data));
        if (name === "failover" && step) step.model = data.to_model;
    }
  }

  startRun(data) {
    const run = new Run(this, data);
    this.runs.push(run);
    this.run = run;
    this.log.append(run.el);
    return run;
  }

  startStep(run, data) {
    const step = new Step(data);
    run.steps.set(data.step, step);
    run.current = step;
    run.body.append(step.el);
  }

  messageOf(run, fresh = false) {
    if (!run.current) this.startStep(run, { step: 0 });
    if (fresh || !run.current.message) run.current.message = new Message(run.current);
    return run.current.message;
  }

  preview(data) {
    const run = this.run;
    if (!run || run.ended) return;
    const message = this.messageOf(run);
    message.preview[data.kind === "text" ? "text" : "thinking"] += data.delta;
    message.draw();
  }

  update(run, data) {
    const message = this.messageOf(run);
    const kind = data.kind === "text" ? "text" : "thinking";
    message.kept[kind] += data.delta;
    message.preview[kind] = "";
    message.draw();
  }

  endMessage(run, message) {
    if (message.role === "user") {
      run.user(message, this.users++);
    } else if (message.role === "assistant") {
      const view = this.messageOf(run);
      view.kept = { text: message.content || "", thinking: message.reasoning || "" };
      view.preview = { text: "", thinking: "" };
      view.draw();
      if (message.content) run.answer = message.content;
      for (const call of message.tool_calls || []) this.cardFor(run, call.id, call.name, call.arguments);
    } else if (message.role === "tool") {
      const card = this.cards.get(message.call_id);
      if (card && !card.done) card.finish({ result: message, disposition: message.disposition || "completed" });
    }
  }

  cardFor(run, callId, name, args) {
    let card = this.cards.get(callId);
    if (!card) {
      if (!run.current) this.startStep(run, { step: 0 });
      card = new ToolCard(name, args || {});
      this.cards.set(callId, card);
      run.current.tools.append(card.el);
    }
    return card;
  }

  ask(run, data) {
    const card = this.cardFor(run, data.call_id, data.name, data.arguments);
    card.ask(data, (decision) => this.hooks.decide(data.approval_id, decision));
    this.waiting.set(data.approval_id, card);
  }

  decided(data) {
    const card = this.cards.get(data.call_id);
    if (card) card.decided(data);
    this.waiting.delete(data.approval_id);
  }

  endRun(run, data) {
    run.end(data);
    for (const [id, card] of this.waiting) if (!card.asking) this.waiting.delete(id);
  }

  // The session's tree (GET /tree): which run each prompt entry is, which runs are on the branch the
  // session continues from, and where it continues. The k-th user message the record ended is the k-th
  // user entry of the tree (branch summaries aside): both are written in the order the messages came.
  applyTree(tree) {
    const byId = new Map(tree.entries.map((e) => [e.id, e]));
    const onPath = new Set();
    for (let id = tree.leaf; id && byId.has(id); id = byId.get(id).parent_id) onPath.add(id);
    const ordered = [...tree.entries].sort((a, b) => Number(a.id) - Number(b.id));
    const prompts = ordered.filter((e) => e.role === "user" && e.read_files == null);
    const starts = this.runs.map((run) => (run.ordinal === null ? null : prompts[run.ordinal] || null));
    this.runs.forEach((run, i) => {
      run.entry = starts[i];
      const from = run.entry ? Number(run.entry.id) : Infinity;
      const next = starts.slice(i + 1).find(Boolean);
      const to = next ? Number(next.id) : Infinity;
      run.entries = ordered.filter((e) => Number(e.id) >= from && Number(e.id) < to && e.read_files == null);
      run.setOnPath(!run.entry || onPath.has(run.entry.id));
    });
    // Say where the next message goes when it is not after the last run: after an earlier one, or inside one.
    const last = this.runs[this.runs.length - 1];
    this.runs.forEach((run) => {
      const inside = run.entries.some((e) => e.id === tree.leaf);
      const atEnd = inside && run.entries[run.entries.length - 1].id === tree.leaf;
      run.setContinues(!inside || (atEnd && run === last) ? null
        : atEnd ? "your next message continues from here" : "your next message continues from inside this run");
    });
    this.log.classList.toggle("from-start", tree.leaf === null && this.runs.length > 0);
  }
}

class Run {
  constructor(conversation, data) {
    this.conversation = conversation;
    this.at = data.at || null;
    this.steps = new Map();
    this.current = null;
    this.events = [];
    this.ended = false;
    this.answer = "";
    this.ordinal = null;
    this.prompt = null;
    this.entry = null;
    this.entries = [];
    this.head = el("div", { class: "run-head" });
    this.body = el("div", { class: "run-body" });
    this.foot = el("div", { class: "run-foot" }, el("span", { class: "spinner" }), "running…");
    this.fold = el("button", { type: "button", class: "link off-note", onclick: () => this.el.classList.toggle("shown") },
      "on another branch");
    this.continues = el("div", { class: "continues", hidden: true });
    this.el = el("section", { class: "run" }, this.fold, this.head, this.body, this.foot, this.continues);
  }

  // A user message: the run's prompt, or one steered in while it ran.
  user(message, ordinal) {
    const text = textOf(message.content);
    const images = imagesOf(message.content);
    const body = el("div", { class: "bubble" }, el("div", { class: "text" }, text),
      images.length ? el("div", { class: "images" }, images.map((p) => el("img", { src: p.url, alt: "image" }))) : null);
    const act = (action) => () => this.conversation.hooks.act(action, this);
    if (this.prompt === null) {
      this.prompt = { text, images: images.map((p) => p.url) };
      this.ordinal = ordinal;
      this.fold.textContent = `on another branch: “${text.split("\n")[0].slice(0, 70)}” (show)`;
      this.head.append(el("div", { class: "msg user" },
        el("div", { class: "who" }, "You", el("time", {}, clock(this.at))), body,
        el("div", { class: "actions" },
          el("button", { type: "button", class: "link", onclick: act("edit") }, "Edit"),
          el("button", { type: "button", class: "link", onclick: act("copy-prompt") }, "Copy"))));
    } else {
      (this.current ? this.current.el : this.body).append(el("div", { class: "msg user steer" },
        el("div", { class: "who" }, "You, while it ran"), body));
    }
  }

  chip(kind, text) { this.body.append(el("div", { class: "chip " + kind }, text)); }

  end(data) {
    this.ended = true;
    this.outcome = data.outcome;
    const usage = data.usage || {};
    const took = data.at && this.at ? seconds((data.at - this.at) * 1000) : "";
    const tokens = (usage.prompt_tokens || 0) + (usage.completion_tokens || 0);
    const bits = [data.outcome === "completed" ? "done" : data.outcome, took,
      `${data.steps || 0} step${data.steps === 1 ? "" : "s"}`, tokens ? count(tokens) + " tokens" : ""].filter(Boolean);
    const act = (action) => () => this.conversation.hooks.act(action, this);
    this.foot.replaceChildren(...[
      el("span", { class: "outcome " + (data.outcome === "completed" ? "ok" : "bad") }, bits.join(" · ")),
      data.error ? el("span", { class: "error" }, data.error) : null,
      el("span", { class: "actions" },
        this.answer ? el("button", { type: "button", class: "link", onclick: act("copy") }, "Copy") : null,
        el("button", { type: "button", class: "link", onclick: act("regenerate") }, "Regenerate"),
        el("button", { type: "button", class: "link", onclick: act("continue") }, "Continue from here"),
        el("button", { type: "button", class: "link", onclick: act("timeline") }, "Timeline")),
    ].filter(Boolean));
    this.el.classList.add("ended");
  }

  setOnPath(on) { this.onPath = on; this.el.classList.toggle("off-branch", !on); }

  setContinues(words) {
    this.continues.textContent = words || "";
    this.continues.hidden = !words;
  }
}

class Step {
  constructor(data) {
    this.n = data.step;
    this.at = data.at || null;
    this.model = null;
    this.message = null;
    this.tools = el("div", { class: "tools" });
    this.chips = el("div", { class: "chips" });
    this.meta = el("div", { class: "meta" });
    this.el = el("div", { class: "step" }, this.chips, this.tools, this.meta);
  }

  chip(kind, text) { this.chips.append(el("div", { class: "chip " + kind }, text)); }

  // The request's line: model, time, first token, tokens; token counts only where the endpoint gave them.
  usage(data, sessionModel) {
    const turn = data.turn || {};
    const prompt = turn.prompt_tokens || 0, out = turn.completion_tokens || 0, cached = turn.cached_tokens || 0;
    const parts = [`step ${data.step || this.n}`, this.model || sessionModel, seconds(turn.wall_ms)];
    if (turn.first_token_ms != null) parts.push("first token " + seconds(turn.first_token_ms));
    if (prompt || out) {
      parts.push(count(prompt) + " in" + (cached ? ` (${Math.round((100 * cached) / prompt)}% cached)` : ""));
      parts.push(count(out) + " out");
    }
    this.meta.textContent = parts.filter(Boolean).join(" · ");
    if (this.at) this.meta.title = "started " + new Date(this.at * 1000).toLocaleString();
  }
}

class Message {
  constructor(step) {
    this.kept = { text: "", thinking: "" };
    this.preview = { text: "", thinking: "" };
    this.thinking = el("details", { class: "thinking", hidden: true }, el("summary", {}, "Thinking"), el("div", { class: "thought" }));
    this.body = el("div", { class: "answer md" });
    this.el = el("div", { class: "msg assistant" }, this.thinking, this.body);
    step.el.insertBefore(this.el, step.tools);
  }

  draw() {
    const thinking = this.kept.thinking + this.preview.thinking;
    const text = this.kept.text + this.preview.text;
    this.thinking.hidden = !thinking;
    this.thinking.firstChild.textContent = `Thinking · ${thinking.trim().split(/\s+/).filter(Boolean).length} words`;
    this.thinking.lastChild.textContent = thinking;
    this.body.innerHTML = markdown(text);
    this.el.classList.toggle("empty", !text && !thinking);
  }
}

class ToolCard {
  constructor(name, args) {
    this.args = args;
    this.done = false;
    this.asking = false;
    this.state = el("span", { class: "state" }, "asked");
    this.took = el("span", { class: "took" });
    this.summary = el("summary", {}, el("span", { class: "tool-name" }, name), el("span", { class: "gist" }, gist(args)), this.state, this.took);
    this.body = el("div", { class: "card-body" }, argumentsView(args));
    this.el = el("details", { class: "tool" }, this.summary, this.body);
  }

  setState(text, cls) {
    this.state.textContent = text;
    this.el.dataset.state = cls || text;
  }

  ask(data, decide) {
    this.asking = true;
    this.el.open = true;
    this.el.classList.add("approval");
    this.setState("waits for you", "waiting");
    const buttons = el("div", { class: "buttons" });
    const press = (decision) => () => { for (const b of buttons.children) b.disabled = true; decide(decision); };
    buttons.append(
      el("button", { type: "button", class: "primary approve", onclick: press("allow"), title: "a (Esc first when typing)" },
        "Approve", el("kbd", {}, "a")),
      el("button", { type: "button", class: "deny", onclick: press("deny"), title: "d (Esc first when typing)" },
        "Deny", el("kbd", {}, "d")),
      data.effect ? el("span", { class: "note" }, data.effect) : null);
    this.asked = el("div", { class: "ask" }, buttons);
    this.body.append(this.asked);
  }

  decided(data) {
    this.asking = false;
    this.el.classList.remove("approval");
    const word = data.decision === "allow" ? "allowed" : "denied";
    const who = data.decided_by ? ` by ${data.decided_by}` : "";
    const why = data.reason && !/on the page$/.test(data.reason) ? `: ${data.reason}` : "";
    const line = el("div", { class: "decided " + word }, `${word}${who}${why}`);
    if (this.asked) this.asked.replaceWith(line); else this.body.append(line);
    this.asked = line;
    this.setState(word);
  }

  progress(text) {
    this.progressLine = this.progressLine || this.body.appendChild(el("pre", { class: "progress" }));
    this.progressLine.textContent = text;
  }

  finish(data) {
    this.done = true;
    this.asking = false;
    const disposition = data.disposition || "completed";
    this.setState(disposition === "completed" ? "done" : disposition, disposition);
    if (data.duration_ms != null) this.took.textContent = seconds(data.duration_ms);
    if (this.progressLine) this.progressLine.remove();
    this.body.append(resultView(data.result));
  }
}
