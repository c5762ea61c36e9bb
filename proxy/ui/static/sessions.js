// The sessions page: recent sessions, filtered by time, model and prompt text,
// sorted by any column. Filters live in the URL (#/?model=…&sort=…).

import { h, getJSON, fmtInt, fmtMoney, fmtMs, fmtTime, fmtTokens, clip } from "./dom.js";

const COLUMNS = [
  ["session", "Session"],
  ["started_at", "Started"],
  ["duration_ms", "Duration"],
  ["calls", "Calls"],
  ["models", "Models"],
  ["tokens", "Tokens in → out"],
  ["cost_usd", "Cost"],
  ["tool_calls", "Tool runs"],
  ["tool_errors", "Tool errors"],
  ["failovers", "Failovers"],
  ["failed_calls", "Failed calls"],
];
const RANGES = [["", "any time"], ["1h", "last hour"], ["24h", "last 24 h"], ["7d", "last 7 days"], ["30d", "last 30 days"]];
const HOURS = { "1h": 1, "24h": 24, "7d": 168, "30d": 720 };
const LIMIT = 200;  // sessions listed at once

function localInput(iso) {
  if (!iso) return "";
  const when = new Date(iso);
  return new Date(when.getTime() - when.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
}

function go(params) {
  for (const [key, value] of [...params]) if (!value) params.delete(key);
  location.hash = "#/?" + params.toString();
}

function filters(params, models) {
  const field = (name, input) => h("label", {}, name, input);
  const range = h("select", { name: "range" }, RANGES.map(([value, label]) =>
    h("option", { value, selected: params.get("range") === value }, label)));
  const since = h("input", { type: "datetime-local", name: "since", value: localInput(params.get("since")) });
  const until = h("input", { type: "datetime-local", name: "until", value: localInput(params.get("until")) });
  const model = h("select", { name: "model" }, h("option", { value: "" }, "any model"),
    models.map((name) => h("option", { value: name, selected: params.get("model") === name }, name)));
  const text = h("input", { type: "search", name: "text", placeholder: "text in prompts", value: params.get("text") || "" });
  const form = h("form", { class: "filters", onsubmit: (event) => {
    event.preventDefault();
    const next = new URLSearchParams(params);
    next.set("range", range.value);
    next.set("since", since.value ? new Date(since.value).toISOString() : "");
    next.set("until", until.value ? new Date(until.value).toISOString() : "");
    next.set("model", model.value);
    next.set("text", text.value.trim());
    go(next);
  } },
  field("When", range), field("From", since), field("Until", until), field("Model", model), field("Search", text),
  h("button", { type: "submit" }, "Apply"),
  h("button", { type: "button", class: "plain", onclick: () => go(new URLSearchParams()) }, "Clear"));
  return form;
}

function apiQuery(params) {
  const query = new URLSearchParams({ limit: LIMIT });
  const hours = HOURS[params.get("range")];
  const since = hours ? new Date(Date.now() - hours * 3600e3).toISOString() : params.get("since");
  if (since) query.set("since", since);
  for (const key of ["until", "model", "text", "sort", "order"]) if (params.get(key)) query.set(key, params.get(key));
  return query;
}

function header(params) {
  const sort = params.get("sort") || "last_at";
  const order = params.get("order") || "desc";
  return h("tr", {}, COLUMNS.map(([key, label]) => {
    const active = sort === key;
    const next = new URLSearchParams(params);
    next.set("sort", key);
    next.set("order", active && order === "desc" ? "asc" : "desc");
    const arrow = active ? (order === "desc" ? " ▼" : " ▲") : "";
    return h("th", { class: active ? "sorted" : null, "aria-sort": active ? (order === "desc" ? "descending" : "ascending") : null },
      h("a", { href: "#/?" + next.toString(), dataset: { sort: key } }, label + arrow));
  }));
}

function row(session) {
  const link = "#/session/" + encodeURIComponent(session.session);
  const bad = (n) => (n ? "bad" : null);
  return h("tr", { class: "session-row", dataset: { session: session.session }, onclick: (event) => {
    if (event.target.tagName !== "A") location.hash = link;
  } },
  h("td", {},
    h("a", { href: link, class: "mono" }, session.session),
    session.client ? h("span", { class: "tag client" }, session.client) : null,
    session.prompt ? h("div", { class: "prompt muted" }, clip(session.prompt, 90)) : null),
  h("td", { class: "nowrap" }, fmtTime(session.started_at)),
  h("td", { class: "num" }, fmtMs(session.duration_ms)),
  h("td", { class: "num" }, fmtInt(session.calls)),
  h("td", {}, (session.models || []).map((name) => h("span", { class: "tag" }, name))),
  h("td", { class: "num nowrap" }, fmtTokens(session.input_tokens, session.output_tokens)),
  h("td", { class: "num" }, fmtMoney(session.cost_usd)),
  h("td", { class: "num" }, fmtInt(session.tool_calls)),
  h("td", { class: "num " + (bad(session.tool_errors) || "") }, fmtInt(session.tool_errors)),
  h("td", { class: "num " + (session.failovers ? "warn" : "") }, fmtInt(session.failovers)),
  h("td", { class: "num " + (bad(session.failed_calls) || "") }, fmtInt(session.failed_calls)));
}

export async function renderSessions(view, params) {
  const body = h("div", { class: "table-wrap" }, h("p", { class: "muted" }, "Loading sessions…"));
  view.replaceChildren(h("h1", {}, "Sessions"), body);
  let found;
  try {
    found = await getJSON("api/sessions?" + apiQuery(params).toString());
  } catch (error) {
    body.replaceChildren(h("p", { class: "error" }, "Could not load sessions: " + error.message));
    return;
  }
  view.insertBefore(filters(params, found.models), body);
  if (!found.sessions.length) {
    body.replaceChildren(h("p", { class: "muted" }, "No sessions match."));
    return;
  }
  body.replaceChildren(
    h("table", { class: "sessions" }, h("thead", {}, header(params)), h("tbody", {}, found.sessions.map(row))),
    h("p", { class: "muted small" }, `${found.sessions.length} session${found.sessions.length === 1 ? "" : "s"}`,
      found.sessions.length === LIMIT ? ` (the first ${LIMIT} in this order: narrow the filters to see others)` : ""));
}
