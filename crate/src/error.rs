//! One error type for the whole library. Every variant says what was wrong and, where it helps,
//! what was expected and what was found, so a user can fix their input without reading code.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("config.json: {0}")]
    Config(String),

    #[error("GGUF metadata: {0}")]
    GgufMetadata(String),

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

impl Error {
    /// A stable name of the variant, for code that reacts to kinds of errors (the page offers
    /// a reload after `device_lost`) without reading messages.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Config(_) | Error::GgufMetadata(_) => "config",
            Error::ModelFile { .. } | Error::TensorShape { .. } | Error::TensorDtype { .. } => "model_file",
            Error::MissingTensors(_) | Error::ExtraTensors(_) | Error::ModelOutput => "model_file",
            Error::Tokenizer(_) | Error::Template(_) => "tokenizer",
            Error::Input(_) => "input",
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

    pub(crate) fn model_file(file: impl Into<String>, problem: impl Into<String>) -> Self {
        Error::ModelFile { file: file.into(), problem: problem.into() }
    }
}
