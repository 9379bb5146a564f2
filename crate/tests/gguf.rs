//! GGUF files as a model source: block types dequantized exactly as llama.cpp's gguf-py does
//! (fixtures/gguf_blocks.json), the tiny model's GGUF (written by gguf-py in a mix of types) on
//! the GPU equal to the CPU reference over the same blocks, a K-quant model likewise, the
//! stream cut anywhere, and each kind of broken file named by a specific error.

mod common;

use std::rc::Rc;

use common::gguf::*;
use common::*;
use onetoken::gguf::{BlockType, GgufStream};
use onetoken::gpu::{Gpu, GpuLoader, GpuOptions, GpuWeights, KernelFamily, load_gguf};
use onetoken::model::{Head, Model, ModelOptions, Positions, Readout, Sequence};
use onetoken::quant::WeightFormat;
use onetoken::reference::{CpuKvCache, CpuModel, F32Tensors, Logits};
use onetoken::weights::{CheckedSink, TensorType};
use onetoken::{Qwen2Config, gguf};

const LOGITS_ALL: Readout = Readout { positions: Positions::All, head: Head::Logits, hidden: false };

fn f32s(v: &serde_json::Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|b| f32::from_bits(b.as_u64().unwrap() as u32)).collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn block_type(name: &str) -> BlockType {
    [BlockType::Q8_0, BlockType::Q4_0, BlockType::Q5_0, BlockType::Q4_K, BlockType::Q6_K]
        .into_iter()
        .find(|b| b.name() == name)
        .unwrap()
}

#[test]
fn blocks_dequantize_exactly_as_gguf_py() {
    let fixture: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("gguf_blocks.json")).unwrap()).unwrap();
    let types = fixture["types"].as_array().unwrap();
    assert_eq!(types.len(), 5);
    for case in types {
        let ty = block_type(case["type"].as_str().unwrap());
        let mut got = Vec::new();
        ty.dequantize(&hex(case["hex"].as_str().unwrap()), &mut got);
        let want = f32s(&case["dequantized"]);
        assert_eq!(got.len(), 4 * ty.values());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "{}: value {i}: {g} vs gguf-py {w}", ty.name());
        }
    }
}

#[test]
fn blocks_convert_to_what_the_kernels_read() {
    // Every block type keeps its exact values on the GPU.
    let fixture: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("gguf_blocks.json")).unwrap()).unwrap();
    for case in fixture["types"].as_array().unwrap() {
        let ty = block_type(case["type"].as_str().unwrap());
        let (bytes, want) = (hex(case["hex"].as_str().unwrap()), f32s(&case["dequantized"]));
        let cols = ty.values() * 2; // two blocks a row, two rows
        let format = WeightFormat::for_stored(TensorType::Blocks(ty), None);
        let mut stored = Vec::new();
        format.convert_rows(TensorType::Blocks(ty), &bytes, cols, &mut stored);
        assert_eq!(stored.len(), 2 * format.row_bytes(cols), "{}", ty.name());
        let got = format.decode(&stored, cols);
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "{} value {i}: {a} vs gguf-py {b}", ty.name());
        }
    }
}

fn gpu(kernels: KernelFamily) -> Rc<Gpu> {
    Rc::new(Gpu::new_blocking(GpuOptions { kernels: Some(kernels), ..Default::default() }).unwrap())
}

/// A GGUF file's weights on the GPU (the files written here carry no tokenizer).
fn gpu_weights(gpu: &Rc<Gpu>, path: &std::path::Path) -> GpuWeights {
    let make = |_: &gguf::GgufHeader, config: &Qwen2Config| Ok(GpuLoader::new(gpu.clone(), config, None));
    gguf::read_file(path, Some(make)).unwrap().1.unwrap().finish().unwrap()
}

/// Logits at every position of `input`, then of one decode step of `next`, on the GPU.
fn gpu_logits(gpu: Rc<Gpu>, path: &std::path::Path, input: &[u32], next: u32) -> (Vec<f32>, Vec<f32>) {
    let weights = gpu_weights(&gpu, path);
    let options =
        ModelOptions { max_rows: input.len(), max_full_rows: input.len(), ..ModelOptions::single(input.len() + 1) };
    let mut model = Model::new(gpu, weights, options).unwrap();
    let out = pollster::block_on(model.prefill(&[Sequence { slot: 0, tokens: input }], LOGITS_ALL)).unwrap();
    let all = out.rows.iter().flat_map(|r| r.logits.clone()).collect();
    let step = pollster::block_on(model.decode(&[(0, next)], Readout::LOGITS)).unwrap();
    (all, step.rows[0].logits.clone())
}

fn cpu_logits(cpu: &CpuModel, input: &[u32], next: u32) -> (Vec<f32>, Vec<f32>) {
    let mut cache = CpuKvCache::new(&cpu.config);
    let all = cpu.forward(input, &mut cache, Logits::All).unwrap().logits;
    (all, cpu.forward(&[next], &mut cache, Logits::Last).unwrap().logits)
}

fn check_gpu_equals_cpu(path: &std::path::Path, input: &[u32], what: &str) {
    let want = cpu_logits(&CpuModel::load_gguf(path).unwrap(), input, 7);
    let spread = want.1.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(spread > 0.5, "{what}: logits up to {spread} would make the comparison weak");
    for family in [KernelFamily::Tiled, KernelFamily::Direct] {
        let got = gpu_logits(gpu(family), path, input, 7);
        assert_close(&got.0, &want.0, 1e-4, 1e-4, &format!("{what} {family:?} prefill"));
        assert_close(&got.1, &want.1, 1e-4, 1e-4, &format!("{what} {family:?} decode"));
    }
}

#[test]
fn tiny_gguf_reads_as_the_tiny_folder() {
    let header = gguf::read_header(&fixture("tiny-qwen2/model.gguf")).unwrap();
    let (got, want) = (header.config().unwrap(), Qwen2Config::load(&fixture("tiny-qwen2")).unwrap());
    let shape = |c: &Qwen2Config| {
        let sizes = [c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.vocab_size, c.max_position_embeddings];
        (
            sizes,
            c.num_attention_heads,
            c.num_key_value_heads,
            c.tie_word_embeddings,
            c.rope_theta,
            c.eos_token_id.clone(),
        )
    };
    assert_eq!(shape(&got), shape(&want));
    assert!((got.rms_norm_eps - want.rms_norm_eps).abs() < 1e-12);
    assert_eq!(header.quant_label(), "gguf:q8_0");
    // Every type of the mix is there, under HF names.
    let types: std::collections::BTreeSet<String> = header.tensors.iter().map(|t| t.ty.name()).collect();
    assert_eq!(types.into_iter().collect::<Vec<_>>(), ["BF16", "F16", "F32", "Q4_0", "Q5_0", "Q8_0"]);
    assert!(header.tensors.iter().any(|t| t.name == "model.layers.1.self_attn.v_proj.weight"));
}

#[test]
fn tiny_gguf_on_the_gpu_equals_the_cpu_reference_and_stays_near_the_bf16_model() {
    let input = ids(&tiny_ref()["input_ids"]);
    let path = fixture("tiny-qwen2/model.gguf");
    check_gpu_equals_cpu(&path, &input, "tiny gguf");
    // The same model unquantized: quantization moves the logits a little, no more (a wrong
    // tensor name or layout would move them far).
    let bf16 = cpu_logits(&CpuModel::load(&fixture("tiny-qwen2")).unwrap(), &input, 7).0;
    let quantized = cpu_logits(&CpuModel::load_gguf(&path).unwrap(), &input, 7).0;
    let norm = |v: &mut dyn Iterator<Item = f32>| v.map(|x| x * x).sum::<f32>().sqrt();
    let moved = norm(&mut bf16.iter().zip(&quantized).map(|(a, b)| a - b)) / norm(&mut bf16.iter().copied());
    let mut shuffled = bf16.clone();
    shuffled.rotate_left(1);
    let unrelated = norm(&mut bf16.iter().zip(&shuffled).map(|(a, b)| a - b)) / norm(&mut bf16.iter().copied());
    println!("relative change of the logits: quantized {moved:.3}, unrelated {unrelated:.3}");
    assert!(moved < 0.25 * unrelated, "quantized logits moved {moved} (unrelated ones: {unrelated})");
}

/// Random blocks with finite scales of `scale`: every quant pattern, values about `scale` x the
/// largest quant product.
fn random_blocks(ty: BlockType, blocks: usize, seed: u64, scale: f32) -> Vec<u8> {
    let noise = seeded(seed, blocks * ty.bytes(), 1.0);
    let mut bytes: Vec<u8> = noise.iter().map(|v| ((v + 1.0) * 127.9) as u8).collect();
    let scales: &[usize] = match ty {
        BlockType::Q4_K => &[0, 2],
        BlockType::Q6_K => &[208],
        _ => &[0],
    };
    for block in bytes.chunks_mut(ty.bytes()) {
        for &at in scales {
            block[at..at + 2].copy_from_slice(&half::f16::from_f32(scale).to_le_bytes());
        }
    }
    bytes
}

/// A one-layer model of K-quant matrices (rows of 256 values), with an untied Q5_0 head.
fn k_quant_model() -> GgufFile {
    let config = Qwen2Config {
        hidden_size: 256,
        intermediate_size: 512,
        num_hidden_layers: 1,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        vocab_size: 512,
        tie_word_embeddings: false,
        ..Qwen2Config::load(&fixture("tiny-qwen2")).unwrap()
    };
    let shapes: std::collections::HashMap<String, Vec<usize>> =
        onetoken::hf_names::expected_tensors(&config).into_iter().collect();
    let tensors = gguf_names(&config)
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let shape = &shapes[&onetoken::hf_names::from_gguf_name(&name).unwrap()];
            let dims: Vec<u64> = shape.iter().rev().map(|&d| d as u64).collect();
            let numel: usize = shape.iter().product();
            let (ty, bytes) = match shape.len() {
                1 if name.contains("norm") => (F32, seeded(i as u64, numel, 0.1).iter().map(|v| 1.0 + v).collect()),
                1 => (F32, seeded(i as u64, numel, 0.1)),
                _ => {
                    let (code, ty, scale) = match name.as_str() {
                        "output.weight" => (Q5_0, BlockType::Q5_0, 2e-3),
                        n if n.ends_with("ffn_down.weight") || n.ends_with("attn_output.weight") => {
                            (Q6_K, BlockType::Q6_K, 1e-5)
                        }
                        "token_embd.weight" => (Q6_K, BlockType::Q6_K, 1e-3),
                        _ => (Q4_K, BlockType::Q4_K, 3e-5),
                    };
                    let bytes = random_blocks(ty, numel / ty.values(), 100 + i as u64, scale);
                    return Tensor { name, dims, ty: code, bytes, offset: None };
                }
            };
            let bytes: Vec<f32> = bytes;
            Tensor { name, dims, ty, bytes: bytes.iter().flat_map(|v| v.to_le_bytes()).collect(), offset: None }
        })
        .collect();
    GgufFile::model(&config, tensors)
}

#[test]
fn k_quant_model_on_the_gpu_equals_the_cpu_reference() {
    let path = k_quant_model().write("k.gguf");
    let header = gguf::read_header(&path).unwrap();
    assert!(!header.config().unwrap().tie_word_embeddings, "output.weight unties the head");
    check_gpu_equals_cpu(&path, &[3, 77, 400, 12, 9], "k-quant gguf");
}

#[test]
fn a_stream_cut_anywhere_gives_the_same_tensors() {
    let path = fixture("tiny-qwen2/model.gguf");
    let bytes = std::fs::read(&path).unwrap();
    let whole = CpuModel::load_gguf(&path).unwrap();
    let want = cpu_logits(&whole, &[1, 5, 9], 7).0;
    for piece in [1, 7, 4093] {
        let mut stream = GgufStream::new("model.gguf", Some(bytes.len() as u64));
        let mut chunks = bytes.chunks(piece);
        for chunk in chunks.by_ref() {
            if stream.push_header(chunk).unwrap() {
                break;
            }
        }
        let config = stream.take_header().unwrap().config().unwrap();
        let mut sink = CheckedSink::new(&config, F32Tensors::default());
        stream.push(&[], &mut sink).unwrap();
        for chunk in chunks {
            stream.push(chunk, &mut sink).unwrap();
        }
        stream.finish().unwrap();
        let model = CpuModel::from_tensors(config, sink.finish().unwrap().0).unwrap();
        assert_close(&cpu_logits(&model, &[1, 5, 9], 7).0, &want, 0.0, 0.0, &format!("{piece}-byte pieces"));
    }
}

#[test]
fn a_written_gguf_of_the_tiny_folder_gives_its_exact_logits() {
    let path = GgufFile::tiny().write("tiny.gguf");
    let input = ids(&tiny_ref()["input_ids"]);
    let got = cpu_logits(&CpuModel::load_gguf(&path).unwrap(), &input, 7);
    let want = cpu_logits(&CpuModel::load(&fixture("tiny-qwen2")).unwrap(), &input, 7);
    assert_close(&got.0, &want.0, 0.0, 0.0, "bf16 gguf vs folder");
    let labelled = |path| load_gguf(&gpu(KernelFamily::Tiled), path, None).unwrap().0.label().to_string();
    assert_eq!(labelled(&fixture("tiny-qwen2/model.gguf")), "gguf:q8_0");
    let err = load_gguf(&gpu(KernelFamily::Tiled), &path, None).err().unwrap().to_string();
    assert_eq!(err, "GGUF metadata: no key tokenizer.ggml.model", "a GGUF file without a tokenizer");
}

/// The error loading `file` gives.
fn load_error(file: &GgufFile) -> String {
    load_bytes_error(&file.bytes())
}

fn load_bytes_error(bytes: &[u8]) -> String {
    let path = write_temp("bad.gguf", bytes);
    let err = CpuModel::load_gguf(&path).err().expect("must fail").to_string();
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    err
}

#[test]
fn bad_gguf_files_each_get_a_specific_error() {
    let tiny = GgufFile::tiny();
    let good = tiny.bytes();
    let with = |change: &dyn Fn(&mut GgufFile)| {
        let mut file = tiny.clone();
        change(&mut file);
        load_error(&file)
    };
    let mut rows: Vec<(&str, String, &str)> = vec![
        ("bad magic", with(&|f| f.magic = *b"GGML"), "not a GGUF file"),
        ("version 1", with(&|f| f.version = 1), "GGUF version 1 is not read"),
        ("cut in the header", load_bytes_error(&good[..200]), "truncated: the header runs past the end of the file"),
        ("cut in the data", load_bytes_error(&good[..good.len() - 4000]), "truncated: tensor"),
        ("empty file", load_bytes_error(&[]), "truncated: the header is incomplete"),
        ("offset past the end", with(&|f| f.tensor("blk.1.ffn_up.weight").offset = Some(1 << 30)), "ends at data byte"),
        (
            "misaligned offset",
            with(&|f| f.tensor("blk.1.ffn_up.weight").offset = Some(8)),
            "is not a multiple of the alignment 32",
        ),
        ("overlapping tensors", with(&|f| f.tensor("blk.1.ffn_up.weight").offset = Some(0)), "overlap"),
        (
            "unknown type",
            with(&|f| f.tensor("blk.0.ffn_up.weight").ty = 3),
            "tensor blk.0.ffn_up.weight: dtype Q4_1 is not supported (use F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K or Q6_K)",
        ),
        (
            "missing tensor",
            with(&|f| f.tensors.retain(|t| t.name != "blk.1.ffn_up.weight")),
            "missing tensor(s) for this config: model.layers.1.mlp.up_proj.weight",
        ),
        (
            "unknown tensor",
            with(&|f| f.tensor("blk.0.ffn_up.weight").name = "blk.0.ffn_upp.weight".into()),
            "unexpected tensor(s) not used by a Qwen2 model: blk.0.ffn_upp.weight",
        ),
        (
            "metadata against the shapes",
            with(&|f| f.set_meta("qwen2.feed_forward_length", Meta::U32(96))),
            "expected shape [96, 64], found [128, 64]",
        ),
        (
            "missing metadata",
            with(&|f| f.meta.retain(|(k, _)| k != "qwen2.block_count")),
            "GGUF metadata: no key qwen2.block_count",
        ),
        (
            "another architecture",
            with(&|f| f.set_meta("general.architecture", Meta::Str("llama".into()))),
            "GGUF metadata: general.architecture \"llama\" is not supported: onetoken runs Qwen2 and Qwen2.5 models",
        ),
        (
            "another architecture, of a type not read",
            with(&|f| {
                f.set_meta("general.architecture", Meta::Str("llama".into()));
                f.tensor("blk.0.ffn_up.weight").ty = 3;
            }),
            "GGUF metadata: general.architecture \"llama\" is not supported",
        ),
        (
            "metadata of the wrong type",
            with(&|f| f.set_meta("qwen2.block_count", Meta::Str("two".into()))),
            "GGUF metadata: qwen2.block_count is Str(\"two\"), not a count",
        ),
        (
            "alignment not a power of two",
            with(&|f| f.set_meta("general.alignment", Meta::U32(24))),
            "general.alignment 24 is not a power of two",
        ),
        (
            "signed alignment",
            with(&|f| f.set_meta("general.alignment", Meta::I32(32))),
            "general.alignment is Int(32), not an unsigned integer",
        ),
        (
            "rows not whole blocks",
            with(&|f| {
                let t = f.tensor("blk.0.ffn_up.weight");
                (t.ty, t.bytes) = (Q4_K, vec![0; 128 * 144 / 4]);
            }),
            "rows of 64 values are not whole Q4_K blocks",
        ),
    ];
    let mut impossible_length = good.clone();
    impossible_length[24..32].copy_from_slice(&u64::MAX.to_le_bytes()); // the first key's length
    rows.push((
        "impossible length",
        load_bytes_error(&impossible_length),
        "of 18446744073709551615 bytes is impossible",
    ));
    let mut many_tensors = good.clone();
    many_tensors[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    rows.push(("impossible count", load_bytes_error(&many_tensors), "tensor count 1099511627776 is impossible"));
    let mut huge = tiny.clone();
    huge.meta.push(("tokenizer.ggml.scores".into(), Meta::Bytes(vec![0; 5 << 20])));
    rows.push((
        "millions of metadata values",
        load_error(&huge),
        "metadata tokenizer.ggml.scores: more than 4194304 values in the header",
    ));
    let mut longer = good.clone();
    longer.extend([0; 64]);
    rows.push(("longer than its header says", load_bytes_error(&longer), "file is longer than its header says"));
    for (case, err, want) in &rows {
        println!("{case:32} {err}");
        assert!(err.contains(want), "{case}: {err:?} should say {want:?}");
        assert!(err.starts_with("model file bad.gguf") || !err.contains("model file"), "{case}: names the file: {err}");
    }
    // A matching --quant is accepted; any other is refused, naming the file's type.
    let header = gguf::read_header(&fixture("tiny-qwen2/model.gguf")).unwrap();
    let err = header.check_quant(Some(onetoken::quant::Quant::Q8_0)).unwrap_err().to_string();
    assert!(err.contains("--quant q8_0 does not match this GGUF file (q8_0)"), "{err}");
}

/// A GGUF file's tokenizer is built from its metadata: errors name that, not the files of a
/// model folder it never had.
#[test]
fn gguf_tokenizer_errors_name_the_metadata() {
    let mut header = gguf::read_header(&fixture("tiny-qwen2/model.gguf")).unwrap();
    let merges = vec![gguf::MetaValue::Str("zzzq qqqz".into())];
    let mut broken = header.clone();
    broken.metadata.insert("tokenizer.ggml.merges".into(), gguf::MetaValue::Array(merges));
    let err = gguf::tokenizer(&broken).err().unwrap().to_string();
    assert!(
        err.starts_with("tokenizer: the GGUF file's tokenizer.ggml.* metadata is not a Hugging Face tokenizer"),
        "{err}"
    );
    header.metadata.remove("tokenizer.chat_template");
    let tok = gguf::tokenizer(&header).unwrap();
    let err = tok.chat_prompt(None, "q", "").unwrap_err().to_string();
    assert_eq!(err, "chat template: the GGUF file's metadata has no chat_template");
}

/// A download without a length: a tensor placed at the very end of the u64 range is refused by
/// name when the header arrives, not found by an overflow once the data does.
#[test]
fn a_tensor_at_the_end_of_the_offsets_is_refused_without_a_length() {
    let mut file = GgufFile::tiny();
    // Aligned to 32, and however the header pads, its 256 bytes end within 32 of 2^64.
    file.tensor("output_norm.weight").offset = Some(u64::MAX - 287);
    let mut stream = GgufStream::new("model.gguf", None);
    let err = stream.push_header(&file.bytes()).unwrap_err().to_string();
    assert!(
        err.contains("tensor model.norm.weight ends at data byte") && err.contains("past what any file holds"),
        "{err}"
    );
}

#[test]
fn a_length_shorter_than_the_header_is_an_error_not_an_overflow() {
    // A download whose Content-Length is smaller than what arrives.
    let bytes = std::fs::read(fixture("tiny-qwen2/model.gguf")).unwrap();
    let mut stream = GgufStream::new("model.gguf", Some(100));
    let err = stream.push_header(&bytes).unwrap_err().to_string();
    assert!(err.contains("truncated: the header runs past the end of the file"), "{err}");
}
