// Small hand-written SVG charts of one judgment's results (no libraries, no innerHTML); the
// benchmark's charts are in bench-charts.js.
//
// Every chart function takes a container element, clears it and appends one responsive <svg>
// (viewBox sized to the container's width, width="100%"), plus `t`, an object of
// already-translated label strings. Colours come from CSS classes only (see style.css):
// bar-prefill, bar-decode (.alt), bar-a, bar-b, bar-bfull, line-fit, point-measured, axis,
// grid, label, value, chosen; plus bar-peak (roofline device peak) and bar-prob (the
// probability bars that are not chosen), which the page may style.
// Drawn data elements carry data-kind (and data-series where there are several series),
// so tests can count them with querySelectorAll('[data-kind=...]').
// Nothing here touches `document` at import time.

import {
  formatMs, formatNum, tickMs, isNum, nums, sum, clamp, tx, stratName, textWidth, fit, node, text,
  rect, line, tip, frame, size, noData, niceTicks, xTicks, legend,
} from './svg.js';

export { formatMs };

// ---------------------------------------------------------------------------------------
// 1. A vs B: one horizontal stacked bar per judgment (prefill, then each decode step).

export function stackedBars(el, judgments, t) {
  const recs = (Array.isArray(judgments) ? judgments : []).filter((j) => j && j.timings_ms);
  if (!recs.length) return noData(el, t);
  const { svg, w } = frame(el, `${tx(t, 'prefill')} + ${tx(t, 'decode')} (${tx(t, 'ms')})`);

  const parts = recs.map((j) => {
    const prefill = isNum(j.timings_ms.prefill) ? j.timings_ms.prefill : 0;
    const decode = nums(j.timings_ms.decode);
    const drawn = prefill + sum(decode);
    return { j, prefill, decode, total: isNum(j.timings_ms.total) ? j.timings_ms.total : drawn };
  });
  const labelW = clamp(Math.max(...recs.map((j) => textWidth(stratName(t, j.strategy)))) + 10, 40, w * 0.3);
  const valueW = 60;
  const x0 = labelW, plotW = w - labelW - valueW;
  const { ticks, top } = niceTicks(Math.max(...parts.map((p) => Math.max(p.total, p.prefill + sum(p.decode)))), Math.floor(plotW / 90));
  const sx = (v) => x0 + (v / top) * plotW;

  let y = 10;
  y += legend(svg, [
    { cls: 'bar-prefill', label: tx(t, 'prefill') },
    { cls: 'bar-decode', label: tx(t, 'decode') },
  ], x0, y, plotW) + 4;

  const barH = 18, gap = 10;
  const plotTop = y;
  for (const { j, prefill, decode, total } of parts) {
    const g = node(svg, 'g', { 'data-strategy': j.strategy });
    text(g, x0 - 6, y + barH / 2, fit(stratName(t, j.strategy), labelW - 8), { 'text-anchor': 'end', dy: '0.35em' });
    tip(rect(g, sx(0), y, sx(prefill) - sx(0), barH, { class: 'bar-prefill', 'data-kind': 'prefill' }),
      `${tx(t, 'prefill')}: ${formatMs(prefill)}`);
    let at = prefill;
    decode.forEach((d, i) => {
      tip(rect(g, sx(at), y, sx(at + d) - sx(at), barH, {
        class: i % 2 ? 'bar-decode alt' : 'bar-decode', 'data-kind': 'decode', 'data-step': i + 1,
      }), `${tx(t, 'decode')} ${i + 1}: ${formatMs(d)}`);
      at += d;
    });
    text(g, sx(Math.max(at, total)) + 4, y + barH / 2, formatMs(total), { class: 'value', dy: '0.35em', 'data-kind': 'total' });
    y += barH + gap;
  }

  // x axis in ms, with faint grid lines behind the bars
  const axisY = y - gap + 4;
  const grid = node(svg, 'g');
  svg.insertBefore(grid, svg.firstChild);
  for (const v of ticks) line(grid, sx(v), plotTop - 4, sx(v), axisY, 'grid');
  line(svg, x0, axisY, x0 + plotW, axisY, 'axis');
  xTicks(svg, ticks.map((v) => ({ x: sx(v), s: tickMs(v) })), axisY, 0, w);
  y = axisY + 36;

  // speed-up of A (wall total) over each B record
  const a = parts.find((p) => p.j.strategy === 'a') ?? parts.find((p) => p.j.strategy === 'a-free');
  if (a) {
    for (const b of parts.filter((p) => String(p.j.strategy).startsWith('b') && p.total > 0)) {
      const s = `${tx(t, 'speedup')} ${stratName(t, a.j.strategy)} / ${stratName(t, b.j.strategy)} = ${formatNum(a.total / b.total)}×`;
      text(svg, x0, y, fit(s, w - x0), { class: 'value', 'data-kind': 'speedup' });
      y += 17;
    }
  }
  size(svg, w, y - 4);
}

// ---------------------------------------------------------------------------------------
// 2. Per-step timeline of one judgment: wall-clock blocks, and the GPU time of each step.

export function timeline(el, judgment, t) {
  const tm = judgment && judgment.timings_ms;
  if (!tm || !isNum(tm.prefill)) return noData(el, t);
  const { svg, w } = frame(el, `${tx(t, 'wall')} (${tx(t, 'ms')})`);

  const wall = [tm.prefill, ...nums(tm.decode)];
  const g = judgment.gpu_timings_ms;
  const gpu = g && isNum(g.prefill) ? [g.prefill, ...nums(g.decode)] : null;
  const starts = [];
  wall.reduce((at, d) => (starts.push(at), at + d), 0);
  const end = Math.max(sum(wall), ...(gpu ? gpu.map((d, i) => (starts[i] ?? 0) + d) : []));

  const labelW = clamp(Math.max(textWidth(tx(t, 'wall')), gpu ? textWidth(tx(t, 'gpu')) : 0) + 10, 30, w * 0.25);
  const x0 = labelW, plotW = w - labelW - 10;
  const { ticks, top } = niceTicks(end, Math.floor(plotW / 90));
  const sx = (v) => x0 + (v / top) * plotW;

  // one row of blocks; the step label ("P", "1".."N") only where it fits
  const row = (durs, y, h, kindPrefix, withText) => durs.forEach((d, i) => {
    if (i >= starts.length) return;
    const x = sx(starts[i]), bw = sx(starts[i] + d) - x;
    const cls = i === 0 ? 'bar-prefill' : i % 2 ? 'bar-decode' : 'bar-decode alt';
    const step = i === 0 ? 'P' : String(i);
    tip(rect(svg, x, y, bw > 2 ? bw - 1 : bw, h, {
      class: cls + (kindPrefix ? ' gpu' : ''), 'data-kind': kindPrefix + (i === 0 ? 'prefill' : 'decode'), 'data-step': i,
    }), `${step}: ${formatMs(d)}`);
    if (withText && bw >= textWidth(step) + 6) {
      text(svg, x + bw / 2, y + h / 2, step, { class: 'value', 'text-anchor': 'middle', dy: '0.35em' });
    }
  });

  let y = 8;
  const wallH = 30, gpuH = 14;
  for (const v of ticks) line(svg, sx(v), y - 2, sx(v), y + wallH + (gpu ? gpuH + 8 : 0) + 2, 'grid');
  text(svg, x0 - 6, y + wallH / 2, fit(tx(t, 'wall'), labelW - 8), { 'text-anchor': 'end', dy: '0.35em' });
  row(wall, y, wallH, '', true);
  y += wallH + 8;
  if (gpu) {
    text(svg, x0 - 6, y + gpuH / 2, fit(tx(t, 'gpu'), labelW - 8), { 'text-anchor': 'end', dy: '0.35em' });
    row(gpu, y, gpuH, 'gpu-', false);
    y += gpuH + 6;
  }
  line(svg, x0, y, x0 + plotW, y, 'axis');
  xTicks(svg, ticks.map((v) => ({ x: sx(v), s: tickMs(v) })), y, 0, w);
  size(svg, w, y + 22);
}

// ---------------------------------------------------------------------------------------
// 3. Probability of each answer choice, the chosen one highlighted.

export function probabilityBars(el, choices, probs, chosenIndex, t) {
  const n = Math.min(Array.isArray(choices) ? choices.length : 0, Array.isArray(probs) ? probs.length : 0);
  if (!n) return noData(el, t);
  const { svg, w } = frame(el, tx(t, 'probability'));

  const labelW = clamp(Math.max(...choices.slice(0, n).map((c) => textWidth(c))) + 10, 40, w * 0.4);
  const valueW = 54;
  const x0 = labelW, plotW = w - labelW - valueW;
  const rowH = 18, gap = 6;
  text(svg, x0, 12, tx(t, 'probability'), { class: 'value' });
  let y = 22;
  for (let i = 0; i < n; i++) {
    const p = isNum(probs[i]) ? clamp(probs[i], 0, 1) : 0;
    const chosen = i === chosenIndex;
    const g = node(svg, 'g', { 'data-choice': i });
    text(g, x0 - 6, y + rowH / 2, fit(choices[i], labelW - 8), { 'text-anchor': 'end', dy: '0.35em', class: chosen ? 'value' : 'label' });
    line(g, x0 + plotW, y - gap / 2, x0 + plotW, y + rowH + gap / 2, 'grid'); // the 100 % mark
    const s = `${(p * 100).toFixed(1)} %`;
    tip(rect(g, x0, y, p * plotW, rowH, { class: chosen ? 'bar-prob chosen' : 'bar-prob', 'data-kind': 'prob' }),
      `${choices[i]}: ${s}`);
    text(g, x0 + plotW + 4, y + rowH / 2, s, { class: 'value', dy: '0.35em' });
    y += rowH + gap;
  }
  line(svg, x0, 20, x0, y - gap + 2, 'axis');
  size(svg, w, y);
}
