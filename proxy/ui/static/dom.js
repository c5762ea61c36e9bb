// Small DOM helpers. Recorded content only ever becomes text nodes or attribute
// values: nothing here parses HTML, so a recorded "<script>" stays text.

const SVG_NS = "http://www.w3.org/2000/svg";

function fill(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: h("td", {class: "num"}, "12"). Strings become text. */
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element, the same way. */
export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Fetch JSON from the UI's API (relative URL); an error says what the server said. */
export async function getJSON(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new Error((body && body.error) || `${response.status} ${response.statusText}`);
  return body;
}

export function pretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

export function fmtInt(n) {
  return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US");
}

export function fmtMoney(usd) {
  if (usd === null || usd === undefined) return "–";
  if (usd === 0) return "$0";
  return usd < 1 ? `$${Number(usd.toPrecision(3))}` : `$${usd.toFixed(2)}`;
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms === 0) return "0";
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  const minutes = Math.floor(ms / 60000);
  return minutes < 60 ? `${minutes} min ${Math.round((ms % 60000) / 1000)} s` : `${(minutes / 60).toFixed(1)} h`;
}

export function fmtTime(iso) {
  if (!iso) return "–";
  const when = new Date(iso);
  return when.toLocaleString("sv-SE", { hour12: false }).replace("T", " ");
}

export function fmtClock(iso) {
  if (!iso) return "–";
  const when = new Date(iso);
  const ms = String(when.getMilliseconds()).padStart(3, "0");
  return `${when.toLocaleTimeString("en-GB", { hour12: false })}.${ms}`;
}

/** Milliseconds since the epoch of an ISO time from the API. */
export function at(iso) {
  return iso ? new Date(iso).getTime() : null;
}

export function fmtTokens(input, output) {
  if (input === null && output === null) return "–";
  return `${fmtInt(input || 0)} → ${fmtInt(output || 0)}`;
}

export function clip(text, length) {
  const flat = String(text).replace(/\s+/g, " ");
  return flat.length > length ? flat.slice(0, length - 1) + "…" : flat;
}

/** A collapsible section. */
export function section(title, open, ...content) {
  return h("details", { class: "section", open }, h("summary", {}, title), ...content);
}

export function code(value) {
  return h("pre", { class: "code" }, pretty(value));
}
