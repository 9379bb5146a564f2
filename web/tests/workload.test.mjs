// The 777-judgment workload's content and arithmetic (node only): 37 distinct documents of 21
// questions in both languages, the scaled-down size, and the projection of the full workload
// from measured batches, on this device's cost model and on the article's hosted GPU.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FULL, SCALED, projectWorkload, runWorkload, workloadDocuments } from '../workload.js';

test('37 distinct documents of 21 distinct questions, in English and Korean', () => {
  for (const lang of ['en', 'ko']) {
    const docs = workloadDocuments(lang);
    assert.equal(docs.length, 37);
    assert.equal(new Set(docs.map((d) => d.document)).size, 37, `${lang}: documents differ`);
    for (const d of docs) {
      assert.equal(d.questions.length, 21);
      assert.equal(new Set(d.questions).size, 21, `${lang}: ${d.document}`);
      assert.equal(d.choices.length, 2);
    }
    assert.equal(docs.length * docs[0].questions.length, 777);
  }
  const small = workloadDocuments('en', SCALED);
  assert.deepEqual([small.length, small[0].questions.length], [SCALED.documents, SCALED.questions]);
  assert.deepEqual(small[0].questions, workloadDocuments('en')[0].questions.slice(0, SCALED.questions));
});

test('the run adds up its batches, and the projection scales them to all 777', async () => {
  // Two measured batches of 7 questions: a 100-token document and 10 tokens per question.
  const batch = (total) => ({ batch: { judgments: 7, timings_ms: { total }, shared_prefix_tokens: 100,
    batch_prefill_tokens: 70, longest_prompt_tokens: 110, decode_steps: 0 } });
  const totals = [400, 600];
  const result = await runWorkload([[], []], async () => batch(totals.shift()));
  assert.deepEqual([result.judgments, result.totalMs, result.judgmentsPerS], [14, 1000, 14]);
  const p = projectWorkload(result, { prefill: { fixed_ms: 10, per_token_ms: 0.5 }, decode_ms: 20 });
  assert.equal(p.batchTokens, 100 + FULL.questions * 10);
  // One batch: the document's prefill, the 21 suffixes' prefill, no decode step (yes/no).
  const one = (10 + 0.5 * 100) + (10 + 0.5 * 210);
  assert.equal(p.latencyBoundMs, one, 'the bound is the whole batch, not its longest prompt');
  assert.equal(p.deviceMs, 37 * one);
  assert.equal(p.hostedLatencyMs, 0.1 * 310);
  assert.equal(p.hostedMs, 37 * 0.1 * 310);
  // Choices that share a first token cost their decode steps in every batch.
  const steps = await runWorkload([[]], async () => ({ batch: { ...batch(500).batch, decode_steps: 2 } }));
  const q = projectWorkload(steps, { prefill: { fixed_ms: 10, per_token_ms: 0.5 }, decode_ms: 20 });
  assert.equal(q.latencyBoundMs, one + 2 * 20);
  assert.equal(q.hostedLatencyMs, 0.1 * 310 + 2 * 30);
  assert.equal(projectWorkload(result, null).deviceMs, null);
  const falling = { prefill: { fixed_ms: 50, per_token_ms: -0.1 }, decode_ms: 20 };
  assert.equal(projectWorkload(result, falling).deviceMs, null);
  assert.equal(projectWorkload(result, falling).latencyBoundMs, null);
});
