// Under load: 200 judgments asked at once are all answered, in order, with the same answers as
// one alone (the engine runs one call at a time; the page queues the rest), and over 1,000
// judgments the engine's wasm memory stays flat (wasm memory never shrinks: a leak would grow it)
// and so does its count of live GPU buffers.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openTiny } from './browser.mjs';

const REQUEST = { user: 'Which color is the sky?', choices: ['blue', 'red'] };
let browser;
let page;
let errors;

before(async () => {
  ({ browser, page, errors } = await openTiny());
});

after(async () => {
  await browser?.close();
});

test('200 judgments at once are all answered, in order, each as one alone', async () => {
  const { alone, all, order } = await page.evaluate(async (req) => {
    const alone = await window.onetoken.judge(req);
    const order = [];
    const calls = Array.from({ length: 200 }, (_, i) =>
      window.onetoken.judge({ ...req, user: `${req.user} (${i % 2})` }).then((r) => { order.push(i); return r; }));
    return { alone, all: await Promise.all(calls), order };
  }, REQUEST);
  assert.equal(all.length, 200);
  assert.deepEqual(order, [...Array(200).keys()], 'answered in the order asked');
  const again = all.filter((_, i) => i % 2 === 0);
  assert.ok(again.every((r) => JSON.stringify(r.choice_logits) === JSON.stringify(again[0].choice_logits)));
  assert.equal(alone.choice_index !== undefined, true);
});

/**
 * Counts GPU buffers the engine worker creates and destroys from now on, by wrapping the
 * browser's own GPUDevice.createBuffer and GPUBuffer.destroy. Returns a function reading
 * {created, destroyed}.
 */
async function countGpuBuffers() {
  const [worker] = page.workers();
  await worker.evaluate(() => {
    const counts = { created: 0, destroyed: 0 };
    const create = GPUDevice.prototype.createBuffer;
    GPUDevice.prototype.createBuffer = function (...args) {
      counts.created += 1;
      return create.apply(this, args);
    };
    const destroy = GPUBuffer.prototype.destroy;
    GPUBuffer.prototype.destroy = function (...args) {
      counts.destroyed += 1;
      return destroy.apply(this, args);
    };
    self.bufferCounts = counts;
  });
  return () => worker.evaluate(() => ({ ...self.bufferCounts }));
}

test('1,000 judgments leave the engine\'s wasm memory and its GPU buffers where they were', async () => {
  const buffers = await countGpuBuffers();
  const { before, after, answered } = await page.evaluate(async (req) => {
    for (let i = 0; i < 50; i++) await window.onetoken.judge(req); // warm up: buffers sized once
    const before = await window.onetoken.memory();
    let answered = 0;
    for (let i = 0; i < 1000; i++) {
      const r = await window.onetoken.judge({ ...req, strategy: i % 10 === 0 ? 'a' : 'b' });
      answered += r.choice_index === null ? 0 : 1;
    }
    return { before, after: await window.onetoken.memory(), answered };
  }, REQUEST);
  const { created, destroyed } = await buffers();
  console.log(`wasm memory: ${before} bytes before 1,000 judgments, ${after} after; GPU buffers: ${created} created, ${destroyed} destroyed`);
  assert.equal(answered, 1000);
  // The engine sizes its buffers once (warm-up) and reuses them: no buffer per judgment.
  assert.equal(created - destroyed, 0, `GPU buffers live: ${created - destroyed} more after 1,050 judgments`);
  assert.equal(created, 0, 'no GPU buffer is made for a judgment');
  // The count is live: loading the model again makes its buffers and destroys the old
  // model's large ones (weights, KV cache, activations) rather than leaving them to the GC.
  await page.evaluate(() => window.onetoken.load({ kind: 'folder', name: 'tiny-qwen2' }));
  const reload = await buffers();
  console.log(`a reload: ${reload.created - created} GPU buffers created, ${reload.destroyed - destroyed} destroyed`);
  assert.ok(reload.created > created && reload.destroyed > destroyed, 'the counter sees buffers made and freed');
  assert.ok(before > 0);
  assert.equal(after, before, 'no growth over 1,000 judgments');
  assert.deepEqual(errors, []);
});

test('a safetensors loader refuses a file begun before the last one ended, and a finish before its end', async () => {
  const [worker] = page.workers();
  const messages = await worker.evaluate(async () => {
    const { WebGpu, WebLoader } = await import('./pkg/onetoken.js');
    const gpu = await WebGpu.open(true, '');
    const config = new Uint8Array(await (await fetch('models/tiny-qwen2/config.json')).arrayBuffer());
    const tokenizer = new Uint8Array(await (await fetch('models/tiny-qwen2/tokenizer.json')).arrayBuffer());
    const loader = new WebLoader(gpu, config);
    const said = (f) => { try { f(); return 'accepted'; } catch (e) { return e.message; } };
    loader.beginFile('model-00001-of-00002.safetensors');
    const out = [said(() => loader.beginFile('model-00002-of-00002.safetensors')), said(() => loader.finish(tokenizer))];
    loader.free();
    gpu.free();
    return out;
  });
  assert.deepEqual(messages, [
    'beginFile before the file begun last has ended (endFile)',
    'finish before the last file has ended (endFile)',
  ]);
});
