// Take-away results for a teacher's slides: each chart as SVG or PNG (drawn with the page's own
// styles), the measurements as JSON or CSV (device, model and every timing), and a link whose
// URL parameters reproduce the run.
import { formatMillions } from './svg.js';

/** The chart in `container` as a standalone SVG document, the page's styles embedded. */
export function chartSvg(container) {
  const svg = container.querySelector('svg');
  if (!svg) return null;
  const copy = svg.cloneNode(true);
  const [, , width, height] = (svg.getAttribute('viewBox') ?? '0 0 600 300').split(' ').map(Number);
  copy.setAttribute('xmlns', 'http://www.w3.org/2000/svg');
  copy.setAttribute('width', width);
  copy.setAttribute('height', height);
  const style = document.createElementNS('http://www.w3.org/2000/svg', 'style');
  style.textContent = `svg { background: #fff; font-family: sans-serif; }\n${pageCss()}`;
  copy.prepend(style);
  return new XMLSerializer().serializeToString(copy);
}

/** The page's own style rules (custom properties resolved by the browser stay as written). */
function pageCss() {
  const root = getComputedStyle(document.documentElement);
  const vars = ['--fg', '--muted', '--accent', '--a', '--b', '--bfull', '--line']
    .map((v) => `${v}: ${root.getPropertyValue(v).trim() || 'initial'};`).join(' ');
  const rules = [...document.styleSheets].flatMap((sheet) => {
    try {
      return [...sheet.cssRules].map((r) => r.cssText);
    } catch {
      return []; // a stylesheet from elsewhere: not ours to copy
    }
  });
  return `svg { ${vars} }\n${rules.join('\n')}`;
}

/** The chart as a PNG at `scale` times its drawn size. */
export async function chartPng(container, scale = 2) {
  const svg = chartSvg(container);
  if (!svg) return null;
  const url = URL.createObjectURL(new Blob([svg], { type: 'image/svg+xml' }));
  try {
    const img = new Image();
    img.src = url;
    await img.decode();
    const canvas = document.createElement('canvas');
    canvas.width = Math.ceil(img.width * scale);
    canvas.height = Math.ceil(img.height * scale);
    const ctx = canvas.getContext('2d');
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.drawImage(img, 0, 0, canvas.width, canvas.height);
    return await new Promise((resolve) => canvas.toBlob(resolve, 'image/png'));
  } finally {
    URL.revokeObjectURL(url);
  }
}

/** Every measurement of this visit: {page, device, model, judgments, batch, bench}. */
export function measurements(state) {
  return {
    page: { url: location.href, time: new Date().toISOString(), userAgent: navigator.userAgent },
    device: state.device ?? null,
    model: state.model ?? null,
    judgments: state.judgments ?? [],
    batch: state.batch ?? null,
    bench: state.bench ?? null,
  };
}

const CSV_COLUMNS = [
  'kind', 'strategy', 'prompt_tokens', 'decode_steps', 'prefill_ms', 'decode_ms', 'total_ms',
  'gpu_prefill_ms', 'gpu_decode_ms', 'judgments', 'shared_prefix', 'judgments_per_s', 'device', 'model',
];
const sum = (xs) => (Array.isArray(xs) ? xs.reduce((a, b) => a + b, 0) : '');

/** The device's name: the driver's, else what the browser says of the adapter. */
export function deviceName(device) {
  const a = device?.adapter ?? {};
  return device?.name || [a.vendor, a.architecture, a.description].filter(Boolean).join(' ');
}

/** The measurements as CSV: one row per judgment, benchmark point and batch. */
export function measurementsCsv(m) {
  const device = deviceName(m.device);
  const model = m.model ? `${formatMillions(m.model.parameters)}M ${m.model.quant ?? ''}${m.model.synthetic ? ' synthetic' : ''}` : '';
  const rows = [];
  const timed = (kind, r) => ({
    kind, strategy: r.strategy, prompt_tokens: r.prompt_tokens, decode_steps: r.decode_steps,
    prefill_ms: r.prefill_ms, decode_ms: sum(r.decode_ms), total_ms: r.total_ms,
    gpu_prefill_ms: r.gpu_prefill_ms ?? '', gpu_decode_ms: r.gpu_decode_ms ? sum(r.gpu_decode_ms) : '',
  });
  for (const j of m.judgments) {
    rows.push(timed('judgment', {
      ...j, prefill_ms: j.timings_ms.prefill, decode_ms: j.timings_ms.decode, total_ms: j.timings_ms.total,
      gpu_prefill_ms: j.gpu_timings_ms?.prefill, gpu_decode_ms: j.gpu_timings_ms?.decode,
    }));
  }
  for (const row of m.bench?.sweep ?? []) {
    for (const p of [row.a, row.b, row.b_full_head]) rows.push(timed('bench', p));
  }
  for (const b of m.bench?.batch ?? []) {
    rows.push({ kind: 'bench-batch', strategy: 'c', prompt_tokens: b.prefill_tokens, total_ms: b.total_ms,
      judgments: b.judgments, shared_prefix: b.shared_prefix, judgments_per_s: b.judgments_per_s });
  }
  if (m.batch) {
    const b = m.batch.batch;
    rows.push({ kind: 'batch', strategy: 'c', prompt_tokens: b.batch_prefill_tokens + b.shared_prefix_tokens,
      prefill_ms: b.timings_ms.prefill, decode_ms: sum(b.timings_ms.decode), total_ms: b.timings_ms.total,
      judgments: b.judgments, shared_prefix: b.shared_prefix_tokens > 0, judgments_per_s: b.judgments_per_s });
  }
  const cell = (v) => (v === undefined || v === null ? '' : /[",\n]/.test(String(v)) ? `"${String(v).replace(/"/g, '""')}"` : String(v));
  const lines = rows.map((r) => CSV_COLUMNS.map((c) => cell(c === 'device' ? device : c === 'model' ? model : r[c])).join(','));
  return `${CSV_COLUMNS.join(',')}\n${lines.join('\n')}\n`;
}

/** A link to this page with `settings` as its URL parameters (empty ones left out). */
export function settingsUrl(settings) {
  const url = new URL(location.pathname, location.origin);
  for (const [k, v] of Object.entries(settings)) {
    if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, v);
  }
  return url.href;
}

/** Saves `data` (a Blob or text) as `name` through the browser's download. */
export function download(name, data, type = 'application/octet-stream') {
  const blob = data instanceof Blob ? data : new Blob([data], { type });
  const url = URL.createObjectURL(blob);
  const a = Object.assign(document.createElement('a'), { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
