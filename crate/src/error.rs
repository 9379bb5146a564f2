//! One error type for the whole library. Every variant says what was wrong and, where it helps,
//! what was expected and what was found, so a user can fix their input without reading code.

use serde::Serialize;
use serde_json::json;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("config.json: {0}")]
    Config(String),

    #[error("GGUF metadata: {0}")]
    GgufMetadata(String),

    /// The model is another architecture than Qwen2 (code `config`): `key` is where its file
    /// names it (config.json's model_type or GGUF's general.architecture).
    #[error("{key} {found:?} is not supported: onetoken runs Qwen2 and Qwen2.5 models (\"qwen2\")")]
    NotQwen2 { key: &'static str, found: String },

    #[error("model file {file}: {problem}")]
    ModelFile { file: String, problem: String },

    #[error("tensor {name}: expected shape {expected:?}, found {found:?}")]
    TensorShape { name: String, expected: Vec<usize>, found: Vec<usize> },

    /// A tensor's element type is not one this reads: `readable` lists those its file format
    /// may use.
    #[error("tensor {name}: dtype {dtype} is not supported (use {})", one_of(.readable))]
    TensorDtype { name: String, dtype: String, readable: &'static [&'static str] },

    #[error("missing tensor(s) for this config: {}", .0.join(", "))]
    MissingTensors(Vec<String>),

    #[error("unexpected tensor(s) not used by a Qwen2 model: {}", .0.join(", "))]
    ExtraTensors(Vec<String>),

    #[error("tokenizer: {0}")]
    Tokenizer(String),

    #[error("chat template: {0}")]
    Template(String),

    #[error("input: {0}")]
    Input(String),

    /// The choices of a judgment cannot be judged (code `input`).
    #[error("input: {0}")]
    Choices(ChoiceProblem),

    /// A batch of judgments cannot be run as given (code `input`).
    #[error("input: {0}")]
    Batch(BatchProblem),

    /// The benchmark's options cannot be measured on this model (code `bench_options`).
    #[error("input: {0}")]
    Bench(BenchProblem),

    /// A request of a batch failed: the error, and which request (from 1).
    #[error("request {request}: {error}")]
    InRequest { request: usize, error: Box<Error> },

    /// A batch's prompts together are more tokens than one pass runs on this device (its
    /// kernels run a grid row per token; code `input`).
    #[error(
        "input: a batch of {tokens} tokens in one pass is more than this device runs \
         (max_compute_workgroups_per_dimension {grid}): judge fewer at a time"
    )]
    BatchPassTooLarge { tokens: usize, grid: usize },

    #[error("prompt of {tokens} tokens does not fit: {limit}")]
    ContextOverflow { tokens: usize, limit: ContextLimit },

    #[error("GPU: {0}")]
    Gpu(String),

    /// A forward pass read out NaN or infinite logits: no answer can be ranked by them.
    #[error(
        "the model's output is not a number (NaN or infinite logits): its weights hold NaN or \
         infinite values, or values too large for 32-bit arithmetic"
    )]
    ModelOutput,

    /// The device ran out of memory (code `gpu_memory`: the page can free a model and retry).
    #[error("GPU: {0}")]
    GpuMemory(String),

    #[error(
        "no GPU adapter ({0}). In a browser, WebGPU needs a recent Chrome, Edge or Safari 26 \
         (Firefox: enable dom.webgpu.enabled); natively, a Vulkan, Metal or DX12 driver \
         (lavapipe works on any CPU)"
    )]
    NoAdapter(String),

    #[error("the GPU device was lost ({0}); reload the model")]
    DeviceLost(String),

    #[error(
        "cancelled: the run stopped before its next forward pass; nothing is left half done, run it again when ready"
    )]
    Cancelled,

    #[error("GPU limit {limit}: this model needs {needed}, the device allows {available}")]
    GpuLimit { limit: &'static str, needed: u64, available: u64 },

    #[error("I/O error on {path}: {source}")]
    Io { path: String, source: std::io::Error },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// "a, b or c".
fn one_of(items: &[&str]) -> String {
    match items.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

impl Error {
    /// A stable name of the variant, for code that reacts to kinds of errors (the page offers
    /// a reload after `device_lost`) without reading messages.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Config(_) | Error::GgufMetadata(_) | Error::NotQwen2 { .. } => "config",
            Error::ModelFile { .. } | Error::TensorShape { .. } | Error::TensorDtype { .. } => "model_file",
            Error::MissingTensors(_) | Error::ExtraTensors(_) | Error::ModelOutput => "model_file",
            Error::Tokenizer(_) | Error::Template(_) => "tokenizer",
            Error::Input(_) | Error::Choices(_) | Error::Batch(_) | Error::BatchPassTooLarge { .. } => "input",
            Error::Bench(_) => "bench_options",
            Error::InRequest { error, .. } => error.code(),
            Error::ContextOverflow { .. } => "context_overflow",
            Error::Gpu(_) => "gpu",
            Error::GpuMemory(_) => "gpu_memory",
            Error::NoAdapter(_) => "no_adapter",
            Error::DeviceLost(_) => "device_lost",
            Error::Cancelled => "cancelled",
            Error::GpuLimit { .. } => "gpu_limit",
            Error::Io { .. } => "io",
        }
    }

    /// What went wrong as data, for a page that words errors in its own language: a JSON object
    /// whose `reason` names the case and whose other fields (numbers, strings, lists as arrays)
    /// fill its sentence; the message says the same in English. `None` where the message is all
    /// there is.
    pub fn details(&self) -> Option<serde_json::Value> {
        let value = match self {
            Error::Choices(problem) => serde_json::to_value(problem).ok()?,
            Error::Batch(problem) => serde_json::to_value(problem).ok()?,
            Error::Bench(problem) => serde_json::to_value(problem).ok()?,
            Error::ContextOverflow { tokens, limit: ContextLimit::Model { context } } => {
                json!({ "reason": "model_context", "tokens": tokens, "limit": context })
            }
            Error::ContextOverflow { tokens, limit: ContextLimit::KvCache { capacity } } => {
                json!({ "reason": "kv_cache_capacity", "tokens": tokens, "limit": capacity })
            }
            Error::BatchPassTooLarge { tokens, grid } => {
                json!({ "reason": "batch_pass_too_large", "tokens": tokens, "limit": grid })
            }
            Error::GpuLimit { limit, needed, available } => {
                json!({ "reason": "gpu_limit", "limit": limit, "needed": needed, "available": available })
            }
            Error::TensorShape { name, expected, found } => {
                json!({ "reason": "tensor_shape", "name": name, "expected": expected, "found": found })
            }
            Error::TensorDtype { name, dtype, readable } => {
                json!({ "reason": "tensor_dtype", "name": name, "dtype": dtype, "readable": readable })
            }
            Error::NotQwen2 { found, .. } => json!({ "reason": "not_qwen2", "found": found }),
            Error::MissingTensors(names) => json!({ "reason": "missing_tensors", "names": names }),
            Error::ExtraTensors(names) => json!({ "reason": "extra_tensors", "names": names }),
            Error::ModelOutput => json!({ "reason": "model_output" }),
            Error::InRequest { request, error } => {
                let mut details = error.details()?;
                details.as_object_mut()?.insert("request".into(), (*request).into());
                details
            }
            _ => return None,
        };
        Some(value)
    }

    pub(crate) fn model_file(file: impl Into<String>, problem: impl Into<String>) -> Self {
        Error::ModelFile { file: file.into(), problem: problem.into() }
    }
}

/// Why a list of choices cannot be judged. Choices are numbered from 1, as the page lists them.
#[derive(Debug, Clone, PartialEq, Error, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum ChoiceProblem {
    #[error("no choices: give at least two")]
    NoChoices,
    #[error("only one choice ({choice:?}): give at least two")]
    OneChoice { choice: String },
    #[error("{count} choices: give at most {max}")]
    TooManyChoices { count: usize, max: usize },
    #[error("choice {index} is empty")]
    EmptyChoice { index: usize },
    #[error("choice {choice:?} is a special token, not text")]
    SpecialTokenChoice { choice: String },
    #[error("choices {first} and {second} are the same ({choice:?})")]
    SameChoices { first: usize, second: usize, choice: String },
    /// Two different texts that the tokenizer turns into the same tokens after the prompt.
    #[error("choices {first:?} and {second:?} tokenize identically")]
    SameTokens { first: String, second: String },
    /// One choice's tokens begin the other's: the shorter could never be told apart.
    #[error("choices {first:?} and {second:?} are a token prefix of each other")]
    TokenPrefix { first: String, second: String },
}

/// Why a batch of judgments cannot be run as given.
#[derive(Debug, Clone, PartialEq, Error, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum BatchProblem {
    #[error("an empty batch of requests")]
    NoRequests,
    #[error("a batch of {requests} requests: give at most {max} (split it)")]
    TooManyRequests { requests: usize, max: usize },
}

/// Why the benchmark's options cannot be measured, found before any measuring.
#[derive(Debug, Clone, PartialEq, Error, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum BenchProblem {
    /// A swept length and A's reply do not fit the model's context.
    #[error(
        "lengths: a prompt of {length} tokens and its reply do not fit the model's context of {context} tokens \
         (give lengths up to {longest})"
    )]
    LengthPastContext { length: usize, context: usize, longest: usize },
    /// Strategy C's document leaves no room for a question.
    #[error(
        "doc_tokens: a document of {tokens} tokens leaves no room for a question in the model's context of \
         {context} tokens"
    )]
    DocumentPastContext { tokens: usize, context: usize },
    #[error("batch_sizes: a batch of {judgments} judgments cannot be measured (give 1 to {max})")]
    BatchSize { judgments: usize, max: usize },
    /// A profiled length of 0: nothing to prefill.
    #[error("the profile prefills each length: a length of 0 has nothing to prefill (give lengths of 1 or more)")]
    ProfileOfNothing,
}

/// What bounds a prompt's length.
#[derive(Debug, Clone, Copy, PartialEq, Error)]
pub enum ContextLimit {
    /// The model's context (`max_position_embeddings`).
    #[error("the model's context is {context} tokens")]
    Model { context: usize },
    /// The KV cache the model was built with, per sequence.
    #[error("the KV cache holds {capacity} tokens per sequence")]
    KvCache { capacity: usize },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One error of each case that has details, in the order of `engine` in
    /// `web/tests/error-details.json`, the file the page's wording of them is tested against.
    fn one_of_each() -> Vec<Error> {
        let choices = |problem| Error::Choices(problem);
        vec![
            choices(ChoiceProblem::NoChoices),
            choices(ChoiceProblem::OneChoice { choice: "red".into() }),
            choices(ChoiceProblem::TooManyChoices { count: 5000, max: 256 }),
            choices(ChoiceProblem::EmptyChoice { index: 2 }),
            choices(ChoiceProblem::SpecialTokenChoice { choice: "<|im_end|>".into() }),
            choices(ChoiceProblem::SameChoices { first: 1, second: 3, choice: "blue".into() }),
            choices(ChoiceProblem::SameTokens { first: "blue".into(), second: "blue ".into() }),
            choices(ChoiceProblem::TokenPrefix { first: "blue".into(), second: "blue\"".into() }),
            Error::ContextOverflow { tokens: 5012, limit: ContextLimit::Model { context: 4096 } },
            Error::ContextOverflow { tokens: 300, limit: ContextLimit::KvCache { capacity: 256 } },
            Error::BatchPassTooLarge { tokens: 78400, grid: 65535 },
            Error::Batch(BatchProblem::NoRequests),
            Error::Batch(BatchProblem::TooManyRequests { requests: 4097, max: 4096 }),
            Error::Bench(BenchProblem::LengthPastContext { length: 5000, context: 4096, longest: 4032 }),
            Error::Bench(BenchProblem::DocumentPastContext { tokens: 4090, context: 4096 }),
            Error::Bench(BenchProblem::BatchSize { judgments: 0, max: 4096 }),
            Error::Bench(BenchProblem::ProfileOfNothing),
            Error::GpuLimit { limit: "max_storage_buffers_per_shader_stage", needed: 10, available: 8 },
            Error::TensorShape { name: "model.norm.weight".into(), expected: vec![64], found: vec![32, 2] },
            Error::TensorDtype {
                name: "model.norm.weight".into(),
                dtype: "I8".into(),
                readable: &["BF16", "F16", "F32"],
            },
            Error::MissingTensors(vec!["model.norm.weight".into(), "lm_head.weight".into()]),
            Error::ExtraTensors(vec!["model.layers.0.mlp.extra".into()]),
            Error::ModelOutput,
            Error::NotQwen2 { key: "config.json: model_type", found: "llama".into() },
            Error::InRequest {
                request: 2,
                error: Box::new(choices(ChoiceProblem::SameChoices { first: 1, second: 2, choice: "a".into() })),
            },
        ]
    }

    #[test]
    fn details_are_the_data_the_page_words() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../web/tests/error-details.json");
        let cases: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let expected = cases["engine"].as_array().unwrap();
        let errors = one_of_each();
        assert_eq!(errors.len(), expected.len());
        for (e, want) in errors.iter().zip(expected) {
            assert_eq!(e.code(), want["code"], "{e}");
            assert_eq!(e.details().as_ref(), Some(&want["details"]), "{e}");
        }
    }

    #[test]
    fn messages_stay_english_sentences_and_others_have_no_details() {
        let same = Error::Choices(ChoiceProblem::SameChoices { first: 1, second: 2, choice: "a".into() });
        assert_eq!(same.to_string(), r#"input: choices 1 and 2 are the same ("a")"#);
        let in_request = Error::InRequest { request: 2, error: Box::new(same) };
        assert_eq!(in_request.to_string(), r#"request 2: input: choices 1 and 2 are the same ("a")"#);
        let overflow = Error::ContextOverflow { tokens: 300, limit: ContextLimit::KvCache { capacity: 256 } };
        assert_eq!(
            overflow.to_string(),
            "prompt of 300 tokens does not fit: the KV cache holds 256 tokens per sequence"
        );
        // A request's error without details (a template that fails) keeps its own code.
        let template = Error::InRequest { request: 1, error: Box::new(Error::Template("syntax error".into())) };
        assert_eq!((template.code(), template.details()), ("tokenizer", None));
        assert_eq!(Error::Input("an empty batch".into()).details(), None);
    }
}
