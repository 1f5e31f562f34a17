// ctxstore web view: reads the public HTTP API (/v1) with the caller's bearer token.
// Everything shown comes from the API as text (never as HTML), so message content cannot
// run script here. A 100,000-event context is read a page of versions at a time.
"use strict";

const API = "/v1";
const PAGE = 100; // timeline events per page
const CALLS_SHOWN = 100; // model calls listed at a time, newest first
const REDRAW = 100; // ms between redraws of a live page at most
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

function apiUrl(path, params = {}) {
  const url = new URL(API + path, location.origin);
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null || value === "") continue;
    if (Array.isArray(value)) value.forEach((v) => url.searchParams.append(key, v));
    else url.searchParams.set(key, value);
  }
  return url;
}

function authHeaders(accept) {
  const headers = { Accept: accept };
  if (session.token) headers.Authorization = `Bearer ${session.token}`;
  return headers;
}

async function failed(response) {
  const body = await response.json().catch(() => null);
  const said = body && (body.detail || body.title);
  return new ApiError(response.status, said || `${response.status} ${response.statusText}`);
}

async function api(path, params = {}, { method = "GET", body } = {}) {
  const headers = authHeaders("application/json");
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(apiUrl(path, params), {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!response.ok) throw await failed(response);
  return response.json();
}

// An attachment or an export, read with the caller's token (a plain link could not send it).
async function apiBlob(path) {
  const response = await fetch(apiUrl(path), { headers: authHeaders("*/*") });
  if (!response.ok) throw await failed(response);
  return response.blob();
}

// Text to the clipboard; where the page may not write there, shown to copy by hand.
async function copyText(text, what) {
  try {
    await navigator.clipboard.writeText(text);
    notice("");
    toast(`Copied ${what}.`);
  } catch {
    const box = el("textarea", { id: "copy-box", readonly: true, rows: 12 });
    box.value = text;
    $("#notice").replaceChildren(`Copy ${what} from here:`, box);
    $("#notice").hidden = false;
    box.select();
  }
}

function toast(message) {
  document.querySelector(".toast")?.remove(); // the newest says what happened last
  const box = el("div", { class: "toast", role: "status", text: message });
  document.body.append(box);
  setTimeout(() => box.remove(), 2000);
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
const TIME = new Intl.DateTimeFormat(undefined, { dateStyle: "short", timeStyle: "medium", hour12: false });
const fmtTime = (iso) => TIME.format(new Date(iso));
const CLOCK = new Intl.DateTimeFormat(undefined, { timeStyle: "medium", hour12: false });
const fmtClock = (iso) => CLOCK.format(new Date(iso)); // the date is in the row's tooltip
const fmtInt = (n) => Number(n).toLocaleString("en-US");
const fmtLatency = (ms) => (ms === undefined || ms === null ? ""
  : ms < 10000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`);

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

// ---- a message as people read it ------------------------------------------------------

const HOSTED = /^(web_search|file_search|code_interpreter|computer|image_generation|local_shell|mcp)_?/;

function pretty(args) {
  if (typeof args !== "string") return JSON.stringify(args ?? {}, null, 2);
  try { return JSON.stringify(JSON.parse(args), null, 2); } catch { return args; }
}

function thumbnail(ref) {
  // An attachment kept in the blob store: read with the token, shown small.
  const img = el("img", { class: "thumb", alt: "image" });
  const found = /^ctxstore-blob:sha256:([0-9a-f]{64})/.exec(ref || "");
  if (found) {
    apiBlob(`/blobs/${found[1]}`).then((blob) => { img.src = URL.createObjectURL(blob); })
      .catch(() => img.replaceWith(el("span", { class: "facts", text: "[image]" })));
    return img;
  }
  if (/^data:image\//.test(ref || "")) { img.src = ref; return img; }
  return el("span", { class: "facts", text: `[image ${ref ? String(ref).slice(0, 60) : ""}]` });
}

function imageRef(b) {
  return b.image_url?.url ?? b.image_url ?? b.source?.url ?? b.source?.data ?? b.url;
}

// The blocks of a native payload as nodes: thinking and reasoning collapsed, tool calls with
// their arguments pretty-printed, results beside them, images as thumbnails, hosted tools named.
function nativeNodes(message) {
  const item = message.native;
  const nodes = [];
  const text = (t) => nodes.push(el("pre", { text: t }));
  const folded = (label, t) => nodes.push(el("details", { class: "thinking" },
    el("summary", { text: label }), el("pre", { text: t })));
  const call = (name, args) => nodes.push(el("div", { class: "tool-call" },
    el("span", { class: "tool-name", text: `→ ${name}` }), el("pre", { class: "args", text: pretty(args) })));
  const result = (id, out, error) => nodes.push(el("div", { class: "tool-result" },
    el("span", { class: "tool-name", text: `← ${id}${error ? " (error)" : ""}` }),
    el("pre", { text: typeof out === "string" ? out : JSON.stringify(out, null, 2) })));
  const block = (b) => {
    switch (b.type) {
      case "text": case "input_text": case "output_text": return text(b.text);
      case "thinking": return folded("thinking", b.thinking);
      case "redacted_thinking": return folded("thinking (redacted)", "");
      case "tool_use": return call(b.name, b.input);
      case "server_tool_use": return call(`${b.name} (hosted)`, b.input);
      case "tool_result":
        return result(b.tool_use_id, typeof b.content === "string" ? b.content
          : (b.content || []).map((c) => c.text ?? `[${c.type}]`).join("\n"), b.is_error);
      case "image": case "input_image": return nodes.push(thumbnail(imageRef(b)));
      case "refusal": return text(`(refusal) ${b.refusal}`);
      default: return text(`[${b.type}]`);
    }
  };
  const kind = item.type ?? "message";
  if (message.format === "anthropic" || kind === "message") {
    if (typeof item.content === "string") text(item.content);
    else for (const b of item.content || []) block(b);
  } else if (kind === "reasoning") {
    folded("reasoning", (item.summary || []).map((x) => x.text).join("\n") ||
      (item.encrypted_content ? "(encrypted)" : ""));
  } else if (kind === "function_call" || kind === "custom_tool_call") {
    call(item.name, item.arguments ?? item.input ?? "");
  } else if (kind === "function_call_output" || kind === "custom_tool_call_output") {
    result(item.call_id, item.output);
  } else if (HOSTED.test(kind)) {
    nodes.push(el("div", { class: "tool-call hosted" }, el("span", { class: "tool-name",
      text: `hosted tool: ${kind}${item.status ? ` (${item.status})` : ""}` }),
    el("pre", { class: "args", text: pretty(item.action ?? item.arguments ?? item.queries ?? "") })));
  } else {
    text(`[${kind}]`);
  }
  return nodes;
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
    this.callNumber = Number(params.get("call")) || null;
    this.window = null; // [lo, hi] versions shown in the timeline
    this.rows = []; // the timeline rows loaded (appends of one reply collapsed into one)
    this.cursorAt = null; // the row j/k moved to (enter shows it)
    this.tab = this.callNumber ? "calls" : this.diffFrom ? "diff" : "visible";
    this.live = new AbortController(); // stops the live tail when the view is left
    this.refreshing = null;
    this.arrived = []; // events the live tail delivered, not drawn yet
    this.tickets = 0; // timeline reads started: only the newest one draws
  }

  async open() {
    performance.mark("ctxstore:open"); // the marks time the first screen (bench/bench_web.py)
    // The name is in the context's first event: one indexed read, not a search of them all.
    const [now, created] = await Promise.all([
      api(`/contexts/${this.id}`),
      api("/audit", { context_id: this.id, to_version: 1, limit: 1 }),
    ]);
    this.head = now.version;
    this.now = now;
    const name = created.entries[0]?.details?.name;
    $("#context-title", this.view).textContent = name || "(unnamed context)";
    this.facts();
    performance.mark("ctxstore:head");
    this.selected = Math.min(this.selected || this.head, this.head);
    this.wire();
    const hi = Math.min(this.head, Math.max(this.selected + Math.floor(PAGE / 2), PAGE));
    await Promise.all([this.page(hi), this.detail(), this.tab === "calls" ? this.calls() : null]);
    performance.mark("ctxstore:first-screen");
    this.chart().catch(report); // below the first screen: it need not hold it up
    this.follow().catch(() => this.liveState("○ not live"));
  }

  facts() {
    const now = this.now;
    $("#context-facts", this.view).textContent =
      `${now.context_id} · ${fmtInt(this.head)} events · now ${fmtInt(now.messages.length)} ` +
      `messages, ${fmtInt(now.tokens)} tokens (${now.encoding}${now.estimated ? ", estimated" : ""})`;
  }

  wire() {
    for (const button of this.view.querySelectorAll("[data-page]")) {
      button.addEventListener("click", () => {
        if (this.filtering) { // pages of matches: the cursors of those before are kept
          const f = this.filtering;
          const before = { first: [], prev: f.before.slice(0, -1), next: [...f.before, f.cursor] }[button.dataset.page];
          if (before) this.filter(before.at(-1) ?? 0, before).catch(report);
          return;
        }
        const [lo, hi] = this.window;
        const to = { first: PAGE, prev: lo - 1, next: hi + PAGE, last: this.head }[button.dataset.page];
        this.page(to).catch(report);
      });
    }
    $("#goto-form", this.view).addEventListener("submit", (event) => {
      event.preventDefault();
      const v = Math.max(1, Math.min(this.head, Number($("#goto", this.view).value) || 1));
      this.goTo(v);
    });
    for (const tab of this.view.querySelectorAll("[data-tab]")) {
      tab.addEventListener("click", () => this.showTab(tab.dataset.tab));
    }
    const types = $("#type-filter", this.view);
    for (const t of TYPES) types.append(el("option", { value: t, text: t }));
    types.addEventListener("change", () => this.filter().catch(report));
    $("#actor-filter", this.view).addEventListener("change", () => this.filter().catch(report));
    $("#copy-visible", this.view).addEventListener("click", () => this.copyVisible().catch(report));
    $("#copy-prompt", this.view).addEventListener("click", () => this.copyPrompt().catch(report));
    $("#copy-link", this.view).addEventListener("click", () => copyText(location.href, "the link"));
    $("#fork", this.view).addEventListener("click", () => this.fork().catch(report));
    $("#export", this.view).addEventListener("click", () => this.exportEvents().catch(report));
    $("#follow", this.view).addEventListener("change", (event) => {
      if (event.target.checked) this.goTo(this.head);
    });
    this.showTab(this.tab);
  }

  goTo(v) {
    this.page(Math.min(this.head, v + Math.floor(PAGE / 2))).then(() => this.select(v)).catch(report);
  }

  showTab(name) {
    this.tab = name;
    for (const tab of this.view.querySelectorAll("[data-tab]")) {
      tab.setAttribute("aria-selected", String(tab.dataset.tab === name));
    }
    $("#visible-pane", this.view).hidden = name !== "visible";
    $("#diff-pane", this.view).hidden = name !== "diff";
    $("#calls-pane", this.view).hidden = name !== "calls";
    if (name === "calls" && !this.callList) this.calls().catch(report);
  }

  // The timeline window ending at version `hi` (PAGE versions): the audit index says what
  // was undone, the stored events what each one did.
  async page(hi) {
    const ticket = ++this.tickets; // a newer page or filter overtakes this one
    hi = Math.max(Math.min(hi, this.head), Math.min(PAGE, this.head));
    const lo = Math.max(1, hi - PAGE + 1);
    const [audit, stored] = await Promise.all([
      api("/audit", { context_id: this.id, from_version: lo, to_version: hi, limit: PAGE }),
      api(`/contexts/${this.id}/stored-events`, { after: lo - 1, limit: hi - lo + 1, payload: false }),
    ]);
    performance.mark("ctxstore:page-fetched");
    if (ticket !== this.tickets) return;
    const recorded = new Map(stored.map((e) => [e.version, e]));
    this.window = [lo, hi];
    this.rows = collapseAppends(audit.entries.map((e) => ({ ...e, what: recorded.get(e.version)?.what })));
    this.render();
  }

  // Filtered by type or actor, the timeline lists the matching events of the whole history
  // (the audit index's query), PAGE at a time, each with what it did.
  async filter(after = 0, before = []) {
    const ticket = ++this.tickets; // a newer page or filter overtakes this one
    const type = $("#type-filter", this.view).value;
    const actor = $("#actor-filter", this.view).value.trim();
    if (!type && !actor) {
      this.filtering = null;
      this.render();
      return;
    }
    const found = await api("/audit", { context_id: this.id, types: type ? [type] : undefined,
      actor: actor || undefined, after, limit: PAGE });
    const versions = found.entries.map((e) => e.version);
    const stored = versions.length
      ? await api(`/contexts/${this.id}/stored-events`, { versions, payload: false }) : [];
    if (ticket !== this.tickets) return;
    const said = new Map(stored.map((e) => [e.version, e.what]));
    this.filtering = { type, actor, after, cursor: found.cursor, more: found.more, before,
      rows: found.entries.map((e) => ({ ...e, what: said.get(e.version) })) };
    this.render();
  }

  render() {
    const buttons = Object.fromEntries([...this.view.querySelectorAll("[data-page]")]
      .map((b) => [b.dataset.page, b]));
    let shown = this.rows;
    if (this.filtering) {
      const f = this.filtering;
      shown = f.rows;
      $("#page-range", this.view).textContent =
        `${fmtInt(f.rows.length)}${f.more ? "+" : ""} matching` + (f.after ? " (later ones)" : "");
      buttons.first.disabled = buttons.prev.disabled = f.after === 0;
      buttons.next.disabled = !f.more;
      buttons.last.disabled = true;
    } else {
      const [lo, hi] = this.window;
      $("#page-range", this.view).textContent = `v${fmtInt(lo)}–v${fmtInt(hi)} of ${fmtInt(this.head)}`;
      buttons.first.disabled = buttons.prev.disabled = lo <= 1;
      buttons.next.disabled = buttons.last.disabled = hi >= this.head;
    }
    $("#timeline tbody", this.view).replaceChildren(...shown.map((e) => this.row(e)));
    this.mark();
  }

  row(e) {
    const from = el("button", { class: "diff-from-button", title: "diff from this version",
      text: "from", onclick: (event) => { event.stopPropagation(); this.setDiffFrom(e.version); } });
    const title = e.reverted ? `undone by the rollback at v${e.reverted_by}` : undefined;
    return el("tr", { "data-version": e.version, "data-first": e.first ?? e.version,
      class: e.reverted ? "reverted" : "", title, onclick: () => this.select(e.version) },
    el("td", { class: "mono", text: e.first && e.first !== e.version ? `${e.first}–${e.version}` : e.version }),
    el("td", { class: `type-${e.type}`, text: e.type }),
    el("td", { class: "what", text: what(e), title: e.message_ids?.length > 1 ? e.message_ids.join("\n") : undefined }),
    el("td", { text: e.actor, title: e.actor }),
    el("td", { text: fmtClock(e.timestamp), title: fmtTime(e.timestamp) }),
    el("td", { text: e.batch }),
    el("td", {}, from));
  }

  mark() {
    for (const tr of this.view.querySelectorAll("#timeline tbody tr")) {
      const v = Number(tr.dataset.version);
      const first = Number(tr.dataset.first);
      tr.classList.toggle("selected", first <= this.selected && this.selected <= v);
      tr.classList.toggle("diff-from", v === this.diffFrom);
      tr.classList.toggle("cursor-row", v === this.cursorAt);
    }
    const at = this.view.querySelector("#timeline tr.cursor-row") || this.view.querySelector("#timeline tr.selected");
    at?.scrollIntoView({ block: "nearest" });
    this.cursor();
  }

  // j/k: the next or previous event (paging at the window's ends); enter: show it.
  key(event) {
    if (event.key === "Enter") {
      if (this.cursorAt) this.select(this.cursorAt);
      return;
    }
    const step = { j: 1, k: -1 }[event.key];
    if (!step) return;
    const rows = [...this.view.querySelectorAll("#timeline tbody tr")].map((tr) => Number(tr.dataset.version));
    if (!rows.length) return;
    const at = rows.indexOf(this.cursorAt ?? this.selected);
    const next = at < 0 ? 0 : at + step;
    if (next >= 0 && next < rows.length) {
      this.cursorAt = rows[next];
      this.mark();
      return;
    }
    if (this.filtering) return;
    const [lo, hi] = this.window;
    if (step > 0 && hi < this.head) {
      this.page(hi + PAGE).then(() => { this.cursorAt = hi + 1; this.mark(); }).catch(report);
    } else if (step < 0 && lo > 1) {
      this.page(lo - 1).then(() => { this.cursorAt = lo - 1; this.mark(); }).catch(report);
    }
  }

  remember() {
    const query = new URLSearchParams({ v: this.selected });
    if (this.diffFrom) query.set("from", this.diffFrom);
    if (this.callNumber) query.set("call", this.callNumber);
    history.replaceState(null, "", `#/context/${this.id}?${query}`);
  }

  select(version) {
    this.selected = version;
    this.cursorAt = version;
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
    // The head was just read with the page: shown as it is, not asked for again.
    const seen = this.now && this.now.version === v ? this.now : await api(`/contexts/${this.id}`, { at_version: v });
    if (v !== this.selected) return; // a newer selection is on its way
    $("#visible-head", this.view).textContent =
      `At v${fmtInt(seen.version)}: ${fmtInt(seen.messages.length)} messages, ` +
      `${fmtInt(seen.tokens)} tokens in total` +
      (seen.batches.length ? ` · open batches: ${seen.batches.map((b) => b.batch).join(", ")}` : "");
    const copy = (m) => this.copyMessages({ ids: [m.id], at_version: v }, `message ${m.id}`).catch(report);
    $("#messages", this.view).replaceChildren(...seen.messages.map((m) => message(m, {
      tokens: seen.token_counts[m.id], summary: m.id in seen.summaries, copy,
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
    $("#diff-body", this.view).replaceChildren(el("ol", { id: "diff-list" },
      d.added.map((m) => brief(m, "added", "added", `${m.tokens} tokens`)),
      d.removed.map((m) => brief(m, "removed", "removed", `${m.tokens} tokens`)),
      d.changed.map(([, after]) => brief(after, "changed", "changed", `${after.tokens} tokens`))));
  }

  // ---- model calls ---------------------------------------------------------------------

  // The calls, newest first, CALLS_SHOWN at a time (a long run's thousand calls would take
  // the browser longer to lay out than the store takes to list them).
  async calls() {
    const list = await api(`/contexts/${this.id}/calls`);
    this.callList = list;
    this.callsShown = Math.min(list.length, Math.max(CALLS_SHOWN, this.callsShown || 0,
      this.callNumber ? list.length - this.callNumber + 1 : 0));
    this.drawCalls();
    $("#calls-empty", this.view).hidden = list.length > 0;
    if (this.callNumber) await this.openCall(this.callNumber);
  }

  drawCalls() {
    const list = this.callList;
    const shown = list.slice(list.length - this.callsShown).reverse();
    const body = $("#calls tbody", this.view);
    const older = list.length - shown.length;
    const more = older > 0 ? el("tr", { class: "more-calls" }, el("td", { colspan: 8 },
      el("button", { id: "older-calls", text: `show ${Math.min(older, CALLS_SHOWN)} older of ${fmtInt(older)}`,
        onclick: () => { this.callsShown += CALLS_SHOWN; this.drawCalls(); } }))) : null;
    body.replaceChildren(...shown.map((c) => el("tr", { "data-call": c.number,
      onclick: () => this.openCall(c.number).catch(report) },
    el("td", { class: "mono", text: c.number }),
    el("td", { text: fmtTime(c.timestamp) }),
    el("td", { text: c.model }),
    el("td", { class: "mono", text: c.for_version }),
    el("td", { text: fmtInt(c.prompt_tokens) }),
    el("td", { text: fmtInt(c.completion_tokens) }),
    el("td", { text: fmtLatency(c.latency_ms) }),
    el("td", { text: c.cost === undefined || c.cost === null ? "" : `$${c.cost.toFixed(6)}` }))),
    ...(more ? [more] : []));
    this.markCall();
  }

  markCall() {
    for (const tr of this.view.querySelectorAll("#calls tbody tr[data-call]")) {
      tr.classList.toggle("selected", Number(tr.dataset.call) === this.callNumber);
    }
  }

  async openCall(number) {
    this.callNumber = number;
    this.remember();
    this.markCall();
    const [c, d] = await Promise.all([
      api(`/contexts/${this.id}/calls/${number}`),
      api(`/contexts/${this.id}/calls/${number}/diff`),
    ]);
    if (number !== this.callNumber) return;
    $("#call-detail", this.view).hidden = false;
    $("#call-head", this.view).textContent =
      `Call #${c.number}: ${c.model} at ${fmtTime(c.timestamp)} by ${c.actor}, made with v${fmtInt(c.for_version)} · ` +
      `${fmtInt(c.prompt_tokens)} tokens in (ctxstore counted ${fmtInt(c.counted_tokens)}), ` +
      `${fmtInt(c.completion_tokens)} out` + (c.latency_ms === undefined || c.latency_ms === null ? "" : ` in ${fmtLatency(c.latency_ms)}`) +
      (c.cost === undefined || c.cost === null ? "" : ` · $${c.cost.toFixed(6)}`) +
      (c.whole_context ? " · sent the whole visible context" : " · sent a built prompt");
    const since = d.previous ? `call #${d.previous}` : "nothing (the first call)";
    const delta = d.tokens_after - d.tokens_before;
    $("#call-diff-head", this.view).textContent =
      `Against ${since}: ${d.added.length} added, ${d.removed.length} removed, ${d.changed.length} changed, ` +
      `${d.unchanged} unchanged · tokens ${fmtInt(d.tokens_before)} → ${fmtInt(d.tokens_after)} ` +
      `(${delta > 0 ? "+" : ""}${fmtInt(delta)})`;
    $("#call-diff", this.view).replaceChildren(
      ...d.added.map((m) => brief(m, "added", "added")),
      ...d.removed.map((m) => brief(m, "removed", "removed")),
      ...d.changed.map((m) => brief(m, "changed", "changed")));
    const copy = (m) => copyText(JSON.stringify(m, null, 2), "the message");
    $("#call-prompt", this.view).replaceChildren(...(c.messages || []).map((m) => message(m, { copy })));
    $("#call-response", this.view).replaceChildren(...(c.response || []).map((m) => message(m, { copy })));
  }

  // ---- taking things out ---------------------------------------------------------------

  shape() {
    return $("#copy-shape", this.view).value;
  }

  async copyMessages(params, what) {
    const shaped = await api(`/contexts/${this.id}/shaped`, { shape: this.shape(), ...params });
    await copyText(JSON.stringify(shaped.payload, null, 2), `${what} (${shaped.shape})`);
  }

  copyVisible() {
    return this.copyMessages({ at_version: this.selected }, `the context at v${this.selected}`);
  }

  copyPrompt() {
    return this.copyMessages({ call: this.callNumber }, `the prompt of call #${this.callNumber}`);
  }

  async fork() {
    const made = await api(`/contexts/${this.id}/fork`, {}, { method: "POST", body: { at_version: this.selected } });
    location.hash = `#/context/${made.context_id}`;
  }

  async exportEvents() {
    const blob = await apiBlob(`/contexts/${this.id}/export`);
    const link = el("a", { href: URL.createObjectURL(blob), download: `context-${this.id}.jsonl` });
    document.body.append(link);
    link.click();
    link.remove();
  }

  // ---- live ----------------------------------------------------------------------------

  liveState(text) {
    const box = $("#live", this.view);
    if (box) box.textContent = text;
  }

  // The live tail (Server-Sent Events read with the token): each new event moves the head;
  // the page redraws at most every 250 ms, however fast they come.
  async follow() {
    const response = await fetch(apiUrl(`/contexts/${this.id}/events`, { after: this.head }),
      { headers: authHeaders("text/event-stream"), signal: this.live.signal });
    if (!response.ok) throw await failed(response);
    this.liveState("● live");
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = frame.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
        if (!data) continue;
        const e = JSON.parse(data);
        if (typeof e.version === "number" && e.version > this.head) {
          this.head = e.version;
          this.arrived.push(e);
          this.refreshSoon();
        }
      }
    }
    this.liveState("○ not live");
  }

  // New events are drawn at most every REDRAW ms, however fast they come; a redraw still
  // running when more arrive is followed by one more.
  refreshSoon() {
    if (this.refreshing) return;
    this.refreshing = setTimeout(async () => {
      try {
        await this.refresh();
      } catch (error) {
        report(error);
      } finally {
        this.refreshing = null;
        if (this.arrived.length) this.refreshSoon();
      }
    }, REDRAW);
  }

  // The events the tail delivered become rows at once (they carry what a row shows); a
  // rollback marks earlier rows undone, so then the page is read again from the index.
  async refresh() {
    const arrived = this.arrived.splice(0);
    const following = $("#follow", this.view).checked;
    const [lo, hi] = this.window;
    const atEnd = arrived.length > 0 && hi >= arrived[0].version - 1;
    const reread = atEnd ? arrived.some((e) => e.type === "batch_end") : following;
    const [now] = await Promise.all([
      api(`/contexts/${this.id}`),
      reread ? this.page(this.head) : null,
    ]);
    this.now = now;
    this.facts();
    const newest = this.rows.length ? this.rows[this.rows.length - 1].version : 0;
    if (atEnd && !reread && newest < this.head) {
      const fresh = arrived.filter((e) => e.version > newest).map((e) => ({ ...e, reverted: false }));
      const top = this.head;
      const bottom = Math.max(lo, top - PAGE + 1);
      this.rows = collapseAppends(this.rows.concat(fresh)).filter((e) => e.version >= bottom);
      this.window = [bottom, top];
    }
    if (this.filtering) await this.filter(this.filtering.after, this.filtering.before);
    else this.render();
    if (following) this.select(this.head);
    if (this.tab === "calls" && arrived.some((e) => e.type === "usage")) await this.calls();
  }

  close() {
    this.live.abort();
    clearTimeout(this.refreshing);
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

// A message as a diff lists it (its preview).
function brief(m, kind, label, extra) {
  return el("li", { class: `message diff-${kind}`, "data-id": m.id },
    el("header", {}, el("span", { class: "role", text: m.role }), el("span", { text: label }),
      el("span", { class: "mono", text: m.id }), extra ? el("span", { class: "tokens", text: extra }) : null),
    el("pre", { text: m.preview }));
}

// The deltas of one streamed reply in a row of their own: consecutive appends to the same
// message become one row (`first`..`version`).
function collapseAppends(entries) {
  const rows = [];
  for (const e of entries) {
    const last = rows[rows.length - 1];
    if (e.type === "append" && last && last.type === "append" &&
        last.message_ids[0] === e.message_ids[0] && last.reverted === e.reverted) {
      rows[rows.length - 1] = { ...e, first: last.first ?? last.version,
        details: { ...e.details, deltas: (last.details.deltas || 0) + (e.details.deltas || 0),
          chars: (last.details.chars || 0) + (e.details.chars || 0) } };
    } else {
      rows.push(e);
    }
  }
  return rows;
}

// What an event did, in a line: the store says it (`what`, the same line `ctxstore tail`
// prints); a streamed reply's deltas collapsed into one row are summed here.
function what(e) {
  const d = e.details || {};
  if (e.type === "append" && e.first && e.first !== e.version) {
    return `streamed ${fmtInt(d.chars ?? 0)} chars in ${fmtInt(d.deltas ?? 0)} deltas ` +
      `(${e.version - e.first + 1} events) into ${(e.message_ids || [])[0]}`;
  }
  return e.what || (e.message_ids || []).join(", ");
}

function message(m, { tokens, summary, copy } = {}) {
  const images = m.native ? [] : (Array.isArray(m.content) ? m.content : [])
    .filter((p) => p.type === "image_url" || p.type === "input_image").map((p) => thumbnail(imageRef(p)));
  return el("li", { class: `message${summary ? " summary" : ""}${m.metadata?.ctxstore_incomplete ? " streaming" : ""}`,
    "data-id": m.id },
  el("header", {},
    el("span", { class: "role", text: m.role }),
    m.name ? el("span", { text: m.name }) : null,
    summary ? el("span", { text: "summary" }) : null,
    m.format ? el("span", { class: "shape", text: m.format }) : null,
    el("span", { class: "mono", text: m.id }),
    tokens === undefined ? null : el("span", { class: "tokens", text: `${fmtInt(tokens ?? 0)} tokens` }),
    copy ? el("button", { class: "copy-message", title: "copy this message as JSON", text: "copy",
      onclick: (event) => { event.stopPropagation(); copy(m); } }) : null),
  m.native ? el("div", { class: "native" }, nativeNodes(m)) : el("pre", { text: textOf(m) }),
  images.length ? el("div", { class: "thumbs" }, images) : null);
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
let current = null; // the context page shown (its live tail stops when it is left)

async function route() {
  const call = ++routed;
  notice("");
  const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query);
  const parts = path.split("/").filter(Boolean);
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.classList.toggle("active", link.dataset.nav === (parts[0] === "audit" ? "audit" : "contexts"));
  }
  current?.close();
  current = null;
  try {
    if (parts[0] === "context" && parts[1]) {
      current = new ContextPage(parts[1], params);
      await current.open();
    } else if (parts[0] === "audit") await showAudit(params);
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
document.addEventListener("keydown", (event) => {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(event.target.tagName);
  if (current && !typing && !event.ctrlKey && !event.metaKey && !event.altKey) current.key(event);
});
route();
