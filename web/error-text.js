// What the error box says, in the page's language. An engine error carries `code` (its kind,
// the library's Error::code) and, for the cases a learner meets with the page's own inputs,
// `details`: `reason` names the case and the other fields fill its sentence (Error::details;
// web/tests/error-details.json has one of each). Those are worded here from the strings; any
// other error keeps its (English) message, after its kind in the page's language.

/**
 * An Error with a `code`, and `details` where given, shaped as the wasm module's errors are, so
 * the page's own errors are worded like the engine's and callers never parse messages.
 */
export function coded(code, message, details) {
  return Object.assign(new Error(message), details ? { code, details } : { code });
}

// A list (tensor names, a shape) reads as its items with commas.
const fill = (text, values) => text.replace(/\{(\w+)\}/g, (_, k) => (Array.isArray(values[k]) ? values[k].join(', ') : values[k] ?? ''));

/**
 * What went wrong, in the language of `strings` (en.js or ko.js): worded from `details` where
 * `strings.errorDetails` has its reason (a batch's failing request named first), else `message`.
 */
export function errorDetail(message, details, strings) {
  const worded = details && strings.errorDetails[details.reason];
  if (!worded) return message;
  const inRequest = Number.isInteger(details.request) ? fill(strings.errorInRequest, details) : '';
  return inRequest + fill(worded, details);
}

/** The error box's text for the error `e`: "kind: detail", or the detail where no kind is known. */
export function errorText(e, strings) {
  const detail = errorDetail(e?.message ?? String(e), e?.details, strings);
  const kind = strings.errorKinds[e?.code];
  return kind ? `${kind}: ${detail}` : detail;
}
