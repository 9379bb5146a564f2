// The page: inputs, the engine worker, charts, Korean/English, embed mode, and the scripting
// API `window.onetoken` ({ready, judge, bench, load, batch, logits}) that the wiki and the
// browser tests use. Nothing here computes: the worker runs the engine.
import { BenchStatus } from './bench-progress.js';
import { showBench } from './bench-view.js';
import { RunStatus, duration, estimateMs } from './running.js';
import { listFolders, modelLine, parseModel, refreshCaches, selectedSource, showModelInputs, showProgress } from './model-view.js';
import { wireTakeAway } from './takeaway.js';
import { FULL, workloadDocuments } from './workload.js';
import { runWorkloadOnPage, showWorkloadPlan, workloadSize } from './workload-view.js';
import * as charts from './charts.js';
import { EngineClient } from './engine-client.js';
import { coded, errorText } from './error-text.js';
import en from './i18n/en.js';
import ko from './i18n/ko.js';
import { PRESETS, userMessage } from './presets.js';

const STRINGS = { ko, en };
const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);
const embed = params.get('embed') === '1';
let lang = params.get('lang') ?? (navigator.language?.toLowerCase().startsWith('ko') ? 'ko' : 'en');
if (!STRINGS[lang]) lang = 'en';
const t = () => STRINGS[lang];
const fill = (text, values) => text.replace(/\{(\w+)\}/g, (_, k) => values[k] ?? '');

const client = new EngineClient();
let choices = [];
let lastJudgments = [];
let lastChoices = null; // the choices the last run judged (the chips may have changed since)
let loadingModel = false;
let lastReport = null;
let modelInfo = null;
let loadedModel = null; // {source, info, uncached} of the model in use
let started = false; // the engine worker is up and has a GPU: the buttons can work
let busyCalls = 0; // engine calls the page is waiting on (see setBusy)
let batchRunning = false; // the batch's line says it is busy until its result comes
let shownError = null; // {error, remake} in the error box (see showError)
let startError = null; // why the engine could not start, named in the GPU's line
let gpuInfo = null;
let lastBatch = null;
const runStatus = new RunStatus($('run-status'), t, fill, $('run-announce'));
const benchStatus = new BenchStatus($('bench-status'), $('bench-measured'), t, fill);

// ---- Language -------------------------------------------------------------------------
function applyLanguage() {
  document.documentElement.lang = lang;
  for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = t()[el.dataset.i18n];
  for (const el of document.querySelectorAll('[data-i18n-placeholder]')) el.placeholder = t()[el.dataset.i18nPlaceholder];
  for (const el of document.querySelectorAll('[data-i18n-aria-label]')) el.setAttribute('aria-label', t()[el.dataset.i18nAriaLabel]);
  $('lang-ko').setAttribute('aria-pressed', lang === 'ko');
  $('lang-en').setAttribute('aria-pressed', lang === 'en');
  const preset = $('preset');
  const selected = preset.value;
  preset.replaceChildren(...Object.keys(PRESETS).map((k) => new Option(t().presetNames[k], k)));
  if (selected) preset.value = selected;
  renderChoices();
  renderResults();
  renderBench();
  benchStatus.show();
  if (started && !loadingModel) showModelLine();
  if (batchRunning) $('batch-status').textContent = t().busy;
  else renderBatch();
  if (!$('workload').hidden) showWorkloadPlan(workloadSize(gpuInfo), t(), fill);
  if (shownError && !$('error').hidden) showError(shownError.remake?.() ?? shownError.error, shownError.remake);
  if (startError) showStartError();
}

/** The GPU's line where the engine could not start: the reason (an insecure page: its kind, the
 * error box below says the rest). */
function showStartError() {
  const e = startError;
  const insecure = e?.code === 'insecure_context' && t().errorKinds.insecure_context;
  $('gpu-info').textContent = noWebgpu(e) ? t().noWebgpu : insecure || errorText(e, t());
}

function setLanguage(next) {
  lang = next;
  applyLanguage();
}

// ---- Inputs ---------------------------------------------------------------------------
function renderChoices() {
  $('chips').replaceChildren(
    ...choices.map((c, i) => {
      const chip = document.createElement('span');
      chip.className = 'chip';
      const text = document.createElement('span');
      text.textContent = c;
      const remove = document.createElement('button');
      remove.type = 'button';
      remove.textContent = '×';
      remove.title = t().removeChoice;
      remove.setAttribute('aria-label', `${t().removeChoice} ${c}`);
      remove.onclick = () => {
        choices.splice(i, 1);
        renderChoices();
      };
      chip.append(text, remove);
      return chip;
    }),
  );
}

function addChoice() {
  const value = $('choice-new').value;
  if (!value.trim()) return;
  if (choices.includes(value)) {
    const exists = () => new Error(fill(t().choiceExists, { choice: value }));
    showError(exists(), exists);
    return;
  }
  clearError();
  choices.push(value);
  $('choice-new').value = '';
  renderChoices();
}

function applyPreset(name) {
  const preset = PRESETS[name];
  if (!preset) return;
  const first = preset.workload && workloadDocuments(lang, { documents: 1, questions: FULL.questions })[0];
  const p = first ? { ...first, question: first.questions[0], batch: first.questions } : preset;
  $('system').value = p.system;
  $('document').value = p.document;
  $('question').value = p.question;
  // A preset without batch questions asks its own question: the last preset's would not fit.
  $('batch-questions').value = (p.batch ?? [p.question]).join('\n');
  choices = [...p.choices];
  renderChoices();
  $('workload').hidden = !first;
  if (first) showWorkloadPlan(workloadSize(gpuInfo), t(), fill);
}

/** The 777-judgment workload (the preset), scaled down on a slow device. */
async function runWorkload() {
  return guarded(() => runWorkloadOnPage({
    size: workloadSize(gpuInfo),
    lang,
    t: t(),
    fill,
    judgeBatch: (requests) => client.call('batch', { requests, sharedPrefix: true }),
    userMessage,
    costModel: lastReport?.cost_model,
  }), $('workload-result'));
}

/** The request the inputs describe (the CLI's request format). */
function currentRequest() {
  const request = {
    system: $('system').value.trim() || undefined,
    user: userMessage($('document').value, $('question').value),
    choices: [...choices],
    prefix: $('prefix').value,
  };
  return request;
}

// ---- Status and errors ----------------------------------------------------------------
/**
 * Shows `e` in the error box. The language switch shows it again in the new language: an
 * engine error's kind is re-worded, and its detail too where it has `details`; a message the
 * page wrote is re-made by `remake`.
 */
function showError(e, remake = null) {
  shownError = { error: e, remake };
  const message = e?.message ?? String(e);
  const lost = e?.code === 'device_lost';
  const text = e?.code === 'no_model' ? t().noModel : errorText(e, t());
  $('error-text').textContent = noWebgpu(e) ? t().noWebgpu : lost ? `${t().deviceLost} (${message})` : text;
  $('reload').hidden = !lost;
  $('error').hidden = false;
  postHeight();
}

/** Whether `e` says there is no WebGPU at all (no API, or no adapter behind it). */
function noWebgpu(e) {
  return e?.code === 'no_webgpu' || e?.code === 'no_adapter';
}

function clearError() {
  $('error').hidden = true;
  shownError = null;
}

/**
 * Disables the buttons that call the engine while it works, and until it has started. Calls
 * nest (a load dropped on the page during a run, the scripting API): the buttons come back
 * when the last one ends. `null` only refreshes them.
 */
function setBusy(busy) {
  if (busy !== null) busyCalls = Math.max(0, busyCalls + (busy ? 1 : -1));
  for (const b of document.querySelectorAll('button.run, #batch-run, #bench-run, #model-load, #reload, #workload-run')) b.disabled = busyCalls > 0 || !started;
  $('cancel').hidden = busyCalls === 0;
}

/**
 * Runs `work` with the buttons disabled and Cancel offered; errors are shown, a cancel is
 * reported in `status` (the run's status line unless given; a busy note there is cleared on
 * an error), inputs are never touched.
 */
async function guarded(work, status = $('run-status')) {
  clearError();
  setBusy(true);
  try {
    return await work();
  } catch (e) {
    runStatus.end();
    if (e?.code === 'cancelled') status.textContent = t().cancelled;
    else {
      if (status !== $('run-status')) status.textContent = '';
      showError(e);
    }
    throw e;
  } finally {
    setBusy(false);
    postHeight();
  }
}

// ---- Model ----------------------------------------------------------------------------
/** Loads `source`; the model in use stays loaded (and named) if the load fails or is cancelled. */
async function load(source) {
  return guarded(async () => {
    $('model-status').textContent = t().loading;
    loadingModel = true;
    try {
      const result = await client.call('load', { source }, (p) => showProgress(p, t(), fill));
      if (JSON.stringify(source) !== JSON.stringify(loadedModel?.source)) forgetMeasurements();
      loadedModel = { source, info: result.info, uncached: result.uncached };
      modelInfo = result.info;
      $('synthetic-note').hidden = !modelInfo.synthetic;
      refreshCaches(client, t());
      return modelInfo;
    } catch (e) {
      // Usually the model in use is still loaded; not where it was unloaded to make room.
      loadedModel = await client.call('current').catch(() => null);
      modelInfo = loadedModel?.info ?? null;
      throw e;
    } finally {
      loadingModel = false;
      $('model-progress').hidden = true;
      showModelLine();
    }
  });
}

/**
 * Drops what was measured on another model: its timings would price this one's estimates and
 * the workload's projection, and its export would bear this model's name.
 */
function forgetMeasurements() {
  [lastJudgments, lastChoices, lastBatch, lastReport] = [[], null, null, null];
  $('result-section').hidden = true;
  $('bench-results').hidden = true;
  $('batch-table').hidden = true;
  for (const id of ['batch-status', 'bench-status', 'workload-result']) $(id).textContent = '';
}

/** The model in use, or that none is. */
function showModelLine() {
  const m = loadedModel;
  $('model-status').textContent = m ? modelLine(m.source, m.info, t(), fill, m.uncached) : t().noModel;
}

// ---- Judging ----------------------------------------------------------------------------
async function judge(request, strategy = 'b', topK = 0, sequenceLogprobs = false) {
  if (!modelInfo) throw new Error(t().noModel);
  return client.call('judge', { request, strategy, topK, sequenceLogprobs }, (p) => runStatus.progress(p.pass));
}

async function run(strategy) {
  return guarded(async () => {
    const request = currentRequest();
    // "A vs B": the schema-constrained A against both B heads (A-free's length is the model's whim).
    const strategies = strategy === 'both' ? ['a', 'b', 'b-full-head'] : [strategy];
    runStatus.begin();
    runStatus.estimate = await estimateText(request, strategies);
    $('run-status').dataset.estimate = runStatus.estimate; // kept after the run, for tests
    const records = [];
    for (const s of strategies) records.push(await judge(request, s));
    lastJudgments = records;
    lastChoices = request.choices;
    runStatus.end();
    renderResults();
    return records;
  });
}

/** What the run should take on this device, from its last measurements ('' before any). */
async function estimateText(request, strategies) {
  const tokens = (await client.call('tokenize', { text: `${request.system ?? ''}\n${request.user}` })).length;
  // The chat template and the response prefix add a few dozen tokens.
  const measured = { report: lastReport, judgments: lastJudgments };
  let ms = estimateMs(measured, tokens + 30, strategies);
  if (ms === null) {
    // Nothing measured yet: a probe (a 32-token prefill and one decode step) first.
    measured.probe = await client.call('probe', { tokens: 32 }).catch((e) => {
      if (e?.code === 'cancelled') throw e; // the user stopped the run, not just its estimate
      return null;
    });
    ms = estimateMs(measured, tokens + 30, strategies);
  }
  if (ms === null) return t().noEstimate;
  return fill(ms > 60_000 ? t().estimateLong : t().estimate, { time: duration(ms, t()) });
}

function renderResults() {
  if (!lastJudgments.length) return;
  $('result-section').hidden = false;
  const main = lastJudgments.find((r) => r.strategy === 'b') ?? lastJudgments[0];
  const parts = [
    main.choice != null ? `${main.choice}`
      : main.free_stop === 'token_limit' ? fill(t().noChoiceCutOff, { n: main.generated_token_ids.length }) : t().noChoice,
    fill(t().promptTokens, { n: main.prompt_tokens }),
    fill(t().decodeSteps, { n: main.decode_steps }),
    `${t().generated}: ${JSON.stringify(main.generated_text)}`,
    `${charts.formatMs(main.timings_ms.total)} (${t().wallTime})`,
  ];
  if (main.gpu_timings_ms) {
    const gpu = main.gpu_timings_ms.prefill + main.gpu_timings_ms.decode.reduce((a, b) => a + b, 0);
    parts.push(`${charts.formatMs(gpu)} (${t().gpuTime})`);
  }
  $('answer').textContent = parts.join(' · ');
  charts.probabilityBars($('chart-probs'), currentChoicesFor(main), main.probs, main.choice_index, t().charts);
  charts.stackedBars($('chart-ab'), lastJudgments, t().charts);
  const a = lastJudgments.find((r) => r.strategy === 'a') ?? main;
  charts.timeline($('chart-timeline'), a, t().charts);
  $('synthetic-note').hidden = !main.synthetic;
}

/** The names of a record's choices: those the run judged, else (a scripted record) numbers. */
function currentChoicesFor(record) {
  return lastChoices?.length === record.probs.length ? lastChoices : record.probs.map((_, i) => `#${i + 1}`);
}

async function runBatch() {
  return guarded(async () => {
    const doc = $('document').value;
    const questions = $('batch-questions').value.split('\n').map((q) => q.trim()).filter(Boolean);
    const requests = questions.map((q) => ({ ...currentRequest(), user: userMessage(doc, q) }));
    $('batch-status').textContent = t().busy;
    batchRunning = true;
    const result = await client.call('batch', { requests, sharedPrefix: $('batch-shared').checked })
      .finally(() => { batchRunning = false; });
    lastBatch = { ...result, questions };
    renderBatch();
    return result;
  }, $('batch-status'));
}

/** The last batch's line and table, in the page's language. */
function renderBatch() {
  if (!lastBatch) return;
  const b = lastBatch.batch;
  $('batch-status').textContent = fill(t().batchLine, {
    n: b.judgments,
    time: charts.formatMs(b.timings_ms.total),
    rate: b.judgments_per_s.toFixed(2),
    tokens: b.batch_prefill_tokens + b.shared_prefix_tokens,
  });
  const rows = lastBatch.judgments.map((j, i) => {
    const tr = document.createElement('tr');
    // The chosen choice's probability (the walk's, which need not be the largest).
    const p = j.choice_index == null ? '' : `${(100 * j.probs[j.choice_index]).toFixed(1)} %`;
    for (const text of [lastBatch.questions[i], j.choice, p]) {
      tr.append(Object.assign(document.createElement('td'), { textContent: text }));
    }
    return tr;
  });
  $('batch-table').tBodies[0].replaceChildren(...rows);
  $('batch-table').hidden = false;
}

// ---- Benchmark --------------------------------------------------------------------------
/** Whole numbers typed in a field, separated by spaces or commas; anything else is an error naming it. */
function numbers(text, field) {
  const words = text.split(/[\s,]+/).filter(Boolean);
  const bad = words.find((w) => !/^[1-9][0-9]{0,5}$/.test(w));
  if (bad !== undefined || !words.length) throw new Error(fill(t().badNumbers, { field, text: bad ?? '' }));
  return words.map(Number);
}

/** Runs per benchmark point: one whole number, at most MAX_REPEATS (each run of each point). */
const MAX_REPEATS = 20;
function runsPerPoint(text) {
  const words = text.split(/[\s,]+/).filter(Boolean);
  const n = Number(words[0]);
  if (words.length !== 1 || !/^\d+$/.test(words[0]) || n < 1 || n > MAX_REPEATS) {
    throw new Error(fill(t().badRepeats, { field: t().benchRepeats, text: text.trim(), max: MAX_REPEATS }));
  }
  return n;
}

async function bench(options) {
  return guarded(async () => {
    if (!modelInfo) throw new Error(t().noModel);
    let report;
    try {
      report = await client.call('bench', { options }, (p) => benchStatus.progress(p.step));
    } finally {
      benchStatus.end();
    }
    lastReport = report;
    renderBench();
    return report;
  }, $('bench-status'));
}

function renderBench() {
  if (!lastReport) return;
  $('bench-results').hidden = false;
  showBench(lastReport, t(), fill);
}

// ---- Embed ------------------------------------------------------------------------------
function postHeight() {
  if (embed && window.parent !== window) {
    // The content's own height: the document's scrollHeight is never less than the frame, so a
    // frame the parent once grew would never shrink again.
    const body = document.body;
    const height = Math.ceil(body.getBoundingClientRect().bottom + window.scrollY + parseFloat(getComputedStyle(body).marginBottom));
    window.parent.postMessage({ type: 'onetoken:height', height }, '*');
  }
}

// ---- Start --------------------------------------------------------------------------------
/** The URL parameters that reproduce the page's settings (see presetFromUrl and start). */
function currentSettings() {
  const source = selectedSource();
  const model = source.kind === 'synthetic' ? `synthetic:${source.name}`
    : source.kind === 'folder' ? `folder:${source.name}` : source.kind === 'url' ? `url:${source.url}` : undefined;
  return {
    model, quant: source.quant, lang, doc: $('document').value, q: $('question').value,
    choices: choices.join('|'), prefix: $('prefix').value, system: $('system').value,
  };
}

function wire() {
  $('cancel').onclick = () => client.call('cancel').catch(() => {});
  wireTakeAway({
    state: () => ({ device: gpuInfo, model: modelInfo, judgments: lastJudgments, batch: lastBatch, bench: lastReport }),
    settings: currentSettings,
  });
  $('lang-ko').onclick = () => setLanguage('ko');
  $('lang-en').onclick = () => setLanguage('en');
  $('preset').onchange = () => applyPreset($('preset').value);
  $('workload-run').onclick = () => runWorkload().catch(() => {});
  $('choice-add').onclick = addChoice;
  // Enter while an IME is still composing a syllable (Korean) ends the composition, not the choice.
  $('choice-new').onkeydown = (e) => e.key === 'Enter' && !e.isComposing && addChoice();
  for (const b of document.querySelectorAll('button.run[data-strategy]')) b.onclick = () => run(b.dataset.strategy).catch(() => {});
  $('batch-run').onclick = () => runBatch().catch(() => {});
  $('bench-run').onclick = () => {
    const typed = () => ({
      lengths: numbers($('bench-lengths').value, t().benchLengths),
      batch_sizes: numbers($('bench-batches').value, t().benchBatches),
      repeats: runsPerPoint($('bench-repeats').value),
      profile: gpuInfo?.timestamps === true, // where the time goes, kernel by kernel
    });
    let options;
    try {
      options = typed();
    } catch (e) {
      // Re-made on a language switch, so it names the field in the new language.
      showError(e, () => { try { typed(); return e; } catch (again) { return again; } });
      return;
    }
    bench(options).catch(() => {});
  };
  $('model-kind').onchange = showModelInputs;
  $('model-load').onclick = () => load(selectedSource()).catch(() => {});
  $('reload').onclick = () => load(selectedSource()).catch(() => {});
  $('cache-clear').onclick = () => client.call('clearCaches')
    .then(() => refreshCaches(client, t()), showError);
  const drop = $('drop');
  drop.ondragover = (e) => e.preventDefault();
  drop.ondrop = (e) => {
    e.preventDefault();
    if (busyCalls > 0) return; // as the Load button, which is off while the engine works
    load({ kind: 'files', files: [...e.dataTransfer.files], quant: $('model-quant').value || undefined }).catch(() => {});
  };
  if (embed) {
    document.body.classList.add('embed');
    const full = new URL(location.href);
    full.searchParams.delete('embed');
    $('embed-open').href = full.href;
    new ResizeObserver(postHeight).observe(document.body);
  }
}

function presetFromUrl() {
  // The article's example, in the reader's language.
  const preset = lang === 'ko' ? 'koColors' : 'colors';
  applyPreset(preset);
  $('preset').value = preset;
  if (params.has('prefix')) $('prefix').value = params.get('prefix');
  if (params.has('system')) $('system').value = params.get('system');
  if (params.has('doc')) $('document').value = params.get('doc');
  if (params.has('q')) $('question').value = params.get('q');
  if (params.has('choices')) choices = params.get('choices').split('|').filter((c) => c.trim());
  renderChoices();
  $('batch-questions').value = PRESETS[preset].batch.join('\n');
}

async function start() {
  wire();
  applyLanguage();
  presetFromUrl();
  setBusy(null); // nothing works until the engine has started
  $('gpu-info').textContent = t().gpuChecking;
  // Offline use is a bonus: a sandboxed iframe (an opaque origin) throws on the very access.
  try {
    navigator.serviceWorker?.register('./sw.js').catch(() => {});
  } catch {
    // no service worker here
  }
  const { gpu, adapter, defaultPrefix } = await client.call('init', { kernels: params.get('kernels'), tune: params.get('tune') ?? '' }).catch((e) => {
    startError = e;
    showStartError();
    showError(e);
    throw e;
  });
  if (!params.has('prefix')) $('prefix').value = defaultPrefix;
  started = true;
  setBusy(null);
  gpuInfo = { ...gpu, adapter };
  const features = adapter.features.includes('shader-f16') ? 'shader-f16' : 'no shader-f16';
  $('gpu-info').textContent = `${[adapter.vendor, adapter.architecture, adapter.description].filter(Boolean).join(' ') || gpu.name} · ${features} · timestamp-query ${gpu.timestamps ? '✓' : '✗'} · max binding ${(gpu.max_binding / 2 ** 20).toFixed(0)} MiB`;
  await listFolders();
  const modelParam = params.get('model') ?? 'synthetic:qwen2.5-0.5b';
  const quant = ['q8_0', 'q5_0', 'q4_0'].includes(params.get('quant')) ? params.get('quant') : '';
  $('model-quant').value = quant;
  let source;
  try {
    source = { ...parseModel(modelParam), quant: quant || undefined };
  } catch (e) {
    // A mistyped ?model=: say so and leave the choice to the model picker.
    showModelLine();
    showError(e);
    throw e;
  }
  $('model-kind').value = source.kind === 'synthetic' ? `synthetic:${source.name}` : source.kind;
  if (source.kind === 'folder') {
    if (![...$('model-folder').options].some((o) => o.value === source.name)) $('model-folder').append(new Option(source.name, source.name));
    $('model-folder').value = source.name;
  }
  if (source.kind === 'url') $('model-url').value = source.url;
  showModelInputs();
  await load(source);
}

/** The run ?strategy= asks for, once the model is loaded: one of the page's run buttons. */
function runFromUrl(strategy) {
  const buttons = [...document.querySelectorAll('button.run[data-strategy]')].map((b) => b.dataset.strategy);
  if (!buttons.includes(strategy)) {
    showError(coded('address', `unknown strategy ${strategy} (${buttons.join(', ')})`, { reason: 'unknown_strategy', strategy, known: buttons }));
    return;
  }
  run(strategy).catch(() => {});
}

const ready = start();
ready.then(() => params.has('strategy') && runFromUrl(params.get('strategy')), () => {});
// The scripting API waits for start-up, whether or not its load worked: a model loaded by hand
// after a failed start-up load serves later calls.
const startedUp = ready.catch(() => {});

window.onetoken = {
  /** Resolves once the default (or ?model=) model is loaded. */
  ready,
  /**
   * judge({system?, user, choices, prefix?, strategy?, top_k?, sequence_logprobs?}) -> the CLI's
   * judgment record ('all': a list).
   */
  judge: async ({ strategy = 'b', top_k = 0, sequence_logprobs = false, ...request }) => {
    await startedUp;
    return judge(request, strategy, top_k, sequence_logprobs);
  },
  /** batch([requests], sharedPrefix) -> {batch, judgments}. */
  batch: async (requests, sharedPrefix = true) => {
    await startedUp;
    return client.call('batch', { requests, sharedPrefix });
  },
  /** bench({lengths, batch_sizes, repeats}) -> the benchmark report (also charted). */
  bench: async (options = {}) => {
    await startedUp;
    return bench(options);
  },
  /** load({kind: 'synthetic'|'folder'|'url', name|url}) -> model info. */
  load: async (source) => {
    await startedUp; // else start-up's own load would replace this one
    return load(source);
  },
  /** Token ids of `text` with the loaded model's tokenizer. */
  tokenize: async (text) => {
    await startedUp;
    return client.call('tokenize', { text });
  },
  /** The engine's wasm memory in bytes (the load tests watch it stay flat). */
  memory: () => client.call('memory').then((m) => m.wasmBytes),
  /** Full-vocabulary logits of the last position (a diagnostic for tests). */
  logits: (ids) => client.call('logits', { ids }),
  /** Destroys the GPU device, as a driver reset would: the next run fails and the page offers a reload (tests of the recovery). */
  loseDevice: () => client.call('loseDevice'),
  /** Re-renders results after a scripted run (the charts of window.onetoken.judge calls),
   * the bars named by `choices` (else numbered). */
  show: (records, choices = null) => {
    lastJudgments = Array.isArray(records) ? records : [records];
    lastChoices = choices;
    renderResults();
  },
  setLanguage,
};
