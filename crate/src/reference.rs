//! The CPU oracle: a plain f32 Qwen2 forward with a KV cache, written for clarity and checked
//! against HF transformers' logits. Every GPU kernel and the GPU forward are tested against it.
//!
//! Shapes: activations are row-major `[tokens, width]`; weights keep HF's Linear layout
//! `[out, in]`, so `y = x @ W^T + b`.

use std::collections::HashMap;

use crate::choice::argmax;
use crate::config::Qwen2Config;
use crate::error::{Error, Result};
use crate::hf_names::{EMBED_TOKENS, LM_HEAD, LayerNames, LinearNames, NORM};
use crate::quant::Quant;
use crate::weights::{TensorInfo, TensorSink};

/// One decoder layer's weights, HF names.
pub struct CpuLayer {
    pub input_layernorm: Vec<f32>,          // [hidden]
    pub q_proj_weight: Vec<f32>,            // [hidden, hidden]
    pub q_proj_bias: Vec<f32>,              // [hidden]
    pub k_proj_weight: Vec<f32>,            // [kv_dim, hidden]
    pub k_proj_bias: Vec<f32>,              // [kv_dim]
    pub v_proj_weight: Vec<f32>,            // [kv_dim, hidden]
    pub v_proj_bias: Vec<f32>,              // [kv_dim]
    pub o_proj_weight: Vec<f32>,            // [hidden, hidden]
    pub post_attention_layernorm: Vec<f32>, // [hidden]
    pub gate_proj_weight: Vec<f32>,         // [intermediate, hidden]
    pub up_proj_weight: Vec<f32>,           // [intermediate, hidden]
    pub down_proj_weight: Vec<f32>,         // [hidden, intermediate]
}

/// A whole model in f32 on the CPU.
pub struct CpuModel {
    pub config: Qwen2Config,
    pub embed_tokens: Vec<f32>, // [vocab, hidden]
    pub layers: Vec<CpuLayer>,
    pub norm: Vec<f32>, // [hidden]
    /// `[vocab, hidden]`; `None` when tied to `embed_tokens`.
    pub lm_head: Option<Vec<f32>>,
}

/// Keys and values of every layer for the tokens seen so far.
pub struct CpuKvCache {
    pub k: Vec<Vec<f32>>, // per layer [len, kv_dim]
    pub v: Vec<Vec<f32>>, // per layer [len, kv_dim]
    pub len: usize,
}

impl CpuKvCache {
    pub fn new(config: &Qwen2Config) -> Self {
        let n = config.num_hidden_layers;
        Self { k: vec![Vec::new(); n], v: vec![Vec::new(); n], len: 0 }
    }
}

/// What one forward call returns.
pub struct CpuOutput {
    /// `[positions, vocab]`: every new position, or only the last (see [`CpuModel::forward`]).
    pub logits: Vec<f32>,
    /// L2 norm of the last position's hidden state after the embedding and after each layer;
    /// the last entry is taken after the final norm, as HF's `output_hidden_states` reports.
    pub hidden_norms: Vec<f32>,
    /// Last position's hidden-state norm before the final norm.
    pub pre_norm: f32,
    /// Last position's final hidden state (after `model.norm`): `[hidden]`.
    pub last_hidden: Vec<f32>,
}

/// Which positions get logits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    All,
    Last,
}

impl CpuModel {
    /// Builds a model from f32 tensors keyed by HF name (see [`F32Tensors`]).
    pub fn from_tensors(config: Qwen2Config, mut t: HashMap<String, Vec<f32>>) -> Result<Self> {
        let mut take = |name: &str| t.remove(name).ok_or_else(|| Error::MissingTensors(vec![name.into()]));
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for l in 0..config.num_hidden_layers {
            let n = LayerNames::new(l);
            let mut bias = |linear: &LinearNames| take(linear.bias.as_deref().unwrap_or_default());
            let (q_proj_bias, k_proj_bias, v_proj_bias) = (bias(&n.q_proj)?, bias(&n.k_proj)?, bias(&n.v_proj)?);
            layers.push(CpuLayer {
                input_layernorm: take(&n.input_layernorm)?,
                q_proj_weight: take(&n.q_proj.weight)?,
                q_proj_bias,
                k_proj_weight: take(&n.k_proj.weight)?,
                k_proj_bias,
                v_proj_weight: take(&n.v_proj.weight)?,
                v_proj_bias,
                o_proj_weight: take(&n.o_proj.weight)?,
                post_attention_layernorm: take(&n.post_attention_layernorm)?,
                gate_proj_weight: take(&n.gate_proj.weight)?,
                up_proj_weight: take(&n.up_proj.weight)?,
                down_proj_weight: take(&n.down_proj.weight)?,
            });
        }
        let embed_tokens = take(EMBED_TOKENS)?;
        let norm = take(NORM)?;
        let lm_head = if config.tie_word_embeddings { None } else { Some(take(LM_HEAD)?) };
        Ok(Self { config, embed_tokens, layers, norm, lm_head })
    }

    /// The same model with every matrix quantized and read back, as the GPU sees it after
    /// quantize-on-load: the oracle for quantized forwards. Rows must be whole blocks, as there.
    pub fn quantized(mut self, quant: Quant) -> Result<Self> {
        let (h, i) = (self.config.hidden_size, self.config.intermediate_size);
        quant.check_cols("rows of hidden_size", h)?;
        quant.check_cols("down_proj's rows (intermediate_size)", i)?;
        let round = |m: &mut Vec<f32>, cols: usize| *m = quant.round(m, cols);
        round(&mut self.embed_tokens, h);
        if let Some(head) = &mut self.lm_head {
            round(head, h);
        }
        for l in &mut self.layers {
            for m in [&mut l.q_proj_weight, &mut l.k_proj_weight, &mut l.v_proj_weight, &mut l.o_proj_weight] {
                round(m, h);
            }
            round(&mut l.gate_proj_weight, h);
            round(&mut l.up_proj_weight, h);
            round(&mut l.down_proj_weight, i);
        }
        Ok(self)
    }

    /// Reads a model folder (config.json + safetensors, sharded or not) into f32.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(dir: &std::path::Path) -> Result<Self> {
        let config = Qwen2Config::load(dir)?;
        let tensors = crate::weights::read_model_dir(dir, &config, F32Tensors::default())?;
        Self::from_tensors(config, tensors.0)
    }

    /// Reads a GGUF file into f32, each matrix as the GPU keeps it.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_gguf(path: &std::path::Path) -> Result<Self> {
        let make = |_: &crate::gguf::GgufHeader, _: &Qwen2Config| Ok(F32Tensors::default());
        let (header, tensors) = crate::gguf::read_file(path, Some(make))?;
        Self::from_tensors(header.config()?, tensors.expect("a sink was given").0)
    }

    /// Runs `ids` after what `cache` already holds, appending their keys and values.
    pub fn forward(&self, ids: &[u32], cache: &mut CpuKvCache, logits: Logits) -> Result<CpuOutput> {
        let c = &self.config;
        let (h, n) = (c.hidden_size, ids.len());
        if n == 0 {
            return Err(Error::Input("no tokens to run".into()));
        }
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= c.vocab_size) {
            return Err(Error::Input(format!("token id {bad} is outside the vocabulary ({})", c.vocab_size)));
        }
        let norm_of_last = |x: &[f32]| l2(&x[(n - 1) * h..]);

        // embed_tokens: gather one row per token.
        let mut x: Vec<f32> =
            ids.iter().flat_map(|&id| &self.embed_tokens[id as usize * h..(id as usize + 1) * h]).copied().collect();
        let mut hidden_norms = vec![norm_of_last(&x)];

        for (l, layer) in self.layers.iter().enumerate() {
            // Attention block: x += o_proj(attn(rope(q), rope(k), v)).
            let normed = rms_norm(&x, &layer.input_layernorm, c.rms_norm_eps);
            let mut q = linear(&normed, &layer.q_proj_weight, Some(&layer.q_proj_bias), h);
            let mut k = linear(&normed, &layer.k_proj_weight, Some(&layer.k_proj_bias), h);
            let v = linear(&normed, &layer.v_proj_weight, Some(&layer.v_proj_bias), h);
            rope(&mut q, h, c.head_dim(), cache.len, c.rope_theta);
            rope(&mut k, c.kv_dim(), c.head_dim(), cache.len, c.rope_theta);
            cache.k[l].extend_from_slice(&k);
            cache.v[l].extend_from_slice(&v);
            let attn = attention(&q, &cache.k[l], &cache.v[l], c, cache.len);
            add(&mut x, &linear(&attn, &layer.o_proj_weight, None, h));

            // MLP block: x += down_proj(silu(gate_proj(x)) * up_proj(x)).
            let normed = rms_norm(&x, &layer.post_attention_layernorm, c.rms_norm_eps);
            let gate = linear(&normed, &layer.gate_proj_weight, None, h);
            let up = linear(&normed, &layer.up_proj_weight, None, h);
            let act: Vec<f32> = gate.iter().zip(&up).map(|(&g, &u)| silu(g) * u).collect();
            add(&mut x, &linear(&act, &layer.down_proj_weight, None, c.intermediate_size));
            hidden_norms.push(norm_of_last(&x));
        }
        cache.len += n;

        let pre_norm = hidden_norms.pop().expect("one norm per layer");
        let x = rms_norm(&x, &self.norm, c.rms_norm_eps);
        let last_hidden = x[(n - 1) * h..].to_vec();
        hidden_norms.push(l2(&last_hidden));
        let head = self.lm_head.as_deref().unwrap_or(&self.embed_tokens);
        let rows = if logits == Logits::All { &x[..] } else { &last_hidden[..] };
        let logits = linear(rows, head, None, h);
        Ok(CpuOutput { logits, hidden_norms, pre_norm, last_hidden })
    }

    /// Greedy generation with the KV cache: feeds `prompt`, then each argmax, `steps` times.
    pub fn greedy(&self, prompt: &[u32], steps: usize) -> Result<Vec<u32>> {
        let mut cache = CpuKvCache::new(&self.config);
        let mut out = Vec::with_capacity(steps);
        let mut next = argmax(&self.forward(prompt, &mut cache, Logits::Last)?.logits) as u32;
        for step in 0..steps {
            out.push(next);
            if step + 1 < steps {
                next = argmax(&self.forward(&[next], &mut cache, Logits::Last)?.logits) as u32;
            }
        }
        Ok(out)
    }
}

/// `y[m, n] = x[m, :] . w[n, :] + b[n]` for `x: [M, k]`, `w: [N, k]`.
pub fn linear(x: &[f32], w: &[f32], bias: Option<&[f32]>, k: usize) -> Vec<f32> {
    let (m, n) = (x.len() / k, w.len() / k);
    let mut y = vec![0.0; m * n];
    // Weight row outer, token inner: each weight row is read from memory once for all tokens.
    for (j, row) in w.chunks_exact(k).enumerate() {
        let b = bias.map_or(0.0, |b| b[j]);
        for (i, xi) in x.chunks_exact(k).enumerate() {
            y[i * n + j] = dot(xi, row) + b;
        }
    }
    y
}

/// Dot product with eight independent partial sums, so the compiler can vectorise it.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ac.remainder().iter().zip(bc.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ac.zip(bc) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// RMSNorm over rows of `weight.len()`: `x / sqrt(mean(x^2) + eps) * weight`.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f64) -> Vec<f32> {
    let h = weight.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(h) {
        let mean_sq = row.iter().map(|v| v * v).sum::<f32>() / h as f32;
        let scale = 1.0 / (mean_sq + eps as f32).sqrt();
        out.extend(row.iter().zip(weight).map(|(v, w)| v * scale * w));
    }
    out
}

/// HF's rotate-half RoPE in place over `x: [tokens, width]`, `width = heads * head_dim`; token i
/// sits at position `start + i`. Angles are computed in f32, as HF does.
pub fn rope(x: &mut [f32], width: usize, head_dim: usize, start: usize, theta: f64) {
    let half = head_dim / 2;
    let inv_freq = crate::config::rope_inv_freq(head_dim, theta);
    for (t, token) in x.chunks_exact_mut(width).enumerate() {
        let pos = (start + t) as f32;
        for head in token.chunks_exact_mut(head_dim) {
            for i in 0..half {
                let (sin, cos) = (pos * inv_freq[i]).sin_cos();
                let (a, b) = (head[i], head[i + half]);
                head[i] = a * cos - b * sin;
                head[i + half] = b * cos + a * sin;
            }
        }
    }
}

/// Causal grouped-query attention of new queries `q: [n, heads * head_dim]` (positions
/// `start..start + n`) over the cache `k, v: [start + n, kv_heads * head_dim]`.
pub fn attention(q: &[f32], k: &[f32], v: &[f32], c: &Qwen2Config, start: usize) -> Vec<f32> {
    let (d, width, kv_width) = (c.head_dim(), c.hidden_size, c.kv_dim());
    let scale = 1.0 / (d as f32).sqrt();
    let mut out = vec![0.0; q.len()];
    for (t, (q_row, out_row)) in q.chunks_exact(width).zip(out.chunks_exact_mut(width)).enumerate() {
        let seen = start + t + 1; // causal: this token sees itself and everything before it
        for head in 0..c.num_attention_heads {
            let kv = (head / c.kv_groups()) * d;
            let qh = &q_row[head * d..(head + 1) * d];
            let scores: Vec<f32> = (0..seen).map(|j| dot(qh, &k[j * kv_width + kv..][..d]) * scale).collect();
            let probs = softmax(&scores);
            let oh = &mut out_row[head * d..(head + 1) * d];
            for (j, p) in probs.iter().enumerate() {
                for (o, val) in oh.iter_mut().zip(&v[j * kv_width + kv..][..d]) {
                    *o += p * val;
                }
            }
        }
    }
    out
}

pub fn softmax(x: &[f32]) -> Vec<f32> {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = x.iter().map(|v| (v - max).exp()).collect();
    let sum: f32 = e.iter().sum();
    e.into_iter().map(|v| v / sum).collect()
}

pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

fn add(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

fn l2(x: &[f32]) -> f32 {
    x.iter().map(|v| v * v).sum::<f32>().sqrt()
}

/// A [`TensorSink`] that widens every tensor to f32, keyed by HF name: floats as stored, GGUF
/// blocks dequantized as ggml does. The GPU keeps every block type as it is
/// ([`crate::quant::WeightFormat::for_stored`], bit-equal: `tests/gguf.rs`), so the CPU computes
/// with exactly the GPU's weights. A tensor's bytes are gathered until it is complete (chunks
/// may split a value or a block), then widened.
#[derive(Default)]
pub struct F32Tensors(pub HashMap<String, Vec<f32>>, Vec<u8>);

impl TensorSink for F32Tensors {
    fn header(&mut self, _file: &str, _tensors: &[TensorInfo]) -> Result<()> {
        Ok(())
    }

    fn piece(&mut self, t: &TensorInfo, offset: u64, bytes: &[u8]) -> Result<()> {
        if offset == 0 {
            self.1.clear();
        }
        self.1.extend_from_slice(bytes);
        if offset + bytes.len() as u64 == t.byte_len() {
            let mut values = Vec::with_capacity(t.numel());
            t.ty.to_f32(&std::mem::take(&mut self.1), &mut values);
            self.0.insert(t.name.clone(), values);
        }
        Ok(())
    }
}
