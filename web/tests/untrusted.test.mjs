// Untrusted text stays text: URL parameters, choices and model names with markup render
// literally and run no script, and the page carries a Content-Security-Policy that allows only
// its own scripts (an injected inline script is refused).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openTiny } from './browser.mjs';

const XSS = '<img src=x onerror="window.pwned=1">';
let browser;
let page;

before(async () => {
  const q = encodeURIComponent(`Sky? ${XSS}`);
  const choices = encodeURIComponent('<b>red</b>|<script>window.pwned=2</script>');
  ({ browser, page } = await openTiny(`&q=${q}&choices=${choices}&doc=${encodeURIComponent(XSS)}`));
});

after(async () => {
  await browser?.close();
});

test('markup in URL parameters and choices is shown as text and runs nothing', async () => {
  assert.equal(await page.inputValue('#question'), `Sky? ${XSS}`);
  assert.equal(await page.inputValue('#document'), XSS);
  await page.click('button.run[data-strategy=b]');
  await page.waitForFunction(() => !document.getElementById('result-section').hidden);
  const chips = await page.$$eval('#chips .chip span', (els) => els.map((e) => e.textContent));
  assert.deepEqual(chips, ['<b>red</b>', '<script>window.pwned=2</script>']);
  assert.match(await page.textContent('#answer'), /<b>red<\/b>|<script>/);
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  assert.equal(await page.locator('body img, body script, body b').count(), 0);
  // A model name with markup, in an error message, stays text too.
  const message = await page.evaluate((x) => window.onetoken.load({ kind: 'folder', name: x }).then(() => '', (e) => e.message), XSS);
  assert.ok(message.length > 0);
  assert.equal(await page.isVisible('#error'), true);
  assert.equal(await page.locator('#error img').count(), 0);
  assert.equal(await page.evaluate(() => window.pwned), undefined);
});

test('a Content-Security-Policy allows only the page\'s own scripts', async () => {
  const csp = await page.getAttribute('meta[http-equiv=Content-Security-Policy]', 'content');
  assert.match(csp, /script-src 'self' 'wasm-unsafe-eval'/);
  assert.match(csp, /object-src 'none'/);
  // An inline script (what injected markup would need) is refused and reported.
  const refused = await page.evaluate(() => new Promise((resolve) => {
    document.addEventListener('securitypolicyviolation', (e) => resolve(e.violatedDirective), { once: true });
    const s = document.createElement('script');
    s.textContent = 'window.inline = 1';
    document.body.append(s);
    setTimeout(() => resolve(window.inline === 1 ? 'ran' : 'silent'), 2000);
  }));
  assert.match(refused, /^script-src/);
  assert.equal(await page.evaluate(() => window.inline), undefined);
});
