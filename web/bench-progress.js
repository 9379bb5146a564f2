// The benchmark's progress in the page's language: the step it is measuring on the status line,
// and below it the figures of the last step it finished, which stay while the next one runs (a
// step's figures arrive together with the next step's start, so on one line they would never
// be seen). The engine sends each as numbers ({starting: {step, ...}} or {measured: {step, ...}}).

import { errorDetail, errorText } from './error-text.js';

const camel = (key) => key.replace(/_(\w)/g, (_, c) => c.toUpperCase());
const fixed = (digits) => (x) => Number(x).toFixed(digits);
const [one, two] = [fixed(1), fixed(2)];

/**
 * Why the bench skipped a batch (`batch_skipped`'s {code, reason, details}) in the language of
 * `t`: worded from its details, else its kind of error in that language and its message.
 */
export function skipReason(skip, t) {
  const worded = skip.details && t.errorDetails[skip.details.reason];
  return worded ? errorDetail(skip.reason, skip.details, t) : errorText({ message: skip.reason, code: skip.code }, t);
}

/** A batch step's name: "batch of 8 judgments[, shared prefix]". */
function batchName(s, strings, fill) {
  return fill(s.shared_prefix ? strings.starting.batchShared : strings.starting.batch, { n: s.judgments });
}

/** A profiled phase in a few figures (its GPU time, dispatches, their sum, the top kernel). */
function phaseText(p, strings, fill) {
  const values = { ms: two(p.gpu_ms), n: p.dispatches, sum: two(p.kernels_ms), kernel: p.top_kernel, kernelMs: two(p.top_kernel_ms) };
  return fill(p.top_kernel ? strings.measured.phaseTop : strings.measured.phase, values);
}

/** What a step about to be measured is called. */
function startingText(s, strings, fill) {
  if (s.step === 'batch') return batchName(s, strings, fill);
  return fill(strings.starting[camel(s.step)], { tokens: s.tokens });
}

/** A finished step's figures; `t`: all the page's strings (a skipped batch's reason is an error's). */
function measuredText(m, strings, fill, t) {
  const say = strings.measured;
  switch (m.step) {
    case 'micro':
      return fill(say.micro, { copy: one(m.copy_gbps), read: one(m.read_gbps), fma: one(m.fma_gflops), dispatch: one(m.dispatch_us) });
    case 'length': {
      const a = m.a;
      const gpu = a.gpu_prefill_ms != null && a.gpu_step_ms != null;
      const aText = fill(gpu ? say.aGpu : say.a, {
        total: one(a.total_ms), prefill: one(a.prefill_ms), steps: a.steps, step: two(a.step_ms),
        gpuPrefill: gpu ? one(a.gpu_prefill_ms) : '', gpuStep: gpu ? two(a.gpu_step_ms) : '',
      });
      return fill(say.length, { tokens: m.tokens, a: aText, b: one(m.b_ms), bFull: one(m.b_full_head_ms), speedup: two(m.speedup) });
    }
    case 'encode_ahead':
      return fill(say.encodeAhead, { ahead: two(m.step_ms), stepsAhead: m.steps_ahead, steps: m.steps, onDemand: two(m.step_ms_on_demand) });
    case 'batch':
      return fill(say.batch, { batch: batchName(m, strings, fill), ms: one(m.total_ms), rate: one(m.judgments_per_s) });
    case 'batch_skipped':
      return fill(say.batchSkipped, { batch: batchName(m, strings, fill), reason: skipReason(m, t) });
    case 'profile':
      return fill(say.profile, { tokens: m.tokens, prefill: phaseText(m.prefill, strings, fill), decode: phaseText(m.decode, strings, fill) });
    default:
      return m.step;
  }
}

/** A progress report as text in the language of `t` (all the page's strings: en.js or ko.js). */
export function benchProgressText(report, t, fill) {
  const strings = t.benchProgress;
  return report.starting ? startingText(report.starting, strings, fill) : measuredText(report.measured, strings, fill, t);
}

/** The bench's two status lines; they follow the page's language (`show` after a switch). */
export class BenchStatus {
  /** `t()` gives the page's strings now; `fill(text, values)` fills in {placeholders}. */
  constructor(statusEl, measuredEl, t, fill) {
    Object.assign(this, { statusEl, measuredEl, t, fill, starting: null, measured: null });
  }

  /** A progress report from the engine. */
  progress(report) {
    if (report.starting) this.starting = report;
    else this.measured = report;
    this.show();
  }

  show() {
    const t = this.t();
    const text = (report) => (report ? benchProgressText(report, t, this.fill) : '');
    if (this.starting) this.statusEl.textContent = `${t.benchRunning} ${text(this.starting)}`;
    this.measuredEl.textContent = text(this.measured);
  }

  /** The bench ended: both lines are cleared (the results, or its error, say the rest). */
  end() {
    this.starting = this.measured = null;
    this.statusEl.textContent = '';
    this.measuredEl.textContent = '';
  }
}
