//! The per-kernel profile: one prefill and one decode step at each prompt length, every dispatch
//! timed on its own (see [`crate::gpu::Dispatcher`]) beside the bytes it must move and the FLOPs
//! it must do, and the same forward's GPU time without profiling, measured in the same run, so
//! the kernels' sum can be checked against the phase they make up. Short phases are run several
//! times and averaged, which also undoes a browser's rounding of timestamps.

use serde::Serialize;

use crate::bench::Micro;
use crate::error::Result;
use crate::gpu::DispatchTiming;
use crate::model::{ForwardOut, Model, Readout, Sequence};

#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    /// How each dispatch was timed: "inside-passes" (natively, where the adapter can) or
    /// "pass-per-dispatch" (browsers).
    pub timing: DispatchTiming,
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
    /// Runs of the call averaged, unprofiled and profiled alike ([`runs_for`]).
    pub runs: usize,
    /// GPU time of the same call without profiling (layers + head), the mean of its runs.
    pub gpu_ms: f64,
    /// Sum of the dispatches' GPU times (each the mean of its runs).
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
    /// Workgroups along x, y and z (a large GPU has over 100 compute units to fill).
    pub grid: [u32; 3],
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
    /// Achieved GB/s over the copy microbenchmark's and over the read one's (the roof of a
    /// kernel that reads much and writes little, as decode's linear layers do), and GFLOP/s over
    /// the FMA one's.
    pub copy_fraction: f64,
    pub read_fraction: f64,
    pub fma_fraction: f64,
}

/// Each phase is run (and profiled) until its runs add up to at least this much GPU time: a
/// browser rounds timestamps to 100 us (Chrome does, against timing attacks), so a dispatch of a
/// few microseconds reads 0 or 0.1 ms. Over runs whose start falls at random within the rounding
/// step, the mean of the readings approaches the true time: with 50 ms of runs, a decode step's
/// kernels add up to within a few percent of it.
const PROFILED_MS: f64 = 50.0;
/// At most this many runs of a phase (a decode step of 1 ms: 50).
const MAX_RUNS: usize = 64;

/// Runs of a phase whose first run took `first_ms` of GPU time ([`PROFILED_MS`]): one for a
/// phase of 50 ms or more (a CPU device's), up to [`MAX_RUNS`] for one that reads as nothing.
pub fn runs_for(first_ms: f64) -> usize {
    if first_ms <= 0.0 || !first_ms.is_finite() {
        return MAX_RUNS;
    }
    ((PROFILED_MS / first_ms).ceil() as usize).clamp(1, MAX_RUNS)
}

/// Profiles a prefill of each length and the decode step after it, in KV slot 0 (which it
/// resets): each phase run several times ([`runs_for`]), unprofiled and profiled, from the
/// same state (a prefill from an empty slot, a step from the slot holding the prompt), and the
/// times averaged. The model's KV capacity must hold the longest length plus one. `measured`
/// hears each length's two phases (prefill, decode step) as they are measured.
pub async fn profile(
    model: &mut Model,
    lengths: &[usize],
    micro: &Micro,
    measured: &mut dyn FnMut(&Phase, &Phase),
) -> Result<Profile> {
    let timing = model.dispatch_timing()?;
    let mut phases = Vec::new();
    let vocab = model.config().vocab_size as u32;
    for &length in lengths {
        // Any ids will do: the work does not depend on them.
        let ids: Vec<u32> = (0..length as u32).map(|i| (1 + i) % vocab).collect();
        let prefill = [Sequence { slot: 0, tokens: &ids }];
        let step = [Sequence { slot: 0, tokens: &[1] }];
        // Before each run, the state it starts from: an empty slot, or the slot at the prompt.
        let empty = |m: &mut Model| m.forget(0);
        let at_prompt = |m: &mut Model| m.truncate(0, length);
        let plain_prefill = repeat(model, &prefill, empty, None).await?;
        let plain_step = repeat(model, &step, at_prompt, None).await?;
        model.set_profiling(true)?;
        let profiled = async {
            let prefill = repeat(model, &prefill, empty, Some(plain_prefill.count)).await?;
            Ok::<_, crate::Error>((prefill, repeat(model, &step, at_prompt, Some(plain_step.count)).await?))
        }
        .await;
        model.set_profiling(false)?;
        let (profiled_prefill, profiled_step) = profiled?;
        let (prefill, step) = (
            phase("prefill", length, 0, plain_prefill, profiled_prefill, micro),
            phase("decode", 1, length, plain_step, profiled_step, micro),
        );
        measured(&prefill, &step);
        phases.extend([prefill, step]);
    }
    model.forget(0)?;
    Ok(Profile { timing, phases })
}

/// GPU time of a forward (layers + head; 0 without timestamps).
fn gpu_ms(out: &ForwardOut) -> f64 {
    out.timing.gpu_ms().unwrap_or(0.0)
}

/// The runs of one phase: its mean GPU time, and (profiled) each dispatch's mean time.
struct Runs {
    count: usize,
    gpu_ms: f64,
    dispatches: Vec<Dispatch>,
}

impl Runs {
    /// Adds one run's GPU time and, profiled, its dispatches' times.
    fn add(&mut self, out: ForwardOut) -> Result<()> {
        self.count += 1;
        self.gpu_ms += gpu_ms(&out);
        if self.count == 1 {
            self.dispatches = out
                .profile
                .iter()
                .map(|(d, _)| Dispatch {
                    kernel: d.kernel,
                    layer: d.layer,
                    gpu_ms: 0.0,
                    bytes: d.work.bytes,
                    flops: d.work.flops,
                    grid: d.grid,
                })
                .collect();
        }
        let same = out.profile.len() == self.dispatches.len()
            && out
                .profile
                .iter()
                .zip(&self.dispatches)
                .all(|((d, _), sum)| d.kernel == sum.kernel && d.grid == sum.grid);
        if !same {
            return Err(crate::Error::Gpu("profiled runs of one phase dispatched different kernels".into()));
        }
        for (sum, (_, ms)) in self.dispatches.iter_mut().zip(&out.profile) {
            sum.gpu_ms += ms;
        }
        Ok(())
    }
}

/// `count` runs of `batch` (or as many as its first run calls for: [`runs_for`]), each from the
/// state `reset` makes, averaged. Every run dispatches the same kernels, so the dispatches
/// average one by one.
async fn repeat(
    model: &mut Model,
    batch: &[Sequence<'_>],
    reset: impl Fn(&mut Model) -> Result<()>,
    count: Option<usize>,
) -> Result<Runs> {
    let mut runs = Runs { count: 0, gpu_ms: 0.0, dispatches: Vec::new() };
    let mut wanted = count.unwrap_or(1);
    while runs.count < wanted {
        reset(model)?;
        let out = model.forward(batch, Readout::ARGMAX).await?;
        if count.is_none() && runs.count == 0 {
            wanted = runs_for(gpu_ms(&out));
        }
        runs.add(out)?;
    }
    let n = runs.count.max(1) as f64;
    runs.gpu_ms /= n;
    runs.dispatches.iter_mut().for_each(|d| d.gpu_ms /= n);
    Ok(runs)
}

fn phase(name: &'static str, tokens: usize, context: usize, plain: Runs, profiled: Runs, micro: &Micro) -> Phase {
    let dispatches = profiled.dispatches;
    Phase {
        phase: name,
        tokens,
        context,
        runs: profiled.count,
        gpu_ms: plain.gpu_ms,
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
        t.read_fraction = t.gbps / micro.read_gbps;
        t.fma_fraction = t.gflops / micro.fma_gflops;
    }
    totals.sort_by(|a, b| b.gpu_ms.total_cmp(&a.gpu_ms));
    totals
}

#[cfg(test)]
mod tests {
    use super::runs_for;

    #[test]
    fn short_phases_run_until_their_runs_add_up_to_50_ms() {
        assert_eq!(runs_for(400.0), 1); // a CPU device's decode step
        assert_eq!(runs_for(50.0), 1);
        assert_eq!(runs_for(20.0), 3);
        assert_eq!(runs_for(1.0), 50); // a large GPU's decode step
        assert_eq!(runs_for(0.3), 64);
        // A phase shorter than a browser's 100 us rounding may read as nothing at all.
        assert_eq!(runs_for(0.0), 64);
        assert_eq!(runs_for(f64::NAN), 64);
    }
}
