// Offline: after one visit the page (HTML, JS, wasm, tokenizer) loads with the network cut,
// and a model folder fetched once loads from the browser's cache.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, REPO } from './browser.mjs';

const FIXTURE = path.join(REPO, 'crate/tests/fixtures/tiny-qwen2');
let browser;

before(async () => {
  browser = await openBrowser({ mounts: { '/models/tiny-qwen2/': FIXTURE } });
});

after(async () => {
  await browser?.close();
});

test('the page and a cached model load with the network cut', async () => {
  const { page, errors } = await browser.open('index.html?model=folder:tiny-qwen2&lang=en');
  await page.evaluate(() => window.onetoken.ready);
  await page.evaluate(() => navigator.serviceWorker.ready);
  const cached = await page.evaluate(async () => (await caches.open('onetoken-models-v1')).keys().then((k) => k.length));
  assert.ok(cached >= 3, `model files cached: ${cached}`);

  await browser.context.setOffline(true);
  await page.reload();
  await page.evaluate(() => window.onetoken.ready);
  assert.match(await page.textContent('#model-status'), /tiny-qwen2/);
  const r = await page.evaluate(() => window.onetoken.judge({ user: 'Which color is the sky?', choices: ['blue', 'red'] }));
  assert.equal(r.decode_steps, 0);
  await browser.context.setOffline(false);
  assert.deepEqual(errors.filter((e) => !/ERR_INTERNET_DISCONNECTED|Failed to fetch/.test(e)), []);
});
