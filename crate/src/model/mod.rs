//! The Qwen2 forward pass on the GPU, with HF names.
//!
//! One call runs a batch: any number of sequences, each appending its new tokens to its own KV
//! slot. All tokens of all sequences form one `[M, hidden]` activation; linear layers run as a
//! tiled matmul (prefill) or, for M <= 32, as a matvec that streams each weight once (decode,
//! short prefills); see [`crate::ops::Linear`]. On CPU-like devices one barrier-free kernel
//! serves both. The whole forward is one command encoder and one submit; only what the caller
//! asks for is read back: argmax ids, k choice logits, or (for tests and diagnostics) full
//! logit rows.
//!
//! - `graph.rs`: the kernels bound to the weights (made once, in [`Model::new`]) and their order;
//! - `plan.rs`: one call's batch checked and laid out;
//! - `readout.rs`: what a call reads back, and where in the staging buffer;
//! - `kv_cache.rs`: the cache, which the model owns.

mod graph;
mod kv_cache;
mod plan;
mod readout;

use std::cell::Cell;
use std::rc::Rc;

pub use readout::{ForwardOut, ForwardTiming, Head, Positions, Readout, RowOut};

use crate::clock::now_ms;
use crate::config::Qwen2Config;
use crate::error::{Error, Result};
use crate::gpu::{
    DispatchRecord, DispatchTiming, Dispatcher, Gpu, GpuWeights, Listed, Profiler, read_buffer, read_buffer_timed,
};
use graph::Graph;
use kv_cache::KvCache;
use plan::Plan;
use readout::Readback;

/// Sizes fixed when the model is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelOptions {
    /// Most tokens in one forward call (all sequences together).
    pub max_tokens: usize,
    /// Sequences the KV cache holds at once.
    pub kv_slots: usize,
    /// Tokens per sequence in the KV cache (prompt + generated).
    pub kv_capacity: usize,
    /// Most rows read out per call (usually one per sequence).
    pub max_rows: usize,
    /// Most of those rows read through the full-vocabulary head (logits, top-k): its
    /// `[rows, vocab]` logits are sized by it. A choice-rows head (strategy C's many rows)
    /// needs none.
    pub max_full_rows: usize,
    /// Most vocabulary ids for a choice-rows head.
    pub max_choice_ids: usize,
}

impl ModelOptions {
    /// Small sizes an engine starts from; it grows them to fit each request.
    pub const STARTING: ModelOptions = ModelOptions {
        max_tokens: 64,
        kv_slots: 1,
        kv_capacity: 64,
        max_rows: 1,
        max_full_rows: 1,
        max_choice_ids: 256,
    };

    /// One sequence of `tokens` tokens, one row read out.
    pub fn single(tokens: usize) -> Self {
        let n = tokens.max(1);
        ModelOptions { max_tokens: n, kv_slots: 1, kv_capacity: n, max_rows: 1, max_full_rows: 1, max_choice_ids: 1 }
    }

    /// Whether every size is at least `need`'s.
    pub fn covers(&self, need: &ModelOptions) -> bool {
        self.max_tokens >= need.max_tokens
            && self.kv_slots >= need.kv_slots
            && self.kv_capacity >= need.kv_capacity
            && self.max_rows >= need.max_rows
            && self.max_full_rows >= need.max_full_rows
            && self.max_choice_ids >= need.max_choice_ids
    }

    /// Rows of the KV cache: slots x capacity.
    pub fn kv_rows(&self) -> u64 {
        self.kv_slots as u64 * self.kv_capacity as u64
    }

    /// The larger of each size.
    pub fn max(self, o: ModelOptions) -> Self {
        ModelOptions {
            max_tokens: self.max_tokens.max(o.max_tokens),
            kv_slots: self.kv_slots.max(o.kv_slots),
            kv_capacity: self.kv_capacity.max(o.kv_capacity),
            max_rows: self.max_rows.max(o.max_rows),
            max_full_rows: self.max_full_rows.max(o.max_full_rows),
            max_choice_ids: self.max_choice_ids.max(o.max_choice_ids),
        }
    }
}

impl Default for ModelOptions {
    fn default() -> Self {
        Self { max_tokens: 1024, kv_slots: 8, kv_capacity: 1024, max_rows: 64, max_full_rows: 64, max_choice_ids: 256 }
    }
}

/// New tokens for one KV slot.
#[derive(Debug, Clone, Copy)]
pub struct Sequence<'a> {
    pub slot: usize,
    pub tokens: &'a [u32],
}

pub struct Model {
    config: Qwen2Config,
    gpu: Rc<Gpu>,
    weights: Rc<GpuWeights>,
    options: ModelOptions,
    kv: KvCache,
    graph: Graph,
    /// Per-dispatch GPU times, when profiling ([`Model::set_profiling`]).
    profiler: Option<Profiler>,
    /// Set from elsewhere to stop at the next forward pass ([`Model::cancel_flag`]).
    cancel: Rc<Cell<bool>>,
    /// Whether calls encode the likely next step ahead, and the one they did.
    encode_ahead: bool,
    ahead: Option<Encoded>,
}

impl Model {
    /// Sets up buffers, kernels and bind groups for `weights` at these sizes (weights can be
    /// shared by several set-ups: [`Model::resize`]).
    pub fn new(gpu: Rc<Gpu>, weights: impl Into<Rc<GpuWeights>>, options: ModelOptions) -> Result<Self> {
        let weights = weights.into();
        let o = options;
        if o.max_tokens == 0 || o.max_rows == 0 || o.max_full_rows == 0 || o.max_choice_ids == 0 {
            return Err(Error::Input("model options must all be positive".into()));
        }
        // Kernels run a workgroup (or a grid row) per token, read-out row or choice id.
        let grid = gpu.limits().max_compute_workgroups_per_dimension as usize;
        for (what, n) in [("max_tokens", o.max_tokens), ("max_rows", o.max_rows), ("max_choice_ids", o.max_choice_ids)]
        {
            if n > grid {
                return Err(Error::Input(format!(
                    "{what} {n} is more than this device dispatches along one grid dimension \
                     (max_compute_workgroups_per_dimension {grid}): use at most {grid}"
                )));
            }
        }
        let kv = KvCache::new(&gpu, weights.config(), o.kv_slots, o.kv_capacity)?;
        let graph = Graph::new(&gpu, &weights, &kv, &o)?;
        gpu.check()?;
        let cancel = Rc::default();
        let config = weights.config().clone();
        Ok(Self {
            config,
            gpu,
            weights,
            options: o,
            kv,
            graph,
            profiler: None,
            cancel,
            encode_ahead: true,
            ahead: None,
        })
    }

    pub fn config(&self) -> &Qwen2Config {
        &self.config
    }

    pub fn gpu(&self) -> &Rc<Gpu> {
        &self.gpu
    }

    pub fn weights(&self) -> &GpuWeights {
        &self.weights
    }

    /// The sizes this model was set up for.
    pub fn options(&self) -> ModelOptions {
        self.options
    }

    /// Sets the model up again at other sizes, on the same weights (a new KV cache and
    /// activations; every slot starts empty). The old set-up's buffers are freed first, so the
    /// two never take GPU memory at once (a long prompt's cache may be most of it); where the
    /// new one cannot be made, the old sizes are set up again and the error returned.
    pub fn resize(&mut self, options: ModelOptions) -> Result<()> {
        let (old, gpu, weights) = (self.options, self.gpu.clone(), self.weights.clone());
        let (profiling, cancel, ahead) = (self.profiler.is_some(), self.cancel.clone(), self.encode_ahead);
        // A one-token set-up in its place frees the old buffers (a model is never without one).
        *self = Self::new(gpu.clone(), weights.clone(), ModelOptions::single(1))?;
        let resized = Self::new(gpu.clone(), weights.clone(), options);
        let result = match resized {
            Ok(model) => {
                *self = model;
                Ok(())
            }
            Err(e) => {
                *self = Self::new(gpu, weights, old)?;
                Err(e)
            }
        };
        self.cancel = cancel;
        self.encode_ahead = ahead;
        self.set_profiling(profiling)?;
        result
    }

    /// A flag that, once set, makes every later forward fail with [`Error::Cancelled`] before
    /// it starts: a long run stops at the next forward pass (work already on the GPU finishes).
    /// The caller clears it before the next run.
    pub fn cancel_flag(&self) -> Rc<Cell<bool>> {
        self.cancel.clone()
    }

    /// Grows the sizes to cover `need`; does nothing when they already do. Each size grows to
    /// the larger of now and `need`, except the KV cache's slots and capacity: they multiply,
    /// so many short slots (a batch) grown to one long prompt's capacity would hold slots x the
    /// long prompt. Where the larger of each would be a bigger cache than the two together,
    /// the cache is set up for `need` alone.
    pub fn grow_to(&mut self, need: ModelOptions) -> Result<()> {
        if self.options.covers(&need) {
            return Ok(());
        }
        let mut grown = self.options.max(need);
        if grown.kv_rows() > self.options.kv_rows() + need.kv_rows() {
            (grown.kv_slots, grown.kv_capacity) = (need.kv_slots, need.kv_capacity);
        }
        self.resize(grown)
    }

    /// KV slots: sequences held at once.
    pub fn kv_slots(&self) -> usize {
        self.kv.slots()
    }

    /// Tokens each KV slot holds at most.
    pub fn kv_capacity(&self) -> usize {
        self.kv.capacity()
    }

    /// Tokens `slot` holds.
    pub fn tokens_in(&self, slot: usize) -> Result<usize> {
        self.kv.tokens_in(slot)
    }

    /// Starts `slot` over as an empty sequence.
    pub fn forget(&mut self, slot: usize) -> Result<()> {
        self.kv.forget(slot)
    }

    /// Keeps only the first `len` tokens of `slot`: the sequence continues from there (a decode
    /// step can be run again at the same context).
    pub fn truncate(&mut self, slot: usize, len: usize) -> Result<()> {
        self.kv.truncate(slot, len)
    }

    /// Starts every slot over.
    pub fn forget_all(&mut self) {
        self.kv.forget_all();
    }

    /// Makes slot `to` continue from the first `len` tokens of slot `from` (a shared prefix,
    /// such as a document, computed once).
    pub fn share_prefix(&mut self, from: usize, to: usize, len: usize) -> Result<()> {
        self.kv.copy_prefix(&self.gpu, from, to, len)
    }

    /// Profile mode: every later forward times each dispatch on its own (as
    /// [`Gpu::dispatch_timing`] says) and returns them in [`ForwardOut::profile`]. Off by
    /// default, and free when off. Needs `timestamp-query`.
    pub fn set_profiling(&mut self, on: bool) -> Result<()> {
        self.ahead = None;
        self.profiler = match (on, self.profiler.take()) {
            (false, _) => None,
            (true, Some(p)) => Some(p),
            (true, None) => Some(Profiler::new(&self.gpu, self.dispatch_timing()?)),
        };
        Ok(())
    }

    /// How profile mode times each dispatch on this device; an error where it cannot.
    pub fn dispatch_timing(&self) -> Result<DispatchTiming> {
        self.gpu.dispatch_timing().ok_or_else(|| {
            Error::Gpu("profiling needs GPU timestamps (timestamp-query), which this device lacks".into())
        })
    }

    /// Most tokens one pass can run on `gpu`: a grid row each, and `[tokens, intermediate]` MLP
    /// activations within one binding. A prefill of more runs in several passes
    /// ([`Model::prefill`]).
    pub fn pass_tokens(gpu: &Gpu, config: &Qwen2Config) -> usize {
        let grid = gpu.limits().max_compute_workgroups_per_dimension as usize;
        let activations = gpu.max_binding().saturating_sub(crate::ops::linear_input_slack(gpu));
        let per_binding = activations / (4 * config.intermediate_size as u64);
        grid.min(usize::try_from(per_binding).unwrap_or(usize::MAX)).max(1)
    }

    /// Prefill: runs token sequences (of any lengths) through the model: in one pass where
    /// they fit this set-up's `max_tokens`, else, where each sequence's last position is read
    /// out, in passes of at most that many tokens (a long sequence split across passes: the
    /// cache carries it on), one result row per sequence as from one pass.
    pub async fn prefill(&mut self, batch: &[Sequence<'_>], readout: Readout<'_>) -> Result<ForwardOut> {
        let total: usize = batch.iter().map(|s| s.tokens.len()).sum();
        if total <= self.options.max_tokens || readout.positions != Positions::Last {
            return self.forward(batch, readout).await;
        }
        plan::check_sequences(batch, &self.kv, self.config.vocab_size)?;
        let (mut rows, mut timing, mut profile) = (Vec::new(), None::<ForwardTiming>, Vec::new());
        for pass in passes(batch, self.options.max_tokens) {
            let mut part = self.forward(&pass.sequences, readout).await?;
            rows.extend(pass.ending.iter().map(|&i| std::mem::take(&mut part.rows[i])));
            timing = Some(timing.map_or(part.timing, |t| t.then(&part.timing)));
            profile.extend(part.profile);
        }
        Ok(ForwardOut { rows, timing: timing.unwrap_or_default(), profile })
    }

    /// Decode: one new token per slot, each after what its slot already holds.
    pub async fn decode(&mut self, steps: &[(usize, u32)], readout: Readout<'_>) -> Result<ForwardOut> {
        let tokens: Vec<[u32; 1]> = steps.iter().map(|&(_, t)| [t]).collect();
        let batch: Vec<Sequence> =
            steps.iter().zip(&tokens).map(|(&(slot, _), t)| Sequence { slot, tokens: t }).collect();
        self.forward(&batch, readout).await
    }

    /// Whether each call also encodes the commands of the decode step likely to come next
    /// (on by default; see [`Model::forward`]). Off, every call encodes its own commands.
    pub fn set_encoding_ahead(&mut self, on: bool) {
        self.encode_ahead = on;
        self.ahead = None;
    }

    /// The forward pass: embed, the decoder layers, the head, then the read-back. See the
    /// module docs.
    ///
    /// Encoding a call's commands costs the CPU about as long as a small model's decode step
    /// takes a fast GPU, so it is done ahead: once a call is submitted, and while the GPU runs
    /// it, the commands of a decode step of the same sequences and read-out are encoded. The
    /// next call submits them as they are when it dispatches exactly what they do (its token
    /// ids, positions and choice ids are inputs it uploads, not part of the commands, and the
    /// choice ids are padded to whole steps of [`plan::CHOICE_IDS_STEP`], so a walk whose allowed
    /// ids change in number still matches); else they are dropped and the call encodes its own.
    pub async fn forward(&mut self, batch: &[Sequence<'_>], readout: Readout<'_>) -> Result<ForwardOut> {
        if self.cancel.get() {
            return Err(Error::Cancelled);
        }
        self.gpu.check()?;
        let plan = Plan::new(batch, readout, &self.kv, &self.options, self.config.vocab_size)?;
        let start = now_ms();
        let gpu = self.gpu.clone();
        let g = &*gpu;
        let layout = self.layout(&plan, readout);
        // A full-logits call also copies them out, which no call encoded ahead does.
        let full_logits = readout.head == Head::Logits;
        let ahead = self.ahead.take().filter(|a| {
            !full_logits
                && a.tokens == plan.tokens()
                && a.layout == layout
                && self.graph.dispatches_exactly(&plan, &a.listing)
        });
        let encoded_ahead = ahead.is_some();
        let full_bytes = 4 * u64::from(plan.rows()) * self.config.vocab_size as u64;
        let (commands, layers_end, full) = match ahead {
            Some(a) => (a.commands, 0, None),
            None => {
                let (mut encoder, layers_end) = self.encode_call(&plan, &layout);
                let full = full_logits.then(|| {
                    let staging = g.staging("full logits", full_bytes);
                    encoder.copy_buffer_to_buffer(self.graph.scratch.logits(), 0, &staging, 0, Some(full_bytes));
                    staging
                });
                (encoder.finish(), layers_end, full)
            }
        };
        plan.upload(g.queue(), &self.graph.scratch.packed_inputs);
        g.queue().submit([commands]);
        let encode_ms = now_ms() - start;
        for seq in batch {
            self.kv.advance(seq.slot, seq.tokens.len());
        }
        if self.encode_ahead && self.profiler.is_none() && !full_logits {
            self.ahead = self.encode_next_step(batch, readout);
        }

        let s = &self.graph.scratch;
        let (bytes, readback_ms) = read_buffer_timed(g, &s.staging, layout.len()).await?;
        let full = match &full {
            Some(staging) => {
                let read = read_buffer(g, staging, full_bytes).await;
                staging.destroy(); // made for this call: on the web a dropped buffer lingers
                Some(read?)
            }
            None => None,
        };
        let vocab = self.config.vocab_size as u64;
        let rows = layout.rows(&bytes, full.as_deref().map(|b| (b, vocab)), plan.asked_choices);
        if !rows.iter().all(RowOut::finite) {
            return Err(Error::ModelOutput);
        }
        let wall_ms = now_ms() - start;
        let (mut timing, profile) = match &self.profiler {
            Some(profiler) => profiled_timing(profiler.read(g).await?, layers_end),
            None => {
                let pass = |i| s.timer.as_ref().map(|_| layout.pass_ms(g, &bytes, i));
                (ForwardTiming { gpu_layers_ms: pass(0), gpu_head_ms: pass(1), ..Default::default() }, Vec::new())
            }
        };
        timing.wall_ms = wall_ms;
        timing.readback_ms = readback_ms;
        timing.encode_ms = encode_ms;
        timing.encoded_ahead = encoded_ahead;
        Ok(ForwardOut { rows, timing, profile })
    }

    /// Where `plan`'s results will lie in the staging buffer.
    fn layout(&self, plan: &Plan, readout: Readout<'_>) -> Readback {
        let hidden = if readout.hidden { self.config.hidden_size } else { 0 };
        Readback::new(plan.read_positions.len(), plan.top_k, plan.choices(), hidden)
    }

    /// The commands of a decode step of `batch`'s sequences with this read-out (the tokens are
    /// placeholders: the step that comes uploads its own); `None` where no such step fits.
    fn encode_next_step(&mut self, batch: &[Sequence<'_>], readout: Readout<'_>) -> Option<Encoded> {
        let placeholder = [0u32];
        let next: Vec<Sequence> = batch.iter().map(|s| Sequence { slot: s.slot, tokens: &placeholder }).collect();
        let plan = Plan::new(&next, readout, &self.kv, &self.options, self.config.vocab_size).ok()?;
        let layout = self.layout(&plan, readout);
        let (encoder, _) = self.encode_call(&plan, &layout);
        let listing = self.graph.listing(&plan);
        Some(Encoded { tokens: plan.tokens(), listing, layout, commands: encoder.finish() })
    }

    /// A call's commands: its inputs copied into place, the layers and the head, the read-back
    /// copies (without the full-logits one). Returns the encoder and how many profiled
    /// dispatches belong to the layers (0 unprofiled).
    fn encode_call(&mut self, plan: &Plan, layout: &Readback) -> (wgpu::CommandEncoder, usize) {
        let mut encoder = self.gpu.device().create_command_encoder(&Default::default());
        let inputs = &self.graph.scratch;
        plan.encode_input_copies(&mut encoder, &inputs.packed_inputs, inputs.inputs());
        let layers_end = self.encode(&mut encoder, plan);
        let s = &self.graph.scratch;
        let timer = if self.profiler.is_none() { s.timer.as_ref() } else { None };
        layout.encode_copies(&mut encoder, s.readback_sources(), &s.staging, timer);
        (encoder, layers_end)
    }

    /// Encodes the layers and the head: in two timed passes, or in profile mode with each
    /// dispatch timed. Returns how many profiled dispatches belong to the layers (0 unprofiled).
    fn encode(&mut self, encoder: &mut wgpu::CommandEncoder, plan: &Plan) -> usize {
        let graph = &self.graph;
        match self.profiler.as_mut() {
            Some(profiler) => {
                profiler.clear();
                graph.encode_layers(&mut Dispatcher::profiled(encoder, "layers", profiler), plan);
                let layers_end = profiler.len();
                graph.encode_head(&mut Dispatcher::profiled(encoder, "head", profiler), plan);
                profiler.resolve(encoder);
                layers_end
            }
            None => {
                let timer = graph.scratch.timer.as_ref();
                graph.encode_layers(&mut Dispatcher::new(encoder, "layers", timer.map(|t| t.writes(0))), plan);
                graph.encode_head(&mut Dispatcher::new(encoder, "head", timer.map(|t| t.writes(1))), plan);
                0
            }
        }
    }
}

/// A call's commands encoded ahead ([`Model::forward`]): how many tokens' inputs they copy
/// into place, what they dispatch and where their results will lie, so the call that comes
/// can check they are its own.
struct Encoded {
    tokens: u32,
    listing: Vec<Listed>,
    layout: Readback,
    commands: wgpu::CommandBuffer,
}

/// Layer and head GPU times as sums of the profiled dispatches.
fn profiled_timing(
    dispatches: Vec<(DispatchRecord, f64)>,
    layers_end: usize,
) -> (ForwardTiming, Vec<(DispatchRecord, f64)>) {
    let sum = |part: &[(DispatchRecord, f64)]| Some(part.iter().map(|(_, ms)| ms).sum());
    let (layers, head) = dispatches.split_at(layers_end);
    let timing = ForwardTiming { gpu_layers_ms: sum(layers), gpu_head_ms: sum(head), ..Default::default() };
    (timing, dispatches)
}

/// One pass of a prefill split over several ([`Model::prefill`]): its pieces of sequences, and
/// which of them end their sequence (their rows are the results; the others' are dropped).
struct PrefillPass<'a> {
    sequences: Vec<Sequence<'a>>,
    ending: Vec<usize>,
}

/// `batch` in passes of at most `limit` tokens, in order: each pass takes what is left of the
/// sequences until it is full, so a sequence longer than the room left is split, its first
/// piece ending this pass and the rest starting the next (a slot appears once per pass).
fn passes<'a>(batch: &[Sequence<'a>], limit: usize) -> Vec<PrefillPass<'a>> {
    let mut out = Vec::new();
    let mut pass = PrefillPass { sequences: Vec::new(), ending: Vec::new() };
    let mut room = limit;
    for seq in batch {
        let mut rest = seq.tokens;
        while !rest.is_empty() {
            let (piece, after) = rest.split_at(rest.len().min(room));
            if after.is_empty() {
                pass.ending.push(pass.sequences.len());
            }
            pass.sequences.push(Sequence { slot: seq.slot, tokens: piece });
            (rest, room) = (after, room - piece.len());
            if room == 0 {
                out.push(std::mem::replace(&mut pass, PrefillPass { sequences: Vec::new(), ending: Vec::new() }));
                room = limit;
            }
        }
    }
    if !pass.sequences.is_empty() {
        out.push(pass);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefill_splits_into_passes_of_at_most_the_limit_and_reads_each_sequence_where_it_ends() {
        let tokens: Vec<u32> = (0..42).collect();
        let batch = [
            Sequence { slot: 0, tokens: &tokens[..10] },
            Sequence { slot: 1, tokens: &tokens[10..35] },
            Sequence { slot: 2, tokens: &tokens[35..] },
        ];
        // Per pass: (slot, tokens) of each piece, and the pieces that end their sequence.
        type Laid = (Vec<(usize, usize)>, Vec<usize>);
        let laid: Vec<Laid> = passes(&batch, 16)
            .into_iter()
            .map(|p| (p.sequences.iter().map(|s| (s.slot, s.tokens.len())).collect(), p.ending))
            .collect();
        assert_eq!(
            laid,
            [(vec![(0, 10), (1, 6)], vec![0]), (vec![(1, 16)], vec![]), (vec![(1, 3), (2, 7)], vec![0, 1])]
        );
        let flat: Vec<u32> =
            passes(&batch, 16).iter().flat_map(|p| p.sequences.iter().flat_map(|s| s.tokens)).copied().collect();
        assert_eq!(flat, tokens, "every token once, in order");
        assert_eq!(passes(&batch, 42).len(), 1);
    }
}
