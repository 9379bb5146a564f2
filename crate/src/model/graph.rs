//! The model's kernels, bound once to its weights and buffers: the embedding, one [`LayerOps`]
//! per decoder layer, and the head. Encoding them is the forward pass, in HF's order and names.

use super::ModelOptions;
use super::kv_cache::KvCache;
use super::plan::{Plan, PlanInputs};
use super::readout::{Readback, ReadbackSources, TIMED_PASSES};
use crate::config::Qwen2Config;
use crate::error::{Error, Result};
use crate::gpu::{Dispatcher, Gpu, GpuLinear, GpuWeights, Listed, ListingCheck, MlpInput, PassTimer};
use crate::ops::{
    Attention, AttentionBuffers, AttentionDims, Embedding, Fold, GatherRows, Linear, LinearBuffers, LmHeadRows,
    RmsNorm, SiluMul, SplitPartials, Store, TOP_K_MAX, TopK, activation_part, linear_input, linear_input_slack,
};

/// Bytes of a `[rows, width]` buffer of 4-byte words (f32 or u32), counted in u64: on wasm32 a
/// usize product passes 2^32 at sizes a device can hold, and would wrap past the binding checks.
fn words(rows: usize, width: usize) -> u64 {
    rows as u64 * width as u64 * 4
}

/// Per-call inputs and read-out buffers, sized for [`ModelOptions`].
pub(super) struct Scratch {
    tokens: wgpu::Buffer,         // uniform: M
    rows: wgpu::Buffer,           // uniform: R, top_k
    ids: wgpu::Buffer,            // [M] u32
    token_meta: wgpu::Buffer,     // [M] (cache row base, position)
    read_positions: wgpu::Buffer, // [R] token index of each read-out position
    choice_ids: wgpu::Buffer,     // [k] u32
    /// All of the above, packed by [`Plan::upload`] (one write per call).
    pub packed_inputs: wgpu::Buffer,
    logits: wgpu::Buffer,         // [R, vocab]
    best: wgpu::Buffer,           // [R, 1 + TOP_K_MAX] (logsumexp, top pairs)
    choice_logits: wgpu::Buffer,  // [R, k]
    head_normed: wgpu::Buffer,    // [R, hidden]
    pub staging: wgpu::Buffer,    // see Readback
    pub timer: Option<PassTimer>, // GPU time of the two passes: layers, head
}

impl Scratch {
    fn new(g: &Gpu, c: &Qwen2Config, o: &ModelOptions) -> Self {
        let (h, v) = (c.hidden_size, c.vocab_size);
        Self {
            tokens: g.uniform("tokens", &[0u32; 4]),
            rows: g.uniform("rows", &[0u32; 4]),
            ids: g.storage("ids", words(o.max_tokens, 1)),
            token_meta: g.storage("token_meta", words(o.max_tokens, 2)),
            read_positions: g.storage("read_positions", words(o.max_rows, 1)),
            choice_ids: g.storage("choice_ids", words(o.max_choice_ids, 1)),
            packed_inputs: g.storage("packed inputs", words(8 + 3 * o.max_tokens + o.max_rows + o.max_choice_ids, 1)),
            logits: g.storage("logits", words(o.max_full_rows, v)),
            best: g.storage("best", words(o.max_full_rows, 2 * (1 + TOP_K_MAX))),
            choice_logits: g.storage("choice_logits", words(o.max_rows, o.max_choice_ids)),
            head_normed: linear_input(g, "head_normed", words(o.max_rows, h)),
            staging: g.staging("readout", Readback::capacity(o.max_rows, o.max_choice_ids, h)),
            timer: PassTimer::new(g, TIMED_PASSES),
        }
    }

    pub fn inputs(&self) -> PlanInputs<'_> {
        PlanInputs {
            tokens: &self.tokens,
            rows: &self.rows,
            ids: &self.ids,
            token_meta: &self.token_meta,
            read_positions: &self.read_positions,
            choice_ids: &self.choice_ids,
        }
    }

    pub fn readback_sources(&self) -> ReadbackSources<'_> {
        ReadbackSources { best: &self.best, choice_logits: &self.choice_logits, hidden: &self.head_normed }
    }

    /// `[R, vocab]` logits of a full head.
    pub fn logits(&self) -> &wgpu::Buffer {
        &self.logits
    }
}

/// Kernels of one decoder layer, bound to its weights and the shared activations.
struct LayerOps {
    /// input_layernorm, then q_proj, k_proj and v_proj filling qkv (one layer where the weights
    /// are one matrix: [`GpuLayer::qkv_proj`](crate::gpu::GpuLayer)).
    attention_input: FoldedLinears,
    attention: Attention,
    o_proj: FoldedLinears,
    /// post_attention_layernorm, then gate_proj and up_proj: as one layer that writes
    /// silu(gate) * up where the weights are paired ([`MlpInput`]).
    mlp_input: FoldedLinears,
    /// silu(gate) * up unless mlp_input wrote it, then down_proj.
    mlp_output: FoldedLinears,
}

/// A norm or an activation and the linear layers that read its output: the operation as a pass
/// of its own, then the layers; or, for the batches matvec serves on GPUs, the layers alone with
/// the operation folded in ([`Fold`]: a dispatch fewer, and no round trip through memory).
/// Without a prologue it is just the layers (o_proj; down_proj after paired gate and up).
struct FoldedLinears {
    prologue: Option<Prologue>,
    layers: Vec<Linear>,
    folded: Option<Vec<Linear>>,
    /// Most token rows the folded layers run (the device's [`Tuning::matvec_max_rows`]).
    ///
    /// [`Tuning::matvec_max_rows`]: crate::gpu::Tuning::matvec_max_rows
    folded_max_rows: u32,
}

/// What runs before a [`FoldedLinears`]' layers when it is not folded into them.
enum Prologue {
    Norm(RmsNorm),
    Swiglu(SiluMul),
}

/// One linear layer of a [`FoldedLinears`]: its weights, its input (the prologue's output), and
/// where it writes (output buffer, its width, the layer's first column; how: a [`Store`], or
/// silu(gate) * up of paired gate and up weights); columns per part where x or y is in parts
/// (lavapipe's MLP activation: [`activation_part`]).
struct Target<'a> {
    linear: &'a GpuLinear,
    x: &'a wgpu::Buffer,
    y: &'a wgpu::Buffer,
    out_cols: usize,
    first_col: usize,
    store: Option<Store>,
    x_part: usize,
    y_part: usize,
}

impl<'a> Target<'a> {
    /// The layer reading `x` (with `fold` applied to it): `None` where it cannot run so.
    fn linear(&self, g: &Gpu, io: &LayerInputs<'a>, x: &'a wgpu::Buffer, fold: Option<Fold>) -> Option<Linear> {
        let (bias, tokens, partials) = (self.linear.bias.as_ref(), io.tokens, io.partials);
        let (y, out_cols, first_col) = (self.y, self.out_cols, self.first_col);
        let (x_part, y_part) = (self.x_part, self.y_part);
        let io = LinearBuffers { tokens, x, bias, y, out_cols, first_col, partials, x_part, y_part };
        let w = &self.linear.weight;
        match (self.store, fold) {
            (None, fold) => Linear::swiglu(g, w, io, fold),
            (Some(store), Some(fold)) => Linear::folded(g, w, io, store, fold),
            (Some(store), None) => Some(Linear::new(g, w, io, store)),
        }
    }
}

/// What every linear layer of a decoder layer reads besides its weights and input: the `Tokens`
/// uniform, and where split-K layers put their partial sums (GPU family only).
struct LayerInputs<'a> {
    tokens: &'a wgpu::Buffer,
    partials: Option<&'a SplitPartials>,
}

impl FoldedLinears {
    /// The prologue, if any, comes with its input and its fold: the folded layers read that
    /// input and apply the fold.
    fn new<'a>(
        g: &Gpu,
        io: &LayerInputs<'a>,
        prologue: Option<(Prologue, &'a wgpu::Buffer, Fold)>,
        targets: &[Target<'a>],
    ) -> Result<Self> {
        let unfolded = |t: &Target<'a>| {
            t.linear(g, io, t.x, None)
                .ok_or_else(|| Error::Gpu("these weights pair gate_proj and up_proj, which only the tiled kernels run: load them on the device (and kernel family) that runs the model".into()))
        };
        let layers = targets.iter().map(unfolded).collect::<Result<_>>()?;
        let folded = prologue
            .as_ref()
            .and_then(|&(_, x, fold)| targets.iter().map(|t| t.linear(g, io, x, Some(fold))).collect());
        let folded_max_rows = g.tuning().matvec_max_rows;
        Ok(Self { prologue: prologue.map(|(op, ..)| op), layers, folded, folded_max_rows })
    }

    fn encode(&self, d: &mut Dispatcher, m: u32) {
        match &self.folded {
            Some(folded) if m <= self.folded_max_rows => folded.iter().for_each(|l| l.encode(d, m)),
            _ => {
                match &self.prologue {
                    Some(Prologue::Norm(op)) => op.encode(d, m),
                    Some(Prologue::Swiglu(op)) => op.encode(d, m),
                    None => {}
                }
                self.layers.iter().for_each(|l| l.encode(d, m));
            }
        }
    }
}

/// Kernels of the head: the read-out rows' final norm, and the full or choice-rows LM head.
struct HeadOps {
    gather_rows: GatherRows,
    norm: RmsNorm,
    lm_head: Linear,
    top_k: TopK,
    lm_head_rows: LmHeadRows,
    /// `[R, hidden]` the read-out rows' residual stream, gathered for the final norm.
    x: wgpu::Buffer,
}

impl Drop for HeadOps {
    fn drop(&mut self) {
        self.x.destroy();
    }
}

/// Activations of every token, `[max_tokens, width]` each.
struct Activations {
    x: wgpu::Buffer,      // residual stream [M, hidden]
    normed: wgpu::Buffer, // [M, hidden]
    qkv: wgpu::Buffer,    // [M, hidden + 2 kv_dim]: queries, keys, values
    attn: wgpu::Buffer,   // [M, hidden]
    // gate and up: [M, intermediate], on lavapipe in parts ([P][M][part]: ops::activation_part).
    gate: wgpu::Buffer, // silu(gate) * up (first the gate, if separate)
    up: wgpu::Buffer,   // where a layer's gate and up are separate, else unused
}

impl Activations {
    fn new(g: &Gpu, c: &Qwen2Config, tokens: usize, separate_up: bool) -> Self {
        let act = |name: &str, width: usize| g.storage(name, words(tokens, width));
        // What the unfolded linear layers read as x.
        let input = |name: &str, width: usize| linear_input(g, name, words(tokens, width));
        let (h, kv, i) = (c.hidden_size, c.kv_dim(), c.intermediate_size);
        Self {
            x: act("x", h),
            normed: input("normed", h),
            qkv: act("qkv", h + 2 * kv),
            attn: input("attn", h),
            gate: input("gate", i),
            up: act("up", if separate_up { i } else { 0 }),
        }
    }
}

// The large buffers are destroyed when dropped, not left to the browser's garbage collector:
// on the web, wgpu lets go of a dropped buffer without destroying it, so a model resized or
// replaced would hold its GPU memory until a collection ran.
impl Drop for Activations {
    fn drop(&mut self) {
        for b in [&self.x, &self.normed, &self.qkv, &self.attn, &self.gate, &self.up] {
            b.destroy();
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let inputs = [&self.ids, &self.token_meta, &self.read_positions, &self.choice_ids, &self.packed_inputs];
        let outputs = [&self.logits, &self.best, &self.choice_logits, &self.head_normed, &self.staging];
        inputs.into_iter().chain(outputs).for_each(wgpu::Buffer::destroy);
    }
}

/// Everything a forward encodes.
pub(super) struct Graph {
    pub scratch: Scratch,
    /// Bound into the kernels; kept here so dropping the graph frees them (see `Drop`).
    _activations: Activations,
    _shared: LayerShared,
    embed_tokens: Embedding,
    layers: Vec<LayerOps>,
    head: HeadOps,
}

impl Graph {
    /// Buffers and bound kernels for `weights` at sizes `o`, over the cache `kv`.
    pub fn new(g: &Gpu, weights: &GpuWeights, kv: &KvCache, o: &ModelOptions) -> Result<Self> {
        let c = weights.config();
        let (h, v) = (c.hidden_size, c.vocab_size);
        for (what, bytes) in [
            ("the MLP activations", words(o.max_tokens, c.intermediate_size) + linear_input_slack(g)),
            ("the full-vocabulary logits", words(o.max_full_rows, v)),
        ] {
            g.check_binding(what, bytes)?;
        }
        let s = Scratch::new(g, c, o);
        let separate_up = weights.layers().iter().any(|l| matches!(l.mlp_input, MlpInput::Separate { .. }));
        let a = Activations::new(g, c, o.max_tokens, separate_up);
        let dims = AttentionDims {
            heads: c.num_attention_heads,
            kv_heads: c.num_key_value_heads,
            head_dim: c.head_dim(),
            capacity: kv.capacity(),
        };
        let shared = LayerShared {
            inv_freq: g.storage_from("inv_freq", &c.rope_inv_freq()),
            partial: g.storage("attention partial", dims.partial_bytes()),
            dims,
            split_partials: SplitPartials::new(g),
        };
        let layers = (0..c.num_hidden_layers)
            .map(|l| LayerOps::new(g, c, &weights.layers()[l], kv.layer(l), &s, &a, &shared))
            .collect::<Result<_>>()?;
        let head_x = g.storage("head_x", words(o.max_rows, h));
        let lm_head = weights.head();
        let (x, y) = (&s.head_normed, &s.logits);
        // The head splits no K: its many rows make tiles enough.
        let head_io = LinearBuffers::whole(&s.rows, x, None, y, v);
        let head = HeadOps {
            gather_rows: GatherRows::new(g, &s.read_positions, &a.x, &head_x, h),
            norm: RmsNorm::new(g, &head_x, weights.norm(), &s.head_normed, h, c.rms_norm_eps),
            lm_head: Linear::new(g, lm_head, head_io, Store::Overwrite),
            top_k: TopK::new(g, &s.rows, &s.logits, &s.best, v, o.max_full_rows),
            lm_head_rows: LmHeadRows::new(g, &s.choice_ids, &s.head_normed, lm_head, &s.choice_logits),
            x: head_x,
        };
        let embed_tokens = Embedding::new(g, &s.ids, weights.embed_tokens(), &a.x);
        Ok(Self { embed_tokens, layers, head, scratch: s, _activations: a, _shared: shared })
    }

    /// Every dispatch of a forward of `plan`, in order, encoding nothing.
    pub fn listing(&self, plan: &Plan) -> Vec<Listed> {
        let mut listing = Vec::new();
        self.encode_layers(&mut Dispatcher::listing(&mut listing), plan);
        self.encode_head(&mut Dispatcher::listing(&mut listing), plan);
        listing
    }

    /// Whether a forward of `plan` dispatches exactly `listing`.
    pub fn dispatches_exactly(&self, plan: &Plan, listing: &[Listed]) -> bool {
        let mut check = ListingCheck::default();
        self.encode_layers(&mut Dispatcher::checking(listing, &mut check), plan);
        self.encode_head(&mut Dispatcher::checking(listing, &mut check), plan);
        check.matched(listing)
    }

    /// Embedding and decoder layers: the residual stream x of every token, layer by layer.
    pub fn encode_layers(&self, d: &mut Dispatcher, plan: &Plan) {
        let m = plan.tokens();
        self.embed_tokens.encode(d, m);
        for (i, l) in self.layers.iter().enumerate() {
            d.set_layer(Some(i));
            l.encode(d, plan);
        }
        d.set_layer(None);
    }

    /// Final norm and LM head, on the read-out positions only.
    pub fn encode_head(&self, d: &mut Dispatcher, plan: &Plan) {
        let (r, head) = (plan.rows(), &self.head);
        head.gather_rows.encode(d, r);
        head.norm.encode(d, r);
        if plan.top_k > 0 {
            head.lm_head.encode(d, r);
            head.top_k.encode(d, r, plan.top_k);
        }
        if plan.choices() > 0 {
            head.lm_head_rows.encode(d, plan.choices() as u32, r);
        }
    }
}

/// What every layer shares: the RoPE frequencies, the head shapes and the split attention's
/// partial results; split-K's partial sums.
struct LayerShared {
    inv_freq: wgpu::Buffer,
    partial: wgpu::Buffer,
    dims: AttentionDims,
    split_partials: Option<SplitPartials>,
}

impl Drop for LayerShared {
    fn drop(&mut self) {
        self.inv_freq.destroy();
        self.partial.destroy();
    }
}

impl LayerOps {
    fn new(
        g: &Gpu,
        c: &Qwen2Config,
        w: &crate::gpu::GpuLayer,
        (k_cache, v_cache): (&wgpu::Buffer, &wgpu::Buffer),
        s: &Scratch,
        a: &Activations,
        shared: &LayerShared,
    ) -> Result<Self> {
        let (h, kv_dim, i, eps) = (c.hidden_size, c.kv_dim(), c.intermediate_size, c.rms_norm_eps);
        let qkv_cols = h + 2 * kv_dim;
        // The Q, K and V projections fill qkv side by side.
        let mut qkv = Vec::new();
        for l in &w.qkv_proj {
            let first_col = qkv.iter().map(|t: &Target| t.linear.weight.rows()).sum();
            let (x, y, out_cols, store) = (&a.normed, &a.qkv, qkv_cols, Some(Store::Overwrite));
            qkv.push(Target { linear: l, x, y, out_cols, first_col, store, x_part: 0, y_part: 0 });
        }
        // gate_proj and up_proj write the MLP activation in parts where down_proj reads it so.
        let part = activation_part(g, i);
        let mlp_in = |linear, y, store| Target {
            linear,
            x: &a.normed,
            y,
            out_cols: i,
            first_col: 0,
            store,
            x_part: 0,
            y_part: part,
        };
        // The residual stream x takes o_proj's and down_proj's outputs.
        let residual = |linear, x, x_part| Target {
            linear,
            x,
            y: &a.x,
            out_cols: h,
            first_col: 0,
            store: Some(Store::Accumulate),
            x_part,
            y_part: 0,
        };
        let down = residual(&w.down_proj, &a.gate, part);
        let norm = |weight| {
            let fold = Fold::Norm { weight, eps };
            Some((Prologue::Norm(RmsNorm::new(g, &a.x, weight, &a.normed, h, eps)), &a.x, fold))
        };
        let io = &LayerInputs { tokens: &s.tokens, partials: shared.split_partials.as_ref() };
        let (mlp_input, mlp_output) = match &w.mlp_input {
            MlpInput::Paired(gate_up) => (
                FoldedLinears::new(g, io, norm(&w.post_attention_layernorm), &[mlp_in(gate_up, &a.gate, None)])?,
                FoldedLinears::new(g, io, None, &[down])?,
            ),
            MlpInput::Separate { gate_proj, up_proj } => {
                let up = &a.up;
                let overwrite = Some(Store::Overwrite);
                let mlp = [mlp_in(gate_proj, &a.gate, overwrite), mlp_in(up_proj, up, overwrite)];
                let swiglu = Prologue::Swiglu(SiluMul::new(g, &a.gate, up, i));
                (
                    FoldedLinears::new(g, io, norm(&w.post_attention_layernorm), &mlp)?,
                    FoldedLinears::new(g, io, Some((swiglu, &a.gate, Fold::Glu { up })), &[down])?,
                )
            }
        };
        let attention = AttentionBuffers {
            token_meta: &s.token_meta,
            q: &a.qkv,
            q_stride: qkv_cols,
            k_cache,
            v_cache,
            out: &a.attn,
            partial: &shared.partial,
            inv_freq: &shared.inv_freq,
        };
        Ok(LayerOps {
            attention_input: FoldedLinears::new(g, io, norm(&w.input_layernorm), &qkv)?,
            attention: Attention::new(g, attention, shared.dims)?,
            o_proj: FoldedLinears::new(g, io, None, &[residual(&w.o_proj, &a.attn, 0)])?,
            mlp_input,
            mlp_output,
        })
    }

    fn encode(&self, d: &mut Dispatcher, plan: &Plan) {
        let m = plan.tokens();
        // Attention block: x += o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n))),
        // n = input_layernorm(x); the new keys and values join the cache first (in a decode
        // step, as attention reads them). RoPE is applied as the keys are written and as
        // attention reads the queries.
        self.attention_input.encode(d, m);
        self.attention.encode(d, m, plan.keys);
        self.o_proj.encode(d, m);
        // MLP block: x += down_proj(silu(gate_proj(n)) * up_proj(n)), n = post_attention_layernorm(x).
        self.mlp_input.encode(d, m);
        self.mlp_output.encode(d, m);
    }
}
