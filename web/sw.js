// Offline support: the page's own files are kept in Cache Storage on first visit and served
// from there when the network is gone (network first, so updates arrive when online). Model
// files have their own cache, written by the engine worker (models.js).
const SHELL = 'onetoken-page-v2';
const FILES = [
  './', './index.html', './style.css', './main.js', './charts.js', './bench-charts.js', './bench-view.js', './lesson.js', './svg.js', './export.js', './takeaway.js', './running.js', './workload.js', './workload-view.js', './model-view.js', './engine-client.js', './engine-worker.js',
  './models.js', './presets.js', './i18n/en.js', './i18n/ko.js', './pkg/onetoken.js', './pkg/onetoken_bg.wasm',
  './pkg/assets/qwen2.5/tokenizer.json', './pkg/assets/qwen2.5/tokenizer_config.json', './pkg/assets/qwen2.5/config.json',
];

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(SHELL).then((c) => c.addAll(FILES)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil(self.clients.claim());
});

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== location.origin || url.pathname.includes('/models/')) return;
  event.respondWith(
    fetch(event.request)
      .then((res) => {
        if (res.ok) {
          const copy = res.clone();
          caches.open(SHELL).then((c) => c.put(event.request, copy));
        }
        return res;
      })
      .catch(async () => (await caches.match(event.request, { ignoreSearch: true })) ?? Response.error()),
  );
});
