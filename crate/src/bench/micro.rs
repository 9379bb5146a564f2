//! Two microbenchmarks for the roofline: the device's copy bandwidth and FMA throughput, each
//! timed over repeats in one submit.

use super::Micro;
use crate::clock::now_ms;
use crate::error::Result;
use crate::gpu::Binding::*;
use crate::gpu::{Gpu, KernelSpec, PassTimer, read_buffer};

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

/// Runs `dispatch` `repeats` times in one submit and returns ms per run (GPU time where the
/// device has timestamps, else wall time around submit and completion).
async fn time_kernel(gpu: &Gpu, repeats: u32, dispatch: impl Fn(&mut wgpu::ComputePass)) -> Result<(f64, bool)> {
    let timer = PassTimer::new(gpu, 1);
    let staging = gpu.staging("bench stamps", 16);
    let start = now_ms();
    let mut encoder = gpu.device().create_command_encoder(&Default::default());
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
