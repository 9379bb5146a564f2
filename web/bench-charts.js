// The benchmark's charts (sweep, batches, roofline, kernel profile), in the same hand-written
// SVG as charts.js: each takes a container, the bench report and translated labels, and draws
// what the report holds (speed-ups, predictions, fractions) without recomputing it.

import {
  formatMs, formatNum, tickMs, tickNum, isNum, clamp, rd, tx, stratName, median, textWidth, fit,
  node, text, rect, line, tip, frame, size, noData, yGrid, xTicks, legend, polyline,
} from './svg.js';

/** The speed-up of B over A that the article reports for judgments ("2-3x"). */
export const ARTICLE_BAND = [2, 3];

// ---------------------------------------------------------------------------------------
// 1. Sweep over prompt length: measured totals vs the cost model, and the speed-up A/B.

export function sweep(el, report, t) {
  const rows = (report && Array.isArray(report.sweep) ? report.sweep : [])
    .filter((r) => r && (r.a || r.b || r.b_full_head));
  if (!rows.length) return noData(el, t);
  const { svg, w } = frame(el, `${tx(t, 'totalMs')} / ${tx(t, 'speedupAxis')} — ${tx(t, 'promptTokens')}`);
  const unit = t && t.tokens ? String(t.tokens) : 'tokens';

  const series = [
    { key: 'a', cls: 'bar-a', name: stratName(t, 'a') },
    { key: 'b', cls: 'bar-b', name: stratName(t, 'b') },
    { key: 'b_full_head', cls: 'bar-bfull', name: stratName(t, 'b-full-head'), series: 'bfull' },
  ];
  const pts = series.flatMap((s) => rows
    .filter((r) => r[s.key] && isNum(r[s.key].prompt_tokens) && isNum(r[s.key].total_ms))
    .map((r) => ({ s, p: r[s.key].prompt_tokens, ms: r[s.key].total_ms })));
  const xP = (r) => (r.b && isNum(r.b.prompt_tokens) ? r.b.prompt_tokens : r.length);

  // shared log2 x domain over every prompt length shown, padded by a quarter octave
  const allP = [...pts.map((q) => q.p), ...rows.map(xP)].filter((p) => isNum(p) && p > 0);
  if (!allP.length) return noData(el, t);
  const lo = Math.log2(Math.min(...allP)) - 0.25, hi = Math.log2(Math.max(...allP)) + 0.25;
  const xAxis = (g, box) => {
    const sx = (p) => box.x + ((Math.log2(p) - lo) / (hi - lo)) * box.w;
    const ticks = [];
    for (let k = Math.ceil(lo); k <= Math.floor(hi); k++) ticks.push({ x: sx(2 ** k), s: `${2 ** k} ${unit}` });
    xTicks(g, ticks, box.y + box.h, box.x, box.x + box.w);
    text(g, box.x + box.w, box.y + box.h + 30, tx(t, 'promptTokens'), { 'text-anchor': 'end' });
    return sx;
  };

  // cost model: T(P) = fixed + per_token × P + N × decode_ms
  const cm = report.cost_model;
  const model = cm && cm.prefill && isNum(cm.prefill.fixed_ms) && cm.prefill.per_token_ms > 0 && isNum(cm.decode_ms)
    ? (p, n) => cm.prefill.fixed_ms + cm.prefill.per_token_ms * p + n * cm.decode_ms : null;
  const nA = median(rows.map((r) => r.a && r.a.decode_steps));

  // panels side by side when wide, stacked when narrow
  const side = w >= 620, gap = 24, ph = 230;
  const w1 = side ? Math.round(w * 0.58) - gap / 2 : w;
  const boxes = side
    ? [{ x: 0, y: 0, w: w1 }, { x: w1 + gap, y: 0, w: w - w1 - gap }]
    : [{ x: 0, y: 0, w }, { x: 0, y: ph + gap, w }];

  const c = { t, unit, rows, series, pts, xP, xAxis, lo, hi, model, nA, side, ph };
  sweepTimes(node(svg, 'g', { 'data-panel': 'time' }), boxes[0], c);
  const bottom = sweepSpeedups(node(svg, 'g', { 'data-panel': 'speedup' }), boxes[1], c);
  size(svg, w, bottom);
}

/** Left panel of the sweep: total ms vs prompt tokens, measured points and the cost model. */
function sweepTimes(g, b, { t, unit, series, pts, xAxis, lo, hi, model, nA, ph }) {
  text(g, b.x, b.y + 12, tx(t, 'totalMs'), { class: 'value' });
  const items = series.map((s) => ({ cls: `point-measured ${s.cls}`, label: s.name, shape: 'dot' }));
  if (model) items.push({ cls: 'line-fit', label: tx(t, 'model'), shape: 'line' });
  const lh = legend(g, items, b.x, b.y + 30, b.w);
  const box = { x: b.x + 4, y: b.y + 44 + lh, w: b.w - 10, h: ph - 44 - lh - 40 };
  const fitMax = model ? Math.max(model(2 ** hi, nA), model(2 ** hi, 0)) : 0;
  const sy = yGrid(g, box, Math.max(fitMax, ...pts.map((q) => q.ms)) * 1.05, tickMs);
  const sx = xAxis(g, box);
  if (model) {
    for (const [key, n, name] of [['a', nA, stratName(t, 'a')], ['b', 0, stratName(t, 'b')]]) {
      let d = '';
      for (let i = 0; i <= 48; i++) {
        const p = 2 ** (lo + ((hi - lo) * i) / 48);
        d += `${i ? 'L' : 'M'}${rd(sx(p))},${rd(sy(model(p, n)))}`;
      }
      tip(node(g, 'path', { d, class: 'line-fit', 'data-kind': 'fit', 'data-series': key }),
        `${tx(t, 'model')}: ${name}, N = ${formatNum(n)}`);
    }
  }
  for (const q of pts) {
    tip(node(g, 'circle', {
      cx: rd(sx(q.p)), cy: rd(sy(q.ms)), r: 3.5, class: `point-measured ${q.s.cls}`,
      'data-kind': 'point', 'data-series': q.s.series ?? q.s.key,
    }), `${tx(t, 'measured')} ${q.s.name}: ${q.p} ${unit}, ${formatMs(q.ms)}`);
  }
}

/** Right panel of the sweep: the speed-up A/B vs prompt tokens, measured and predicted;
 * returns its bottom edge. */
function sweepSpeedups(g, b, { t, unit, rows, xP, xAxis, model, side, ph }) {
  // The report holds the measured and predicted speed-ups; they are drawn, not recomputed.
  const predicted = (r) => (model && r.predicted_speedup > 0 ? r.predicted_speedup : null);
  const sp = [
    { key: 'b', cls: 'bar-b', name: `${stratName(t, 'a')} / ${stratName(t, 'b')}`, v: (r) => r.speedup },
    { key: 'bfull', cls: 'bar-bfull', name: `${stratName(t, 'a')} / ${stratName(t, 'b-full-head')}`,
      v: (r) => r.speedup_full_head },
  ].map((s) => ({ ...s, pts: rows.map((r) => [xP(r), s.v(r)]).filter(([p, v]) => isNum(p) && isNum(v)) }))
    .filter((s) => s.pts.length);
  const pred = rows.map((r) => [xP(r), predicted(r)]).filter(([p, v]) => isNum(p) && isNum(v));

  text(g, b.x, b.y + 12, tx(t, 'speedupAxis'), { class: 'value' });
  const items = sp.map((s) => ({ cls: `point-measured ${s.cls}`, label: `${tx(t, 'measured')} ${s.name}`, shape: 'dot' }));
  // The model is fitted to full-vocabulary prefills: its ratio is A over B with the full head.
  const predName = `${tx(t, 'model')}: ${stratName(t, 'a')} / ${stratName(t, 'b-full-head')}`;
  if (pred.length) items.push({ cls: 'line-fit', label: predName, shape: 'line' });
  const lh = legend(g, items, b.x, b.y + 30, b.w);
  const hh = side ? ph : ph - 20;
  const box = { x: b.x + 4, y: b.y + 44 + lh, w: b.w - 10, h: hh - 44 - lh - 40 };
  // The article's "2-3x" band is always in view, so the device's curve is read against it.
  const vmax = Math.max(ARTICLE_BAND[1], ...pred.map((q) => q[1]), ...sp.flatMap((s) => s.pts.map((q) => q[1])));
  const sy = yGrid(g, box, vmax * 1.1, (v) => `${tickNum(v)}×`);
  const sx = xAxis(g, box);
  const [bandLo, bandHi] = ARTICLE_BAND.map(sy);
  tip(rect(g, box.x, bandHi, box.w, bandLo - bandHi, { class: 'band-article', 'data-kind': 'article-band' }),
    tx(t, 'articleBand'));
  text(g, box.x + 4, bandHi + 11, fit(tx(t, 'articleBand'), box.w - 8), { class: 'label' });
  if (pred.length > 1) {
    node(g, 'path', {
      d: pred.map(([p, v], i) => `${i ? 'L' : 'M'}${rd(sx(p))},${rd(sy(v))}`).join(''),
      class: 'line-fit dashed', 'data-kind': 'fit', 'data-series': 'predicted',
    });
  }
  for (const s of sp) {
    const xy = s.pts.map(([p, v]) => [sx(p), sy(v)]);
    polyline(g, xy, s.cls, { 'data-kind': 'line', 'data-series': s.key });
    s.pts.forEach(([p, v], i) => tip(node(g, 'circle', {
      cx: rd(xy[i][0]), cy: rd(xy[i][1]), r: 3.5, class: `point-measured ${s.cls}`,
      'data-kind': 'point', 'data-series': s.key,
    }), `${s.name}: ${p} ${unit}, ${formatNum(v)}×`));
  }
  return b.y + hh;
}

// ---------------------------------------------------------------------------------------
// 2. Batching: latency per batch (bars) and judgments/s (lines), plain vs shared prefix.

export function batchChart(el, report, t) {
  const rows = (report && Array.isArray(report.batch) ? report.batch : [])
    .filter((r) => r && isNum(r.judgments) && (isNum(r.total_ms) || isNum(r.judgments_per_s)));
  if (!rows.length) return noData(el, t);
  const { svg, w } = frame(el, `${tx(t, 'latency')} / ${tx(t, 'throughput')} — ${tx(t, 'batchSize')}`);

  const ns = [...new Set(rows.map((r) => r.judgments))].sort((a, b) => a - b);
  const series = [
    { key: 'plain', shared: false, cls: 'bar-a', name: tx(t, 'plain') },
    { key: 'shared', shared: true, cls: 'bar-b', name: tx(t, 'shared') },
  ].filter((s) => rows.some((r) => !!r.shared_prefix === s.shared));
  const get = (n, s) => rows.find((r) => r.judgments === n && !!r.shared_prefix === s.shared);

  const side = w >= 620, gap = 24, ph = 220;
  const w1 = side ? Math.round((w - gap) / 2) : w;
  const boxes = side ? [{ x: 0, y: 0, w: w1 }, { x: w1 + gap, y: 0, w: w - w1 - gap }]
    : [{ x: 0, y: 0, w }, { x: 0, y: ph + gap, w }];

  // common panel layout; returns the plot box and the x position of each batch size
  const panel = (g, b, title) => {
    text(g, b.x, b.y + 12, title, { class: 'value' });
    const lh = legend(g, series.map((s) => ({ cls: s.cls, label: s.name })), b.x, b.y + 30, b.w);
    const box = { x: b.x + 4, y: b.y + 44 + lh, w: b.w - 10, h: ph - 44 - lh - 40 };
    const band = box.w / ns.length;
    const cx = (n) => box.x + band * (ns.indexOf(n) + 0.5);
    return { box, band, cx };
  };
  const axis = (g, box, cx) => {
    xTicks(g, ns.map((n) => ({ x: cx(n), s: String(n) })), box.y + box.h, box.x, box.x + box.w);
    text(g, box.x + box.w, box.y + box.h + 30, tx(t, 'batchSize'), { 'text-anchor': 'end' });
  };

  // --- latency: grouped bars
  {
    const g = node(svg, 'g', { 'data-panel': 'latency' });
    const { box, band, cx } = panel(g, boxes[0], tx(t, 'latency'));
    const sy = yGrid(g, box, Math.max(...rows.map((r) => r.total_ms).filter(isNum)) * 1.05, tickMs);
    const bw = Math.min(26, (band * 0.7) / series.length);
    for (const n of ns) {
      series.forEach((s, i) => {
        const r = get(n, s);
        if (!r || !isNum(r.total_ms)) return;
        const x = cx(n) - (bw * series.length) / 2 + i * bw;
        tip(rect(g, x + 1, sy(r.total_ms), bw - 2, sy(0) - sy(r.total_ms), {
          class: s.cls, 'data-kind': 'bar', 'data-series': s.key, 'data-n': n,
        }), `${s.name}, ${n}: ${formatMs(r.total_ms)}`);
      });
    }
    axis(g, box, cx);
  }

  // --- throughput: one line with points per series
  {
    const g = node(svg, 'g', { 'data-panel': 'throughput' });
    const unit = tx(t, 'throughput');
    const { box, cx } = panel(g, boxes[1], unit);
    const sy = yGrid(g, box, Math.max(...rows.map((r) => r.judgments_per_s).filter(isNum), 0.1) * 1.1,
      (v) => `${tickNum(v)} ${unit}`);
    for (const s of series) {
      const pts = ns.map((n) => get(n, s)).filter((r) => r && isNum(r.judgments_per_s))
        .map((r) => ({ r, x: cx(r.judgments), y: sy(r.judgments_per_s) }));
      polyline(g, pts.map((p) => [p.x, p.y]), s.cls, { 'data-kind': 'line', 'data-series': s.key });
      for (const p of pts) {
        tip(node(g, 'circle', { cx: rd(p.x), cy: rd(p.y), r: 3.5, class: `point-measured ${s.cls}`, 'data-kind': 'point', 'data-series': s.key }),
          `${s.name}, ${p.r.judgments}: ${formatNum(p.r.judgments_per_s)} ${unit}`);
      }
    }
    axis(g, box, cx);
    size(svg, w, boxes[1].y + ph);
  }
}

// ---------------------------------------------------------------------------------------
// 3. Roofline: achieved decode GB/s and prefill GFLOP/s against the device's measured peaks,
//    on the wall clock (every overhead: what a judgment costs) and, where the device has
//    timestamps, on the GPU's clock (the kernels alone). The gap between the two is the host's
//    share: submits, readbacks, waiting.

/** Whether this device's read probe beat its copy probe, making read bandwidth decode's roof. */
export const readIsRoof = (micro) => isNum(micro?.read_gbps) && micro.read_gbps > (micro.copy_gbps ?? 0);

export function roofline(el, report, t) {
  const rf = report && report.roofline;
  const mc = (report && report.micro) || {};
  // Decode's fractions are of the higher of the two bandwidth probes, its roof: copy, or read (a
  // kernel that reads the weights as the linear kernels do and writes nothing: the higher one
  // where stores are slow). The other probe is a second bar.
  const read = readIsRoof(mc);
  const copyBw = { v: mc.copy_gbps, name: tx(t, 'copyBw') }, readBw = { v: mc.read_gbps, name: tx(t, 'readBw') };
  const [roof, other] = read ? [readBw, copyBw] : [copyBw, readBw];
  const groups = [
    { kind: 'decode', title: tx(t, 'decode'), value: rf?.decode_gbps, peak: roof.v, peakName: roof.name,
      otherPeaks: [other],
      unit: 'GB/s', frac: read ? rf?.decode_read_fraction : rf?.decode_fraction, gpuValue: rf?.gpu_decode_gbps,
      gpuFrac: read ? rf?.gpu_decode_read_fraction : rf?.gpu_decode_fraction,
      cls: 'bar-decode' },
    { kind: 'prefill', title: tx(t, 'prefill'), value: rf?.prefill_gflops, peak: mc.fma_gflops, peakName: tx(t, 'fma'),
      unit: 'GFLOP/s', frac: rf?.prefill_fraction, gpuValue: rf?.gpu_prefill_gflops, gpuFrac: rf?.gpu_prefill_fraction,
      cls: 'bar-prefill' },
  ].filter((g) => isNum(g.value));
  if (!groups.length) return noData(el, t);
  const { svg, w } = frame(el, groups.map((g) => `${g.title} (${g.unit})`).join(', '));

  const bars = (gr) => {
    const hasPeak = isNum(gr.peak) && gr.peak > 0;
    const list = [{ name: `${gr.title} · ${tx(t, 'wall')}`, v: gr.value, frac: gr.frac, cls: gr.cls, kind: 'measured' }];
    if (isNum(gr.gpuValue)) {
      list.push({ name: `${gr.title} · ${tx(t, 'kernelsOnly')}`, v: gr.gpuValue, frac: gr.gpuFrac, cls: `${gr.cls} alt`, kind: 'gpu' });
    }
    for (const b of list) {
      if (!isNum(b.frac)) b.frac = hasPeak ? b.v / gr.peak : null;
    }
    if (hasPeak) list.push({ name: gr.peakName, v: gr.peak, frac: null, cls: 'bar-peak', kind: 'peak' });
    for (const p of gr.otherPeaks ?? []) {
      if (isNum(p.v) && p.v > 0) list.push({ name: p.name, v: p.v, frac: null, cls: 'bar-peak', kind: 'peak' });
    }
    return list;
  };
  const names = groups.flatMap((g) => bars(g).map((b) => b.name));
  const labelW = clamp(Math.max(...names.map((s) => textWidth(s))) + 10, 40, w * 0.4);
  const valueOf = (b, unit) => `${formatNum(b.v)} ${unit}${b.frac != null ? ` · ${(b.frac * 100).toFixed(1)} %` : ''}`;
  const valueW = Math.max(...groups.flatMap((g) => bars(g).map((b) => textWidth(valueOf(b, g.unit))))) + 10;
  const x0 = labelW, plotW = Math.max(20, w - labelW - valueW);
  const barH = 16;
  let y = 4;
  for (const gr of groups) {
    const g = node(svg, 'g', { 'data-metric': gr.kind });
    const list = bars(gr);
    const top = Math.max(...list.map((b) => b.v)) || 1;
    const sx = (v) => x0 + (v / top) * plotW;
    const measured = list[0];
    if (measured.frac != null) {
      text(g, x0, y + 12, fit(tx(t, 'ofPeak').replace('{pct}', (measured.frac * 100).toFixed(1)).replace('{peak}', gr.peakName), w - x0),
        { class: 'value', 'data-kind': 'fraction' });
    }
    y += 20;
    const barsTop = y;
    for (const b of list) {
      text(g, x0 - 6, y + barH / 2, fit(b.name, labelW - 8), { 'text-anchor': 'end', dy: '0.35em' });
      const s = valueOf(b, gr.unit);
      tip(rect(g, x0, y, sx(b.v) - x0, barH, { class: b.cls, 'data-kind': b.kind }), `${b.name}: ${s}`);
      text(g, sx(b.v) + 4, y + barH / 2, s, { class: 'value', dy: '0.35em', 'data-kind': `${b.kind}-value` });
      y += barH + 6;
    }
    line(g, x0, barsTop - 2, x0, y - 4, 'axis');
    y += 10;
  }
  size(svg, w, y);
}

// ---------------------------------------------------------------------------------------
// 4. Where the time goes: one prefill and the decode step after it, kernel by kernel (the
//    bench's profile at its longest prompt), each kernel's time, and how close it came to this
//    device's bandwidth (the higher of copy and read) or FMA rate (whichever it is nearer: its
//    roof).

/** The profile's phases at its longest prompt: [prefill, decode], or [] without a profile. */
export function profiledPhases(report) {
  const phases = report?.profile?.phases ?? [];
  const longest = Math.max(0, ...phases.filter((p) => p.phase === 'prefill').map((p) => p.tokens));
  return ['prefill', 'decode'].map((kind) =>
    phases.find((p) => p.phase === kind && (kind === 'prefill' ? p.tokens : p.context) === longest)).filter(Boolean);
}

export function kernels(el, report, t) {
  const phases = profiledPhases(report);
  if (!phases.length) return noData(el, t);
  const { svg, w } = frame(el, tx(t, 'kernelsTitle'));
  const names = phases.flatMap((p) => p.kernels.map((k) => k.kernel));
  const labelW = clamp(Math.max(...names.map((n) => textWidth(n))) + 10, 60, w * 0.3);
  // Each bar's label: its time and how near it came to its roof (bandwidth or FMA rate).
  const read = readIsRoof(report.micro);
  const pct = (f) => (100 * f).toFixed(0);
  const bandwidthFraction = (k) => (read ? k.read_fraction : k.copy_fraction);
  const isMemoryBound = (k) => bandwidthFraction(k) >= k.fma_fraction;
  const roofLabel = (k) => `${formatMs(k.gpu_ms)} · ${isMemoryBound(k)
    ? `${formatNum(k.gbps)} GB/s, ${tx(t, read ? 'ofRead' : 'ofCopy').replace('{pct}', pct(bandwidthFraction(k)))}`
    : `${formatNum(k.gflops)} GFLOP/s, ${tx(t, 'ofFma').replace('{pct}', pct(k.fma_fraction))}`}`;
  const labels = phases.flatMap((p) => p.kernels.map(roofLabel));
  const valueW = clamp(Math.max(...labels.map((l) => textWidth(l))) + 8, 80, w * 0.5);
  const x0 = labelW, plotW = Math.max(40, w - labelW - valueW);
  const barH = 14;
  let y = 4;
  for (const phase of phases) {
    const g = node(svg, 'g', { 'data-phase': phase.phase });
    const title = phase.phase === 'prefill'
      ? tx(t, 'prefillTitle').replace('{tokens}', phase.tokens)
      : tx(t, 'decodeTitle').replace('{context}', phase.context);
    // Short phases are the mean of several runs (a browser rounds GPU timestamps to 0.1 ms).
    const runs = phase.runs > 1 ? ` · ${tx(t, 'meanOfRuns').replace('{runs}', phase.runs)}` : '';
    text(g, 0, y + 12, fit(`${title} · GPU ${formatMs(phase.gpu_ms)} · ${phase.dispatch_count} ${tx(t, 'dispatches')}${runs}`, w),
      { class: 'value' });
    y += 20;
    const top = Math.max(...phase.kernels.map((k) => k.gpu_ms), 1e-9);
    for (const k of phase.kernels) {
      const memory = isMemoryBound(k);
      const label = roofLabel(k);
      text(g, x0 - 6, y + barH / 2, fit(k.kernel, labelW - 8), { 'text-anchor': 'end', dy: '0.35em' });
      const width = Math.max(1, (k.gpu_ms / top) * plotW);
      tip(rect(g, x0, y, width, barH, {
        class: memory ? 'bar-decode' : 'bar-prefill', 'data-kind': 'kernel', 'data-kernel': k.kernel,
      }), `${k.kernel} × ${k.count}: ${label}; ${formatNum(k.bytes / 1e6)} MB, ${formatNum(k.flops / 1e9)} GFLOP`);
      text(g, x0 + width + 4, y + barH / 2, fit(label, w - x0 - width - 6), { class: 'value', dy: '0.35em' });
      y += barH + 4;
    }
    line(g, x0, y - (barH + 4) * phase.kernels.length - 2, x0, y - 2, 'axis');
    y += 12;
  }
  size(svg, w, y);
}
