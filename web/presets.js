// Example judgments. `colors` is the article's: the sky's color, answered as {"choice": "blue"}.
export const PRESETS = {
  colors: {
    system: 'You are a careful judge. Answer in JSON.',
    document: 'On a clear day at noon, sunlight scatters off the air, and short wavelengths scatter most.',
    question: 'What color is the sky?',
    choices: ['blue', 'red', 'yellow'],
    batch: ['What color is the sky?', 'What color is the sky at sunset?', 'Which wavelengths scatter most?'],
  },
  sentiment: {
    system: 'You classify the sentiment of reviews. Answer in JSON.',
    document: 'Review: The battery lasts two days and the screen is gorgeous, but the speaker crackles.',
    question: 'What is the overall sentiment of the review?',
    choices: ['positive', 'negative', 'mixed'],
  },
  yesno: {
    system: 'You answer questions about the document. Answer in JSON.',
    document: 'The museum is open from 9:00 to 17:00 every day except Monday.',
    question: 'Is the museum open on Monday?',
    choices: ['yes', 'no'],
  },
  koColors: {
    system: '당신은 신중한 판정자입니다. JSON으로 답하세요.',
    document: '맑은 날 정오에는 햇빛이 공기에 흩어지며, 파장이 짧은 빛이 가장 많이 흩어집니다.',
    question: '하늘은 무슨 색인가요?',
    choices: ['파란색', '빨간색', '노란색'],
    batch: ['하늘은 무슨 색인가요?', '해 질 녘 하늘은 무슨 색인가요?', '어떤 파장이 가장 많이 흩어지나요?'],
  },
  koYesNo: {
    system: '문서에 대한 질문에 답하세요. JSON으로 답하세요.',
    document: '박물관은 월요일을 제외하고 매일 9시부터 17시까지 엽니다.',
    question: '박물관은 월요일에 여나요?',
    choices: ['예', '아니오'],
  },
  // The 777-judgment workload (workload.js), in the page's language: the form shows its first
  // document and its 21 questions.
  workload777: { workload: true },
};

// `colors` and `koColors` also carry the batch editor's default questions (strategy C).

/** The user message of a judgment: the document, then the question. */
export function userMessage(document, question) {
  return document.trim() ? `${document.trim()}\n\n${question.trim()}` : question.trim();
}
