//! The per-kernel profile: one prefill and one decode step at each prompt length, every dispatch
//! timed on its own (see [`crate::gpu::Dispatcher`]) beside the bytes it must move and the FLOPs
//! it must do, and the same forward's GPU time without profiling, measured in the same run, so
//! the kernels' sum can be checked against the phase they make up.

use serde::Serialize;

use crate::bench::Micro;
use crate::error::Result;
use crate::model::{ForwardOut, Model, Readout, Sequence};

#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    pub phases: Vec<Phase>,
}

/// One forward call: a prefill of `tokens` tokens, or one decode step after `context` tokens.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// "prefill" or "decode".
    pub phase: &'static str,
    /// New tokens in the call.
    pub tokens: usize,
    /// Tokens in the KV cache before the call.
    pub context: usize,
    /// GPU time of the same call without profiling (layers + head).
    pub gpu_ms: f64,
    /// Sum of the dispatches' GPU times.
    pub kernels_ms: f64,
    /// Dispatches in the call.
    pub dispatch_count: usize,
    pub dispatches: Vec<Dispatch>,
    /// The dispatches added up per kernel, most time first.
    pub kernels: Vec<KernelTotal>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Dispatch {
    pub kernel: &'static str,
    pub layer: Option<usize>,
    pub gpu_ms: f64,
    pub bytes: u64,
    pub flops: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct KernelTotal {
    pub kernel: &'static str,
    pub count: usize,
    pub gpu_ms: f64,
    pub bytes: u64,
    pub flops: u64,
    pub gbps: f64,
    pub gflops: f64,
    /// Achieved GB/s over the copy microbenchmark's, and GFLOP/s over the FMA one's.
    pub copy_fraction: f64,
    pub fma_fraction: f64,
}

/// Profiles a prefill of each length and the decode step after it, in KV slot 0 (which it
/// resets). The model's KV capacity must hold the longest length plus one.
pub async fn profile(model: &mut Model, lengths: &[usize], micro: &Micro) -> Result<Profile> {
    let mut phases = Vec::new();
    let vocab = model.config().vocab_size as u32;
    for &length in lengths {
        // Any ids will do: the work does not depend on them.
        let ids: Vec<u32> = (0..length as u32).map(|i| (1 + i) % vocab).collect();
        let prefill = [Sequence { slot: 0, tokens: &ids }];
        let step = [Sequence { slot: 0, tokens: &[1] }];
        // Unprofiled, then profiled, from the same states: a prefill from an empty slot, then a
        // decode step from the slot holding the prompt.
        model.forget(0)?;
        let plain_prefill = model.forward(&prefill, Readout::ARGMAX).await?;
        let plain_step = model.forward(&step, Readout::ARGMAX).await?;
        model.forget(0)?;
        model.set_profiling(true)?;
        let profiled = async {
            let prefill = model.forward(&prefill, Readout::ARGMAX).await?;
            Ok::<_, crate::Error>((prefill, model.forward(&step, Readout::ARGMAX).await?))
        }
        .await;
        model.set_profiling(false)?;
        let (profiled_prefill, profiled_step) = profiled?;
        phases.push(phase("prefill", length, 0, &plain_prefill, &profiled_prefill, micro));
        phases.push(phase("decode", 1, length, &plain_step, &profiled_step, micro));
    }
    model.forget(0)?;
    Ok(Profile { phases })
}

fn phase(
    name: &'static str,
    tokens: usize,
    context: usize,
    plain: &ForwardOut,
    profiled: &ForwardOut,
    micro: &Micro,
) -> Phase {
    let t = &plain.timing;
    let dispatches: Vec<Dispatch> = profiled
        .profile
        .iter()
        .map(|(d, ms)| Dispatch {
            kernel: d.kernel,
            layer: d.layer,
            gpu_ms: *ms,
            bytes: d.work.bytes,
            flops: d.work.flops,
        })
        .collect();
    Phase {
        phase: name,
        tokens,
        context,
        gpu_ms: t.gpu_layers_ms.unwrap_or(0.0) + t.gpu_head_ms.unwrap_or(0.0),
        kernels_ms: dispatches.iter().map(|d| d.gpu_ms).sum(),
        dispatch_count: dispatches.len(),
        kernels: totals(&dispatches, micro),
        dispatches,
    }
}

fn totals(dispatches: &[Dispatch], micro: &Micro) -> Vec<KernelTotal> {
    let mut totals: Vec<KernelTotal> = Vec::new();
    for d in dispatches {
        let at = match totals.iter().position(|t| t.kernel == d.kernel) {
            Some(at) => at,
            None => {
                totals.push(KernelTotal { kernel: d.kernel, ..Default::default() });
                totals.len() - 1
            }
        };
        let t = &mut totals[at];
        t.count += 1;
        t.gpu_ms += d.gpu_ms;
        t.bytes += d.bytes;
        t.flops += d.flops;
    }
    for t in &mut totals {
        if t.gpu_ms > 0.0 {
            t.gbps = t.bytes as f64 / (t.gpu_ms * 1e6);
            t.gflops = t.flops as f64 / (t.gpu_ms * 1e6);
        }
        t.copy_fraction = t.gbps / micro.copy_gbps;
        t.fma_fraction = t.gflops / micro.fma_gflops;
    }
    totals.sort_by(|a, b| b.gpu_ms.total_cmp(&a.gpu_ms));
    totals
}
