// The benchmark's progress on the page, on constructed reports of the engine's shape (node only;
// tiny.test.mjs runs the real engine): every step in both languages, and the two status lines.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import en from '../i18n/en.js';
import ko from '../i18n/ko.js';
import { BenchStatus, benchProgressText } from '../bench-progress.js';

const fill = (text, values) => text.replace(/\{(\w+)\}/g, (_, k) => values[k] ?? '');

const phase = (gpu_ms, dispatches, kernels_ms, top_kernel, top_kernel_ms) => ({ gpu_ms, dispatches, kernels_ms, top_kernel, top_kernel_ms });
const a = { total_ms: 23.14, prefill_ms: 9.52, steps: 5, step_ms: 2.654, gpu_prefill_ms: 8.61, gpu_step_ms: 2.149 };
const REPORTS = [
  { starting: { step: 'micro' } },
  { measured: { step: 'micro', copy_gbps: 5.83, read_gbps: 6.41, fma_gflops: 48.46, dispatch_us: 29.94 } },
  { starting: { step: 'length', tokens: 12 } },
  { measured: { step: 'length', tokens: 12, a, b_ms: 10.94, b_full_head_ms: 10.01, speedup: 2.1151 } },
  { measured: { step: 'length', tokens: 70, a: { ...a, gpu_prefill_ms: null, gpu_step_ms: null }, b_ms: 10.94, b_full_head_ms: 10.01, speedup: 2.1151 } },
  { starting: { step: 'encode_ahead', tokens: 12 } },
  { measured: { step: 'encode_ahead', step_ms: 2.041, steps_ahead: 5, steps: 5, step_ms_on_demand: 2.192 } },
  { starting: { step: 'batch', judgments: 8, shared_prefix: false } },
  { starting: { step: 'batch', judgments: 8, shared_prefix: true } },
  { measured: { step: 'batch', judgments: 8, shared_prefix: true, total_ms: 20.64, judgments_per_s: 48.61 } },
  { measured: { step: 'batch_skipped', judgments: 900, shared_prefix: false, code: 'gpu_memory', reason: 'GPU: out of memory' } },
  { measured: { step: 'batch_skipped', judgments: 700, shared_prefix: false, code: 'input', reason: 'input: a batch of 78400 tokens …',
    details: { reason: 'batch_pass_too_large', tokens: 78400, limit: 65535 } } },
  { starting: { step: 'profile' } },
  { measured: { step: 'profile', tokens: 70, prefill: phase(10.154, 76, 26.481, 'linear_direct', 18.311), decode: phase(2.5, 26, 2.4, null, 0) } },
];

test('every step reads in English with its figures', () => {
  assert.deepEqual(REPORTS.map((r) => benchProgressText(r, en, fill)), [
    'microbenchmarks: copy and read bandwidth, FMA throughput',
    'microbenchmarks: copy 5.8 GB/s, read 6.4 GB/s, FMA 48.5 GFLOP/s, a dispatch that waits for the one before 29.9 µs',
    'prompt of 12 tokens: A, B, B full head',
    'prompt of 12 tokens: A 23.1 ms (prefill 9.5 ms + 5 decode steps of 2.65 ms; on the GPU 8.6 ms + 2.15 ms), B 10.9 ms, B full head 10.0 ms: A/B 2.12',
    'prompt of 70 tokens: A 23.1 ms (prefill 9.5 ms + 5 decode steps of 2.65 ms), B 10.9 ms, B full head 10.0 ms: A/B 2.12',
    'prompt of 12 tokens: A, its decode steps encoded ahead and when asked for, in turn',
    'a decode step: 2.04 ms encoded ahead (5 of 5 steps), 2.19 ms encoded when asked for',
    'batch of 8 judgments',
    'batch of 8 judgments, shared prefix',
    'batch of 8 judgments, shared prefix: 20.6 ms, 48.6 judgments/s',
    'batch of 900 judgments: not measured (This GPU ran out of memory: GPU: out of memory)',
    'batch of 700 judgments: not measured (the batch is 78400 tokens in one pass, and this device runs at most 65535; judge fewer at a time)',
    'profile: one prefill and one decode step per length, kernel by kernel',
    'profile at 70 tokens: prefill 10.15 ms on the GPU in 76 dispatches (their sum 26.48 ms, most in linear_direct: 18.31 ms); '
      + 'a decode step 2.50 ms on the GPU in 26 dispatches (their sum 2.40 ms)',
  ]);
});

test('every step reads in Korean, with no English words but units and names', () => {
  const texts = REPORTS.map((r) => benchProgressText(r, ko, fill));
  assert.equal(texts[3], '프롬프트 12토큰: A 23.1 ms (프리필 9.5 ms + 디코드 5스텝, 스텝당 2.65 ms; GPU에서 8.6 ms + 2.15 ms), B 10.9 ms, B (전체 헤드) 10.0 ms: A/B 2.12');
  assert.equal(texts[9], '판정 8개 배치, 공유 접두사: 20.6 ms, 초당 판정 48.6개');
  // A skipped batch's reason is worded in Korean where the engine gave its details.
  assert.equal(texts[11], '판정 700개 배치: 측정하지 못함 (배치가 한 번의 패스에 78400토큰인데 이 기기는 한 번에 65535토큰까지 처리합니다. 한 번에 더 적게 판정해 주세요)');
  for (const text of texts) {
    // What may stay in Latin letters: units, A/B, GPU, FMA, kernel names, and an error's own text.
    const words = text.replace(/GPU: out of memory|linear_direct/g, '').match(/[A-Za-z]{2,}/g) ?? [];
    assert.deepEqual(words.filter((w) => !['ms', 'GB', 'GFLOP', 'GPU', 'FMA'].includes(w)), [], text);
    assert.doesNotMatch(text, /undefined|NaN|\{\w+\}/, text);
  }
});

test('the status line names the step being measured; the line below keeps the last figures', () => {
  const [status, measured] = [{ textContent: '' }, { textContent: '' }];
  let strings = en;
  const bench = new BenchStatus(status, measured, () => strings, fill);
  bench.progress(REPORTS[0]);
  assert.deepEqual([status.textContent, measured.textContent], ['Measuring… microbenchmarks: copy and read bandwidth, FMA throughput', '']);
  // A step's figures and the next step's start come back to back: both stay on the page.
  bench.progress(REPORTS[1]);
  bench.progress(REPORTS[2]);
  assert.equal(status.textContent, 'Measuring… prompt of 12 tokens: A, B, B full head');
  assert.match(measured.textContent, /^microbenchmarks: copy 5\.8 GB\/s/);
  // A switch of language words both lines anew.
  strings = ko;
  bench.show();
  assert.equal(status.textContent, '측정 중… 프롬프트 12토큰: A, B, B (전체 헤드)');
  assert.match(measured.textContent, /^마이크로벤치마크: 복사 5\.8 GB\/s/);
  bench.end();
  assert.deepEqual([status.textContent, measured.textContent], ['', '']);
  // After the end a switch of language leaves the status line to what the page put there.
  status.textContent = 'Cancelled';
  bench.show();
  assert.deepEqual([status.textContent, measured.textContent], ['Cancelled', '']);
});
