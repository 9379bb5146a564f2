//! One error type for the whole library. Every variant says what was wrong and, where it helps,
//! what was expected and what was found, so a user can fix their input without reading code.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("config.json: {0}")]
    Config(String),

    #[error("model file {file}: {problem}")]
    ModelFile { file: String, problem: String },

    #[error("tensor {name}: expected shape {expected:?}, found {found:?}")]
    TensorShape { name: String, expected: Vec<usize>, found: Vec<usize> },

    #[error("tensor {name}: dtype {dtype} is not supported (use BF16, F16 or F32)")]
    TensorDtype { name: String, dtype: String },

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

    #[error("prompt of {tokens} tokens does not fit: {limit}")]
    ContextOverflow { tokens: usize, limit: String },

    #[error("GPU: {0}")]
    Gpu(String),

    #[error("GPU limit {limit}: this model needs {needed}, the device allows {available}")]
    GpuLimit { limit: &'static str, needed: u64, available: u64 },

    #[error("I/O error on {path}: {source}")]
    Io { path: String, source: std::io::Error },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn model_file(file: impl Into<String>, problem: impl Into<String>) -> Self {
        Error::ModelFile { file: file.into(), problem: problem.into() }
    }
}
