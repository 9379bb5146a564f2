// Smoke test of the page in headless Chromium: the wasm engine loads from web/pkg (build it
// with scripts/build-wasm.sh) on the default synthetic model, and its bundled Qwen2.5
// tokenizer gives the same ids as the native Rust tests and Python
// (crate/tests/fixtures/tokenizer_cases.json); WebGPU runs on SwiftShader.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, REPO } from './browser.mjs';

const cases = JSON.parse(
  await readFile(path.join(REPO, 'crate/tests/fixtures/tokenizer_cases.json'), 'utf8'),
).encode['qwen2.5-0.5b'];

let browser;
let page;
let errors;

before(async () => {
  browser = await openBrowser();
  ({ page, errors } = await browser.open('index.html'));
  await page.waitForFunction(() => window.onetoken !== undefined);
  await page.evaluate(() => window.onetoken.ready);
});

after(async () => {
  await browser?.close();
});

const tokenize = (text) => page.evaluate((t) => window.onetoken.tokenize(t), text);

test('Korean and English sentences tokenize to the ids of the native tests and Python', async () => {
  for (const text of ['파란색 하늘은 왜 파란가요?', 'The quick brown fox jumps over the lazy dog.']) {
    const want = cases.find((c) => c.text === text);
    assert.ok(want, `fixture case missing: ${text}`);
    assert.deepEqual(await tokenize(text), want.ids, text);
  }
});

test('every encode case of tokenizer_cases.json matches', async () => {
  const got = await page.evaluate((texts) => Promise.all(texts.map((t) => window.onetoken.tokenize(t))), cases.map((c) => c.text));
  cases.forEach((c, i) => assert.deepEqual(got[i], c.ids, JSON.stringify(c.text)));
});

test('the page opens on the synthetic Qwen2.5-0.5B model and says its answers are meaningless', async () => {
  assert.match(await page.textContent('#model-status'), /494M parameters, 24 layers, hidden size 896/);
  assert.equal(await page.isVisible('#synthetic-note'), true);
});

test('WebGPU has an adapter (SwiftShader when there is no GPU)', async () => {
  const info = await page.evaluate(async () => {
    if (!navigator.gpu) return null;
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return { adapter: false };
    const { vendor, architecture, device, description } = adapter.info ?? {};
    return {
      adapter: true,
      info: { vendor, architecture, device, description },
      features: [...adapter.features].sort(),
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      userAgent: navigator.userAgent,
    };
  });
  assert.ok(info, 'navigator.gpu is missing: Chromium needs --enable-unsafe-webgpu');
  assert.ok(info.adapter, 'navigator.gpu.requestAdapter() returned null (SwiftShader needs --enable-unsafe-swiftshader)');
  console.log('WebGPU adapter:', JSON.stringify(info));
});

test('no console errors or uncaught exceptions', () => {
  assert.deepEqual(errors, []);
});
