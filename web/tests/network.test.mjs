// The download and device rows of the bad-input table, in the page: a 404 address, a server
// without CORS, a download cut in the middle (resumed where the server allows it, else a clear
// error and a clean retry), the site's storage quota exceeded, a damaged cached copy (by its
// length, or by the SHA-256 its source published), a GPU device lost in the middle of the work,
// and a browser without WebGPU. Each says what happened, keeps what was typed,
// and the next run works.
import assert from 'node:assert/strict';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startServer } from '../../scripts/static-server.mjs';
import { openBrowser, TINY } from './browser.mjs';

const IDS = [1, 5, 9, 200];
const STALLED = { stallAfter: 100_000, stallMs: 1500 }; // the server counts how each response ends
const MISMATCHED = { stallAfter: 100_000, stallMs: 1500 }; // weights that do not fit their config
let mismatched; // a folder: the tiny model with a config its weights do not match
let llama; // a folder: the tiny model with a config that names another architecture
const LLAMA_CONFIG = {}; // no fault: the server counts the requests for that config
// The tiny model's small files as a host that compresses them sends them (the server counts
// the requests each answers).
const GZIPPED = ['config.json', 'tokenizer.json', 'tokenizer_config.json'];
const gzipped = Object.fromEntries(GZIPPED.map((name) => [`/models/gzipped/${name}`, { gzip: true }]));
const REQUEST = { user: 'Which color is the sky?', choices: ['blue', 'red', 'yellow'] };
let browser;
let page;
let elsewhere; // another origin, serving the tiny model without CORS headers
let want; // the tiny model's logits, loaded without faults

/** `load(source)` in the page: 'loaded', or the error's message. */
function load(source) {
  return page.evaluate((s) => window.onetoken.load(s).then(() => 'loaded', (e) => e.message), source);
}

/** A load that fails: its error's message and details. */
function loadError(source) {
  return page.evaluate((s) => window.onetoken.load(s).then(() => ({}), (e) => ({ message: e.message, details: e.details })), source);
}

async function assertStillWorks(what) {
  assert.equal(await page.inputValue('#question'), 'Mine, still?', `${what}: the typed question is kept`);
  assert.equal(await load({ kind: 'folder', name: 'tiny-qwen2' }), 'loaded', `${what}: the next load works`);
  const record = await page.evaluate((r) => window.onetoken.judge(r), REQUEST);
  assert.ok(record.choice, `${what}: the next judgment works`);
}

before(async () => {
  elsewhere = await startServer(TINY);
  mismatched = await mkdtemp(path.join(tmpdir(), 'onetoken-mismatched-'));
  for (const f of ['model.safetensors', 'tokenizer.json', 'tokenizer_config.json']) await copyFile(path.join(TINY, f), path.join(mismatched, f));
  const config = JSON.parse(await readFile(path.join(TINY, 'config.json')));
  await writeFile(path.join(mismatched, 'config.json'), JSON.stringify({ ...config, vocab_size: 1000 }));
  llama = await mkdtemp(path.join(tmpdir(), 'onetoken-llama-'));
  for (const f of ['model.safetensors', 'tokenizer.json', 'tokenizer_config.json']) await copyFile(path.join(TINY, f), path.join(llama, f));
  await writeFile(path.join(llama, 'config.json'), JSON.stringify({ ...config, model_type: 'llama' }));
  browser = await openBrowser({
    mounts: {
      '/models/tiny-qwen2/': TINY,
      '/models/cut-once/': TINY,
      '/models/cut-always/': TINY,
      '/models/quota/': TINY,
      '/models/cached/': TINY,
      '/models/hashed/': TINY,
      '/models/stalled/': TINY,
      '/models/gzipped/': TINY,
      '/models/mismatched/': mismatched,
      '/models/llama/': llama,
    },
    faults: {
      '/models/cut-once/model.safetensors': { cutAfter: 100_000, cuts: 1 },
      '/models/cut-always/model.safetensors': { cutAfter: 100_000, cuts: Infinity, ranges: false },
      '/models/hashed/model.safetensors': { sha256: true },
      '/models/stalled/model.safetensors': STALLED,
      '/models/mismatched/model.safetensors': MISMATCHED,
      '/models/llama/config.json': LLAMA_CONFIG,
      ...gzipped,
    },
  });
  ({ page } = await browser.open('index.html?model=folder:tiny-qwen2&lang=en'));
  await page.evaluate(() => window.onetoken.ready);
  await page.fill('#question', 'Mine, still?');
  want = await page.evaluate((ids) => window.onetoken.logits(ids), IDS);
});

after(async () => {
  await browser?.close();
  await elsewhere?.close();
  for (const dir of [mismatched, llama]) if (dir) await rm(dir, { recursive: true, force: true });
});

test('a 404 address names the missing file, in the page\'s language too', async () => {
  const { message, details } = await loadError({ kind: 'url', url: new URL('/models/missing/', browser.url).href });
  assert.match(message, /models\/missing\/config\.json: HTTP 404/);
  const url = new URL('/models/missing/config.json', browser.url).href;
  assert.deepEqual(details, { reason: 'download_http', url, status: 404 });
  assert.equal(await page.textContent('#error-text'), `The download failed: ${url}: the server answered with HTTP error 404`);
  await page.evaluate(() => window.onetoken.setLanguage('ko'));
  assert.equal(await page.textContent('#error-text'), `내려받기에 실패했습니다: ${url}: 서버가 HTTP 404 오류로 응답했습니다`);
  await page.evaluate(() => window.onetoken.setLanguage('en'));
  await assertStillWorks('404');
});

test('a server without CORS headers is named as a possible cause', async () => {
  const { message, details } = await loadError({ kind: 'url', url: elsewhere.url });
  assert.match(message, /config\.json: cannot be read from this page .*does not let other sites read its files \(no CORS headers\)/);
  assert.equal(details.reason, 'download_unreadable');
  assert.equal(details.url, new URL('config.json', elsewhere.url).href);
  assert.ok(details.cause && message.includes(`(${details.cause})`), message);
  await assertStillWorks('no CORS');
});

test('a download cut in the middle resumes where it stopped and gives the same model', async () => {
  assert.equal(await load({ kind: 'folder', name: 'cut-once' }), 'loaded');
  const logits = await page.evaluate((ids) => window.onetoken.logits(ids), IDS);
  assert.deepEqual(logits, want, 'the resumed download gives the same weights');
  // The cut copy could not go into the cache: the status says so.
  assert.match(await page.textContent('#model-status'), /Not kept for offline use: model\.safetensors/);
});

test('a download cut where the server cannot resume fails clearly, and a retry starts clean', async () => {
  const { message, details } = await loadError({ kind: 'folder', name: 'cut-always' });
  assert.match(message, /model\.safetensors: download interrupted after 0\.1 MB and the server does not allow resuming; press load to retry/);
  assert.deepEqual(details, { reason: 'download_not_resumable', url: new URL('/models/cut-always/model.safetensors', browser.url).href, mb: '0.1' });
  await assertStillWorks('cut without resume');
});

test("a full storage quota is reported, and the model still loads", async () => {
  const cdp = await page.context().newCDPSession(page);
  const origin = new URL(browser.url).origin;
  await cdp.send('Storage.overrideQuotaForOrigin', { origin, quotaSize: 20_000 });
  try {
    assert.equal(await load({ kind: 'folder', name: 'quota' }), 'loaded');
    assert.match(await page.textContent('#model-status'), /this site's browser storage is full\. .*model\.safetensors.* will download again next time/);
  } finally {
    await cdp.send('Storage.overrideQuotaForOrigin', { origin });
  }
});

test('a damaged cached copy is detected, removed and fetched again', async () => {
  const base = new URL('/models/cached/', browser.url).href;
  /** Puts the first bytes of `name` in the model cache, recorded with its full length. */
  const damage = (name, keep) => page.evaluate(async ({ url, keep }) => {
    const full = await (await fetch(url)).arrayBuffer();
    const cache = await caches.open('onetoken-models-v1');
    await cache.put(url, new Response(full.slice(0, keep), { headers: { 'content-length': String(full.byteLength) } }));
  }, { url: base + name, keep });
  const cached = (name) => page.evaluate(async (url) => {
    const hit = await (await caches.open('onetoken-models-v1')).match(url);
    return hit ? (await hit.arrayBuffer()).byteLength : null;
  }, base + name);
  // The weights: the load goes on from the network where the damaged copy ends.
  await damage('model.safetensors', 150_000);
  assert.equal(await load({ kind: 'folder', name: 'cached' }), 'loaded');
  assert.deepEqual(await page.evaluate((ids) => window.onetoken.logits(ids), IDS), want);
  assert.equal(await cached('model.safetensors'), null, 'the damaged copy is gone');
  // A small file read whole: the load starts over from the network, and caches it afresh.
  await damage('config.json', 10);
  assert.equal(await load({ kind: 'folder', name: 'cached' }), 'loaded');
  assert.ok((await cached('config.json')) > 10, 'a whole copy again');
  // Damage only the engine can see (a header byte, the length kept, no hash published): the
  // files read from the cache are dropped and the load runs once more from the network.
  assert.equal(await load({ kind: 'folder', name: 'cached' }), 'loaded'); // a whole copy cached
  await page.evaluate(async (url) => {
    const cache = await caches.open('onetoken-models-v1');
    const hit = await cache.match(url);
    const bytes = new Uint8Array(await hit.clone().arrayBuffer());
    bytes[12] = 0x23;
    await cache.put(url, new Response(bytes, { headers: hit.headers }));
  }, base + 'model.safetensors');
  assert.equal(await load({ kind: 'folder', name: 'cached' }), 'loaded');
  assert.deepEqual(await page.evaluate((ids) => window.onetoken.logits(ids), IDS), want);
});

test('files a host sends compressed are cached whole and read from the cache next time', async () => {
  // Content-Length counts the compressed bytes; the page gets them decompressed.
  assert.equal(await load({ kind: 'folder', name: 'gzipped' }), 'loaded');
  assert.deepEqual(await page.evaluate((ids) => window.onetoken.logits(ids), IDS), want);
  const requests = () => GZIPPED.map((name) => gzipped[`/models/gzipped/${name}`].requests);
  assert.deepEqual(requests(), [1, 1, 1]);
  assert.equal(await load({ kind: 'folder', name: 'gzipped' }), 'loaded');
  assert.deepEqual(requests(), [1, 1, 1], 'the second load read them from the cache, not as damaged copies');
  assert.deepEqual(await page.evaluate((ids) => window.onetoken.logits(ids), IDS), want);
});

test('a model of another architecture is named, and its cached config is not fetched again as if damaged', async () => {
  const first = await loadError({ kind: 'folder', name: 'llama' });
  assert.deepEqual(first.details, { reason: 'not_qwen2', found: 'llama' });
  assert.equal(LLAMA_CONFIG.requests, 1);
  // The second load reads config.json from the cache: the same refusal, with no download again.
  const second = await loadError({ kind: 'folder', name: 'llama' });
  assert.deepEqual(second.details, first.details);
  assert.equal(LLAMA_CONFIG.requests, 1, 'config.json was not fetched again');
  await assertStillWorks('another architecture');
});

test('a cached copy whose SHA-256 differs from the published one is fetched again', async () => {
  const url = new URL('/models/hashed/model.safetensors', browser.url).href;
  assert.equal(await load({ kind: 'folder', name: 'hashed' }), 'loaded'); // cached, with its hash
  /** The cached copy's bytes, and its ETag (the server publishes the SHA-256 there). */
  const entry = () => page.evaluate(async (url) => {
    const hit = await (await caches.open('onetoken-models-v1')).match(url);
    return { bytes: [...new Uint8Array(await hit.arrayBuffer())], etag: hit.headers.get('etag') };
  }, url);
  const good = await entry();
  assert.match(good.etag, /^"[0-9a-f]{64}"$/);
  // One byte changed, the length and headers kept: only the hash can tell.
  await page.evaluate(async (url) => {
    const cache = await caches.open('onetoken-models-v1');
    const hit = await cache.match(url);
    const bytes = new Uint8Array(await hit.clone().arrayBuffer());
    bytes[bytes.length - 100] ^= 0x40;
    await cache.put(url, new Response(bytes, { headers: hit.headers }));
  }, url);
  assert.notDeepEqual((await entry()).bytes, good.bytes);
  assert.equal(await load({ kind: 'folder', name: 'hashed' }), 'loaded');
  assert.deepEqual(await page.evaluate((ids) => window.onetoken.logits(ids), IDS), want);
  assert.deepEqual((await entry()).bytes, good.bytes, 'the damaged copy was replaced by the published file');
});

test('a GPU device lost in the middle of the work: the page says so, keeps the inputs and recovers', async () => {
  await page.evaluate(() => window.onetoken.loseDevice());
  const code = await page.evaluate((r) => window.onetoken.judge(r).then(() => 'answered', (e) => e.code), REQUEST);
  assert.equal(code, 'device_lost');
  await page.click('button.run[data-strategy=b]');
  await page.waitForFunction(() => !document.getElementById('error').hidden);
  assert.match(await page.textContent('#error-text'), /The GPU device was lost/);
  assert.equal(await page.isVisible('#reload'), true, 'a reload button is offered');
  await page.click('#reload');
  await page.waitForFunction(() => /Loaded/.test(document.getElementById('model-status').textContent));
  assert.deepEqual(await page.evaluate((ids) => window.onetoken.logits(ids), IDS), want, 'a fresh device, the same model');
  await assertStillWorks('lost device');
});

/**
 * From now on, counts the engine's storage buffers (weights, caches, activations) that are
 * created and not yet destroyed; `liveBuffers()` says how many and their bytes. A buffer only
 * dropped, not destroyed, holds GPU memory until the garbage collector runs.
 */
async function trackBuffers() {
  const [worker] = page.workers();
  await worker.evaluate(() => {
    if (!self.buffersTracked) {
      const create = GPUDevice.prototype.createBuffer;
      GPUDevice.prototype.createBuffer = function (descriptor) {
        const buffer = create.call(this, descriptor);
        if (descriptor.usage & GPUBufferUsage.STORAGE) self.liveSet.add(buffer);
        return buffer;
      };
      const destroy = GPUBuffer.prototype.destroy;
      GPUBuffer.prototype.destroy = function () {
        self.liveSet.delete(this);
        return destroy.call(this);
      };
      self.buffersTracked = true;
    }
    self.liveSet = new Set();
  });
}

async function liveBuffers() {
  const [worker] = page.workers();
  return worker.evaluate(() => ({ count: self.liveSet.size, bytes: [...self.liveSet].reduce((s, b) => s + b.size, 0) }));
}

test('a load cancelled mid-download stops there, and the model in use stays loaded and named', async () => {
  assert.equal(await load({ kind: 'folder', name: 'tiny-qwen2' }), 'loaded');
  const inUse = await page.textContent('#model-status');
  await trackBuffers();
  const result = page.evaluate(() => window.onetoken.load({ kind: 'folder', name: 'stalled' }).then(() => 'loaded', (e) => e.code));
  await page.waitForFunction(() => /model\.safetensors:/.test(document.getElementById('model-status').textContent));
  assert.ok((await liveBuffers()).count > 0, 'the weights were on their way to the GPU');
  await page.click('#cancel');
  assert.equal(await result, 'cancelled');
  // What the cancelled load put on the GPU is freed at once, not left to the garbage collector.
  assert.deepEqual(await liveBuffers(), { count: 0, bytes: 0 });
  // The download stops too: the copy meant for the cache does not go on fetching the file
  // (and holding, unread, what the load no longer reads).
  assert.deepEqual(await responseEnded(STALLED), { dropped: 1, finished: undefined });
  assert.match(await page.textContent('#run-status'), /Cancelled/);
  assert.equal(await page.textContent('#model-status'), inUse, 'the status names the model still in use');
  assert.equal(await page.isVisible('#model-progress'), false);
  assert.equal(await page.isVisible('#error'), false);
  const logits = await page.evaluate((ids) => window.onetoken.logits(ids), IDS);
  assert.deepEqual(logits, want, 'the model in use still answers, unchanged');
  await assertStillWorks('cancelled load');
});

/** Waits until the server has ended `fault`'s response, whole or dropped (at most 5 s). */
async function responseEnded(fault) {
  for (let waited = 0; !fault.finished && !fault.dropped && waited < 5000; waited += 100) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { dropped: fault.dropped, finished: fault.finished };
}

test('a load that fails part way through a download ends the download', async () => {
  const message = await load({ kind: 'folder', name: 'mismatched' });
  assert.match(message, /expected shape \[1000, 64\]/);
  // The copy meant for the cache does not go on fetching (and holding) the rest of the file.
  assert.deepEqual(await responseEnded(MISMATCHED), { dropped: 1, finished: undefined });
  await assertStillWorks('failed load');
});

/**
 * Makes the GPU report running out of memory at the next `count` buffers the engine creates
 * (Infinity: at every one until set again), as the browser does when an allocation fails (an
 * uncaptured GPUOutOfMemoryError).
 */
async function outOfMemoryAt(count) {
  const [worker] = page.workers();
  await worker.evaluate((n) => {
    if (!self.oomWrapped) {
      const create = GPUDevice.prototype.createBuffer;
      GPUDevice.prototype.createBuffer = function (...args) {
        const buffer = create.apply(this, args);
        if (self.oomLeft > 0) {
          self.oomLeft -= 1;
          this.dispatchEvent(new GPUUncapturedErrorEvent('uncapturederror', { error: new GPUOutOfMemoryError('simulated') }));
        }
        return buffer;
      };
      self.oomWrapped = true;
    }
    self.oomLeft = n;
  }, count);
}

test('where two models do not fit in GPU memory, the one in use is unloaded to make room, and the page says which is loaded', async () => {
  assert.equal(await load({ kind: 'folder', name: 'tiny-qwen2' }), 'loaded');
  // The first try runs out of memory beside the model in use; the second, alone, fits.
  await outOfMemoryAt(1);
  const info = await page.evaluate(() => window.onetoken.load({ kind: 'synthetic', name: 'qwen2.5-0.5b' }));
  assert.equal(info.synthetic, true);
  assert.match(await page.textContent('#model-status'), /^Loaded: qwen2\.5-0\.5b/);
  assert.equal(await page.isVisible('#error'), false);
  // Both tries run out: no model is left, and the page says so rather than name the old one.
  await outOfMemoryAt(Infinity);
  await trackBuffers();
  const message = await page.evaluate(() => window.onetoken.load({ kind: 'folder', name: 'tiny-qwen2' })
    .then(() => 'loaded', (e) => `${e.code}: ${e.message}`));
  assert.match(message, /^gpu_memory: GPU: out of GPU memory/);
  // Neither try's weights stay on the GPU.
  assert.deepEqual(await liveBuffers(), { count: 0, bytes: 0 });
  assert.match(await page.textContent('#error-text'), /^This GPU ran out of memory: GPU: out of GPU memory/);
  assert.match(await page.textContent('#model-status'), /^No model is loaded/);
  const judged = await page.evaluate((r) => window.onetoken.judge(r).then(() => 'answered', (e) => e.message), REQUEST);
  assert.match(judged, /^No model is loaded/);
  await outOfMemoryAt(0);
  await assertStillWorks('out of GPU memory');
});

test('a page served over plain http from another computer is told why WebGPU is missing there', async () => {
  // A classroom serving the page from a laptop: http://laptop.test is not a secure context, and
  // browsers give WebGPU (and Cache Storage) to secure contexts only.
  const lan = await openBrowser({ mounts: { '/models/tiny-qwen2/': TINY }, args: ['--host-resolver-rules=MAP laptop.test 127.0.0.1'] });
  try {
    const remote = await lan.context.newPage();
    const at = new URL(lan.url);
    at.hostname = 'laptop.test';
    await remote.goto(new URL('index.html?lang=ko', at).href);
    await remote.waitForFunction(() => !document.getElementById('error').hidden);
    const origin = at.origin;
    assert.equal(await remote.textContent('#error-text'), '이 주소에서는 WebGPU를 쓸 수 없습니다: 브라우저는 https로 제공되거나 '
      + `같은 컴퓨터에서 연(http://localhost) 페이지에만 WebGPU를 허용하는데, 이 페이지는 ${origin}에서 왔습니다. `
      + 'https로 제공하거나, 폴더를 컴퓨터마다 복사해 그 컴퓨터에서 웹 서버를 실행하고(python3 -m http.server 8000) http://localhost:8000을 여세요');
    assert.equal(await remote.textContent('#gpu-info'), '이 주소에서는 WebGPU를 쓸 수 없습니다');
    // Clearing the caches (there is no Cache Storage here) keeps the explanation in view.
    await remote.evaluate(() => { document.getElementById('cache-clear').closest('details').open = true; });
    await remote.click('#cache-clear');
    await remote.waitForTimeout(500);
    assert.match(await remote.textContent('#error-text'), /^이 주소에서는 WebGPU를 쓸 수 없습니다: /);
    await remote.evaluate(() => window.onetoken.setLanguage('en'));
    assert.match(await remote.textContent('#error-text'), new RegExp(`^WebGPU is not available at this address: .*this page came from ${origin}\\.`));
    assert.equal(await remote.textContent('#gpu-info'), 'WebGPU is not available at this address');
  } finally {
    await lan.close();
  }
});

test('a browser without WebGPU is told which browsers work, and typing still works', async () => {
  const plain = await openBrowser({ webgpu: false });
  try {
    const { page: bare } = await plain.open('index.html?lang=en');
    await bare.waitForFunction(() => !document.getElementById('error').hidden);
    const text = await bare.textContent('#error-text');
    assert.match(text, /no WebGPU\. Use a recent Chrome or Edge .*Safari 26/);
    await bare.fill('#question', 'typed anyway');
    assert.equal(await bare.inputValue('#question'), 'typed anyway');
    // Nothing that needs the engine can be pressed, so the explanation stays in view.
    for (const id of ['model-load', 'batch-run', 'bench-run']) assert.equal(await bare.isDisabled(`#${id}`), true, id);
    assert.equal(await bare.isDisabled('button.run[data-strategy=b]'), true);
  } finally {
    await plain.close();
  }
});
