//! onetoken: Qwen2.5 Instruct on the GPU through WebGPU (in the browser) or wgpu (natively),
//! with our own WGSL kernels, built to measure and teach why "prefill + one constrained token"
//! answers a judgment several times faster than generating JSON token by token.
//!
//! What it does: reads HF Qwen2 checkpoints (config.json, safetensors, tokenizer) or GGUF files
//! tensor by tensor, straight to the GPU; runs the forward pass as a batch of variable-length sequences
//! over a KV cache on the GPU; answers judgments with three strategies (token by token, a
//! prefill and one token, batched) and times every phase; benchmarks the device and profiles
//! every kernel; and keeps a plain CPU reference forward as the oracle for every GPU test.
//!
//! What it does not do: sampling strategies beyond greedy and choice-constrained picks, models
//! other than the Qwen2 architecture, or training.
//!
//! Module map, from the bottom up:
//!
//! | module | what it holds |
//! |---|---|
//! | [`config`], [`hf_names`] | `config.json`, named presets, the HF tensor names |
//! | [`weights`], [`gguf`], [`quant`] | safetensors and GGUF stream parsers and checks; Q8_0/Q5_0/Q4_0 blocks (no GPU) |
//! | [`tokenizer`], [`choice`] | tokenizer and chat template; choices as token sequences, constrained picks |
//! | [`gpu`] | device and limits, kernels, buffers, weights on the GPU, dispatch and timing |
//! | [`ops`] | one type per WGSL kernel, and synthetic weights generated on the GPU |
//! | [`model`] | the forward pass: kernels bound to weights, the KV cache, what a call reads back |
//! | [`judge`] | the engine: strategies A, B and C on a model and its tokenizer |
//! | [`bench`], [`profile`], [`cost`] | the benchmark, the per-kernel profile, the cost model fit |
//! | [`mod@reference`], [`synthetic`] | the CPU oracle and the synthetic weights' values |
//! | `web` | the wasm-bindgen API the page's worker drives (wasm32 only) |

pub mod bench;
pub mod choice;
pub mod clock;
pub mod config;
pub mod cost;
pub mod error;
pub mod gguf;
pub mod gpu;
pub mod hf_names;
pub mod judge;
pub mod model;
pub mod ops;
pub mod profile;
pub mod quant;
pub mod reference;
pub mod synthetic;
pub mod tokenizer;
#[cfg(target_arch = "wasm32")]
pub mod web;
pub mod weights;

pub use config::Qwen2Config;
pub use error::{BatchProblem, BenchProblem, ChoiceProblem, ContextLimit, Error, Result};
