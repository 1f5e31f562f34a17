// A message as people read it: native shapes' blocks named, thinking and reasoning folded,
// tool calls with their arguments, long tool outputs collapsed, images as thumbnails.

import { apiBlob } from "./api.js";
import { el, fmtInt } from "./dom.js";

const HOSTED = /^(web_search|file_search|code_interpreter|computer|image_generation|local_shell|mcp)_?/;
const LONG_CHARS = 600; // a tool's output longer than this, or than LONG_LINES, is collapsed
const LONG_LINES = 10;

function pretty(args) {
  if (typeof args !== "string") return JSON.stringify(args ?? {}, null, 2);
  try { return JSON.stringify(JSON.parse(args), null, 2); } catch { return args; }
}

// A tool's output: in full when short; else its opening lines and a button for the rest.
export function output(text, cls) {
  const lines = text.split("\n");
  if (text.length <= LONG_CHARS && lines.length <= LONG_LINES) return el("pre", { class: cls, text });
  const opening = lines.slice(0, LONG_LINES).join("\n").slice(0, LONG_CHARS);
  const pre = el("pre", { class: `${cls ?? ""} collapsed`.trim(), text: `${opening}…` });
  const more = el("button", { class: "expand", type: "button",
    text: `show all ${fmtInt(text.length)} characters (${fmtInt(lines.length)} lines)` });
  more.addEventListener("click", (event) => {
    event.stopPropagation();
    const open = pre.classList.toggle("collapsed");
    pre.textContent = open ? `${opening}…` : text;
    more.textContent = open ? `show all ${fmtInt(text.length)} characters (${fmtInt(lines.length)} lines)` : "show less";
  });
  return el("div", { class: "long-output" }, pre, more);
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

// The blocks of a native payload (a Responses item, an Anthropic message) as nodes.
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
    output(typeof out === "string" ? out : JSON.stringify(out, null, 2))));
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

// A chat message's text: its content, refusal, audio and tool calls, in reading order.
function textOf(message) {
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

export function message(m, { tokens, summary, copy } = {}) {
  const images = m.native ? [] : (Array.isArray(m.content) ? m.content : [])
    .filter((p) => p.type === "image_url" || p.type === "input_image").map((p) => thumbnail(imageRef(p)));
  const body = m.native ? el("div", { class: "native" }, nativeNodes(m))
    : m.role === "tool" || m.role === "function" ? output(textOf(m)) : el("pre", { text: textOf(m) });
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
  body,
  images.length ? el("div", { class: "thumbs" }, images) : null);
}

// A message as a diff lists it (its preview).
export function brief(m, kind, label, extra) {
  return el("li", { class: `message diff-${kind}`, "data-id": m.id },
    el("header", {}, el("span", { class: "role", text: m.role }), el("span", { text: label }),
      el("span", { class: "mono", text: m.id }), extra ? el("span", { class: "tokens", text: extra }) : null),
    el("pre", { text: m.preview }));
}
