//! A small GGUF writer for tests: whole files from parts, so each bad-file case changes one
//! part. (The fixture GGUFs are written by llama.cpp's gguf-py; this one exists to break
//! files on purpose and to make K-quant models of any shape.)

use std::collections::HashMap;

use onetoken::Qwen2Config;
use onetoken::hf_names::{expected_tensors, from_gguf_name};
use onetoken::reference::F32Tensors;
use onetoken::weights::Dtype;

/// GGUF's `ggml_type` numbers used here.
pub const F32: u32 = 0;
pub const BF16: u32 = 30;
pub const Q4_0: u32 = 2;
pub const Q5_0: u32 = 6;
pub const Q8_0: u32 = 8;
pub const Q4_K: u32 = 12;
pub const Q6_K: u32 = 14;

/// A metadata value.
#[derive(Clone)]
pub enum Meta {
    U32(u32),
    I32(i32),
    F32(f32),
    Str(String),
    /// An array of u8 values.
    Bytes(Vec<u8>),
}

#[derive(Clone)]
pub struct Tensor {
    pub name: String,
    /// ggml order: innermost (columns) first.
    pub dims: Vec<u64>,
    pub ty: u32,
    pub bytes: Vec<u8>,
    /// Written instead of the real data offset.
    pub offset: Option<u64>,
}

#[derive(Clone)]
pub struct GgufFile {
    pub magic: [u8; 4],
    pub version: u32,
    pub meta: Vec<(String, Meta)>,
    pub tensors: Vec<Tensor>,
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// GGUF names of a Qwen2 model's tensors (the head only when untied).
pub fn gguf_names(c: &Qwen2Config) -> Vec<String> {
    let mut names = vec!["token_embd.weight".to_string(), "output_norm.weight".into()];
    if !c.tie_word_embeddings {
        names.push("output.weight".into());
    }
    for l in 0..c.num_hidden_layers {
        for part in [
            "attn_norm.weight",
            "attn_q.weight",
            "attn_q.bias",
            "attn_k.weight",
            "attn_k.bias",
            "attn_v.weight",
            "attn_v.bias",
            "attn_output.weight",
            "ffn_norm.weight",
            "ffn_gate.weight",
            "ffn_up.weight",
            "ffn_down.weight",
        ] {
            names.push(format!("blk.{l}.{part}"));
        }
    }
    names
}

/// The `qwen2.*` metadata of a config.
pub fn qwen2_meta(c: &Qwen2Config) -> Vec<(String, Meta)> {
    let u = |k: &str, v: usize| (format!("qwen2.{k}"), Meta::U32(v as u32));
    vec![
        ("general.architecture".into(), Meta::Str("qwen2".into())),
        u("block_count", c.num_hidden_layers),
        u("context_length", c.max_position_embeddings),
        u("embedding_length", c.hidden_size),
        u("feed_forward_length", c.intermediate_size),
        u("attention.head_count", c.num_attention_heads),
        u("attention.head_count_kv", c.num_key_value_heads),
        ("qwen2.rope.freq_base".into(), Meta::F32(c.rope_theta as f32)),
        ("qwen2.attention.layer_norm_rms_epsilon".into(), Meta::F32(c.rms_norm_eps as f32)),
    ]
}

impl GgufFile {
    /// A model from its config and tensors (by GGUF name).
    pub fn model(config: &Qwen2Config, tensors: Vec<Tensor>) -> Self {
        Self { magic: *b"GGUF", version: 3, meta: qwen2_meta(config), tensors }
    }

    /// The tiny fixture model: matrices in BF16 (its own values), vectors in F32.
    pub fn tiny() -> Self {
        let dir = super::fixture("tiny-qwen2");
        let config = Qwen2Config::load(&dir).unwrap();
        let values: HashMap<String, Vec<f32>> =
            onetoken::weights::read_model_dir(&dir, &config, F32Tensors::default()).unwrap().0;
        let shapes: HashMap<String, Vec<usize>> = expected_tensors(&config).into_iter().collect();
        let tensors = gguf_names(&config)
            .into_iter()
            .map(|name| {
                let hf = from_gguf_name(&name).unwrap();
                let shape = &shapes[&hf];
                let (ty, dtype) = if shape.len() == 2 { (BF16, Dtype::BF16) } else { (F32, Dtype::F32) };
                let dims = shape.iter().rev().map(|&d| d as u64).collect();
                Tensor { name, dims, ty, bytes: dtype.from_f32(&values[&hf]), offset: None }
            })
            .collect();
        Self::model(&config, tensors)
    }

    pub fn tensor(&mut self, name: &str) -> &mut Tensor {
        self.tensors.iter_mut().find(|t| t.name == name).unwrap()
    }

    pub fn set_meta(&mut self, key: &str, value: Meta) {
        self.meta.retain(|(k, _)| k != key);
        self.meta.push((key.into(), value));
    }

    pub fn bytes(&self) -> Vec<u8> {
        let mut out = self.magic.to_vec();
        out.extend(self.version.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((self.meta.len() as u64).to_le_bytes());
        for (key, value) in &self.meta {
            string(&mut out, key);
            match value {
                Meta::U32(v) => {
                    out.extend(4u32.to_le_bytes());
                    out.extend(v.to_le_bytes());
                }
                Meta::I32(v) => {
                    out.extend(5u32.to_le_bytes());
                    out.extend(v.to_le_bytes());
                }
                Meta::F32(v) => {
                    out.extend(6u32.to_le_bytes());
                    out.extend(v.to_le_bytes());
                }
                Meta::Str(s) => {
                    out.extend(8u32.to_le_bytes());
                    string(&mut out, s);
                }
                Meta::Bytes(b) => {
                    out.extend(9u32.to_le_bytes());
                    out.extend(0u32.to_le_bytes());
                    out.extend((b.len() as u64).to_le_bytes());
                    out.extend(b);
                }
            }
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            string(&mut out, &t.name);
            out.extend((t.dims.len() as u32).to_le_bytes());
            t.dims.iter().for_each(|d| out.extend(d.to_le_bytes()));
            out.extend(t.ty.to_le_bytes());
            out.extend(t.offset.unwrap_or(offset).to_le_bytes());
            offset += (t.bytes.len() as u64).next_multiple_of(32);
        }
        out.resize(out.len().next_multiple_of(32), 0);
        for t in &self.tensors {
            out.extend(&t.bytes);
            out.resize(out.len().next_multiple_of(32), 0);
        }
        out
    }

    /// Writes the file to a fresh temporary path.
    pub fn write(&self, name: &str) -> std::path::PathBuf {
        write_temp(name, &self.bytes())
    }
}

/// Writes `bytes` to a fresh temporary file named `name`.
pub fn write_temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("onetoken-gguf-{}-{}", std::process::id(), super::unique_id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}
