// The page on the tiny fixture model served as a bundled folder: its GPU logits and its
// answers equal the native engine's (the CLI on lavapipe) and HF transformers' logits; and the
// GPU family's pipelines at Qwen2.5-0.5B's sizes, as the browser's shader compiler builds them.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ms } from '../bench-view.js';
import { articleComparison, articleVerdict } from '../lesson.js';
import { openBrowser, openTiny, REPO, TINY as FIXTURE } from './browser.mjs';

const CLI = path.join(REPO, 'target/fast/onetoken');
const ref = JSON.parse(await readFile(path.join(FIXTURE, 'ref.json'), 'utf8'));

const scratch = await mkdtemp(path.join(tmpdir(), 'onetoken-tiny-'));

/** The native CLI's JSON lines (built by `cargo test --profile fast`); `file` is written first. */
async function native(args, file) {
  if (file) await writeFile(path.join(scratch, file.name), file.text);
  const out = execFileSync(CLI, args.map((a) => (file && a === file.name ? path.join(scratch, a) : a)), {
    env: { ...process.env, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? scratch },
  });
  return out.toString().trim().split('\n').map((l) => JSON.parse(l));
}

function assertClose(got, want, tol, what) {
  assert.equal(got.length, want.length, `${what}: length`);
  got.forEach((g, i) => assert.ok(Math.abs(g - want[i]) <= tol, `${what}: first bad index ${i}: got ${g}, want ${want[i]}`));
}

let browser;
let page;
let errors;

before(async () => {
  ({ browser, page, errors } = await openTiny());
});

after(async () => {
  await browser?.close();
  await rm(scratch, { recursive: true, force: true });
});

test('GPU logits in the page equal the native engine and HF within 1e-3', async () => {
  const ids = ref.input_ids;
  const logits = await page.evaluate((ids) => window.onetoken.logits(ids), ids);
  assertClose(logits, ref.logits[ids.length - 1], 1e-3, 'page vs HF, last position');
  const [cli] = await native(['logits', '--model', FIXTURE, '--ids', ids.join(','), '--top-k', '512']);
  const nativeLogits = new Array(512);
  for (const [id, logit] of cli.top) nativeLogits[id] = logit;
  assertClose(logits, nativeLogits, 1e-3, 'page vs native');
});

const REQUEST = { system: 'You judge colors.', user: 'Which color is the sky?', choices: ['blue', 'red', 'yellow'] };

test('the page answers as the native CLI does, every strategy', async () => {
  const records = await page.evaluate((r) => window.onetoken.judge({ ...r, strategy: 'all' }), REQUEST);
  const want = await native(['judge', '--model', FIXTURE, '--request', 'request.json', '--strategy', 'all'], { name: 'request.json', text: JSON.stringify(REQUEST) });
  assert.deepEqual(records.map((r) => r.strategy), ['a', 'a-free', 'b', 'b-full-head']);
  records.forEach((got, i) => {
    const w = want[i];
    assert.equal(got.choice_index, w.choice_index, got.strategy);
    assert.deepEqual(got.generated_token_ids, w.generated_token_ids, got.strategy);
    assert.equal(got.prompt_tokens, w.prompt_tokens, got.strategy);
    assertClose(got.choice_logits, w.choice_logits, 1e-3, `${got.strategy} choice logits`);
    assert.equal(got.timings_ms.decode.length, w.decode_steps);
    // Decode steps submit commands encoded during the step before, in Chrome as natively.
    assert.equal(got.decode_steps_encoded_ahead, w.decode_steps_encoded_ahead, got.strategy);
  });
  assert.ok(records[1].decode_steps_encoded_ahead > 0, 'a-free ran steps encoded ahead');
});

test('a batch in the page equals the native batch', async () => {
  const requests = ['sky', 'sun', 'car'].map((thing) => ({ ...REQUEST, user: `The sky is blue, the sun yellow, the car red. What color is the ${thing}?` }));
  const got = await page.evaluate((rs) => window.onetoken.batch(rs, true), requests);
  const lines = requests.map((r) => JSON.stringify(r)).join('\n');
  const want = await native(['judge', '--model', FIXTURE, '--requests', 'requests.jsonl', '--shared-prefix'], { name: 'requests.jsonl', text: lines });
  assert.equal(got.batch.judgments, 3);
  assert.equal(got.batch.shared_prefix_tokens, want[0].shared_prefix_tokens);
  got.judgments.forEach((j, i) => {
    assert.equal(j.choice_index, want[i + 1].choice_index);
    assertClose(j.choice_logits, want[i + 1].choice_logits, 1e-3, `batch judgment ${i}`);
  });
});

test('A-free on the page says whether its reply named a choice, or was cut off at the token limit', async () => {
  const record = await page.evaluate(() => window.onetoken.judge({ user: 'Which color is the sky?', choices: ['blue', 'red', 'yellow'], strategy: 'a-free' }));
  assert.ok(['closed', 'end_of_turn', 'token_limit'].includes(record.free_stop), record.free_stop);
  // The same reply, named no choice, read both ways: cut off, or ended by the model.
  const shown = (r) => page.evaluate((rec) => {
    window.onetoken.show(rec, ['blue', 'red', 'yellow']);
    return document.getElementById('answer').textContent;
  }, r);
  const none = { ...record, choice: null, choice_index: null };
  const n = record.generated_token_ids.length;
  assert.match(await shown({ ...none, free_stop: 'token_limit' }), new RegExp(`^no choice: the reply was cut off after ${n} tokens · `));
  assert.match(await shown({ ...none, free_stop: 'end_of_turn' }), /^no choice recognised in the reply · /);
});

test("the batch button judges each question and shows the chosen choice's probability, in either language", async () => {
  await page.fill('#batch-questions', 'Was the sky blue?\n\nWas the car red?\nWas the sun green?');
  await page.click('#batch-run');
  await page.waitForFunction(() => document.querySelectorAll('#batch-table tbody tr').length === 3);
  const rows = await page.$$eval('#batch-table tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
  assert.deepEqual(rows.map((r) => r[0]), ['Was the sky blue?', 'Was the car red?', 'Was the sun green?']);
  for (const [, choice, p] of rows) {
    assert.ok(choice.length > 0, 'a choice per question');
    assert.match(p, /^\d+\.\d %$/);
  }
  assert.match(await page.textContent('#batch-status'), /^3 × 1 token · .* · [\d.]+ judgments\/s · \d+ prompt tokens$/);
  await page.click('#lang-ko');
  assert.match(await page.textContent('#batch-status'), /^3개 × 토큰 1개 · .* · 초당 [\d.]+개 판정 · 프롬프트 토큰 \d+개$/);
  await page.click('#lang-en');
});

test('a short benchmark fills the sweep, batch and roofline charts', async () => {
  const report = await page.evaluate(() => window.onetoken.bench({ lengths: [48, 96], batch_sizes: [1, 4], repeats: 1 }));
  assert.equal(report.sweep.length, 2);
  assert.ok(report.cost_model, 'a fitted cost model');
  assert.ok(report.micro.copy_gbps > 0 && report.micro.read_gbps > 0 && report.micro.fma_gflops > 0);
  // SwiftShader's linear kernels read their weights from storage buffers, and so does the probe.
  assert.equal(report.micro.read_from, 'storage');
  const count = (sel) => page.locator(sel).count();
  assert.ok((await count('#chart-sweep [data-kind=point]')) >= 6);
  // A fit whose prefill does not grow with the prompt (short prompts on SwiftShader can give
  // one) is neither written as a formula nor drawn.
  const grows = report.cost_model.prefill.per_token_ms > 0;
  assert.ok((await count('#chart-sweep [data-kind=fit]')) >= (grows ? 2 : 0));
  if (!grows) assert.equal(await count('#chart-sweep [data-kind=fit]'), 0);
  assert.ok((await count('#chart-batch [data-kind=bar]')) >= 4);
  assert.equal(await count('#chart-roofline [data-kind=measured]'), 2);
  // Beside each wall-clock bar, the kernels' own rate on the GPU's clock (this browser has
  // timestamps), labelled with its fraction of the device's peak.
  const rf = report.roofline;
  assert.equal(report.device.timestamps, true);
  assert.ok(rf.gpu_decode_gbps > 0 && rf.gpu_prefill_gflops > 0, JSON.stringify(rf));
  assert.equal(await count('#chart-roofline [data-kind=gpu]'), 2);
  // Decode's roof is the higher of the two bandwidth probes.
  const read = report.micro.read_gbps > report.micro.copy_gbps;
  const decodeFraction = read ? rf.gpu_decode_read_fraction : rf.gpu_decode_fraction;
  for (const [metric, fraction] of [['decode', decodeFraction], ['prefill', rf.gpu_prefill_fraction]]) {
    const label = await page.textContent(`#chart-roofline [data-metric=${metric}] [data-kind=gpu-value]`);
    assert.ok(label.endsWith(`· ${(fraction * 100).toFixed(1)} %`), `${metric}: ${label}`);
  }
  // Decode's roofs: copy and read bandwidth; its fraction names the higher, the one it is of.
  const peaks = await page.locator('#chart-roofline [data-metric=decode] [data-kind=peak-value]').allTextContents();
  assert.equal(peaks.length, 2, peaks.join(' | '));
  assert.equal(await page.textContent('#chart-roofline [data-metric=decode] [data-kind=fraction]'),
    `${(100 * (read ? rf.decode_read_fraction : rf.decode_fraction)).toFixed(1)} % of this device's measured ${read ? 'read' : 'copy'} bandwidth`);
  assert.match(await page.textContent('#cost-model'), grows ? /T = .* ms \+ .* ms × P \+ N × .* ms/ : /^Cost model: not shown \(over these lengths prefill did not grow/);
  assert.equal(report.profile, undefined, 'profile mode is off by default');
});

let profiled; // the profiled bench's report, charted again below on other probe figures

/**
 * Runs `bench` and records what the bench's two status lines show at each change, as
 * [step line, figures line] pairs (a MutationObserver sees every message the page renders).
 */
async function benchLines(bench) {
  await page.evaluate(() => {
    const els = ['bench-status', 'bench-measured'].map((id) => document.getElementById(id));
    const seen = (window.benchSeen = []);
    window.benchObserver = new MutationObserver(() => seen.push(els.map((el) => el.textContent)));
    for (const el of els) window.benchObserver.observe(el, { childList: true, characterData: true, subtree: true });
  });
  try {
    return { report: await page.evaluate(bench), seen: await page.evaluate(() => window.benchSeen) };
  } finally {
    await page.evaluate(() => window.benchObserver.disconnect());
  }
}

test('bench with profile: true times every dispatch of a prefill and a decode step', async () => {
  // In Korean, the bench's progress: each step, and below it the last step's figures.
  await page.click('#lang-ko');
  const { report, seen } = await benchLines(() =>
    window.onetoken.bench({ lengths: [20], batch_sizes: [1], repeats: 1, profile: true }));
  await page.click('#lang-en');
  profiled = report;
  const figures = seen.map(([, f]) => f);
  const [row, [prefill], [batch]] = [report.sweep[0], report.profile.phases, report.batch];
  for (const [start, end] of [
    [`마이크로벤치마크: 복사 ${report.micro.copy_gbps.toFixed(1)} GB/s, 읽기 ${report.micro.read_gbps.toFixed(1)} GB/s`, ' µs'],
    [`프롬프트 20토큰: A ${row.a.total_ms.toFixed(1)} ms (프리필 ${row.a.prefill_ms.toFixed(1)} ms + 디코드 `, `: A/B ${row.speedup.toFixed(2)}`],
    [`판정 1개 배치: ${batch.total_ms.toFixed(1)} ms, 초당 판정 ${batch.judgments_per_s.toFixed(1)}개`, '개'],
    [`프로파일 20토큰: 프리필 GPU에서 ${prefill.gpu_ms.toFixed(2)} ms, 디스패치 ${prefill.dispatch_count}개`, ' ms)'],
  ]) {
    assert.ok(figures.some((f) => f.startsWith(start) && f.endsWith(end)), `${start}…${end} in:\n${figures.join('\n')}`);
  }
  // A step's figures stay on the page while the next step runs.
  assert.ok(seen.some(([step, f]) => step === '측정 중… 판정 1개 배치, 공유 접두사' && f.startsWith('판정 1개 배치: ')), seen.join('\n'));
  for (const text of seen.flat()) assert.doesNotMatch(text, /undefined|NaN|\{|prompt of|batch of|profile/, text);
  assert.deepEqual(seen.at(-1), ['', ''], 'both lines are cleared at the end');
  // A screen reader hears each step and each step's figures as they change.
  for (const id of ['bench-status', 'bench-measured']) assert.equal(await page.getAttribute(`#${id}`, 'aria-live'), 'polite', id);
  // One prompt length fits no cost model, and the page says so.
  assert.equal(report.cost_model, null);
  // Decode's roofs: copy and read bandwidth; its fraction names the higher, the one it is of.
  const peaks = await page.locator('#chart-roofline [data-metric=decode] [data-kind=peak-value]').allTextContents();
  assert.equal(peaks.length, 2, peaks.join(' | '));
  const roof = report.micro.read_gbps > report.micro.copy_gbps ? 'read' : 'copy';
  assert.match(await page.textContent('#chart-roofline [data-metric=decode] [data-kind=fraction]'), new RegExp(`% of this device's measured ${roof} bandwidth$`));
  assert.match(await page.textContent('#cost-model'), /^Cost model: not fitted \(it takes two or more prompt lengths\) · decode: .* · each point one run$/);
  assert.equal(await page.isVisible('#sweep-merged'), false);
  // WebGPU has timestamps only at a pass's beginning and end.
  assert.equal(report.profile.timing, 'pass-per-dispatch');
  const phases = report.profile.phases;
  assert.deepEqual(phases.map((p) => [p.phase, p.tokens, p.context]), [['prefill', 20, 0], ['decode', 1, 20]]);
  for (const p of phases) {
    assert.equal(p.dispatches.length, p.dispatch_count);
    // Embedding, 2 layers x 10 (Q, K and V as one matrix), gather, norm, LM head, top-k in two
    // passes (SwiftShader: the direct kernels, with nothing folded into them).
    assert.equal(p.dispatch_count, 26);
    for (const d of p.dispatches) {
      assert.ok(d.kernel && typeof d.gpu_ms === 'number' && d.bytes >= 0 && d.flops >= 0, JSON.stringify(d));
    }
    // The FLOPs counted are the forward's: per token and layer 2 x (QKV 64 x 128 + o 64 x 64 +
    // gate and up 64 x 256 + down 128 x 64), the head's 2 x 64 x 512 for its one row, and in
    // each layer attention's 4 x 4 heads x 16 per (query, key) pair.
    const flops = (names) => p.dispatches.filter((d) => names.includes(d.kernel)).reduce((a, d) => a + d.flops, 0);
    const linear = 2 * 2 * p.tokens * (64 * 128 + 64 * 64 + 64 * 256 + 128 * 64) + 2 * 64 * 512;
    assert.equal(flops(['matmul', 'matvec', 'linear_direct']), linear, p.phase);
    const pairs = p.tokens * p.context + (p.tokens * (p.tokens + 1)) / 2;
    assert.equal(flops(['attention', 'attention_grouped', 'attention_direct', 'attention_split']), 2 * 4 * 4 * 16 * pairs, p.phase);
    const sum = p.dispatches.reduce((a, d) => a + d.gpu_ms, 0);
    assert.ok(Math.abs(sum - p.kernels_ms) < 1e-6 * Math.max(1, sum));
    // Runs averaged until they add up to 50 ms; a phase run more than once says so in the chart.
    assert.ok(p.runs >= 1 && p.runs <= 64, `runs: ${p.runs}`);
    const title = await page.locator(`#chart-kernels svg g[data-phase=${p.phase}] text.value`).first().textContent();
    const said = title.includes(`mean of ${p.runs} runs`);
    assert.ok(p.runs > 1 ? said || title.endsWith('…') : !said, title);
  }
  // The kernel chart: one bar per kernel of each phase, and a reading of each phase below it.
  const bars = await page.locator('#chart-kernels svg [data-kind=kernel]').count();
  assert.equal(bars, phases[0].kernels.length + phases[1].kernels.length);
  // A kernel that moves bytes is set against the same bandwidth roof as decode; one that does
  // arithmetic, against the FMA rate.
  for (const p of phases) {
    for (const k of p.kernels) {
      const label = await page.textContent(`#chart-kernels g[data-phase=${p.phase}] [data-kernel=${k.kernel}] title`);
      const memory = (roof === 'read' ? k.read_fraction : k.copy_fraction) >= k.fma_fraction;
      assert.match(label, memory ? new RegExp(` GB/s, \\d+% of ${roof} bandwidth;`) : / GFLOP\/s, \d+% of the FMA rate;/, label);
    }
  }
  const readings = await page.locator('#kernel-readings li').allTextContents();
  assert.equal(readings.length, 2);
  assert.match(readings[0], /^prefill of 20 tokens: the linear layers reach [\d.]+ GFLOP\/s, \d+% of this device's FMA rate/);
  assert.match(readings[1], /^decode: 2 layers × 10 dispatches \(26 in all\); the weights \(0\.21 MB\) are read once per step; \d+% of the time is the linear layers \(linear_direct\)/);
  // The step's floor, its weights read at the higher bandwidth probe, beside its GPU time.
  const floor = new RegExp(` At this device's ${roof} bandwidth \\([\\d.]+ GB/s\\) that read takes at least [\\d.e-]+ m?s: \\d+% of the [\\d.]+ m?s this step took on the GPU\\. `);
  assert.match(readings[1], floor);
  // And what the step's dispatches cost doing nothing, at this run's dispatch microbenchmark.
  assert.match(readings[1], /costs [\d.]+ µs, so 26 of them take [\d.]+ ms before any work is done\.$/);
});

test('where reading beats copying (slow stores), decode and the kernels that move bytes are set against read bandwidth', async () => {
  assert.ok(profiled, 'the profiled bench ran');
  const drawn = await page.evaluate(async (report) => {
    const { roofline, kernels } = await import('./bench-charts.js');
    const { default: en } = await import('./i18n/en.js');
    // The same run, as if the read probe had read three times as fast as the copy probe copied.
    const read = 3 * report.micro.copy_gbps;
    const rf = report.roofline;
    const faster = {
      ...report,
      micro: { ...report.micro, read_gbps: read },
      roofline: { ...rf, decode_read_fraction: rf.decode_gbps / read, gpu_decode_read_fraction: rf.gpu_decode_gbps / read },
      profile: {
        ...report.profile,
        phases: report.profile.phases.map((p) => ({ ...p, kernels: p.kernels.map((k) => ({ ...k, read_fraction: k.gbps / read })) })),
      },
    };
    const [roof, kernelChart] = [document.createElement('div'), document.createElement('div')];
    document.body.append(roof, kernelChart);
    roofline(roof, faster, en.charts);
    kernels(kernelChart, faster, en.charts);
    const texts = (el, sel) => [...el.querySelectorAll(sel)].map((e) => e.textContent);
    const out = {
      fraction: roof.querySelector('[data-metric=decode] [data-kind=fraction]').textContent,
      peaks: [...roof.querySelectorAll('[data-metric=decode] [data-kind=peak]')].map((e) => e.querySelector('title').textContent),
      labels: texts(kernelChart, '[data-kind=kernel] title'),
      kernels: faster.profile.phases.flatMap((p) => p.kernels),
      decodeReadFraction: faster.roofline.decode_read_fraction,
    };
    roof.remove();
    kernelChart.remove();
    return out;
  }, profiled);
  assert.equal(drawn.fraction, `${(100 * drawn.decodeReadFraction).toFixed(1)} % of this device's measured read bandwidth`);
  // The roof first, then the other probe.
  assert.deepEqual(drawn.peaks.map((p) => p.split(':')[0]), ['read bandwidth', 'copy bandwidth']);
  assert.equal(drawn.labels.length, drawn.kernels.length);
  drawn.kernels.forEach((k, i) => {
    const label = drawn.labels[i];
    if (k.read_fraction >= k.fma_fraction) {
      assert.ok(label.includes(`GB/s, ${(100 * k.read_fraction).toFixed(0)}% of read bandwidth;`), label);
    } else {
      assert.match(label, / GFLOP\/s, \d+% of the FMA rate;/, label);
    }
  });
  assert.ok(drawn.labels.every((l) => !l.includes('of copy bandwidth')), drawn.labels.join(' | '));
});

test('the Measure button runs the benchmark with the runs per point typed beside it', async () => {
  assert.equal(await page.inputValue('#bench-repeats'), '3', 'the median of three by default');
  await page.fill('#bench-lengths', '20');
  await page.fill('#bench-batches', '1');
  await page.fill('#bench-repeats', '2');
  await page.click('#bench-run');
  await page.waitForFunction(() => / · each point the median of 2 runs$/.test(document.getElementById('cost-model').textContent),
    null, { timeout: 300_000 });
  await page.click('#lang-ko');
  assert.match(await page.textContent('#cost-model'), / · 측정점마다 2회 실행의 중앙값$/);
  await page.click('#lang-en');
  // Back to the defaults.
  await page.fill('#bench-lengths', '32,64,128,256');
  await page.fill('#bench-batches', '1,4,16');
  await page.fill('#bench-repeats', '3');
});

test("a batch size past this device's limits is left out of the chart and named below it", async () => {
  assert.equal(await page.isVisible('#batch-skipped'), false);
  // 700 judgments without a shared prefix are over 65,535 tokens, more than one pass runs here;
  // with the document shared they fit.
  const report = await page.evaluate(() => window.onetoken.bench({ lengths: [20], batch_sizes: [700], repeats: 1 }));
  assert.deepEqual(report.batch.map((b) => [b.judgments, b.shared_prefix]), [[700, true]]);
  assert.deepEqual(report.batch_skipped.map((s) => [s.judgments, s.shared_prefix, s.code]), [[700, false, 'input']]);
  assert.equal(await page.locator('#chart-batch [data-kind=bar]').count(), 1);
  const [skip] = report.batch_skipped;
  assert.match(skip.reason, /^input: a batch of \d+ tokens in one pass is more than this device runs/);
  // The page words the reason from its details, in its own language.
  const { tokens, limit } = skip.details;
  assert.deepEqual(skip.details, { reason: 'batch_pass_too_large', tokens: Number(skip.reason.match(/of (\d+) tokens/)[1]), limit });
  assert.ok(tokens > limit && limit >= 65535, `${tokens} > ${limit}`);
  assert.equal(await page.textContent('#batch-skipped'), `Not measured on this device: 700 judgments, plain `
    + `(the batch is ${tokens} tokens in one pass, and this device runs at most ${limit}; judge fewer at a time).`);
});

test("the article's example stands beside this device's figures, computed from its cost model", async () => {
  const report = await page.evaluate(() => window.onetoken.bench({ lengths: [24, 40, 80], batch_sizes: [1], repeats: 1 }));
  // 24 and 40 tokens are both below the shortest prompt the bench builds: one point, and a note.
  assert.deepEqual([report.sweep.length, report.sweep_merged], [2, [40]]);
  const shortest = report.sweep[0].b.prompt_tokens;
  assert.ok(shortest > 40, `${shortest}`);
  assert.equal(await page.textContent('#sweep-merged'),
    `Lengths 40 are below the shortest prompt the benchmark builds (${shortest} tokens): measured as that point.`);
  const cells = await page.$$eval('#article-table tr', (rows) => rows.map((r) => [...r.children].map((c) => c.textContent)));
  assert.deepEqual(cells[0].slice(1), ['Article (a hosted GPU)', 'This device (from its cost model)']);
  const row = (label) => cells.find((c) => c[0].startsWith(label)).slice(1);
  assert.deepEqual(row('Prompt tokens')[0], '600');
  assert.deepEqual([row('A =')[0], row('B as the article')[0], row('A / B')[0]], ['300 ms', '91 ms', '3.3×']);
  // This device's column is the page's own arithmetic (lesson.test.mjs) on what was measured.
  const { device } = articleComparison(report);
  if (device) {
    assert.deepEqual([row('T_prefill')[1], row('A =')[1], row('B as the article')[1]], [ms(device.prefillMs), ms(device.a), ms(device.b)]);
  } else {
    assert.deepEqual(row('A =')[1], '—');
  }
  const verdict = articleVerdict(articleComparison(report));
  const first = { below: 'Lower', within: 'About', above: 'Higher', unmeasured: "This device's prefill" }[verdict];
  assert.ok((await page.textContent('#article-verdict')).startsWith(first), verdict);
  assert.equal(await page.locator('#chart-sweep [data-kind=article-band]').count(), 1);
  assert.equal(await page.isVisible('#kernels-section'), false, 'no profile, no kernel chart');
});

test("quantize on load: the page's Q4_0 logits equal the native engine's", async () => {
  const info = await page.evaluate(() => window.onetoken.load({ kind: 'folder', name: 'tiny-qwen2', quant: 'q4_0' }));
  assert.equal(info.quant, 'q4_0');
  assert.match(await page.textContent('#model-status'), /q4_0 weights, 0\.08 MB read per decode step/);
  const ids = ref.input_ids;
  const logits = await page.evaluate((ids) => window.onetoken.logits(ids), ids);
  const [cli] = await native(['logits', '--model', FIXTURE, '--quant', 'q4_0', '--ids', ids.join(','), '--top-k', '512']);
  const nativeLogits = new Array(512);
  for (const [id, logit] of cli.top) nativeLogits[id] = logit;
  assertClose(logits, nativeLogits, 1e-3, 'page vs native, q4_0');
  const bad = await page.evaluate(() => window.onetoken.load({ kind: 'folder', name: 'tiny-qwen2', quant: 'q3' })
    .then(() => 'loaded', (e) => `${e.code}: ${e.message}`));
  assert.match(bad, /^input: .*use q8_0, q5_0 or q4_0/);
  // The tests after this one run on the model as stored.
  await page.evaluate(() => window.onetoken.load({ kind: 'folder', name: 'tiny-qwen2' }));
});

test('Cancel stops a run at its next forward pass, keeps every input, and the next run works', async () => {
  await page.fill('#question', 'My own question?');
  const running = page.evaluate(() => window.onetoken.bench({ lengths: [16, 64, 128, 256, 512], batch_sizes: [1, 8], repeats: 3 })
    .then(() => 'finished', (e) => e.code));
  await page.waitForFunction(() => /Measuring/.test(document.getElementById('bench-status').textContent));
  assert.equal(await page.isVisible('#cancel'), true);
  await page.click('#cancel');
  assert.equal(await running, 'cancelled');
  assert.equal(await page.textContent('#bench-status'), 'Cancelled: nothing was changed; run again when ready.');
  assert.equal(await page.isVisible('#cancel'), false);
  assert.equal(await page.isVisible('#error'), false);
  assert.equal(await page.inputValue('#question'), 'My own question?');
  const r = await page.evaluate(() => window.onetoken.judge({ user: 'Which color is the sky?', choices: ['blue', 'red'] }));
  assert.equal(r.decode_steps, 0);
});

test('the 777 preset runs scaled down on this slow device and projects the full workload', async () => {
  const option = await page.$eval('#preset', (s) => [...s.options].find((o) => o.text.includes('777')).value);
  await page.selectOption('#preset', option);
  assert.match(await page.textContent('#workload-plan'), /^Scaled down for this slow device: 3 documents × 7 questions = 21 judgments of the 777 \(37 × 21\)/);
  assert.equal((await page.inputValue('#batch-questions')).split('\n').length, 21);
  await page.click('#workload-run');
  await page.waitForFunction(() => document.querySelectorAll('#workload-result p').length === 3, null, { timeout: 300_000 });
  const lines = await page.$$eval('#workload-result p', (ps) => ps.map((p) => p.textContent));
  assert.match(lines[0], /^Measured: 21 judgments \(3 documents × 7 questions\) in \d+ s, [\d.]+ judgments\/s; the slowest batch took \d+ ms\.$/);
  // The benchmarks above left a cost model: the device's projection uses it where its prefill
  // grows with the prompt (a fit to short prompts on SwiftShader may not; workload.test.mjs
  // checks the arithmetic of both cases).
  const device = /^All 777 on this device \(its cost model\): about \d+ (s|min); latency bound \(one batch: its document and questions prefilled, plus any decode step\): \d+ ms\.$/;
  assert.ok(device.test(lines[1]) || lines[1].startsWith('Run the benchmark once'), lines[1]);
  assert.match(lines[2], /^All 777 on the article's hosted GPU \(60 ms per 600-token prefill, 30 ms a step\): about \d+ s; latency bound \(one batch\): \d+ ms\.$/);
});

test('?kernels=tiled runs the GPU family in the page (matmul, matvec, paired gate and up, appending attention), with the same answers; ?tune= moves its thresholds', async () => {
  // SwiftShader would get the barrier-free family: this is how the browser's own shader
  // compiler sees the kernels a visitor's GPU runs. Tuned, decode attention splits after 8
  // keys (by default after 64): the answers stay the native engine's untuned ones.
  const tiled = await openTiny('&kernels=tiled&tune=split-attention-after=8');
  try {
    const ids = ref.input_ids;
    const logits = await tiled.page.evaluate((ids) => window.onetoken.logits(ids), ids);
    assertClose(logits, ref.logits[ids.length - 1], 1e-3, 'tiled page vs HF, last position');
    const records = await tiled.page.evaluate((r) => window.onetoken.judge({ ...r, strategy: 'all' }), REQUEST);
    const args = ['judge', '--model', FIXTURE, '--request', 'request.json', '--strategy', 'all', '--kernels', 'tiled'];
    const want = await native(args, { name: 'request.json', text: JSON.stringify(REQUEST) });
    records.forEach((got, i) => {
      assert.deepEqual(got.generated_token_ids, want[i].generated_token_ids, got.strategy);
      assertClose(got.choice_logits, want[i].choice_logits, 1e-3, `tiled ${got.strategy} choice logits`);
    });
    const report = await tiled.page.evaluate(() =>
      window.onetoken.bench({ lengths: [12, 70], batch_sizes: [1], repeats: 1, profile: true }));
    assert.equal(report.device.kernels, 'tiled');
    assert.equal(report.device.tuning.split_attention_after, 8);
    // Embedding, 2 layers, gather, norm, LM head, top-k (2). A layer: 6 dispatches in a 12-token
    // prefill (norms folded into matvec), 8 in a 70-token one (matmul), and 6 in a decode step
    // after 12 keys and after 70 (split and merged; attention appends the new keys itself).
    const perLayer = report.profile.phases.map((p) => (p.dispatch_count - 6) / 2);
    assert.deepEqual(perLayer, [6, 6, 8, 6]);
    const decode = report.profile.phases[1].dispatches.map((d) => d.kernel);
    assert.equal(decode.filter((k) => k === 'attention_split').length, 2, decode.join(' '));
    assert.deepEqual(tiled.errors, []);
  } finally {
    await tiled.browser.close();
  }
  // A setting the engine does not have is named where the GPU's line would be.
  const browser = await openBrowser();
  try {
    const { page } = await browser.open('index.html?tune=split-after=3&lang=en');
    await page.waitForFunction(() => /no tuning setting "split-after"/.test(document.querySelector('#gpu-info').textContent));
  } finally {
    await browser.close();
  }
});

test('?kernels=tiled on the synthetic Qwen2.5-0.5B: the browser compiles every real-size GPU kernel the page builds', async () => {
  // A visitor's GPU runs these pipelines, built by the browser's own shader compiler, at sizes
  // the tiny model never reaches (matmul's tiles and split-K, matvec 64 lanes wide for
  // down_proj's K of 4,864). The load waits for the GPU to finish the set-up and fails with any
  // error the device raised meanwhile. (Running them here would take minutes, SwiftShader being
  // slow at workgroup barriers: the native tests run them at these sizes on lavapipe.)
  const browser = await openBrowser();
  try {
    const { page, errors } = await browser.open('index.html?kernels=tiled&lang=en');
    await page.evaluate(() => window.onetoken.ready);
    assert.match(await page.textContent('#model-status'), /494M parameters, 24 layers, hidden size 896/);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test('no console errors', () => {
  assert.deepEqual(errors, []);
});
