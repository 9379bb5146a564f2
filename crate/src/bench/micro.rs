//! Microbenchmarks for the roofline: the device's copy and read bandwidths and FMA throughput,
//! the linear layers' kernels alone at Qwen2.5-0.5B's shapes, for a decode step and for a
//! prefill (with and without split-K where the layer splits), and a prefill's attention by each
//! kernel that can run it, each timed over repeats in one submit.

use super::read_probe::ReadProbe;
use super::{AttentionMicro, AttentionPathMicro, LinearMicro, MatvecShapeMicro, Micro, PrefillLinearMicro, SplitMicro};
use crate::clock::now_ms;
use crate::config::{Qwen2Config, rope_inv_freq};
use crate::error::{Error, Result};
use crate::gpu::Binding::*;
use crate::gpu::{DestroyOnDrop, Dispatcher, Gpu, Kernel, KernelSpec, PackedMatrix, PassTimer, Work, read_buffer};
use crate::ops::{
    AttendedKeys, Attention, AttentionBuffers, AttentionDims, AttentionPath, Linear, LinearBuffers, MATVEC_LANES,
    SplitPartials, Store, activation_part, fill_synthetic, linear_input, workgroup,
};
use crate::quant::WeightFormat;
use crate::weights::Dtype;

/// (K, N) of the linear microbenchmarks: Qwen2.5-0.5B's o_proj, gate_proj (and up_proj) and
/// down_proj.
pub const LINEAR_SHAPES: [(usize, usize); 3] = [(896, 896), (896, 4864), (4864, 896)];

/// Token rows of the prefill microbenchmark: a prompt of about 128 tokens, where B's target
/// lies and where 0.5B's down_proj makes too few tiles to fill a large GPU unless it splits K.
pub const PREFILL_ROWS: usize = 128;

const COPY: KernelSpec = KernelSpec {
    name: "bench_copy",
    source: include_str!("../../../shaders/bench_copy.wgsl"),
    prelude: &[],
    bindings: &[Read, ReadWrite],
};
const FMA: KernelSpec = KernelSpec {
    name: "bench_fma",
    source: include_str!("../../../shaders/bench_fma.wgsl"),
    prelude: &[],
    bindings: &[Uniform, ReadWrite],
};

/// Threads per workgroup of the copy, read and FMA probes (their `WORKGROUP`).
pub(super) const PROBE_WORKGROUP: u32 = 256;

/// Workgroups the copy and read probes run, each timed, the fastest taken: a large GPU needs
/// many (4096 of 256 threads are several times what one holds at once; at 1024 each thread
/// loops four times as long, so a read workgroup's closing fold, its threads' atomics on one
/// word, weighs less: neither is measured on a GPU yet); a CPU implementation runs a
/// workgroup as a loop over its threads, switching between them at each barrier, so there
/// fewer, longer workgroups read faster. Measured on the read probe: lavapipe 6-9 GB/s at
/// 32-64 workgroups, 3-4 GB/s at 4096; SwiftShader 1.1-1.7 GB/s at 16-64, 0.2 GB/s at 4096.
/// The copy: lavapipe 1.8 GB/s at 4096, 1.2 at 64; SwiftShader 2.8 at 16, 1.7 at 4096.
const PROBE_GROUPS: [u32; 4] = [16, 64, 1024, MAX_PROBE_GROUPS];

/// The most of [`PROBE_GROUPS`].
pub(super) const MAX_PROBE_GROUPS: u32 = 4096;

/// Shortest total a timing takes: browsers round timestamps to 100 µs, and a submit's own
/// latency is of that order, so a run of a fast kernel on a large GPU is repeated until the
/// whole takes at least this long.
const MIN_TIMED_MS: f64 = 2.0;

/// Most runs in one timing (a kernel that still takes under [`MIN_TIMED_MS`] for this many is
/// timed as it is).
const MAX_REPEATS: u32 = 4096;

/// A run that lasts this long is timed once after its warm-up: it lies far above a browser's
/// timestamp rounding and a submit's latency, and repeats of it would only add time (on a CPU
/// implementation, seconds to each shape: the decode microbenchmark reads 96 MB a run).
const LONG_RUN_MS: f64 = 50.0;

/// ms per run of `dispatch` (and whether it is GPU time), after a warm-up: the first runs pay
/// for what later ones reuse (a pipeline compiled on first use, memory paged in). The timing is
/// [`repeat_until_timed`] from `repeats` runs, or from one where a warm run lasts at least
/// [`LONG_RUN_MS`].
async fn time_kernel(gpu: &Gpu, repeats: u32, dispatch: impl Fn(&mut Dispatcher)) -> Result<(f64, bool)> {
    let (warm_ms, _) = repeat_until_timed(gpu, 1, &dispatch).await?;
    let repeats = if warm_ms >= LONG_RUN_MS { 1 } else { repeats };
    repeat_until_timed(gpu, repeats, &dispatch).await
}

/// Runs `dispatch` at least `repeats` times in one pass and submit, eight times as many until
/// the whole takes [`MIN_TIMED_MS`], and returns ms per run: GPU time where the device has
/// timestamps, else wall time around submit and completion (and whether it was GPU time). With
/// timestamps the GPU's clock decides when to stop: a rounded clock reads 0 for a short run
/// while the wall time, a submit and a readback, can already pass [`MIN_TIMED_MS`].
async fn repeat_until_timed(gpu: &Gpu, repeats: u32, dispatch: &impl Fn(&mut Dispatcher)) -> Result<(f64, bool)> {
    let mut repeats = repeats.max(1);
    loop {
        let (gpu_ms, wall_ms) = time_runs(gpu, repeats, dispatch).await?;
        let total_ms = gpu_ms.unwrap_or(wall_ms);
        if total_ms >= MIN_TIMED_MS || repeats >= MAX_REPEATS {
            let timed = gpu_ms.filter(|&ms| ms > 0.0);
            return Ok((timed.unwrap_or(wall_ms) / f64::from(repeats), timed.is_some()));
        }
        repeats = (repeats * 8).min(MAX_REPEATS);
    }
}

/// Total ms of `repeats` runs of `dispatch` in one submit: on the GPU's clock where the device
/// has timestamps, and on the wall clock.
async fn time_runs(gpu: &Gpu, repeats: u32, dispatch: &impl Fn(&mut Dispatcher)) -> Result<(Option<f64>, f64)> {
    let timer = PassTimer::new(gpu, 1);
    let staging = gpu.staging("bench stamps", 16);
    let _freed = DestroyOnDrop(vec![&staging]);
    let start = now_ms();
    let mut encoder = gpu.device().create_command_encoder(&Default::default());
    {
        let timestamp_writes = timer.as_ref().map(|t| t.writes(0));
        let mut pass = Dispatcher::new(&mut encoder, "microbenchmark", timestamp_writes);
        for _ in 0..repeats {
            dispatch(&mut pass);
        }
    }
    if let Some(t) = &timer {
        t.copy_to(&mut encoder, &staging, 0);
    }
    gpu.queue().submit([encoder.finish()]);
    let bytes = read_buffer(gpu, &staging, 16).await?;
    let wall = now_ms() - start;
    Ok((timer.map(|_| PassTimer::ms(gpu, &bytes, 0)), wall))
}

/// Copy and read bandwidths and FMA throughput of this device, the linear kernels alone, and
/// attention over a prompt of `attention_tokens` tokens with `config`'s heads.
pub async fn microbenchmarks(gpu: &Gpu, config: &Qwen2Config, attention_tokens: usize) -> Result<Micro> {
    let bytes = (64u64 << 20).min(gpu.max_binding() / 16 * 16);
    let (src, dst) = (gpu.storage("copy src", bytes), gpu.storage("copy dst", bytes));
    let _freed = DestroyOnDrop(vec![&src, &dst]);
    let probe_workgroup = [workgroup(PROBE_WORKGROUP)];
    let copy = gpu.kernel(&COPY, &probe_workgroup);
    let group = gpu.bind(&copy, &[&src, &dst]);
    let copy_groups = |at_most: u32| ((bytes / 16).div_ceil(u64::from(PROBE_WORKGROUP)) as u32).min(at_most);
    let (copy, group) = (&copy, &group);
    let dispatch =
        |at_most| move |p: &mut Dispatcher| p.dispatch(copy, group, (copy_groups(at_most), 1, 1), Work::default());
    let (copy_ms, gpu_timed) = fastest_grid(gpu, dispatch).await?;
    let copy_gbps = 2.0 * bytes as f64 / (copy_ms * 1e6);

    let dispatch_us = dispatch_us(gpu, copy).await?;
    let (read_gbps, read_from) = read_bandwidth(gpu, bytes).await?;

    let (threads, iters) = (PROBE_WORKGROUP * 1024, 512u32);
    let fma = gpu.kernel(&FMA, &probe_workgroup);
    let shape = gpu.uniform("fma", &[iters, 0, 0, 0]);
    let out = gpu.storage("fma out", u64::from(threads) * 4);
    let _fma_freed = DestroyOnDrop(vec![&out]);
    let group = gpu.bind(&fma, &[&shape, &out]);
    let dispatch = |p: &mut Dispatcher| p.dispatch(&fma, &group, (threads / PROBE_WORKGROUP, 1, 1), Work::default());
    let (fma_ms, _) = time_kernel(gpu, 4, dispatch).await?;
    let flops = f64::from(threads) * f64::from(iters) * 8.0 * 4.0 * 2.0;
    let fma_gflops = flops / (fma_ms * 1e6);
    let (mut linear, mut prefill_linear) = (Vec::new(), Vec::new());
    for (k, n) in LINEAR_SHAPES {
        linear.push(linear_decode(gpu, k, n, (copy_gbps, read_gbps)).await?);
        prefill_linear.push(linear_prefill(gpu, k, n, fma_gflops).await?);
    }
    let prefill_attention = attention_prefill(gpu, config, attention_tokens, fma_gflops).await?;
    Ok(Micro {
        copy_gbps,
        read_gbps,
        read_from,
        fma_gflops,
        gpu_timed,
        dispatch_us,
        linear,
        prefill_linear,
        prefill_attention,
    })
}

/// Columns of the read probe's matrix: bf16 rows of 8 KiB.
const READ_COLS: usize = 4096;

/// GB/s the read probe reaches over a synthetic bf16 matrix of about `bytes` (one chunk at
/// most), and where it read them from (see [`ReadProbe`]).
async fn read_bandwidth(gpu: &Gpu, bytes: u64) -> Result<(f64, &'static str)> {
    let row_bytes = WeightFormat::Float(Dtype::BF16).row_bytes(READ_COLS) as u64;
    let rows = ((bytes / row_bytes) as usize).min(PackedMatrix::rows_per_chunk(gpu, row_bytes)).max(1);
    let matrix = synthetic_matrices(gpu, 1, READ_COLS, rows)?;
    let probe = &ReadProbe::new(gpu, &matrix[0]);
    let (ms, _) = fastest_grid(gpu, |at_most| move |p: &mut Dispatcher| probe.dispatch(p, at_most)).await?;
    Ok((probe.bytes() as f64 / (ms * 1e6), probe.source))
}

/// The fastest timing of a probe over [`PROBE_GROUPS`]: `dispatch(at_most)` runs it in at most
/// that many workgroups. ms per run, and whether it is GPU time.
async fn fastest_grid<D: Fn(&mut Dispatcher)>(gpu: &Gpu, dispatch: impl Fn(u32) -> D) -> Result<(f64, bool)> {
    let mut fastest = (f64::INFINITY, false);
    for at_most in PROBE_GROUPS {
        let timing = time_kernel(gpu, 8, dispatch(at_most)).await?;
        if timing.0 < fastest.0 {
            fastest = timing;
        }
    }
    Ok(fastest)
}

/// Dispatches in the chain that [`dispatch_us`] times, at least (a device that runs them in
/// under [`MIN_TIMED_MS`] is timed over eight times as many, and so on).
const CHAINED_DISPATCHES: u32 = 256;

/// Microseconds of GPU time per dispatch in a chain where each must wait for the one before:
/// [`CHAINED_DISPATCHES`] or more copies of 4 KiB by one workgroup, back and forth between two
/// buffers, so each reads what the one before wrote (and the device puts a barrier between them,
/// as between a forward's kernels). The work itself is a few hundred nanoseconds at most; what is
/// left is the launch and the barrier.
async fn dispatch_us(gpu: &Gpu, copy: &Kernel) -> Result<f64> {
    let (a, b) = (gpu.storage("chain a", 4096), gpu.storage("chain b", 4096));
    let (there, back) = (gpu.bind(copy, &[&a, &b]), gpu.bind(copy, &[&b, &a]));
    let pair = |p: &mut Dispatcher| {
        p.dispatch(copy, &there, (1, 1, 1), Work::default());
        p.dispatch(copy, &back, (1, 1, 1), Work::default());
    };
    let (ms_per_pair, _) = time_kernel(gpu, CHAINED_DISPATCHES / 2, pair).await?;
    Ok(ms_per_pair * 1000.0 / 2.0)
}

/// The prefill paths of [`Attention`], each by its name in [`AttentionPathMicro`].
const PREFILL_ATTENTION_PATHS: [(AttentionPath, &str); 3] =
    [(AttentionPath::Whole, "whole"), (AttentionPath::Grouped, "grouped"), (AttentionPath::Direct, "direct")];

/// One sequence of `tokens` tokens attending causally to itself, as in a prefill (its kv_write
/// included), with `config`'s heads, by each path a prefill can take on any device: the
/// ratios say which suits this device.
async fn attention_prefill(gpu: &Gpu, config: &Qwen2Config, tokens: usize, fma_gflops: f64) -> Result<AttentionMicro> {
    let (heads, kv_heads, head_dim) = (config.num_attention_heads, config.num_key_value_heads, config.head_dim());
    let dims = AttentionDims { heads, kv_heads, head_dim, capacity: tokens };
    let kv_dim = kv_heads * head_dim;
    let q_stride = heads * head_dim + 2 * kv_dim;
    let meta: Vec<u32> = (0..tokens as u32).flat_map(|p| [0, p]).collect();
    let token_meta = gpu.storage_from("bench token_meta", &meta);
    let (q, out) = (
        gpu.storage("bench qkv", 4 * tokens as u64 * q_stride as u64),
        gpu.storage("bench out", 4 * tokens as u64 * (heads * head_dim) as u64),
    );
    let (k_cache, v_cache) = (
        gpu.storage("bench k", 4 * tokens as u64 * kv_dim as u64),
        gpu.storage("bench v", 4 * tokens as u64 * kv_dim as u64),
    );
    let partial = gpu.storage("bench partial", dims.partial_bytes());
    let inv_freq = gpu.storage_from("bench inv_freq", &rope_inv_freq(head_dim, config.rope_theta));
    let _freed = DestroyOnDrop(vec![&token_meta, &q, &out, &k_cache, &v_cache, &partial, &inv_freq]);
    let io = AttentionBuffers {
        token_meta: &token_meta,
        q: &q,
        q_stride,
        k_cache: &k_cache,
        v_cache: &v_cache,
        out: &out,
        partial: &partial,
        inv_freq: &inv_freq,
    };
    let attention = Attention::new(gpu, io, dims)?;
    let pairs = tokens as u64 * (tokens as u64 + 1) / 2;
    let keys = AttendedKeys { longest: tokens as u32, pairs, rows: tokens as u64, decode_step: false };
    let flops = 4.0 * (heads * head_dim) as f64 * pairs as f64;
    let mut paths = Vec::new();
    for (path, name) in PREFILL_ATTENTION_PATHS {
        let mut listing = Vec::new();
        attention.encode_path(&mut Dispatcher::listing(&mut listing), tokens as u32, keys, path);
        // The kernel after kv_write: another path's where this one cannot take these heads.
        let kernel = listing.last().map_or("none", |l| l.kernel);
        let run = |p: &mut Dispatcher| attention.encode_path(p, tokens as u32, keys, path);
        let (gpu_ms, _) = time_kernel(gpu, 2, run).await?;
        let gflops = flops / (gpu_ms * 1e6);
        paths.push(AttentionPathMicro { path: name, kernel, gpu_ms, gflops, fma_fraction: gflops / fma_gflops });
    }
    Ok(AttentionMicro { tokens, heads, kv_heads, head_dim, paths })
}

/// Synthetic bf16 `[n, k]` weight matrices, filled on the GPU.
fn synthetic_matrices(gpu: &Gpu, count: usize, k: usize, n: usize) -> Result<Vec<PackedMatrix>> {
    let bf16 = WeightFormat::Float(Dtype::BF16);
    let weights =
        (0..count).map(|_| PackedMatrix::new(gpu, "bench weights", n, k, bf16)).collect::<Result<Vec<_>>>()?;
    let mut encoder = gpu.device().create_command_encoder(&Default::default());
    {
        let mut pass = Dispatcher::new(&mut encoder, "bench weights", None);
        for (i, w) in weights.iter().enumerate() {
            fill_synthetic(gpu, &mut pass, w, i as u32, 0.02);
        }
    }
    gpu.queue().submit([encoder.finish()]);
    Ok(weights)
}

/// [`PREFILL_ROWS`] token rows times a bf16 `[n, k]` matrix by the kernel a prefill uses on this
/// device (matmul, or linear_direct on CPU-like devices), and where the layer splits K at that
/// size, the same layer unsplit beside it, both in this run.
async fn linear_prefill(gpu: &Gpu, k: usize, n: usize, fma_gflops: f64) -> Result<PrefillLinearMicro> {
    let (m, repeats) = (PREFILL_ROWS, 4);
    let weights = synthetic_matrices(gpu, 1, k, n)?;
    let (x, y) = (linear_input(gpu, "bench x", (m * k * 4) as u64), gpu.storage("bench y", (m * n * 4) as u64));
    let _freed = DestroyOnDrop(vec![&x, &y]);
    let tokens = gpu.uniform("bench tokens", &[m as u32, 0, 0, 0]);
    let partials = SplitPartials::new(gpu);
    // x as a prefill's MLP activation is, where K is its width (in parts on lavapipe).
    let x_part = activation_part(gpu, k);
    let io = |partials| LinearBuffers { partials, x_part, ..LinearBuffers::whole(&tokens, &x, None, &y, n) };
    let gflops = |ms: f64| 2.0 * (m * k * n) as f64 / (ms * 1e6);
    let unsplit = Linear::new(gpu, &weights[0], io(None), Store::Overwrite);
    let gpu_ms = time_layer(gpu, &unsplit, m as u32, repeats).await?;
    let layer = Linear::new(gpu, &weights[0], io(partials.as_ref()), Store::Overwrite);
    let split = match layer.split_parts(m as u32) {
        Some(parts) => {
            let gpu_ms = time_layer(gpu, &layer, m as u32, repeats).await?;
            Some(SplitMicro { parts, gpu_ms, gflops: gflops(gpu_ms), fma_fraction: gflops(gpu_ms) / fma_gflops })
        }
        None => None,
    };
    let kernel = unsplit.kernel_name(m as u32);
    let fma_fraction = gflops(gpu_ms) / fma_gflops;
    Ok(PrefillLinearMicro { m, k, n, kernel, gpu_ms, gflops: gflops(gpu_ms), fma_fraction, split })
}

/// ms per run of `layer` over `m` token rows, after a warm-up.
async fn time_layer(gpu: &Gpu, layer: &Linear, m: u32, repeats: u32) -> Result<f64> {
    let run = |p: &mut Dispatcher| layer.encode(p, m);
    Ok(time_kernel(gpu, repeats, run).await?.0)
}

/// Weight bytes the linear microbenchmark cycles through: more than a large GPU's L2 cache
/// (50 MB on an H100/H200) or a CPU's last-level cache, so every dispatch reads from memory as a
/// decode step's layers do.
const LINEAR_BYTES: u64 = 96 << 20;

/// One token row times a bf16 `[n, k]` matrix of synthetic weights, by the kernel a decode
/// step uses on this device (matvec, or linear_direct on CPU-like devices): one dispatch per
/// matrix over as many matrices as make [`LINEAR_BYTES`], each read once per run.
async fn linear_decode(gpu: &Gpu, k: usize, n: usize, (copy_gbps, read_gbps): (f64, f64)) -> Result<LinearMicro> {
    // GB/s as fractions of the copy and read probes'.
    let fractions = |gbps: f64| (gbps / copy_gbps, gbps / read_gbps);
    let count = LINEAR_BYTES.div_ceil(WeightFormat::Float(Dtype::BF16).row_bytes(k) as u64 * n as u64) as usize;
    let weights = synthetic_matrices(gpu, count, k, n)?;
    let (x, y) = (linear_input(gpu, "bench x", (k * 4) as u64), gpu.storage("bench y", (n * 4) as u64));
    let _freed = DestroyOnDrop(vec![&x, &y]);
    let tokens = gpu.uniform("bench tokens", &[1u32, 0, 0, 0]);
    let io = || LinearBuffers::whole(&tokens, &x, None, &y, n);
    let bytes = weights[0].bytes() + 4 * (k + n) as u64;
    // ms per layer and GB/s of `layers`, one dispatch each, after a warm-up.
    let time = |layers: Vec<Linear>| async move {
        let run = |p: &mut Dispatcher| layers.iter().for_each(|l| l.encode(p, 1));
        let ms = time_kernel(gpu, 2, run).await?.0 / count as f64;
        Ok::<_, crate::Error>((ms, bytes as f64 / (ms * 1e6)))
    };
    let layers: Vec<Linear> = weights.iter().map(|w| Linear::new(gpu, w, io(), Store::Overwrite)).collect();
    let (kernel, lanes) = (layers[0].kernel_name(1), layers[0].matvec_lanes());
    let (gpu_ms, gbps) = time(layers).await?;
    let other_shape = match lanes.and_then(|picked| MATVEC_LANES.into_iter().find(|&l| l != picked)) {
        Some(other) => {
            let layers = weights.iter().map(|w| Linear::with_matvec_lanes(gpu, w, io(), Store::Overwrite, other));
            let layers =
                layers.collect::<Option<_>>().ok_or_else(|| Error::Gpu(format!("no matvec {other} lanes wide")))?;
            let (gpu_ms, gbps) = time(layers).await?;
            let (copy_fraction, read_fraction) = fractions(gbps);
            Some(MatvecShapeMicro { lanes: other, gpu_ms, gbps, copy_fraction, read_fraction })
        }
        None => None,
    };
    let (copy_fraction, read_fraction) = fractions(gbps);
    Ok(LinearMicro { k, n, kernel, gpu_ms, gbps, copy_fraction, read_fraction, lanes, other_shape })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuOptions;
    use std::cell::Cell;

    #[test]
    fn a_short_kernel_is_timed_over_repeats_that_last_long_enough() {
        let gpu = Gpu::new_blocking(GpuOptions::default()).unwrap();
        let copy = gpu.kernel(&COPY, &[workgroup(PROBE_WORKGROUP)]);
        let (a, b) = (gpu.storage("a", 4096), gpu.storage("b", 4096));
        let group = gpu.bind(&copy, &[&a, &b]);
        let runs = Cell::new(0u32);
        let dispatch = |p: &mut Dispatcher| {
            runs.set(runs.get() + 1);
            p.dispatch(&copy, &group, (1, 1, 1), Work::default());
        };
        // One copy of 4 KiB takes microseconds anywhere once warm: it is run 1, 8, 64... times
        // until the last try lasts MIN_TIMED_MS. A busy host can stretch a single try past that,
        // so of three timings one at least must have repeated.
        pollster::block_on(time_kernel(&gpu, 1, dispatch)).unwrap(); // warm-up
        let mut repeated = 0;
        for _ in 0..3 {
            runs.set(0);
            let (ms, gpu_timed) = pollster::block_on(repeat_until_timed(&gpu, 1, &dispatch)).unwrap();
            // The tries' sizes, from the dispatches counted.
            let (mut tries, mut size) = (Vec::new(), 1);
            while tries.iter().sum::<u32>() < runs.get() {
                tries.push(size);
                size = (size * 8).min(MAX_REPEATS);
            }
            assert_eq!(tries.iter().sum::<u32>(), runs.get(), "{tries:?}");
            let last = *tries.last().unwrap();
            assert!(ms * f64::from(last) >= MIN_TIMED_MS || last == MAX_REPEATS, "{ms} ms x {last}");
            assert_eq!(gpu_timed, gpu.timestamps(), "GPU time wherever the device has timestamps");
            repeated += usize::from(tries.len() > 1);
        }
        assert!(repeated > 0, "a copy of 4 KiB was timed once, three times over");
    }

    #[test]
    fn a_long_kernel_is_timed_once_after_its_warm_up() {
        let gpu = Gpu::new_blocking(GpuOptions::default()).unwrap();
        let probe_workgroup = [workgroup(PROBE_WORKGROUP)];
        let fma = &gpu.kernel(&FMA, &probe_workgroup);
        let out = gpu.storage("fma out", u64::from(PROBE_WORKGROUP) * 1024 * 4);
        let runs = &Cell::new(0u32);
        let probe = |iters: u32| {
            let shape = gpu.uniform("fma", &[iters, 0, 0, 0]);
            let group = gpu.bind(fma, &[&shape, &out]);
            move |p: &mut Dispatcher| {
                runs.set(runs.get() + 1);
                p.dispatch(fma, &group, (1024, 1, 1), Work::default());
            }
        };
        // The FMA probe made long enough that a run lasts twice LONG_RUN_MS on this device (a
        // CPU implementation needs a few hundred rounds, a large GPU some hundred thousand).
        let mut iters = 64;
        while pollster::block_on(repeat_until_timed(&gpu, 1, &probe(iters))).unwrap().0 < 2.0 * LONG_RUN_MS {
            iters *= 2;
        }
        let long = probe(iters);
        runs.set(0);
        let (ms, _) = pollster::block_on(time_kernel(&gpu, 4, long)).unwrap();
        assert_eq!(runs.get(), 2, "a warm-up and one timed run, not 4 ({iters} rounds, {ms} ms a run)");
        assert!(ms >= LONG_RUN_MS, "{ms} ms a run");
    }
}
