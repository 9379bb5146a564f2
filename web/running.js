// Long runs on slow devices: an estimate of the duration before (from this device's last
// measurements), the phase and step with the elapsed time during, and a Cancel that stops the
// run at its next forward pass and leaves the page as it was.

/** Decode steps of A's reply `{"choice": "<c>"}` (about 8 tokens) and of A-free's. */
const REPLY_STEPS = { a: 8, 'a-free': 10 };

/**
 * Milliseconds a run of `strategies` on a prompt of `promptTokens` should take, from the last
 * benchmark's cost model, else the last judgments' timings (and a probe's decode step where
 * they measured none), else a probe ({tokens, prefill_ms, decode_ms}: a short prefill and one
 * decode step); null where what the run needs was not measured (a decode step is not a prompt
 * token: it reads every weight again).
 */
export function estimateMs({ report, judgments, probe }, promptTokens, strategies) {
  let prefill;
  let decode;
  const cm = report?.cost_model;
  if (cm && cm.prefill.per_token_ms > 0) {
    prefill = (p) => cm.prefill.fixed_ms + cm.prefill.per_token_ms * p;
    decode = cm.decode_ms;
  } else {
    const last = judgments?.find((j) => j.prompt_tokens > 0);
    if (last) {
      // Prefill time grows with the prompt; a decode step does not.
      prefill = (p) => (last.timings_ms.prefill * p) / last.prompt_tokens;
    } else if (probe) {
      // A short prefill carries the fixed cost too: scaled up, it overestimates (a safe side).
      prefill = (p) => (probe.prefill_ms * Math.max(p, probe.tokens)) / probe.tokens;
    } else {
      return null;
    }
    const steps = (judgments ?? []).flatMap((j) => j.timings_ms.decode);
    decode = steps.length ? steps.reduce((a, b) => a + b, 0) / steps.length : probe?.decode_ms;
  }
  if (strategies.some((s) => REPLY_STEPS[s]) && !(decode > 0)) return null;
  return strategies.reduce((sum, s) => sum + prefill(promptTokens) + (REPLY_STEPS[s] ? REPLY_STEPS[s] * decode : 0), 0);
}

/** "12 s", "3 min" in the language of `t` (the page's strings; English without). */
export function duration(ms, t = null) {
  const s = ms / 1000;
  const [seconds, minutes] = [t?.durationSeconds ?? '{n} s', t?.durationMinutes ?? '{n} min'];
  return s < 90 ? seconds.replace('{n}', Math.max(1, Math.round(s))) : minutes.replace('{n}', Math.round(s / 60));
}

/**
 * The status line of a run: what it is doing and for how long, refreshed every half second.
 * `announce` (a live region) hears the steps and the end only: a screen reader would read the
 * clock's every tick.
 */
export class RunStatus {
  constructor(el, t, fill, announce = null) {
    Object.assign(this, { el, t, fill, announce, timer: null, step: '', start: 0, estimate: '' });
  }

  /** Starts the clock; `estimate` (text) stays beside it. */
  begin(estimate = '') {
    this.end();
    Object.assign(this, { start: performance.now(), step: this.t().busy, estimate });
    this.show();
    this.timer = setInterval(() => this.show(), 500);
  }

  /** A forward pass is about to run ({strategy, phase, step, tokens}). */
  progress(p) {
    const t = this.t();
    const name = t.charts.strategy[p.strategy] ?? p.strategy;
    this.step = p.phase === 'prefill'
      ? this.fill(t.stepPrefill, { name, tokens: p.tokens })
      : this.fill(t.stepDecode, { name, n: p.step + 1 });
  }

  show() {
    const elapsed = duration(performance.now() - this.start, this.t());
    this.el.textContent = [this.step, elapsed, this.estimate].filter(Boolean).join(' · ');
    this.say(this.step);
  }

  say(text) {
    if (this.announce && this.announce.textContent !== text) this.announce.textContent = text;
  }

  /** Stops the clock; `text` replaces the status line. */
  end(text = '') {
    clearInterval(this.timer);
    this.timer = null;
    this.el.textContent = text;
    this.say(text);
  }
}
