// What the page says about a benchmark report: a one-line reading of each profiled phase, and
// the article's worked example beside this device's figures for the same prompt. Pure
// functions of the report: the numbers come from what was measured here, never assumed.
import { profiledPhases, readIsRoof } from './bench-charts.js';
import { formatMillions, formatMs, formatNum } from './svg.js';

/**
 * The article's worked example: a 600-token prompt, T_prefill about 60 ms and T_decode about
 * 30 ms. A generates the 8-token JSON reply; the article's B prefills one more token and
 * generates one: A = 60 + 8 x 30 = 300 ms, B = 61 + 1 x 30 = 91 ms, about 3.3x.
 */
export const ARTICLE = { prompt: 600, prefillMs: 60, prefillPlusOneMs: 61, decodeMs: 30, aSteps: 8, bSteps: 1 };

// split_sum is the second pass of a matmul split over K: part of the same linear layer.
const LINEAR = new Set(['matmul', 'matvec', 'linear_direct', 'split_sum']);
const share = (part, whole) => (whole > 0 ? Math.round((100 * part) / whole) : 0);

/** The reading of each profiled phase (prefill, then decode), in the page's language. */
export function kernelReadings(report, t, fill) {
  const layers = report?.model?.layers ?? 0;
  return profiledPhases(report).map((phase) => {
    const linear = phase.kernels.filter((k) => LINEAR.has(k.kernel));
    const linearMs = linear.reduce((a, k) => a + k.gpu_ms, 0);
    const values = {
      layers,
      perLayer: layers ? Math.round(phase.dispatches.filter((d) => d.layer != null).length / layers) : 0,
      count: phase.dispatch_count,
      share: share(linearMs, phase.kernels_ms),
      linear: linear.map((k) => k.kernel).join(', '),
      mb: formatMillions(report.model.decode_bytes ?? 0),
      tokens: phase.tokens,
    };
    if (phase.phase === 'decode') {
      const sentences = [fill(t.decodeReading, values)];
      // The step's floor: its weights read at this device's bandwidth (the higher probe), beside
      // what the step took on the GPU.
      const floor = report.roofline?.decode_floor_ms;
      if (floor > 0 && phase.gpu_ms > 0) {
        const read = readIsRoof(report.micro);
        sentences.push(fill(t.decodeFloor, {
          roof: read ? t.charts.readBw : t.charts.copyBw,
          gbps: formatNum(read ? report.micro.read_gbps : report.micro.copy_gbps),
          floor: formatMs(floor), ms: formatMs(phase.gpu_ms), share: share(floor, phase.gpu_ms),
        }));
      }
      // What the step's dispatches cost doing nothing, from the microbenchmark of this run.
      const us = report.micro?.dispatch_us;
      if (us > 0) {
        const fixed = { us: us.toFixed(1), count: phase.dispatch_count, ms: ((phase.dispatch_count * us) / 1000).toFixed(2) };
        sentences.push(fill(t.dispatchCost, fixed));
      }
      return sentences.join(' ');
    }
    const flops = linear.reduce((a, k) => a + k.flops, 0);
    const gflops = linearMs > 0 ? flops / (linearMs * 1e6) : 0;
    const fma = report.micro?.fma_gflops > 0 ? share(gflops, report.micro.fma_gflops) : 0;
    return fill(t.prefillReading, { ...values, gflops: gflops.toFixed(1), fma });
  });
}

/**
 * The article's figures and this device's for the same prompt length: T_prefill from the sweep
 * when it measured a prompt within 10% of 600 tokens, else from the fitted cost model; T_decode
 * is the measured median step. `device` is null when neither gives a positive T_prefill (a cost
 * model fitted to short, noisy prompts can extrapolate below zero). Null without a cost model.
 */
export function articleComparison(report) {
  const cm = report?.cost_model;
  if (!cm) return null;
  const p = ARTICLE.prompt;
  const near = (report.sweep ?? []).find((r) => Math.abs(r.b.prompt_tokens - p) <= p / 10);
  const prefillMs = near ? near.b.prefill_ms : cm.prefill.fixed_ms + cm.prefill.per_token_ms * p;
  const perToken = Math.max(0, cm.prefill.per_token_ms);
  const device = prefillMs > 0 && report.decode_ms_per_step > 0
    ? { measured: Boolean(near), prompt: near ? near.b.prompt_tokens : p, prefillMs, decodeMs: report.decode_ms_per_step }
    : null;
  return {
    article: figures(ARTICLE, ARTICLE.prefillPlusOneMs),
    device: device && figures(device, device.prefillMs + perToken),
  };
}

/** A and both Bs of one column: the article's B (prefill of P + 1, one decode step) and ours (the
 * answer read from the prefill itself: no decode step). */
function figures(c, prefillPlusOne) {
  const a = c.prefillMs + ARTICLE.aSteps * c.decodeMs;
  const b = prefillPlusOne + ARTICLE.bSteps * c.decodeMs;
  // One decode step costs as much as prefilling this many prompt tokens.
  const decodeInTokens = c.decodeMs / (c.prefillMs / c.prompt);
  return { ...c, a, b, bHere: c.prefillMs, speedup: a / b, speedupHere: a / c.prefillMs, decodeInTokens };
}

/** How close a device's decode step (in prompt tokens) must be to the article's to read "about
 * the same": within a quarter either way, A / B as the article counts it stays within ±12%. */
const ABOUT_THE_ARTICLE = 1.25;

/**
 * Which of the article's sentences fits this device: its A / B below, about or above the
 * article's. A / B (the article's way) grows with what one decode step costs in prompt tokens,
 * so that comparison decides; 'unmeasured' without device figures.
 */
export function articleVerdict(comparison) {
  if (!comparison.device) return 'unmeasured';
  const ratio = comparison.device.decodeInTokens / comparison.article.decodeInTokens;
  return ratio < 1 / ABOUT_THE_ARTICLE ? 'below' : ratio > ABOUT_THE_ARTICLE ? 'above' : 'within';
}
