// Building the page: elements from text (never from HTML), formats, notices.

export function el(tag, attrs = {}, ...children) {
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

export function svgEl(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  return node;
}

export const $ = (selector, root = document) => root.querySelector(selector);
const TIME = new Intl.DateTimeFormat(undefined, { dateStyle: "short", timeStyle: "medium", hour12: false });
export const fmtTime = (iso) => TIME.format(new Date(iso));
const CLOCK = new Intl.DateTimeFormat(undefined, { timeStyle: "medium", hour12: false });
export const fmtClock = (iso) => CLOCK.format(new Date(iso)); // the date is in the row's tooltip
export const fmtInt = (n) => Number(n).toLocaleString("en-US");
export const fmtLatency = (ms) => (ms === undefined || ms === null ? ""
  : ms < 10000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`);

export function notice(message) {
  const box = $("#notice");
  box.textContent = message || "";
  box.hidden = !message;
}

export function explain(error) {
  if (error.status === 401) return "The service needs a bearer token: enter yours above.";
  return error.message || String(error);
}

export function report(error) {
  notice(explain(error));
}

export function toast(message) {
  document.querySelector(".toast")?.remove(); // the newest says what happened last
  const box = el("div", { class: "toast", role: "status", text: message });
  document.body.append(box);
  setTimeout(() => box.remove(), 2000);
}

// Text to the clipboard; where the page may not write there, shown to copy by hand.
export async function copyText(text, what) {
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

export function mount(templateId) {
  // Each view renders into a container of its own: when the route moves on while a view
  // still waits for the service, what it renders lands in a container off the page.
  const view = document.createElement("div");
  view.append($(`#${templateId}`).content.cloneNode(true));
  $("#view").replaceChildren(view);
  window.scrollTo(0, 0); // a new view starts at its top
  return view;
}

// Bring a row into view inside its own scrolling box, never scrolling the page: the
// header and the context's title stay where they are.
export function scrollWithin(box, row) {
  if (!box || !row) return;
  const top = row.offsetTop - (box.querySelector("thead")?.offsetHeight ?? 0);
  const bottom = row.offsetTop + row.offsetHeight;
  if (top < box.scrollTop) box.scrollTop = top;
  else if (bottom > box.scrollTop + box.clientHeight) box.scrollTop = bottom - box.clientHeight;
}

// Bring an item to the top of its scrolling box, then the page only as far as it must to
// show it (a narrow window stacks the panels). Messages off screen are laid out when first
// shown (content-visibility), which moves the item: placed again each frame until it stays.
export function reveal(box, item, frames = 20) {
  const off = item.getBoundingClientRect().top - box.getBoundingClientRect().top;
  const before = box.scrollTop;
  if (Math.abs(off) >= 1) box.scrollTop += off;
  if (frames > 0 && box.scrollTop !== before) requestAnimationFrame(() => reveal(box, item, frames - 1));
  else item.scrollIntoView({ block: "nearest" });
}
