//! onetoken: Qwen2.5 Instruct on the GPU through WebGPU (in the browser) or wgpu (natively),
//! with our own WGSL kernels, built to measure and teach why "prefill + one constrained token"
//! answers a judgment several times faster than generating JSON token by token.
//!
//! What it does: reads HF Qwen2 checkpoints (config.json, safetensors, tokenizer) tensor by
//! tensor; runs a plain CPU reference forward (the oracle for every GPU test); renders chat
//! prompts with the model's own template.
//!
//! What it does not do: sampling strategies beyond greedy and choice-constrained picks, models
//! other than the Qwen2 architecture, training, or quantised weights.

pub mod bench;
pub mod choice;
pub mod clock;
pub mod config;
pub mod cost;
pub mod error;
pub mod hf_names;
pub mod reference;
pub mod synthetic;
pub mod tokenizer;
pub mod weights;

pub use config::Qwen2Config;
pub use error::{Error, Result};

pub mod gpu;
pub mod judge;
pub mod model;
pub mod ops;
pub mod profile;
#[cfg(target_arch = "wasm32")]
pub mod web;
