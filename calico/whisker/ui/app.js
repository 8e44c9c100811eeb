// Whisker: the live flow table over whisker-backend's /flows (SSE) and /flows-filter-hints.
// Plain browser JavaScript, no build step and no CDN: the backend serves this file as is.
"use strict";

const MAX_ROWS = 1000;
const COLUMNS = ["start_time", "end_time", "action", "source_namespace", "source_name",
  "dest_namespace", "dest_name", "protocol", "dest_port", "reporter"];
const HINT_REFRESH_MS = 10000;
const COUNT_REFRESH_MS = 5000;
const RECONNECT_MS = 2000;

const state = { paused: false, pending: [], source: null, rows: 0 };
const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function rangeSeconds() { return Number($("f-range").value); }

// The filters JSON in upstream's shape (design/whisker.md "REST API").
function currentFilters() {
  const f = {};
  for (const field of ["source_namespaces", "source_names", "dest_namespaces", "dest_names"]) {
    const v = $("f-" + field).value;
    if (v) f[field] = [{ value: v, type: "Exact" }];
  }
  const action = $("f-action").value;
  if (action) f.actions = [action];
  const port = $("f-port").value;
  if (port !== "") f.dest_ports = [{ value: Number(port), type: "Exact" }];
  const proto = $("f-protocol").value;
  if (proto) f.protocols = [{ value: proto, type: "Exact" }];
  const reporter = $("f-reporter").value;
  if (reporter) f.reporter = reporter;
  const tier = $("f-policy-tier").value;
  const name = $("f-policy-name").value;
  if (tier || name) {
    const p = {};
    if (tier) p.tier = { value: tier, type: "Exact" };
    if (name) p.name = { value: name, type: "Exact" };
    f.policies = [p];
  }
  return f;
}

function query(extra) {
  const params = new URLSearchParams();
  params.set("startTimeGte", String(-rangeSeconds()));
  const filters = currentFilters();
  if (Object.keys(filters).length) params.set("filters", JSON.stringify(filters));
  for (const [k, v] of Object.entries(extra || {})) params.set(k, v);
  return params.toString();
}

function showError(message) {
  const box = $("error");
  box.textContent = message || "";
  box.hidden = !message;
}

function setState(text) { $("stream-state").textContent = text; }

function traceTable(title, hits, cls) {
  const wrap = el("div", null, "trace " + cls);
  wrap.appendChild(el("h4", title));
  if (!hits || !hits.length) {
    wrap.appendChild(el("p", "none", "empty"));
    return wrap;
  }
  const table = el("table");
  const head = el("tr");
  for (const h of ["#", "Kind", "Tier", "Namespace", "Name", "Action", "Rule", "Trigger"]) {
    head.appendChild(el("th", h));
  }
  table.appendChild(head);
  for (const hit of hits) {
    const tr = el("tr", null, "hit");
    const trigger = hit.trigger ? `${hit.trigger.kind} ${hit.trigger.name}` : "";
    const rule = hit.rule_index < 0 ? "-" : hit.rule_index;
    for (const v of [hit.policy_index, hit.kind, hit.tier, hit.namespace || "-", hit.name,
      hit.action, rule, trigger]) {
      tr.appendChild(el("td", v));
    }
    table.appendChild(tr);
  }
  wrap.appendChild(table);
  return wrap;
}

function detailsRow(flow) {
  const tr = el("tr", null, "details");
  const td = el("td");
  td.colSpan = COLUMNS.length;
  const grid = el("dl", null, "details-grid");
  const facts = [
    ["Source labels", flow.source_labels || "-"], ["Dest labels", flow.dest_labels || "-"],
    ["Source IPs", (flow.source_ips || []).join(", ") || "-"],
    ["Source ports", (flow.source_ports || []).join(", ") || "-"],
    ["Packets in / out", `${flow.packets_in} / ${flow.packets_out}`],
    ["Bytes in / out", `${flow.bytes_in} / ${flow.bytes_out}`],
  ];
  for (const [k, v] of facts) { grid.appendChild(el("dt", k)); grid.appendChild(el("dd", v)); }
  td.appendChild(grid);
  const policies = flow.policies || {};
  td.appendChild(traceTable("Enforced policies", policies.enforced, "enforced"));
  td.appendChild(traceTable("Pending policies", policies.pending, "pending"));
  tr.appendChild(td);
  return tr;
}

function toggleDetails(row, flow) {
  const next = row.nextSibling;
  if (next && next.classList && next.classList.contains("details")) {
    next.remove();
    row.classList.remove("open");
    return;
  }
  row.classList.add("open");
  row.parentNode.insertBefore(detailsRow(flow), row.nextSibling);
}

function addRow(flow) {
  const body = $("flow-rows");
  const tr = el("tr", null, "flow-row");
  tr.dataset.action = flow.action;
  for (const c of COLUMNS) {
    const td = el("td", flow[c], "col-" + c + (c === "action" ? " action-" + flow.action : ""));
    tr.appendChild(td);
  }
  tr.addEventListener("click", () => toggleDetails(tr, flow));
  body.insertBefore(tr, body.firstChild);
  state.rows += 1;
  while (state.rows > MAX_ROWS) {
    const last = body.lastChild;
    if (last.classList.contains("flow-row")) state.rows -= 1;
    last.remove();
  }
  $("empty").hidden = state.rows > 0;
}

function clearRows() {
  $("flow-rows").replaceChildren();
  state.rows = 0;
  state.pending = [];
  $("empty").hidden = false;
}

function connect() {
  if (state.source) state.source.close();
  clearRows();
  const source = new EventSource("flows?" + query({ watch: "true" }));
  state.source = source;
  setState("connecting");
  source.onopen = () => { setState(state.paused ? "paused" : "live"); showError(""); };
  source.onmessage = (event) => {
    const flow = JSON.parse(event.data);
    if (state.paused) state.pending.push(flow); else addRow(flow);
  };
  // On a dropped stream (Goldmane or the backend restarting) reopen it ourselves rather than
  // let EventSource retry the same URL: its backfill would duplicate the rows already shown.
  source.onerror = () => {
    if (state.source !== source) return;
    source.close();
    setState("reconnecting");
    setTimeout(() => { if (state.source === source) connect(); }, RECONNECT_MS);
  };
}

function togglePause() {
  state.paused = !state.paused;
  $("pause").textContent = state.paused ? "Play" : "Pause";
  setState(state.paused ? "paused" : "live");
  if (!state.paused) {
    for (const flow of state.pending) addRow(flow);
    state.pending = [];
  }
}

async function getJSON(path) {
  const rsp = await fetch(path);
  const body = await rsp.json();
  if (!rsp.ok) throw new Error(body.error || rsp.statusText);
  return body;
}

async function refreshDenied() {
  const filters = currentFilters();
  filters.actions = ["Deny"];
  const params = new URLSearchParams({
    startTimeGte: String(-rangeSeconds()), pageSize: "1", filters: JSON.stringify(filters),
  });
  try {
    const body = await getJSON("flows?" + params.toString());
    $("denied-count").textContent = String(body.total.totalResults);
  } catch (err) {
    showError("Denied count: " + err.message);
  }
}

async function refreshHints() {
  for (const select of document.querySelectorAll("select[data-hint]")) {
    const params = new URLSearchParams({
      type: select.dataset.hint, startTimeGte: String(-rangeSeconds()),
    });
    try {
      const body = await getJSON("flows-filter-hints?" + params.toString());
      const chosen = select.value;
      const values = body.items.map((h) => h.value);
      if (chosen && !values.includes(chosen)) values.push(chosen);
      const options = [el("option", "Any")];
      options[0].value = "";
      for (const v of values) { const o = el("option", v); o.value = v; options.push(o); }
      select.replaceChildren(...options);
      select.value = chosen;
    } catch (err) {
      showError("Filter hints: " + err.message);
    }
  }
}

function filtersChanged() {
  connect();
  refreshDenied();
}

function init() {
  $("pause").addEventListener("click", togglePause);
  for (const input of document.querySelectorAll("#filters select, #filters input")) {
    input.addEventListener("change", filtersChanged);
  }
  $("f-range").addEventListener("change", refreshHints);
  $("f-clear").addEventListener("click", () => {
    for (const input of document.querySelectorAll("#filters select[id^='f-'], #filters input")) {
      if (input.id !== "f-range") input.value = "";
    }
    filtersChanged();
  });
  connect();
  refreshDenied();
  refreshHints();
  setInterval(refreshDenied, COUNT_REFRESH_MS);
  setInterval(refreshHints, HINT_REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", init);
