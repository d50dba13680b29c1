// The cotal graph: agents and the channels they read, laid out by a small force simulation.
// Spokes come from the membership feed the delivery daemon writes (solid: read live now; dashed:
// a durable member that is offline); without a feed, from who posted where. Every message runs
// along its path as a comet: a post to its channel's hub, a direct message to its peer, a task to
// its role. Names a peer chose are set as text, never as markup.
"use strict";

const NS = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
const svg = $("graph");
const g = { nodes: new Map(), edges: new Map(), peers: new Map(), feed: null, traffic: new Map(), tasks: new Map(), hideOffline: false, alpha: 1 };

function svgEl(tag, attrs) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

function statusOf(key) {
  const p = g.peers.get(key);
  if (!p || !p.online || !p.presence) return "offline";
  return p.presence.status;
}

function nameOf(key) {
  const p = g.peers.get(key);
  return (p && p.who) || key;
}

// ---- the model -------------------------------------------------------------------------------

// node returns the node for id, creating it near the centre; kind is "agent" or "hub".
function node(id, kind, label) {
  let n = g.nodes.get(id);
  if (!n) {
    const w = svg.clientWidth || 800, h = svg.clientHeight || 600;
    n = { id, kind, label, x: w / 2 + (Math.random() - 0.5) * 200, y: h / 2 + (Math.random() - 0.5) * 200, vx: 0, vy: 0 };
    g.nodes.set(id, n);
  }
  n.label = label;
  return n;
}

function hubID(name) { return "hub:" + name; }

// rebuild derives the nodes and spokes from the roster, the feed and the traffic.
function rebuild() {
  const want = new Map(); // edge key -> {a, b, live}
  const keep = new Set();
  const spoke = (agent, hub, live) => {
    const k = agent + "|" + hub;
    const prev = want.get(k);
    want.set(k, { a: agent, b: hub, live: live || (prev && prev.live) });
  };
  for (const key of g.peers.keys()) keep.add(key);
  if (g.feed && g.feed.state !== "traffic-only") {
    for (const m of g.feed.members) {
      keep.add(m.id);
      const online = statusOf(m.id) !== "offline";
      for (const ch of m.live) spoke(m.id, hubID(ch), online);
      for (const ch of m.durable) spoke(m.id, hubID(ch), m.live.includes(ch) && online);
    }
  } else {
    for (const [k, e] of g.traffic) { keep.add(e.a); want.set(k, { a: e.a, b: e.b, live: statusOf(e.a) !== "offline" }); }
  }
  // Roles are hubs too, spoked by who handed them tasks.
  for (const [k, e] of g.tasks) { keep.add(e.a); want.set(k, { a: e.a, b: e.b, live: statusOf(e.a) !== "offline" }); }
  for (const key of keep) {
    if (g.hideOffline && statusOf(key) === "offline") continue;
    node(key, "agent", nameOf(key));
  }
  const hubs = new Set();
  g.edges = new Map();
  for (const [k, e] of want) {
    if (g.hideOffline && statusOf(e.a) === "offline") continue;
    if (!g.nodes.has(e.a)) continue;
    hubs.add(e.b);
    node(e.b, "hub", e.b.slice(4));
    g.edges.set(k, e);
  }
  for (const [id, n] of g.nodes) {
    const gone = n.kind === "hub" ? !hubs.has(id) : (!keep.has(id) || (g.hideOffline && statusOf(id) === "offline"));
    if (gone) g.nodes.delete(id);
  }
  g.alpha = Math.max(g.alpha, 0.6);
  draw();
}

// ---- drawing ---------------------------------------------------------------------------------

function draw() {
  const edges = $("edges"), nodes = $("nodes");
  edges.replaceChildren();
  nodes.replaceChildren();
  for (const e of g.edges.values()) {
    const line = svgEl("line", { class: "spoke" + (e.live ? " live" : " offline") });
    line.dataset.a = e.a;
    line.dataset.b = e.b;
    e.el = line;
    edges.appendChild(line);
  }
  for (const n of g.nodes.values()) {
    const grp = svgEl("g", { class: "node " + n.kind });
    if (n.kind === "hub") {
      grp.dataset.hub = n.label;
      grp.appendChild(svgEl("rect", { x: -6, y: -6, width: 12, height: 12, rx: 3, transform: "rotate(45)" }));
    } else {
      const st = statusOf(n.id);
      grp.dataset.id = n.id;
      grp.classList.add(st);
      grp.appendChild(svgEl("circle", { r: 9 }));
      const title = svgEl("title");
      title.textContent = n.id + " · " + st;
      grp.appendChild(title);
    }
    const text = svgEl("text", { x: 13, y: 4 });
    text.textContent = n.kind === "hub" && !n.label.startsWith("@") ? "#" + n.label : n.label;
    grp.appendChild(text);
    n.el = grp;
    nodes.appendChild(grp);
  }
  place();
}

function place() {
  for (const e of g.edges.values()) {
    const a = g.nodes.get(e.a), b = g.nodes.get(e.b);
    if (!a || !b || !e.el) continue;
    e.el.setAttribute("x1", a.x); e.el.setAttribute("y1", a.y);
    e.el.setAttribute("x2", b.x); e.el.setAttribute("y2", b.y);
  }
  for (const n of g.nodes.values()) if (n.el) n.el.setAttribute("transform", "translate(" + n.x.toFixed(1) + "," + n.y.toFixed(1) + ")");
}

// tick is one step of the simulation: nodes repel, spokes pull, everything drifts to the centre.
function tick() {
  if (g.alpha > 0.01) {
    const ns = [...g.nodes.values()];
    const w = svg.clientWidth || 800, h = svg.clientHeight || 600;
    for (let i = 0; i < ns.length; i++) {
      for (let j = i + 1; j < ns.length; j++) {
        const a = ns[i], b = ns[j];
        let dx = b.x - a.x, dy = b.y - a.y;
        let d2 = dx * dx + dy * dy;
        if (d2 < 1) { dx = Math.random(); dy = Math.random(); d2 = 1; }
        const f = 2400 / d2 * g.alpha;
        const d = Math.sqrt(d2);
        a.vx -= f * dx / d; a.vy -= f * dy / d;
        b.vx += f * dx / d; b.vy += f * dy / d;
      }
    }
    for (const e of g.edges.values()) {
      const a = g.nodes.get(e.a), b = g.nodes.get(e.b);
      if (!a || !b) continue;
      const dx = b.x - a.x, dy = b.y - a.y, d = Math.sqrt(dx * dx + dy * dy) || 1;
      const f = (d - 110) * 0.04 * g.alpha;
      a.vx += f * dx / d; a.vy += f * dy / d;
      b.vx -= f * dx / d; b.vy -= f * dy / d;
    }
    for (const n of ns) {
      n.vx += (w / 2 - n.x) * 0.005 * g.alpha;
      n.vy += (h / 2 - n.y) * 0.005 * g.alpha;
      n.vx *= 0.6; n.vy *= 0.6;
      n.x = Math.min(w - 20, Math.max(20, n.x + n.vx));
      n.y = Math.min(h - 20, Math.max(20, n.y + n.vy));
    }
    g.alpha *= 0.985;
    place();
  }
  requestAnimationFrame(tick);
}

// comet runs a dot from node a to node b.
function comet(a, b, kind) {
  const from = g.nodes.get(a), to = g.nodes.get(b);
  if (!from || !to) return;
  const dot = svgEl("circle", { r: 4, class: "comet " + kind, cx: from.x, cy: from.y });
  $("comets").appendChild(dot);
  svg.dataset.comets = String(Number(svg.dataset.comets) + 1);
  const start = performance.now(), span = 900;
  const step = (now) => {
    const t = Math.min(1, (now - start) / span);
    dot.setAttribute("cx", from.x + (to.x - from.x) * t);
    dot.setAttribute("cy", from.y + (to.y - from.y) * t);
    if (t < 1) requestAnimationFrame(step); else dot.remove();
  };
  requestAnimationFrame(step);
}

// hubFor names the hub a post on channel lands on: its own, or a pattern that covers it.
function hubFor(channel) {
  if (g.nodes.has(hubID(channel))) return hubID(channel);
  for (const id of g.nodes.keys()) {
    if (!id.startsWith("hub:")) continue;
    const pat = id.slice(4).split("."), parts = channel.split(".");
    const ok = pat.every((p, i) => p === ">" ? i < parts.length : (p === "*" || p === parts[i])) &&
      (pat[pat.length - 1] === ">" ? parts.length >= pat.length : parts.length === pat.length);
    if (ok) return id;
  }
  return hubID(channel);
}

function onMessage(ev) {
  if (ev.mode === "channel") {
    const hub = hubFor(ev.channel);
    if (!g.feed || g.feed.state === "traffic-only") {
      const k = ev.senderId + "|" + hub;
      if (!g.traffic.has(k)) { g.traffic.set(k, { a: ev.senderId, b: hub }); rebuild(); }
    }
    comet(ev.senderId, hub, "post");
  } else if (ev.mode === "dm") {
    comet(ev.senderId, ev.to, "dm");
  } else {
    const hub = hubID("@" + ev.to), k = ev.senderId + "|" + hub;
    if (!g.tasks.has(k)) { g.tasks.set(k, { a: ev.senderId, b: hub }); rebuild(); }
    comet(ev.senderId, hub, "task");
  }
}

function setFeed(state, title) {
  $("feed").textContent = "membership: " + state;
  $("feed").className = "pill " + (state === "live" ? "on" : "off");
  $("feed").title = title || "";
}

// ---- start -----------------------------------------------------------------------------------

async function start() {
  $("hide-offline").addEventListener("change", (e) => { g.hideOffline = e.target.checked; rebuild(); });
  const meta = await fetch("/api/meta", bound()).then((r) => r.json()).catch(() => null);
  if (meta) $("space").textContent = meta.space;
  // Recent traffic, for a space without a membership feed.
  const act = await fetch("/api/activity?limit=200", bound()).then((r) => r.json()).catch(() => null);
  for (const e of (act && act.entries) || []) {
    if (e.mode === "chat") g.traffic.set(e.senderId + "|" + hubID(e.channel), { a: e.senderId, b: hubID(e.channel) });
  }
  const es = boundFeed();
  es.addEventListener("open", () => { $("conn").textContent = "live"; $("conn").className = "pill on"; });
  es.addEventListener("error", () => { $("conn").textContent = "disconnected"; $("conn").className = "pill off"; });
  es.addEventListener("roster", (e) => {
    g.peers = new Map(JSON.parse(e.data).map((p) => [p.key, p]));
    rebuild();
  });
  es.addEventListener("membership", (e) => {
    g.feed = JSON.parse(e.data);
    setFeed(g.feed.state, g.feed.asOf ? "observed " + new Date(g.feed.asOf).toLocaleTimeString() : "no delivery daemon writes a feed");
    rebuild();
  });
  es.addEventListener("membership-read-failed", (e) => {
    setFeed("unreadable", JSON.parse(e.data).reason); // the last good spokes stay
  });
  es.addEventListener("message", (e) => onMessage(JSON.parse(e.data)));
  requestAnimationFrame(tick);
}

start();
