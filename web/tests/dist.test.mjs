// scripts/dist.sh builds a folder that is the whole page: served on its own from a temporary
// folder (nothing else of the repository reachable), it loads, judges, and works offline after
// its first visit. The service worker keeps every file the page needs.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { access, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, test } from 'node:test';
import { openBrowser, REPO } from './browser.mjs';

const FIXTURE = path.join(REPO, 'crate/tests/fixtures/tiny-qwen2');
let dist;
let browser;

before(async () => {
  dist = path.join(await mkdtemp(path.join(tmpdir(), 'onetoken-dist-')), 'dist');
  execFileSync('bash', [path.join(REPO, 'scripts/dist.sh'), dist], { stdio: 'ignore' });
  browser = await openBrowser({ root: dist, mounts: { '/models/tiny-qwen2/': FIXTURE } });
});

after(async () => {
  await browser?.close();
  if (dist) await rm(path.dirname(dist), { recursive: true, force: true });
});

test('dist/ holds the page, its scripts, strings and engine, and no tests', async () => {
  for (const f of ['index.html', 'main.js', 'sw.js', 'style.css', 'i18n/ko.js', 'pkg/onetoken_bg.wasm',
    'pkg/assets/qwen2.5/tokenizer.json', 'models/index.json']) {
    await access(path.join(dist, f));
  }
  await assert.rejects(access(path.join(dist, 'tests')));
  // Every script of the page is in the service worker's list, so none is missing offline.
  const sw = await readFile(path.join(dist, 'sw.js'), 'utf8');
  const scripts = (await readdir(dist)).filter((f) => f.endsWith('.js') && f !== 'sw.js');
  for (const f of [...scripts, 'i18n/en.js', 'i18n/ko.js']) assert.ok(sw.includes(`'./${f}'`), `sw.js lists ${f}`);
});

test('opened as a file (a double click), dist/index.html says in both languages how to serve it', async () => {
  const page = await browser.context.newPage();
  try {
    await page.goto(pathToFileURL(path.join(dist, 'index.html')).href);
    await page.waitForSelector('#needs-server', { state: 'visible', timeout: 20_000 });
    const note = await page.textContent('#needs-server');
    assert.match(note, /웹 서버를 거쳐 열어야 합니다/);
    assert.match(note, /must be opened through a web server/);
    assert.match(note, /python3 -m http\.server 8000/);
  } finally {
    await page.close();
  }
});

test('served from dist/ alone, the page judges, then works with the network cut', async () => {
  const { page, errors } = await browser.open('index.html?model=folder:tiny-qwen2&lang=en');
  await page.evaluate(() => window.onetoken.ready);
  assert.equal(await page.$('#needs-server'), null, 'a served page drops the note for a page opened as a file');
  const request = { user: 'Which color is the sky?', choices: ['blue', 'red'] };
  const online = await page.evaluate((r) => window.onetoken.judge(r), request);
  await page.evaluate(() => navigator.serviceWorker.ready);
  await browser.context.setOffline(true);
  await page.reload();
  await page.evaluate(() => window.onetoken.ready);
  const offline = await page.evaluate((r) => window.onetoken.judge(r), request);
  assert.equal(offline.choice, online.choice);
  // Before its first run the page has measured nothing: it probes the device to estimate.
  const estimate = () => page.evaluate(() => document.getElementById('run-status').dataset.estimate);
  await page.click('button.run[data-strategy=both]');
  await page.waitForFunction(() => document.getElementById('run-status').dataset.estimate !== undefined && !document.getElementById('cancel').checkVisibility());
  assert.match(await estimate(), /^about \d+ (s|min) on this device/);
  await browser.context.setOffline(false);
  assert.deepEqual(errors.filter((e) => !/ERR_INTERNET_DISCONNECTED|Failed to fetch/.test(e)), []);
});
