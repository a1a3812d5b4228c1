// The new session's settings, shown until its first message makes it: model, system prompt, tools,
// thinking, approvals and an agent document. The operator's approvals are a floor: what it gates is
// ticked and cannot be unticked, and a decision may not be given longer than it allows.

import { el } from "./dom.js";

const EFFECTS = ["read", "mutate-reversible", "mutate-irreversible", "destructive"];
const EFFECT_WORDS = { read: "reads", "mutate-reversible": "reversible changes", "mutate-irreversible": "irreversible changes", destructive: "destructive actions" };

function field(label, input, note) {
  return el("label", { class: "field" }, el("span", { class: "label" }, label), input, note ? el("span", { class: "note" }, note) : null);
}

export function settingsForm(info) {
  const floor = info.approvals || { require_for: [], overrides: {}, timeout_s: null };
  const gated = new Set(floor.require_for);
  const model = el("input", { id: "set-model", list: "set-models", placeholder: info.model || "the server's model", autocomplete: "off" });
  const models = el("datalist", { id: "set-models" }, (info.models || []).map((m) => el("option", { value: m })));
  const system = el("textarea", { id: "set-system", rows: 3, placeholder: "The server's default system prompt" });
  const thinking = el("select", { id: "set-thinking" },
    [["", "the model's default"], ["off", "off"], ["low", "low"], ["medium", "medium"], ["high", "high"]]
      .map(([value, label]) => el("option", { value }, label)));
  const tools = info.tools.map((t) => ({
    tool: t,
    use: el("input", { type: "checkbox", checked: true, "data-tool": t.name }),
    ask: el("input", { type: "checkbox", checked: t.gated, disabled: t.gated, "data-ask": t.name }),
  }));
  const effects = EFFECTS.map((effect) => ({
    effect,
    box: el("input", { type: "checkbox", checked: gated.has(effect), disabled: gated.has(effect), "data-effect": effect }),
  }));
  const timeout = el("input", { id: "set-timeout", type: "number", min: 1, max: floor.timeout_s || undefined, step: 1,
    placeholder: floor.timeout_s ? String(floor.timeout_s) : "300" });
  const temperature = el("input", { id: "set-temperature", type: "number", min: 0, max: 2, step: 0.1, placeholder: "default" });
  const agent = el("textarea", { id: "set-agent", rows: 4, placeholder: '{"spec": "steadyloop.agent/1", ...}  (docs/spec.md)' });

  const toolRows = tools.length
    ? tools.map(({ tool, use, ask }) => el("div", { class: "tool-row" },
      el("label", {}, use, " ", el("code", {}, tool.name)),
      el("span", { class: "note" }, tool.effect || "no effect said"),
      el("label", { class: tool.gated ? "floor" : "" }, ask, tool.gated ? " always asks (floor)" : " ask first")))
    : [el("span", { class: "note" }, "This server offers no tools.")];
  const effectRows = effects.map(({ effect, box }) => el("label", { class: gated.has(effect) ? "floor" : "" }, box, " ",
    EFFECT_WORDS[effect], gated.has(effect) ? el("span", { class: "badge" }, "floor") : null));

  const form = el("div", { class: "settings", id: "settings" },
    el("h2", {}, "New session"),
    el("p", { class: "note" }, "Settings for this session; your first message below starts it."),
    el("div", { class: "grid" }, field("Model", model), models, field("Thinking", thinking)),
    field("System prompt", system),
    el("fieldset", {}, el("legend", {}, "Tools"), toolRows),
    el("fieldset", {}, el("legend", {}, "Ask before"), el("div", { class: "effects" }, effectRows),
      field("Decide within (seconds)", timeout, floor.timeout_s ? `at most ${floor.timeout_s} s, the operator's limit` : null),
      el("p", { class: "note" }, "Ticked and greyed: the operator's floor, which a session may add to but not lower.")),
    el("details", {}, el("summary", {}, "More"),
      el("div", { class: "grid" }, field("Temperature", temperature)),
      field("Agent document (JSON)", agent, "its fields come first; the settings above go over them")));

  function collect() {
    const body = {};
    if (model.value.trim()) body.model = model.value.trim();
    if (system.value.trim()) body.system = system.value;
    if (thinking.value) body.thinking = thinking.value;
    if (temperature.value !== "") body.temperature = Number(temperature.value);
    if (tools.some(({ use }) => !use.checked)) body.tools = tools.filter(({ use }) => use.checked).map(({ tool }) => tool.name);
    const approvals = {};
    const extra = effects.filter(({ effect, box }) => box.checked && !gated.has(effect)).map(({ effect }) => effect);
    if (extra.length) approvals.require_for = [...floor.require_for, ...extra];
    const asked = tools.filter(({ tool, ask }) => ask.checked && !tool.gated).map(({ tool }) => [tool.name, true]);
    if (asked.length) approvals.overrides = Object.fromEntries(asked);
    if (timeout.value !== "") {
      const seconds = Number(timeout.value);
      if (floor.timeout_s && seconds > floor.timeout_s) throw new Error(`decide within ${floor.timeout_s} s at most`);
      approvals.timeout_s = seconds;
    }
    if (Object.keys(approvals).length) body.approvals = approvals;
    if (agent.value.trim()) {
      try { body.agent = JSON.parse(agent.value); } catch { throw new Error("the agent document is not JSON"); }
    }
    return body;
  }
  return { form, collect };
}
