// The detail panel: one call (what changed, request, answer, stream, usage,
// the exact upstream body when translated) or one tool run.

import { h, code, section, fmtInt, fmtMoney, fmtMs, fmtClock } from "./dom.js";

function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.filter(([, value]) => value !== null && value !== undefined && value !== "")
    .map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]));
}

function messageView(message) {
  const role = message.role || message.type || "item";
  const content = typeof message.content === "string" ? message.content : null;
  const rest = { ...message };
  delete rest.role;
  if (content !== null) delete rest.content;
  return h("div", { class: `message role-${String(role).replace(/[^a-z_]/gi, "")}` },
    h("div", { class: "role" }, role),
    content !== null ? h("div", { class: "text" }, content) : null,
    Object.keys(rest).length ? code(rest) : null);
}

function changes(found) {
  const { kept, new: added, system_changed: systemChanged, first_call: first } = found;
  const intro = first
    ? "The session's first call: every message is new."
    : `${kept} earlier message${kept === 1 ? "" : "s"} resent unchanged; ${added.length} new:`;
  return section("What changed since the previous call", true,
    h("p", { class: "muted" }, intro, systemChanged ? " The system prompt changed." : ""),
    h("div", { class: "messages" }, added.map(messageView)));
}

function attemptLine(event) {
  if (event.type === "failover") {
    return h("li", { class: "failover" }, `◆ failover ${event.from_provider}:${event.from_model} → ${event.to_provider}:${event.to_model}`,
      h("span", { class: "muted" }, ` (${event.reason})`));
  }
  if (event.type === "llm.request") {
    const note = event.sent === false ? " · not sent" : "";
    const via = event.translated_from ? ` · translated from ${event.translated_from}` : "";
    return h("li", {}, `${fmtClock(event.ts)} request → ${event.provider} ${event.model || ""} (attempt ${event.attempt})${via}${note}`);
  }
  if (event.type === "llm.response") {
    const bad = event.outcome !== "ok";
    return h("li", { class: bad ? "bad" : null }, `${fmtClock(event.ts)} answer ${event.status ?? "–"} ${event.outcome}`,
      ` · ${fmtMs(event.latency_ms)}`, event.error ? h("span", { class: "muted" }, ` (${event.error})`) : null);
  }
  if (event.type === "error") return h("li", { class: "bad" }, `✕ ${event.reason}`);
  return h("li", {}, `${event.type} ${event.name || ""}`);
}

function streamTable(events) {
  return h("table", { class: "stream" }, h("thead", {}, h("tr", {}, h("th", {}, "t"), h("th", {}, "event"))),
    h("tbody", {}, events.map((entry) => h("tr", {}, h("td", { class: "num nowrap" }, fmtMs(entry.t_ms)),
      h("td", {}, h("pre", { class: "code tight" }, entry.raw ?? `(base64) ${entry.raw_b64}`))))));
}

export function callDetail(found, call, number, tools, onTool) {
  const events = found.events;
  const requests = events.filter((e) => e.type === "llm.request");
  const answers = events.filter((e) => e.type === "llm.response");
  const original = requests[0] || {};
  const answer = answers[answers.length - 1];
  const translated = requests.filter((e) => e.translated_from);
  const usage = answer && answer.usage;
  const asked = tools.filter((tool) => tool.asked_in === call.exchange);
  return h("div", { class: "detail", dataset: { exchange: call.exchange } },
    h("h2", {}, `Call #${number}`, h("span", { class: "muted" }, ` ${call.api} · ${call.exchange}`)),
    facts([
      ["model", call.response_model && call.response_model !== call.request_model
        ? `${call.request_model} → ${call.response_model}` : call.request_model],
      ["status", `${call.status ?? "–"} ${call.outcome ?? ""}`],
      ["took", call.ended_at ? fmtMs(new Date(call.ended_at) - new Date(call.started_at)) +
        (call.attempts > 1 ? ` over ${call.attempts} attempts` : "") : "no answer yet"],
      ["latency", `${fmtMs(call.latency_ms)} (first byte ${fmtMs(call.ttfb_ms)})`],
      ["tokens", usage ? `${fmtInt(usage.input_tokens)} in (${fmtInt(usage.cached_tokens || 0)} cached) → ${fmtInt(usage.output_tokens)} out` : null],
      ["cost", fmtMoney(call.cost_usd)],
      ["finish", call.finish_reason],
      ["stream", call.stream ? "yes" : "no"],
    ]),
    h("ol", { class: "attempts" }, events.filter((e) => !e.type.startsWith("tool.")).map(attemptLine)),
    changes(found.changes),
    section("Request, as the client sent it", false, code(original.body ?? original.body_raw ?? null)),
    translated.map((event) => section(`Sent upstream to ${event.provider} (translated from ${event.translated_from})`, false,
      code(event.body), h("p", { class: "muted" }, "Exact bytes sent:"), h("pre", { class: "code" }, event.upstream_body))),
    answer ? section(`Answer (${answer.provider})`, true, code(answer.body ?? answer.body_raw ?? null)) : null,
    answer && answer.sse ? section(`Streamed events (${answer.sse.length})`, false, streamTable(answer.sse)) : null,
    usage ? section("Usage and cost", false, code({ usage, cost_usd: answer.cost_usd })) : null,
    asked.length ? section(`Tools it asked for (${asked.length})`, true,
      h("ul", { class: "links" }, asked.map((tool) => h("li", {}, h("a", { href: "#", onclick: (event) => {
        event.preventDefault();
        onTool(tool.call_id);
      } }, tool.tool_name), tool.is_error ? h("span", { class: "bad" }, " error") : null)))) : null,
    section("Headers", false, code({ request: original.headers, answer: answer && answer.headers })));
}

export function toolDetail(tool) {
  return h("div", { class: "detail", dataset: { call: tool.call_id } },
    h("h2", {}, `Tool ${tool.tool_name}`, h("span", { class: "muted" }, ` ${tool.call_id}`)),
    facts([
      ["outcome", tool.answered_at ? (tool.is_error ? "error" : "ok") : "no result (yet)"],
      ["duration", fmtMs(tool.duration_ms)],
      ["asked", fmtClock(tool.asked_at)],
      ["answered", fmtClock(tool.answered_at)],
      ["ran at", tool.server ? "the vendor (server tool)" : "the agent"],
      ["flags", (tool.flags || []).join(", ")],
    ]),
    section("Arguments", true, code(tool.arguments)),
    section(tool.is_error ? "Result (error)" : "Result", true, code(tool.result)));
}
