// The cotal dashboard: the roster, the channels, every message live, and who needs you.
// Message bodies arrive as HTML the server rendered and sanitised; everything else a peer wrote
// is set as text, never as markup.
"use strict";

const state = { peers: [], questions: [], escalated: [], view: { kind: "monitor" }, seen: new Set(), channels: [] };
const MAX_ROWS = 500;
const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function ago(ms) {
  if (!ms) return "never";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return s + "s ago";
  if (s < 3600) return Math.round(s / 60) + "m ago";
  return Math.round(s / 3600) + "h ago";
}

function statusOf(p) {
  if (!p.online || !p.presence) return "offline";
  return p.presence.status;
}

const GLYPH = { working: "●", waiting: "◐", idle: "○", offline: "⊘" };

// nameOf is how a peer shows: the server's "name (principal)", its name stripped of control and
// bidi characters, so a name cannot pose as another peer.
function nameOf(p) {
  return p.who || p.key;
}

async function api(path, opts) {
  const r = await fetch(path, bound(opts));
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

// ---- roster, tiles and NEEDS YOU ------------------------------------------------------------

function renderRoster() {
  const counts = { working: 0, waiting: 0, idle: 0, offline: 0 };
  const order = { waiting: 0, working: 1, idle: 2, offline: 3 };
  const peers = state.peers.slice().sort((a, b) =>
    (order[statusOf(a)] - order[statusOf(b)]) || nameOf(a).localeCompare(nameOf(b)));
  const list = $("roster");
  list.replaceChildren();
  for (const p of peers) {
    const st = statusOf(p);
    counts[st] = (counts[st] || 0) + 1;
    const li = el("li", "peer");
    li.dataset.key = p.key;
    li.appendChild(el("span", "glyph " + st, GLYPH[st] || "○"));
    li.appendChild(document.createTextNode(" " + nameOf(p)));
    if (p.presence && p.presence.card && p.presence.card.role) li.appendChild(el("span", "count", p.presence.card.role));
    li.title = p.key;
    li.addEventListener("click", () => show({ kind: "agent", key: p.key }));
    list.appendChild(li);
  }
  for (const k of Object.keys(counts)) $("n-" + k).textContent = counts[k];
  $("tile-waiting").classList.toggle("alert", counts.waiting > 0);
  renderNeedsYou();
  if (state.view.kind === "agent") renderAgent();
}

function renderNeedsYou() {
  const waiting = state.peers.filter((p) => statusOf(p) === "waiting")
    .sort((a, b) => nameOf(a).localeCompare(nameOf(b)));
  const list = $("needs-you");
  list.replaceChildren();
  const n = waiting.length + state.questions.length + state.escalated.length;
  $("needs-title").textContent = n ? "NEEDS YOU · " + n : "NEEDS YOU · all clear";
  for (const p of waiting) {
    const li = el("li", "card");
    li.dataset.key = p.key;
    li.appendChild(el("span", "seen", "seen " + ago(p.presence.ts)));
    li.appendChild(el("div", "state", "WAITING"));
    li.appendChild(el("div", "who", nameOf(p) + " is waiting"));
    li.appendChild(el("div", "what", p.presence.activity || "waiting for input"));
    li.addEventListener("click", () => show({ kind: "agent", key: p.key }));
    list.appendChild(li);
  }
  // Spawned agents their manager gave up on, until they are spawned again.
  for (const r of state.escalated) {
    const li = el("li", "card escalated");
    li.dataset.name = r.name;
    li.appendChild(el("span", "seen", r.agent));
    li.appendChild(el("div", "state", r.status === "escalated" ? "ESCALATED" : "FAILED"));
    li.appendChild(el("div", "who", r.status === "escalated" ? r.name + " kept crashing: its manager stopped restarting it" : r.name + "'s spawn failed"));
    li.appendChild(el("code", "answer", "cotal spawn --name " + r.name + " …"));
    li.addEventListener("click", () => show({ kind: "agent", key: r.id }));
    list.appendChild(li);
  }
  // Questions addressed to the operator, until the operator answers (cotal send dm).
  for (const q of state.questions) {
    const li = el("li", "card question");
    li.dataset.from = q.from;
    li.appendChild(el("span", "seen", ago(q.msg.ts)));
    li.appendChild(el("div", "state", "QUESTION"));
    li.appendChild(el("div", "who", (q.who || q.from) + " asks you"));
    const body = el("div", "body clamp");
    body.innerHTML = q.html; // rendered and sanitised by the server
    li.appendChild(body);
    li.appendChild(el("code", "answer", "cotal send dm " + q.from + " …"));
    li.addEventListener("click", () => show({ kind: "dms" }));
    list.appendChild(li);
  }
}

// ---- messages --------------------------------------------------------------------------------

function messageRow(ev) {
  const li = el("li", "msg");
  li.dataset.id = ev.msg.id;
  const meta = el("div", "meta");
  meta.appendChild(el("span", "time", new Date(ev.msg.ts).toLocaleTimeString()));
  meta.appendChild(el("span", "mode " + ev.mode, ev.mode));
  meta.appendChild(el("span", "from", ev.who || ev.senderId));
  let target = "";
  if (ev.mode === "channel") target = "#" + ev.channel;
  else if (ev.mode === "dm") target = "→ " + (ev.to || "");
  else target = "→ @" + (ev.to || "");
  meta.appendChild(el("span", "target", target));
  li.appendChild(meta);
  const body = el("div", "body");
  body.innerHTML = ev.html; // rendered and sanitised by the server
  li.appendChild(body);
  return li;
}

function inView(ev) {
  const v = state.view;
  if (v.kind === "monitor") return true;
  if (v.kind === "channel") return ev.mode === "channel" && ev.channel === v.name;
  if (v.kind === "dms") return ev.mode === "dm";
  return false;
}

function addMessage(ev) {
  if (!ev || !ev.msg || !inView(ev)) return;
  if (ev.msg.id && state.seen.has(ev.msg.id)) return;
  if (ev.msg.id) state.seen.add(ev.msg.id);
  const list = $("messages");
  const stick = $("view").scrollTop + $("view").clientHeight >= $("view").scrollHeight - 40;
  list.appendChild(messageRow(ev));
  while (list.children.length > MAX_ROWS) list.removeChild(list.firstChild);
  if (stick) $("view").scrollTop = $("view").scrollHeight;
}

// ---- views -----------------------------------------------------------------------------------

async function show(view) {
  state.view = view;
  state.seen = new Set();
  $("messages").replaceChildren();
  $("view-tools").replaceChildren();
  $("agent").hidden = true;
  $("runs").hidden = true;
  $("messages").hidden = false;
  for (const a of document.querySelectorAll("nav a")) a.classList.remove("active");
  if (view.kind === "monitor") {
    $("view-title").textContent = "Monitor · every message, live";
  } else if (view.kind === "dms") {
    $("view-title").textContent = "Direct messages";
    for (const ev of await api("/api/dms?limit=200").catch(() => [])) addMessage(ev);
  } else if (view.kind === "channel") {
    $("view-title").textContent = "#" + view.name;
    const del = el("button", "danger", "Delete history");
    del.id = "delete-channel";
    del.addEventListener("click", () => deleteChannel(view.name));
    $("view-tools").appendChild(del);
    const path = "/api/channels/" + encodeURIComponent(view.name) + "/history?limit=200";
    for (const ev of await api(path).catch(() => [])) addMessage(ev);
  } else if (view.kind === "agent") {
    $("messages").hidden = true;
    $("agent").hidden = false;
    renderAgent();
  } else if (view.kind === "runs" || view.kind === "run") {
    $("messages").hidden = true;
    $("runs").hidden = false;
    $("view-title").textContent = view.kind === "runs" ? "Workflow runs" : "Run " + view.id;
    await refreshRuns();
  }
  const link = document.querySelector('nav a[data-view="' + view.kind + '"][data-name="' + (view.name || "") + '"]') ||
    document.querySelector('nav a[data-view="' + view.kind + '"]');
  if (link) link.classList.add("active");
}

function renderAgent() {
  const p = state.peers.find((x) => x.key === state.view.key);
  const box = $("agent");
  box.replaceChildren();
  if (!p) { box.appendChild(el("p", "clear", "gone from the roster")); return; }
  $("view-title").textContent = nameOf(p);
  const pr = p.presence || {};
  const dl = el("dl");
  const row = (k, v) => { dl.appendChild(el("dt", "", k)); dl.appendChild(el("dd", "", v === undefined || v === "" ? "—" : String(v))); };
  row("status", statusOf(p));
  row("seen", ago(pr.ts));
  row("id", p.key);
  row("role", pr.card && pr.card.role);
  row("activity", pr.activity);
  row("attention", pr.attention);
  row("channel modes", pr.channelModes ? Object.entries(pr.channelModes).map(([c, m]) => c + ": " + m).join(", ") : "");
  row("blocked on", pr.condition ? JSON.stringify(pr.condition) : "");
  box.appendChild(dl);
}

async function deleteChannel(name) {
  if (!confirm("Delete the whole history of #" + name + "? This cannot be undone.")) return;
  try {
    const r = await api("/api/channel/delete", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ channel: name }) });
    alert("#" + r.channel + ": " + r.purged + " messages deleted");
    show(state.view);
    loadChannels();
  } catch (e) {
    alert("not deleted: " + e.message);
  }
}

async function loadChannels() {
  state.channels = await api("/api/channels").catch(() => state.channels);
  renderChannels();
}

function renderChannels() {
  const list = $("channels");
  list.replaceChildren();
  for (const c of state.channels) {
    const li = el("li");
    const a = el("a", "", "#" + c.channel);
    a.href = "#channel/" + encodeURIComponent(c.channel);
    a.dataset.view = "channel";
    a.dataset.name = c.channel;
    a.appendChild(el("span", "count", String(c.messages)));
    a.addEventListener("click", (e) => { e.preventDefault(); show({ kind: "channel", name: c.channel }); });
    if (state.view.kind === "channel" && state.view.name === c.channel) a.classList.add("active");
    li.appendChild(a);
    list.appendChild(li);
  }
}

// ---- workflow runs ---------------------------------------------------------------------------

async function refreshRuns() {
  const v = state.view;
  if (v.kind === "runs") renderRuns(await api("/api/runs").catch(() => []));
  else if (v.kind === "run") renderRun(await api("/api/runs/" + encodeURIComponent(v.id)).catch(() => null));
}

function renderRuns(rows) {
  const box = $("runs");
  box.replaceChildren();
  if (!rows.length) { box.appendChild(el("p", "clear", "no workflow runs recorded (cotal run start --file PROGRAM)")); return; }
  const table = el("table", "runs");
  const head = el("tr");
  for (const h of ["run", "state", "holder", "journal"]) head.appendChild(el("th", "", h));
  table.appendChild(head);
  for (const r of rows) {
    const tr = el("tr", "run-row");
    tr.dataset.run = r.runId;
    const a = el("a", "", r.runId);
    a.href = "#run/" + encodeURIComponent(r.runId);
    a.addEventListener("click", (e) => { e.preventDefault(); show({ kind: "run", id: r.runId }); });
    const name = el("td");
    name.appendChild(a);
    tr.appendChild(name);
    tr.appendChild(el("td", "state " + (r.state || ""), r.state || "—"));
    tr.appendChild(el("td", "", r.holder || "—"));
    tr.appendChild(el("td", "", r.journalHigh === undefined ? "—" : String(r.journalHigh + 1) + " records"));
    table.appendChild(tr);
  }
  box.appendChild(table);
}

function renderRun(v) {
  const box = $("runs");
  box.replaceChildren();
  if (!v) { box.appendChild(el("p", "clear", "no such run")); return; }
  const status = v.status || {};
  box.appendChild(el("p", "run-state", (status.state || "no status") + (status.holder ? " · held by " + status.holder : "")));
  const list = el("ol", "journal");
  for (const r of v.journal) {
    const li = el("li", "record " + r.kind);
    if (r.kind === "activation") {
      li.appendChild(el("span", "what", "taken by " + r.holder + " (epoch " + r.epoch + ", after " + r.replayedTo + " records)"));
    } else {
      li.dataset.step = r.step;
      li.appendChild(el("code", "step", r.step));
      li.appendChild(el("span", "outcome " + r.outcome.split(" ")[0], r.outcome));
      if (r.answer) li.appendChild(el("span", "answer", "answered " + JSON.stringify(r.answer.value) + " by " + (r.answer.by || "?")));
      if (r.asks) li.appendChild(answerForm(v.runId, r));
    }
    list.appendChild(li);
  }
  box.appendChild(list);
}

// answerForm asks the checkpoint's question and sends the person's answer, as JSON when it
// parses as JSON and as a string otherwise.
function answerForm(runId, r) {
  const form = el("form", "answer-form");
  form.appendChild(el("div", "question", r.asks));
  const input = el("input");
  input.name = "value";
  input.placeholder = "your answer";
  form.appendChild(input);
  form.appendChild(el("button", "", "Answer"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    let value;
    try { value = JSON.parse(input.value); } catch { value = input.value; }
    try {
      await api("/api/runs/" + encodeURIComponent(runId) + "/answer", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ step: r.step, value }) });
    } catch (err) {
      alert("not answered: " + err.message);
    }
    refreshRuns();
  });
  return form;
}

// ---- start -----------------------------------------------------------------------------------

function connect() {
  const es = boundFeed();
  es.addEventListener("open", () => { $("conn").textContent = "live"; $("conn").className = "pill on"; });
  es.addEventListener("error", () => { $("conn").textContent = "disconnected"; $("conn").className = "pill off"; });
  es.addEventListener("roster", (e) => { state.peers = JSON.parse(e.data); renderRoster(); });
  es.addEventListener("questions", (e) => { state.questions = JSON.parse(e.data); renderNeedsYou(); });
  es.addEventListener("escalations", (e) => { state.escalated = JSON.parse(e.data); renderNeedsYou(); });
  es.addEventListener("message", (e) => {
    const ev = JSON.parse(e.data);
    addMessage(ev);
    if (ev.mode !== "channel") return;
    const c = state.channels.find((x) => x.channel === ev.channel);
    if (!c) { loadChannels(); return; }
    c.messages++;
    renderChannels();
  });
}

async function start() {
  for (const a of document.querySelectorAll("nav a[data-view]")) {
    a.addEventListener("click", (e) => { e.preventDefault(); show({ kind: a.dataset.view }); });
  }
  const meta = await api("/api/meta").catch(() => null);
  if (meta) $("space").textContent = meta.space;
  await loadChannels();
  connect();
  show({ kind: "monitor" });
  setInterval(renderNeedsYou, 5000); // "seen … ago" ages
  setInterval(() => { if (state.view.kind === "runs" || state.view.kind === "run") refreshRuns(); }, 2000);
}

start();
