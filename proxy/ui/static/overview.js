// The overview: cost per day and per model, latency percentiles per model,
// tool error rates, over a chosen time range.

import { h, getJSON, fmtInt, fmtMoney, fmtMs } from "./dom.js";
import { barChart, columnChart } from "./charts.js";

const RANGES = [["", "all time"], ["24", "last 24 h"], ["168", "last 7 days"], ["720", "last 30 days"]];

function card(label, value) {
  return h("div", { class: "card" }, h("div", { class: "value" }, value), h("div", { class: "label" }, label));
}

function panel(title, chart, empty) {
  return h("section", { class: "chart-panel" }, h("h2", {}, title), chart || h("p", { class: "muted" }, empty));
}

const percent = (v) => `${Math.round((v || 0) * 100)}%`;

export async function renderOverview(view, params) {
  const hours = params.get("hours") || "";
  const range = h("select", { onchange: (event) => { location.hash = "#/overview?hours=" + event.target.value; } },
    RANGES.map(([value, label]) => h("option", { value, selected: value === hours }, label)));
  const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  view.replaceChildren(h("div", { class: "page-head" }, h("h1", {}, "Overview"), h("label", {}, "Range ", range)), body);
  const since = hours ? "?since=" + new Date(Date.now() - Number(hours) * 3600e3).toISOString() : "";
  let found;
  try {
    found = await getJSON("api/overview" + since);
  } catch (error) {
    body.replaceChildren(h("p", { class: "error" }, "Could not load the overview: " + error.message));
    return;
  }
  const t = found.totals;
  const days = found.cost_per_day.map((d) => ({ label: d.day.slice(5), value: d.cost_usd || 0 }));
  const models = found.cost_per_model.map((m) => ({ label: m.model || "?", values: [m.cost_usd || 0], calls: m.calls }));
  const latency = found.latency_per_model.map((m) => ({ label: m.model || "?", values: [m.p50_ms, m.p90_ms, m.p99_ms] }));
  const tools = found.tool_errors.map((tool) => ({ label: tool.tool_name || "?", values: [tool.errors / tool.runs], runs: tool.runs, errors: tool.errors }));
  body.replaceChildren(
    h("div", { class: "cards" },
      card("sessions", fmtInt(t.sessions)), card("calls", fmtInt(t.calls)), card("cost", fmtMoney(t.cost_usd)),
      card("tokens in → out", `${fmtInt(t.input_tokens || 0)} → ${fmtInt(t.output_tokens || 0)}`),
      card("failovers", fmtInt(t.failovers)), card("failed calls", fmtInt(t.failed_calls))),
    h("div", { class: "charts" },
      panel("Cost per day", days.length ? columnChart(days, fmtMoney) : null, "No calls in this range."),
      panel("Cost per model", models.length ? barChart(models, ["cost"], fmtMoney, { note: (r) => ` · ${fmtInt(r.calls)} call${r.calls === 1 ? "" : "s"}` }) : null, "No calls in this range."),
      panel("Latency per model (successful calls)", latency.length ? barChart(latency, ["p50", "p90", "p99"], fmtMs) : null, "No successful calls in this range."),
      panel("Tool error rate", tools.length ? barChart(tools, ["error rate"], percent, { top: 1, note: (r) => ` · ${r.errors} of ${r.runs} runs` }) : null, "No tool runs in this range.")));
}
