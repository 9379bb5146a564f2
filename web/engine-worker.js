// The engine runs here, off the page's main thread, so the UI never freezes. Messages in:
// {id, cmd, args}; messages out: {id, progress} any number of times, then {id, result} or
// {id, error, code, details}: `code` names the kind of error (the library's Error::code, or
// no_webgpu, or insecure_context), `details` (where there are any) its case and figures, so callers never parse
// messages. Commands: init, load, judge, batch, bench, probe, logits,
// tokenize, cancel, memory, caches, clearCaches, current.
import init, { WebEngine, WebGpu, defaultPrefix } from './pkg/onetoken.js';
import { coded } from './error-text.js';
import { clearModelCaches, listModelCaches, loadModel } from './models.js';

let gpu = null;
let engine = null;
let wasm = null; // the module's exports: its memory, for the load tests
let model = null; // {source, info, uncached}
let lost = null; // why the GPU device was lost, until the next load
let kernels = null; // 'tiled' or 'direct' when the page chose the linear-kernel family, else by device
let tune = ''; // where the tiled kernels change path (the CLI's --tune), else the defaults
let loading = null; // {cancelled, downloads} while a load runs: cancel sets the flag (the next report stops the load) and aborts its downloads

function post(message) {
  self.postMessage(message);
}

async function adapterInfo() {
  const adapter = await navigator.gpu?.requestAdapter();
  const info = adapter?.info ?? {};
  return {
    vendor: info.vendor ?? '',
    architecture: info.architecture ?? '',
    description: info.description ?? '',
    features: adapter ? [...adapter.features].sort() : [],
    // A CPU implementation of WebGPU (SwiftShader) wants the barrier-free kernels.
    cpuLike: Boolean(info.isFallbackAdapter) || /swiftshader|llvmpipe|lavapipe/i.test(`${info.architecture} ${info.description}`),
  };
}

function need(what) {
  // After a lost device every call says so, until a load opens a fresh one.
  if (!what) throw lost ? coded('device_lost', lost) : coded('no_model', 'no model is loaded yet');
  return what;
}

/** Loads `source` beside the model in use: {engine, uncached}, or the error that stopped it. */
async function loadOnce(source, report, signal) {
  if (!gpu) await openGpu(); // the device was lost: a fresh one
  const loaded = await loadModel(gpu, source, report, signal);
  // Errors the browser reports late (a pipeline its shader compiler rejects, an allocation it
  // refuses) fail the load.
  await loaded.engine.settled().catch((e) => {
    loaded.engine.free();
    throw e;
  });
  return loaded;
}

/** Opens the GPU device (again, after one was lost). */
async function openGpu() {
  const adapter = await adapterInfo();
  gpu = await WebGpu.open(kernels ? kernels === 'direct' : adapter.cpuLike, tune);
  return adapter;
}

const COMMANDS = {
  /**
   * `kernels`: 'tiled' or 'direct' to choose the linear-kernel family (else by device); `tune`:
   * NAME=VALUE pairs, as the CLI's --tune takes them (else the defaults).
   */
  async init({ kernels: family, tune: tuning } = {}) {
    kernels = ['tiled', 'direct'].includes(family) ? family : null;
    tune = typeof tuning === 'string' ? tuning : '';
    wasm = await init();
    if (!navigator.gpu && !self.isSecureContext) {
      // Browsers give WebGPU to secure pages only: a classroom's http://192.168.x.y is not one.
      const origin = self.location.origin;
      throw coded('insecure_context', `WebGPU is only given to pages served over https or from localhost, and this page came from ${origin}`,
        { reason: 'insecure_context', origin });
    }
    if (!navigator.gpu) {
      throw coded('no_webgpu', 'this browser has no WebGPU (navigator.gpu)');
    }
    const adapter = await openGpu();
    return { gpu: JSON.parse(gpu.info()), adapter, defaultPrefix: defaultPrefix() };
  },

  // The model in use stays until the new one is ready: a load that fails or is cancelled
  // leaves it loaded (the page says so). Where both do not fit in GPU memory, the one in use
  // is freed and the load tried once more (its progress says so).
  async load({ source }, progress) {
    if (!wasm) throw new Error('the engine is not started (init first)');
    const run = { cancelled: false, downloads: new AbortController() };
    loading = run;
    const report = (p) => {
      if (run.cancelled) throw coded('cancelled', 'the load was cancelled');
      progress(p);
    };
    try {
      let loaded;
      try {
        loaded = await loadOnce(source, report, run.downloads.signal);
      } catch (e) {
        if (e?.code !== 'gpu_memory' || !engine || run.cancelled) throw e;
        engine.free();
        [engine, model] = [null, null];
        progress({ phase: 'unloaded to make room' });
        loaded = await loadOnce(source, report, run.downloads.signal);
      }
      if (run.cancelled) {
        loaded.engine.free();
        throw coded('cancelled', 'the load was cancelled');
      }
      engine?.free();
      engine = loaded.engine;
      lost = null;
      model = { source, info: JSON.parse(engine.info()), uncached: loaded.uncached };
      return model;
    } finally {
      loading = null;
    }
  },

  /** The model in use ({source, info, uncached}), or null. */
  async current() {
    return model;
  },

  /** Destroys the GPU device, as a driver reset would (tests of the recovery). */
  async loseDevice() {
    need(engine).loseDevice();
  },

  async judge({ request, strategy = 'b', topK = 0, sequenceLogprobs = false }, progress) {
    const pass = (json) => progress({ pass: JSON.parse(json) });
    const out = await need(engine).judge(JSON.stringify(request), strategy, topK, sequenceLogprobs, pass);
    return JSON.parse(out);
  },

  async batch({ requests, sharedPrefix = false }, progress) {
    const pass = (json) => progress({ pass: JSON.parse(json) });
    return JSON.parse(await need(engine).judgeBatch(JSON.stringify(requests), sharedPrefix, pass));
  },

  // Answered at once, even while another command runs: that one stops at its next forward
  // pass (a load: at once where it waits on a download, else at its next progress report) and
  // rejects with code `cancelled`.
  async cancel() {
    engine?.cancel();
    if (loading) {
      loading.cancelled = true;
      loading.downloads.abort(); // a stalled download stops now, not at its next bytes
    }
    return true;
  },

  async bench({ options = {} }, progress) {
    return JSON.parse(await need(engine).bench(JSON.stringify(options), (json) => progress({ step: JSON.parse(json) })));
  },

  async probe({ tokens = 32 }) {
    return JSON.parse(await need(engine).probe(tokens));
  },

  async logits({ ids }) {
    return Array.from(await need(engine).logits(Uint32Array.from(ids)));
  },

  async tokenize({ text }) {
    return Array.from(need(engine).encode(text));
  },

  // The wasm memory's size: it grows and never shrinks, so a leak shows as growth.
  async memory() {
    return { wasmBytes: wasm?.memory.buffer.byteLength ?? 0 };
  },

  async caches() {
    return listModelCaches();
  },

  async clearCaches() {
    return clearModelCaches();
  },
};

self.onmessage = async ({ data: { id, cmd, args = {} } }) => {
  const command = COMMANDS[cmd];
  if (!command) return post({ id, error: `unknown command ${cmd}`, code: 'usage' });
  try {
    post({ id, result: await command(args, (progress) => post({ id, progress })) });
  } catch (e) {
    const code = e?.code ?? 'internal';
    // A lost device leaves the engine unusable: drop it; the page offers a reload.
    if (code === 'device_lost') {
      engine?.free();
      gpu?.free();
      [engine, model, gpu, lost] = [null, null, null, e.message];
    }
    post({ id, error: e?.message ?? String(e), code, details: e?.details });
  }
};
