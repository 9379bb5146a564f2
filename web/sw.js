// Offline support: the page's own files are kept in Cache Storage on first visit and served
// from there when the network is gone (network first, so updates arrive when online). Model
// files have their own cache, written by the engine worker (models.js).
const SHELL = 'onetoken-page-v2';
const FILES = [
  './', './index.html', './style.css', './main.js', './served.js', './charts.js', './bench-charts.js', './bench-progress.js', './error-text.js', './bench-view.js', './lesson.js', './svg.js', './export.js', './takeaway.js', './running.js', './workload.js', './workload-view.js', './model-view.js', './engine-client.js', './engine-worker.js',
  './models.js', './presets.js', './i18n/en.js', './i18n/ko.js', './pkg/onetoken.js', './pkg/onetoken_bg.wasm',
  './pkg/assets/qwen2.5/tokenizer.json', './pkg/assets/qwen2.5/tokenizer_config.json', './pkg/assets/qwen2.5/config.json',
];

// The bundled models' list, kept at install where the host has one (a classroom offline still
// picks its folders, even where the page's first fetch of it came before this worker took the
// page over); a host without one still installs the page.
const OPTIONAL = ['./models/index.json'];

self.addEventListener('install', (event) => {
  const optional = (c) => OPTIONAL.map((f) => c.add(f).catch(() => {}));
  event.waitUntil(caches.open(SHELL).then((c) => Promise.all([c.addAll(FILES), ...optional(c)])).then(() => self.skipWaiting()));
});

// The models' own cache (models.js) is kept; older versions of this page's cache are not.
const MODELS = 'onetoken-models-v1';

self.addEventListener('activate', (event) => {
  event.waitUntil(
    caches.keys()
      .then((names) => Promise.all(names.filter((n) => n !== SHELL && n !== MODELS).map((n) => caches.delete(n))))
      .then(() => self.clients.claim()),
  );
});

// What this cache keeps: the page's files and the bundled models' list (a classroom offline
// still picks its folders), each under its address without the query (`?doc=...` links are
// one page). Anything else (a model file by URL on this host, a resumed range) passes through.
const KEPT = new Set([...FILES, ...OPTIONAL].map((f) => new URL(f, self.location).pathname));

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== location.origin || !KEPT.has(url.pathname)) return;
  const key = url.origin + url.pathname;
  event.respondWith(
    fetch(event.request)
      .then((res) => {
        if (res.status === 200) {
          const copy = res.clone();
          caches.open(SHELL).then((c) => c.put(key, copy)).catch(() => {});
        }
        return res;
      })
      .catch(async () => (await caches.match(key)) ?? Response.error()),
  );
});
