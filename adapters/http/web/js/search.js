// Search across conversations: the header's box asks GET /v1/search and lists the hits
// under it, a page at a time; a hit opens its context at the message (at the version that
// wrote it, when the context no longer shows it).

import { api } from "./api.js";
import { $, el, fmtTime, notice, report } from "./dom.js";

const PAGE = 20; // hits read per page
const OPEN = "«"; // how the service marks the match in a snippet (domain/search/snippet.py)
const CLOSE = "»";

// The snippet as text nodes with its match in a <mark>, the markers dropped. The service
// marks one match; guillemets of the message's own stay as they are: the pair taken is the
// innermost around the first close, so "««quoted»»" marks «quoted» and shows its own pair.
export function marked(snippet) {
  const close = snippet.indexOf(CLOSE, snippet.indexOf(OPEN) + 1);
  const open = close < 0 ? -1 : snippet.lastIndexOf(OPEN, close);
  if (open < 0 || close < 0) return [snippet];
  return [snippet.slice(0, open), el("mark", { text: snippet.slice(open + 1, close) }),
    snippet.slice(close + 1)].filter((part) => part !== "");
}

// Where a hit opens: the context now, or at the version that wrote the text when the context
// shows that message no more; `msg` asks the page to bring it into view.
export function hitHash(hit) {
  const query = new URLSearchParams();
  if (!hit.visible) query.set("v", hit.version);
  query.set("msg", hit.message_id);
  return `#/context/${hit.context_id}?${query}`;
}

// The header's search box and its results; `go` opens a page of the view by its hash.
export function wireSearch(go) {
  const form = $("#find-form");
  const input = $("#find");
  const hidden = $("#find-hidden");
  const panel = $("#find-results");
  const list = $("#find-hits");
  const more = $("#find-more");
  const state = { ticket: 0, q: "", hidden: false, cursor: null, count: 0, failed: false };

  const close = () => {
    state.ticket++; // a search still out draws nothing
    panel.hidden = true;
    input.setAttribute("aria-expanded", "false");
  };

  const head = () => {
    const what = `“${state.q.trim()}”${state.hidden ? ", hidden messages too" : ""}`;
    $("#find-head").textContent = state.count
      ? `${state.count}${state.cursor ? "+" : ""} ${state.count === 1 ? "message" : "messages"} for ${what}`
      : `No message matches ${what}.`;
  };

  const item = (hit) => {
    const hash = hitHash(hit);
    const open = (event) => {
      if (event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
      event.preventDefault(); // the same hash twice still opens (hashchange would not fire)
      close();
      go(hash);
    };
    return el("li", { class: hit.visible ? "find-hit" : "find-hit hidden-hit", "data-context": hit.context_id,
      "data-message": hit.message_id },
    el("a", { href: hash, onclick: open, title: `${hit.context_id} · ${hit.message_id}` },
      el("span", { class: "hit-head" },
        el("span", { class: "hit-where", text: hit.context_name || hit.context_id.slice(0, 8) }),
        el("span", { class: "role", text: hit.role }),
        hit.visible ? null : el("span", { class: "hidden-mark", text: `hidden · v${hit.version}`,
          title: "not in the context now: opens at the version that wrote it" }),
        el("span", { class: "hit-at", text: fmtTime(hit.at) })),
      el("span", { class: "snippet" }, marked(hit.snippet))));
  };

  // A search (more: the next page of the one shown); only the newest one draws.
  const run = async (next = false) => {
    const ticket = ++state.ticket;
    const q = next ? state.q : input.value;
    const withHidden = next ? state.hidden : hidden.checked;
    let page;
    try {
      // An empty query is sent too (a space: an empty parameter is left out): the service
      // says what a query needs, as it says every other refusal.
      page = await api("/search", { q: q || " ", include_hidden: withHidden || undefined,
        limit: PAGE, cursor: next ? state.cursor : undefined });
    } catch (error) {
      if (ticket !== state.ticket) return;
      close();
      state.failed = true;
      report(error);
      return;
    }
    if (ticket !== state.ticket) return;
    if (state.failed) notice(""); // this search's own error is over; another view's stays
    state.failed = false;
    if (!next) {
      list.replaceChildren();
      state.count = 0;
    }
    Object.assign(state, { q, hidden: withHidden, cursor: page.cursor });
    state.count += page.hits.length;
    list.append(...page.hits.map(item));
    more.hidden = !page.cursor;
    head();
    panel.hidden = false;
    input.setAttribute("aria-expanded", "true");
  };

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    run();
  });
  hidden.addEventListener("change", () => { if (!panel.hidden) run(); });
  more.addEventListener("click", () => run(true));
  $("#find-close").addEventListener("click", () => { close(); input.focus(); });
  // Escape closes the results wherever the focus is (in the box it would clear the query).
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || panel.hidden) return;
    event.preventDefault();
    const inside = panel.contains(document.activeElement);
    close();
    if (inside) input.focus();
  });
  // A click elsewhere on the page puts the results away.
  document.addEventListener("click", (event) => {
    if (!panel.hidden && !panel.contains(event.target) && !form.contains(event.target)) close();
  });
}

// Whether a key pressed there belongs to the search (not to the page under it).
export function inSearch(target) {
  return Boolean(target.closest?.("#find-form, #find-results"));
}
