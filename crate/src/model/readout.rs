//! What a forward call reads back, and where it lies in the one staging buffer it maps.

use crate::gpu::{DispatchRecord, Gpu, PassTimer};
use crate::ops::TOP_K_MAX;

/// Which token positions are read out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Positions {
    /// The last new token of each sequence.
    Last,
    /// Every new token (tests and diagnostics).
    All,
}

/// What the LM head computes for the read-out positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head<'a> {
    /// The full vocabulary (what a generation engine computes every step). The GPU finds the
    /// `top_k` best (id, logit) pairs (1 = greedy) and the logsumexp; the logits of `ids`
    /// (may be empty) are read back too. Nothing else leaves the GPU.
    Full { top_k: usize, ids: &'a [u32] },
    /// Only the vocabulary rows of these ids (strategy B's choice head): k logits per position.
    Choices(&'a [u32]),
    /// Full vocabulary, read back whole (tests and the `logits` command; never per step).
    Logits,
}

/// What one forward call computes and reads back.
#[derive(Debug, Clone, Copy)]
pub struct Readout<'a> {
    pub positions: Positions,
    pub head: Head<'a>,
    /// Also read back each position's final hidden state (after `model.norm`).
    pub hidden: bool,
}

impl<'a> Readout<'a> {
    /// Greedy: the best id and its logit for each sequence's last token.
    pub const ARGMAX: Readout<'static> =
        Readout { positions: Positions::Last, head: Head::Full { top_k: 1, ids: &[] }, hidden: false };

    /// The last position's whole logit row (diagnostics).
    pub const LOGITS: Readout<'static> = Readout { positions: Positions::Last, head: Head::Logits, hidden: false };

    /// The last position of each sequence through `head`.
    pub fn last(head: Head<'a>) -> Self {
        Readout { positions: Positions::Last, head, hidden: false }
    }

    /// Vocabulary ids whose logits are read out.
    pub fn ids(&self) -> &'a [u32] {
        match self.head {
            Head::Full { ids, .. } | Head::Choices(ids) => ids,
            Head::Logits => &[],
        }
    }
}

/// Per read-out position.
#[derive(Debug, Clone, Default)]
pub struct RowOut {
    /// The best `(id, logit)` pairs, best first ([`Head::Full`]: top_k of them; [`Head::Logits`]: 1).
    pub top: Vec<(u32, f32)>,
    /// log of the sum of exp(logits) over the vocabulary (full heads only): log-probability of
    /// a token = its logit - this.
    pub logsumexp: Option<f32>,
    /// Logits of the requested ids ([`Head::Full`], [`Head::Choices`]) or of the whole
    /// vocabulary ([`Head::Logits`]).
    pub logits: Vec<f32>,
    /// Final hidden state, `[hidden]`, when asked for.
    pub hidden: Vec<f32>,
}

impl RowOut {
    /// Whether every value read out is a number: a model whose weights hold NaN or infinity
    /// gives NaN logits, which would rank as any choice at all.
    pub fn finite(&self) -> bool {
        self.logits.iter().chain(self.logsumexp.iter()).chain(self.top.iter().map(|(_, v)| v)).all(|v| v.is_finite())
    }

    /// Log-probability of `id`, given its logit at index `at` of [`RowOut::logits`] (full heads).
    pub fn logprob(&self, at: usize) -> Option<f32> {
        Some(self.logits.get(at)? - self.logsumexp?)
    }
}

/// Timings of one forward call, in milliseconds.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ForwardTiming {
    /// Wall time from encoding to results on the CPU: encoding (unless done ahead), submit, GPU
    /// work, readback, and, while the GPU works, encoding the step likely to come next (part of
    /// this time only where the GPU finishes first).
    pub wall_ms: f64,
    /// Part of `wall_ms` spent copying results out of the mapped staging buffer.
    pub readback_ms: f64,
    /// Part of `wall_ms` before the GPU could start: encoding the commands (unless they were
    /// encoded ahead), uploading the inputs, submitting.
    pub encode_ms: f64,
    /// Whether the commands were encoded ahead, by the call before ([`super::Model::forward`]).
    pub encoded_ahead: bool,
    /// GPU time of the layers (embedding to last layer) and of the head (final norm, LM head,
    /// argmax), from timestamp queries; `None` where the device has no `timestamp-query`.
    pub gpu_layers_ms: Option<f64>,
    pub gpu_head_ms: Option<f64>,
}

impl ForwardTiming {
    /// The times of this pass and `next` of the same call together (a prefill run in several);
    /// GPU times where both have them.
    pub fn then(self, next: &ForwardTiming) -> ForwardTiming {
        let sum = |a: Option<f64>, b: Option<f64>| Some(a? + b?);
        ForwardTiming {
            wall_ms: self.wall_ms + next.wall_ms,
            readback_ms: self.readback_ms + next.readback_ms,
            encode_ms: self.encode_ms + next.encode_ms,
            encoded_ahead: self.encoded_ahead && next.encoded_ahead,
            gpu_layers_ms: sum(self.gpu_layers_ms, next.gpu_layers_ms),
            gpu_head_ms: sum(self.gpu_head_ms, next.gpu_head_ms),
        }
    }

    /// GPU time of the whole forward, where the device measures it.
    pub fn gpu_ms(&self) -> Option<f64> {
        Some(self.gpu_layers_ms? + self.gpu_head_ms?)
    }
}

pub struct ForwardOut {
    pub rows: Vec<RowOut>,
    pub timing: ForwardTiming,
    /// Profile mode only: every dispatch in order, with its GPU time in milliseconds.
    pub profile: Vec<(DispatchRecord, f64)>,
}

/// Bytes per position of the top-k results: the logsumexp word and a spare, then (id, logit)
/// pairs (top_k.wgsl's output row).
pub const BEST_ROW_BYTES: u64 = 8 * (1 + TOP_K_MAX as u64);
/// Passes timed per unprofiled forward (layers, head): two 8-byte stamps each.
pub const TIMED_PASSES: u32 = 2;
const STAMP_BYTES: u64 = 16 * TIMED_PASSES as u64;
const F32: u64 = 4;

/// Where one call's results lie in the staging buffer: `[R]` top-k rows, `[R, k]` choice
/// logits, `[R, hidden]` hidden states, then the pass timestamps (8-byte aligned).
#[derive(Debug, PartialEq, Eq)]
pub struct Readback {
    rows: u64,
    top_k: usize,
    choices: u64,
    hidden: u64,
    choices_at: u64,
    hidden_at: u64,
    stamps_at: u64,
}

impl Readback {
    /// `hidden`: the hidden size when hidden states are read back, else 0.
    pub fn new(rows: usize, top_k: usize, choices: usize, hidden: usize) -> Self {
        let (rows, choices, hidden) = (rows as u64, choices as u64, hidden as u64);
        let choices_at = BEST_ROW_BYTES * rows;
        let hidden_at = choices_at + F32 * rows * choices;
        let stamps_at = (hidden_at + F32 * rows * hidden).next_multiple_of(8);
        Self { rows, top_k, choices, hidden, choices_at, hidden_at, stamps_at }
    }

    /// Staging bytes for the largest call of a model's sizes.
    pub fn capacity(rows: usize, choices: usize, hidden: usize) -> u64 {
        Self::new(rows, TOP_K_MAX, choices, hidden).len()
    }

    /// Bytes to map.
    pub fn len(&self) -> u64 {
        self.stamps_at + STAMP_BYTES
    }

    /// Copies the results into `staging`: top-k rows from `best`, choice logits, hidden states,
    /// and the pass timestamps when `timer` is given.
    pub fn encode_copies(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        sources: ReadbackSources,
        staging: &wgpu::Buffer,
        timer: Option<&PassTimer>,
    ) {
        let mut copy = |from: &wgpu::Buffer, at: u64, len: u64| {
            if len > 0 {
                encoder.copy_buffer_to_buffer(from, 0, staging, at, Some(len));
            }
        };
        if self.top_k > 0 {
            copy(sources.best, 0, self.choices_at);
        }
        copy(sources.choice_logits, self.choices_at, self.hidden_at - self.choices_at);
        copy(sources.hidden, self.hidden_at, F32 * self.rows * self.hidden);
        if let Some(t) = timer {
            t.copy_to(encoder, staging, self.stamps_at);
        }
    }

    /// One [`RowOut`] per position from the mapped bytes, with the logits of the first `asked`
    /// choice ids (the rest are padding); `full_logits` holds `[R, vocab]` when the whole
    /// vocabulary was read back.
    pub fn rows(&self, bytes: &[u8], full_logits: Option<(&[u8], u64)>, asked: usize) -> Vec<RowOut> {
        let floats = |b: &[u8], at: u64, n: u64| -> Vec<f32> {
            bytemuck::pod_collect_to_vec(&b[at as usize..(at + F32 * n) as usize])
        };
        (0..self.rows)
            .map(|i| {
                let best: Vec<u32> =
                    bytemuck::pod_collect_to_vec(&bytes[(i * BEST_ROW_BYTES) as usize..][..BEST_ROW_BYTES as usize]);
                let top = (0..self.top_k).map(|j| (best[2 + 2 * j], f32::from_bits(best[3 + 2 * j]))).collect();
                RowOut {
                    top,
                    logsumexp: (self.top_k > 0).then(|| f32::from_bits(best[0])),
                    logits: match full_logits {
                        Some((all, vocab)) => floats(all, i * F32 * vocab, vocab),
                        None => floats(bytes, self.choices_at + F32 * i * self.choices, asked as u64),
                    },
                    hidden: floats(bytes, self.hidden_at + F32 * i * self.hidden, self.hidden),
                }
            })
            .collect()
    }

    /// GPU milliseconds of timed pass `pass` (see [`TIMED_PASSES`]).
    pub fn pass_ms(&self, gpu: &Gpu, bytes: &[u8], pass: usize) -> f64 {
        PassTimer::ms(gpu, &bytes[self.stamps_at as usize..], pass)
    }
}

/// The GPU buffers a [`Readback`] copies from.
pub struct ReadbackSources<'a> {
    pub best: &'a wgpu::Buffer,
    pub choice_logits: &'a wgpu::Buffer,
    pub hidden: &'a wgpu::Buffer,
}
