// A context's recorded model calls: the list, newest first, and one call with the prompt
// it sent, its response, and how its prompt differs from the call before.

import { api } from "./api.js";
import { $, copyText, el, fmtClock, fmtInt, fmtLatency, fmtTime, report } from "./dom.js";
import { brief, message } from "./messages.js";

const CALLS_SHOWN = 100; // listed at a time: a long run's thousand calls would take longer to lay out

const cost = (c) => (c === undefined || c === null ? "" : `$${c.toFixed(6)}`);

export class CallsPane {
  constructor(page) {
    this.page = page; // the context page: its id, its view, the chosen call (page.callNumber)
    this.list = null;
    this.shown = 0;
  }

  get view() { return this.page.view; }

  async load() {
    const page = this.page;
    const list = await api(`/contexts/${page.id}/calls`);
    this.list = list;
    this.shown = Math.min(list.length, Math.max(CALLS_SHOWN, this.shown,
      page.callNumber ? list.length - page.callNumber + 1 : 0));
    this.draw();
    $("#calls-empty", this.view).hidden = list.length > 0;
    if (page.callNumber) await this.open(page.callNumber);
  }

  draw() {
    const list = this.list;
    const shown = list.slice(list.length - this.shown).reverse();
    const older = list.length - shown.length;
    const more = older > 0 ? el("tr", { class: "more-calls" }, el("td", { colspan: 8 },
      el("button", { id: "older-calls", text: `show ${Math.min(older, CALLS_SHOWN)} older of ${fmtInt(older)}`,
        onclick: () => { this.shown += CALLS_SHOWN; this.draw(); } }))) : null;
    $("#calls tbody", this.view).replaceChildren(...shown.map((c) => el("tr", { "data-call": c.number,
      onclick: () => this.open(c.number).catch(report) },
    el("td", { class: "mono", text: c.number }),
    el("td", { text: fmtClock(c.timestamp), title: fmtTime(c.timestamp) }),
    el("td", { text: c.model + (c.failed ? " · failed" : ""), title: captured(c) || c.model }),
    el("td", { class: "mono", text: c.for_version }),
    el("td", { class: "num", text: fmtInt(c.prompt_tokens) }),
    el("td", { class: "num", text: fmtInt(c.completion_tokens) }),
    el("td", { class: "num", text: fmtLatency(c.latency_ms) }),
    el("td", { class: "num", text: cost(c.cost) }))),
    ...(more ? [more] : []));
    this.mark();
  }

  mark() {
    for (const tr of this.view.querySelectorAll("#calls tbody tr[data-call]")) {
      tr.classList.toggle("selected", Number(tr.dataset.call) === this.page.callNumber);
    }
  }

  async open(number) {
    const page = this.page;
    page.callNumber = number;
    page.remember();
    this.mark();
    const [c, d] = await Promise.all([
      api(`/contexts/${page.id}/calls/${number}`),
      api(`/contexts/${page.id}/calls/${number}/diff`),
    ]);
    if (number !== page.callNumber) return;
    $("#call-detail", this.view).hidden = false;
    $("#call-head", this.view).textContent =
      `Call #${c.number}: ${c.model} at ${fmtTime(c.timestamp)} by ${c.actor}, made with v${fmtInt(c.for_version)} · ` +
      `${fmtInt(c.prompt_tokens)} tokens in (ctxstore counted ${fmtInt(c.counted_tokens)}), ` +
      `${fmtInt(c.completion_tokens)} out` + (c.latency_ms === undefined || c.latency_ms === null ? "" : ` in ${fmtLatency(c.latency_ms)}`) +
      (c.cost === undefined || c.cost === null ? "" : ` · ${cost(c.cost)}`) +
      (c.source ? ` · ${captured(c)}` :
        c.whole_context ? " · sent the whole visible context" : " · sent a built prompt");
    $("#call-request", this.view).hidden = !c.request;
    $("#call-request-body", this.view).textContent = c.request ? JSON.stringify(c.request, null, 2) : "";
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
}

// How a captured call was recorded: by what, streamed, failed with what.
function captured(c) {
  if (!c.source) return "";
  const how = c.reconstructed ? `reconstructed from the transcript (${c.source}): no system prompt or tools`
    : `captured by ${c.source}${c.api ? ` (${c.api})` : ""}${c.streamed ? ", streamed" : ""}`;
  return c.failed ? `${how}; FAILED: ${c.error || ""}` : how;
}
