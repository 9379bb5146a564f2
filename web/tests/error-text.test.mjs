// The error box's wording of errors with details (node only; errors.test.mjs and
// network.test.mjs show real ones in the page): every case the engine gives details for
// (error-details.json's `engine`, which a Rust test checks against Error::details) and every
// case of the page's own loading (`page`, from models.js) reads as a sentence in both
// languages, with its values.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import en from '../i18n/en.js';
import ko from '../i18n/ko.js';
import { errorDetail, errorText } from '../error-text.js';

const { engine, page } = JSON.parse(await readFile(new URL('./error-details.json', import.meta.url), 'utf8'));
const CASES = [...engine, ...page];
const error = ({ code, details }) => Object.assign(new Error('the English message'), { code, details });

test('the page words exactly the reasons the engine gives details for', () => {
  const reasons = [...new Set(CASES.map((c) => c.details.reason))].sort();
  assert.deepEqual(Object.keys(en.errorDetails).sort(), reasons);
  assert.deepEqual(Object.keys(ko.errorDetails).sort(), reasons);
});

test('each case reads in both languages with its kind and every figure', () => {
  for (const strings of [en, ko]) {
    for (const c of CASES) {
      const text = errorText(error(c), strings);
      assert.ok(text.startsWith(`${strings.errorKinds[c.code]}: `), text);
      assert.doesNotMatch(text, /undefined|English message|\{\w+\}/, text);
      const { reason, ...values } = c.details;
      const items = Object.values(values).flat();
      for (const v of items) assert.ok(text.includes(String(v)), `${reason}: ${v} in ${text}`);
      if (strings === ko) {
        // Latin letters left: the values, file names, and names that stay as they are.
        let rest = text;
        for (const v of items) rest = rest.replaceAll(String(v), '');
        rest = rest.replace(/[\w.]*\.(json|gguf|safetensors)\b/g, '');
        // What is typed stays as it is: the address's syntax (model=…, synthetic:…), a command.
        rest = rest.replace(/\b(model|strategy)=|\b(synthetic|folder|url):|python3 -m http\.server/g, '');
        const words = rest.match(/[A-Za-z]{2,}/g) ?? [];
        const kept = ['GPU', 'KV', 'NaN', 'HTTP', 'CORS', 'MB', 'Qwen', 'URL', 'config', 'https', 'http', 'localhost', 'WebGPU'];
        assert.deepEqual(words.filter((w) => !kept.includes(w)), [], text);
      }
    }
  }
});

test('sentences as a learner reads them', () => {
  const find = (reason, request) => CASES.find((c) => c.details.reason === reason && c.details.request === request);
  assert.equal(errorText(error(find('same_choices')), en), 'This request cannot be judged: choices 1 and 3 are the same ("blue")');
  assert.equal(errorText(error(find('same_choices', 2)), ko), '이 요청은 판정할 수 없습니다: 2번 요청: 1번과 2번 선택지가 같습니다("a")');
  assert.equal(errorText(error(find('tensor_shape')), ko), '모델 파일을 쓸 수 없습니다: 텐서 model.norm.weight의 모양은 [64]이어야 하는데 [32, 2]입니다');
  assert.equal(errorText(error(find('missing_tensors')), en),
    'The model files cannot be used: missing tensor(s) for this config: model.norm.weight, lm_head.weight');
  assert.equal(errorText(error(find('tensor_dtype')), en),
    'The model files cannot be used: tensor model.norm.weight: dtype I8 is not supported (use one of BF16, F16, F32)');
  assert.equal(errorText(error(find('unknown_strategy')), en),
    'The page’s address (URL) has a value this page cannot use: strategy=all is not a strategy this page runs; use one of both, a-free, b-full-head');
  assert.equal(errorText(error(find('model_context')), ko),
    '모델이 다룰 수 있는 길이를 넘었습니다: 프롬프트가 5012토큰인데 모델의 컨텍스트는 4096토큰까지입니다. 문서를 줄여 주세요');
});

test('an error without details keeps its message after its kind', () => {
  assert.equal(errorText(Object.assign(new Error('GPU: out of memory'), { code: 'gpu_memory' }), ko), 'GPU 메모리가 부족합니다: GPU: out of memory');
  assert.equal(errorText(new Error('plain'), en), 'plain');
  // A reason this page does not know (a newer engine) falls back to the message.
  assert.equal(errorDetail('the message', { reason: 'something_new' }, ko), 'the message');
});
