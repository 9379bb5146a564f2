// Both languages carry every string: the same keys at every level, the same {placeholders} in
// each string, and every key the page's HTML names (data-i18n, data-i18n-placeholder,
// data-i18n-aria-label) exists. A missing or misspelt key fails here, not in front of a class.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import en from '../i18n/en.js';
import ko from '../i18n/ko.js';
import { REPO } from './browser.mjs';

/** Every leaf of a strings object as [dotted key, value]. */
function leaves(obj, prefix = '') {
  return Object.entries(obj).flatMap(([k, v]) =>
    (v && typeof v === 'object' ? leaves(v, `${prefix}${k}.`) : [[`${prefix}${k}`, v]]));
}

const placeholders = (s) => [...String(s).matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();

test('English and Korean have the same keys and the same placeholders', () => {
  const [e, k] = [new Map(leaves(en)), new Map(leaves(ko))];
  assert.deepEqual([...e.keys()].filter((key) => !k.has(key)), [], 'keys missing in Korean');
  assert.deepEqual([...k.keys()].filter((key) => !e.has(key)), [], 'keys missing in English');
  for (const [key, value] of e) {
    assert.ok(String(value).trim() && String(k.get(key)).trim(), `${key} is empty`);
    assert.deepEqual(placeholders(k.get(key)), placeholders(value), `${key}: placeholders`);
  }
});

test('every key the HTML names exists', async () => {
  const html = await readFile(path.join(REPO, 'web/index.html'), 'utf8');
  const named = [...html.matchAll(/data-i18n(?:-placeholder|-aria-label)?="([^"]+)"/g)].map((m) => m[1]);
  assert.ok(named.length > 30);
  for (const key of named) {
    assert.ok(key in en && key in ko, `data-i18n key ${key}`);
  }
});
