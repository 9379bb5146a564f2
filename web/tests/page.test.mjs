// The page on its default model (synthetic Qwen2.5-0.5B, no download) in headless Chromium:
// A and B run, the record has every field of the CLI's, and the charts draw the timings.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openBrowser } from './browser.mjs';

let browser;
let page;
let errors;

before(async () => {
  browser = await openBrowser();
  ({ page, errors } = await browser.open('index.html?lang=en'));
  await page.evaluate(() => window.onetoken.ready);
});

after(async () => {
  await browser?.close();
});

const FIELDS = [
  'strategy', 'choice', 'choice_index', 'choice_logits', 'probs', 'prompt_tokens', 'generated_token_ids',
  'decode_steps', 'top', 'timings_ms', 'gpu_timings_ms',
];

test('window.onetoken.judge returns the CLI record, every field', async () => {
  const r = await page.evaluate(() => window.onetoken.judge({ user: 'Which color is the sky?', choices: ['blue', 'red', 'yellow'] }));
  for (const f of FIELDS) assert.ok(f in r, `missing field ${f}`);
  for (const f of ['tokenize', 'prefill', 'decode', 'readback', 'total']) assert.ok(f in r.timings_ms, `timings_ms.${f}`);
  assert.equal(r.strategy, 'b');
  assert.equal(r.decode_steps, 0);
  assert.equal(r.synthetic, true);
  assert.equal(r.choice_logits.length, 3);
  assert.ok(r.timings_ms.prefill > 0);
});

test('the A vs B button runs both and draws the stacked bars and the timeline', async () => {
  await page.click('button.run[data-strategy=both]');
  await page.waitForSelector('#chart-ab [data-kind=prefill]', { timeout: 300_000 });
  const count = (sel) => page.locator(sel).count();
  assert.equal(await count('#chart-ab [data-kind=prefill]'), 3, 'A, B and B full head');
  assert.ok((await count('#chart-ab [data-kind=decode]')) >= 5, 'A pays a decode step per token of its JSON');
  assert.ok((await count('#chart-ab [data-kind=speedup]')) >= 1);
  assert.ok((await count('#chart-timeline [data-kind=decode]')) >= 5);
  assert.equal(await count('#chart-probs [data-kind=prob]'), 3);
  assert.match(await page.textContent('#answer'), /prompt tokens · 0 decode steps/);
  assert.equal(await page.isVisible('#synthetic-note'), true);
});

test('results keep the names of the choices they judged, and the language switch re-words the model line', async () => {
  const judged = await page.locator('#chips .chip span').allTextContents();
  const names = () => page.locator('#chart-probs [data-choice] text:first-child').allTextContents();
  assert.deepEqual(await names(), judged);
  // Another preset with as many choices: the bars still belong to the run, so keep its names.
  await page.selectOption('#preset', 'sentiment');
  const now = await page.locator('#chips .chip span').allTextContents();
  assert.equal(now.length, judged.length);
  assert.notDeepEqual(now, judged);
  await page.click('#lang-ko');
  assert.deepEqual(await names(), judged);
  assert.match(await page.textContent('#model-status'), /^불러옴: qwen2\.5-0\.5b — 매개변수/);
  await page.click('#lang-en');
  assert.match(await page.textContent('#model-status'), /^Loaded: qwen2\.5-0\.5b — /);
});

test('no console errors', () => {
  assert.deepEqual(errors, []);
});
