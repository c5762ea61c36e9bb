// The session's conversation as a chat: prompts and answers in order, each tool call
// collapsible with its result, a sub-agent's conversation inside the call that started
// it, the system prompt and the clients' added context collapsed. Model text is
// untrusted: it only ever becomes text nodes (h() never parses HTML). The API sends
// a page of it, each tool run's arguments and output clipped (`clipped` says so).

import { h, pretty, clip } from "./dom.js";

const LABELS = { system: "system prompt", context: "context", note: "" };

function folded(kind, text) {
  return h("details", { class: `chat-entry chat-${kind}` },
    h("summary", {}, h("span", { class: "chat-role" }, LABELS[kind]), " ", h("span", { class: "muted" }, clip(text, 120))),
    h("div", { class: "chat-text" }, text));
}

// A tool's outcome on its folded line: its mark, then what it printed, clipped.
function outcome(tool) {
  if (!tool.answered) return h("span", { class: "muted" }, "no result");
  const code = tool.exit_code == null ? "" : `[exit ${tool.exit_code}] `;
  return [h("span", { class: tool.is_error ? "bad" : "ok" }, "→ " + (tool.is_error ? `ERROR ${code}` : code)),
    h("span", { class: "mono" }, clip(pretty(tool.printed ?? ""), 80))];
}

function toolEntry(tool, show) {
  const args = tool.arguments == null ? "" : pretty(tool.arguments);
  return h("details", { class: "chat-entry chat-tool" + (tool.is_error ? " bad" : ""), dataset: { call: tool.call_id || "" } },
    h("summary", {}, h("span", { class: "chat-role" }, "tool"), " ",
      h("span", { class: "mono chat-tool-name" }, tool.name || "?"), " ",
      h("span", { class: "mono muted" }, clip(args, 60)), " ", outcome(tool)),
    h("div", { class: "chat-label" }, "arguments"), h("pre", { class: "code" }, args),
    tool.agent ? h("div", { class: "chat-agent" },
      h("div", { class: "chat-label" }, `sub-agent ${tool.agent.agent}`), thread(tool.agent, show)) : null,
    tool.answered ? [h("div", { class: "chat-label" }, tool.is_error ? "result (error)" : "result"),
      h("pre", { class: "code" }, pretty(tool.printed ?? ""))] : null,
    tool.clipped && tool.call_id ? h("button", { type: "button", class: "plain chat-whole",
      onclick: () => show.onTool(tool.call_id) }, "Clipped: show the tool run whole") : null);
}

function entry(item, show) {
  if (item.kind === "tool") return toolEntry(item, show);
  if (item.kind === "system" || item.kind === "context") return folded(item.kind, item.text);
  if (item.kind === "note") return h("div", { class: "chat-entry chat-note" }, item.text);
  return h("div", { class: `chat-entry chat-${item.kind}` },
    h("div", { class: "chat-role" }, item.kind === "item" ? "not shown" : item.kind),
    h("div", { class: "chat-text" }, item.text));
}

function thread(found, show) {
  return h("div", { class: "chat" }, found.entries.map((item) => entry(item, show)));
}

// `found` is a page of the conversation, its last entries; `show.more()` asks for more
// of them, `show.onTool(callId)` shows a clipped tool run whole.
export function renderChat(found, show) {
  if (!found.threads.length) return h("p", { class: "muted" }, "No conversation recorded.");
  const earlier = found.earlier == null ? null : h("p", { class: "chat-earlier" },
    h("span", { class: "muted" }, `The last ${found.entries} entries. `),
    h("button", { type: "button", class: "plain", onclick: () => show.more() }, "Show earlier entries"));
  return h("div", { class: "chat-threads" }, earlier, found.threads.map((one, index) => [
    index ? h("h3", {}, one.agent ? `Sub-agent ${one.agent}` : "Another conversation in this session") : null,
    thread(one, show)]));
}
