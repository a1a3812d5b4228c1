// What happened in a run, step by step: when each request went out, how long it took and when its first
// token came, each call and how long it ran, the retries, downgrades, failovers and folds, and the raw
// events of a step on demand. Bars are drawn on the run's own clock: a request from its step's start, a
// call ending where its step ends (the step's calls run last, after any wait for an approval).

import { clock, el, seconds } from "./dom.js";

const MARKS = {
  retry: (e) => `retry ${e.attempt}, waited ${seconds(e.delay_s * 1000)}: ${e.reason}`,
  downgrade: (e) => `downgrade: ${e.field}${e.value ? " → " + e.value : " dropped"} (${e.reason})`,
  failover: (e) => `failover: ${e.from_model} → ${e.to_model} (${e.kind || "failed"})`,
  context_compacted: (e) => `fold: ${e.folded} messages, ${e.tokens_before} → ${e.tokens_after} tokens`,
  context_pruned: (e) => `prune: ${e.cleared} results cleared`,
  approval_decided: (e) => `${e.decision === "allow" ? "allowed" : "denied"}${e.decided_by ? " by " + e.decided_by : ""}` +
    `${e.reason && !/on the page$/.test(e.reason) ? ": " + e.reason : ""}`,
  side_task: (e) => `${e.kind}${e.usage && e.usage.wall_ms ? " " + seconds(e.usage.wall_ms) : ""}${e.error ? " failed" : ""}`,
  loop_detected: (e) => `loop detected: ${e.tool}`,
  hook_denied: (e) => `hook ${e.hook} refused: ${e.reason}`,
};

function stepsOf(run) {
  const steps = new Map();
  const of = (n) => steps.get(n) || steps.set(n, { n, at: null, usage: null, tools: [], marks: [], raw: [], asked: false }).get(n);
  for (const item of run.events) {
    const e = item.data, step = of(e.step || 0);
    step.raw.push(item);
    if (item.name === "turn_start") step.at = e.at || null;
    else if (item.name === "usage") step.usage = e.turn || {};
    else if (item.name === "tool_execution_end") step.tools.push(e);
    else if (item.name === "approval_required") step.asked = true;
    else if (MARKS[item.name]) step.marks.push({ kind: item.name, text: MARKS[item.name](e) });
  }
  return [...steps.values()].sort((a, b) => a.n - b.n);
}

function bar(kind, left, width, label, tick) {
  const fill = el("span", { class: "fill " + kind });
  fill.style.left = `${(left * 100).toFixed(2)}%`;
  fill.style.width = `${Math.max(width * 100, 0.6).toFixed(2)}%`;
  if (tick !== null && tick !== undefined) {
    const mark = el("span", { class: "tick", title: "first token" });
    mark.style.left = `${(tick * 100).toFixed(2)}%`;
    fill.append(mark);
  }
  return el("div", { class: "row" }, el("span", { class: "label" }, label), el("span", { class: "track" }, fill));
}

function rawView(items, n, open) {
  const box = el("details", { class: "raw", "data-step": n }, el("summary", {}, `raw events (${items.length})`));
  box.addEventListener("toggle", () => {
    if (!box.open || box.querySelector(".events")) return;
    box.append(el("div", { class: "events" }, items.map((i) => el("div", { class: "event" },
      el("span", { class: "seq" }, i.seq), el("b", {}, i.name), el("code", {}, JSON.stringify(i.data))))));
  });
  box.open = open;
  return box;
}

export function drawTimeline(container, run, model) {
  const opened = new Set([...container.querySelectorAll("details.raw[open]")].map((d) => d.dataset.step));
  const end = run.events.find((i) => i.name === "agent_end");
  const startAt = run.at, endAt = end && end.data.at;
  const steps = stepsOf(run);
  const total = startAt && endAt ? Math.max((endAt - startAt) * 1000, 1) : null;
  const measured = steps.reduce((sum, s) => sum + ((s.usage && s.usage.wall_ms) || 0) + s.tools.reduce((t, c) => t + (c.duration_ms || 0), 0), 0);
  const scale = total || Math.max(measured, 1);
  const head = el("div", { class: "tl-head" },
    el("strong", {}, run.prompt ? run.prompt.text.split("\n")[0].slice(0, 80) : "run"),
    el("div", { class: "note" }, [clock(startAt) && "started " + clock(startAt), total && "took " + seconds(total),
      end ? end.data.outcome : "running", model].filter(Boolean).join(" · ")));
  const body = steps.map((step, i) => {
    const next = steps.slice(i + 1).find((s) => s.at);
    const stepStart = step.at && startAt ? (step.at - startAt) * 1000 : null;
    const stepEnd = next && startAt ? (next.at - startAt) * 1000 : total;
    const rows = [];
    const u = step.usage;
    if (u && u.wall_ms != null) {
      const left = stepStart !== null ? stepStart / scale : 0;
      const tick = u.first_token_ms != null ? u.first_token_ms / u.wall_ms : null;
      rows.push(bar("request", left, u.wall_ms / scale,
        `request ${seconds(u.wall_ms)}${u.first_token_ms != null ? ", first token " + seconds(u.first_token_ms) : ""}`, tick));
    }
    // What the step's request and calls do not account for, in a step that asked for a decision, is the
    // wait for it (and the little the loop itself takes).
    const longest = Math.max(0, ...step.tools.map((c) => c.duration_ms || 0));
    if (step.asked && u && u.wall_ms != null && stepStart !== null && stepEnd) {
      const from = stepStart + u.wall_ms, wait = stepEnd - longest - from;
      if (wait > 50) rows.push(bar("wait", from / scale, wait / scale, `waiting for a decision, about ${seconds(wait)}`));
    }
    for (const call of step.tools) {
      const ms = call.duration_ms || 0;
      const right = stepEnd !== null && stepEnd !== undefined ? stepEnd : (stepStart || 0) + ms;
      rows.push(bar("tool " + (call.disposition || ""), Math.max(right - ms, 0) / scale, ms / scale,
        `${call.name} ${seconds(ms)}${call.disposition && call.disposition !== "completed" ? " (" + call.disposition + ")" : ""}`));
    }
    for (const mark of step.marks) rows.push(el("div", { class: "mark " + mark.kind }, mark.text));
    const title = step.n ? `step ${step.n}` : "run";
    const offset = stepStart !== null && step.n ? ` · +${seconds(stepStart)}` : "";
    return el("section", { class: "tl-step" }, el("div", { class: "tl-title" }, title + offset), rows, rawView(step.raw, step.n, opened.has(String(step.n))));
  });
  container.replaceChildren(head, ...body);
}
