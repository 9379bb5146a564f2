// The 777-judgment workload on the page: its plan (scaled down on a slow device, and saying
// so), the run with its progress, and the totals with the projection to the full workload on
// this device and on the article's hosted GPU.
import { duration } from './running.js';
import { FULL, SCALED, projectWorkload, runWorkload, workloadDocuments } from './workload.js';

const $ = (id) => document.getElementById(id);

/** The size to run: the full workload, or the scaled one on a CPU-emulated device. */
export function workloadSize(gpuInfo) {
  return gpuInfo?.adapter?.cpuLike || gpuInfo?.direct_kernels ? SCALED : FULL;
}

/** Says what a run of `size` will do. */
export function showWorkloadPlan(size, t, fill) {
  const scaled = size !== FULL;
  $('workload-plan').textContent = fill(scaled ? t.workloadScaled : t.workloadFull, {
    documents: size.documents, questions: size.questions, judgments: size.documents * size.questions,
  });
}

/**
 * Runs the workload of `size` in `lang` through `judgeBatch(requests)` and shows the result;
 * `userMessage` builds each request's user text. Resolves to the result with its projection.
 */
export async function runWorkloadOnPage({ size, lang, t, fill, judgeBatch, userMessage, costModel }) {
  const batches = workloadDocuments(lang, size).map((d) =>
    d.questions.map((q) => ({ system: d.system, user: userMessage(d.document, q), choices: d.choices })));
  const status = $('workload-result');
  const result = await runWorkload(batches, judgeBatch, (done, total) => {
    status.textContent = fill(t.workloadProgress, { done, total });
  });
  const projection = projectWorkload(result, costModel);
  const longest = Math.max(...result.records.map((r) => r.timings_ms.total));
  const lines = [
    fill(t.workloadMeasured, {
      judgments: result.judgments, documents: size.documents, questions: size.questions,
      time: duration(result.totalMs, t), rate: result.judgmentsPerS.toFixed(1), longest: `${longest.toFixed(0)} ms`,
    }),
    projection.deviceMs === null ? t.workloadNoModel : fill(t.workloadDevice, {
      time: duration(projection.deviceMs, t), bound: `${projection.latencyBoundMs.toFixed(0)} ms`,
    }),
    fill(t.workloadHosted, {
      time: duration(projection.hostedMs, t), bound: `${projection.hostedLatencyMs.toFixed(0)} ms`,
    }),
  ];
  status.replaceChildren(...lines.map((l) => Object.assign(document.createElement('p'), { textContent: l })));
  return { ...result, projection };
}
