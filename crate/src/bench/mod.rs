//! The benchmark: a client of the public API that measures, on one device in one run, what the
//! page charts — prefill vs prompt length, decode per step, A vs B at each length, batches of
//! judgments, and two microbenchmarks (copy bandwidth, FMA throughput) for the roofline.
//! Ratios are always taken between figures of the same run.

use serde::{Deserialize, Serialize};

mod micro;
mod progress;
mod read_probe;
mod workload;

pub use micro::microbenchmarks;
pub use progress::{BenchProgress, Measured, PhaseFigures, Starting, TokenByTokenFigures};
pub use workload::{document, questions, request_of_length};

use crate::config::Qwen2Config;
use crate::cost::{CostModel, PrefillFit, forward_flops, median};
use crate::error::{BenchProblem, Error, Result};
use crate::gpu::{Gpu, Tuning};
use crate::judge::{BatchRecord, Engine, JudgeRequest, Judgment, PrefixSharing, Strategy};
use crate::model::ModelOptions;
use crate::profile::Profile;

/// What to measure. Deserialised from the page's options, every field optional.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BenchOptions {
    /// Prompt lengths (tokens, response prefix included) of the sweep.
    pub lengths: Vec<usize>,
    /// Batch sizes of strategy C.
    pub batch_sizes: Vec<usize>,
    /// Runs per point; the median is reported.
    pub repeats: usize,
    /// Tokens of the shared document in strategy C's prompts.
    pub doc_tokens: usize,
    /// Also profile one prefill and one decode step per length, kernel by kernel.
    pub profile: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            lengths: vec![32, 64, 128, 256, 512, 1024],
            batch_sizes: vec![1, 8, 32, 64],
            repeats: 3,
            doc_tokens: 48,
            profile: false,
        }
    }
}

/// The largest batch the benchmark builds, the engine's ([`crate::judge::MAX_BATCH`]): a
/// mistyped size fails at once instead of after minutes of tokenizing.
pub use crate::judge::MAX_BATCH;

/// Tokens a prompt leaves free in the context: A's reply (the prefix's rest, a choice and the
/// closing), or C's question after a document.
const REPLY_ROOM: usize = 64;

impl BenchOptions {
    /// Engine sizes for this benchmark, within the device's limits: a batch size past them is
    /// not sized for here, and its own run reports why it was skipped ([`BenchReport::batch_skipped`]).
    pub fn model_options(&self, config: &Qwen2Config, gpu: &Gpu) -> ModelOptions {
        let longest = self.lengths.iter().copied().max().unwrap_or(64).saturating_add(64);
        let batch = self.batch_sizes.iter().copied().max().unwrap_or(1).max(1);
        let per_judgment = self.doc_tokens.saturating_add(64);
        let kv_capacity = longest.max(per_judgment);
        // A dispatch's grid has a workgroup (row) per token; the MLP activations [tokens,
        // intermediate] and a layer's KV cache [slots x capacity, kv_dim] must fit one binding.
        let grid = gpu.limits().max_compute_workgroups_per_dimension as usize;
        let per_binding = |bytes_each: usize| (gpu.max_binding() / (bytes_each.max(1) as u64)) as usize;
        let slots = batch.min(per_binding(4 * kv_capacity * config.kv_dim())).clamp(1, grid);
        // The MLP activations are a linear layer's input, which may hold a little more.
        let activations = gpu.max_binding().saturating_sub(crate::ops::linear_input_slack(gpu));
        let activation_rows = (activations / (4 * config.intermediate_size.max(1) as u64)) as usize;
        ModelOptions {
            max_tokens: longest.max(batch.saturating_mul(per_judgment)).min(activation_rows).min(grid),
            kv_slots: slots,
            kv_capacity,
            max_rows: slots,
            max_full_rows: 1, // batches read the choices' rows; A and B one row at a time
            max_choice_ids: 64,
        }
    }

    /// Fails, naming the option, where a length cannot be measured on a model of `context`
    /// tokens: before any measuring, not after minutes of it.
    pub fn check(&self, context: usize) -> Result<()> {
        // A's reply is written into the context after the prompt: a few dozen tokens at most.
        let longest = context.saturating_sub(REPLY_ROOM);
        if let Some(&length) = self.lengths.iter().find(|&&l| l > longest) {
            return Err(Error::Bench(BenchProblem::LengthPastContext { length, context, longest }));
        }
        // Strategy C's prompt: the document, a question and the chat template's few dozen tokens.
        if self.doc_tokens.saturating_add(REPLY_ROOM) >= context {
            return Err(Error::Bench(BenchProblem::DocumentPastContext { tokens: self.doc_tokens, context }));
        }
        if let Some(&n) = self.batch_sizes.iter().find(|&&n| n == 0 || n > MAX_BATCH) {
            return Err(Error::Bench(BenchProblem::BatchSize { judgments: n, max: MAX_BATCH }));
        }
        if self.profile && self.lengths.contains(&0) {
            return Err(Error::Bench(BenchProblem::ProfileOfNothing));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    pub name: String,
    pub backend: String,
    pub timestamps: bool,
    pub max_binding_mib: u64,
    /// The linear-layer kernel family: "tiled" or "direct".
    pub kernels: &'static str,
    /// Where the tiled kernels change path (the defaults unless `--tune` set them).
    pub tuning: Tuning,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelInfo {
    pub hidden_size: usize,
    pub layers: usize,
    pub parameters: u64,
    /// How the weight matrices are stored: `bf16`, `f16`, `f32`, `q8_0`, `q4_0`, or
    /// `gguf:<file type>` (a GGUF file's mix, such as `gguf:q4_k_m`).
    pub quant: String,
    /// Weight bytes one decode step reads (in that format).
    pub decode_bytes: u64,
    pub synthetic: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Micro {
    /// Bytes read + written per second by a plain copy kernel, GB/s.
    pub copy_gbps: f64,
    /// Bytes read per second by a kernel that reads a matrix as the linear kernels read their
    /// weights and writes almost nothing (bench_read.wgsl), GB/s: the ceiling of a decode step.
    /// Where stores are slow (lavapipe) it lies well above the copy's.
    pub read_gbps: f64,
    /// Where the read probe read: `storage`, or `texture` where the linear kernels read their
    /// weights from textures (lavapipe).
    pub read_from: &'static str,
    /// f32 fused multiply-adds x 2 per second, GFLOP/s.
    pub fma_gflops: f64,
    /// Whether these came from GPU timestamps (else wall time).
    pub gpu_timed: bool,
    /// GPU time of a dispatch that waits for the one before it, microseconds: the fixed cost
    /// each kernel of a forward pays (a decode step dispatches about 130), measured on tiny
    /// copies that each read what the one before wrote.
    pub dispatch_us: f64,
    /// The decode kernel of a linear layer alone, at each of [`micro::LINEAR_SHAPES`].
    pub linear: Vec<LinearMicro>,
    /// The prefill kernel of a linear layer alone, at each of [`micro::LINEAR_SHAPES`] and
    /// [`micro::PREFILL_ROWS`] token rows.
    pub prefill_linear: Vec<PrefillLinearMicro>,
    /// A prefill's attention over the sweep's longest prompt (at most 128 tokens on CPU-like
    /// devices), by each kernel that can run it.
    pub prefill_attention: AttentionMicro,
}

/// One sequence of `tokens` tokens attending causally to itself with the model's heads, as in a
/// prefill, timed alone over repeats by each attention path in the same run.
#[derive(Debug, Clone, Serialize)]
pub struct AttentionMicro {
    pub tokens: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub paths: Vec<AttentionPathMicro>,
}

/// One attention path: `whole` (a workgroup per query head and token), `grouped` (per KV head
/// and token, all its query heads at once: the GPU default for a prefill), `direct` (the
/// barrier-free kernel of CPU-like devices).
#[derive(Debug, Clone, Serialize)]
pub struct AttentionPathMicro {
    pub path: &'static str,
    /// The kernel that ran (`attention` where grouped cannot take the heads).
    pub kernel: &'static str,
    /// GPU time of the path's kv_write and attention.
    pub gpu_ms: f64,
    /// The two products' 4 x heads x head_dim FLOPs per (token, key) pair per second, GFLOP/s,
    /// and as a fraction of the FMA microbenchmark.
    pub gflops: f64,
    pub fma_fraction: f64,
}

/// `m` token rows times a bf16 weight matrix `[n, k]`, timed alone over repeats: what a
/// prefill's linear layers can reach on this device.
#[derive(Debug, Clone, Serialize)]
pub struct PrefillLinearMicro {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// The kernel that ran unsplit (`matmul` or `linear_direct`).
    pub kernel: &'static str,
    pub gpu_ms: f64,
    /// 2 x m x k x n per second, GFLOP/s, and as a fraction of the FMA microbenchmark.
    pub gflops: f64,
    pub fma_fraction: f64,
    /// Where the model's layer of this shape splits K at `m` rows (the GPU family, long K), the
    /// same layer run so, in the same run: the ratio to the unsplit figures says what the
    /// split buys on this device. Absent where it does not split.
    pub split: Option<SplitMicro>,
}

/// A linear layer split over K: matmul writing `parts` partial sums, then split_sum.
#[derive(Debug, Clone, Serialize)]
pub struct SplitMicro {
    pub parts: u32,
    pub gpu_ms: f64,
    pub gflops: f64,
    pub fma_fraction: f64,
}

/// One token row times a bf16 weight matrix `[n, k]`, timed alone over repeats: what a decode
/// step's linear layers can reach on this device.
#[derive(Debug, Clone, Serialize)]
pub struct LinearMicro {
    pub k: usize,
    pub n: usize,
    /// The kernel that ran (`matvec` or `linear_direct`).
    pub kernel: &'static str,
    pub gpu_ms: f64,
    /// Weight and activation bytes moved per second, GB/s, and as a fraction of copy bandwidth
    /// and of read bandwidth (the layer reads its weights and writes little).
    pub gbps: f64,
    pub copy_fraction: f64,
    pub read_fraction: f64,
    /// matvec's lanes per weight row, the shape the engine picks for this K (`None`:
    /// linear_direct).
    pub lanes: Option<u32>,
    /// The same layer in matvec's other workgroup shape ([`crate::ops::MATVEC_LANES`]), timed
    /// in this run, so a GPU's run says whether the pick suits it (`None`: linear_direct).
    pub other_shape: Option<MatvecShapeMicro>,
}

/// [`LinearMicro`]'s layer in another matvec workgroup shape.
#[derive(Debug, Clone, Serialize)]
pub struct MatvecShapeMicro {
    pub lanes: u32,
    pub gpu_ms: f64,
    pub gbps: f64,
    pub copy_fraction: f64,
    pub read_fraction: f64,
}

/// One strategy at one prompt length (medians over repeats).
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub strategy: Strategy,
    pub prompt_tokens: usize,
    pub decode_steps: usize,
    pub prefill_ms: f64,
    pub decode_ms: Vec<f64>,
    pub total_ms: f64,
    pub gpu_prefill_ms: Option<f64>,
    pub gpu_decode_ms: Option<Vec<f64>>,
    /// The part of each pass before the GPU could start (encoding and submitting commands).
    pub encode_prefill_ms: f64,
    pub encode_decode_ms: Vec<f64>,
    /// Decode steps that ran commands encoded ahead.
    pub steps_encoded_ahead: usize,
}

/// Decode steps of strategy A at one length, with each step's commands encoded during the step
/// before (the default: [`crate::model::Model::forward`]) and encoded when the step is asked
/// for, runs of the two in turn. Medians per step over the runs, wall time.
#[derive(Debug, Clone, Serialize)]
pub struct EncodeAhead {
    pub prompt_tokens: usize,
    /// A's decode steps, and how many of them ran commands encoded ahead (with the default;
    /// none when asked for).
    pub decode_steps: usize,
    pub steps_encoded_ahead: usize,
    /// Runs of each kind, in turn.
    pub runs: usize,
    pub decode_ms: f64,
    pub decode_ms_on_demand: f64,
    /// The part of a step before the GPU could start.
    pub encode_ms: f64,
    pub encode_ms_on_demand: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    /// Target prompt length of strategy B.
    pub length: usize,
    pub a: Point,
    pub b: Point,
    pub b_full_head: Point,
    /// Total time of A over B (choice head), and over B with the full head.
    pub speedup: f64,
    pub speedup_full_head: f64,
    /// The cost model's A and B at these lengths, and the speed-up they predict (null where
    /// there is no model: a sweep of one length). The model is fitted to full-vocabulary
    /// prefills, so its B is `b_full_head` and its speed-up compares with `speedup_full_head`.
    pub predicted_a_ms: Option<f64>,
    pub predicted_b_ms: Option<f64>,
    pub predicted_speedup: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BatchPoint {
    pub judgments: usize,
    pub shared_prefix: bool,
    pub prefill_tokens: usize,
    pub longest_prompt_tokens: usize,
    pub total_ms: f64,
    pub judgments_per_s: f64,
}

/// A batch the bench could not run on this device (past a limit, out of memory), and why.
#[derive(Debug, Clone, Serialize)]
pub struct BatchSkip {
    pub judgments: usize,
    pub shared_prefix: bool,
    /// The error's kind ([`Error::code`]), its message and, where it has them, its details
    /// ([`Error::details`]: the page words those in its own language).
    pub code: &'static str,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

impl BatchSkip {
    /// The batch of `judgments` (with or without a shared prefix) that failed with `error`.
    pub fn new(judgments: usize, shared_prefix: bool, error: &Error) -> Self {
        BatchSkip { judgments, shared_prefix, code: error.code(), reason: error.to_string(), details: error.details() }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Roofline {
    /// Decode: weight bytes per step / median step time (wall: every overhead included), and as
    /// a fraction of copy bandwidth and of read bandwidth.
    pub decode_gbps: f64,
    pub decode_fraction: f64,
    pub decode_read_fraction: f64,
    /// Prefill at the longest length: flops / prefill time (wall), and as a fraction of FMA
    /// throughput.
    pub prefill_gflops: f64,
    pub prefill_fraction: f64,
    pub prefill_tokens: usize,
    /// The same on the GPU's clock, as the microbenchmarks are timed (null without timestamps):
    /// what the kernels reach, without the host's submits and readbacks.
    pub gpu_decode_gbps: Option<f64>,
    pub gpu_decode_fraction: Option<f64>,
    pub gpu_decode_read_fraction: Option<f64>,
    pub gpu_prefill_gflops: Option<f64>,
    pub gpu_prefill_fraction: Option<f64>,
    /// Lower bound of a decode step: its weight bytes at the higher of the measured copy and
    /// read bandwidths, ms.
    pub decode_floor_ms: f64,
}

/// The whole report: one JSON document the page can chart.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub device: DeviceInfo,
    pub model: ModelInfo,
    pub micro: Micro,
    /// Runs of each strategy at each point; the run with the median total is reported.
    pub repeats: usize,
    pub sweep: Vec<SweepRow>,
    /// Asked-for lengths below the shortest prompt the bench builds (its chat template and
    /// question around an empty document): their request is the shortest row's, measured as that row.
    pub sweep_merged: Vec<usize>,
    pub decode_ms_per_step: f64,
    /// What encoding ahead saves a decode step (at the sweep's first length).
    pub encode_ahead: Option<EncodeAhead>,
    pub cost_model: Option<CostModel>,
    pub batch: Vec<BatchPoint>,
    pub batch_skipped: Vec<BatchSkip>,
    pub roofline: Roofline,
    /// Per-kernel GPU times ([`BenchOptions::profile`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// Wall-clock milliseconds everywhere; GPU milliseconds where labelled `gpu_`.
    pub units: &'static str,
}

fn point(j: &Judgment) -> Point {
    Point {
        strategy: j.strategy,
        prompt_tokens: j.prompt_tokens,
        decode_steps: j.decode_steps,
        prefill_ms: j.timings_ms.prefill,
        decode_ms: j.timings_ms.decode.clone(),
        total_ms: j.timings_ms.total,
        gpu_prefill_ms: j.gpu_timings_ms.as_ref().map(|g| g.prefill),
        gpu_decode_ms: j.gpu_timings_ms.as_ref().map(|g| g.decode.clone()),
        encode_prefill_ms: j.encode_timings_ms.prefill,
        encode_decode_ms: j.encode_timings_ms.decode.clone(),
        steps_encoded_ahead: j.decode_steps_encoded_ahead,
    }
}

/// Runs `strategy` `repeats` times and returns the run with the median total.
async fn median_run(engine: &mut Engine, req: &JudgeRequest, strategy: Strategy, repeats: usize) -> Result<Judgment> {
    let mut runs = Vec::new();
    for _ in 0..repeats.max(1) {
        runs.push(engine.judge(req, strategy, 0).await?);
    }
    runs.sort_by(|a, b| a.timings_ms.total.total_cmp(&b.timings_ms.total));
    Ok(runs.swap_remove(median_index(runs.len())))
}

/// Where the median of `n` sorted runs is: the lower middle one for an even count, so two
/// runs report the faster rather than always the slower.
fn median_index(n: usize) -> usize {
    n.saturating_sub(1) / 2
}

/// Judges `reqs` as one batch `repeats` times; the record of the run with the median total.
async fn median_batch(
    engine: &mut Engine,
    reqs: &[JudgeRequest],
    sharing: PrefixSharing,
    repeats: usize,
) -> Result<BatchRecord> {
    let mut runs = Vec::new();
    for _ in 0..repeats.max(1) {
        runs.push(engine.judge_batch(reqs, sharing).await?.0);
    }
    runs.sort_by(|a, b| a.timings_ms.total.total_cmp(&b.timings_ms.total));
    Ok(runs.swap_remove(median_index(runs.len())))
}

/// The whole benchmark, on an engine it sizes for `options` first. `progress` hears each step
/// as it starts and its figures as it ends (the page shows them; a run cut short, by a timeout
/// say, has said what it measured so far).
pub async fn run(
    engine: &mut Engine,
    options: &BenchOptions,
    progress: &mut dyn FnMut(&BenchProgress),
) -> Result<BenchReport> {
    let gpu = engine.model().gpu().clone();
    let config = engine.model().config().clone();
    // Checked before minutes of measuring, not after.
    options.check(config.max_position_embeddings)?;
    if options.profile {
        engine.model().dispatch_timing()?;
    }
    engine.model_mut().grow_to(options.model_options(&config, &gpu))?;
    progress(&BenchProgress::Starting(Starting::Micro));
    // Attention over the longest prompt, but on CPU-like devices at most 128 tokens: there the
    // per-head kernel (a GPU's) would take minutes over 1,024.
    let longest = options.lengths.iter().copied().max().unwrap_or(64).max(1);
    let attention_tokens = if gpu.direct_kernels() { longest.min(128) } else { longest };
    // Its queries, keys and values ([tokens, hidden + 2 kv_dim]) must fit one binding.
    let qkv_row = 4 * (config.hidden_size + 2 * config.kv_dim()) as u64;
    let attention_tokens = attention_tokens.min((gpu.max_binding() / qkv_row) as usize);
    let micro = microbenchmarks(&gpu, &config, attention_tokens).await?;
    progress(&BenchProgress::Measured(Measured::Micro {
        copy_gbps: micro.copy_gbps,
        read_gbps: micro.read_gbps,
        fma_gflops: micro.fma_gflops,
        dispatch_us: micro.dispatch_us,
    }));
    let warm = request_of_length(engine, 32)?;
    engine.judge(&warm, Strategy::TokenByToken, 0).await?;
    let sweep = sweep(engine, options, progress).await?;
    let encode_ahead = match options.lengths.first() {
        Some(&length) => Some(encode_ahead(engine, length, options.repeats, progress).await?),
        None => None,
    };
    let (batch, batch_skipped) = batches(engine, options, progress).await?;
    let profile = if options.profile {
        progress(&BenchProgress::Starting(Starting::Profile));
        let mut measured = |prefill: &crate::profile::Phase, decode: &crate::profile::Phase| {
            progress(&BenchProgress::Measured(Measured::Profile {
                tokens: prefill.tokens,
                prefill: PhaseFigures::of(prefill),
                decode: PhaseFigures::of(decode),
            }))
        };
        Some(crate::profile::profile(engine.model_mut(), &options.lengths, &micro, &mut measured).await?)
    } else {
        None
    };
    let weights = engine.model().weights();
    let decode_bytes = weights.decode_bytes();
    Ok(BenchReport {
        device: DeviceInfo::of(&gpu),
        model: ModelInfo {
            hidden_size: config.hidden_size,
            layers: config.num_hidden_layers,
            parameters: config.parameter_count(),
            quant: weights.label().to_string(),
            decode_bytes,
            synthetic: weights.synthetic(),
        },
        roofline: Roofline::new(&config, &sweep, decode_bytes, &micro),
        micro,
        decode_ms_per_step: sweep.decode_ms,
        encode_ahead,
        cost_model: sweep.cost_model,
        repeats: options.repeats.max(1),
        sweep: sweep.rows,
        sweep_merged: sweep.merged,
        batch,
        batch_skipped,
        profile,
        units: "ms of wall time unless the field says gpu_; GB/s = 1e9 bytes per second",
    })
}

/// The prompt-length sweep: rows, the median decode step, and the cost model fitted to them.
struct Sweep {
    rows: Vec<SweepRow>,
    merged: Vec<usize>,
    decode_ms: f64,
    cost_model: Option<CostModel>,
}

/// A, B and B with the full head at each length; the cost model fitted to their prefills and
/// A's decode steps, and its predictions at each length.
async fn sweep(engine: &mut Engine, options: &BenchOptions, progress: &mut dyn FnMut(&BenchProgress)) -> Result<Sweep> {
    let mut rows = Vec::new();
    let mut decode_steps_ms = Vec::new();
    let mut fit_points = Vec::new();
    let (mut requests, mut merged) = (Vec::new(), Vec::new());
    for &length in &options.lengths {
        let req = request_of_length(engine, length)?;
        // Lengths below the shortest prompt all make the same request: measured once.
        if requests.contains(&req) {
            merged.push(length);
            continue;
        }
        progress(&BenchProgress::Starting(Starting::Length { tokens: length }));
        let a = median_run(engine, &req, Strategy::TokenByToken, options.repeats).await?;
        let b = median_run(engine, &req, Strategy::PrefillOneToken, options.repeats).await?;
        let bf = median_run(engine, &req, Strategy::PrefillOneTokenFullHead, options.repeats).await?;
        decode_steps_ms.extend(a.timings_ms.decode.iter().copied());
        fit_points.push((bf.prompt_tokens as f64, bf.timings_ms.prefill));
        fit_points.push((a.prompt_tokens as f64, a.timings_ms.prefill));
        requests.push(req);
        let speedup = a.timings_ms.total / b.timings_ms.total;
        progress(&BenchProgress::Measured(Measured::Length {
            tokens: length,
            a: TokenByTokenFigures::of(&a),
            b_ms: b.timings_ms.total,
            b_full_head_ms: bf.timings_ms.total,
            speedup,
        }));
        rows.push(SweepRow {
            length,
            speedup,
            speedup_full_head: a.timings_ms.total / bf.timings_ms.total,
            a: point(&a),
            b: point(&b),
            b_full_head: point(&bf),
            predicted_a_ms: None,
            predicted_b_ms: None,
            predicted_speedup: None,
        });
    }
    let decode_ms = median(&decode_steps_ms);
    // One request's two prompts (A's and B's) lie a few tokens apart: a line through them would
    // be all noise (a swing of a few ms reads as hundreds per token), so it takes two rows.
    let cost_model =
        PrefillFit::fit(&fit_points).filter(|_| rows.len() >= 2).map(|prefill| CostModel { prefill, decode_ms });
    if let Some(m) = &cost_model {
        for row in &mut rows {
            let (a, b) = (
                m.predict(row.a.prompt_tokens as f64, row.a.decode_steps as f64),
                m.predict(row.b_full_head.prompt_tokens as f64, 0.0),
            );
            // A line fitted through noise can predict no time at all for B: no ratio then.
            let speedup = (b > 0.0).then_some(a / b);
            (row.predicted_a_ms, row.predicted_b_ms, row.predicted_speedup) = (Some(a), Some(b), speedup);
        }
    }
    Ok(Sweep { rows, merged, decode_ms, cost_model })
}

/// A's decode steps at `length`, `repeats` runs with each step's commands encoded ahead and as
/// many with them encoded when asked for, in turn: interleaved, so that a device whose speed
/// drifts over the run (a CPU device's host, a GPU's clocks) weighs on both alike.
async fn encode_ahead(
    engine: &mut Engine,
    length: usize,
    repeats: usize,
    progress: &mut dyn FnMut(&BenchProgress),
) -> Result<EncodeAhead> {
    progress(&BenchProgress::Starting(Starting::EncodeAhead { tokens: length }));
    let req = request_of_length(engine, length)?;
    let (mut ahead, mut on_demand) = (Vec::new(), Vec::new());
    for _ in 0..repeats.max(1) {
        for (on, runs) in [(true, &mut ahead), (false, &mut on_demand)] {
            engine.model_mut().set_encoding_ahead(on);
            let run = engine.judge(&req, Strategy::TokenByToken, 0).await;
            engine.model_mut().set_encoding_ahead(true);
            runs.push(run?);
        }
    }
    if on_demand.iter().any(|j| j.decode_steps_encoded_ahead > 0) {
        return Err(crate::Error::Gpu("decode steps ran commands encoded ahead with encoding ahead off".into()));
    }
    // The median step over all runs of a kind: wall time, or the part before the GPU started.
    let step = |runs: &[Judgment], times: fn(&Judgment) -> &Vec<f64>| {
        median(&runs.iter().flat_map(times).copied().collect::<Vec<_>>())
    };
    let first = &ahead[0];
    let (decode_ms, decode_ms_on_demand) =
        (step(&ahead, |j| &j.timings_ms.decode), step(&on_demand, |j| &j.timings_ms.decode));
    progress(&BenchProgress::Measured(Measured::EncodeAhead {
        step_ms: decode_ms,
        steps_ahead: first.decode_steps_encoded_ahead,
        steps: first.decode_steps,
        step_ms_on_demand: decode_ms_on_demand,
    }));
    Ok(EncodeAhead {
        prompt_tokens: first.prompt_tokens,
        decode_steps: first.decode_steps,
        steps_encoded_ahead: first.decode_steps_encoded_ahead,
        runs: ahead.len(),
        decode_ms,
        decode_ms_on_demand,
        encode_ms: step(&ahead, |j| &j.encode_timings_ms.decode),
        encode_ms_on_demand: step(&on_demand, |j| &j.encode_timings_ms.decode),
    })
}

/// Strategy C at each batch size, without and with a shared prefix; sizes that do not fit
/// this device are reported as skipped, while a cancel or a lost device stops the bench.
async fn batches(
    engine: &mut Engine,
    options: &BenchOptions,
    progress: &mut dyn FnMut(&BenchProgress),
) -> Result<(Vec<BatchPoint>, Vec<BatchSkip>)> {
    let (mut batch, mut skipped) = (Vec::new(), Vec::new());
    let doc = document(engine.tokenizer(), options.doc_tokens)?;
    for &n in &options.batch_sizes {
        let reqs = questions(&doc, n);
        for sharing in [PrefixSharing::Off, PrefixSharing::Shared] {
            let shared = sharing == PrefixSharing::Shared;
            progress(&BenchProgress::Starting(Starting::Batch { judgments: n, shared_prefix: shared }));
            match median_batch(engine, &reqs, sharing, options.repeats).await {
                Ok(record) => {
                    progress(&BenchProgress::Measured(Measured::Batch {
                        judgments: n,
                        shared_prefix: shared,
                        total_ms: record.timings_ms.total,
                        judgments_per_s: record.judgments_per_s,
                    }));
                    batch.push(BatchPoint {
                        judgments: n,
                        shared_prefix: shared,
                        prefill_tokens: record.batch_prefill_tokens + record.shared_prefix_tokens,
                        longest_prompt_tokens: record.longest_prompt_tokens,
                        total_ms: record.timings_ms.total,
                        judgments_per_s: record.judgments_per_s,
                    })
                }
                // A cancel or a lost device ends the bench; any other failure is this size's.
                Err(e @ (Error::Cancelled | Error::DeviceLost(_))) => return Err(e),
                Err(e) => {
                    let skip = BatchSkip::new(n, shared, &e);
                    progress(&BenchProgress::Measured(Measured::BatchSkipped(skip.clone())));
                    skipped.push(skip)
                }
            }
        }
    }
    Ok((batch, skipped))
}

impl DeviceInfo {
    fn of(gpu: &Gpu) -> Self {
        DeviceInfo {
            name: gpu.info().name.clone(),
            backend: format!("{:?}", gpu.info().backend),
            timestamps: gpu.timestamps(),
            max_binding_mib: gpu.max_binding() >> 20,
            kernels: gpu.kernel_family().name(),
            tuning: gpu.tuning(),
        }
    }
}

impl Roofline {
    /// Decode from the median step and the weight bytes it reads; prefill from the longest
    /// prompt's full-head prefill (the sweep's lengths come in any order).
    fn new(config: &Qwen2Config, sweep: &Sweep, decode_bytes: u64, micro: &Micro) -> Self {
        let per_ms = |amount: f64, ms: f64| if ms > 0.0 { amount / (ms * 1e6) } else { 0.0 };
        let decode_gbps = per_ms(decode_bytes as f64, sweep.decode_ms);
        let longest = sweep.rows.iter().map(|r| &r.b_full_head).max_by_key(|p| p.prompt_tokens);
        let prefill_tokens = longest.map_or(0, |p| p.prompt_tokens);
        let flops = forward_flops(config, prefill_tokens, 0, 1);
        let prefill_gflops = per_ms(flops, longest.map_or(0.0, |p| p.prefill_ms));
        // GPU time where every step and the longest prefill have it.
        let gpu_steps: Option<Vec<&[f64]>> = sweep.rows.iter().map(|r| r.a.gpu_decode_ms.as_deref()).collect();
        let gpu_step_ms = gpu_steps.map(|s| median(&s.concat())).filter(|&ms| ms > 0.0);
        let gpu_decode_gbps = gpu_step_ms.map(|ms| per_ms(decode_bytes as f64, ms));
        let gpu_prefill_gflops =
            longest.and_then(|p| p.gpu_prefill_ms).filter(|&ms| ms > 0.0).map(|ms| per_ms(flops, ms));
        Roofline {
            decode_gbps,
            decode_fraction: decode_gbps / micro.copy_gbps,
            decode_read_fraction: decode_gbps / micro.read_gbps,
            prefill_gflops,
            prefill_fraction: prefill_gflops / micro.fma_gflops,
            prefill_tokens,
            gpu_decode_gbps,
            gpu_decode_fraction: gpu_decode_gbps.map(|g| g / micro.copy_gbps),
            gpu_decode_read_fraction: gpu_decode_gbps.map(|g| g / micro.read_gbps),
            gpu_prefill_gflops,
            gpu_prefill_fraction: gpu_prefill_gflops.map(|g| g / micro.fma_gflops),
            decode_floor_ms: decode_bytes as f64 / (micro.copy_gbps.max(micro.read_gbps) * 1e6),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuOptions;

    /// A batch size past the device's limits is not sized for (its own run is skipped, with
    /// the reason), so the rest of the bench still runs; lengths past the context, or of 0 in a
    /// profile, fail before anything is measured.
    #[test]
    fn the_median_of_an_even_count_is_the_lower_middle_run() {
        assert_eq!([1, 2, 3, 4, 5].map(median_index), [0, 0, 1, 1, 2]);
    }

    #[test]
    fn the_engine_is_sized_within_the_device_and_bad_lengths_fail_first() {
        let gpu = Gpu::new_blocking(GpuOptions::default()).unwrap();
        let config = Qwen2Config::qwen2_5_0_5b();
        let options = BenchOptions { lengths: vec![8, 1024], batch_sizes: vec![1, 600], ..Default::default() };
        let o = options.model_options(&config, &gpu);
        let grid = gpu.limits().max_compute_workgroups_per_dimension as usize;
        let kv_bytes = (o.kv_slots * o.kv_capacity * config.kv_dim() * 4) as u64;
        let mlp_bytes = (o.max_tokens * config.intermediate_size * 4) as u64;
        assert!(kv_bytes <= gpu.max_binding() && mlp_bytes <= gpu.max_binding(), "{o:?}");
        assert!(o.kv_slots >= 1 && o.kv_slots <= grid && o.max_tokens <= grid && o.max_rows <= grid, "{o:?}");
        assert!(o.kv_capacity >= 1024 + 64, "{o:?}");

        let context = config.max_position_embeddings;
        options.check(context).unwrap();
        let long = BenchOptions { lengths: vec![8, context - 1], ..Default::default() };
        let err = long.check(context).unwrap_err().to_string();
        assert!(err.contains("32767 tokens and its reply do not fit the model's context of 32768"), "{err}");
        assert!(err.contains("give lengths up to 32704"), "{err}");
        BenchOptions { lengths: vec![8, context - REPLY_ROOM], ..Default::default() }.check(context).unwrap();
        let zero = BenchOptions { lengths: vec![0, 8], profile: true, ..Default::default() };
        assert!(zero.check(context).unwrap_err().to_string().contains("a length of 0"));
        BenchOptions { profile: false, ..zero }.check(context).unwrap();
        for n in [0, MAX_BATCH + 1] {
            let batch = BenchOptions { batch_sizes: vec![1, n], ..Default::default() };
            let err = batch.check(context).unwrap_err().to_string();
            assert!(err.contains(&format!("a batch of {n} judgments cannot be measured (give 1 to 4096)")), "{err}");
        }
        BenchOptions { batch_sizes: vec![MAX_BATCH], ..Default::default() }.check(context).unwrap();
        let doc = BenchOptions { doc_tokens: 8_388_544, ..Default::default() };
        let err = doc.check(context).unwrap_err().to_string();
        assert!(err.contains("doc_tokens: a document of 8388544 tokens leaves no room"), "{err}");
    }

    /// A point of `tokens` prompt tokens: its prefill and decode steps on the wall clock, and on
    /// the GPU's where given.
    fn point(tokens: usize, prefill_ms: f64, gpu_prefill_ms: Option<f64>, gpu_decode_ms: Option<Vec<f64>>) -> Point {
        Point {
            strategy: Strategy::TokenByToken,
            prompt_tokens: tokens,
            decode_steps: 2,
            prefill_ms,
            decode_ms: vec![3.0, 3.0],
            total_ms: prefill_ms + 6.0,
            gpu_prefill_ms,
            gpu_decode_ms,
            encode_prefill_ms: 0.1,
            encode_decode_ms: vec![0.1, 0.1],
            steps_encoded_ahead: 2,
        }
    }

    fn row(tokens: usize, prefill_ms: f64, gpu_prefill_ms: f64, gpu_steps: Option<Vec<f64>>) -> SweepRow {
        let b = point(tokens, prefill_ms, Some(gpu_prefill_ms), None);
        SweepRow {
            length: tokens,
            a: point(tokens - 1, prefill_ms, Some(gpu_prefill_ms), gpu_steps),
            b: b.clone(),
            b_full_head: b,
            speedup: 1.0,
            speedup_full_head: 1.0,
            predicted_a_ms: None,
            predicted_b_ms: None,
            predicted_speedup: None,
        }
    }

    fn micro() -> Micro {
        let prefill_attention = AttentionMicro { tokens: 0, heads: 0, kv_heads: 0, head_dim: 0, paths: vec![] };
        Micro {
            copy_gbps: 100.0,
            read_gbps: 150.0,
            read_from: "storage",
            fma_gflops: 1000.0,
            gpu_timed: true,
            dispatch_us: 5.0,
            linear: vec![],
            prefill_linear: vec![],
            prefill_attention,
        }
    }

    #[test]
    fn the_roofline_reads_the_longest_prompt_and_the_gpu_clock_where_every_step_has_it() {
        let config = Qwen2Config::from_json(include_bytes!("../../tests/fixtures/tiny-qwen2/config.json")).unwrap();
        // The longest prompt first: the roofline's prefill is its, not the last row's.
        let rows = vec![row(70, 20.0, 10.0, Some(vec![2.0, 2.0])), row(12, 5.0, 4.0, Some(vec![1.0, 1.0, 1.0]))];
        let sweep = Sweep { rows, merged: vec![], decode_ms: 3.0, cost_model: None };
        let r = Roofline::new(&config, &sweep, 3_000_000, &micro());
        let flops = forward_flops(&config, 70, 0, 1);
        assert_eq!(r.prefill_tokens, 70);
        assert!((r.prefill_gflops - flops / 20e6).abs() < 1e-9, "{r:?}");
        assert!((r.gpu_prefill_gflops.unwrap() - flops / 10e6).abs() < 1e-9, "{r:?}");
        assert!((r.gpu_prefill_fraction.unwrap() - flops / 10e6 / 1000.0).abs() < 1e-12);
        // Wall: 3 MB in 3 ms = 1 GB/s; GPU: the median of all of A's steps (1 ms) = 3 GB/s.
        assert!((r.decode_gbps - 1.0).abs() < 1e-9 && (r.decode_fraction - 0.01).abs() < 1e-12, "{r:?}");
        assert!((r.gpu_decode_gbps.unwrap() - 3.0).abs() < 1e-9, "{r:?}");
        assert!((r.gpu_decode_fraction.unwrap() - 0.03).abs() < 1e-12);
        // Against read bandwidth (150 GB/s) too; the floor at the faster of the two probes.
        assert!((r.decode_read_fraction - 1.0 / 150.0).abs() < 1e-12, "{r:?}");
        assert!((r.gpu_decode_read_fraction.unwrap() - 0.02).abs() < 1e-12, "{r:?}");
        assert!((r.decode_floor_ms - 0.02).abs() < 1e-12, "{r:?}");
        // A row whose steps have no GPU time, or GPU times of zero: no GPU decode figure.
        for gpu_steps in [None, Some(vec![0.0, 0.0])] {
            let rows = vec![row(70, 20.0, 10.0, gpu_steps), row(12, 5.0, 4.0, Some(vec![0.0]))];
            let sweep = Sweep { rows, merged: vec![], decode_ms: 3.0, cost_model: None };
            let r = Roofline::new(&config, &sweep, 3_000_000, &micro());
            assert!(r.gpu_decode_gbps.is_none() && r.gpu_decode_fraction.is_none(), "{r:?}");
            assert!(r.gpu_decode_read_fraction.is_none(), "{r:?}");
            assert!(r.gpu_prefill_gflops.is_some());
        }
    }
}
