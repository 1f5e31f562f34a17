// The audit across the caller's contexts, with the audit API's filters.

import { api } from "./api.js";
import { $, el, fmtTime, mount, report } from "./dom.js";
import { TYPES } from "./event_types.js";

export async function showAudit(params) {
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
