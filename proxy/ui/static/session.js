// The session page: summary, waterfall, the picked call or tool run, the
// conversation, the tool runs; kept up to date from the live event stream while
// it is open. A long session is shown a page at a time: its calls (and their tool
// runs) 200 at a time, its conversation's last entries with a button for more, each
// tool run clipped until it is picked.

import { h, getJSON, fmtInt, fmtMoney, fmtMs, fmtTime, fmtTokens, clip } from "./dom.js";
import { renderTimeline } from "./timeline.js";
import { callDetail, toolDetail } from "./detail.js";
import { renderChat } from "./chat.js";

const REFRESH_DELAY_MS = 300;
const CHAT_PAGE = 100;  // conversation entries shown at first, and added by "Show earlier"

function card(label, value, tone) {
  return h("div", { class: "card " + (tone || "") }, h("div", { class: "value" }, value), h("div", { class: "label" }, label));
}

function summary(detail) {
  const s = detail.summary;
  const duration = new Date(s.last_at) - new Date(s.started_at);
  return h("div", { class: "cards" },
    card("started", fmtTime(s.started_at)),
    card("duration", fmtMs(duration)),
    card("calls", fmtInt(s.calls), s.failed_calls ? "bad" : ""),
    card("tokens in → out", fmtTokens(s.input_tokens, s.output_tokens)),
    card("cost", fmtMoney(s.cost_usd)),
    card("tool runs · errors", `${fmtInt(s.tool_calls)} · ${fmtInt(s.tool_errors)}`, s.tool_errors ? "bad" : ""),
    card("failovers", fmtInt(s.failovers), s.failovers ? "warn" : ""),
    card("models", (s.models || []).join(", ") || "–"),
    ...origin(s));
}

// Where a forked or resumed session comes from, linked.
function origin(s) {
  const from = s.forked_from || s.resumed_from;
  if (!from) return [];
  const link = h("a", { href: "#/session/" + encodeURIComponent(from), class: "mono" }, from);
  const label = s.forked_from ? `forked at seq ${s.forked_at} from` : "resumed from";
  return [h("div", { class: "card origin" }, h("div", { class: "value" }, link), h("div", { class: "label" }, label))];
}

// Which calls this page shows, and links to the pages before and after it.
function pager(detail, go) {
  const { start, end, total, limit } = detail.page;
  if (start === 0 && end === total) return null;
  return h("div", { class: "pager" },
    h("button", { type: "button", class: "plain", disabled: start === 0, onclick: () => go(start) }, "← Earlier calls"),
    h("span", { class: "muted" }, ` calls ${fmtInt(start + 1)} to ${fmtInt(end)} of ${fmtInt(total)} `),
    h("button", { type: "button", class: "plain", disabled: end === total,
      onclick: () => go(end + limit >= total ? null : end + limit) }, "Later calls →"));
}

// The table shows each run's arguments and output clipped; a click shows it whole.
function toolTable(detail, pick) {
  if (!detail.tools.length) return h("p", { class: "muted" }, "No tool runs.");
  return h("table", { class: "tools" },
    h("thead", {}, h("tr", {}, ["Tool", "Arguments", "Result", "Outcome", "Duration"].map((t) => h("th", {}, t)))),
    h("tbody", {}, detail.tools.map((tool) => h("tr", {
      class: "tool-row " + (tool.is_error ? "bad" : ""), dataset: { call: tool.call_id },
      onclick: () => pick("tool", tool.call_id),
    },
    h("td", { class: "mono" }, tool.tool_name),
    h("td", { class: "mono" }, clip(tool.arguments_preview ?? "", 80)),
    h("td", { class: "mono" },
      (tool.exit_code == null ? "" : `[exit ${tool.exit_code}] `) + clip(tool.printed_preview ?? "", 100)),
    h("td", {}, tool.answered_at ? (tool.is_error ? "error" : "ok") : "open"),
    h("td", { class: "num" }, fmtMs(tool.duration_ms))))));
}

// What keeps an opened tool call or context open across a live redraw.
function openKey(node) {
  return node.dataset.call || node.querySelector("summary").textContent;
}

export function renderSession(view, session, exchange) {
  const live = h("span", { class: "live off" }, "○ connecting");
  const top = h("div", { class: "page-head" },
    h("a", { href: "#/", class: "back" }, "← Sessions"), h("h1", { class: "mono" }, session), live);
  const head = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const pages = h("div", {});
  const timeline = h("div", { class: "timeline-box" });
  const panel = h("div", { class: "panel" }, h("p", { class: "muted" }, "Click a call or a tool run to see it whole."));
  const tools = h("div", {});
  const chat = h("div", { class: "chat-box" }, h("p", { class: "muted" }, "Loading the conversation…"));
  view.replaceChildren(top, head, h("h2", {}, "Timeline"), pages, timeline, panel,
    h("h2", {}, "Conversation"), chat, h("h2", {}, "Tool runs"), tools);

  let detail = null;
  let before = null;  // the page of calls shown: those before this index (null: the last ones)
  let chatLast = CHAT_PAGE;
  let selected = exchange ? { kind: "call", key: exchange } : null;
  let stream = null;
  let timer = null;
  let stopped = false;
  const base = "api/sessions/" + encodeURIComponent(session);

  async function showSelected() {
    if (!selected || !detail) return;
    if (selected.kind === "tool") {
      const key = selected.key;
      panel.replaceChildren(h("p", { class: "muted" }, "Loading the tool run…"));
      try {
        const tool = await getJSON(`${base}/tools/${encodeURIComponent(key)}`);
        if (selected && selected.key === key) panel.replaceChildren(toolDetail(tool));
      } catch (error) {
        panel.replaceChildren(h("p", { class: "error" }, "Could not load the tool run: " + error.message));
      }
      return;
    }
    const index = detail.calls.findIndex((c) => c.exchange === selected.key);
    if (index < 0) return;
    panel.replaceChildren(h("p", { class: "muted" }, "Loading the call…"));
    try {
      const found = await getJSON(`${base}/calls/${encodeURIComponent(selected.key)}`);
      if (selected && selected.key === detail.calls[index].exchange) {
        panel.replaceChildren(callDetail(found, detail.calls[index], index + 1, detail.tools, (id) => pick("tool", id)));
      }
    } catch (error) {
      panel.replaceChildren(h("p", { class: "error" }, "Could not load the call: " + error.message));
    }
  }

  function pick(kind, key) {
    selected = { kind, key };
    const link = `#/session/${encodeURIComponent(session)}` + (kind === "call" ? `/${encodeURIComponent(key)}` : "");
    history.replaceState(null, "", link);  // a link to the call, without reloading the page
    draw();
    showSelected();
    panel.scrollIntoView({ behavior: "smooth", block: "start" });
  }

  function goPage(index) {
    before = index;
    refresh();
  }

  function draw() {
    head.replaceChildren(summary(detail));
    pages.replaceChildren(pager(detail, goPage) || "");
    timeline.replaceChildren(renderTimeline(detail, selected, pick));
    tools.replaceChildren(toolTable(detail, pick));
  }

  async function load() {
    try {
      detail = await getJSON(before === null ? base : `${base}?before=${before}`);
    } catch (error) {
      head.replaceChildren(h("p", { class: "error" }, error.message));
      return false;
    }
    if (stopped) return false;
    draw();
    loadChat();
    return true;
  }

  async function loadChat() {
    const open = new Set([...chat.querySelectorAll("details[open]")].map(openKey));
    try {
      const found = await getJSON(`${base}/chat?last=${chatLast}`);
      if (stopped) return;
      const more = () => { chatLast += CHAT_PAGE; loadChat(); };
      chat.replaceChildren(renderChat(found, { more, onTool: (id) => pick("tool", id) }));
      chat.querySelectorAll("details").forEach((node) => { if (open.has(openKey(node))) node.open = true; });
    } catch (error) {
      chat.replaceChildren(h("p", { class: "error" }, "Could not load the conversation: " + error.message));
    }
  }

  function selectedCall() {
    return selected && selected.kind === "call" && detail ? detail.calls.find((c) => c.exchange === selected.key) : null;
  }

  async function refresh() {
    const before = selectedCall();
    if (!(await load())) return;
    const after = selectedCall();
    if (before && after && !before.ended_at && after.ended_at) showSelected();  // its answer came
  }

  function follow(fromSeq) {
    stream = new EventSource(`${base}/events?from=${fromSeq}&watch=1`);  // only that it grew
    stream.onopen = () => { live.className = "live on"; live.textContent = "● live"; };
    stream.onerror = () => { live.className = "live off"; live.textContent = "○ reconnecting"; };
    stream.addEventListener("problem", (event) => {
      live.className = "live off";
      live.textContent = "✕ " + JSON.parse(event.data).error;
      stream.close();
    });
    stream.onmessage = () => {  // at most one redraw per REFRESH_DELAY_MS, however busy
      if (timer === null) timer = setTimeout(() => { timer = null; refresh(); }, REFRESH_DELAY_MS);
    };
  }

  load().then((ok) => {
    if (!ok) return;
    follow(detail.last_seq || 0);
    showSelected();
  });

  return () => {
    stopped = true;
    clearTimeout(timer);
    if (stream) stream.close();
  };
}
