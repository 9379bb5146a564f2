//! The benchmark: a client of the public API that measures, on one device in one run, what the
//! page charts — prefill vs prompt length, decode per step, A vs B at each length, batches of
//! judgments, and two microbenchmarks (copy bandwidth, FMA throughput) for the roofline.
//! Ratios are always taken between figures of the same run.

use serde::{Deserialize, Serialize};

use crate::clock::now_ms;
use crate::config::Qwen2Config;
use crate::cost::{CostModel, PrefillFit, forward_flops, median};
use crate::error::Result;
use crate::gpu::Binding::*;
use crate::gpu::{Gpu, KernelSpec, PassTimer, read_buffer};
use crate::judge::{Engine, JudgeRequest, Judgment, Strategy};
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

impl BenchOptions {
    /// Engine sizes that fit this benchmark, within the device's binding limit.
    pub fn model_options(&self, config: &Qwen2Config, gpu: &Gpu) -> ModelOptions {
        let longest = self.lengths.iter().copied().max().unwrap_or(64) + 64;
        let batch = self.batch_sizes.iter().copied().max().unwrap_or(1);
        let per_judgment = self.doc_tokens + 64;
        // The MLP activations [tokens, intermediate] must fit one binding.
        let fit = (gpu.max_binding / (4 * config.intermediate_size as u64)) as usize;
        ModelOptions {
            max_tokens: longest.max(batch * per_judgment).min(fit),
            kv_slots: batch.max(1),
            kv_capacity: longest.max(per_judgment),
            max_rows: batch.max(1),
            max_choice_ids: 64,
        }
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
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelInfo {
    pub hidden_size: usize,
    pub layers: usize,
    pub parameters: usize,
    /// Weight bytes one decode step reads.
    pub decode_bytes: u64,
    pub synthetic: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Micro {
    /// Bytes read + written per second by a plain copy kernel, GB/s.
    pub copy_gbps: f64,
    /// f32 fused multiply-adds x 2 per second, GFLOP/s.
    pub fma_gflops: f64,
    /// Whether these came from GPU timestamps (else wall time).
    pub gpu_timed: bool,
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
    /// The cost model's A and B at these lengths, and the speed-up they predict.
    pub predicted_a_ms: f64,
    pub predicted_b_ms: f64,
    pub predicted_speedup: f64,
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

#[derive(Debug, Clone, Serialize)]
pub struct Roofline {
    /// Decode: weight bytes per step / median step time, and as a fraction of copy bandwidth.
    pub decode_gbps: f64,
    pub decode_fraction: f64,
    /// Prefill at the longest length: flops / prefill time, and as a fraction of FMA throughput.
    pub prefill_gflops: f64,
    pub prefill_fraction: f64,
    pub prefill_tokens: usize,
    /// Lower bound of a decode step at the measured copy bandwidth, ms.
    pub decode_floor_ms: f64,
}

/// The whole report: one JSON document the page can chart.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub device: DeviceInfo,
    pub model: ModelInfo,
    pub micro: Micro,
    pub sweep: Vec<SweepRow>,
    pub decode_ms_per_step: f64,
    pub cost_model: Option<CostModel>,
    pub batch: Vec<BatchPoint>,
    pub batch_skipped: Vec<String>,
    pub roofline: Roofline,
    /// Per-kernel GPU times ([`BenchOptions::profile`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// Wall-clock milliseconds everywhere; GPU milliseconds where labelled `gpu_`.
    pub units: &'static str,
}

const COPY: KernelSpec = KernelSpec {
    name: "bench_copy",
    source: include_str!("../../shaders/bench_copy.wgsl"),
    prelude: &[],
    bindings: &[Read, ReadWrite],
};
const FMA: KernelSpec = KernelSpec {
    name: "bench_fma",
    source: include_str!("../../shaders/bench_fma.wgsl"),
    prelude: &[],
    bindings: &[Uniform, ReadWrite],
};

/// Runs `dispatch` `repeats` times in one submit and returns ms per run (GPU time where the
/// device has timestamps, else wall time around submit and completion).
async fn time_kernel(gpu: &Gpu, repeats: u32, dispatch: impl Fn(&mut wgpu::ComputePass)) -> Result<(f64, bool)> {
    let timer = PassTimer::new(gpu, 1);
    let staging = gpu.staging("bench stamps", 16);
    let start = now_ms();
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    {
        let timestamp_writes = timer.as_ref().map(|t| t.writes(0));
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes });
        for _ in 0..repeats {
            dispatch(&mut pass);
        }
    }
    if let Some(t) = &timer {
        t.copy_to(&mut encoder, &staging, 0);
    }
    gpu.queue.submit([encoder.finish()]);
    let bytes = read_buffer(gpu, &staging, 16).await?;
    let wall = now_ms() - start;
    let gpu_ms = PassTimer::ms(gpu, &bytes, 0);
    Ok(if timer.is_some() && gpu_ms > 0.0 {
        (gpu_ms / f64::from(repeats), true)
    } else {
        (wall / f64::from(repeats), false)
    })
}

/// Copy bandwidth and FMA throughput of this device.
pub async fn microbenchmarks(gpu: &Gpu) -> Result<Micro> {
    let bytes = (64u64 << 20).min(gpu.max_binding / 16 * 16);
    let (src, dst) = (gpu.storage("copy src", bytes), gpu.storage("copy dst", bytes));
    let copy = gpu.kernel(&COPY, &[]);
    let group = gpu.bind(&copy, &[&src, &dst]);
    let groups = ((bytes / 16).div_ceil(256) as u32).min(4096);
    let dispatch = |p: &mut wgpu::ComputePass| {
        p.set_pipeline(&copy.pipeline);
        p.set_bind_group(0, &group, &[]);
        p.dispatch_workgroups(groups, 1, 1);
    };
    time_kernel(gpu, 1, dispatch).await?; // warm-up
    let (copy_ms, gpu_timed) = time_kernel(gpu, 8, dispatch).await?;
    let copy_gbps = 2.0 * bytes as f64 / (copy_ms * 1e6);

    let (threads, iters) = (256u32 * 1024, 512u32);
    let fma = gpu.kernel(&FMA, &[]);
    let shape = gpu.uniform("fma", &[iters, 0, 0, 0]);
    let out = gpu.storage("fma out", u64::from(threads) * 4);
    let group = gpu.bind(&fma, &[&shape, &out]);
    let dispatch = |p: &mut wgpu::ComputePass| {
        p.set_pipeline(&fma.pipeline);
        p.set_bind_group(0, &group, &[]);
        p.dispatch_workgroups(threads / 256, 1, 1);
    };
    time_kernel(gpu, 1, dispatch).await?;
    let (fma_ms, _) = time_kernel(gpu, 4, dispatch).await?;
    let flops = f64::from(threads) * f64::from(iters) * 8.0 * 4.0 * 2.0;
    Ok(Micro { copy_gbps, fma_gflops: flops / (fma_ms * 1e6), gpu_timed })
}

const SENTENCES: [&str; 4] = [
    "The harbour was quiet in the early morning and the sky above it was a clear, pale blue. ",
    "Fishing boats came back one by one, their red hulls bright against the grey stone walls. ",
    "A yellow tram crossed the bridge while gulls circled over the market stalls. ",
    "By noon the wind had turned and thin clouds drifted in from the west. ",
];

/// A document of about `tokens` tokens (whole words), from a few plain sentences.
pub fn document(engine: &Engine, tokens: usize) -> Result<String> {
    let mut text = String::new();
    let mut i = 0;
    let tok = engine.tokenizer();
    while tok.encode(&text)?.len() < tokens {
        text.push_str(SENTENCES[i % SENTENCES.len()]);
        i += 1;
    }
    while tok.encode(&text)?.len() > tokens {
        match text.trim_end().rfind(' ') {
            Some(cut) => text.truncate(cut + 1),
            None => break,
        }
    }
    Ok(text)
}

/// The article's example, its document sized so strategy B prefills about `tokens` tokens.
pub fn request_of_length(engine: &Engine, tokens: usize) -> Result<JudgeRequest> {
    let base = |doc: &str| JudgeRequest {
        system: Some("You are a careful judge. Answer in JSON.".into()),
        user: format!("{doc}\nWhat color was the sky?"),
        choices: vec!["blue".into(), "red".into(), "yellow".into()],
        prefix: None,
    };
    let empty = base("");
    let tok = engine.tokenizer();
    let overhead = tok.encode(&tok.chat_prompt(empty.system.as_deref(), &empty.user, empty.prefix())?)?.len();
    let doc = document(engine, tokens.saturating_sub(overhead))?;
    Ok(base(&doc))
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
    }
}

/// Runs `strategy` `repeats` times and returns the run with the median total.
async fn median_run(engine: &mut Engine, req: &JudgeRequest, strategy: Strategy, repeats: usize) -> Result<Judgment> {
    let mut runs = Vec::new();
    for _ in 0..repeats.max(1) {
        runs.push(engine.judge(req, strategy, 0).await?);
    }
    runs.sort_by(|a, b| a.timings_ms.total.total_cmp(&b.timings_ms.total));
    Ok(runs.swap_remove(runs.len() / 2))
}

/// The whole benchmark, on an engine it sizes for `options` first. `progress` hears a line
/// per step (the page shows it).
pub async fn run(engine: &mut Engine, options: &BenchOptions, progress: &mut dyn FnMut(&str)) -> Result<BenchReport> {
    let gpu = engine.model().gpu().clone();
    let config = engine.model().config().clone();
    engine.model_mut().grow_to(options.model_options(&config, &gpu))?;
    progress("microbenchmarks: copy bandwidth and FMA throughput");
    let micro = microbenchmarks(&gpu).await?;
    let warm = request_of_length(engine, 32)?;
    engine.judge(&warm, Strategy::TokenByToken, 0).await?;

    let mut sweep = Vec::new();
    let mut decode_steps_ms = Vec::new();
    let mut fit_points = Vec::new();
    for &length in &options.lengths {
        progress(&format!("prompt of {length} tokens: A, B, B full head"));
        let req = request_of_length(engine, length)?;
        let a = median_run(engine, &req, Strategy::TokenByToken, options.repeats).await?;
        let b = median_run(engine, &req, Strategy::PrefillOneToken, options.repeats).await?;
        let bf = median_run(engine, &req, Strategy::PrefillOneTokenFullHead, options.repeats).await?;
        decode_steps_ms.extend(a.timings_ms.decode.iter().copied());
        fit_points.push((bf.prompt_tokens as f64, bf.timings_ms.prefill));
        fit_points.push((a.prompt_tokens as f64, a.timings_ms.prefill));
        sweep.push(SweepRow {
            length,
            speedup: a.timings_ms.total / b.timings_ms.total,
            speedup_full_head: a.timings_ms.total / bf.timings_ms.total,
            a: point(&a),
            b: point(&b),
            b_full_head: point(&bf),
            predicted_a_ms: 0.0,
            predicted_b_ms: 0.0,
            predicted_speedup: 0.0,
        });
    }
    let decode_ms = median(&decode_steps_ms);
    let cost_model = PrefillFit::fit(&fit_points).map(|prefill| CostModel { prefill, decode_ms });
    if let Some(m) = &cost_model {
        for row in &mut sweep {
            row.predicted_a_ms = m.predict(row.a.prompt_tokens as f64, row.a.decode_steps as f64);
            row.predicted_b_ms = m.predict(row.b_full_head.prompt_tokens as f64, 0.0);
            row.predicted_speedup = row.predicted_a_ms / row.predicted_b_ms;
        }
    }

    let mut batch = Vec::new();
    let mut batch_skipped = Vec::new();
    let doc = document(engine, options.doc_tokens)?;
    for &n in &options.batch_sizes {
        let reqs: Vec<JudgeRequest> = (0..n)
            .map(|i| JudgeRequest {
                system: Some("You are a careful judge. Answer in JSON.".into()),
                user: format!(
                    "{doc}\nQuestion {}: was the {} mentioned?",
                    i + 1,
                    ["sky", "boat", "tram", "wind"][i % 4]
                ),
                choices: vec!["yes".into(), "no".into()],
                prefix: None,
            })
            .collect();
        for shared in [false, true] {
            progress(&format!("batch of {n} judgments{}", if shared { ", shared prefix" } else { "" }));
            match engine.judge_batch(&reqs, shared).await {
                Ok((record, _)) => batch.push(BatchPoint {
                    judgments: n,
                    shared_prefix: shared,
                    prefill_tokens: record.batch_prefill_tokens + record.shared_prefix_tokens,
                    longest_prompt_tokens: record.longest_prompt_tokens,
                    total_ms: record.timings_ms.total,
                    judgments_per_s: record.judgments_per_s,
                }),
                Err(e) => batch_skipped.push(format!("{n} judgments (shared prefix {shared}): {e}")),
            }
        }
    }

    let profile = if options.profile {
        progress("profile: one prefill and one decode step per length, kernel by kernel");
        Some(crate::profile::profile(engine.model_mut(), &options.lengths, &micro).await?)
    } else {
        None
    };

    let decode_bytes = engine.model().weights().decode_bytes();
    let decode_gbps = if decode_ms > 0.0 { decode_bytes as f64 / (decode_ms * 1e6) } else { 0.0 };
    let longest = sweep.last();
    let (prefill_tokens, prefill_ms) =
        longest.map_or((0, 0.0), |r| (r.b_full_head.prompt_tokens, r.b_full_head.prefill_ms));
    let prefill_gflops =
        if prefill_ms > 0.0 { forward_flops(&config, prefill_tokens, 0, 1) / (prefill_ms * 1e6) } else { 0.0 };
    let info = &gpu.info;
    Ok(BenchReport {
        device: DeviceInfo {
            name: info.name.clone(),
            backend: format!("{:?}", info.backend),
            timestamps: gpu.timestamps,
            max_binding_mib: gpu.max_binding >> 20,
            kernels: gpu.kernel_family().name(),
        },
        model: ModelInfo {
            hidden_size: config.hidden_size,
            layers: config.num_hidden_layers,
            parameters: config.parameter_count(),
            decode_bytes,
            synthetic: engine.model().weights().synthetic,
        },
        roofline: Roofline {
            decode_gbps,
            decode_fraction: decode_gbps / micro.copy_gbps,
            prefill_gflops,
            prefill_fraction: prefill_gflops / micro.fma_gflops,
            prefill_tokens,
            decode_floor_ms: decode_bytes as f64 / (micro.copy_gbps * 1e6),
        },
        micro,
        sweep,
        decode_ms_per_step: decode_ms,
        cost_model,
        batch,
        batch_skipped,
        profile,
        units: "ms of wall time unless the field says gpu_; GB/s = 1e9 bytes per second",
    })
}
