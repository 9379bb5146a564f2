// Model sources, shared by the engine worker: synthetic weights (no download), a bundled folder
// beside the page (models/<name>/) or GGUF file (models/<name>.gguf), the official Hugging Face
// files by URL (a repo, or one .gguf file), or local files (a model folder's files, or one
// .gguf). Weights stream tensor by tensor into the GPU as they arrive (never whole in wasm
// memory); downloads are kept in Cache Storage so a second visit, or a classroom offline,
// loads from it.
import { Sha256Stream, WebEngine, WebGgufLoader, WebLoader } from './pkg/onetoken.js';
import { coded } from './error-text.js';

const CACHE = 'onetoken-models-v1';
/** Error codes that can come from a file's contents (a cached copy may be the cause). */
const FILE_ERRORS = new Set(['model_file', 'config', 'tokenizer']);
const TOKENIZER = new URL('./pkg/assets/qwen2.5/', import.meta.url);

const isGgufName = (name) => /\.gguf$/i.test(name);

/**
 * The GGUF file a source names, else null: {url} for a bundled file or an address (a Hugging
 * Face page's /blob/ address is read as its /resolve/ one), {file} for a chosen local file.
 */
export function ggufFile(source) {
  if (source.kind === 'folder' && isGgufName(source.name)) return { url: new URL(`./models/${encodeURIComponent(source.name)}`, import.meta.url).href };
  if (source.kind === 'url') {
    const url = new URL(source.url.trim(), globalThis.location?.href);
    if (!isGgufName(url.pathname)) return null;
    if (url.hostname === 'huggingface.co') url.pathname = url.pathname.replace('/blob/', '/resolve/');
    return { url: url.href };
  }
  if (source.kind === 'files') {
    const file = [...source.files].find((f) => isGgufName(f.name));
    return file ? { file } : null;
  }
  return null;
}

/** A source's base URL for fetched files (folder or Hugging Face), else null. */
export function sourceBase(source) {
  if (source.kind === 'folder') return new URL(`./models/${encodeURIComponent(source.name)}/`, import.meta.url);
  if (source.kind === 'url') {
    // Accept a repo id (Qwen/Qwen2.5-0.5B-Instruct), a repo page URL or a resolve/main URL.
    let base = source.url.trim();
    if (!/^https?:/.test(base)) base = `https://huggingface.co/${base.replace(/^\/+|\/+$/g, '')}`;
    if (/huggingface\.co\/[^/]+\/[^/]+\/?$/.test(base)) base = base.replace(/\/?$/, '/resolve/main/');
    return new URL(base.endsWith('/') ? base : base + '/');
  }
  return null;
}

async function openCache() {
  try {
    return await caches.open(CACHE);
  } catch {
    return null; // no Cache Storage (e.g. an opaque origin): load without caching
  }
}

/**
 * Fetches `url` as a stream, from the cache when there, else from the network while a copy
 * goes into the cache. `log` (optional) collects, for the load, the outcome of each cache write
 * (`writes`) and the addresses read from the cache (`hits`). `optional`: a 404 gives
 * null. Returns {body, length, cached, url, signal, stop}: `stop()` ends a download the load no
 * longer reads (its cache copy is then not kept); `signal` (a cancelled load's) ends it too, and
 * the file's `signal` is aborted by either (a resumed download takes it).
 */
async function fetchFile(url, { optional = false, useCache = true, log = null, signal = null } = {}) {
  const download = new AbortController();
  const ended = { signal: AbortSignal.any([download.signal, signal].filter(Boolean)), stop: () => download.abort() };
  const cache = useCache ? await openCache() : null;
  const hit = await cache?.match(url);
  // An optional file known to be absent is remembered too, so an offline load needs no network.
  if (hit?.headers.get('x-onetoken-absent')) return null;
  if (hit) {
    log?.hits.push(url);
    const length = Number(hit.headers.get('content-length')) || null;
    const body = checkedCopy(hit.body, { length, sha256: publishedSha256(hit.headers) }, url, cache);
    return { body, length, cached: true, url, ...ended };
  }
  let res;
  try {
    res = await fetch(url, { signal: ended.signal });
  } catch (e) {
    if (signal?.aborted) throw cancelled();
    // fetch() says no more for a server that is down than for one that refuses to share its
    // files with other sites (no CORS headers); name both when the file is on another site.
    const elsewhere = new URL(url).origin !== self.location.origin;
    const cause = e.message;
    throw elsewhere
      ? coded('download', `${url}: cannot be read from this page (${cause}): the server is unreachable, or it does not let other sites read its files (no CORS headers). Check the address, or download the files and choose them as local files`,
        { reason: 'download_unreadable', url, cause })
      : coded('download', `${url}: download failed (${cause}); check the address or the network and retry`, { reason: 'download_failed', url, cause });
  }
  if (res.status === 404 && optional) {
    await cache?.put(url, new Response('', { headers: { 'x-onetoken-absent': '1' } })).catch(() => {});
    return null;
  }
  if (!res.ok) throw coded('download', `${url}: HTTP ${res.status} ${res.statusText}`, { reason: 'download_http', url, status: res.status });
  // A host that compresses what it sends counts the compressed bytes in Content-Length, and the
  // body arrives decompressed: that length is not the file's, so it is neither checked nor
  // recorded with the cached copy (which would then look damaged on every visit).
  const encoded = !/^(identity)?$/i.test(res.headers.get('content-encoding') ?? '');
  const length = encoded ? null : Number(res.headers.get('content-length')) || null;
  let body = res.body;
  if (cache) {
    const [mine, theirs] = res.body.tee();
    body = mine;
    const headers = new Headers(res.headers);
    if (encoded) ['content-length', 'content-encoding'].forEach((name) => headers.delete(name));
    const write = cache.put(url, new Response(theirs, { headers })).then(
      () => null,
      (e) => ({ url, quota: e.name === 'QuotaExceededError', reason: e.message }),
    );
    log?.writes.push(write);
  }
  return { body, length, cached: false, url, ...ended };
}

/** The SHA-256 a file's source published with it (an ETag or X-Linked-Etag of 64 hex digits, as Hugging Face gives for large files), else null. */
function publishedSha256(headers) {
  for (const name of ['x-linked-etag', 'etag']) {
    const tag = headers.get(name)?.replace(/^W\//, '').replaceAll('"', '').toLowerCase();
    if (tag && /^[0-9a-f]{64}$/.test(tag)) return tag;
  }
  return null;
}

/**
 * A cached copy's bytes, checked against the length recorded with them and, where the source
 * published one, its SHA-256. A damaged copy errors with code `cache_damaged` and is removed
 * from the cache. A short or long copy is found as it streams, and the download goes on from
 * the network where it broke (see streamInto); a wrong hash is known only at the end, so the
 * error carries `restart` and the load starts over from the network (see loadModel).
 */
function checkedCopy(body, { length, sha256 }, url, cache) {
  let seen = 0;
  const hash = sha256 ? new Sha256Stream() : null;
  const damaged = (controller, what, restart = false) => {
    cache.delete(url).catch(() => {});
    controller.error(Object.assign(coded('cache_damaged', `${url}: the cached copy is damaged (${what}); it was removed, and the file is fetched again`), { restart }));
  };
  return body.pipeThrough(new TransformStream({
    transform(chunk, controller) {
      seen += chunk.byteLength;
      if (length && seen > length) return damaged(controller, `more than its ${length} bytes`);
      hash?.update(chunk);
      controller.enqueue(chunk);
    },
    flush(controller) {
      if (length && seen !== length) return damaged(controller, `${seen} bytes, not ${length}`);
      if (hash && hash.hex() !== sha256) damaged(controller, 'its SHA-256 is not the one its source published', true);
    },
  }));
}

function cancelled() {
  return coded('cancelled', 'the load was cancelled');
}

/**
 * Reads a whole (small) file's bytes. Read by hand, not through Response.arrayBuffer(), so the
 * stream's own error (a damaged cache copy's) is the one reported.
 */
async function bytesOf(file) {
  const reader = file.body.getReader();
  const chunks = [];
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) chunks.push(chunk.value);
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/**
 * Feeds a stream to the loader, resuming with an HTTP range request if the connection drops
 * (where the server allows it). Reports bytes through `onBytes`. A load that stops part way
 * (cancelled, failed) ends the download too: its copy for the cache would otherwise go on
 * downloading, and the bytes no one reads would pile up in memory until the whole file had.
 * A cancelled load (the file's `signal`) stops at once, even while the download is stalled.
 */
async function streamInto(loader, file, onBytes) {
  let reader = file.body.getReader();
  let received = 0;
  try {
    for (let attempt = 0; ; ) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (e) {
        // Aborted while reading: only a cancel aborts a file still read (stop() ends failed loads).
        if (file.signal?.aborted) throw cancelled();
        if (e?.restart) throw e; // a damaged cache copy known only at its end: load again
        const [url, mb] = [file.url ?? 'file', (received / 1e6).toFixed(1)];
        if (!file.url || ++attempt > 3) {
          throw coded('download', `${url}: download interrupted after ${mb} MB (${e.message}); press load to retry`,
            { reason: 'download_interrupted', url, mb, cause: e.message });
        }
        const res = await fetch(file.url, { headers: { Range: `bytes=${received}-` }, signal: file.signal }).catch(() => null);
        if (file.signal?.aborted) throw cancelled();
        if (res?.status !== 206) {
          throw coded('download', `${url}: download interrupted after ${mb} MB and the server does not allow resuming; press load to retry`,
            { reason: 'download_not_resumable', url, mb });
        }
        reader = res.body.getReader();
        continue;
      }
      if (chunk.done) return;
      loader.push(chunk.value);
      received += chunk.value.byteLength;
      onBytes(chunk.value.byteLength);
    }
  } catch (e) {
    reader.cancel(e).catch(() => {});
    file.stop?.();
    throw e;
  }
}

/**
 * Opens a file of a source by name: {body, length, cached, url}, or null if optional and absent.
 * What the cache did goes into `log` (see fetchFile).
 */
function opener(source, log, signal) {
  if (source.kind === 'files') {
    const byName = new Map([...source.files].map((f) => [f.name, f]));
    return async (name, { optional = false } = {}) => {
      const f = byName.get(name);
      if (!f) {
        if (optional) return null;
        throw coded('model_file', `${name} is missing: choose one .gguf file, or config.json, tokenizer.json, tokenizer_config.json and the .safetensors file(s)`,
          { reason: 'file_missing', name });
      }
      return { body: f.stream(), length: f.size, cached: false, url: null };
    };
  }
  const base = sourceBase(source);
  return (name, opts = {}) => fetchFile(new URL(name, base).href, { ...opts, log, signal });
}

/**
 * Loads a model: {engine, uncached}, `uncached` listing the downloads that could not be kept
 * for offline use ({url, quota, reason}). `progress` receives
 * {phase, file, loaded, total, mbPerS, secondsLeft, cached}.
 */
export async function loadModel(gpu, source, progress, signal = null) {
  if (source.kind === 'synthetic') {
    progress({ phase: 'tokenizer' });
    const [tok, cfg] = await Promise.all(['tokenizer.json', 'tokenizer_config.json'].map(async (n) => bytesOf(await fetchFile(new URL(n, TOKENIZER).href, { useCache: false }))));
    progress({ phase: 'weights', file: 'synthetic' });
    return { engine: WebEngine.synthetic(gpu, source.name, tok, cfg, source.quant), uncached: [] };
  }
  for (let attempt = 0; ; attempt++) {
    const log = { writes: [], hits: [] };
    const gguf = ggufFile(source);
    try {
      const engine = gguf
        ? await loadGguf(gpu, gguf, source.quant, log, progress, signal)
        : await loadFolder(gpu, source, log, progress, signal);
      // The cache copies finish once the downloads they share a stream with have been read.
      const uncached = (await Promise.all(log.writes)).filter(Boolean);
      return { engine, uncached };
    } catch (e) {
      // A damaged cached copy (found by its length or hash, and removed), or a file read from
      // the cache that the engine refused: once more, from the network.
      // Another architecture is no damage: the network would send the same config.
      const refused = FILE_ERRORS.has(e?.code) && e?.details?.reason !== 'not_qwen2';
      const fromCache = e?.code === 'cache_damaged' || (log.hits.length > 0 && refused);
      if (!fromCache || attempt > 0) throw e;
      const cache = await openCache();
      await Promise.all(log.hits.map((url) => cache?.delete(url)));
      progress({ phase: 'download again' });
    }
  }
}

/** A model folder's files: config, safetensors shard by shard, tokenizer. */
async function loadFolder(gpu, source, log, progress, signal) {
  const open = opener(source, log, signal);
  progress({ phase: 'config' });
  const config = await bytesOf(await open('config.json'));
  const loader = new WebLoader(gpu, config, source.quant);
  // Freed however the load ends: a load that stops part way releases the GPU memory its
  // weights took now, not when the garbage collector runs (the engine keeps what it needs).
  try {
    const index = await open('model.safetensors.index.json', { optional: true });
    const shards = WebLoader.shardNames(index ? await bytesOf(index) : undefined);
    const files = [];
    try {
      for (const name of shards) files.push([name, await open(name)]);
      const total = files.reduce((sum, [, f]) => sum + (f.length ?? 0), 0) || loader.weightBytes();
      const report = progressMeter(total, progress);
      for (const [name, file] of files) {
        loader.beginFile(name, file.length ?? undefined);
        await streamInto(loader, file, (n) => report(name, n, file.cached));
        loader.endFile();
      }
    } catch (e) {
      // The shards not read yet were opened for their lengths: their downloads end too.
      for (const [, file] of files) file.stop?.();
      throw e;
    }
    progress({ phase: 'tokenizer' });
    const tok = await bytesOf(await open('tokenizer.json'));
    const tokConfig = await open('tokenizer_config.json', { optional: true });
    return loader.finish(tok, tokConfig ? await bytesOf(tokConfig) : undefined);
  } finally {
    loader.free();
  }
}

/** A counter of streamed bytes that reports weight progress at most every 100 ms. */
function progressMeter(total, progress) {
  const start = performance.now();
  let loaded = 0;
  let lastReport = 0;
  return (file, bytes, cached) => {
    loaded += bytes;
    const now = performance.now();
    if (now - lastReport > 100 || loaded === total) {
      lastReport = now;
      const mbPerS = loaded / 1e6 / Math.max((now - start) / 1e3, 1e-3);
      progress({ phase: 'weights', file, loaded, total, mbPerS, secondsLeft: (total - loaded) / 1e6 / mbPerS, cached });
    }
  };
}

/** Streams one GGUF file (weights, tokenizer and chat template in one) into the GPU. */
async function loadGguf(gpu, gguf, quant, log, progress, signal) {
  const file = gguf.file
    ? { body: gguf.file.stream(), length: gguf.file.size, cached: false, url: null }
    : await fetchFile(gguf.url, { log, signal });
  const name = gguf.file?.name ?? decodeURIComponent(new URL(gguf.url).pathname.split('/').pop());
  const loader = new WebGgufLoader(gpu, name, file.length ?? undefined, quant);
  try {
    const report = progressMeter(file.length ?? 0, progress);
    await streamInto(loader, file, (n) => report(name, n, file.cached));
    progress({ phase: 'tokenizer' });
    return loader.finish();
  } finally {
    loader.free(); // as in loadFolder
  }
}

/** Cached model files: [{url, bytes}], and the total. */
export async function listModelCaches() {
  const cache = await openCache();
  if (!cache) return { files: [], bytes: 0 };
  const files = [];
  for (const req of await cache.keys()) {
    const res = await cache.match(req);
    if (res?.headers.get('x-onetoken-absent')) continue;
    files.push({ url: req.url, bytes: Number(res?.headers.get('content-length')) || 0 });
  }
  return { files, bytes: files.reduce((s, f) => s + f.bytes, 0) };
}

export async function clearModelCaches() {
  // No Cache Storage at all on an insecure page (plain http from another computer).
  return (await globalThis.caches?.delete(CACHE)) ?? false;
}
