// Bad inputs in the page: a corrupt model file gives a clear error naming it, loses nothing the
// user typed, and the page still runs the synthetic model; bad choices are refused clearly.
import assert from 'node:assert/strict';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, REPO } from './browser.mjs';

const FIXTURE = path.join(REPO, 'crate/tests/fixtures/tiny-qwen2');
let broken;
let browser;
let page;

before(async () => {
  broken = await mkdtemp(path.join(tmpdir(), 'onetoken-broken-'));
  for (const f of ['config.json', 'tokenizer.json', 'tokenizer_config.json']) await copyFile(path.join(FIXTURE, f), path.join(broken, f));
  const weights = await readFile(path.join(FIXTURE, 'model.safetensors'));
  await writeFile(path.join(broken, 'model.safetensors'), weights.subarray(0, weights.length - 1000));
  browser = await openBrowser({ mounts: { '/models/broken/': broken, '/models/tiny-qwen2/': FIXTURE } });
  ({ page } = await browser.open('index.html?model=folder:tiny-qwen2&lang=en'));
  await page.evaluate(() => window.onetoken.ready);
});

after(async () => {
  await browser?.close();
  await rm(broken, { recursive: true, force: true });
});

test('a truncated model file is named in a clear error, and nothing typed is lost', async () => {
  await page.fill('#question', 'My own question?');
  const { message, code } = await page.evaluate(() => window.onetoken.load({ kind: 'folder', name: 'broken' })
    .then(() => ({ message: 'loaded' }), (e) => ({ message: e.message, code: e.code })));
  assert.match(message, /model file model\.safetensors: truncated: tensor .* ends at data byte/);
  assert.equal(code, 'model_file', 'errors carry the library error kind as `code`');
  assert.equal(await page.isVisible('#error'), true);
  assert.match(await page.textContent('#error-text'), /truncated/);
  assert.equal(await page.inputValue('#question'), 'My own question?');
});

test('after the error the page loads and runs the synthetic model', async () => {
  const info = await page.evaluate(() => window.onetoken.load({ kind: 'synthetic', name: 'qwen2.5-0.5b' }));
  assert.equal(info.synthetic, true);
  assert.equal(await page.isVisible('#error'), false);
});

test('bad choices are refused with a specific message', async () => {
  const ask = (choices) => page.evaluate((c) => window.onetoken.judge({ user: 'q', choices: c }).then(() => 'ok', (e) => e.message), choices);
  assert.match(await ask([]), /no choices/);
  assert.match(await ask(['red']), /only one choice/);
  assert.match(await ask(['red', 'red']), /are the same/);
  assert.match(await ask(['red', '']), /is empty/);
  const code = await page.evaluate(() => window.onetoken.judge({ user: 'q', choices: ['a', 'a'] }).then(() => 'ok', (e) => e.code));
  assert.equal(code, 'input');
});

test('local files chosen in the picker load like a folder', async () => {
  await page.selectOption('#model-kind', 'files');
  const names = ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'];
  await page.setInputFiles('#model-files', names.map((n) => path.join(FIXTURE, n)));
  await page.click('#model-load');
  await page.waitForFunction(() => /config\.json, model\.safetensors/.test(document.getElementById('model-status').textContent));
  const r = await page.evaluate(() => window.onetoken.judge({ user: 'Which color is the sky?', choices: ['blue', 'red'] }));
  assert.equal(r.synthetic, false);
  assert.equal(r.prompt_tokens > 0, true);
});

test('a model by URL streams from that address (here the local server)', async () => {
  const url = new URL('models/tiny-qwen2/', page.url()).href;
  const info = await page.evaluate((u) => window.onetoken.load({ kind: 'url', url: u }), url);
  assert.equal(info.layers, 2);
  const missing = await page.evaluate((u) => window.onetoken.load({ kind: 'url', url: u }).then(() => 'loaded', (e) => e.message), new URL('models/nothing/', page.url()).href);
  assert.match(missing, /config\.json: HTTP 404/);
});
