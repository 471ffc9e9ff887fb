// OmniRoute dashboard: polls GET /api/dashboard/snapshot once a second and
// renders it; requests and usage come from /api/requests and /api/usage;
// service buttons call the existing /api/services endpoints. No framework,
// no build step, nothing loaded from elsewhere.
"use strict";

const $ = (id) => document.getElementById(id);
let key = sessionStorage.getItem("omniroute-management-key") || "";
let logTool = "", logAbort = null;

function headers() {
  const h = {};
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

// api fetches a management endpoint with the guard's headers. A POST sends
// no body and no Content-Type, which the forgery protection accepts.
async function api(path, method) {
  const r = await fetch(path, { method: method || "GET", headers: headers(), credentials: "omit", cache: "no-store" });
  if (r.status === 401) {
    $("keyform").hidden = false;
    throw new Error("the gateway wants its management key (OMNIROUTE_MANAGEMENT_KEY)");
  }
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    const e = body.error || {};
    throw new Error(path + ": " + r.status + " " + (e.code || "") + " " + (e.message || ""));
  }
  return body;
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text === undefined || text === null ? "" : String(text);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

// fill replaces a table body with one row per item (row builds it).
function fill(table, items, row, more) {
  const tb = $(table).tBodies[0];
  const frag = document.createDocumentFragment();
  for (const it of items) {
    const tr = document.createElement("tr");
    row(tr, it);
    frag.appendChild(tr);
  }
  if (more) {
    const tr = document.createElement("tr");
    const td = cell(tr, more, "more");
    td.colSpan = $(table).tHead.rows[0].cells.length;
    frag.appendChild(tr);
  }
  tb.replaceChildren(frag);
}

const fmtNum = (v, d) => (v === undefined || v === null ? "–" : Number(v).toFixed(d === undefined ? 0 : d));
const fmtSec = (v) => (v === undefined ? "–" : v < 1 ? (v * 1000).toFixed(0) + " ms" : v.toFixed(2) + " s");
// fmtWait is a wait in milliseconds: "0 s", "12 s", "1 min 2 s", "24 h 47 min".
const fmtWait = (ms) => {
  const s = Math.ceil((ms || 0) / 1000);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
};
function fmtBytes(n) {
  if (n === undefined) return "–";
  const u = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + u[i];
}
const fmtTime = (t) => (t ? new Date(t).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "");

function drawChart(h) {
  const c = $("limit-chart");
  const ctx = c.getContext("2d");
  const W = c.width, H = c.height, pad = 28;
  ctx.clearRect(0, 0, W, H);
  const n = h.t ? h.t.length : 0;
  c.dataset.points = String(n);
  c.dataset.limits = (h.limit || []).join(","); // the plotted limit, for tests and curious operators
  if (n === 0) return;
  const series = [["limit", "#0969da"], ["activeCost", "#1a7f37"], ["queuedCost", "#cf222e"]];
  let top = 1;
  for (const [k] of series) for (const v of h[k]) top = Math.max(top, v);
  top *= 1.1;
  const t0 = h.t[0], t1 = Math.max(h.t[n - 1], t0 + 1);
  const x = (t) => pad + ((t - t0) / (t1 - t0)) * (W - 2 * pad);
  const y = (v) => H - pad - (v / top) * (H - 2 * pad);
  ctx.strokeStyle = "#d2d2d7";
  ctx.fillStyle = "#6e6e73";
  ctx.font = "11px system-ui";
  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4;
    ctx.beginPath(); ctx.moveTo(pad, y(v)); ctx.lineTo(W - pad, y(v)); ctx.stroke();
    ctx.fillText(v.toFixed(0), 2, y(v) + 4);
  }
  for (const [k, color] of series) {
    ctx.strokeStyle = color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    h[k].forEach((v, i) => (i ? ctx.lineTo(x(h.t[i]), y(v)) : ctx.moveTo(x(h.t[i]), y(v))));
    ctx.stroke();
  }
}

function render(s) {
  $("status").textContent = s.status;
  $("status").className = "badge " + s.status;
  $("version").textContent = "version " + (s.version || "dev") + ", up " + s.uptimeSeconds + " s";
  $("updated").textContent = "updated " + fmtTime(s.at);
  const cf = s.config || {};
  $("config").textContent = "config v" + cf.version + " " + cf.hash + " loaded " + fmtTime(cf.loadedAt);
  $("config").dataset.version = String(cf.version);
  const o = s.overview || {};
  $("rps").textContent = fmtNum(o.requestsPerSecond, 1);
  $("errrate").textContent = o.errorRate === undefined ? "–" : (o.errorRate * 100).toFixed(1) + " %";
  $("p50").textContent = fmtSec(o.p50Seconds);
  $("p99").textContent = fmtSec(o.p99Seconds);
  $("inflight").textContent = fmtNum(o.inflight);
  const rateRow = (tr, x) => { tr.dataset.name = x.name; cell(tr, x.name); cell(tr, fmtNum(x.attemptsPerSecond, 2), "rate"); cell(tr, (x.errorRate * 100).toFixed(1) + " %"); };
  fill("by-model", o.byModel || [], rateRow);
  fill("by-target", o.byTarget || [], rateRow);

  const a = s.admission || {};
  $("adm-mode").textContent = a.mode || "–";
  $("adm-limit").textContent = fmtNum(a.limit);
  $("adm-active").textContent = fmtNum(a.activeCost);
  $("adm-queued").textContent = fmtNum(a.queuedCost);
  const ing = a.ingest || {};
  $("ingest-bytes").textContent = fmtBytes(ing.inflightBytes) + " / " + fmtBytes(ing.maxInflightBytes);
  const pr = a.pressure || {};
  $("pressure").textContent = (pr.severity || "–") + (pr.reason && pr.reason !== "none" ? " (" + pr.reason + ")" : "");
  drawChart(a.history || {});
  const lanes = a.lanes || [];
  $("lanes-count").textContent = "(" + (a.queuedLanes || 0) + " queued of " + (a.laneCount || 0) + " lanes)";
  fill("lanes", lanes, (tr, l) => { cell(tr, l.upstream); cell(tr, l.tenant); cell(tr, l.queuedCount); cell(tr, l.queuedCost); },
    a.queuedLanes > lanes.length ? "… " + (a.queuedLanes - lanes.length) + " more lanes with a queue" : "");
  const rej = Object.entries(a.rejections || {}).sort((p, q) => q[1] - p[1]);
  fill("rejections", rej, (tr, [k, v]) => { cell(tr, k); cell(tr, v); });
  fill("upstreams", a.upstreams || [], (tr, u) => {
    cell(tr, u.name); cell(tr, u.limit); cell(tr, fmtNum(u.knee, 1)); cell(tr, u.activeCost); cell(tr, u.queuedCount); cell(tr, u.phase);
  });

  const provs = s.providers || [];
  $("providers-count").textContent = "(" + s.providerCount + " targets, " + s.troubledProviders + " need attention)";
  fill("providers-table", provs, (tr, p) => {
    tr.dataset.target = p.target;
    if (p.circuit !== "closed" || p.cooldownUntil) tr.className = "bad";
    else if (p.consecutiveFailures > 0 || (p.quota !== "healthy" && p.quota !== "unknown")) tr.className = "warn";
    cell(tr, p.target); cell(tr, p.quota); cell(tr, (p.quotaSources || []).join(", "));
    cell(tr, p.circuit, "circuit"); cell(tr, p.cooldownReason || "", "reason"); cell(tr, fmtTime(p.cooldownUntil), "until");
    cell(tr, p.consecutiveFailures); cell(tr, p.successes + "/" + p.attempts);
  }, s.providerCount > provs.length ? "… " + (s.providerCount - provs.length) + " more targets" : "");

  const lims = s.limits || [];
  $("limits-count").textContent = "(" + (s.limitCount || 0) + " windows)";
  fill("limits-table", lims, (tr, w) => {
    tr.dataset.budget = w.kind + ":" + w.budget + (w.model ? "/" + w.model : "") + ":" + w.dimension + ":" + w.period;
    if (w.remaining === 0) tr.className = "bad";
    else if (w.used >= 0.8 * w.limit) tr.className = "warn";
    cell(tr, w.kind); cell(tr, w.budget); cell(tr, w.model || ""); cell(tr, w.dimension); cell(tr, w.period);
    cell(tr, w.used, "used"); cell(tr, w.limit); cell(tr, w.remaining, "remaining"); cell(tr, fmtWait(w.resetMs), "reset");
  }, s.limitCount > lims.length ? "… " + (s.limitCount - lims.length) + " more windows" : "");

  const cl = s.cluster;
  $("cluster").hidden = !cl;
  if (cl) {
    $("cluster-name").textContent = "(" + cl.name + ", " + (cl.members || []).length + " members)";
    fill("members", cl.members || [], (tr, m) => {
      tr.dataset.member = m.id;
      cell(tr, m.id); cell(tr, m.address); cell(tr, m.self ? "this node" : "", "self");
    });
  }

  fill("services-table", s.services || [], (tr, v) => {
    tr.dataset.service = v.tool;
    cell(tr, v.tool); cell(tr, v.state, "state"); cell(tr, v.health); cell(tr, v.pid === null ? "" : v.pid, "pid"); cell(tr, v.restarts);
    const td = cell(tr, "");
    for (const act of ["start", "stop", "restart", "logs"]) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = act;
      b.dataset.action = act;
      b.addEventListener("click", () => (act === "logs" ? tailLogs(v.tool) : serviceAction(v.tool, act)));
      td.appendChild(b);
    }
  });
  if (!logTool && (s.services || []).length) tailLogs(s.services[0].tool);
}

async function serviceAction(tool, act) {
  try {
    await api("/api/services/" + encodeURIComponent(tool) + "/" + act, "POST");
    $("error").textContent = "";
    poll();
  } catch (e) {
    $("error").textContent = e.message;
  }
}

// tailLogs follows the service's log stream (server-sent events read with
// fetch, since EventSource cannot send the management key).
async function tailLogs(tool) {
  if (logAbort) logAbort.abort();
  logTool = tool;
  logAbort = new AbortController();
  $("log-service").textContent = "(" + tool + ")";
  const pre = $("log");
  pre.textContent = "";
  const add = (l) => {
    pre.textContent += fmtTime(l.ts) + " " + l.stream + " " + l.line + "\n";
    if (pre.textContent.length > 200000) pre.textContent = pre.textContent.slice(-100000);
    pre.scrollTop = pre.scrollHeight;
  };
  try {
    const r = await fetch("/api/services/" + encodeURIComponent(tool) + "/logs?tail=100", { headers: headers(), signal: logAbort.signal, credentials: "omit" });
    if (!r.ok) throw new Error("logs: " + r.status);
    const rd = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await rd.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        let ev = "", data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) ev = line.slice(7);
          else if (line.startsWith("data: ")) data += line.slice(6);
        }
        if (ev === "snapshot") JSON.parse(data).forEach(add);
        else if (ev === "log") add(JSON.parse(data));
      }
    }
  } catch (e) {
    if (e.name !== "AbortError") $("error").textContent = e.message;
  }
}

async function poll() {
  try {
    render(await api("/api/dashboard/snapshot"));
    $("error").textContent = "";
  } catch (e) {
    $("status").textContent = "error";
    $("status").className = "badge error";
    $("error").textContent = e.message;
  }
}

// Requests and usage are read only while the page is visible, and only
// what the tables draw: the last 50 requests (the API's default window is
// the last day), and today's usage per tenant and model (a day bucket
// since midnight UTC, at most 100 rows), which changes slowly, so it is
// asked for every 15 s rather than on every poll.
const usageEvery = 15000;
let usageAt = 0, usageKey = "";

async function pollRequests(force) {
  if (document.hidden && !force) return;
  const q = new URLSearchParams();
  for (const [k, v] of new FormData($("req-filter"))) if (v) q.set(k, v);
  q.set("limit", "50");
  try {
    const r = await api("/api/requests?" + q);
    fill("requests-table", r.requests || [], (tr, x) => {
      tr.dataset.requestId = x.requestId;
      if (x.status >= 400) tr.className = x.status >= 500 ? "bad" : "warn";
      cell(tr, fmtTime(x.time)); cell(tr, x.requestId); cell(tr, x.tenantName || x.tenantId); cell(tr, x.model); cell(tr, x.target);
      cell(tr, x.status, "status"); cell(tr, x.errorCode || "", "code"); cell(tr, fmtNum(x.latencyMs) + " ms"); cell(tr, x.tokensIn + "/" + x.tokensOut);
    });
    const u = new URLSearchParams();
    if (q.get("tenant")) u.set("tenant", q.get("tenant"));
    if (q.get("model")) u.set("model", q.get("model"));
    const today = new Date();
    today.setUTCHours(0, 0, 0, 0);
    u.set("since", today.toISOString());
    u.set("bucket", "day");
    u.set("limit", "100");
    if (!force && u.toString() === usageKey && Date.now() - usageAt < usageEvery) return;
    usageKey = u.toString();
    usageAt = Date.now();
    const us = await api("/api/usage?" + u);
    fill("usage-table", us.usage || [], (tr, x) => {
      cell(tr, fmtTime(x.start)); cell(tr, x.tenantName || x.tenantId); cell(tr, x.model); cell(tr, x.requests); cell(tr, x.errors);
      cell(tr, x.tokensIn + "/" + x.tokensOut); cell(tr, fmtNum(x.costUsd, 4));
    }, us.next ? "more rows than shown: narrow the filter" : "");
    const refused = us.refused || [];
    $("usage-refused").textContent = refused.length === 0 ? "" :
      "Refused before routing today: " + ((us.total || {}).refused || 0) + " (" +
      refused.slice(0, 5).map((x) => (x.tenantName || x.tenantId) + " " + x.code + " ×" + x.count).join(", ") + ")";
  } catch (e) {
    $("error").textContent = e.message;
  }
}

$("keyform").addEventListener("submit", (ev) => {
  ev.preventDefault();
  key = $("key").value;
  sessionStorage.setItem("omniroute-management-key", key);
  $("keyform").hidden = true;
  logTool = "";
  poll(); pollRequests(true);
});
$("req-filter").addEventListener("submit", (ev) => { ev.preventDefault(); pollRequests(true); });
document.addEventListener("visibilitychange", () => { if (!document.hidden) pollRequests(true); });

poll();
pollRequests(true);
setInterval(poll, 1000);
setInterval(() => pollRequests(false), 3000);
