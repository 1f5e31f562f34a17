// ctxstore web view: reads the public HTTP API (/v1) with the caller's bearer token.
// Everything shown comes from the API as text (never as HTML), so message content cannot
// run script here. A 100,000-event context is read a page of versions at a time.
// One module per view (js/): no build step, the browser loads them as they are.

import { onAuthKnown, session, useToken } from "./js/api.js";
import { showAudit } from "./js/audit.js";
import { ContextPage } from "./js/context.js";
import { showContexts } from "./js/contexts.js";
import { $, mount, notice, report } from "./js/dom.js";
import { inSearch, wireSearch } from "./js/search.js";

let routed = 0; // route() calls so far: a call that a newer one overtook reports nothing
let current = null; // the context page shown (its live tail stops when it is left)

function notFound(path) {
  const view = mount("missing-view");
  $("#missing-path", view).textContent = path || "/";
}

async function route() {
  const call = ++routed;
  notice("");
  const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query);
  const parts = path.split("/").filter(Boolean);
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.classList.toggle("active", link.dataset.nav === (parts[0] === "audit" ? "audit" : parts.length ? "" : "contexts"));
  }
  current?.close();
  current = null;
  try {
    if (parts[0] === "context" && parts[1] && parts.length === 2) {
      current = new ContextPage(parts[1], params);
      await current.open();
    } else if (parts[0] === "audit" && parts.length === 1) await showAudit(params);
    else if (parts.length === 0) await showContexts(params);
    else notFound(path);
  } catch (error) {
    if (call === routed) report(error);
  }
}

// The token field says whether this service needs one, once it has answered.
onAuthKnown((needs) => {
  $("#token").placeholder = needs ? "this service needs a token" : "none needed here";
});

$("#token").value = session.token;
$("#token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  useToken($("#token").value.trim());
  route();
});
window.addEventListener("hashchange", route);
// A hit opens its context; the page shown again when it is the same one (no hashchange then).
wireSearch((hash) => {
  if (location.hash === hash) route();
  else location.hash = hash;
});
document.addEventListener("keydown", (event) => {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(event.target.tagName) || inSearch(event.target);
  if (current && !typing && !event.ctrlKey && !event.metaKey && !event.altKey) current.key(event);
});
route();
