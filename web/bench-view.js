// The benchmark's results on the page: the cost model line, the charts, the article's worked
// example beside this device's figures, and where the time goes kernel by kernel.
import { batchChart, kernels, roofline, sweep } from './bench-charts.js';
import { skipReason } from './bench-progress.js';
import { articleComparison, articleVerdict, kernelReadings } from './lesson.js';

const $ = (id) => document.getElementById(id);
/** Milliseconds as the table shows them. */
export const ms = (v) => `${v.toFixed(v < 10 ? 1 : 0)} ms`;

/** Draws `report` into the bench section with the strings `t` (filled by `fill`). */
export function showBench(report, t, fill) {
  const m = report.cost_model;
  const perStep = fill(t.decodePerStep, { ms: report.decode_ms_per_step.toFixed(1) });
  // A fit to short, noisy prompts can slope down: no formula is shown for it, nor drawn.
  const model = !m ? t.costModelNone : !(m.prefill.per_token_ms > 0) ? t.costModelFlat
    : fill(t.costModel, { a: m.prefill.fixed_ms.toFixed(1), b: m.prefill.per_token_ms.toFixed(3), d: m.decode_ms.toFixed(1) });
  const runs = report.repeats > 1 ? fill(t.runsPerPoint, { n: report.repeats }) : t.runPerPoint;
  $('cost-model').textContent = `${model} · ${perStep} · ${runs}`;
  const merged = report.sweep_merged ?? [];
  const shortest = Math.min(...(report.sweep ?? []).map((r) => r.b.prompt_tokens));
  $('sweep-merged').hidden = !merged.length;
  $('sweep-merged').textContent = merged.length ? fill(t.sweepMerged, { lengths: merged.join(', '), tokens: shortest }) : '';
  sweep($('chart-sweep'), report, t.charts);
  batchChart($('chart-batch'), report, t.charts);
  // Sizes past this device's limits are left out of the chart: say which, and why.
  const skipped = (report.batch_skipped ?? []).map((s) => fill(t.batchSkippedItem, {
    n: s.judgments, sharing: s.shared_prefix ? t.charts.shared : t.charts.plain, reason: skipReason(s, t),
  }));
  $('batch-skipped').hidden = !skipped.length;
  $('batch-skipped').textContent = skipped.length ? fill(t.batchSkipped, { list: skipped.join('; ') }) : '';
  roofline($('chart-roofline'), report, t.charts);
  showArticle(report, t, fill);
  $('kernels-section').hidden = !report.profile;
  if (report.profile) {
    kernels($('chart-kernels'), report, t.charts);
    const readings = kernelReadings(report, t, fill);
    $('kernel-readings').replaceChildren(...readings.map((r) => Object.assign(document.createElement('li'), { textContent: r })));
  }
}

/** The article's example and this device's figures, side by side, and what sets them apart. */
function showArticle(report, t, fill) {
  const c = articleComparison(report);
  $('article-section').hidden = !c;
  if (!c) return;
  const { article: a, device: d } = c;
  const col = (f) => [f(a), d ? f(d) : '—'];
  const rows = [
    [t.articlePrompt, ...col((x) => `${x.prompt}`)],
    [t.articlePrefill, ...col((x) => ms(x.prefillMs))],
    [t.articleDecode, ...col((x) => ms(x.decodeMs))],
    [t.articleA, ...col((x) => ms(x.a))],
    [t.articleB, ...col((x) => ms(x.b))],
    [t.articleSpeedup, ...col((x) => `${x.speedup.toFixed(1)}×`)],
    [t.articleBHere, ...col((x) => ms(x.bHere))],
    [t.articleSpeedupHere, ...col((x) => `${x.speedupHere.toFixed(1)}×`)],
  ];
  const table = $('article-table');
  const head = document.createElement('tr');
  for (const h of ['', t.articleColumn, d?.measured ? fill(t.deviceMeasured, { prompt: d.prompt }) : t.devicePredicted]) {
    head.append(Object.assign(document.createElement('th'), { textContent: h }));
  }
  const body = rows.map(([label, ...cells]) => {
    const tr = document.createElement('tr');
    tr.append(Object.assign(document.createElement('th'), { textContent: label, scope: 'row' }));
    for (const cell of cells) tr.append(Object.assign(document.createElement('td'), { textContent: cell }));
    return tr;
  });
  table.replaceChildren(head, ...body);
  const verdict = articleVerdict(c);
  $('article-verdict').textContent = fill(t.articleVerdict[verdict], {
    tokens: d?.decodeInTokens.toFixed(0),
    article: a.decodeInTokens.toFixed(0),
    speedup: d?.speedup.toFixed(1),
    articleSpeedup: a.speedup.toFixed(1),
    prompt: a.prompt,
  });
}
