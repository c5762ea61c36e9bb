// The waterfall: every model call and tool run of a session on one time axis,
// failovers (◆) and errors (✕) marked where they happened.

import { h, at, clip, fmtMs } from "./dom.js";

const STEPS = [1, 2, 5];

function niceStep(span, most) {
  let scale = 1;
  for (;;) {
    for (const step of STEPS) if ((step * scale) * most >= span) return step * scale;
    scale *= 10;
  }
}

// Where the page's time axis ends: where the next page's first call starts, or the
// session's last event on its last page.
function pageEnd(detail) {
  return at(detail.page && detail.page.until) ?? at(detail.summary.last_at);
}

/** Rows to draw, in time order: {kind, key, start, end, label, note, classes, marks}. */
export function timelineRows(detail) {
  const calls = detail.calls.map((call, index) => {
    const start = at(call.started_at);
    const end = at(call.ended_at) ?? start + (call.latency_ms || 0);
    const failed = call.outcome && call.outcome !== "ok";
    return {
      kind: "call", key: call.exchange, start, end,
      label: `#${index + 1} ${call.response_model || call.request_model || call.api}`,
      note: [fmtMs(end - start), call.attempts > 1 ? `${call.attempts} attempts` : "", call.status, failed ? call.outcome : ""]
        .filter(Boolean).join(" · "),
      classes: [failed ? "error" : "", call.failovers ? "failover" : ""],
      marks: [],
    };
  });
  const byExchange = new Map(calls.map((row) => [row.key, row]));
  const tools = detail.tools.map((tool) => {
    const start = at(tool.asked_at) ?? at(tool.answered_at);
    const end = at(tool.answered_at) ?? pageEnd(detail);
    return {
      kind: "tool", key: tool.call_id, start, end,
      label: `↳ ${tool.tool_name || "tool"}`,
      note: `${tool.duration_ms === null ? "no result" : fmtMs(tool.duration_ms)}${tool.is_error ? " · error" : ""}`,
      classes: [tool.is_error ? "error" : "", tool.answered_at ? "" : "open"],
      marks: [],
    };
  });
  const loose = [];
  for (const mark of detail.marks) {
    const row = byExchange.get(mark.exchange);
    const sign = mark.type === "failover" ? "◆" : "✕";
    const title = mark.type === "failover"
      ? `failover ${mark.from_provider}:${mark.from_model} → ${mark.to_provider}:${mark.to_model} (${mark.reason})`
      : `error: ${mark.reason}`;
    const entry = { time: at(mark.ts), sign, title, kind: mark.type };
    if (row) row.marks.push(entry);
    else loose.push({ kind: "error", key: "seq" + mark.seq, start: entry.time, end: entry.time,
      label: mark.type, note: clip(mark.reason || "", 60), classes: ["error"], marks: [entry] });
  }
  return [...calls, ...tools, ...loose].sort((a, b) => a.start - b.start || (a.kind === "call" ? -1 : 1));
}

function axis(start, span) {
  const step = niceStep(span, 8);
  const ticks = [];
  for (let t = 0; t <= span + 1e-9; t += step) {
    ticks.push(h("span", { class: "tick" }, fmtMs(t)));
    ticks[ticks.length - 1].style.left = `${(t / span) * 100}%`;
  }
  return h("div", { class: "tl-row tl-axis" }, h("div", { class: "tl-label" }, "time since start"),
    h("div", { class: "tl-track" }, ticks));
}

/** The timeline element; `onPick(kind, key)` is called when a row is clicked. */
export function renderTimeline(detail, selected, onPick) {
  const rows = timelineRows(detail);
  if (!rows.length) return h("p", { class: "muted" }, "No calls recorded yet.");
  const start = Math.min(...rows.map((r) => r.start));
  const end = Math.max(...rows.map((r) => r.end), pageEnd(detail));
  const span = Math.max(end - start, 1);
  const place = (node, from, to) => {
    node.style.left = `${((from - start) / span) * 100}%`;
    node.style.width = `${((to - from) / span) * 100}%`;
    return node;
  };
  const drawn = rows.map((row) => {
    const bar = place(h("div", { class: "tl-bar" }), row.start, row.end);
    const note = h("span", { class: "tl-note" }, row.note);
    note.style.left = `calc(${((row.end - start) / span) * 100}% + 6px)`;
    const marks = row.marks.map((mark) => {
      const node = h("span", { class: `tl-mark ${mark.kind}`, title: mark.title }, mark.sign);
      node.style.left = `${((mark.time - start) / span) * 100}%`;
      return node;
    });
    const isSelected = selected && selected.kind === row.kind && selected.key === row.key;
    return h("div", {
      class: ["tl-row", row.kind, ...row.classes, isSelected ? "selected" : ""].filter(Boolean).join(" "),
      dataset: { kind: row.kind, key: row.key }, tabindex: 0, role: "button",
      onclick: () => onPick(row.kind, row.key),
      onkeydown: (event) => { if (event.key === "Enter") onPick(row.kind, row.key); },
    }, h("div", { class: "tl-label", title: row.label }, row.label), h("div", { class: "tl-track" }, bar, note, marks));
  });
  const legend = h("div", { class: "legend" },
    h("span", { class: "key call" }, "model call"), h("span", { class: "key tool" }, "tool run"),
    h("span", { class: "key error" }, "failed"), h("span", { class: "key failover" }, "◆ failover"),
    h("span", { class: "key errmark" }, "✕ error"));
  return h("div", { class: "timeline" }, legend, axis(start, span), drawn);
}
