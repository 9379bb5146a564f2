//! Broken model files: each problem gets its own clear error, never a panic.

mod common;

use common::*;
use onetoken::Qwen2Config;
use onetoken::reference::{CpuModel, F32Tensors};
use onetoken::weights::{SafetensorsStream, read_model_dir};

fn tiny_config() -> Qwen2Config {
    Qwen2Config::from_json(&std::fs::read(fixture("tiny-qwen2/config.json")).unwrap()).unwrap()
}

fn tiny_bytes() -> Vec<u8> {
    std::fs::read(fixture("tiny-qwen2/model.safetensors")).unwrap()
}

/// Writes a model folder with the tiny config and the given safetensors bytes, then loads it.
fn load_with(bytes: &[u8], config: &str) -> String {
    let dir = std::env::temp_dir().join(format!("onetoken-bad-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("model.safetensors"), bytes).unwrap();
    std::fs::write(dir.join("config.json"), config).unwrap();
    let err = CpuModel::load(&dir).err().expect("must fail").to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    err
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn tiny_config_text() -> String {
    std::fs::read_to_string(fixture("tiny-qwen2/config.json")).unwrap()
}

fn expect(err: &str, want: &str) {
    assert!(err.contains(want), "error {err:?} should contain {want:?}");
}

#[test]
fn truncated_file() {
    let bytes = tiny_bytes();
    let err = load_with(&bytes[..bytes.len() - 100], &tiny_config_text());
    expect(&err, "model.safetensors: truncated: tensor model.norm.weight ends at data byte");
    let err = load_with(&bytes[..5], &tiny_config_text());
    expect(&err, "model.safetensors: truncated: the header is incomplete (5 bytes read)");
    let err = load_with(&u64::MAX.to_le_bytes(), &tiny_config_text());
    expect(&err, "model.safetensors: header length 18446744073709551615 is impossible");
}

#[test]
fn truncated_stream_is_caught_at_finish() {
    // A download that stops early has no known length up front: `finish` must catch it.
    let bytes = tiny_bytes();
    let mut stream = SafetensorsStream::new("model.safetensors", None);
    let mut sink = F32Tensors::default();
    for piece in bytes[..bytes.len() - 7].chunks(1000) {
        stream.push(piece, &mut sink).unwrap();
    }
    let err = stream.finish().unwrap_err().to_string();
    expect(&err, "truncated: tensor model.norm.weight ends at data byte");
}

#[test]
fn odd_chunk_sizes_give_the_same_tensors() {
    let bytes = tiny_bytes();
    let read = |chunk: usize| {
        let mut stream = SafetensorsStream::new("m", Some(bytes.len() as u64));
        let mut sink = F32Tensors::default();
        for piece in bytes.chunks(chunk) {
            stream.push(piece, &mut sink).unwrap();
        }
        stream.finish().unwrap();
        sink.0
    };
    let whole = read(bytes.len());
    assert_eq!(whole.len(), 1 + 2 * 12 + 1);
    assert_eq!(read(7), whole);
    assert_eq!(read(4093), whole);
}

#[test]
fn overlapping_and_out_of_range_offsets() {
    let (mut header, data) = split_safetensors(&tiny_bytes());
    let norm = header["model.norm.weight"]["data_offsets"].clone();
    let embed = header["model.embed_tokens.weight"]["data_offsets"].clone();
    // Point model.norm.weight inside the embedding (same size, overlapping range).
    let start = embed[0].as_u64().unwrap() + 64;
    let len = norm[1].as_u64().unwrap() - norm[0].as_u64().unwrap();
    header["model.norm.weight"]["data_offsets"] = serde_json::json!([start, start + len]);
    let err = load_with(&join_safetensors(&header, &data), &tiny_config_text());
    expect(&err, "overlap");
    expect(&err, "model.embed_tokens.weight");

    let (mut header, data) = split_safetensors(&tiny_bytes());
    let end = data.len() as u64 + 1000;
    header["model.norm.weight"]["data_offsets"] = serde_json::json!([end - len, end]);
    let err = load_with(&join_safetensors(&header, &data), &tiny_config_text());
    expect(&err, "truncated: tensor model.norm.weight ends at data byte");

    let (mut header, data) = split_safetensors(&tiny_bytes());
    header["model.norm.weight"]["data_offsets"] = serde_json::json!([0, 3]);
    let err = load_with(&join_safetensors(&header, &data), &tiny_config_text());
    expect(&err, "tensor model.norm.weight: offsets 0..3 do not hold 64 values");
}

#[test]
fn header_that_is_not_json() {
    let mut bytes = 16u64.to_le_bytes().to_vec();
    bytes.extend(b"{\"a\": [1, 2, 3]}");
    bytes.extend([0u8; 32]);
    let err = load_with(&bytes, &tiny_config_text());
    expect(&err, "model.safetensors: header entry a:");
    let mut bytes = 9u64.to_le_bytes().to_vec();
    bytes.extend(b"not json!");
    expect(&load_with(&bytes, &tiny_config_text()), "header is not valid JSON");
}

#[test]
fn wrong_dtype() {
    let (mut header, data) = split_safetensors(&tiny_bytes());
    header["model.norm.weight"]["dtype"] = "I16".into();
    let err = load_with(&join_safetensors(&header, &data), &tiny_config_text());
    expect(&err, "tensor model.norm.weight: dtype I16 is not supported (use BF16, F16 or F32)");
}

#[test]
fn missing_extra_and_misshaped_tensors() {
    let bytes = without_tensors(&tiny_bytes(), &["model.layers.1.mlp.up_proj.weight", "model.norm.weight"]);
    let err = load_with(&bytes, &tiny_config_text());
    expect(&err, "missing tensor(s) for this config: model.layers.1.mlp.up_proj.weight, model.norm.weight");

    let (mut header, data) = split_safetensors(&tiny_bytes());
    let v = header.as_object_mut().unwrap().remove("model.norm.weight").unwrap();
    header["model.layers.7.mystery.weight"] = v;
    let err = load_with(&join_safetensors(&header, &data), &tiny_config_text());
    expect(&err, "unexpected tensor(s) not used by a Qwen2 model: model.layers.7.mystery.weight");

    // The tiny checkpoint against a config with a wider MLP: every mismatch names both shapes.
    let config = tiny_config_text().replace("\"intermediate_size\": 128", "\"intermediate_size\": 256");
    let err = load_with(&tiny_bytes(), &config);
    expect(&err, "expected shape [64, 256], found [64, 128]");
}

#[test]
fn untied_config_needs_lm_head() {
    let config = tiny_config_text().replace("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false");
    let err = load_with(&tiny_bytes(), &config);
    expect(&err, "missing tensor(s) for this config: lm_head.weight");
}

#[test]
fn sharded_checkpoint_reads_like_one_file() {
    let (header, data) = split_safetensors(&tiny_bytes());
    let dir = std::env::temp_dir().join(format!("onetoken-shards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Shard 1: the embedding; shard 2: everything else, each with offsets of its own.
    let mut shards = [serde_json::Map::new(), serde_json::Map::new()];
    let mut datas = [Vec::new(), Vec::new()];
    let mut weight_map = serde_json::Map::new();
    for (name, info) in header.as_object().unwrap() {
        if name == "__metadata__" {
            continue;
        }
        let s = usize::from(name != "model.embed_tokens.weight");
        let [a, b] = [0, 1].map(|i| info["data_offsets"][i].as_u64().unwrap() as usize);
        let start = datas[s].len();
        datas[s].extend_from_slice(&data[a..b]);
        let mut info = info.clone();
        info["data_offsets"] = serde_json::json!([start, start + b - a]);
        shards[s].insert(name.clone(), info);
        weight_map.insert(name.clone(), format!("model-0000{}-of-00002.safetensors", s + 1).into());
    }
    for s in 0..2 {
        let bytes = join_safetensors(&serde_json::Value::Object(shards[s].clone()), &datas[s]);
        std::fs::write(dir.join(format!("model-0000{}-of-00002.safetensors", s + 1)), bytes).unwrap();
    }
    let index = serde_json::json!({"metadata": {}, "weight_map": weight_map});
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
    let sharded = read_model_dir(&dir, &tiny_config(), F32Tensors::default()).unwrap().0;
    let single = read_model_dir(&fixture("tiny-qwen2"), &tiny_config(), F32Tensors::default()).unwrap().0;
    assert_eq!(sharded, single);
    std::fs::remove_dir_all(&dir).unwrap();
}
