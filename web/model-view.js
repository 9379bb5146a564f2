// The model picker: the source the controls describe, load progress, the loaded model's line,
// the bundled folders and the cached files.
import { coded } from './error-text.js';
import { formatMillions } from './svg.js';

const $ = (id) => document.getElementById(id);

/** `synthetic:NAME`, `folder:NAME` or `url:REPO` as a source. */
export function parseModel(value) {
  const [kind, ...rest] = value.split(':');
  const arg = rest.join(':');
  if (kind === 'synthetic') return { kind, name: arg || 'qwen2.5-0.5b' };
  if (kind === 'folder') return { kind, name: arg };
  if (kind === 'url') return { kind, url: arg };
  throw coded('address', `unknown model ${value} (synthetic:NAME, folder:NAME, folder:FILE.gguf, url:REPO or url:FILE.gguf)`, { reason: 'unknown_model', value });
}

/** The model the controls describe, with the weight format chosen (quantize on load). */
export function selectedSource() {
  return { ...selectedFiles(), quant: $('model-quant').value || undefined };
}

function selectedFiles() {
  const kind = $('model-kind').value;
  if (kind.startsWith('synthetic:')) return parseModel(kind);
  if (kind === 'folder') return { kind, name: $('model-folder').value };
  if (kind === 'url') return { kind, url: $('model-url').value };
  return { kind: 'files', files: [...$('model-files').files] };
}

/** Shows a load progress report ({phase, file, loaded, total, mbPerS, secondsLeft, cached}). */
export function showProgress(p, t, fill) {
  const bar = $('model-progress');
  if (p.phase === 'weights' && p.total) {
    bar.hidden = false;
    bar.max = p.total;
    bar.value = p.loaded;
    const values = { mb: (p.loaded / 1e6).toFixed(0), total: (p.total / 1e6).toFixed(0), rate: p.mbPerS.toFixed(1), left: Math.max(0, p.secondsLeft).toFixed(0) };
    $('model-status').textContent = `${p.file}: ${fill(p.cached ? t.progressCached : t.progress, values)}`;
  } else {
    $('model-status').textContent = `${t.loading} ${t.loadPhases[p.phase] ?? p.phase}${p.file ? ` (${p.file})` : ''}`;
  }
}

/** "Loaded: NAME — its parameters, layers, hidden size, weight format and bytes per step". */
export function modelLine(source, info, t, fill, uncached = []) {
  const name = source.kind === 'files' ? source.files.map((f) => f.name).join(', ') : source.name ?? source.url;
  const facts = fill(t.modelFacts, {
    params: formatMillions(info.parameters),
    layers: info.layers,
    hidden: info.hidden_size,
    quant: info.quant,
    mb: formatMillions(info.decode_bytes),
  });
  // Downloads the browser would not keep: the next visit fetches them again.
  const files = uncached.map((u) => decodeURIComponent(new URL(u.url).pathname.split('/').pop())).join(', ');
  const note = uncached.length ? ` ${fill(uncached.some((u) => u.quota) ? t.notCachedQuota : t.notCached, { files })}` : '';
  return `${t.loaded}: ${name} — ${facts}${note}`;
}

/** Lists the model files in the browser's cache. */
export async function refreshCaches(client, t) {
  const { files, bytes } = await client.call('caches').catch(() => ({ files: [], bytes: 0 }));
  const list = $('cache-list');
  list.replaceChildren(
    ...(files.length
      ? files.map((f) => Object.assign(document.createElement('li'), { textContent: `${f.url} (${(f.bytes / 1e6).toFixed(1)} MB)` }))
      : [Object.assign(document.createElement('li'), { textContent: t.cachesEmpty })]),
  );
  list.dataset.bytes = bytes;
}

export async function listFolders() {
  // A static host cannot list directories: models/index.json names the bundled folders.
  const res = await fetch('./models/index.json').catch(() => null);
  const names = res?.ok ? await res.json().catch(() => []) : [];
  $('model-folder').replaceChildren(...names.map((n) => new Option(n, n)));
}

export function showModelInputs() {
  const kind = $('model-kind').value;
  $('model-folder').hidden = kind !== 'folder';
  $('model-url').hidden = kind !== 'url';
  $('model-files').hidden = kind !== 'files';
  $('files-hint').hidden = kind !== 'files';
  $('drop').hidden = kind !== 'files';
}
