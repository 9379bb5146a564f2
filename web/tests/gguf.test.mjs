// The page on a GGUF file: the tiny model's GGUF (written by llama.cpp's gguf-py) loads by
// address, as a file bundled beside the page and as a chosen local file, gives the native engine's logits and answers for the
// same file, and a cut file or a --quant that does not match is refused with a clear message.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser, REPO, TINY } from './browser.mjs';

const CLI = path.join(REPO, 'target/fast/onetoken');
const GGUF = path.join(TINY, 'model.gguf');
const IDS = [1, 5, 9, 200, 77, 3];
const REQUEST = { system: 'You judge colors.', user: 'Which color is the sky?', choices: ['blue', 'red', 'yellow'] };

let scratch;
let browser;
let page;

/** The native CLI's JSON lines for `args` on the same GGUF file. */
function native(args) {
  const out = execFileSync(CLI, args, { env: { ...process.env, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? scratch } });
  return out.toString().trim().split('\n').map((l) => JSON.parse(l));
}

before(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'onetoken-gguf-'));
  const bytes = await readFile(GGUF);
  await writeFile(path.join(scratch, 'cut.gguf'), bytes.subarray(0, bytes.length - 5000));
  await writeFile(path.join(scratch, 'request.json'), JSON.stringify(REQUEST));
  browser = await openBrowser({ mounts: { '/models/tiny-qwen2/': TINY, '/models/broken/': scratch, '/models/tiny.gguf': GGUF } });
  ({ page } = await browser.open('index.html?model=url:/models/tiny-qwen2/model.gguf&lang=en'));
  await page.evaluate(() => window.onetoken.ready);
});

after(async () => {
  await browser?.close();
  await rm(scratch, { recursive: true, force: true });
});

test('a GGUF file by address gives the native logits and answers', async () => {
  const status = await page.textContent('#model-status');
  assert.match(status, /model\.gguf/);
  assert.match(status, /gguf:q8_0/);
  const logits = await page.evaluate((ids) => window.onetoken.logits(ids), IDS);
  const [cli] = native(['logits', '--model', GGUF, '--ids', IDS.join(','), '--top-k', '512']);
  cli.top.forEach(([id, logit]) => assert.ok(Math.abs(logits[id] - logit) <= 1e-3, `token ${id}: page ${logits[id]}, native ${logit}`));
  const got = await page.evaluate((r) => window.onetoken.judge({ ...r, strategy: 'b' }), REQUEST);
  const [want] = native(['judge', '--model', GGUF, '--request', path.join(scratch, 'request.json'), '--strategy', 'b']);
  assert.equal(got.choice_index, want.choice_index);
  assert.equal(got.prompt_tokens, want.prompt_tokens);
  got.choice_logits.forEach((l, i) => assert.ok(Math.abs(l - want.choice_logits[i]) <= 1e-3, `choice ${i}`));
});

test('a chosen local GGUF file loads like the address', async () => {
  const info = await page.evaluate(async () => {
    const blob = await (await fetch('/models/tiny-qwen2/model.gguf')).blob();
    return window.onetoken.load({ kind: 'files', files: [new File([blob], 'model.gguf')] });
  });
  assert.equal(info.quant, 'gguf:q8_0');
  assert.equal(info.vocab_size, 512);
});

test('a GGUF file bundled beside the page (models/NAME.gguf) loads by name', async () => {
  const info = await page.evaluate(() => window.onetoken.load({ kind: 'folder', name: 'tiny.gguf' }));
  assert.equal(info.quant, 'gguf:q8_0');
  assert.match(await page.textContent('#model-status'), /Loaded: tiny\.gguf/);
});

test('a cut GGUF file and a mismatched weight format are named, and the next load works', async () => {
  const cut = await page.evaluate(() => window.onetoken.load({ kind: 'url', url: '/models/broken/cut.gguf' }).then(() => 'loaded', (e) => e.message));
  assert.match(cut, /model file cut\.gguf: truncated: tensor model\.\S+ ends at data byte \d+, but the file has only \d+ data bytes/);
  const quant = await page.evaluate(() => window.onetoken.load({ kind: 'url', url: '/models/tiny-qwen2/model.gguf', quant: 'q4_0' }).then(() => 'loaded', (e) => e.message));
  assert.match(quant, /--quant q4_0 does not match this GGUF file \(q8_0\)/);
  const info = await page.evaluate(() => window.onetoken.load({ kind: 'url', url: '/models/tiny-qwen2/model.gguf' }));
  assert.equal(info.quant, 'gguf:q8_0');
});
