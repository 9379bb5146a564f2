// Placeholder page: the wasm tokenizer on the bundled Qwen2.5 tokenizer, token ids shown live.
// window.onetoken = { ready: Promise, tokenize(text) -> number[] } is what the browser tests use.
import init, { WebTokenizer } from './pkg/onetoken.js';

const ASSETS = './pkg/assets/qwen2.5/';
const $ = (id) => document.getElementById(id);

async function fetchBytes(url) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return new Uint8Array(await res.arrayBuffer());
}

let tokenizer = null;

async function load() {
  await init();
  const [json, config] = await Promise.all([
    fetchBytes(ASSETS + 'tokenizer.json'),
    fetchBytes(ASSETS + 'tokenizer_config.json'),
  ]);
  tokenizer = new WebTokenizer(json, config);
}

function tokenize(text) {
  if (!tokenizer) throw new Error('onetoken: the tokenizer is not loaded yet (await onetoken.ready)');
  return Array.from(tokenizer.encode(text));
}

function showIds() {
  const ids = tokenize($('text').value);
  $('count').textContent = `${ids.length} tokens:`;
  $('ids').textContent = ids.join(' ');
}

async function showGpu() {
  if (!navigator.gpu) {
    $('gpu').textContent = 'not available in this browser';
    return;
  }
  const adapter = await navigator.gpu.requestAdapter().catch(() => null);
  const info = adapter?.info;
  $('gpu').textContent = !adapter
    ? 'navigator.gpu exists, but no adapter was found'
    : `available (${[info?.vendor, info?.architecture, info?.description].filter(Boolean).join(', ') || 'adapter found'})`;
}

const ready = load();
window.onetoken = { ready, tokenize };

showGpu();
ready.then(
  () => {
    $('status').textContent = 'Tokenizer loaded. Type to see the token ids.';
    $('text').disabled = false;
    $('text').addEventListener('input', showIds);
    showIds();
  },
  (e) => {
    $('status').textContent = `Could not load the tokenizer: ${e.message ?? e}`;
    $('status').className = 'error';
  },
);
