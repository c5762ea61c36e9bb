// Two small SVG charts: columns over a category axis (cost per day) and
// horizontal bars, optionally several per row (latency percentiles).
// Labels are SVG text nodes, so recorded names stay text.

import { s } from "./dom.js";

const FONT = 12;

function niceMax(value) {
  if (!(value > 0)) return 1;
  const scale = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * scale >= value) return step * scale;
  return 10 * scale;
}

/** Columns: rows [{label, value}], `format` for values. */
export function columnChart(rows, format, { height = 220 } = {}) {
  const width = 640;
  const pad = { left: 64, right: 12, top: 18, bottom: 40 };
  const max = niceMax(Math.max(...rows.map((r) => r.value || 0)));
  const inner = { w: width - pad.left - pad.right, h: height - pad.top - pad.bottom };
  const slot = inner.w / Math.max(rows.length, 1);
  const bar = Math.min(slot * 0.7, 48);
  const y = (v) => pad.top + inner.h - (v / max) * inner.h;
  const grid = [0, 0.25, 0.5, 0.75, 1].map((f) => [
    s("line", { x1: pad.left, x2: width - pad.right, y1: y(max * f), y2: y(max * f), class: "grid" }),
    s("text", { x: pad.left - 6, y: y(max * f) + 4, "text-anchor": "end", class: "axis" }, format(max * f)),
  ]);
  const bars = rows.map((row, i) => {
    const x = pad.left + slot * i + (slot - bar) / 2;
    const value = row.value || 0;
    return s("g", { class: "bar" },
      s("rect", { x, y: y(value), width: bar, height: Math.max(pad.top + inner.h - y(value), value ? 1 : 0), class: "fill-0" },
        s("title", {}, `${row.label}: ${format(value)}`)),
      s("text", { x: x + bar / 2, y: y(value) - 4, "text-anchor": "middle", class: "value" }, format(value)),
      s("text", { x: x + bar / 2, y: height - pad.bottom + 16, "text-anchor": "middle", class: "axis" }, row.label));
  });
  return s("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img" }, grid, bars);
}

/** Horizontal bars: rows [{label, values: [..]}], one bar per series (named in a legend);
 *  `top` fixes the scale's end (1 for rates). */
export function barChart(rows, series, format, { labelWidth = 170, note = () => "", top = null } = {}) {
  const width = 640;
  const barH = 14;
  const gap = 3;
  const rowH = series.length * (barH + gap) + 12;
  const legendH = series.length > 1 ? 22 : 0;
  const height = legendH + rows.length * rowH + 8;
  const left = labelWidth;
  const right = 120;
  const max = top ?? niceMax(Math.max(...rows.flatMap((r) => r.values.map((v) => v || 0))));
  const scale = (v) => ((v || 0) / max) * (width - left - right);
  const legend = series.length > 1 ? series.map((name, i) => s("g", {},
    s("rect", { x: left + i * 90, y: 4, width: 12, height: 12, class: `fill-${i}` }),
    s("text", { x: left + i * 90 + 16, y: 14, class: "axis" }, name))) : [];
  const drawn = rows.map((row, r) => {
    const rowTop = legendH + r * rowH + 6;
    const mid = rowTop + (series.length * (barH + gap)) / 2;
    const label = row.label.length > 26 ? row.label.slice(0, 25) + "…" : row.label;
    return s("g", { class: "bar" }, s("title", {}, row.label),
      s("text", { x: left - 8, y: mid + 4, "text-anchor": "end", class: "label" }, label),
      row.values.map((value, i) => {
        const y = rowTop + i * (barH + gap);
        return [
          s("rect", { x: left, y, width: Math.max(scale(value), value ? 1 : 0), height: barH, class: `fill-${i}` },
            s("title", {}, `${row.label} ${series[i]}: ${format(value)}`)),
          s("text", { x: left + scale(value) + 6, y: y + barH - 3, class: "value" },
            format(value) + (i === row.values.length - 1 ? note(row) : "")),
        ];
      }));
  });
  return s("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", "font-size": FONT }, legend, drawn);
}
