//! Synthetic weights: a model with the exact shapes of a real checkpoint and deterministic,
//! meaningless values, so the page and the benchmarks get real timings without a download.
//! Matrices are generated on the GPU by `shaders/synthetic.wgsl`; the functions here compute the
//! same bits on the CPU, so the CPU reference can check a synthetic forward.
//!
//! Value i of a matrix is `(2u - 1) * 2^-5` (std ~0.018, like HF's init with range 0.02), u in
//! [0, 1) from an integer hash of (tensor seed, i), rounded to bf16. Norm weights are near 1
//! (`1 + (2u - 1) / 16`), biases like matrix values. Its answers are noise, and everything that
//! shows them says so.

use std::collections::HashMap;

use crate::config::Qwen2Config;
use crate::hf_names::expected_tensors;

/// Scale of matrix values and biases (a power of two, so GPU and CPU products are exact).
pub const SCALE: f32 = 1.0 / 32.0;

/// The integer hash of `synthetic.wgsl` ("lowbias32").
pub fn hash(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// A tensor's seed: FNV-1a of its HF name, hashed once more.
pub fn seed(name: &str) -> u32 {
    let fnv = name.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    hash(fnv)
}

/// Uniform in [-1, 1), exactly as the shader computes it.
fn unit(seed: u32, i: u32) -> f32 {
    let u = (hash(i ^ seed) >> 8) as f32 * (1.0 / 16_777_216.0);
    2.0 * u - 1.0
}

/// Value `i` of a synthetic matrix, after bf16 rounding (round to nearest even, as the shader).
pub fn matrix_value(seed: u32, i: u32) -> f32 {
    let bits = (unit(seed, i) * SCALE).to_bits();
    let rounded = (bits.wrapping_add(0x7fff).wrapping_add((bits >> 16) & 1)) >> 16;
    f32::from_bits(rounded << 16)
}

/// A 1-D tensor (norm weight or bias), generated on the CPU for both paths.
pub fn vector(name: &str, len: usize) -> Vec<f32> {
    let s = seed(name);
    let is_norm = name.ends_with("layernorm.weight") || name == "model.norm.weight";
    (0..len as u32).map(|i| if is_norm { 1.0 + unit(s, i) / 16.0 } else { unit(s, i) * SCALE }).collect()
}

/// Every tensor of a synthetic model in f32, for the CPU reference.
pub fn cpu_tensors(config: &Qwen2Config) -> HashMap<String, Vec<f32>> {
    expected_tensors(config)
        .into_iter()
        .map(|(name, shape)| {
            let values = match shape[..] {
                [rows, cols] => {
                    let s = seed(&name);
                    (0..(rows * cols) as u32).map(|i| matrix_value(s, i)).collect()
                }
                _ => vector(&name, shape[0]),
            };
            (name, values)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_deterministic_and_shaped_like_an_init() {
        let s = seed("model.layers.0.mlp.up_proj.weight");
        let v: Vec<f32> = (0..100_000).map(|i| matrix_value(s, i)).collect();
        let mean = v.iter().sum::<f32>() / v.len() as f32;
        let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / v.len() as f32).sqrt();
        assert!(mean.abs() < 1e-3 && (std - SCALE / 3f32.sqrt()).abs() < 1e-3, "mean {mean} std {std}");
        assert_eq!(matrix_value(s, 7), matrix_value(s, 7));
        assert_ne!(seed("a"), seed("b"));
        let norm = vector("model.norm.weight", 1000);
        assert!(norm.iter().all(|w| (0.93..=1.07).contains(w)));
    }
}
