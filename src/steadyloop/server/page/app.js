// The page: the session list, one session's conversation followed live, the composer, the panels, and
// the keyboard. A session is drawn from its event record, attached from seq 0 and followed, so a reload
// shows everything again and picks a run up where it is.

import { api, ApiError, auth, copyText, events, startRun } from "./api.js";
import { Conversation } from "./conversation.js";
import { $, ago, count, el } from "./dom.js";
import { settingsForm } from "./settings.js";
import { drawTimeline } from "./timeline.js";
import { drawTree } from "./tree.js";

const state = {
  info: null, session: null, detail: null, stream: null, tree: null, settings: null,
  images: [], panel: null, panelRun: null, replayUntil: 0, listed: "", editing: false,
};
const conversation = new Conversation($("log"), {
  decide: (id, decision) => decide(id, decision),
  act: (action, run) => act(action, run).catch((error) => notice(error.message)),
  model: () => (state.detail && state.detail.model) || (state.info && state.info.model) || "",
});
const sid = () => encodeURIComponent(state.session);

function notice(text) {
  $("notice").textContent = text || "";
  $("notice").hidden = !text;
}

function flash(text) {
  const toast = el("div", { class: "toast", role: "status" }, text);
  document.body.append(toast);
  setTimeout(() => toast.remove(), 1600);
}

// -- the token ------------------------------------------------------------------------------------
auth.onRefused = (error) => {
  $("token-row").hidden = false;
  notice(error.message);
};

$("token-row").addEventListener("submit", (event) => {
  event.preventDefault();
  auth.set($("token").value.trim());
  $("token").value = "";
  $("token-row").hidden = true;
  notice("");
  boot();
});

// -- the session list -----------------------------------------------------------------------------
async function loadSessions() {
  const query = $("search").value.trim();
  const data = await api("GET", "/sessions" + (query ? "?q=" + encodeURIComponent(query) : ""));
  const listed = JSON.stringify(data.sessions) + state.session;
  const focused = $("sessions").contains(document.activeElement);
  if (state.editing || listed === state.listed) return;
  state.listed = listed;
  const keep = focused ? document.activeElement.closest("li")?.dataset.id : null;
  $("sessions").replaceChildren(...data.sessions.map(sessionItem));
  if (!data.sessions.length) $("sessions").append(el("li", { class: "none" }, query ? "No session matches." : "No sessions yet."));
  if (keep) $("sessions").querySelector(`li[data-id="${CSS.escape(keep)}"]`)?.focus();
}

function sessionItem(session) {
  const title = el("span", { class: "s-head" }, el("span", { class: "s-title" }, session.title || "Untitled"),
    session.waiting ? el("span", { class: "badge waiting" }, `${session.waiting} waiting`)
      : session.status !== "idle" ? el("span", { class: "badge " + session.status }, session.status) : null);
  const meta = el("span", { class: "s-meta" },
    el("time", { title: new Date(session.updated_at * 1000).toLocaleString() }, ago(session.updated_at)),
    ` · ${session.message_count} messages` + (session.model ? ` · ${session.model}` : ""));
  const item = el("li", { "data-id": session.id, tabindex: 0, class: session.id === state.session ? "current" : "" },
    title, meta,
    el("span", { class: "s-actions" },
      el("button", { type: "button", class: "link rename", onclick: (e) => { e.stopPropagation(); rename(item, session); } }, "Rename"),
      el("button", { type: "button", class: "link delete", onclick: (e) => { e.stopPropagation(); confirmDelete(item, session); } }, "Delete")));
  item.addEventListener("click", () => openSession(session.id));
  item.addEventListener("keydown", (e) => { if (e.key === "Enter" && e.target === item) openSession(session.id); });
  return item;
}

function rename(item, session) {
  state.editing = true;
  const input = el("input", { class: "rename-input", value: session.title || "", "aria-label": "New title", maxlength: 200 });
  const done = async (save) => {
    state.editing = false;
    if (save) {
      try {
        const out = await api("PATCH", "/sessions/" + encodeURIComponent(session.id), { title: input.value });
        if (session.id === state.session) $("title").textContent = out.title || "Untitled";
      } catch (error) { notice(error.message); }
    }
    state.listed = "";
    await loadSessions();
  };
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") { e.preventDefault(); done(true); }
    if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); done(false); }
  });
  input.addEventListener("click", (e) => e.stopPropagation());
  item.querySelector(".s-head").replaceWith(input);
  input.focus();
  input.select();
}

function confirmDelete(item, session) {
  const actions = item.querySelector(".s-actions");
  const no = el("button", { type: "button", class: "link", onclick: (e) => { e.stopPropagation(); state.listed = ""; loadSessions(); } }, "Keep");
  const yes = el("button", { type: "button", class: "link danger", onclick: async (e) => {
    e.stopPropagation();
    try {
      await api("DELETE", "/sessions/" + encodeURIComponent(session.id));
      if (session.id === state.session) newSession();
    } catch (error) { notice(error.message); }
    state.listed = "";
    await loadSessions();
  } }, "Delete it");
  actions.replaceChildren(el("span", { class: "note" }, "Delete this session?"), yes, no);
  item.classList.add("confirming");
  yes.focus();
}

// -- one session ------------------------------------------------------------------------------------
function stopFollowing() {
  if (state.stream) state.stream.abort();
  state.stream = null;
}

function newSession() {
  stopFollowing();
  state.session = null;
  state.detail = null;
  state.tree = null;
  history.replaceState(null, "", location.pathname);
  conversation.reset();
  closePanel();
  setRunning(false);
  $("title").textContent = "New session";
  $("model").textContent = $("totals").textContent = "";
  $("show-tree").disabled = $("show-timeline").disabled = true;
  if (state.info) {
    state.settings = settingsForm(state.info);
    $("log").append(state.settings.form);
  }
  for (const li of $("sessions").children) li.classList.remove("current");
  closeSidebar();
  $("input").focus();
}

async function openSession(id) {
  stopFollowing();
  state.session = id;
  state.settings = null;
  state.tree = null;
  history.replaceState(null, "", "#" + encodeURIComponent(id));
  conversation.reset();
  setRunning(false);
  $("show-tree").disabled = $("show-timeline").disabled = false;
  for (const li of $("sessions").children) li.classList.toggle("current", li.dataset.id === id);
  closeSidebar();
  try {
    await showDetail();
  } catch (error) {
    notice(error.message);
    return;
  }
  state.replayUntil = state.detail.last_event_seq;
  if (!state.replayUntil) await loadTree();
  follow(id);
  if (state.panel) showPanel(state.panel);
}

async function showDetail() {
  const detail = await api("GET", "/sessions/" + sid());
  state.detail = detail;
  $("title").textContent = detail.title || "Untitled";
  $("model").textContent = detail.model || "";
  const u = detail.usage;
  const cached = u.prompt_tokens && u.cached_tokens ? ` (${Math.round((100 * u.cached_tokens) / u.prompt_tokens)}% cached)` : "";
  $("totals").textContent = u.runs
    ? `${u.runs} run${u.runs === 1 ? "" : "s"} · ${u.turns} step${u.turns === 1 ? "" : "s"}` +
      (u.prompt_tokens || u.completion_tokens ? ` · ${count(u.prompt_tokens)} in${cached} · ${count(u.completion_tokens)} out` : "")
    : "";
}

async function loadTree() {
  if (!state.session) return;
  state.tree = await api("GET", `/sessions/${sid()}/tree`);
  conversation.applyTree(state.tree);
  if (state.panel === "tree") showPanel("tree");
}

async function follow(id) {
  const controller = new AbortController();
  state.stream = controller;
  let after = 0;
  while (!controller.signal.aborted) {
    try {
      for await (const frame of events(id, after, controller.signal)) {
        if (frame.id !== null) after = frame.id;
        if (frame.name === "error") continue;  // the server ends the stream after it: reattach from `after`
        onEvent(frame);
      }
    } catch (error) {
      if (controller.signal.aborted) return;
      if (error instanceof ApiError && error.status < 500) { notice("cannot follow this session: " + error.message); return; }
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));  // the line dropped: resume after the last seq
  }
}

function onEvent(frame) {
  const log = $("log");
  const atEnd = log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  conversation.handle(frame.name, frame.data, frame.id);
  if (atEnd) log.scrollTop = log.scrollHeight;
  const live = frame.id === null || frame.id > state.replayUntil;
  if (frame.id !== null && frame.id === state.replayUntil) loadTree().catch(() => {});
  if (frame.name === "agent_start") setRunning(true);
  if (frame.name === "agent_end") {
    setRunning(false);
    if (live) refreshAfterRun();
  }
  if (frame.name === "approval_required" || frame.name === "approval_decided") setRunning(conversation.running);
  if (state.panel === "timeline" && frame.id !== null) redrawTimeline();
}

function refreshAfterRun() {
  Promise.all([showDetail(), loadTree(), loadSessions()]).catch((error) => notice(error.message));
}

function setRunning(running) {
  const waiting = conversation.waiting.size;
  $("abort").disabled = !running;
  $("status").textContent = !running ? "" : waiting ? "waits for your decision" : "running…";
  $("status").className = running ? (waiting ? "waiting" : "running") : "";
  $("input").placeholder = running ? "Steer the run… (Enter)" : "Ask something… (Enter sends, Shift+Enter: new line)";
}

async function decide(approvalId, decision) {
  try {
    await api("POST", `/sessions/${sid()}/approvals/${encodeURIComponent(approvalId)}`,
      { decision, reason: decision === "allow" ? "approved on the page" : "denied on the page" });
  } catch (error) { notice(error.message); }
}

// -- the composer ---------------------------------------------------------------------------------
async function send(event) {
  event.preventDefault();
  const text = $("input").value.trim();
  if (!text && !state.images.length) return;
  notice("");
  try {
    if (state.session && conversation.running) {
      await api("POST", `/sessions/${sid()}/steer`, { text });
      $("input").value = "";
      flash("sent to the running model");
      return;
    }
    if (!state.session) {
      const body = state.settings ? state.settings.collect() : {};
      const made = await api("POST", "/sessions", body);
      await openSession(made.id);
    }
    await startRun(state.session, { text, images: state.images.map((i) => ({ data: i.url })) });
    if (!state.detail || !state.detail.title) showDetail().catch(() => {});  // its first message titled it
    $("input").value = "";
    setImages([]);
    grow();
    loadSessions().catch(() => {});
  } catch (error) { notice(error.message); }
}

function grow() {
  const input = $("input");
  input.style.height = "auto";
  input.style.height = Math.min(input.scrollHeight + 2, 240) + "px";
}

function setImages(images) {
  state.images = images;
  $("attachments").hidden = !images.length;
  $("attachments").replaceChildren(...images.map((image, i) => el("span", { class: "thumb" },
    el("img", { src: image.url, alt: image.name }),
    el("button", { type: "button", "aria-label": "Remove " + image.name, onclick: () => setImages(images.filter((_, j) => j !== i)) }, "×"))));
}

async function addFiles(files) {
  const limits = (state.info && state.info.limits) || {};
  const taken = [...state.images];
  for (const file of files) {
    if (!/^image\/(png|jpeg|gif|webp)$/.test(file.type)) { notice(`${file.name}: not a png, jpeg, gif or webp image`); continue; }
    if (limits.max_image_bytes && file.size > limits.max_image_bytes) { notice(`${file.name}: larger than ${count(limits.max_image_bytes)} bytes`); continue; }
    if (limits.max_images && taken.length >= limits.max_images) { notice(`at most ${limits.max_images} images a message`); break; }
    const url = await new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(reader.result);
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(file);
    });
    taken.push({ name: file.name, url });
  }
  setImages(taken);
}

// -- what a run's buttons do ------------------------------------------------------------------------
function parentOf(run) {
  if (!run.entry) throw new Error("this run is not in the session's tree yet; try again when it has ended");
  return run.entry.parent_id;
}

async function branch(entryId, summarise = false) {
  const move = await api("POST", `/sessions/${sid()}/branch`, { entry_id: entryId, summarise });
  if (!move.moved) notice("did not move: " + ((move.summary && (move.summary.error || (move.summary.aborted && "aborted"))) || "nothing to move"));
  await loadTree();
  return move.moved;
}

async function act(action, run) {
  if (action === "copy" || action === "copy-prompt") {
    const done = await copyText(action === "copy" ? run.answer : run.prompt.text);
    flash(done ? "copied" : "could not copy");
  } else if (action === "timeline") {
    state.panelRun = run;
    showPanel("timeline");
  } else if (action === "continue") {
    if (!run.entries.length) throw new Error("this run is not in the session's tree yet");
    if (await branch(run.entries[run.entries.length - 1].id)) { flash("the next message continues from here"); $("input").focus(); }
  } else if (action === "regenerate") {
    if (await branch(parentOf(run))) await startRun(state.session, { text: run.prompt.text, images: run.prompt.images.map((data) => ({ data })) });
  } else if (action === "edit") {
    editPrompt(run);
  }
}

function editPrompt(run) {
  const bubble = run.head.querySelector(".bubble");
  const area = el("textarea", { class: "edit-area", rows: 3, "aria-label": "Edit the message" });
  area.value = run.prompt.text;
  const restore = () => editor.replaceWith(bubble);
  const resend = async () => {
    try {
      const text = area.value.trim();
      if (text && (await branch(parentOf(run)))) {
        restore();
        await startRun(state.session, { text, images: run.prompt.images.map((data) => ({ data })) });
      }
    } catch (error) { notice(error.message); }
  };
  const editor = el("div", { class: "editor" }, area, el("div", { class: "buttons" },
    el("button", { type: "button", class: "primary", onclick: resend }, "Send as a new branch"),
    el("button", { type: "button", onclick: restore }, "Cancel")));
  area.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); resend(); }
    if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); restore(); }
  });
  bubble.replaceWith(editor);
  area.focus();
}

// -- the side panel: branches and the timeline -------------------------------------------------------
let timelineQueued = false;
function redrawTimeline() {
  if (timelineQueued) return;
  timelineQueued = true;
  requestAnimationFrame(() => { timelineQueued = false; if (state.panel === "timeline") showPanel("timeline"); });
}

async function showPanel(which) {
  state.panel = which;
  $("panel").hidden = false;
  document.body.classList.add("with-panel");
  for (const tab of $("panel").querySelectorAll("[data-panel]")) tab.setAttribute("aria-selected", String(tab.dataset.panel === which));
  const body = $("panel-body");
  if (!state.session) { body.replaceChildren(el("p", { class: "note" }, "Start or pick a session first.")); return; }
  if (which === "tree") {
    if (!state.tree) await loadTree();
    drawTree(body, state.tree, (entryId, summarise) => branch(entryId, summarise).catch((error) => notice(error.message)));
  } else {
    const run = conversation.runs.includes(state.panelRun) ? state.panelRun : conversation.runs[conversation.runs.length - 1];
    if (run) drawTimeline(body, run, conversation.hooks.model());
    else body.replaceChildren(el("p", { class: "note" }, "No run yet."));
  }
}

function closePanel() {
  state.panel = null;
  state.panelRun = null;
  $("panel").hidden = true;
  document.body.classList.remove("with-panel");
}

function togglePanel(which) {
  if (state.panel === which) closePanel();
  else showPanel(which).catch((error) => notice(error.message));
}

function openSidebar() {
  if (matchMedia("(max-width: 760px)").matches) { document.body.classList.add("sidebar-open"); $("scrim").hidden = false; }
  ($("sessions").querySelector("li.current") || $("sessions").querySelector("li[tabindex]") || $("search")).focus();
}

function closeSidebar() { document.body.classList.remove("sidebar-open"); $("scrim").hidden = true; }

// -- the keyboard ------------------------------------------------------------------------------------
const KEYS = {
  a: () => conversation.firstWaiting()?.el.querySelector("button.approve")?.click(),
  d: () => conversation.firstWaiting()?.el.querySelector("button.deny")?.click(),
  s: () => $("abort").click(),
  "/": () => $("input").focus(),
  n: () => newSession(),
  l: () => openSidebar(),
  b: () => togglePanel("tree"),
  t: () => togglePanel("timeline"),
  "?": () => $("keys").showModal(),
};

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const typing = event.target.closest("input, textarea, select, [contenteditable]");
  if (event.key === "Escape") {
    if (typing) event.target.blur();
    else if (state.panel) closePanel();
    else closeSidebar();
    if (event.target.closest("#sidebar")) $("input").focus();
    return;
  }
  if (typing || $("keys").open) return;
  const run = KEYS[event.key];
  if (run) { event.preventDefault(); run(); }
});

$("composer").addEventListener("submit", send);
$("input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); $("composer").requestSubmit(); }
});
$("input").addEventListener("input", grow);
$("input").addEventListener("paste", (event) => {
  const files = [...(event.clipboardData?.files || [])];
  if (files.length) { event.preventDefault(); addFiles(files); }
});
$("composer").addEventListener("dragover", (event) => event.preventDefault());
$("composer").addEventListener("drop", (event) => { event.preventDefault(); addFiles([...event.dataTransfer.files]); });
$("attach").addEventListener("click", () => $("file").click());
$("file").addEventListener("change", () => { addFiles([...$("file").files]); $("file").value = ""; });
$("new").addEventListener("click", newSession);
$("abort").addEventListener("click", () => api("POST", `/sessions/${sid()}/abort`).catch((error) => notice(error.message)));
$("show-tree").addEventListener("click", () => togglePanel("tree"));
$("show-timeline").addEventListener("click", () => togglePanel("timeline"));
$("close-panel").addEventListener("click", closePanel);
$("help").addEventListener("click", () => $("keys").showModal());
for (const tab of $("panel").querySelectorAll("[data-panel]")) tab.addEventListener("click", () => showPanel(tab.dataset.panel));
$("menu").addEventListener("click", openSidebar);
$("scrim").addEventListener("click", closeSidebar);
$("log").addEventListener("click", async (event) => {
  const button = event.target.closest("button.copy-code");
  if (button) flash((await copyText(button.parentElement.querySelector("code").textContent)) ? "copied" : "could not copy");
});
let searching = 0;
$("search").addEventListener("input", () => {
  clearTimeout(searching);
  searching = setTimeout(() => { state.listed = ""; loadSessions().catch((error) => notice(error.message)); }, 250);
});

async function boot() {
  try {
    state.info = await api("GET", "/info");
    await loadSessions();
  } catch (error) {
    notice(error.message);
    return;
  }
  const wanted = decodeURIComponent(location.hash.slice(1));
  if (wanted) await openSession(wanted);
  else newSession();
}

setInterval(() => { if (!document.hidden && state.info) loadSessions().catch(() => {}); }, 5000);
boot();
