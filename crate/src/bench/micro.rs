//! Microbenchmarks for the roofline: the device's copy bandwidth and FMA throughput, and the
//! linear layers' decode kernel alone at Qwen2.5-0.5B's shapes, each timed over repeats in one
//! submit.

use super::{LinearMicro, Micro};
use crate::clock::now_ms;
use crate::error::Result;
use crate::gpu::Binding::*;
use crate::gpu::{Dispatcher, Gpu, KernelSpec, PackedMatrix, PassTimer, Work, read_buffer};
use crate::ops::{Linear, LinearBuffers, Store, fill_synthetic, workgroup};
use crate::quant::WeightFormat;
use crate::weights::Dtype;

/// (K, N) of the decode microbenchmark: Qwen2.5-0.5B's o_proj, gate_proj (and up_proj) and
/// down_proj.
pub const LINEAR_SHAPES: [(usize, usize); 3] = [(896, 896), (896, 4864), (4864, 896)];

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

/// Threads per workgroup of the copy and FMA probes (their `WORKGROUP`).
const PROBE_WORKGROUP: u32 = 256;

/// Runs `dispatch` `repeats` times in one pass and submit and returns ms per run (GPU time where
/// the device has timestamps, else wall time around submit and completion).
async fn time_kernel(gpu: &Gpu, repeats: u32, dispatch: impl Fn(&mut Dispatcher)) -> Result<(f64, bool)> {
    let timer = PassTimer::new(gpu, 1);
    let staging = gpu.staging("bench stamps", 16);
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
    let gpu_ms = PassTimer::ms(gpu, &bytes, 0);
    Ok(if timer.is_some() && gpu_ms > 0.0 {
        (gpu_ms / f64::from(repeats), true)
    } else {
        (wall / f64::from(repeats), false)
    })
}

/// Copy bandwidth and FMA throughput of this device.
pub async fn microbenchmarks(gpu: &Gpu) -> Result<Micro> {
    let bytes = (64u64 << 20).min(gpu.max_binding() / 16 * 16);
    let (src, dst) = (gpu.storage("copy src", bytes), gpu.storage("copy dst", bytes));
    let probe_workgroup = [workgroup(PROBE_WORKGROUP)];
    let copy = gpu.kernel(&COPY, &probe_workgroup);
    let group = gpu.bind(&copy, &[&src, &dst]);
    let groups = ((bytes / 16).div_ceil(u64::from(PROBE_WORKGROUP)) as u32).min(4096);
    let dispatch = |p: &mut Dispatcher| p.dispatch(&copy, &group, (groups, 1, 1), Work::default());
    time_kernel(gpu, 1, dispatch).await?; // warm-up
    let (copy_ms, gpu_timed) = time_kernel(gpu, 8, dispatch).await?;
    let copy_gbps = 2.0 * bytes as f64 / (copy_ms * 1e6);

    let (threads, iters) = (PROBE_WORKGROUP * 1024, 512u32);
    let fma = gpu.kernel(&FMA, &probe_workgroup);
    let shape = gpu.uniform("fma", &[iters, 0, 0, 0]);
    let out = gpu.storage("fma out", u64::from(threads) * 4);
    let group = gpu.bind(&fma, &[&shape, &out]);
    let dispatch = |p: &mut Dispatcher| p.dispatch(&fma, &group, (threads / PROBE_WORKGROUP, 1, 1), Work::default());
    time_kernel(gpu, 1, dispatch).await?;
    let (fma_ms, _) = time_kernel(gpu, 4, dispatch).await?;
    let flops = f64::from(threads) * f64::from(iters) * 8.0 * 4.0 * 2.0;
    let mut linear = Vec::new();
    for (k, n) in LINEAR_SHAPES {
        linear.push(linear_decode(gpu, k, n, copy_gbps).await?);
    }
    Ok(Micro { copy_gbps, fma_gflops: flops / (fma_ms * 1e6), gpu_timed, linear })
}

/// Weight bytes the linear microbenchmark cycles through: more than a large GPU's L2 cache
/// (50 MB on an H100/H200) or a CPU's last-level cache, so every dispatch reads from memory as a
/// decode step's layers do.
const LINEAR_BYTES: u64 = 96 << 20;

/// One token row times a bf16 `[n, k]` matrix of synthetic weights, by the kernel a decode
/// step uses on this device (matvec, or linear_direct on CPU-like devices): one dispatch per
/// matrix over as many matrices as make [`LINEAR_BYTES`], each read once per run.
async fn linear_decode(gpu: &Gpu, k: usize, n: usize, copy_gbps: f64) -> Result<LinearMicro> {
    let bf16 = WeightFormat::Float(Dtype::BF16);
    let count = LINEAR_BYTES.div_ceil(bf16.row_bytes(k) as u64 * n as u64) as usize;
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
    let (x, y) = (gpu.storage("bench x", (k * 4) as u64), gpu.storage("bench y", (n * 4) as u64));
    let tokens = gpu.uniform("bench tokens", &[1u32, 0, 0, 0]);
    let io = || LinearBuffers { tokens: &tokens, x: &x, bias: None, y: &y, out_cols: n, first_col: 0 };
    let layers: Vec<Linear> = weights.iter().map(|w| Linear::new(gpu, w, io(), Store::Overwrite)).collect();
    let run = |p: &mut Dispatcher| layers.iter().for_each(|l| l.encode(p, 1));
    time_kernel(gpu, 1, run).await?; // warm-up
    let (ms, _) = time_kernel(gpu, 2, run).await?;
    let ms = ms / count as f64;
    let bytes = weights[0].bytes() + 4 * (k + n) as u64;
    weights.iter().for_each(PackedMatrix::destroy);
    let gbps = bytes as f64 / (ms * 1e6);
    Ok(LinearMicro { k, n, kernel: layers[0].decode_kernel(), gpu_ms: ms, gbps, copy_fraction: gbps / copy_gbps })
}
