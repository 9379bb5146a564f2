//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// A test fixture folder under `crate/tests/fixtures`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// HF transformers' reference outputs for the tiny model (see fixtures/README.md).
pub fn tiny_ref() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(fixture("tiny-qwen2/ref.json")).unwrap()).unwrap()
}

pub fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

pub fn floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

/// Asserts `|got - want| <= abs + rel * |want|` elementwise, naming the first bad index.
pub fn assert_close(got: &[f32], want: &[f32], abs: f32, rel: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = 0.0f32;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let diff = (g - w).abs();
        assert!(
            diff <= abs + rel * w.abs(),
            "{what}: first bad index {i}: got {g}, want {w} (diff {diff}, tolerance {abs} + {rel}*|want|)"
        );
        worst = worst.max(diff);
    }
    eprintln!("{what}: max abs diff {worst:e} over {} values", got.len());
}

/// Seeded values in [-scale, scale): a tiny xorshift, so tests need no RNG crate.
pub fn seeded(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}
