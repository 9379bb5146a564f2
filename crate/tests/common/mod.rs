//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// A test fixture folder under `crate/tests/fixtures`, or under `ONETOKEN_TEST_FIXTURES` where
/// that is set (test executables run on another machine: scripts/gpu-bench.sh).
pub fn fixture(name: &str) -> PathBuf {
    let fixtures = std::env::var_os("ONETOKEN_TEST_FIXTURES")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"), PathBuf::from);
    fixtures.join(name)
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

/// Splits a safetensors file into (header JSON, data).
pub fn split_safetensors(bytes: &[u8]) -> (serde_json::Value, Vec<u8>) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    (serde_json::from_slice(&bytes[8..8 + n]).unwrap(), bytes[8 + n..].to_vec())
}

/// A safetensors file from a header and its data.
pub fn join_safetensors(header: &serde_json::Value, data: &[u8]) -> Vec<u8> {
    let h = header.to_string().into_bytes();
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend(h);
    out.extend(data);
    out
}

/// Drops tensors from a safetensors file, repacking the data so no hole is left.
pub fn without_tensors(bytes: &[u8], drop: &[&str]) -> Vec<u8> {
    let (header, data) = split_safetensors(bytes);
    let (mut out_header, mut out_data) = (serde_json::Map::new(), Vec::new());
    for (name, info) in header.as_object().unwrap() {
        if name == "__metadata__" || drop.contains(&name.as_str()) {
            continue;
        }
        let [a, b] = [0, 1].map(|i| info["data_offsets"][i].as_u64().unwrap() as usize);
        let mut info = info.clone();
        info["data_offsets"] = serde_json::json!([out_data.len(), out_data.len() + b - a]);
        out_data.extend_from_slice(&data[a..b]);
        out_header.insert(name.clone(), info);
    }
    join_safetensors(&serde_json::Value::Object(out_header), &out_data)
}

/// A number no other call in this process returns (for temporary file names).
pub fn unique_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

pub mod gguf;
