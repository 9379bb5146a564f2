// Under load: 200 judgments asked at once are all answered, in order, with the same answers as
// one alone (the engine runs one call at a time; the page queues the rest), and over 1,000
// judgments the engine's wasm memory stays flat (wasm memory never shrinks: a leak would grow it).
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

test('1,000 judgments leave the engine\'s wasm memory where it was', async () => {
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
  console.log(`wasm memory: ${before} bytes before 1,000 judgments, ${after} after`);
  assert.equal(answered, 1000);
  assert.ok(before > 0);
  assert.equal(after, before, 'no growth over 1,000 judgments');
  assert.deepEqual(errors, []);
});
