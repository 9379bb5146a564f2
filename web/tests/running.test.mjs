// The run status on slow devices, on constructed measurements (node only): the estimate from the
// last benchmark or the last judgments, and the phase and step lines in both languages.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import en from '../i18n/en.js';
import ko from '../i18n/ko.js';
import { RunStatus, duration, estimateMs } from '../running.js';

const fill = (text, values) => text.replace(/\{(\w+)\}/g, (_, k) => values[k] ?? '');

test('the estimate follows the cost model, else the last judgments, else there is none', () => {
  const report = { cost_model: { prefill: { fixed_ms: 100, per_token_ms: 2 }, decode_ms: 50 } };
  // A: prefill(400) = 900 ms + 8 steps x 50 ms; each B: 900 ms.
  assert.equal(estimateMs({ report }, 400, ['a', 'b', 'b-full-head']), 900 + 400 + 900 + 900);
  const judgments = [{ prompt_tokens: 200, timings_ms: { prefill: 1000, decode: [40, 60] } }];
  assert.equal(estimateMs({ judgments }, 400, ['a']), 2000 + 8 * 50);
  assert.equal(estimateMs({ judgments: [] }, 400, ['a']), null);
  // Before any judgment, a probe: 32 tokens in 320 ms, a step in 25 ms.
  const probe = { tokens: 32, prefill_ms: 320, decode_ms: 25 };
  assert.equal(estimateMs({ judgments: [], probe }, 400, ['a', 'b']), 4000 + 8 * 25 + 4000);
  assert.equal(estimateMs({ judgments, probe }, 400, ['a']), 2000 + 8 * 50, 'a judgment beats a probe');
  // After B alone no decode step was measured: A's steps are not guessed from a prompt token.
  const onlyB = [{ prompt_tokens: 200, timings_ms: { prefill: 1000, decode: [] } }];
  assert.equal(estimateMs({ judgments: onlyB }, 400, ['b']), 2000);
  assert.equal(estimateMs({ judgments: onlyB }, 400, ['a', 'b']), null, 'then the page probes');
  assert.equal(estimateMs({ judgments: onlyB, probe }, 400, ['a']), 2000 + 8 * 25);
  assert.deepEqual([duration(400), duration(12_400), duration(200_000)], ['1 s', '12 s', '3 min']);
  assert.deepEqual([duration(12_400, ko), duration(200_000, ko)], ['12초', '3분'], 'in the page language');
});

test('a run shows its phase and step, with the elapsed time', () => {
  for (const [strings, want] of [[en, ['A (schema): prefill of 612 tokens', 'A (schema): decode step 3', '1 s']],
    [ko, [`${ko.charts.strategy.a}: 612토큰 프리필`, `${ko.charts.strategy.a}: 디코드 3번째 스텝`, '1초']]]) {
    const el = { textContent: '' };
    const status = new RunStatus(el, () => strings, fill);
    status.begin('about 3 min on this device');
    status.progress({ strategy: 'a', phase: 'prefill', step: 0, tokens: 612 });
    status.show();
    assert.equal(el.textContent, `${want[0]} · ${want[2]} · about 3 min on this device`);
    status.progress({ strategy: 'a', phase: 'decode', step: 2, tokens: 1 });
    status.show();
    assert.ok(el.textContent.startsWith(want[1]), el.textContent);
    status.end('done');
    assert.equal(el.textContent, 'done');
  }
});

test('the live region hears each step and the end, not the clock', () => {
  const el = { textContent: '' };
  const announce = { textContent: '', writes: 0 };
  const heard = new Proxy(announce, { set: (o, k, v) => { if (k === 'textContent') o.writes += 1; o[k] = v; return true; } });
  const status = new RunStatus(el, () => en, fill, heard);
  status.begin();
  status.show();
  status.show();
  assert.equal(announce.writes, 1, 'one step, said once');
  status.progress({ strategy: 'b', phase: 'prefill', tokens: 12 });
  status.show();
  status.show();
  assert.equal(announce.writes, 2);
  status.end('Done');
  assert.equal(announce.textContent, 'Done');
  assert.match(el.textContent, /^Done$/);
});
