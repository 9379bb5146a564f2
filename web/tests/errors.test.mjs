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

/**
 * The bad-input table's model-folder rows: a copy of the tiny model with one file broken. `says`
 * matches the error's message, and the error box where no `box` is given (the box words some
 * cases from their details).
 */
const ROWS = {
  'not-a-tokenizer': { file: 'tokenizer.json', text: '{"hello": 1}', says: /tokenizer\.json is not a Hugging Face tokenizer/ },
  'template-syntax': { file: 'tokenizer_config.json', text: JSON.stringify({ chat_template: '{% for m in messages %}' }), says: /chat template: syntax error/, at: 'judge' },
  'heads-not-dividing': { file: 'config.json', edit: (c) => ({ ...c, num_attention_heads: 5 }), says: /config\.json: num_attention_heads \(5\) does not divide hidden_size \(64\)/ },
  'another-architecture': { file: 'config.json', edit: (c) => ({ ...c, model_type: 'llama' }), says: /config\.json: model_type "llama" is not supported: onetoken runs Qwen2 and Qwen2\.5 models/, box: /The model’s config cannot be used: this is a “llama” model; this page runs Qwen2 and Qwen2\.5 models only/ },
  'vocab-mismatch': { file: 'config.json', edit: (c) => ({ ...c, vocab_size: 1000 }), says: /tensor model\.embed_tokens\.weight: expected shape \[1000, 64\], found \[512, 64\]/ },
  'corrupt-header': { file: 'model.safetensors', bytes: (b) => withByte(b, 12, 0x23), says: /model file model\.safetensors: header entry __#etadata__: missing field `dtype`/ },
  'header-past-the-file': {
    file: 'model.safetensors',
    bytes: (b) => { const out = Buffer.from(b); out.writeBigUInt64LE(1n << 20n); return out; },
    says: /model file model\.safetensors: header length 1048576 is impossible for a file of \d+ bytes/,
  },
  'wrong-dtype': { file: 'model.safetensors', bytes: (b) => editHeader(b, (h) => { h['model.norm.weight'].dtype = 'I8'; }), says: /tensor model\.norm\.weight: dtype I8 is not supported/ },
  'wrong-shape': { file: 'model.safetensors', bytes: (b) => editHeader(b, (h) => { h['model.norm.weight'].shape = [32, 2]; }), says: /tensor model\.norm\.weight: expected shape \[64\], found \[32, 2\]/ },
  'missing-tensor': { file: 'model.safetensors', bytes: (b) => withoutTensor(b, 'model.norm.weight'), says: /missing tensor\(s\) for this config: model\.norm\.weight/ },
};
const rowDirs = {};

/** A safetensors file's header (JSON) and data, and back: the broken-weights rows edit them. */
function splitSafetensors(bytes) {
  const n = Number(bytes.readBigUInt64LE(0));
  return [JSON.parse(bytes.subarray(8, 8 + n).toString()), bytes.subarray(8 + n)];
}
function joinSafetensors(header, data) {
  const json = Buffer.from(JSON.stringify(header));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([length, json, data]);
}
function editHeader(bytes, edit) {
  const [header, data] = splitSafetensors(bytes);
  edit(header);
  return joinSafetensors(header, data);
}
/** The file without one tensor, the data repacked so no hole is left. */
function withoutTensor(bytes, name) {
  const [header, data] = splitSafetensors(bytes);
  const [out, parts] = [{}, []];
  let at = 0;
  for (const [key, info] of Object.entries(header)) {
    if (key === '__metadata__' || key === name) continue;
    const [a, b] = info.data_offsets;
    parts.push(data.subarray(a, b));
    out[key] = { ...info, data_offsets: [at, at + b - a] };
    at += b - a;
  }
  return joinSafetensors(out, Buffer.concat(parts));
}
function withByte(bytes, at, value) {
  const out = Buffer.from(bytes);
  out[at] = value;
  return out;
}

before(async () => {
  broken = await mkdtemp(path.join(tmpdir(), 'onetoken-broken-'));
  for (const f of ['config.json', 'tokenizer.json', 'tokenizer_config.json']) await copyFile(path.join(FIXTURE, f), path.join(broken, f));
  const weights = await readFile(path.join(FIXTURE, 'model.safetensors'));
  await writeFile(path.join(broken, 'model.safetensors'), weights.subarray(0, weights.length - 1000));
  const mounts = { '/models/broken/': broken, '/models/tiny-qwen2/': FIXTURE };
  for (const [name, row] of Object.entries(ROWS)) {
    const dir = await mkdtemp(path.join(tmpdir(), `onetoken-${name}-`));
    for (const f of ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']) await copyFile(path.join(FIXTURE, f), path.join(dir, f));
    const original = await readFile(path.join(dir, row.file));
    const text = row.bytes ? row.bytes(original) : row.edit ? JSON.stringify(row.edit(JSON.parse(original.toString()))) : row.text;
    await writeFile(path.join(dir, row.file), text);
    rowDirs[name] = dir;
    mounts[`/models/${name}/`] = dir;
  }
  browser = await openBrowser({ mounts });
  ({ page } = await browser.open('index.html?model=folder:tiny-qwen2&lang=en'));
  await page.evaluate(() => window.onetoken.ready);
});

after(async () => {
  await browser?.close();
  await rm(broken, { recursive: true, force: true });
  for (const dir of Object.values(rowDirs)) await rm(dir, { recursive: true, force: true });
});

test('each broken model folder of the bad-input table is named in its error, inputs kept, and the next load works', async () => {
  await page.fill('#question', 'Still mine?');
  for (const [name, row] of Object.entries(ROWS)) {
    const message = await page.evaluate((name) => window.onetoken.load({ kind: 'folder', name })
      .then(() => 'loaded', (e) => e.message), name);
    if (row.at === 'judge') {
      // The folder loads; the template fails when a judgment renders it (the page's B button).
      assert.equal(message, 'loaded', name);
      await page.click('button.run[data-strategy=b]');
      await page.waitForFunction(() => !document.getElementById('error').hidden);
    } else {
      assert.match(message, row.says, name);
    }
    assert.equal(await page.isVisible('#error'), true, name);
    assert.match(await page.textContent('#error-text'), row.box ?? row.says, name);
    assert.equal(await page.inputValue('#question'), 'Still mine?', name);
    // A tensor's shape and a model's architecture are data too: the Korean page says them in Korean.
    const korean = {
      'wrong-shape': '모델 파일을 쓸 수 없습니다: 텐서 model.norm.weight의 모양은 [64]이어야 하는데 [32, 2]입니다',
      'another-architecture': '모델 설정(config)을 쓸 수 없습니다: “llama” 구조의 모델입니다. 이 페이지는 Qwen2와 Qwen2.5 모델만 실행합니다',
    }[name];
    if (korean) {
      await page.evaluate(() => window.onetoken.setLanguage('ko'));
      assert.equal(await page.textContent('#error-text'), korean);
      await page.evaluate(() => window.onetoken.setLanguage('en'));
    }
  }
  await page.evaluate(() => window.onetoken.load({ kind: 'folder', name: 'tiny-qwen2' }));
  const r = await page.evaluate(() => window.onetoken.judge({ user: 'Which color is the sky?', choices: ['blue', 'red'] }));
  assert.equal(r.decode_steps, 0);
});

test('a document past the context says how many tokens and the limit, and the next run works', async () => {
  await page.evaluate(() => window.onetoken.load({ kind: 'folder', name: 'tiny-qwen2' }));
  const { message, details } = await page.evaluate(() => window.onetoken.judge({ user: 'blue '.repeat(5000), choices: ['a', 'b'] })
    .then(() => ({ message: 'no error' }), (e) => ({ message: `${e.code}: ${e.message}`, details: e.details })));
  assert.match(message, /^context_overflow: prompt of \d+ tokens does not fit: the model's context is 4096 tokens$/);
  // The same as data, which the page words in its own language.
  assert.deepEqual(details, { reason: 'model_context', tokens: Number(message.match(/of (\d+) tokens/)[1]), limit: 4096 });
  const r = await page.evaluate(() => window.onetoken.judge({ user: 'Which color is the sky?', choices: ['blue', 'red'] }));
  assert.equal(r.decode_steps, 0);
  // On the Korean page the whole error is in Korean, and a language switch re-words it.
  const typed = await page.inputValue('#document');
  await page.evaluate(() => window.onetoken.setLanguage('ko'));
  await page.fill('#document', 'blue '.repeat(5000));
  await page.click('button.run[data-strategy=b]');
  await page.waitForFunction(() => !document.getElementById('error').hidden);
  const korean = await page.textContent('#error-text');
  assert.match(korean, /^모델이 다룰 수 있는 길이를 넘었습니다: 프롬프트가 \d+토큰인데 모델의 컨텍스트는 4096토큰까지입니다\. 문서를 줄여 주세요$/);
  await page.evaluate(() => window.onetoken.setLanguage('en'));
  assert.equal(await page.textContent('#error-text'),
    `Too long for the model: the prompt is ${korean.match(/(\d+)토큰인데/)[1]} tokens and the model’s context holds 4096; shorten the document`);
  await page.fill('#document', typed);
});

test('a truncated model file is named in a clear error, and nothing typed is lost', async () => {
  await page.evaluate(() => window.onetoken.load({ kind: 'folder', name: 'tiny-qwen2' }));
  const inUse = await page.textContent('#model-status');
  await page.fill('#question', 'My own question?');
  const { message, code } = await page.evaluate(() => window.onetoken.load({ kind: 'folder', name: 'broken' })
    .then(() => ({ message: 'loaded' }), (e) => ({ message: e.message, code: e.code })));
  assert.match(message, /model file model\.safetensors: truncated: tensor .* ends at data byte/);
  assert.equal(code, 'model_file', 'errors carry the library error kind as `code`');
  assert.equal(await page.isVisible('#error'), true);
  assert.match(await page.textContent('#error-text'), /truncated/);
  assert.equal(await page.inputValue('#question'), 'My own question?');
  // The model in use was not given up for the broken one: still named, still answering.
  assert.equal(await page.textContent('#model-status'), inUse);
  assert.match(inUse, /tiny-qwen2/);
  assert.equal(await page.isVisible('#model-progress'), false);
  const r = await page.evaluate(() => window.onetoken.judge({ user: 'Which color is the sky?', choices: ['blue', 'red'] }));
  assert.equal(r.synthetic, false);
});

test('a typed choice already listed, bad benchmark numbers and an empty batch are refused clearly', async () => {
  const chips = () => page.locator('#chips .chip').count();
  const before = await chips();
  const first = await page.textContent('#chips .chip span');
  await page.fill('#choice-new', first);
  await page.press('#choice-new', 'Enter');
  assert.match(await page.textContent('#error-text'), /is already a choice/);
  assert.equal(await chips(), before);
  for (const [lengths, bad] of [['32, 1e9', '1e9'], ['0x10', '0x10'], ['32 6x4', '6x4']]) {
    await page.fill('#bench-lengths', lengths);
    await page.click('#bench-run');
    assert.match(await page.textContent('#error-text'), new RegExp(`Prompt lengths: “${bad}” is not a whole number`), lengths);
  }
  await page.fill('#bench-lengths', '32,64');
  for (const repeats of ['0', '21', '2 3', '1.5', '']) {
    await page.fill('#bench-repeats', repeats);
    await page.click('#bench-run');
    assert.equal(await page.textContent('#error-text'), `Runs per point: “${repeats}” is not one whole number from 1 to 20.`, repeats);
  }
  // The page's own error is re-made on a language switch: the field is named in Korean.
  await page.evaluate(() => window.onetoken.setLanguage('ko'));
  assert.equal(await page.textContent('#error-text'), '측정점마다 실행 횟수: “”은(는) 1부터 20까지의 정수 하나가 아닙니다.');
  await page.fill('#bench-repeats', '1');
  // A length past the model's context is refused by the engine before measuring, in Korean.
  await page.fill('#bench-lengths', '32, 5000');
  await page.click('#bench-run');
  await page.waitForFunction(() => /5000토큰/.test(document.getElementById('error-text').textContent));
  assert.equal(await page.textContent('#error-text'), '이 설정으로는 벤치마크를 돌릴 수 없습니다: '
    + '5000토큰 프롬프트와 그 답은 모델의 컨텍스트 4096토큰에 들어가지 않습니다. 길이는 4032까지 주세요');
  await page.evaluate(() => window.onetoken.setLanguage('en'));
  await page.fill('#bench-lengths', '32,64');
  await page.fill('#bench-repeats', '3');
  await page.fill('#batch-questions', '');
  await page.click('#batch-run');
  await page.waitForFunction(() => /the batch has no questions/.test(document.getElementById('error-text').textContent));
  assert.equal(await page.textContent('#batch-status'), '', 'no "Busy" left behind');
  assert.equal(await page.isDisabled('#batch-run'), false);
});

test('a mistyped ?model= says what it takes, and the picker still works', async () => {
  const { page: other } = await browser.open('index.html?model=nope:x&lang=ko');
  try {
    await other.waitForFunction(() => !document.getElementById('error').hidden);
    // A wiki author's mistyped embed, in the page's language, with the syntax to write.
    assert.equal(await other.textContent('#error-text'), '페이지 주소(URL)의 값을 이 페이지에서 쓸 수 없습니다: '
      + 'model=nope:x은(는) 이 페이지가 아는 모델이 아닙니다. synthetic:이름, folder:이름, folder:파일.gguf, url:저장소 또는 url:파일.gguf로 쓰세요');
    assert.match(await other.textContent('#model-status'), /불러온 모델이 없습니다/);
    assert.equal(await other.isDisabled('#model-load'), false);
    await other.selectOption('#model-kind', 'synthetic:qwen2.5-0.5b');
    await other.click('#model-load');
    await other.waitForFunction(() => /qwen2\.5-0\.5b/.test(document.getElementById('model-status').textContent));
  } finally {
    await other.close();
  }
});

test('after a failed start-up load, Measure and Run say no model is loaded, and a model loaded by hand serves the scripting API', async () => {
  const { page: other } = await browser.open('index.html?model=folder:missing&lang=ko');
  try {
    await other.waitForFunction(() => !document.getElementById('error').hidden);
    assert.doesNotMatch(await other.textContent('#error-text'), /불러온 모델이 없습니다/);
    await other.click('#bench-run');
    await other.waitForFunction(() => /불러온 모델이 없습니다/.test(document.getElementById('error-text').textContent));
    await other.evaluate(() => { document.getElementById('error').hidden = true; });
    await other.click('button.run[data-strategy=b]');
    await other.waitForFunction(() => !document.getElementById('error').hidden);
    assert.match(await other.textContent('#error-text'), /불러온 모델이 없습니다/);
    const info = await other.evaluate(() => window.onetoken.load({ kind: 'folder', name: 'tiny-qwen2' }));
    assert.equal(info.synthetic, false);
    const record = await other.evaluate(() => window.onetoken.judge({ user: 'Which color is the sky?', choices: ['blue', 'red'] }));
    assert.ok(record.choice, 'the API answers once a model is loaded');
  } finally {
    await other.close();
  }
});

test('?strategy= runs at once, and a strategy the page has no button for is named', async () => {
  const { page: runs } = await browser.open('index.html?model=folder:tiny-qwen2&lang=en&strategy=b&q=Which%20color%20is%20the%20sky%3F');
  try {
    await runs.evaluate(() => window.onetoken.ready);
    await runs.waitForFunction(() => !document.getElementById('result-section').hidden);
    assert.equal(await runs.isVisible('#error'), false);
  } finally {
    await runs.close();
  }
  const { page: all } = await browser.open('index.html?model=folder:tiny-qwen2&lang=en&strategy=all');
  try {
    await all.evaluate(() => window.onetoken.ready);
    await all.waitForFunction(() => !document.getElementById('error').hidden);
    assert.match(await all.textContent('#error-text'), /strategy=all is not a strategy this page runs; use one of both, a, a-free, b, b-full-head$/);
    const record = await all.evaluate(() => window.onetoken.judge({ user: 'Which color is the sky?', choices: ['blue', 'red'] }));
    assert.ok(record.choice, 'the page still works');
  } finally {
    await all.close();
  }
});

test('a preset without batch questions fills the batch with its own question', async () => {
  const { page: other } = await browser.open('index.html?model=nope:x&lang=en'); // no model needed
  try {
    await other.selectOption('#preset', 'sentiment');
    assert.equal(await other.inputValue('#batch-questions'), await other.inputValue('#question'));
  } finally {
    await other.close();
  }
});

test('after the error the page loads and runs the synthetic model, and drops what the last model measured', async () => {
  await page.evaluate(() => window.onetoken.load({ kind: 'folder', name: 'tiny-qwen2' }));
  await page.click('button.run[data-strategy=b]');
  await page.waitForFunction(() => !document.getElementById('result-section').hidden);
  const info = await page.evaluate(() => window.onetoken.load({ kind: 'synthetic', name: 'qwen2.5-0.5b' }));
  assert.equal(info.synthetic, true);
  assert.equal(await page.isVisible('#error'), false);
  // The tiny model's answer and timings are not shown (or exported) as this model's.
  assert.equal(await page.isVisible('#result-section'), false);
});

test('bad choices are refused with a specific message', async () => {
  const ask = (choices) => page.evaluate((c) => window.onetoken.judge({ user: 'q', choices: c }).then(() => 'ok', (e) => e.message), choices);
  assert.match(await ask([]), /no choices/);
  assert.match(await ask(['red']), /only one choice/);
  assert.match(await ask(['red', 'red']), /are the same/);
  assert.match(await ask(['red', '']), /is empty/);
  const { code, details } = await page.evaluate(() => window.onetoken.judge({ user: 'q', choices: ['a', 'b', 'a'] })
    .then(() => ({}), (e) => ({ code: e.code, details: e.details })));
  assert.equal(code, 'input');
  assert.deepEqual(details, { reason: 'same_choices', first: 1, second: 3, choice: 'a' });
  // In a batch, the failing request is named, in the details too.
  const batch = await page.evaluate(() => window.onetoken.batch([{ user: 'q', choices: ['a', 'b'] }, { user: 'q', choices: ['c'] }])
    .then(() => ({}), (e) => ({ message: e.message, details: e.details })));
  assert.deepEqual(batch, { message: 'request 2: input: only one choice ("c"): give at least two', details: { reason: 'one_choice', choice: 'c', request: 2 } });
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
