// A small static file server for the page and the browser tests: correct MIME types (WebAssembly
// streaming compilation needs application/wasm), no caching, nothing served outside the root,
// and `Range: bytes=N-` requests (a cut download resumes).
// Library: `const { url, close } = await startServer(root, port)` (port 0 picks a free one).
// CLI:     node scripts/static-server.mjs [ROOT] [PORT]   (defaults: web/, $PORT or 8080)
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.wgsl': 'text/plain; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.safetensors': 'application/octet-stream',
  '.gguf': 'application/octet-stream',
};

/** Resolves a URL path to a file under `root`, or null when it would leave the root. */
function resolveInRoot(root, urlPath) {
  let decoded;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  if (decoded.includes('\0') || decoded.split(/[\\/]/).includes('..')) return null;
  const file = path.resolve(root, '.' + path.posix.normalize('/' + decoded));
  return file === root || file.startsWith(root + path.sep) ? file : null;
}

function send(res, status, text) {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-cache' });
  res.end(text + '\n');
}

async function handle(root, mounts, faults, req, res) {
  if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'method not allowed');
  const urlPath = req.url.split(/[?#]/)[0]; // raw: new URL() would hide '..' segments
  // A mount serves another folder under a URL prefix (tests serve fixtures as bundled models).
  const mount = Object.keys(mounts).find((prefix) => urlPath.startsWith(prefix));
  let file = mount ? resolveInRoot(mounts[mount], '/' + urlPath.slice(mount.length)) : resolveInRoot(root, urlPath);
  if (!file) return send(res, 403, 'forbidden');
  let info = await stat(file).catch(() => null);
  if (info?.isDirectory()) {
    if (!urlPath.endsWith('/')) {
      res.writeHead(301, { Location: urlPath + '/', 'Cache-Control': 'no-cache' });
      return res.end();
    }
    file = path.join(file, 'index.html');
    info = await stat(file).catch(() => null);
  }
  if (!info?.isFile()) return send(res, 404, `not found: ${urlPath}`);
  const fault = faults[urlPath];
  if (fault) {
    fault.requests = (fault.requests ?? 0) + 1;
    // Whether the client read the whole response or dropped the connection first.
    res.on('close', () => {
      const ended = res.writableFinished ? 'finished' : 'dropped';
      fault[ended] = (fault[ended] ?? 0) + 1;
    });
  }
  if (fault?.gzip) {
    // As a host that compresses what it sends: Content-Length counts the compressed bytes.
    const body = gzipSync(await readFile(file));
    res.writeHead(200, {
      'Content-Type': MIME[path.extname(file).toLowerCase()] ?? 'application/octet-stream',
      'Content-Encoding': 'gzip',
      'Content-Length': body.byteLength,
      'Cache-Control': 'no-cache',
    });
    return res.end(req.method === 'HEAD' ? undefined : body);
  }
  const range = fault?.ranges === false ? null : /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
  const start = range && Number(range[1]) < info.size ? Number(range[1]) : 0;
  const etag = fault?.sha256 ? { ETag: `"${await sha256Of(file, info)}"` } : {};
  res.writeHead(start > 0 ? 206 : 200, {
    ...etag,
    'Content-Type': MIME[path.extname(file).toLowerCase()] ?? 'application/octet-stream',
    'Content-Length': info.size - start,
    'Cache-Control': 'no-cache',
    'Accept-Ranges': fault?.ranges === false ? 'none' : 'bytes',
    ...(start > 0 ? { 'Content-Range': `bytes ${start}-${info.size - 1}/${info.size}` } : {}),
  });
  if (req.method === 'HEAD') return res.end();
  if (fault && start === 0 && fault.cuts > 0) {
    // A connection dropped mid-download: the first `cutAfter` bytes, then a reset.
    fault.cuts -= 1;
    const head = createReadStream(file, { start: 0, end: fault.cutAfter - 1 });
    head.on('error', () => res.destroy());
    head.on('end', () => setTimeout(() => res.destroy(), 50));
    return head.pipe(res, { end: false });
  }
  if (fault?.stallAfter && start === 0) {
    // A download that pauses: the first `stallAfter` bytes, `stallMs` of nothing, the rest.
    const head = createReadStream(file, { start: 0, end: fault.stallAfter - 1 });
    head.on('error', () => res.destroy());
    head.on('end', () => setTimeout(() => {
      createReadStream(file, { start: fault.stallAfter }).on('error', () => res.destroy()).pipe(res);
    }, fault.stallMs));
    return head.pipe(res, { end: false });
  }
  createReadStream(file, { start })
    .on('error', () => res.destroy())
    .pipe(res);
}

const hashes = new Map();

/** A file's SHA-256 in hex, computed once per version of the file. */
async function sha256Of(file, info) {
  const key = `${file}:${info.size}:${info.mtimeMs}`;
  if (!hashes.has(key)) {
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(file)) hash.update(chunk);
    hashes.set(key, hash.digest('hex'));
  }
  return hashes.get(key);
}

/**
 * Serves `root` on 127.0.0.1:`port` (0: a free port); `mounts` maps URL prefixes such as
 * '/models/tiny/' to other folders. `faults` (for tests) maps URL paths to failures:
 * `{cutAfter: BYTES, cuts: N}` drops the connection after BYTES of the next N full downloads,
 * `ranges: false` ignores Range requests (a server that cannot resume), `{stallAfter: BYTES,
 * stallMs: MS}` pauses every full download after BYTES, `sha256: true` sends the
 * file's SHA-256 as its ETag (as Hugging Face does for large files), `gzip: true` sends it
 * compressed (Content-Encoding: gzip, the compressed length). A fault counts the requests it
 * answered in `requests`, and the responses sent whole (`finished`) or dropped by the client
 * before their end (`dropped`).
 * @returns {Promise<{url: string, close: () => Promise<void>}>} url ends with '/'.
 */
export async function startServer(root, port = 0, mounts = {}, faults = {}) {
  const absRoot = path.resolve(root);
  const absMounts = Object.fromEntries(Object.entries(mounts).map(([k, v]) => [k, path.resolve(v)]));
  const server = createServer((req, res) => {
    handle(absRoot, absMounts, faults, req, res).catch((e) => {
      if (!res.headersSent) send(res, 500, String(e));
      else res.destroy();
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const url = `http://127.0.0.1:${server.address().port}/`;
  const close = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return { url, close };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const root = process.argv[2] ?? path.join(here, '..', 'web');
  const port = Number(process.argv[3] ?? process.env.PORT ?? 8080);
  const { url } = await startServer(root, port);
  console.log(`serving ${path.resolve(root)} at ${url}  (Ctrl-C to stop)`);
}
