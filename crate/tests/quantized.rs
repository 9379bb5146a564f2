//! Quantize-on-load end to end: the tiny model streamed from safetensors and quantized to Q8_0
//! and Q4_0 gives the CPU reference's logits over the same quantized weights, with both kernel
//! families, in prefill and decode; synthetic 0.5B weights quantize the same way; and the
//! bytes per decode step follow the format.

mod common;

use std::rc::Rc;

use common::*;
use onetoken::gpu::{Gpu, GpuLoader, GpuOptions, KernelFamily, load_dir};
use onetoken::model::{Head, Model, ModelOptions, Positions, Readout, Sequence};
use onetoken::quant::Quant;
use onetoken::reference::{CpuKvCache, CpuModel, Logits};
use onetoken::weights::{CheckedSink, SafetensorsStream};

const QUANTS: [Quant; 3] = [Quant::Q8_0, Quant::Q5_0, Quant::Q4_0];
const LOGITS_ALL: Readout = Readout { positions: Positions::All, head: Head::Logits, hidden: false };

fn gpu(kernels: KernelFamily) -> Rc<Gpu> {
    Rc::new(Gpu::new_blocking(GpuOptions { kernels: Some(kernels), ..Default::default() }).unwrap())
}

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    pollster::block_on(f)
}

#[test]
fn quantized_tiny_model_matches_the_quantized_cpu_reference() {
    let input = ids(&tiny_ref()["input_ids"]);
    for quant in QUANTS {
        let cpu = CpuModel::load(&fixture("tiny-qwen2")).unwrap().quantized(quant).unwrap();
        let mut cache = CpuKvCache::new(&cpu.config);
        let want = cpu.forward(&input, &mut cache, Logits::All).unwrap().logits;
        let want_next = cpu.forward(&[7], &mut cache, Logits::Last).unwrap().logits;
        for family in [KernelFamily::Tiled, KernelFamily::Direct] {
            let gpu = gpu(family);
            let weights = load_dir(&gpu, &fixture("tiny-qwen2"), Some(quant)).unwrap();
            assert_eq!(weights.label(), quant.name());
            let options = ModelOptions {
                max_rows: input.len(),
                max_full_rows: input.len(),
                ..ModelOptions::single(input.len() + 1)
            };
            let mut model = Model::new(gpu, weights, options).unwrap();
            let out = block(model.prefill(&[Sequence { slot: 0, tokens: &input }], LOGITS_ALL)).unwrap();
            let got: Vec<f32> = out.rows.iter().flat_map(|r| r.logits.clone()).collect();
            let what = format!("{} {family:?} prefill", quant.name());
            assert_close(&got, &want, 1e-4, 1e-4, &what);
            let next = block(model.decode(&[(0, 7)], Readout::LOGITS)).unwrap();
            assert_close(&next.rows[0].logits, &want_next, 1e-4, 1e-4, &format!("{} {family:?} decode", quant.name()));
        }
    }
}

/// The CPU reference quantizes whole blocks only, as the GPU does: the tiny model's rows of 64
/// values are no whole Q4_K block (256).
#[test]
fn the_cpu_reference_refuses_rows_of_partial_blocks() {
    let err = CpuModel::load(&fixture("tiny-qwen2")).unwrap().quantized(Quant::Q4_K).err().unwrap().to_string();
    assert!(err.contains("rows of hidden_size") && err.contains("multiple of 256 values, not 64"), "{err}");
}

#[test]
fn quantizing_a_stream_cut_anywhere_gives_the_same_weights() {
    // Pieces of 7 bytes split values, words and rows; the logits must not change.
    let dir = fixture("tiny-qwen2");
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let config = onetoken::Qwen2Config::load(&dir).unwrap();
    let input = [1u32, 5, 9, 200];
    let gpu = gpu(KernelFamily::Tiled);
    let logits = |weights| {
        let mut model = Model::new(gpu.clone(), weights, ModelOptions::single(input.len())).unwrap();
        block(model.prefill(&[Sequence { slot: 0, tokens: &input }], Readout::LOGITS)).unwrap().rows.remove(0).logits
    };
    let whole = logits(load_dir(&gpu, &dir, Some(Quant::Q4_0)).unwrap());
    let mut sink = CheckedSink::new(&config, GpuLoader::new(gpu.clone(), &config, Some(Quant::Q4_0)));
    let mut stream = SafetensorsStream::new("model.safetensors", Some(bytes.len() as u64));
    for piece in bytes.chunks(7) {
        stream.push(piece, &mut sink).unwrap();
    }
    stream.finish().unwrap();
    let pieces = logits(sink.finish().unwrap().finish().unwrap());
    assert_close(&pieces, &whole, 0.0, 0.0, "q4_0 streamed in 7-byte pieces");
}

#[test]
fn synthetic_0_5b_quantized_on_load_matches_the_cpu_reference() {
    let config = onetoken::Qwen2Config::qwen2_5_0_5b();
    let prompt = [9707u32, 11, 1879, 0, 785];
    let gpu = gpu(KernelFamily::Tiled);
    let bf16 = onetoken::ops::synthetic_weights(&gpu, &config, None).unwrap();
    let q8 = onetoken::ops::synthetic_weights(&gpu, &config, Some(Quant::Q8_0)).unwrap();
    // One decode step reads about half the bytes: 1 + 1/16 bytes per weight against 2.
    let ratio = q8.decode_bytes() as f64 / bf16.decode_bytes() as f64;
    assert!((0.53..0.54).contains(&ratio), "q8_0 / bf16 decode bytes {ratio}");
    drop(bf16);
    let mut model = Model::new(gpu, q8, ModelOptions::single(prompt.len())).unwrap();
    let got = block(model.prefill(&[Sequence { slot: 0, tokens: &prompt }], Readout::LOGITS)).unwrap();
    drop(model);
    let cpu = CpuModel::from_tensors(config.clone(), onetoken::synthetic::cpu_tensors(&config)).unwrap();
    let cpu = cpu.quantized(Quant::Q8_0).unwrap();
    let want = cpu.forward(&prompt, &mut CpuKvCache::new(&config), Logits::Last).unwrap().logits;
    assert_close(&got.rows[0].logits, &want, 1e-4, 1e-4, "synthetic 0.5B q8_0 logits");
}
