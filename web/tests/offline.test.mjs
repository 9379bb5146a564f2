// Offline: after one visit the page (HTML, JS, wasm, tokenizer) loads with the network cut,
// and a model folder fetched once loads from the browser's cache.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, REPO } from './browser.mjs';

const FIXTURE = path.join(REPO, 'crate/tests/fixtures/tiny-qwen2');
let browser;
let bundled; // models/: the list of bundled folders

before(async () => {
  bundled = await mkdtemp(path.join(tmpdir(), 'onetoken-bundled-'));
  await writeFile(path.join(bundled, 'index.json'), JSON.stringify(['tiny-qwen2']));
  browser = await openBrowser({ mounts: { '/models/tiny-qwen2/': FIXTURE, '/models/': bundled } });
});

after(async () => {
  await browser?.close();
  if (bundled) await rm(bundled, { recursive: true, force: true });
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
  // The bundled folders are still listed to choose from.
  const folders = await page.$$eval('#model-folder option', (options) => options.map((o) => o.value));
  assert.deepEqual(folders, ['tiny-qwen2']);
  // The page's cache holds each file once, under its address without the query.
  const shell = await page.evaluate(async () => (await (await caches.open('onetoken-page-v2')).keys()).map((r) => r.url));
  assert.ok(shell.length > 10 && shell.every((u) => !u.includes('?')), shell.join(' '));
  const r = await page.evaluate(() => window.onetoken.judge({ user: 'Which color is the sky?', choices: ['blue', 'red'] }));
  assert.equal(r.decode_steps, 0);
  await browser.context.setOffline(false);
  assert.deepEqual(errors.filter((e) => !/ERR_INTERNET_DISCONNECTED|Failed to fetch/.test(e)), []);
});
