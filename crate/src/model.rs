//! The Qwen2 forward pass on the GPU, top to bottom, with HF names.
//!
//! One call runs a batch: any number of sequences, each appending its new tokens to its own KV
//! slot. All tokens of all sequences form one `[M, hidden]` activation; linear layers run as a
//! tiled matmul (prefill) or, for M <= 32, as a matvec that streams each weight once (decode,
//! short prefills); see [`crate::ops::Linear`]. On CPU-like devices one barrier-free kernel
//! serves both. The whole forward is one command encoder and one submit; only what the caller
//! asks for is read back: argmax ids, k choice logits, or (for tests and diagnostics) full
//! logit rows.
//! Buffers, pipelines and bind groups are made once, in [`Model::new`].

use std::rc::Rc;

use crate::clock::now_ms;
use crate::config::Qwen2Config;
use crate::error::{Error, Result};
use crate::gpu::{DispatchRecord, Dispatcher, Gpu, GpuWeights, PassTimer, Profiler, read_buffer, read_buffer_timed};
use crate::kv_cache::KvCache;
use crate::ops::{
    AttendedKeys, Attention, AttentionBuffers, AttentionDims, Embedding, GatherRows, KvWrite, Linear, LinearBuffers,
    LmHeadRows, RmsNorm, SiluMul, TOP_K_MAX, TopK,
};

/// Sizes fixed when the model is set up.
#[derive(Debug, Clone, Copy)]
pub struct ModelOptions {
    /// Most tokens in one forward call (all sequences together).
    pub max_tokens: usize,
    /// Sequences the KV cache holds at once.
    pub kv_slots: usize,
    /// Tokens per sequence in the KV cache (prompt + generated).
    pub kv_capacity: usize,
    /// Most rows read out per call (usually one per sequence).
    pub max_rows: usize,
    /// Most vocabulary ids for a choice-rows head.
    pub max_choice_ids: usize,
}

impl Default for ModelOptions {
    fn default() -> Self {
        Self { max_tokens: 1024, kv_slots: 8, kv_capacity: 1024, max_rows: 64, max_choice_ids: 256 }
    }
}

/// New tokens for one KV slot.
#[derive(Debug, Clone, Copy)]
pub struct Sequence<'a> {
    pub slot: usize,
    pub tokens: &'a [u32],
}

/// Which positions are read out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// The last new token of each sequence.
    Last,
    /// Every new token (tests and diagnostics).
    All,
}

/// What the LM head computes for the read-out rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head<'a> {
    /// The full vocabulary (what a generation engine computes every step). The GPU finds the
    /// `top_k` best (id, logit) pairs (1 = greedy) and the logsumexp; the logits of `ids`
    /// (may be empty) are read back too. Nothing else leaves the GPU.
    Full { top_k: usize, ids: &'a [u32] },
    /// Only these vocabulary rows (strategy B's choice head): k logits per row.
    Rows(&'a [u32]),
    /// Full vocabulary, read back whole (tests and the `logits` command; never per step).
    Logits,
}

/// What one forward call computes and reads back.
#[derive(Debug, Clone, Copy)]
pub struct Readout<'a> {
    pub rows: Rows,
    pub head: Head<'a>,
    /// Also read back each row's final hidden state (after `model.norm`).
    pub hidden: bool,
}

impl<'a> Readout<'a> {
    /// Vocabulary ids whose logits are read out.
    pub fn ids(&self) -> &'a [u32] {
        match self.head {
            Head::Full { ids, .. } | Head::Rows(ids) => ids,
            Head::Logits => &[],
        }
    }

    /// Greedy: the best id and its logit for each sequence's last token.
    pub const ARGMAX: Readout<'static> =
        Readout { rows: Rows::Last, head: Head::Full { top_k: 1, ids: &[] }, hidden: false };
}

/// Per read-out row.
#[derive(Debug, Clone, Default)]
pub struct RowOut {
    /// The best `(id, logit)` pairs, best first ([`Head::Full`]: top_k of them; [`Head::Logits`]: 1).
    pub top: Vec<(u32, f32)>,
    /// log of the sum of exp(logits) over the vocabulary (full heads only): log-probability of
    /// a token = its logit - this.
    pub logsumexp: Option<f32>,
    /// Logits of the requested ids ([`Head::Full`], [`Head::Rows`]) or of the whole vocabulary
    /// ([`Head::Logits`]).
    pub logits: Vec<f32>,
    /// Final hidden state, `[hidden]`, when asked for.
    pub hidden: Vec<f32>,
}

/// Timings of one forward call, in milliseconds.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ForwardTiming {
    /// Wall time from encoding to results on the CPU (submit + GPU work + readback).
    pub wall_ms: f64,
    /// Part of `wall_ms` spent copying results out of the mapped staging buffer.
    pub readback_ms: f64,
    /// GPU time of the layers (embedding to last layer) and of the head (final norm, LM head,
    /// argmax), from timestamp queries; `None` where the device has no `timestamp-query`.
    pub gpu_layers_ms: Option<f64>,
    pub gpu_head_ms: Option<f64>,
}

pub struct ForwardOut {
    pub rows: Vec<RowOut>,
    pub timing: ForwardTiming,
    /// Profile mode only: every dispatch in order, with its GPU time in milliseconds.
    pub profile: Vec<(DispatchRecord, f64)>,
}

/// Kernels of one decoder layer, bound to its weights and the shared scratch buffers.
struct LayerOps {
    input_layernorm: RmsNorm,
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    kv_write: KvWrite,
    attention: Attention,
    o_proj: Linear,
    post_attention_layernorm: RmsNorm,
    gate_proj: Linear,
    up_proj: Linear,
    silu_mul: SiluMul,
    down_proj: Linear,
}

/// Activations and per-call inputs, sized for [`ModelOptions`].
struct Scratch {
    tokens: wgpu::Buffer,        // uniform: M
    rows: wgpu::Buffer,          // uniform: R
    ids: wgpu::Buffer,           // [M] u32
    meta: wgpu::Buffer,          // [M] (cache row base, position)
    which: wgpu::Buffer,         // [R] token index of each read-out row
    choice_ids: wgpu::Buffer,    // [k] u32
    logits: wgpu::Buffer,        // [R, vocab]
    best: wgpu::Buffer,          // [R, 1 + TOP_K_MAX] (logsumexp, top pairs)
    choice_logits: wgpu::Buffer, // [R, k]
    head_normed: wgpu::Buffer,   // [R, hidden]
    staging: wgpu::Buffer,       // best + choice logits + hidden + timestamps
    timer: Option<PassTimer>,    // GPU time of the two passes: layers, head
}

pub struct Model {
    pub config: Qwen2Config,
    pub gpu: Rc<Gpu>,
    pub weights: Rc<GpuWeights>,
    pub kv: KvCache,
    pub options: ModelOptions,
    scratch: Scratch,
    embed_tokens: Embedding,
    layers: Vec<LayerOps>,
    head: HeadOps,
    /// Per-dispatch GPU times, when profiling ([`Model::set_profiling`]).
    profiler: Option<Profiler>,
}

/// Kernels of the head: the read-out rows' final norm, and the full or choice-rows LM head.
struct HeadOps {
    gather_rows: GatherRows,
    norm: RmsNorm,
    lm_head: Linear,
    top_k: TopK,
    lm_head_rows: LmHeadRows,
}

impl Model {
    /// Sets up buffers, kernels and bind groups for `weights` at these sizes (weights can be
    /// shared by several set-ups: [`Model::resized`]).
    pub fn new(gpu: Rc<Gpu>, weights: impl Into<Rc<GpuWeights>>, options: ModelOptions) -> Result<Self> {
        let weights = weights.into();
        let c = weights.config.clone();
        let o = options;
        if o.max_tokens == 0 || o.max_rows == 0 || o.max_choice_ids == 0 {
            return Err(Error::Input("model options must all be positive".into()));
        }
        let (h, kv, i, v) = (c.hidden_size, c.kv_dim(), c.intermediate_size, c.vocab_size);
        let f32s = |n: usize| (n * 4) as u64;
        for (what, bytes) in
            [("the MLP activations", f32s(o.max_tokens * i)), ("the full-vocabulary logits", f32s(o.max_rows * v))]
        {
            gpu.check_binding(what, bytes)?;
        }
        let kv_cache = KvCache::new(&gpu, &c, o.kv_slots, o.kv_capacity)?;
        let g = &*gpu;
        let act = |name: &str, width: usize| g.storage(name, f32s(o.max_tokens * width));
        let (x, normed, q, k, vv, attn, gate, up) = (
            act("x", h),
            act("normed", h),
            act("q", h),
            act("k", kv),
            act("v", kv),
            act("attn", h),
            act("gate", i),
            act("up", i),
        );
        let head_x = g.storage("head_x", f32s(o.max_rows * h));
        let s = Scratch {
            tokens: g.uniform("tokens", &[0u32; 4]),
            rows: g.uniform("rows", &[0u32; 4]),
            ids: g.storage("ids", f32s(o.max_tokens)),
            meta: g.storage("meta", f32s(2 * o.max_tokens)),
            which: g.storage("which", f32s(o.max_rows)),
            choice_ids: g.storage("choice_ids", f32s(o.max_choice_ids)),
            logits: g.storage("logits", f32s(o.max_rows * v)),
            best: g.storage("best", f32s(2 * o.max_rows * (1 + TOP_K_MAX))),
            choice_logits: g.storage("choice_logits", f32s(o.max_rows * o.max_choice_ids)),
            head_normed: g.storage("head_normed", f32s(o.max_rows * h)),
            staging: g.staging("readout", f32s(o.max_rows * (2 * (1 + TOP_K_MAX) + o.max_choice_ids + h)) + 40),
            timer: PassTimer::new(g, 2),
        };
        let inv_freq = g.storage_from("inv_freq", &c.rope_inv_freq());
        let dims = AttentionDims {
            heads: c.num_attention_heads,
            kv_heads: c.num_key_value_heads,
            head_dim: c.head_dim(),
            capacity: o.kv_capacity,
        };
        let attention_partial = g.storage("attention partial", dims.partial_bytes());
        let eps = c.rms_norm_eps;
        let layers: Vec<LayerOps> = weights
            .layers
            .iter()
            .zip(kv_cache.k.iter().zip(&kv_cache.v))
            .map(|(w, (k_cache, v_cache))| {
                let lin = |x: &wgpu::Buffer, l: &crate::gpu::GpuLinear, y: &wgpu::Buffer, accumulate: bool| {
                    let io = LinearBuffers { tokens: &s.tokens, x, bias: l.bias.as_ref(), y, out_cols: l.weight.rows };
                    Linear::new(g, &l.weight, io, accumulate)
                };
                let attention = AttentionBuffers {
                    meta: &s.meta,
                    q: &q,
                    k_cache,
                    v_cache,
                    out: &attn,
                    partial: &attention_partial,
                    inv_freq: &inv_freq,
                };
                Ok(LayerOps {
                    input_layernorm: RmsNorm::new(g, &x, &w.input_layernorm, &normed, h, eps),
                    q_proj: lin(&normed, &w.q_proj, &q, false),
                    k_proj: lin(&normed, &w.k_proj, &k, false),
                    v_proj: lin(&normed, &w.v_proj, &vv, false),
                    kv_write: KvWrite::new(g, &s.meta, &inv_freq, (&k, &vv), (k_cache, v_cache), (kv, c.head_dim())),
                    attention: Attention::new(g, attention, dims)?,
                    o_proj: lin(&attn, &w.o_proj, &x, true),
                    post_attention_layernorm: RmsNorm::new(g, &x, &w.post_attention_layernorm, &normed, h, eps),
                    gate_proj: lin(&normed, &w.gate_proj, &gate, false),
                    up_proj: lin(&normed, &w.up_proj, &up, false),
                    silu_mul: SiluMul::new(g, &gate, &up, i),
                    down_proj: lin(&gate, &w.down_proj, &x, true),
                })
            })
            .collect::<Result<_>>()?;
        let head = weights.head();
        let head_io = LinearBuffers { tokens: &s.rows, x: &s.head_normed, bias: None, y: &s.logits, out_cols: v };
        let model = Self {
            embed_tokens: Embedding::new(g, &s.ids, &weights.embed_tokens, &x),
            head: HeadOps {
                gather_rows: GatherRows::new(g, &s.which, &x, &head_x, h),
                norm: RmsNorm::new(g, &head_x, &weights.norm, &s.head_normed, h, eps),
                lm_head: Linear::new(g, head, head_io, false),
                top_k: TopK::new(g, &s.rows, &s.logits, &s.best, v),
                lm_head_rows: LmHeadRows::new(g, &s.choice_ids, &s.head_normed, head, &s.choice_logits),
            },
            profiler: None,
            layers,
            scratch: s,
            config: c,
            kv: kv_cache,
            options: o,
            weights,
            gpu,
        };
        model.gpu.check()?;
        Ok(model)
    }

    /// Profile mode: every later forward times each dispatch on its own (one compute pass
    /// each) and returns them in [`ForwardOut::profile`]. Off by default, and free when off.
    /// Needs `timestamp-query`.
    pub fn set_profiling(&mut self, on: bool) -> Result<()> {
        self.profiler = match (on, self.profiler.take()) {
            (false, _) => None,
            (true, Some(p)) => Some(p),
            (true, None) => Some(Profiler::new(&self.gpu).ok_or_else(|| {
                Error::Gpu("profiling needs GPU timestamps (timestamp-query), which this device lacks".into())
            })?),
        };
        Ok(())
    }

    /// The same weights set up for other sizes (a new KV cache and activations).
    pub fn resized(&self, options: ModelOptions) -> Result<Self> {
        Self::new(self.gpu.clone(), self.weights.clone(), options)
    }

    /// Prefill: runs token sequences (of any lengths) through the model in one pass.
    pub async fn prefill(&mut self, batch: &[Sequence<'_>], readout: Readout<'_>) -> Result<ForwardOut> {
        self.forward(batch, readout).await
    }

    /// Decode: one new token per slot, each after what its slot already holds.
    pub async fn decode(&mut self, steps: &[(usize, u32)], readout: Readout<'_>) -> Result<ForwardOut> {
        let tokens: Vec<[u32; 1]> = steps.iter().map(|&(_, t)| [t]).collect();
        let batch: Vec<Sequence> =
            steps.iter().zip(&tokens).map(|(&(slot, _), t)| Sequence { slot, tokens: t }).collect();
        self.forward(&batch, readout).await
    }

    /// The forward pass. See the module docs.
    pub async fn forward(&mut self, batch: &[Sequence<'_>], readout: Readout<'_>) -> Result<ForwardOut> {
        self.gpu.check()?;
        let plan = self.plan(batch, readout)?;
        let start = now_ms();
        let g = &*self.gpu;
        let s = &self.scratch;
        let (m, r) = (plan.ids.len() as u32, plan.which.len() as u32);
        g.queue.write_buffer(&s.tokens, 0, bytemuck::cast_slice(&[m, 0, 0, 0]));
        g.queue.write_buffer(&s.rows, 0, bytemuck::cast_slice(&[r, plan.top_k as u32, 0, 0]));
        g.queue.write_buffer(&s.ids, 0, bytemuck::cast_slice(&plan.ids));
        g.queue.write_buffer(&s.meta, 0, bytemuck::cast_slice(&plan.meta));
        g.queue.write_buffer(&s.which, 0, bytemuck::cast_slice(&plan.which));
        if plan.choices > 0 {
            g.queue.write_buffer(&s.choice_ids, 0, bytemuck::cast_slice(readout.ids()));
        }

        let mut encoder = g.device.create_command_encoder(&Default::default());
        // Profile mode: dispatches before this index belong to the layers, the rest to the head.
        let mut layers_end = 0;
        match self.profiler.as_mut() {
            Some(profiler) => {
                profiler.clear();
                let mut d = Dispatcher::profiled(&mut encoder, profiler);
                encode_layers(&mut d, &self.embed_tokens, &self.layers, &plan);
                drop(d);
                layers_end = profiler.len();
                encode_head(&mut Dispatcher::profiled(&mut encoder, profiler), &self.head, &plan);
            }
            None => {
                let phase = |i: u32| s.timer.as_ref().map(|t| t.writes(i));
                encode_layers(
                    &mut Dispatcher::new(&mut encoder, "layers", phase(0)),
                    &self.embed_tokens,
                    &self.layers,
                    &plan,
                );
                encode_head(&mut Dispatcher::new(&mut encoder, "head", phase(1)), &self.head, &plan);
            }
        }
        if let Some(profiler) = &self.profiler {
            profiler.resolve(&mut encoder);
        }
        // Read back: top pairs, choice logits, hidden rows, timestamps; full logits separately.
        let (h, k, r64, f) = (self.config.hidden_size as u64, plan.choices as u64, r as u64, 4u64);
        let best_row = 8 * (1 + TOP_K_MAX as u64);
        let choices_at = best_row * r64;
        let hidden_at = choices_at + f * r64 * k;
        let hidden_len = if readout.hidden { f * r64 * h } else { 0 };
        let stamps_at = (hidden_at + hidden_len).next_multiple_of(8);
        if plan.top_k > 0 {
            encoder.copy_buffer_to_buffer(&s.best, 0, &s.staging, 0, Some(best_row * r64));
        }
        if k > 0 {
            encoder.copy_buffer_to_buffer(&s.choice_logits, 0, &s.staging, choices_at, Some(f * r64 * k));
        }
        if readout.hidden {
            encoder.copy_buffer_to_buffer(&s.head_normed, 0, &s.staging, hidden_at, Some(hidden_len));
        }
        if let (Some(t), None) = (&s.timer, &self.profiler) {
            t.copy_to(&mut encoder, &s.staging, stamps_at);
        }
        let vocab = self.config.vocab_size as u64;
        let full = (readout.head == Head::Logits).then(|| {
            let staging = g.staging("full logits", f * r64 * vocab);
            encoder.copy_buffer_to_buffer(&s.logits, 0, &staging, 0, Some(f * r64 * vocab));
            staging
        });
        g.queue.submit([encoder.finish()]);
        for seq in batch {
            self.kv.advance(seq.slot, seq.tokens.len());
        }

        let (bytes, readback_ms) = read_buffer_timed(g, &s.staging, stamps_at + 32).await?;
        let full = match &full {
            Some(staging) => Some(read_buffer(g, staging, f * r64 * vocab).await?),
            None => None,
        };
        let wall_ms = now_ms() - start;
        let floats = |b: &[u8], at: u64, n: u64| -> Vec<f32> {
            bytemuck::pod_collect_to_vec(&b[at as usize..(at + 4 * n) as usize])
        };
        let rows = (0..r64)
            .map(|i| {
                let best: Vec<u32> =
                    bytemuck::pod_collect_to_vec(&bytes[(i * best_row) as usize..][..best_row as usize]);
                let top = (0..plan.top_k).map(|j| (best[2 + 2 * j], f32::from_bits(best[3 + 2 * j]))).collect();
                RowOut {
                    top,
                    logsumexp: (plan.top_k > 0).then(|| f32::from_bits(best[0])),
                    logits: match &full {
                        Some(all) => floats(all, i * f * vocab, vocab),
                        None => floats(&bytes, choices_at + f * i * k, k),
                    },
                    hidden: if readout.hidden { floats(&bytes, hidden_at + f * i * h, h) } else { Vec::new() },
                }
            })
            .collect();
        let (mut timing, profile) = match &self.profiler {
            Some(profiler) => {
                let dispatches = profiler.read(g).await?;
                let sum = |part: &[(DispatchRecord, f64)]| Some(part.iter().map(|(_, ms)| ms).sum());
                let (layers, head) = dispatches.split_at(layers_end);
                let timing = ForwardTiming { gpu_layers_ms: sum(layers), gpu_head_ms: sum(head), ..Default::default() };
                (timing, dispatches)
            }
            None => {
                let stamps = &bytes[stamps_at as usize..];
                let timing = ForwardTiming {
                    gpu_layers_ms: s.timer.as_ref().map(|_| PassTimer::ms(g, stamps, 0)),
                    gpu_head_ms: s.timer.as_ref().map(|_| PassTimer::ms(g, stamps, 1)),
                    ..Default::default()
                };
                (timing, Vec::new())
            }
        };
        timing.wall_ms = wall_ms;
        timing.readback_ms = readback_ms;
        Ok(ForwardOut { rows, timing, profile })
    }

    /// Checks a batch against the model's sizes and lays out its per-token inputs.
    fn plan(&self, batch: &[Sequence<'_>], readout: Readout<'_>) -> Result<Plan> {
        let o = &self.options;
        if batch.is_empty() {
            return Err(Error::Input("an empty batch".into()));
        }
        let mut plan = Plan::default();
        let mut slots_seen = vec![false; self.kv.slots];
        for seq in batch {
            if seq.tokens.is_empty() {
                return Err(Error::Input(format!("sequence for slot {} has no tokens", seq.slot)));
            }
            self.kv.check_room(seq.slot, seq.tokens.len())?;
            if std::mem::replace(&mut slots_seen[seq.slot], true) {
                return Err(Error::Input(format!("slot {} appears twice in one batch", seq.slot)));
            }
            if let Some(&bad) = seq.tokens.iter().find(|&&t| t as usize >= self.config.vocab_size) {
                return Err(Error::Input(format!(
                    "token id {bad} is outside the vocabulary ({})",
                    self.config.vocab_size
                )));
            }
            let (base, start) = ((seq.slot * self.kv.capacity) as u32, self.kv.len(seq.slot) as u32);
            let first = plan.ids.len() as u32;
            for (i, &t) in seq.tokens.iter().enumerate() {
                plan.ids.push(t);
                plan.meta.extend([base, start + i as u32]);
            }
            let seen = start + seq.tokens.len() as u32;
            plan.keys.longest = plan.keys.longest.max(seen);
            plan.keys.rows += u64::from(seen);
            plan.keys.pairs += (start + 1..=seen).map(u64::from).sum::<u64>();
            let last = plan.ids.len() as u32 - 1;
            match readout.rows {
                Rows::Last => plan.which.push(last),
                Rows::All => plan.which.extend(first..=last),
            }
        }
        if plan.ids.len() > o.max_tokens {
            return Err(Error::Input(format!(
                "a batch of {} tokens; this model was set up for at most {} per call",
                plan.ids.len(),
                o.max_tokens
            )));
        }
        if plan.which.len() > o.max_rows {
            return Err(Error::Input(format!(
                "{} rows to read out; this model was set up for at most {}",
                plan.which.len(),
                o.max_rows
            )));
        }
        let ids = readout.ids();
        if ids.len() > o.max_choice_ids || (ids.is_empty() && matches!(readout.head, Head::Rows(_))) {
            return Err(Error::Input(format!(
                "{} vocabulary ids to read (1 to {} allowed)",
                ids.len(),
                o.max_choice_ids
            )));
        }
        if let Some(&bad) = ids.iter().find(|&&t| t as usize >= self.config.vocab_size) {
            return Err(Error::Input(format!("choice id {bad} is outside the vocabulary")));
        }
        plan.choices = ids.len();
        plan.top_k = match readout.head {
            Head::Full { top_k, .. } if !(1..=TOP_K_MAX).contains(&top_k) => {
                return Err(Error::Input(format!("top_k {top_k} (1 to {TOP_K_MAX} allowed)")));
            }
            Head::Full { top_k, .. } => top_k,
            Head::Logits => 1,
            Head::Rows(_) => 0,
        };
        Ok(plan)
    }
}

#[derive(Default)]
struct Plan {
    ids: Vec<u32>,   // [M]
    meta: Vec<u32>,  // [M, 2]
    which: Vec<u32>, // [R]
    choices: usize,  // k: vocabulary ids whose logits are read
    top_k: usize,    // best pairs found by the full head (0: no full head)
    keys: AttendedKeys,
}

/// Embedding and decoder layers: the residual stream x of every token, layer by layer.
fn encode_layers(d: &mut Dispatcher, embed_tokens: &Embedding, layers: &[LayerOps], plan: &Plan) {
    let m = plan.ids.len() as u32;
    embed_tokens.encode(d, m);
    for (i, l) in layers.iter().enumerate() {
        d.set_layer(Some(i));
        // Attention block: x += o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n))),
        // n = input_layernorm(x); the new keys and values join the cache first. RoPE is applied
        // as kv_write reads the keys and as attention reads the queries.
        l.input_layernorm.encode(d, m);
        l.q_proj.encode(d, m);
        l.k_proj.encode(d, m);
        l.v_proj.encode(d, m);
        l.kv_write.encode(d, m);
        l.attention.encode(d, m, plan.keys);
        l.o_proj.encode(d, m);
        // MLP block: x += down_proj(silu(gate_proj(n)) * up_proj(n)), n = post_attention_layernorm(x).
        l.post_attention_layernorm.encode(d, m);
        l.gate_proj.encode(d, m);
        l.up_proj.encode(d, m);
        l.silu_mul.encode(d, m);
        l.down_proj.encode(d, m);
    }
    d.set_layer(None);
}

/// Final norm and LM head, on the read-out rows only.
fn encode_head(d: &mut Dispatcher, head: &HeadOps, plan: &Plan) {
    let r = plan.which.len() as u32;
    head.gather_rows.encode(d, r);
    head.norm.encode(d, r);
    if plan.top_k > 0 {
        head.lm_head.encode(d, r);
        head.top_k.encode(d, r, plan.top_k);
    }
    if plan.choices > 0 {
        head.lm_head_rows.encode(d, plan.choices as u32, r);
    }
}
