// Shared set-up for the browser tests: Debian's Chromium, headless, with WebGPU on SwiftShader
// (no GPU needed), driven by playwright-core; the page served by scripts/static-server.mjs.
// Usage:
//   const b = await openBrowser();            // once per test file
//   const { page, errors } = await b.open('index.html');
//   ...; assert.deepEqual(errors, []);
//   await b.close();
import { access, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from '../../scripts/static-server.mjs';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const WEB = path.join(REPO, 'web');

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--enable-unsafe-webgpu',
  '--enable-unsafe-swiftshader',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
  '--headless=new',
];

/**
 * Serves `root` (default web/) and launches Chromium with a fresh profile.
 * `open(relPath)` opens a page and collects its console errors and uncaught exceptions
 * in `errors` (strings); `close()` stops the browser, the server and removes the profile.
 * `faults`: failures the server injects (see startServer); `webgpu: false` launches Chromium
 * without its WebGPU switches, as a browser without WebGPU; `args`: more Chromium switches.
 */
export async function openBrowser({ root = WEB, mounts = {}, faults = {}, webgpu = true, args = [] } = {}) {
  if (root === WEB) {
    await access(path.join(WEB, 'pkg/onetoken.js')).catch(() => {
      throw new Error('web/pkg/onetoken.js is missing: build it with `bash scripts/build-wasm.sh`');
    });
  }
  const server = await startServer(root, 0, mounts, faults);
  const profile = await mkdtemp(path.join(tmpdir(), 'onetoken-chromium-'));
  let context;
  try {
    // launchPersistentContext: --user-data-dir cannot be passed as a plain arg to launch().
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [...(webgpu ? CHROMIUM_ARGS : CHROMIUM_ARGS.filter((a) => !/webgpu|swiftshader/.test(a))), ...args],
    });
  } catch (e) {
    await server.close();
    await rm(profile, { recursive: true, force: true });
    throw new Error(`could not launch ${CHROMIUM} (apt-get install chromium): ${e.message}`);
  }

  async function open(relPath = 'index.html') {
    const page = await context.newPage();
    const errors = [];
    page.on('console', (msg) => {
      if (msg.type() === 'error') errors.push(`console: ${msg.text()}`);
    });
    page.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));
    const res = await page.goto(new URL(relPath, server.url).href);
    if (!res?.ok()) throw new Error(`${relPath}: HTTP ${res?.status()}`);
    return { page, errors };
  }

  async function close() {
    await context.close().catch(() => {});
    await server.close();
    await rm(profile, { recursive: true, force: true });
  }

  return { url: server.url, open, close, context };
}

/** The tiny fixture model, served as the bundled folder `tiny-qwen2`. */
export const TINY = path.join(REPO, 'crate/tests/fixtures/tiny-qwen2');

/**
 * A browser serving the page with the tiny model, and the page opened on it (`query` is added
 * to `?model=folder:tiny-qwen2&lang=en`), its model loaded: {browser, page, errors}.
 */
export async function openTiny(query = '') {
  const browser = await openBrowser({ mounts: { '/models/tiny-qwen2/': TINY } });
  const { page, errors } = await browser.open(`index.html?model=folder:tiny-qwen2&lang=en${query}`);
  await page.evaluate(() => window.onetoken.ready);
  return { browser, page, errors };
}
