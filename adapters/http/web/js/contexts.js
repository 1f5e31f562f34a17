// The contexts list: each context's name, id, version, visible messages and tokens, last
// change, creation and creator; sorted by any column; searched by name or id on the service.

import { api } from "./api.js";
import { $, el, fmtInt, fmtTime, mount } from "./dom.js";

const PAGE = 100; // contexts read per page (each with its head)

const COLUMNS = [
  { key: "name", label: "Name", value: (c) => (c.name || "").toLowerCase(), text: (c) => c.name || "(unnamed)" },
  { key: "context_id", label: "Context id", value: (c) => c.context_id, text: (c) => c.context_id, cls: "mono" },
  { key: "version", label: "Version", value: (c) => c.version, text: (c) => fmtInt(c.version), cls: "num" },
  { key: "messages", label: "Messages", value: (c) => c.messages, text: (c) => fmtInt(c.messages), cls: "num" },
  { key: "tokens", label: "Tokens", value: (c) => c.tokens, text: (c) => fmtInt(c.tokens), cls: "num" },
  { key: "changed_at", label: "Last change", value: (c) => c.changed_at, text: (c) => fmtTime(c.changed_at) },
  { key: "created_at", label: "Created", value: (c) => c.created_at, text: (c) => fmtTime(c.created_at) },
  { key: "created_by", label: "By", value: (c) => c.created_by, text: (c) => c.created_by },
];

export async function showContexts(params) {
  const view = mount("contexts-view");
  const search = params.get("search") || "";
  const state = { rows: [], sort: params.get("sort") || "created_at", descending: params.get("order") !== "asc" };
  $("#search", view).value = search;
  $("#search-form", view).addEventListener("submit", (event) => {
    event.preventDefault();
    const q = $("#search", view).value.trim();
    location.hash = q ? `#/?search=${encodeURIComponent(q)}` : "#/";
  });
  const head = $("#contexts thead tr", view);
  head.replaceChildren(...COLUMNS.map((col) => el("th", { "data-sort": col.key, class: col.cls,
    "aria-sort": "none", title: `sort by ${col.label.toLowerCase()}` },
  el("button", { type: "button", class: "sort", text: col.label, onclick: () => {
    state.descending = state.sort === col.key ? !state.descending : col.key !== "name";
    state.sort = col.key;
    draw(view, state);
  } }))));
  const more = $("#contexts-more", view);
  const load = async () => {
    const after = state.rows.length ? state.rows[state.rows.length - 1].context_id : undefined;
    const page = await api("/contexts/overview", { search, limit: PAGE, after });
    state.rows.push(...page);
    more.hidden = page.length < PAGE;
    draw(view, state);
  };
  more.addEventListener("click", () => load());
  await load();
}

function draw(view, state) {
  const col = COLUMNS.find((c) => c.key === state.sort) ?? COLUMNS[6];
  const sign = state.descending ? -1 : 1;
  const rows = state.rows.slice().sort((a, b) => {
    const [x, y] = [col.value(a), col.value(b)];
    return x < y ? -sign : x > y ? sign : 0;
  });
  for (const th of view.querySelectorAll("#contexts th")) {
    const on = th.dataset.sort === col.key;
    th.setAttribute("aria-sort", on ? (state.descending ? "descending" : "ascending") : "none");
  }
  $("#contexts tbody", view).replaceChildren(...rows.map((c) => el("tr", { "data-context": c.context_id,
    onclick: () => { location.hash = `#/context/${c.context_id}`; } },
  COLUMNS.map((k) => el("td", { class: k.cls, text: k.text(c) })))));
  $(".empty", view).hidden = state.rows.length > 0;
}
