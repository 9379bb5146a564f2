// Take-away results: each chart downloads as SVG (the page's styles inside) and PNG, the
// measurements as JSON and CSV with the device, the model and every timing, and the copied link
// reopens the page with the same settings.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import { openTiny } from './browser.mjs';

let browser;
let page;

before(async () => {
  ({ browser, page } = await openTiny());
  await page.evaluate(async () => {
    const records = await window.onetoken.judge({ user: 'Which color is the sky?', choices: ['blue', 'red'], strategy: 'all' });
    window.onetoken.show(records);
    await window.onetoken.bench({ lengths: [16, 64], batch_sizes: [1, 2], repeats: 1, profile: true });
  });
});

after(async () => {
  await browser?.close();
});

/** Clicks `selector` and returns the download's file name and bytes. */
async function downloaded(selector) {
  const [download] = await Promise.all([page.waitForEvent('download'), page.click(selector)]);
  return { name: download.suggestedFilename(), bytes: await readFile(await download.path()) };
}

test('a chart downloads as SVG with its styles, and as PNG', async () => {
  const svg = await downloaded('button[data-chart=chart-ab][data-format=svg]');
  assert.equal(svg.name, 'onetoken-ab.svg');
  const text = svg.bytes.toString('utf8');
  assert.match(text, /^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  assert.match(text, /<style>[^]*\.bar-prefill \{ fill:/);
  assert.ok((text.match(/data-kind="prefill"/g) ?? []).length >= 4, 'a prefill bar per judgment');
  const png = await downloaded('button[data-chart=chart-kernels][data-format=png]');
  assert.equal(png.name, 'onetoken-kernels.png');
  assert.deepEqual([...png.bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.ok(png.bytes.readUInt32BE(16) >= 600, 'drawn at twice its size'); // IHDR width
});

test('the measurements download as JSON and CSV, device and model included', async () => {
  const json = JSON.parse((await downloaded('#save-json')).bytes.toString('utf8'));
  assert.ok(json.device.backend && json.device.adapter, JSON.stringify(json.device));
  assert.equal(json.model.layers, 2);
  assert.deepEqual(json.judgments.map((j) => j.strategy), ['a', 'a-free', 'b', 'b-full-head']);
  assert.equal(json.bench.sweep.length, 2);
  assert.ok(json.bench.profile.phases.length >= 2);
  const csv = (await downloaded('#save-csv')).bytes.toString('utf8').trim().split('\n');
  assert.equal(csv[0], 'kind,strategy,prompt_tokens,decode_steps,prefill_ms,decode_ms,total_ms,gpu_prefill_ms,gpu_decode_ms,judgments,shared_prefix,judgments_per_s,device,model');
  const kinds = csv.slice(1).map((l) => l.split(',')[0]);
  assert.deepEqual(kinds.filter((k) => k === 'judgment').length, 4);
  assert.deepEqual(kinds.filter((k) => k === 'bench').length, 2 * 3);
  assert.deepEqual(kinds.filter((k) => k === 'bench-batch').length, 2 * 2);
  for (const line of csv.slice(1)) {
    const cells = line.split(',');
    assert.equal(cells.length, 14, line);
    const device = json.device.name || [json.device.adapter.vendor, json.device.adapter.architecture].filter(Boolean).join(' ');
    assert.ok(cells[12] === device && device && /^\d+(\.\d+)?M bf16$/.test(cells[13]), line);
  }
});

test('the copied link reopens the page with the same settings', async () => {
  await page.fill('#question', 'What color is <b>grass</b>?');
  await page.fill('#prefix', '{"answer": "');
  await page.click('#copy-link');
  const link = await page.inputValue('#settings-link');
  const url = new URL(link);
  assert.equal(url.searchParams.get('model'), 'folder:tiny-qwen2');
  assert.equal(url.searchParams.get('lang'), 'en');
  const again = await browser.open(`${url.pathname.slice(1)}${url.search}`);
  await again.page.evaluate(() => window.onetoken.ready);
  assert.equal(await again.page.inputValue('#question'), 'What color is <b>grass</b>?');
  assert.equal(await again.page.inputValue('#prefix'), '{"answer": "');
  assert.equal(await again.page.inputValue('#document'), await page.inputValue('#document'));
  assert.match(await again.page.textContent('#model-status'), /tiny-qwen2/);
});
