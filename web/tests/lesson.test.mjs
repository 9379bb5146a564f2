// The page's teaching arithmetic on constructed reports: the article's worked example exactly,
// this device's column from its cost model or a measured prompt near 600 tokens, the verdict
// against the article's A / B, and the kernel readings. Node only: no browser needed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { articleComparison, articleVerdict, kernelReadings } from '../lesson.js';
import en from '../i18n/en.js';
import ko from '../i18n/ko.js';

const fill = (text, values) => text.replace(/\{(\w+)\}/g, (_, k) => values[k] ?? '');

function report({ fixed = 5, perToken = 0.1, decode = 30, sweep = [] } = {}) {
  return { cost_model: { prefill: { fixed_ms: fixed, per_token_ms: perToken }, decode_ms: decode }, decode_ms_per_step: decode, sweep };
}

test("the article's column is its worked example: 300 ms, 91 ms, about 3.3x", () => {
  const { article } = articleComparison(report());
  assert.deepEqual([article.prompt, article.prefillMs, article.decodeMs, article.a, article.b], [600, 60, 30, 300, 91]);
  assert.equal(article.speedup.toFixed(1), '3.3');
  assert.equal(article.decodeInTokens, 300); // 30 ms / (60 ms / 600 tokens)
  assert.equal(article.speedupHere, 5); // B here needs no decode step: 300 / 60
});

test("this device's column follows its cost model, or a measured prompt near 600", () => {
  const { device } = articleComparison(report({ fixed: 5, perToken: 0.1, decode: 2 }));
  assert.equal(device.measured, false);
  assert.equal(device.prefillMs, 65); // 5 + 0.1 x 600
  assert.equal(device.a, 65 + 8 * 2);
  assert.equal(device.b, 65.1 + 2);
  assert.equal(device.decodeInTokens.toFixed(0), '18'); // 2 ms / (65 ms / 600 tokens)
  const measured = articleComparison(report({ sweep: [{ b: { prompt_tokens: 640, prefill_ms: 70 } }] })).device;
  assert.deepEqual([measured.measured, measured.prompt, measured.prefillMs], [true, 640, 70]);
  // A fit that extrapolates below zero gives no device column, and says so.
  const noisy = articleComparison(report({ fixed: 30, perToken: -0.2 }));
  assert.equal(noisy.device, null);
  assert.equal(articleVerdict(noisy), 'unmeasured');
});

test("the verdict compares the device's A / B with the article's, by what a decode step costs in prompt tokens", () => {
  const verdict = (decode) => articleVerdict(articleComparison(report({ fixed: 0, perToken: 0.1, decode })));
  // prefill(600) = 60 ms, so a step of D ms is worth 10 D prompt tokens; the article's, 300.
  assert.equal(verdict(2), 'below'); // 20 tokens: 76 / 62.1 = 1.2x
  assert.equal(verdict(22), 'below'); // 220 tokens: 2.9x
  assert.equal(verdict(30), 'within', 'a device exactly like the article reads "about the same"');
  assert.equal(verdict(24), 'within');
  assert.equal(verdict(37), 'within');
  assert.equal(verdict(38), 'above'); // 380 tokens: 3.7x
  // The sentence names both ratios.
  const c = articleComparison(report({ fixed: 0, perToken: 0.1, decode: 30 }));
  const text = fill(en.articleVerdict.within, { speedup: c.device.speedup.toFixed(1), articleSpeedup: c.article.speedup.toFixed(1) });
  assert.match(text, /^About the article's A \/ B \(3\.3× against 3\.3×\)/);
});

test('kernel readings count dispatches per layer and the linear layers\' share', () => {
  const kernels = [
    { kernel: 'matvec', gpu_ms: 6, flops: 2e9, count: 8 },
    { kernel: 'attention', gpu_ms: 2, flops: 1e6, count: 2 },
  ];
  const dispatches = [...Array(6)].map((_, i) => ({ layer: i < 4 ? i % 2 : null }));
  // A prefill's matmul split over K: its second pass (split_sum) is part of the linear layer.
  const split = [
    { kernel: 'matmul', gpu_ms: 5, flops: 1.9e9, count: 2 },
    { kernel: 'split_sum', gpu_ms: 1, flops: 0.1e9, count: 2 },
    kernels[1],
  ];
  const phase = (name, tokens, context, kernels) => ({ phase: name, tokens, context, kernels, dispatches, dispatch_count: 6, kernels_ms: 8 });
  const r = {
    model: { layers: 2, decode_bytes: 988e6 },
    micro: { fma_gflops: 1000 },
    profile: { phases: [phase('prefill', 64, 0, split), phase('decode', 1, 64, kernels)] },
  };
  const [prefill, decode] = kernelReadings(r, en, fill);
  assert.equal(decode, 'decode: 2 layers × 2 dispatches (6 in all); the weights (988 MB) are read once per step; 75% of the time is the linear layers (matvec).');
  assert.equal(prefill, "prefill of 64 tokens: the linear layers reach 333.3 GFLOP/s, 33% of this device's FMA rate, and take 75% of the time.");
  // With the dispatch microbenchmark, the decode step's dispatches at its cost.
  const [, costed] = kernelReadings({ ...r, micro: { ...r.micro, dispatch_us: 25 } }, en, fill);
  assert.equal(costed, `${decode} Here a dispatch that must wait for the one before it costs 25.0 µs, so 6 of them take 0.15 ms before any work is done.`);
  // With the step's GPU time and the roofline's floor, the floor beside it, at the higher of the
  // two bandwidth probes (read here, copy where it is the higher).
  const timed = {
    ...r,
    micro: { ...r.micro, copy_gbps: 3000, read_gbps: 3800, dispatch_us: 25 },
    roofline: { decode_floor_ms: 0.26 },
    profile: { phases: r.profile.phases.map((p) => ({ ...p, gpu_ms: 8.5 })) },
  };
  const [, floored] = kernelReadings(timed, en, fill);
  assert.equal(floored, `${decode} At this device's read bandwidth (3800 GB/s) that read takes at least 0.26 ms: 3% of the 8.5 ms this step took on the GPU. Here a dispatch that must wait for the one before it costs 25.0 µs, so 6 of them take 0.15 ms before any work is done.`);
  const [, copied] = kernelReadings({ ...timed, micro: { ...timed.micro, read_gbps: 2000 } }, ko, fill);
  assert.match(copied, /이 기기의 복사 대역폭\(3000 GB\/s\)으로 그 읽기에는 적어도 0\.26 ms가 걸리며, 이는 이 스텝이 GPU에서 쓴 8\.5 ms의 3%입니다\./);
});
