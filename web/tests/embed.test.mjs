// Embed mode and languages: URL parameters preset the inputs, the compact layout fits an
// 800x600 iframe, the page posts its height to the parent, and the ko/en switch changes the text.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, REPO } from './browser.mjs';
import en from '../i18n/en.js';
import ko from '../i18n/ko.js';

const FIXTURE = path.join(REPO, 'crate/tests/fixtures/tiny-qwen2');
let host;
let browser;

const QUERY = new URLSearchParams({
  embed: '1',
  lang: 'en',
  model: 'folder:tiny-qwen2',
  doc: 'The museum opens at nine.',
  q: 'Is it open at ten?',
  choices: 'yes|no|maybe',
  prefix: '{"answer": "',
}).toString();

before(async () => {
  host = await mkdtemp(path.join(tmpdir(), 'onetoken-host-'));
  await writeFile(
    path.join(host, 'host.html'),
    `<!doctype html><meta charset="utf-8"><body style="margin:0">
     <iframe id="f" src="/index.html?${QUERY}" style="width:800px;height:600px;border:0"></iframe>
     <script>window.heights = []; addEventListener('message', (e) => { if (e.data?.type === 'onetoken:height') window.heights.push(e.data.height); });</script>`,
  );
  browser = await openBrowser({ mounts: { '/models/tiny-qwen2/': FIXTURE, '/host/': host } });
});

after(async () => {
  await browser?.close();
  await rm(host, { recursive: true, force: true });
});

test('URL parameters preset the inputs, and the compact layout fits 800x600', async () => {
  const { page } = await browser.open(`index.html?${QUERY}`);
  await page.setViewportSize({ width: 800, height: 600 });
  await page.evaluate(() => window.onetoken.ready);
  assert.equal(await page.inputValue('#document'), 'The museum opens at nine.');
  assert.equal(await page.inputValue('#question'), 'Is it open at ten?');
  assert.equal(await page.inputValue('#prefix'), '{"answer": "');
  assert.deepEqual(await page.locator('#chips .chip span').allTextContents(), ['yes', 'no', 'maybe']);
  const size = await page.evaluate(() => ({ w: document.documentElement.scrollWidth, h: document.documentElement.scrollHeight }));
  assert.ok(size.w <= 800, `no horizontal scrollbar: ${size.w}px wide`);
  assert.ok(size.h <= 600, `no vertical scrollbar before results: ${size.h}px tall`);
  assert.equal(await page.isVisible('#bench-section .row'), false, 'the compact layout hides the advanced controls');
});

test('embedded, the page posts its height to the parent', async () => {
  const { page } = await browser.open('host/host.html');
  const frame = page.frameLocator('#f');
  await frame.locator('#answer').count();
  await page.waitForFunction(() => window.heights.length > 0, null, { timeout: 60_000 });
  const heights = await page.evaluate(() => window.heights);
  assert.ok(heights.every((h) => h > 100 && h < 5000), JSON.stringify(heights));
  // Grown by the parent, the frame is told the content's height, not its own: it can shrink.
  const content = heights.at(-1);
  await page.evaluate(() => { document.getElementById('f').style.height = '3000px'; });
  await frame.locator('#choice-new').fill('perhaps');
  await frame.locator('#choice-add').click();
  await page.waitForFunction((n) => window.heights.length > n, heights.length);
  const after = await page.evaluate(() => window.heights.at(-1));
  assert.ok(after < 1500 && Math.abs(after - content) < 100, `posted ${after}px in a 3000px frame (content ${content}px)`);
});

test('the language switch changes the strings', async () => {
  const { page } = await browser.open('index.html?model=folder:tiny-qwen2&lang=en');
  assert.equal(await page.textContent('h1'), en.title);
  await page.click('#lang-ko');
  assert.equal(await page.textContent('h1'), ko.title);
  assert.equal(await page.textContent('button.run[data-strategy=b]'), ko.runB);
  await page.click('#lang-en');
  assert.equal(await page.textContent('button.run[data-strategy=b]'), en.runB);
  // What is on show follows too: an error the page wrote, the batch table's heads.
  await page.evaluate(() => window.onetoken.ready);
  await page.fill('#choice-new', 'blue');
  await page.click('#choice-add');
  await page.fill('#choice-new', 'blue');
  await page.click('#choice-add');
  assert.equal(await page.textContent('#error-text'), en.choiceExists.replace('{choice}', 'blue'));
  await page.click('#lang-ko');
  assert.equal(await page.textContent('#error-text'), ko.choiceExists.replace('{choice}', 'blue'));
  assert.equal(await page.textContent('#batch-table th'), ko.batchColumnQuestion);
  await page.click('#lang-en');
});
