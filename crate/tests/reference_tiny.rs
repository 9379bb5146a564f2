//! The CPU reference forward against HF transformers on the tiny Qwen2 fixture.

mod common;

use common::*;
use onetoken::choice::argmax;
use onetoken::reference::{CpuKvCache, CpuModel, Logits};

#[test]
fn logits_at_every_position_match_hf() {
    let r = tiny_ref();
    let model = CpuModel::load(&fixture("tiny-qwen2")).unwrap();
    let input = ids(&r["input_ids"]);
    let out = model.forward(&input, &mut CpuKvCache::new(&model.config), Logits::All).unwrap();
    let vocab = model.config.vocab_size;
    for (pos, want) in r["logits"].as_array().unwrap().iter().enumerate() {
        let got = &out.logits[pos * vocab..(pos + 1) * vocab];
        assert_close(got, &floats(want), 1e-4, 0.0, &format!("logits at position {pos}"));
        assert_eq!(argmax(got) as u32, ids(&r["argmax"])[pos], "argmax at position {pos}");
    }
    let norms = floats(&r["hidden_norm_per_layer_last_pos"]);
    assert_close(&out.hidden_norms, &norms, 1e-4, 1e-5, "hidden-state norms per layer");
    let before = r["final_hidden_norm_before_model_norm_last"].as_f64().unwrap() as f32;
    assert_close(&[out.pre_norm], &[before], 1e-4, 1e-5, "norm before model.norm");
}

#[test]
fn greedy_with_kv_cache_matches_hf() {
    let r = tiny_ref();
    let model = CpuModel::load(&fixture("tiny-qwen2")).unwrap();
    let tokens = model.greedy(&ids(&r["input_ids"]), 8).unwrap();
    assert_eq!(tokens, ids(&r["greedy8_kv_cache"]));
}

#[test]
fn cached_decode_equals_a_fresh_forward_of_the_longer_sequence() {
    let r = tiny_ref();
    let model = CpuModel::load(&fixture("tiny-qwen2")).unwrap();
    let input = ids(&r["input_ids"]);
    let mut cache = CpuKvCache::new(&model.config);
    model.forward(&input[..10], &mut cache, Logits::Last).unwrap();
    let mut last = Vec::new();
    for &id in &input[10..] {
        last = model.forward(&[id], &mut cache, Logits::Last).unwrap().logits;
    }
    let full = model.forward(&input, &mut CpuKvCache::new(&model.config), Logits::Last).unwrap();
    assert_close(&last, &full.logits, 1e-5, 1e-5, "cached vs full");
}

#[test]
fn out_of_vocabulary_ids_are_refused() {
    let model = CpuModel::load(&fixture("tiny-qwen2")).unwrap();
    let err = model.forward(&[3, 512], &mut CpuKvCache::new(&model.config), Logits::Last);
    let msg = err.err().unwrap().to_string();
    assert!(msg.contains("token id 512 is outside the vocabulary (512)"), "{msg}");
}
