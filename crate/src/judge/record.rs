//! What a judgment takes and what it reports: the request, the strategy, and the records the
//! CLI prints as JSON lines and the page charts.

use serde::{Deserialize, Serialize};

use crate::choice::JsonScanner;
use crate::error::{Error, Result};

/// The response prefix strategy B prefills by default.
pub const DEFAULT_PREFIX: &str = "{\"choice\": \"";

/// A judgment request: the CLI's request file, the page's `judge()` argument.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeRequest {
    /// System prompt; without it the chat template's default applies.
    #[serde(default)]
    pub system: Option<String>,
    pub user: String,
    pub choices: Vec<String>,
    /// Response prefix for strategy B (default `{"choice": "`).
    #[serde(default)]
    pub prefix: Option<String>,
}

impl JudgeRequest {
    pub fn prefix(&self) -> &str {
        self.prefix.as_deref().unwrap_or(DEFAULT_PREFIX)
    }
}

/// How to answer. The serde names are the CLI's and the page's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Strategy {
    /// A, schema-constrained: every token of the JSON reply is a forward pass.
    #[serde(rename = "a")]
    TokenByToken,
    /// A, free: greedy until the JSON closes, a special token (EOS) or the token limit
    /// ([`crate::judge::free_token_limit`]).
    #[serde(rename = "a-free")]
    TokenByTokenFree,
    /// B with the choices' head rows only.
    #[serde(rename = "b")]
    PrefillOneToken,
    /// B with the full-vocabulary head.
    #[serde(rename = "b-full-head")]
    PrefillOneTokenFullHead,
    /// C: many requests in one batched prefill, answered by B's choice head.
    #[serde(rename = "c")]
    Batched,
}

impl Strategy {
    /// The strategies of one request (`all`).
    pub const ALL: [Strategy; 4] = [
        Strategy::TokenByToken,
        Strategy::TokenByTokenFree,
        Strategy::PrefillOneToken,
        Strategy::PrefillOneTokenFullHead,
    ];

    /// The CLI's and the page's name.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::TokenByToken => "a",
            Strategy::TokenByTokenFree => "a-free",
            Strategy::PrefillOneToken => "b",
            Strategy::PrefillOneTokenFullHead => "b-full-head",
            Strategy::Batched => "c",
        }
    }

    /// Strategy B, with either head: the answer is read where the prompt ends.
    pub fn reads_answer_at_prefill(self) -> bool {
        matches!(self, Strategy::PrefillOneToken | Strategy::PrefillOneTokenFullHead)
    }

    /// `all`, or the name of one strategy of a single request.
    pub fn parse_list(name: &str) -> Result<Vec<Strategy>> {
        if name == "all" {
            return Ok(Self::ALL.to_vec());
        }
        Self::ALL
            .iter()
            .copied()
            .find(|s| s.name() == name)
            .map(|s| vec![s])
            .ok_or_else(|| Error::Input(format!("unknown strategy {name:?} (all, a, a-free, b, b-full-head)")))
    }
}

/// Milliseconds of wall time per phase (always present).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    /// Chat template, tokenization and choice tokenization on the CPU.
    pub tokenize: f64,
    /// The prefill pass: submit, GPU work, readback.
    pub prefill: f64,
    /// Each decode step, in order.
    pub decode: Vec<f64>,
    /// Copying results out of mapped buffers (part of prefill and decode).
    pub readback: f64,
    /// The whole judgment.
    pub total: f64,
}

/// Milliseconds per phase of one part of the work: GPU time from timestamp queries, or the CPU
/// time before the GPU could start (encoding and submitting the commands).
#[derive(Debug, Clone, Default, Serialize)]
pub struct PhaseTimings {
    pub prefill: f64,
    pub decode: Vec<f64>,
}

/// Why A-free's generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FreeStop {
    /// The reply's JSON object closed.
    Closed,
    /// The model ended its turn (a special token such as `<|im_end|>`).
    EndOfTurn,
    /// The token limit ([`crate::judge::free_token_limit`]): the reply was cut off.
    TokenLimit,
}

/// What a strategy found, before it becomes a [`Judgment`].
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// The chosen choice; `None` when A-free's reply names none of them.
    pub index: Option<usize>,
    /// The tokens generated or picked after the prompt.
    pub picked: Vec<u32>,
    /// Forward passes after the prefill: one per picked token but the first, and one more
    /// where A-free read an end token it does not keep.
    pub decode_steps: usize,
    /// Logits of each choice's token where the choices first differ.
    pub choice_logits: Vec<f32>,
    /// Probabilities over the choices along the constrained walk
    /// ([`crate::choice::ConstrainedPick::probs`]).
    pub probs: Vec<f32>,
    pub prompt_tokens: usize,
    pub healed_tokens: usize,
    pub top: Option<Vec<(u32, f32)>>,
    /// A-free only: why its generation stopped.
    pub free_stop: Option<FreeStop>,
}

/// The record of one judgment (the CLI prints it as one JSON line).
#[derive(Debug, Clone, Serialize)]
pub struct Judgment {
    pub strategy: Strategy,
    /// The chosen choice; `None` when A-free's reply names none of them.
    pub choice: Option<String>,
    pub choice_index: Option<usize>,
    /// Logits of each choice's token where the choices first differ, in choice order.
    pub choice_logits: Vec<f32>,
    /// Probabilities over the choices along the constrained walk: each step's softmax over the
    /// allowed tokens, multiplied along every choice's path ([`crate::choice::ConstrainedPick::probs`]).
    pub probs: Vec<f32>,
    /// Tokens prefilled (prompt, response prefix included).
    pub prompt_tokens: usize,
    pub generated_token_ids: Vec<u32>,
    pub generated_text: String,
    /// Forward passes after the prefill.
    pub decode_steps: usize,
    /// Prompt tokens backed off for token healing (see `choice.rs`).
    pub healed_tokens: usize,
    /// With `top_k`: `[id, logit]` of the unconstrained distribution where the answer is read
    /// (full-vocabulary heads only; `None` for the choice head).
    pub top: Option<Vec<(u32, f32)>>,
    pub timings_ms: Timings,
    pub gpu_timings_ms: Option<PhaseTimings>,
    /// The part of each pass's wall time before the GPU could start: small when its commands
    /// were encoded ahead, during the pass before ([`crate::model::Model::forward`]).
    pub encode_timings_ms: PhaseTimings,
    /// Decode steps that ran commands encoded ahead.
    pub decode_steps_encoded_ahead: usize,
    /// Synthetic weights: the answer is meaningless; the timings are real.
    pub synthetic: bool,
    /// A-free only (else absent): `closed`, `end_of_turn` or `token_limit` (cut off: a reply
    /// that names no choice may only have been too long).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_stop: Option<FreeStop>,
    /// On request ([`crate::judge::JudgeOptions::sequence_logprobs`]): each choice's
    /// full-sequence log-probability (its tokens and the closing) after B's prompt.
    pub sequence_logprobs: Option<Vec<f32>>,
}

/// A judgment's context that is not the answer: the request's choices, the decoded text,
/// the timings, the weights' kind.
pub struct JudgmentContext<'a> {
    pub strategy: Strategy,
    pub choices: &'a [String],
    pub generated_text: String,
    pub timings: Timings,
    pub gpu_timings: Option<PhaseTimings>,
    pub encode_timings: PhaseTimings,
    pub decode_steps_encoded_ahead: usize,
    pub synthetic: bool,
}

impl Judgment {
    /// The one place a record is built.
    pub fn new(answer: Answer, c: JudgmentContext) -> Self {
        Judgment {
            strategy: c.strategy,
            choice: answer.index.map(|i| c.choices[i].clone()),
            choice_index: answer.index,
            choice_logits: answer.choice_logits,
            probs: answer.probs,
            prompt_tokens: answer.prompt_tokens,
            decode_steps: answer.decode_steps,
            generated_token_ids: answer.picked,
            generated_text: c.generated_text,
            healed_tokens: answer.healed_tokens,
            top: answer.top,
            timings_ms: c.timings,
            gpu_timings_ms: c.gpu_timings,
            encode_timings_ms: c.encode_timings,
            decode_steps_encoded_ahead: c.decode_steps_encoded_ahead,
            synthetic: c.synthetic,
            free_stop: answer.free_stop,
            sequence_logprobs: None,
        }
    }
}

/// A batch of judgments (strategy C).
#[derive(Debug, Clone, Serialize)]
pub struct BatchRecord {
    pub strategy: Strategy,
    pub judgments: usize,
    /// Tokens of the shared prefix computed once (0 without `shared_prefix`).
    pub shared_prefix_tokens: usize,
    /// Tokens in the batched prefill (suffixes only, with a shared prefix).
    pub batch_prefill_tokens: usize,
    /// Longest sequence of the batch: the bound on its latency.
    pub longest_prompt_tokens: usize,
    pub decode_steps: usize,
    pub timings_ms: BatchTimings,
    pub gpu_timings_ms: Option<PhaseTimings>,
    /// As [`Judgment::encode_timings_ms`] and [`Judgment::decode_steps_encoded_ahead`].
    pub encode_timings_ms: PhaseTimings,
    pub decode_steps_encoded_ahead: usize,
    pub judgments_per_s: f64,
    pub synthetic: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct BatchTimings {
    pub tokenize: f64,
    /// Prefill of the shared prefix (0 without one).
    pub shared_prefill: f64,
    pub prefill: f64,
    pub decode: Vec<f64>,
    pub total: f64,
}

/// Whether `text` holds a complete top-level JSON object (braces balanced outside strings).
pub fn json_object_closed(text: &str) -> bool {
    let (mut depth, mut opened, mut scan) = (0i32, false, JsonScanner::default());
    for ch in text.chars() {
        match scan.structural(ch) {
            Some('{') => {
                depth += 1;
                opened = true;
            }
            Some('}') => {
                depth -= 1;
                if opened && depth == 0 {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// The choice a free-form reply names: the `"choice"` string of the first JSON object in it
/// that has one, matched exactly, then in Unicode NFC (a composed and a decomposed é are the
/// same text), then ignoring case and surrounding spaces where that leaves only one choice.
pub fn parse_choice(text: &str, choices: &[String]) -> Option<usize> {
    let named = first_choice_field(text)?;
    if let Some(i) = choices.iter().position(|c| *c == named) {
        return Some(i);
    }
    let only = |key: &dyn Fn(&str) -> String| {
        let want = key(&named);
        let mut found = choices.iter().enumerate().filter(|(_, c)| key(c) == want).map(|(i, _)| i);
        match (found.next(), found.next()) {
            (Some(i), None) => Some(i),
            _ => None,
        }
    };
    only(&nfc).or_else(|| only(&|s: &str| nfc(s.trim()).to_lowercase()))
}

/// The `"choice"` string of the first JSON object in `text` that has one.
fn first_choice_field(text: &str) -> Option<String> {
    text.match_indices('{').find_map(|(at, _)| {
        let value = serde_json::Deserializer::from_str(&text[at..]).into_iter::<serde_json::Value>().next()?.ok()?;
        value.get("choice")?.as_str().map(String::from)
    })
}

fn nfc(text: &str) -> String {
    let mut normalized = tokenizers::NormalizedString::from(text);
    normalized.nfc();
    normalized.get().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_replies_are_parsed() {
        let choices: Vec<String> = ["blue", "red"].map(String::from).to_vec();
        assert!(json_object_closed("{\"choice\": \"blue\"}"));
        assert!(!json_object_closed("{\"choice\": \"bl}ue"));
        assert!(!json_object_closed("{\"a\": {\"b\": 1}"));
        assert_eq!(parse_choice("Sure! {\"choice\": \"red\"}", &choices), Some(1));
        assert_eq!(parse_choice("{\"choice\": \" Blue \"}", &choices), Some(0));
        assert_eq!(parse_choice("{\"choice\": \"green\"}", &choices), None);
        assert_eq!(parse_choice("no json", &choices), None);
        // The first object that names a choice, whatever follows it.
        assert_eq!(parse_choice("{\"choice\": \"red\"} or {\"choice\": \"blue\"}", &choices), Some(1));
        assert_eq!(parse_choice("{\"x\": 1} {\"choice\": \"blue\"} }", &choices), Some(0));
        // A decomposed é names the composed choice; escapes are read as JSON.
        let cafe: Vec<String> = ["café", "tea \"x\""].map(String::from).to_vec();
        assert_eq!(parse_choice("{\"choice\": \"cafe\u{301}\"}", &cafe), Some(0));
        assert_eq!(parse_choice("{\"choice\": \"tea \\\"x\\\"\"}", &cafe), Some(1));
        // Ignoring case must leave one choice: "BLUE" between "Blue" and "blue" names neither.
        let cased: Vec<String> = ["Blue", "blue", "Red"].map(String::from).to_vec();
        assert_eq!(parse_choice("{\"choice\": \"blue\"}", &cased), Some(1));
        assert_eq!(parse_choice("{\"choice\": \"BLUE\"}", &cased), None);
        assert_eq!(parse_choice("{\"choice\": \" red\"}", &cased), Some(2));
    }

    #[test]
    fn strategies_keep_their_names() {
        assert_eq!(Strategy::parse_list("all").unwrap().len(), 4);
        assert!(Strategy::parse_list("c").is_err());
        for s in Strategy::ALL.into_iter().chain([Strategy::Batched]) {
            assert_eq!(serde_json::to_value(s).unwrap(), s.name());
        }
    }
}
