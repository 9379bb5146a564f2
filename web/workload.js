// The 777-judgment workload: 37 documents x 21 questions. Each document's questions are one
// batch over a shared prefix (strategy C): one forward pass per document answers all 21, and
// the batch's latency is bounded by its longest prefill plus one step. The documents and
// questions are generated from a few facts per document, so the workload is the same everywhere.

export const FULL = { documents: 37, questions: 21 };
/** What a slow (CPU-emulated) device runs instead, and says so. */
export const SCALED = { documents: 3, questions: 7 };

const EN = {
  shops: ['bakery', 'bookshop', 'pharmacy', 'flower shop', 'bike repair shop', 'tea house', 'hardware store'],
  colors: ['blue', 'red', 'green', 'yellow', 'white'],
  days: ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'],
  document: (f) => `The ${f.shop} on ${f.street} Street has a ${f.color} door. It opens at ${f.open}:00 and closes at ${f.close}:00, every day except ${f.closed}. It has ${f.staff} staff and ${f.parking ? 'a car park' : 'no car park'}.`,
  questions: (f, other) => [
    `Is the door ${f.color}?`, `Is the door ${other.color}?`, `Is it a ${f.shop}?`, `Is it a ${other.shop}?`,
    `Is it on ${f.street} Street?`, `Is it on ${other.street} Street?`, `Does it open at ${f.open}:00?`,
    `Does it open at ${other.open}:00?`, `Does it close at ${f.close}:00?`, `Is it closed on ${f.closed}?`,
    `Is it closed on ${other.closed}?`, `Does it have ${f.staff} staff?`, `Does it have ${other.staff + 1} staff?`,
    'Does it have a car park?', 'Is it open every day?', `Is it open on ${other.closed}?`,
    `Can you buy something there at ${f.open + 1}:00?`, `Can you buy something there at ${f.close + 1}:00?`,
    'Is the shop described in the document?', 'Does the document give an opening time?', 'Does the document name the owner?',
  ],
  choices: ['yes', 'no'],
  system: 'You answer questions about the document. Answer in JSON.',
};

const KO = {
  shops: ['빵집', '서점', '약국', '꽃집', '자전거 수리점', '찻집', '철물점'],
  colors: ['파란색', '빨간색', '초록색', '노란색', '흰색'],
  days: ['월요일', '화요일', '수요일', '목요일', '금요일', '토요일', '일요일'],
  document: (f) => `${f.street}길의 ${f.shop}은 문이 ${f.color}입니다. ${f.closed}을 빼고 매일 ${f.open}시에 열어 ${f.close}시에 닫습니다. 직원은 ${f.staff}명이고, 주차장은 ${f.parking ? '있습니다' : '없습니다'}.`,
  questions: (f, other) => [
    `문이 ${f.color}인가요?`, `문이 ${other.color}인가요?`, `${f.shop}인가요?`, `${other.shop}인가요?`,
    `${f.street}길에 있나요?`, `${other.street}길에 있나요?`, `${f.open}시에 여나요?`,
    `${other.open}시에 여나요?`, `${f.close}시에 닫나요?`, `${f.closed}에 쉬나요?`,
    `${other.closed}에 쉬나요?`, `직원이 ${f.staff}명인가요?`, `직원이 ${other.staff + 1}명인가요?`,
    '주차장이 있나요?', '매일 여나요?', `${other.closed}에 여나요?`,
    `${f.open + 1}시에 물건을 살 수 있나요?`, `${f.close + 1}시에 물건을 살 수 있나요?`,
    '문서에 가게가 나오나요?', '문서에 여는 시간이 나오나요?', '문서에 주인 이름이 나오나요?',
  ],
  choices: ['예', '아니오'],
  system: '문서에 대한 질문에 답하세요. JSON으로 답하세요.',
};

const STREETS = ['Maple', 'Harbour', 'Mill', 'Station', 'Orchard', 'Bridge', 'Garden', 'River', 'Hill', 'Market', 'Castle'];

/** The facts of document i (deterministic). */
function facts(i, s) {
  return {
    shop: s.shops[i % s.shops.length],
    color: s.colors[(i * 3) % s.colors.length],
    street: STREETS[(i * 5) % STREETS.length],
    open: 7 + (i % 4),
    close: 17 + (i % 5),
    closed: s.days[(i * 2) % 7],
    staff: 2 + (i % 6),
    parking: i % 3 === 0,
  };
}

/** The workload's documents: [{system, document, questions, choices}], `questions` each. */
export function workloadDocuments(lang, { documents, questions } = FULL) {
  const s = lang === 'ko' ? KO : EN;
  return Array.from({ length: documents }, (_, i) => {
    const f = facts(i, s);
    const qs = s.questions(f, facts(i + 1, s)).slice(0, questions);
    return { system: s.system, document: s.document(f), questions: qs, choices: s.choices };
  });
}

/**
 * Runs the batches (one list of requests per document) one after another (`judgeBatch(requests)`
 * resolves to {batch, judgments}); `onBatch(done, total)` hears each. Returns the totals and
 * each batch's record.
 */
export async function runWorkload(batches, judgeBatch, onBatch = () => {}) {
  const records = [];
  for (const requests of batches) {
    records.push((await judgeBatch(requests)).batch);
    onBatch(records.length, batches.length);
  }
  const totalMs = records.reduce((a, r) => a + r.timings_ms.total, 0);
  const judgments = records.reduce((a, r) => a + r.judgments, 0);
  return { records, totalMs, judgments, judgmentsPerS: judgments / (totalMs / 1000) };
}

/** The article's hosted GPU: 60 ms for a 600-token prefill, 30 ms a decode step. */
const HOSTED = { perTokenMs: 60 / 600, decodeMs: 30 };

/**
 * The full workload (FULL) from the measured batches (scaled down or not), on this device's
 * fitted cost model and on the article's hosted figures. A batch is the prefill of its shared
 * document (a call of its own) and of all its question suffixes together (one more call), then
 * the decode steps its choices need (none when one token decides): every judgment of the batch
 * is answered when that one batch is, so its time is the latency bound. Without a usable cost
 * model (none, or one whose prefill does not grow with the prompt) the device's figures are null.
 */
export function projectWorkload(result, costModel) {
  const perDocument = result.records.map((r) => ({
    shared: r.shared_prefix_tokens,
    suffix: r.batch_prefill_tokens / r.judgments, // tokens of one question after the document
  }));
  const avg = (f) => perDocument.reduce((a, d) => a + f(d), 0) / perDocument.length;
  const shared = avg((d) => d.shared);
  const suffixes = FULL.questions * avg((d) => d.suffix);
  const steps = Math.max(0, ...result.records.map((r) => r.decode_steps ?? 0));
  // A fit to a few short, noisy prompts can slope down; it says nothing about this workload.
  const usable = costModel?.prefill.per_token_ms > 0;
  const prefill = (tokens) => (tokens > 0 ? Math.max(0, costModel.prefill.fixed_ms + costModel.prefill.per_token_ms * tokens) : 0);
  const deviceBatch = usable ? prefill(shared) + prefill(suffixes) + steps * costModel.decode_ms : null;
  const hostedBatch = HOSTED.perTokenMs * (shared + suffixes) + steps * HOSTED.decodeMs;
  return {
    batchTokens: shared + suffixes,
    decodeSteps: steps,
    latencyBoundMs: deviceBatch,
    deviceMs: usable ? FULL.documents * deviceBatch : null,
    hostedMs: FULL.documents * hostedBatch,
    hostedLatencyMs: hostedBatch,
  };
}
