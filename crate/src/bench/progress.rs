//! The benchmark's progress: each step as it starts, and its figures as it ends. The CLI prints
//! a step as an English line (its `Display`); the page receives it as JSON and words it in the
//! visitor's language (`web/bench-progress.js`), so the figures stay numbers until then.

use std::fmt;

use serde::Serialize;

use super::BatchSkip;
use crate::cost::median;
use crate::judge::Judgment;
use crate::profile::Phase;

/// One progress report. As JSON: `{"starting": {"step": ..., ...}}` or
/// `{"measured": {"step": ..., ...}}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BenchProgress {
    Starting(Starting),
    Measured(Measured),
}

/// A step about to be measured.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Starting {
    /// The copy, read, FMA and dispatch probes.
    Micro,
    /// A, B and B with the full head at a prompt of `tokens` tokens.
    Length { tokens: usize },
    /// A's steps encoded ahead and when asked for, in turn.
    EncodeAhead { tokens: usize },
    /// A batch of `judgments` judgments (strategy C).
    Batch { judgments: usize, shared_prefix: bool },
    /// The per-kernel profile at every length.
    Profile,
}

/// A step's figures, as it ends.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Measured {
    Micro {
        copy_gbps: f64,
        read_gbps: f64,
        fma_gflops: f64,
        dispatch_us: f64,
    },
    Length {
        tokens: usize,
        a: TokenByTokenFigures,
        b_ms: f64,
        b_full_head_ms: f64,
        speedup: f64,
    },
    EncodeAhead {
        step_ms: f64,
        steps_ahead: usize,
        steps: usize,
        step_ms_on_demand: f64,
    },
    Batch {
        judgments: usize,
        shared_prefix: bool,
        total_ms: f64,
        judgments_per_s: f64,
    },
    /// A batch size this device could not run, and why.
    BatchSkipped(BatchSkip),
    Profile {
        tokens: usize,
        prefill: PhaseFigures,
        decode: PhaseFigures,
    },
}

/// Strategy A at one length: its total, prefill and median decode step (wall time), and the
/// GPU's prefill and median step where the device has timestamps.
#[derive(Debug, Clone, Serialize)]
pub struct TokenByTokenFigures {
    pub total_ms: f64,
    pub prefill_ms: f64,
    pub steps: usize,
    pub step_ms: f64,
    pub gpu_prefill_ms: Option<f64>,
    pub gpu_step_ms: Option<f64>,
}

/// A profiled phase in a few figures: its GPU time, its dispatches and what they add up to, and
/// the kernel that took the most.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseFigures {
    pub gpu_ms: f64,
    pub dispatches: usize,
    pub kernels_ms: f64,
    pub top_kernel: Option<&'static str>,
    pub top_kernel_ms: f64,
}

impl TokenByTokenFigures {
    pub fn of(a: &Judgment) -> Self {
        let t = &a.timings_ms;
        let gpu = a.gpu_timings_ms.as_ref();
        TokenByTokenFigures {
            total_ms: t.total,
            prefill_ms: t.prefill,
            steps: t.decode.len(),
            step_ms: median(&t.decode),
            gpu_prefill_ms: gpu.map(|g| g.prefill),
            gpu_step_ms: gpu.map(|g| median(&g.decode)),
        }
    }
}

impl PhaseFigures {
    pub fn of(phase: &Phase) -> Self {
        let top = phase.kernels.first();
        PhaseFigures {
            gpu_ms: phase.gpu_ms,
            dispatches: phase.dispatch_count,
            kernels_ms: phase.kernels_ms,
            top_kernel: top.map(|k| k.kernel),
            top_kernel_ms: top.map_or(0.0, |k| k.gpu_ms),
        }
    }
}

/// "batch of 8 judgments" or "batch of 8 judgments, shared prefix".
fn batch(f: &mut fmt::Formatter, judgments: usize, shared_prefix: bool) -> fmt::Result {
    write!(f, "batch of {judgments} judgments{}", if shared_prefix { ", shared prefix" } else { "" })
}

impl fmt::Display for BenchProgress {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            BenchProgress::Starting(s) => s.fmt(f),
            BenchProgress::Measured(m) => m.fmt(f),
        }
    }
}

impl fmt::Display for Starting {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match *self {
            Starting::Micro => write!(f, "microbenchmarks: copy and read bandwidth, FMA throughput"),
            Starting::Length { tokens } => write!(f, "prompt of {tokens} tokens: A, B, B full head"),
            Starting::EncodeAhead { tokens } => {
                write!(f, "prompt of {tokens} tokens: A, its steps encoded ahead and when asked for, in turn")
            }
            Starting::Batch { judgments, shared_prefix } => batch(f, judgments, shared_prefix),
            Starting::Profile => write!(f, "profile: one prefill and one decode step per length, kernel by kernel"),
        }
    }
}

impl fmt::Display for Measured {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Measured::Micro { copy_gbps, read_gbps, fma_gflops, dispatch_us } => write!(
                f,
                "microbenchmarks: copy {copy_gbps:.1} GB/s, read {read_gbps:.1} GB/s, FMA {fma_gflops:.1} GFLOP/s, \
                 a dependent dispatch {dispatch_us:.1} us"
            ),
            Measured::Length { tokens, a, b_ms, b_full_head_ms, speedup } => write!(
                f,
                "prompt of {tokens} tokens: A {a}, B {b_ms:.1} ms, B full head {b_full_head_ms:.1} ms: A/B {speedup:.2}"
            ),
            Measured::EncodeAhead { step_ms, steps_ahead, steps, step_ms_on_demand } => write!(
                f,
                "a decode step {step_ms:.2} ms encoded ahead ({steps_ahead} of {steps} steps), \
                 {step_ms_on_demand:.2} ms encoded when asked for"
            ),
            Measured::Batch { judgments, shared_prefix, total_ms, judgments_per_s } => {
                batch(f, *judgments, *shared_prefix)?;
                write!(f, ": {total_ms:.1} ms, {judgments_per_s:.1} judgments/s")
            }
            Measured::BatchSkipped(BatchSkip { judgments, shared_prefix, reason, .. }) => {
                batch(f, *judgments, *shared_prefix)?;
                write!(f, ": skipped ({reason})")
            }
            Measured::Profile { tokens, prefill, decode } => {
                write!(f, "profile at {tokens} tokens: prefill {prefill}; a decode step {decode}")
            }
        }
    }
}

/// "23.1 ms (prefill 9.5 ms + 5 steps of 2.65 ms; GPU 8.6 ms + 2.15 ms)".
impl fmt::Display for TokenByTokenFigures {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "{:.1} ms (prefill {:.1} ms + {} steps of {:.2} ms",
            self.total_ms, self.prefill_ms, self.steps, self.step_ms
        )?;
        if let (Some(prefill), Some(step)) = (self.gpu_prefill_ms, self.gpu_step_ms) {
            write!(f, "; GPU {prefill:.1} ms + {step:.2} ms")?;
        }
        write!(f, ")")
    }
}

/// "10.15 ms on the GPU in 76 dispatches (their sum 26.48 ms, most in linear_direct (18.31 ms))".
impl fmt::Display for PhaseFigures {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "{:.2} ms on the GPU in {} dispatches (their sum {:.2} ms",
            self.gpu_ms, self.dispatches, self.kernels_ms
        )?;
        if let Some(kernel) = self.top_kernel {
            write!(f, ", most in {kernel} ({:.2} ms)", self.top_kernel_ms)?;
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape `web/bench-progress.js` reads: the kind of report, then the step's tag.
    #[test]
    fn reports_are_tagged_as_the_page_reads_them() {
        let json = |p: &BenchProgress| serde_json::to_value(p).unwrap();
        let start = BenchProgress::Starting(Starting::Batch { judgments: 8, shared_prefix: true });
        assert_eq!(
            json(&start),
            serde_json::json!({"starting": {"step": "batch", "judgments": 8, "shared_prefix": true}})
        );
        assert_eq!(start.to_string(), "batch of 8 judgments, shared prefix");
        let too_long =
            crate::Error::ContextOverflow { tokens: 5000, limit: crate::ContextLimit::Model { context: 4096 } };
        let skipped = BenchProgress::Measured(Measured::BatchSkipped(BatchSkip::new(900, false, &too_long)));
        let reason = "prompt of 5000 tokens does not fit: the model's context is 4096 tokens";
        assert_eq!(
            json(&skipped),
            serde_json::json!({"measured": {"step": "batch_skipped", "judgments": 900, "shared_prefix": false,
                "code": "context_overflow", "reason": reason,
                "details": {"reason": "model_context", "tokens": 5000, "limit": 4096}}})
        );
        assert_eq!(skipped.to_string(), format!("batch of 900 judgments: skipped ({reason})"));
        // An error without details sends none.
        let plain = BatchSkip::new(900, false, &crate::Error::Gpu("lost".into()));
        assert!(serde_json::to_value(&plain).unwrap().get("details").is_none());
        let a = TokenByTokenFigures {
            total_ms: 23.14,
            prefill_ms: 9.52,
            steps: 5,
            step_ms: 2.654,
            gpu_prefill_ms: None,
            gpu_step_ms: None,
        };
        let length = BenchProgress::Measured(Measured::Length {
            tokens: 12,
            a,
            b_ms: 10.94,
            b_full_head_ms: 10.01,
            speedup: 2.1151,
        });
        assert_eq!(json(&length)["measured"]["a"]["gpu_step_ms"], serde_json::Value::Null);
        assert_eq!(
            length.to_string(),
            "prompt of 12 tokens: A 23.1 ms (prefill 9.5 ms + 5 steps of 2.65 ms), B 10.9 ms, B full head 10.0 ms: A/B 2.12"
        );
    }
}
