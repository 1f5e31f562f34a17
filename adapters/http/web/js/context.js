// One context: its head, the timeline of its events (a page of versions at a time, from
// the audit index), the visible context at a version, a diff between two, its model
// calls, the token chart, and the live tail that keeps it all current.

import { api, apiBlob, apiUrl, authHeaders, failed } from "./api.js";
import { CallsPane } from "./calls.js";
import { drawChart, drawCursor } from "./chart.js";
import { $, copyText, el, fmtClock, fmtInt, fmtTime, mount, notice, report, reveal, scrollWithin } from "./dom.js";
import { TYPES } from "./event_types.js";
import { brief, message } from "./messages.js";

const PAGE = 100; // timeline events per page
const REDRAW = 100; // ms between redraws of a live page at most
const CHART_POINTS = 600;
const CHART_EVERY = 2000; // ms between redraws of the token chart while events arrive

export class ContextPage {
  constructor(id, params) {
    this.id = id;
    this.view = mount("context-view");
    this.head = 0;
    this.selected = Number(params.get("v")) || null;
    this.diffFrom = Number(params.get("from")) || null;
    this.callNumber = Number(params.get("call")) || null;
    this.focus = params.get("msg") || null; // the message a search hit opened the page at
    this.focusShown = false; // brought into view once: later versions only mark it
    this.window = null; // [lo, hi] versions shown in the timeline
    this.rows = []; // the timeline rows loaded (appends of one reply collapsed into one)
    this.cursorAt = null; // the row j/k moved to (enter shows it)
    this.tab = this.callNumber ? "calls" : this.diffFrom ? "diff" : "visible";
    this.live = new AbortController(); // stops the live tail when the view is left
    this.refreshing = null;
    this.arrived = []; // events the live tail delivered, not drawn yet
    this.tickets = 0; // timeline reads started: only the newest one draws
    this.calls = new CallsPane(this);
    this.chartAt = 0; // when the chart was last read (ms)
  }

  async open() {
    performance.mark("ctxstore:open"); // the marks time the first screen (bench/bench_web.py)
    // The tabs answer at once: a tab chosen while the page still loads is the one it shows
    // (its pane loads when chosen, or with the page when chosen before).
    for (const tab of this.view.querySelectorAll("[data-tab]")) {
      tab.addEventListener("click", () => this.showTab(tab.dataset.tab));
    }
    let now, created;
    try {
      // The name is in the context's first event: one indexed read, not a search of them all.
      [now, created] = await Promise.all([
        api(`/contexts/${this.id}`),
        api("/audit", { context_id: this.id, to_version: 1, limit: 1 }),
      ]);
    } catch (error) {
      this.unavailable(error);
      throw error;
    }
    this.head = now.version;
    this.now = now;
    const name = created.entries[0]?.details?.name;
    $("#context-title", this.view).textContent = name || "(unnamed context)";
    this.facts();
    performance.mark("ctxstore:head");
    this.selected = Math.min(this.selected || this.head, this.head);
    this.wire();
    const hi = Math.min(this.head, Math.max(this.selected + Math.floor(PAGE / 2), PAGE));
    await Promise.all([this.page(hi), this.detail(), this.tab === "calls" ? this.calls.load() : null]);
    performance.mark("ctxstore:first-screen");
    this.chart().catch(report); // below the first screen: it need not hold it up
    this.liveState("○ connecting");
    this.follow().catch(() => this.liveState("○ not live"));
  }

  // The context cannot be shown (no such context for this caller, a service that failed):
  // the page says so, and offers nothing to do with it.
  unavailable(error) {
    $("#context-title", this.view).textContent =
      error.status === 404 ? "No such context" : "This context cannot be shown";
    $("#context-facts", this.view).textContent = this.id;
    this.liveState("○ not live");
    for (const part of this.view.querySelectorAll("#chart-box, .split")) part.hidden = true;
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
    for (const button of this.view.querySelectorAll("#context-head .actions button")) button.disabled = false;
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
    if (name === "calls" && !this.calls.list) this.calls.load().catch(report);
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
    scrollWithin($("#timeline-scroll", this.view), at);
    drawCursor($("#chart", this.view), this.selected);
  }

  // j/k: the next or previous event (paging at the window's ends); enter: show it.
  key(event) {
    if (event.key === "Enter") {
      if (this.cursorAt) this.select(this.cursorAt);
      return;
    }
    const step = { j: 1, k: -1 }[event.key];
    if (!step || !this.window) return;
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
    if (this.focus) query.set("msg", this.focus);
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
    this.spotlight(v);
  }

  // The message a search hit names, marked wherever it is shown; brought into view the first
  // time (the page opened for it), and said to be missing when it is not there then.
  spotlight(v) {
    if (!this.focus) return;
    const shown = this.view.querySelector(`#messages > li[data-id="${CSS.escape(this.focus)}"]`);
    shown?.classList.add("hit");
    if (this.focusShown) return;
    this.focusShown = true;
    if (!shown) {
      notice(`Message ${this.focus} is not in this context at v${fmtInt(v)}.`);
      return;
    }
    reveal($("#messages", this.view), shown);
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

  // The live tail (Server-Sent Events read with the token): each new event moves the head.
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
    if (this.tab === "calls" && arrived.some((e) => e.type === "usage")) await this.calls.load();
    this.chartSoon();
  }

  close() {
    this.live.abort();
    clearTimeout(this.refreshing);
    clearTimeout(this.charting);
  }

  // The chart follows the live head: read again (the store folds only the new events) at
  // most every CHART_EVERY ms while events arrive.
  chartSoon() {
    if (this.charting || !this.series) return;
    const wait = Math.max(0, this.chartAt + CHART_EVERY - Date.now());
    this.charting = setTimeout(() => {
      this.charting = null;
      this.chart().catch(report);
    }, wait);
  }

  async chart() {
    this.chartAt = Date.now();
    const series = await api(`/contexts/${this.id}/tokens`, { points: CHART_POINTS });
    this.series = series;
    drawChart($("#chart", this.view), series, (v) => this.goTo(v));
    drawCursor($("#chart", this.view), this.selected);
  }
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
