// SVG building blocks of the charts: number formats, element helpers, axes, legends. The
// chart functions in charts.js compose these; nothing here touches `document` at import time.
export const SVG_NS = 'http://www.w3.org/2000/svg';
export const FONT = 11; // px; matches .label/.value in style.css, used to estimate text widths
export const MIN_W = 320;
export const MAX_W = 900;

// ---------------------------------------------------------------------------------------
// Helpers

/** Formats a duration in ms with its unit: 0.0123 -> "0.012 ms", 15.2 -> "15.2 ms", 15234 -> "15.2 s". */
export function formatMs(x) {
  if (typeof x !== 'number' || !Number.isFinite(x)) return '– ms';
  const a = Math.abs(x);
  if (a >= 10000) return `${(x / 1000).toFixed(1)} s`;
  if (a >= 1000) return `${(x / 1000).toFixed(2)} s`;
  if (a >= 100) return `${x.toFixed(0)} ms`;
  if (a >= 1) return `${x.toFixed(1)} ms`;
  return `${Number(x.toPrecision(2))} ms`;
}

/** A number with a sensible number of decimals (for GB/s, GFLOP/s, judgments/s, ×). */
export function formatNum(x) {
  const a = Math.abs(x);
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  return String(Number(x.toFixed(2)));
}

/** A count in millions: 2 decimals below 10 million (a tiny model's 0.21), else none. */
export const formatMillions = (n) => (n / 1e6).toFixed(n < 1e7 ? 2 : 0);

/** Tick labels: like formatMs / formatNum but without trailing zeros ("20 ms", "1.5 s"). */
export const tickMs = (v) => formatMs(v).replace(/(\.\d*[1-9])0+ /, '$1 ').replace(/\.0+ /, ' ');
export const tickNum = (v) => String(Number(v.toPrecision(6)));

export const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
export const nums = (v) => (Array.isArray(v) ? v.filter(isNum) : []);
export const sum = (xs) => xs.reduce((s, x) => s + x, 0);
export const clamp = (v, lo, hi) => Math.max(lo, Math.min(hi, v));
export const rd = (v) => Math.round(v * 10) / 10; // keeps the SVG text short
export const tx = (t, key) => (t && t[key] != null ? String(t[key]) : key);
export const stratName = (t, s) => (t && t.strategy && t.strategy[s] != null ? String(t.strategy[s]) : s);

export function median(xs) {
  const s = nums(xs).sort((a, b) => a - b);
  if (!s.length) return 0;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Rough width of a label in px (wide glyphs for Hangul/CJK). */
export function textWidth(s, size = FONT) {
  let w = 0;
  for (const ch of String(s)) w += ch.codePointAt(0) >= 0x1100 ? size : size * 0.62;
  return w;
}

/** Shortens `s` with an ellipsis so that it fits in `maxW` px. */
export function fit(s, maxW) {
  s = String(s);
  if (textWidth(s) <= maxW) return s;
  const chars = Array.from(s);
  while (chars.length > 1 && textWidth(chars.join('') + '…') > maxW) chars.pop();
  return chars.join('') + '…';
}

/** Creates an SVG element with attributes (null/undefined skipped) and optional text. */
export function node(parent, tag, attrs = {}, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v != null) e.setAttribute(k, String(v));
  if (text != null) e.textContent = String(text);
  if (parent) parent.appendChild(e);
  return e;
}

export const text = (p, x, y, s, attrs = {}) =>
  node(p, 'text', { x: rd(x), y: rd(y), class: 'label', ...attrs }, s);
export const rect = (p, x, y, w, h, attrs = {}) =>
  node(p, 'rect', { x: rd(x), y: rd(y), width: rd(Math.max(0, w)), height: rd(h), ...attrs });
export const line = (p, x1, y1, x2, y2, cls, attrs = {}) =>
  node(p, 'line', { x1: rd(x1), y1: rd(y1), x2: rd(x2), y2: rd(y2), class: cls, ...attrs });
/** Adds a hover tooltip. */
export const tip = (e, s) => (node(e, 'title', {}, s), e);

/** Clears `el` and appends an empty chart svg; call size() once the height is known. */
export function frame(el, ariaLabel) {
  el.replaceChildren();
  const w = Math.round(clamp(el.clientWidth || 640, MIN_W, MAX_W));
  const svg = node(el, 'svg', {
    width: '100%', role: 'img', 'aria-label': ariaLabel, 'font-size': FONT, class: 'chart',
  });
  return { svg, w };
}
export const size = (svg, w, h) => svg.setAttribute('viewBox', `0 0 ${w} ${Math.ceil(h)}`);

/** The no-data placeholder: a short text only. */
export function noData(el, t) {
  const msg = tx(t, 'noData');
  const { svg, w } = frame(el, msg);
  text(svg, w / 2, 22, msg, { 'text-anchor': 'middle', 'data-kind': 'nodata' });
  size(svg, w, 36);
}

/** "Nice" ticks 0..top for a maximum value, about `count` of them. */
export function niceTicks(max, count) {
  if (!(max > 0)) max = 1;
  const raw = max / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].find((m) => m * mag >= raw) * mag;
  const top = Math.ceil(max / step - 1e-9) * step;
  const ticks = [];
  for (let v = 0; v <= top + step / 2; v += step) ticks.push(Number(v.toPrecision(12)));
  return { ticks, top };
}

/**
 * Horizontal grid lines with their labels written just above each line, inside the plot
 * (keeps narrow panels free of a wide label margin); the 0 line is the unlabelled axis.
 */
export function yGrid(g, box, max, fmt) {
  const { ticks, top } = niceTicks(max, clamp(Math.floor(box.h / 38), 2, 6));
  const sy = (v) => box.y + box.h - (v / top) * box.h;
  for (const v of ticks) {
    line(g, box.x, sy(v), box.x + box.w, sy(v), v === 0 ? 'axis' : 'grid');
    if (v !== 0) text(g, box.x + 2, sy(v) - 3, fmt(v));
  }
  return sy;
}

/** Tick marks and labels along y; labels that would overlap (or leave [x0, x1]) are skipped. */
export function xTicks(g, ticks, y, x0, x1) {
  let right = -Infinity;
  for (const { x, s } of ticks) {
    line(g, x, y, x, y + 4, 'axis');
    const w = textWidth(s);
    let anchor = 'middle', l = x - w / 2;
    if (l + w > x1) { anchor = 'end'; l = x - w; }
    if (l < x0) { anchor = 'start'; l = x; }
    if (l < right + 8) continue;
    text(g, x, y + 15, s, { 'text-anchor': anchor });
    right = l + w;
  }
}

/**
 * A legend row (wraps when too wide). items: {cls, label, shape: 'rect'|'dot'|'line'}.
 * Returns the height used.
 */
export function legend(g, items, x0, y, maxW) {
  let x = x0, rows = 1;
  for (const it of items) {
    const w = 16 + textWidth(it.label) + 14;
    if (x > x0 && x + w > x0 + maxW) { x = x0; y += 16; rows++; }
    if (it.shape === 'line') line(g, x, y, x + 12, y, it.cls);
    else if (it.shape === 'dot') node(g, 'circle', { cx: x + 6, cy: y, r: 4, class: it.cls });
    else rect(g, x, y - 5, 12, 10, { class: it.cls });
    text(g, x + 16, y, it.label, { dy: '0.35em' });
    x += w;
  }
  return rows * 16;
}

/** Joins 2+ points with plain <line> segments (no fill to worry about, whatever the CSS says). */
export function polyline(g, pts, cls, attrs) {
  if (pts.length < 2) return null;
  const grp = node(g, 'g', attrs);
  for (let i = 1; i < pts.length; i++) line(grp, pts[i - 1][0], pts[i - 1][1], pts[i][0], pts[i][1], cls);
  return grp;
}
