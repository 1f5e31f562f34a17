// ctxstore web view: reads the public HTTP API (/v1) with the caller's bearer token.
// Everything shown comes from the API as text (never as HTML), so message content cannot
// run script here. A 100,000-event context is read a page of versions at a time.
"use strict";

const API = "/v1";
const PAGE = 100; // timeline events per page
const CHART_POINTS = 600;
const CONTEXTS = 500; // listed at most: the first created (newest of them on top); search narrows
const TYPES = ["create", "insert", "delete", "replace", "compress", "expand", "batch_start",
  "batch_end", "usage", "fork", "begin", "append", "finish", "abandon"];
const TOKEN_KEY = "ctxstore.token";

const session = { token: sessionStorage.getItem(TOKEN_KEY) || "" };

// ---- plumbing --------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, params = {}) {
  const url = new URL(API + path, location.origin);
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null || value === "") continue;
    if (Array.isArray(value)) value.forEach((v) => url.searchParams.append(key, v));
    else url.searchParams.set(key, value);
  }
  const headers = { Accept: "application/json" };
  if (session.token) headers.Authorization = `Bearer ${session.token}`;
  const response = await fetch(url, { headers });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const said = body && (body.detail || body.title);
    throw new ApiError(response.status, said || `${response.status} ${response.statusText}`);
  }
  return body;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const $ = (selector, root = document) => root.querySelector(selector);
const fmtTime = (iso) => new Date(iso).toLocaleString(undefined, { hour12: false });
const fmtInt = (n) => Number(n).toLocaleString("en-US");

function notice(message) {
  const box = $("#notice");
  box.textContent = message || "";
  box.hidden = !message;
}

function explain(error) {
  if (error.status === 401) return "The service needs a bearer token: enter yours above.";
  return error.message || String(error);
}

function mount(templateId) {
  // Each view renders into a container of its own: when the route moves on while a view
  // still waits for the service, what it renders lands in a container off the page.
  const view = document.createElement("div");
  view.append($(`#${templateId}`).content.cloneNode(true));
  $("#view").replaceChildren(view);
  return view;
}

// A native payload (a Responses item, an Anthropic message) as people read it: reasoning
// and thinking marked, calls with their arguments, results, images and hosted tools named.
function nativeText(message) {
  const item = message.native;
  const parts = [];
  const block = (b) => {
    switch (b.type) {
      case "text": case "input_text": case "output_text": return b.text;
      case "thinking": return `(thinking) ${b.thinking}`;
      case "redacted_thinking": return "(thinking, redacted)";
      case "tool_use": case "server_tool_use":
        return `→ ${b.name}(${JSON.stringify(b.input ?? {})})`;
      case "tool_result":
        return `← ${b.tool_use_id}${b.is_error ? " (error)" : ""}: ${
          typeof b.content === "string" ? b.content : (b.content || []).map(block).join(" ")}`;
      case "image": case "input_image": return "[image]";
      case "refusal": return `(refusal) ${b.refusal}`;
      default: return `[${b.type}]`;
    }
  };
  if (message.format === "anthropic") {
    if (typeof item.content === "string") parts.push(item.content);
    else for (const b of item.content || []) parts.push(block(b));
    return parts.join("\n");
  }
  switch (item.type ?? "message") {
    case "message":
      if (typeof item.content === "string") parts.push(item.content);
      else for (const b of item.content || []) parts.push(block(b));
      break;
    case "reasoning":
      parts.push(`(reasoning) ${(item.summary || []).map((s) => s.text).join(" ")}`);
      break;
    case "function_call": case "custom_tool_call":
      parts.push(`→ ${item.name}(${item.arguments ?? item.input ?? ""})`);
      break;
    case "function_call_output": case "custom_tool_call_output":
      parts.push(`← ${item.call_id}: ${typeof item.output === "string" ? item.output : JSON.stringify(item.output)}`);
      break;
    default:
      parts.push(`[${item.type}]`);
  }
  return parts.join("\n");
}

function textOf(message) {
  if (message.native) return nativeText(message);
  const parts = [];
  if (typeof message.content === "string") parts.push(message.content);
  else if (Array.isArray(message.content)) {
    for (const part of message.content) parts.push(part.text ?? `[${part.type}]`);
  }
  if (message.refusal) parts.push(`(refusal) ${message.refusal}`);
  if (message.audio) parts.push(`(audio reply ${message.audio.id})`);
  for (const call of message.tool_calls || []) {
    const tool = call.function ?? call.custom ?? {};
    parts.push(`→ ${tool.name}(${tool.arguments ?? tool.input ?? ""})`);
  }
  return parts.join("\n");
}

// ---- contexts --------------------------------------------------------------------------

async function showContexts(params) {
  const view = mount("contexts-view");
  const search = params.get("search") || "";
  $("#search", view).value = search;
  $("#search-form", view).addEventListener("submit", (event) => {
    event.preventDefault();
    const q = $("#search", view).value.trim();
    location.hash = q ? `#/?search=${encodeURIComponent(q)}` : "#/";
  });
  const rows = await api("/contexts", { search, limit: CONTEXTS });
  const body = $("#contexts tbody", view);
  for (const c of rows.slice().reverse()) {
    body.append(el("tr", { "data-context": c.context_id,
      onclick: () => { location.hash = `#/context/${c.context_id}`; } },
    el("td", { text: c.name || "(unnamed)" }),
    el("td", { class: "mono", text: c.context_id }),
    el("td", { text: fmtTime(c.created_at) }),
    el("td", { text: c.created_by })));
  }
  $(".empty", view).hidden = rows.length > 0;
  $(".capped", view).hidden = rows.length < CONTEXTS;
}

// ---- one context -----------------------------------------------------------------------

class ContextPage {
  constructor(id, params) {
    this.id = id;
    this.view = mount("context-view");
    this.head = 0;
    this.selected = Number(params.get("v")) || null;
    this.diffFrom = Number(params.get("from")) || null;
    this.window = null; // [lo, hi] versions shown in the timeline
    this.tab = this.diffFrom ? "diff" : "visible";
  }

  async open() {
    const [now, found] = await Promise.all([
      api(`/contexts/${this.id}`),
      api("/contexts", { search: this.id, limit: 1 }),
    ]);
    this.head = now.version;
    const summary = found.find((c) => c.context_id === now.context_id);
    $("#context-title", this.view).textContent = (summary && summary.name) || "(unnamed context)";
    $("#context-facts", this.view).textContent =
      `${now.context_id} · ${fmtInt(now.version)} events · now ${fmtInt(now.messages.length)} ` +
      `messages, ${fmtInt(now.tokens)} tokens (${now.encoding}${now.estimated ? ", estimated" : ""})`;
    this.selected = Math.min(this.selected || this.head, this.head);
    this.wire();
    const hi = Math.min(this.head, Math.max(this.selected + Math.floor(PAGE / 2), PAGE));
    await Promise.all([this.page(hi), this.chart(), this.detail()]);
  }

  wire() {
    for (const button of this.view.querySelectorAll("[data-page]")) {
      button.addEventListener("click", () => {
        const [lo, hi] = this.window;
        const to = { first: PAGE, prev: lo - 1, next: hi + PAGE, last: this.head }[button.dataset.page];
        this.page(to).catch(report);
      });
    }
    $("#goto-form", this.view).addEventListener("submit", (event) => {
      event.preventDefault();
      const v = Math.max(1, Math.min(this.head, Number($("#goto", this.view).value) || 1));
      this.page(Math.min(this.head, v + Math.floor(PAGE / 2))).then(() => this.select(v)).catch(report);
    });
    for (const tab of this.view.querySelectorAll("[data-tab]")) {
      tab.addEventListener("click", () => this.showTab(tab.dataset.tab));
    }
    this.showTab(this.tab);
  }

  showTab(name) {
    this.tab = name;
    for (const tab of this.view.querySelectorAll("[data-tab]")) {
      tab.setAttribute("aria-selected", String(tab.dataset.tab === name));
    }
    $("#visible-pane", this.view).hidden = name !== "visible";
    $("#diff-pane", this.view).hidden = name !== "diff";
  }

  // The timeline window ending at version `hi` (PAGE versions), from the audit index.
  async page(hi) {
    hi = Math.max(Math.min(hi, this.head), Math.min(PAGE, this.head));
    const lo = Math.max(1, hi - PAGE + 1);
    const result = await api("/audit", { context_id: this.id, from_version: lo, to_version: hi, limit: PAGE });
    this.window = [lo, hi];
    $("#page-range", this.view).textContent = `v${fmtInt(lo)}–v${fmtInt(hi)} of ${fmtInt(this.head)}`;
    this.view.querySelector('[data-page="first"]').disabled = lo <= 1;
    this.view.querySelector('[data-page="prev"]').disabled = lo <= 1;
    this.view.querySelector('[data-page="next"]').disabled = hi >= this.head;
    this.view.querySelector('[data-page="last"]').disabled = hi >= this.head;
    const body = $("#timeline tbody", this.view);
    body.replaceChildren(...result.entries.map((e) => this.row(e)));
    this.mark();
  }

  row(e) {
    const from = el("button", { class: "diff-from-button", title: "diff from this version",
      text: "from", onclick: (event) => { event.stopPropagation(); this.setDiffFrom(e.version); } });
    const title = e.reverted ? `undone by the rollback at v${e.reverted_by}` : undefined;
    return el("tr", { "data-version": e.version, class: e.reverted ? "reverted" : "", title,
      onclick: () => this.select(e.version) },
    el("td", { class: "mono", text: e.version }),
    el("td", { class: `type-${e.type}`, text: e.type }),
    el("td", { text: e.actor }),
    el("td", { text: fmtTime(e.timestamp) }),
    el("td", { text: e.batch }),
    el("td", {}, from));
  }

  mark() {
    for (const tr of this.view.querySelectorAll("#timeline tbody tr")) {
      const v = Number(tr.dataset.version);
      tr.classList.toggle("selected", v === this.selected);
      tr.classList.toggle("diff-from", v === this.diffFrom);
    }
    this.view.querySelector("#timeline tr.selected")?.scrollIntoView({ block: "nearest" });
    this.cursor();
  }

  remember() {
    const query = new URLSearchParams({ v: this.selected });
    if (this.diffFrom) query.set("from", this.diffFrom);
    history.replaceState(null, "", `#/context/${this.id}?${query}`);
  }

  select(version) {
    this.selected = version;
    this.remember();
    this.mark();
    this.detail().catch(report);
  }

  setDiffFrom(version) {
    this.diffFrom = version;
    this.remember();
    this.mark();
    this.showTab("diff");
    this.detail().catch(report);
  }

  async detail() {
    await Promise.all([this.visible(), this.diff()]);
  }

  async visible() {
    const v = this.selected;
    const seen = await api(`/contexts/${this.id}`, { at_version: v });
    if (v !== this.selected) return; // a newer selection is on its way
    $("#visible-head", this.view).textContent =
      `At v${fmtInt(seen.version)}: ${fmtInt(seen.messages.length)} messages, ` +
      `${fmtInt(seen.tokens)} tokens in total` +
      (seen.batches.length ? ` · open batches: ${seen.batches.map((b) => b.batch).join(", ")}` : "");
    $("#messages", this.view).replaceChildren(...seen.messages.map((m) => message(m, {
      tokens: seen.token_counts[m.id], summary: m.id in seen.summaries,
    })));
  }

  async diff() {
    if (!this.diffFrom || this.diffFrom === this.selected) {
      $("#diff-head", this.view).textContent = this.diffFrom
        ? `Diff from v${this.diffFrom}: now select another version in the timeline.`
        : 'Mark an event with "from" in the timeline, then select another.';
      $("#diff-body", this.view).replaceChildren();
      return;
    }
    const [a, b] = [this.diffFrom, this.selected];
    const d = await api(`/contexts/${this.id}/diff`, { from_version: a, to_version: b });
    if (a !== this.diffFrom || b !== this.selected) return;
    const sign = d.tokens_delta > 0 ? "+" : "";
    $("#diff-head", this.view).textContent =
      `v${fmtInt(a)} → v${fmtInt(b)}: ${d.added.length} added, ${d.removed.length} removed, ` +
      `${d.changed.length} changed · tokens ${fmtInt(d.tokens_before)} → ${fmtInt(d.tokens_after)} ` +
      `(${sign}${fmtInt(d.tokens_delta)})`;
    const brief = (m, kind, label) => el("li", { class: `message diff-${kind}`, "data-id": m.id },
      el("header", {}, el("span", { class: "role", text: m.role }), el("span", { text: label }),
        el("span", { class: "mono", text: m.id }), el("span", { class: "tokens", text: `${m.tokens} tokens` })),
      el("pre", { text: m.preview }));
    $("#diff-body", this.view).replaceChildren(el("ol", { id: "diff-list" },
      d.added.map((m) => brief(m, "added", "added")),
      d.removed.map((m) => brief(m, "removed", "removed")),
      d.changed.map(([, after]) => brief(after, "changed", "changed"))));
  }

  async chart() {
    const series = await api(`/contexts/${this.id}/tokens`, { points: CHART_POINTS });
    this.series = series;
    drawChart($("#chart", this.view), series, (v) => {
      this.page(Math.min(this.head, v + Math.floor(PAGE / 2))).then(() => this.select(v)).catch(report);
    });
    this.cursor();
  }

  cursor() {
    const svg = $("#chart", this.view);
    if (!svg || !svg.scaleX) return;
    svg.querySelector(".cursor")?.remove();
    const x = svg.scaleX(this.selected);
    svg.append(svgEl("line", { class: "cursor", x1: x, x2: x, y1: 8, y2: 150 }));
  }
}

function message(m, { tokens, summary }) {
  return el("li", { class: `message${summary ? " summary" : ""}`, "data-id": m.id },
    el("header", {},
      el("span", { class: "role", text: m.role }),
      m.name ? el("span", { text: m.name }) : null,
      summary ? el("span", { text: "summary" }) : null,
      el("span", { class: "mono", text: m.id }),
      el("span", { class: "tokens", text: `${fmtInt(tokens ?? 0)} tokens` })),
    el("pre", { text: textOf(m) }));
}

// ---- the chart (SVG, no library) -------------------------------------------------------

function svgEl(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  return node;
}

function drawChart(svg, series, onPick) {
  const width = svg.clientWidth || 800;
  const height = 170;
  const [left, right, top, bottom] = [56, 10, 8, 20];
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.replaceChildren();
  const points = series.points;
  if (!points.length) return;
  const first = points[0].version;
  const last = Math.max(points[points.length - 1].version, first + 1);
  const most = Math.max(...points.map((p) => p.tokens), 1);
  const x = (v) => left + ((v - first) / (last - first)) * (width - left - right);
  const y = (t) => height - bottom - (t / most) * (height - top - bottom);
  svg.scaleX = x;
  svg.append(svgEl("line", { class: "axis", x1: left, x2: width - right, y1: height - bottom, y2: height - bottom }));
  svg.append(svgEl("line", { class: "axis", x1: left, x2: left, y1: top, y2: height - bottom }));
  const label = (text, attrs) => { const t = svgEl("text", attrs); t.textContent = text; svg.append(t); };
  label(fmtInt(most), { x: left - 4, y: top + 10, "text-anchor": "end" });
  label("0", { x: left - 4, y: height - bottom, "text-anchor": "end" });
  label(`v${fmtInt(first)}`, { x: left, y: height - 4 });
  label(`v${fmtInt(last)}`, { x: width - right, y: height - 4, "text-anchor": "end" });
  // A step line: the total holds until the next version changes it.
  let d = "";
  points.forEach((p, i) => {
    d += i === 0 ? `M${x(p.version)},${y(p.tokens)}` : `H${x(p.version)}V${y(p.tokens)}`;
  });
  const base = y(0);
  svg.append(svgEl("path", { class: "area", d: `${d}V${base}H${x(first)}Z` }));
  svg.append(svgEl("path", { class: "line", d, "data-points": points.length }));
  for (const m of series.marks) {
    const cls = m.reverted ? "mark-reverted" : `mark-${m.type}`;
    const line = svgEl("line", { class: `mark ${cls}`, x1: x(m.version), x2: x(m.version),
      y1: top, y2: height - bottom, "data-version": m.version, "data-type": m.type });
    const tip = svgEl("title", {});
    tip.textContent = `${m.type} at v${m.version}${m.reverted ? " (undone)" : ""}`;
    line.append(tip);
    svg.append(line);
  }
  svg.onclick = (event) => {
    const box = svg.getBoundingClientRect();
    const px = ((event.clientX - box.left) / box.width) * width;
    const v = Math.round(first + ((px - left) / (width - left - right)) * (last - first));
    onPick(Math.max(first, Math.min(last, v)));
  };
}

// ---- audit -----------------------------------------------------------------------------

async function showAudit(params) {
  const view = mount("audit-view");
  const form = $("#audit-form", view);
  const wanted = params.getAll("types");
  const box = $("fieldset", form);
  for (const t of TYPES) {
    box.append(el("label", {}, el("input", { type: "checkbox", name: "types", value: t,
      checked: wanted.includes(t) }), t));
  }
  for (const name of ["actor", "context_id"]) form.elements[name].value = params.get(name) || "";
  for (const name of ["since", "until"]) {
    const value = params.get(name);
    if (value) form.elements[name].value = toLocalInput(value);
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const name of ["actor", "context_id"]) {
      const value = form.elements[name].value.trim();
      if (value) query.set(name, value);
    }
    for (const name of ["since", "until"]) {
      const value = form.elements[name].value;
      if (value) query.set(name, new Date(value).toISOString());
    }
    for (const input of box.querySelectorAll("input:checked")) query.append("types", input.value);
    location.hash = `#/audit?${query}`;
  });
  const filters = {
    actor: params.get("actor"), context_id: params.get("context_id"),
    since: params.get("since"), until: params.get("until"), types: wanted,
  };
  const body = $("#audit tbody", view);
  const more = $("#audit-more", view);
  let after = 0;
  const load = async () => {
    const page = await api("/audit", { ...filters, after, limit: 100 });
    for (const e of page.entries) {
      body.append(el("tr", { class: e.reverted ? "reverted" : "", "data-position": e.position,
        onclick: () => { location.hash = `#/context/${e.context_id}?v=${e.version}`; } },
      el("td", { class: "mono", text: e.position }),
      el("td", { text: fmtTime(e.timestamp) }),
      el("td", { class: "mono", text: e.context_id.slice(0, 8) }),
      el("td", { class: "mono", text: e.version }),
      el("td", { class: `type-${e.type}`, text: e.type }),
      el("td", { text: e.actor }),
      el("td", { text: e.batch }),
      el("td", { text: e.message_ids.length })));
    }
    after = page.cursor;
    more.hidden = !page.more;
    $(".empty", view).hidden = body.children.length > 0;
  };
  more.addEventListener("click", () => load().catch(report));
  await load();
}

function toLocalInput(iso) {
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// ---- routing ---------------------------------------------------------------------------

function report(error) {
  notice(explain(error));
}

let routed = 0; // route() calls so far: a call that a newer one overtook reports nothing

async function route() {
  const call = ++routed;
  notice("");
  const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query);
  const parts = path.split("/").filter(Boolean);
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.classList.toggle("active", link.dataset.nav === (parts[0] === "audit" ? "audit" : "contexts"));
  }
  try {
    if (parts[0] === "context" && parts[1]) await new ContextPage(parts[1], params).open();
    else if (parts[0] === "audit") await showAudit(params);
    else await showContexts(params);
  } catch (error) {
    if (call === routed) report(error);
  }
}

$("#token").value = session.token;
$("#token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  session.token = $("#token").value.trim();
  sessionStorage.setItem(TOKEN_KEY, session.token);
  route();
});
window.addEventListener("hashchange", route);
route();
