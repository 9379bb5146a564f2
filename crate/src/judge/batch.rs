//! Strategy C: many requests in one batched prefill, each in its own KV slot, answered by
//! strategy B's choice head; optionally over a shared prefix computed once.

use super::{
    Answer, BatchRecord, BatchTimings, Engine, JudgeRequest, Judgment, Phase, PhaseClock, PrefixIn, Room, Strategy,
    choice_set,
};
use crate::choice::{ChoiceSet, ConstrainedPick, fork_logits};
use crate::clock::now_ms;
use crate::error::{BatchProblem, Error, Result};
use crate::model::{Head, Readout, Sequence};

/// Each request's choices, tokenized, and how far its constrained walk has got.
struct Walker {
    set: ChoiceSet,
    pick: ConstrainedPick,
    /// Choice logits where its choices first differ.
    fork: Option<Vec<f32>>,
}

/// Whether a batch's prompts share their common prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixSharing {
    /// Every prompt is prefilled whole.
    Off,
    /// The prompts' longest common token prefix (the document) is prefilled once in slot 0 and
    /// copied to every slot.
    Shared,
}

impl PrefixSharing {
    pub fn from_flag(shared: bool) -> Self {
        if shared { PrefixSharing::Shared } else { PrefixSharing::Off }
    }
}

impl Engine {
    /// Strategy C: every request in one batched prefill (each in its own KV slot), answered
    /// by strategy B's choice head, optionally over a shared prefix ([`PrefixSharing`]). The
    /// model grows to hold every request at once.
    pub async fn judge_batch(
        &mut self,
        reqs: &[JudgeRequest],
        sharing: PrefixSharing,
    ) -> Result<(BatchRecord, Vec<Judgment>)> {
        let start = now_ms();
        self.running = Strategy::Batched;
        let mut walkers = self.tokenize_batch(reqs)?;
        let sets: Vec<&ChoiceSet> = walkers.iter().map(|w| &w.set).collect();
        let shared = match sharing {
            PrefixSharing::Shared => shared_prefix_len(&sets),
            PrefixSharing::Off => 0,
        };
        let batch_tokens: usize = sets.iter().map(|s| s.base().len() - shared).sum();
        let longest = sets.iter().map(|s| s.base().len() + s.sequences().iter().map(Vec::len).max().unwrap_or(0)).max();
        // Every pass reads one head of the union of the open requests' allowed tokens.
        let mut union: Vec<u32> = sets.iter().flat_map(|s| s.all_tokens()).collect();
        union.sort_unstable();
        union.dedup();
        let choice_ids = union.len();
        let n = reqs.len();
        // The shared prefix is prefilled in a call of its own, before the batch of the rest.
        let per_call = batch_tokens.max(shared);
        // Every row is read through the choices' rows: the full-vocabulary head is not used.
        let longest = longest.unwrap_or(0);
        let room = Room { slots: n, longest, batch_tokens: per_call, rows: n, full_rows: 1, choice_ids };
        self.make_room(room)?;
        let mut clock = PhaseClock::default();
        clock.timings.tokenize = now_ms() - start;
        self.model.forget_all();
        let shared_prefill = self.prefill_shared_prefix(&walkers, shared, &mut clock).await?;
        let decode_steps = self.walk_batch(&mut walkers, shared, &mut clock).await?;
        clock.timings.total = now_ms() - start;
        let total_ms = clock.timings.total;
        let record = BatchRecord {
            strategy: Strategy::Batched,
            judgments: n,
            shared_prefix_tokens: shared,
            batch_prefill_tokens: batch_tokens,
            longest_prompt_tokens: walkers.iter().map(|w| w.set.base().len()).max().unwrap_or(0),
            decode_steps,
            timings_ms: BatchTimings {
                tokenize: clock.timings.tokenize,
                shared_prefill,
                prefill: clock.timings.prefill - shared_prefill,
                decode: clock.timings.decode.clone(),
                total: total_ms,
            },
            gpu_timings_ms: clock.gpu.clone(),
            encode_timings_ms: clock.encode.clone(),
            decode_steps_encoded_ahead: clock.encoded_ahead,
            judgments_per_s: n as f64 / (total_ms / 1e3),
            synthetic: self.synthetic(),
        };
        let judgments = walkers
            .into_iter()
            .zip(reqs)
            .map(|(w, req)| {
                let answer = Answer {
                    index: w.pick.decided(),
                    decode_steps: w.pick.picked().len().saturating_sub(1),
                    probs: w.pick.probs().to_vec(),
                    picked: w.pick.into_picked(),
                    choice_logits: w.fork.unwrap_or_default(),
                    prompt_tokens: w.set.base().len(),
                    healed_tokens: w.set.healed(),
                    top: None,
                    free_stop: None,
                };
                let clock = clock.clone();
                self.judgment(Strategy::Batched, &req.choices, answer, clock)
            })
            .collect::<Result<_>>()?;
        Ok((record, judgments))
    }

    /// Each request's choice set, or an error naming the request.
    fn tokenize_batch(&self, reqs: &[JudgeRequest]) -> Result<Vec<Walker>> {
        if reqs.is_empty() {
            return Err(Error::Batch(BatchProblem::NoRequests));
        }
        if reqs.len() > super::MAX_BATCH {
            return Err(Error::Batch(BatchProblem::TooManyRequests { requests: reqs.len(), max: super::MAX_BATCH }));
        }
        let tok = &self.tokenizer;
        reqs.iter()
            .enumerate()
            .map(|(i, r)| {
                let set = choice_set(tok, r, PrefixIn::Prompt)
                    .map_err(|e| Error::InRequest { request: i + 1, error: Box::new(e) })?;
                Ok(Walker { pick: ConstrainedPick::new(&set), set, fork: None })
            })
            .collect()
    }

    /// Prefills the first `shared` tokens once in slot 0 and copies them to every other slot;
    /// returns its wall milliseconds (0 without a shared prefix).
    async fn prefill_shared_prefix(
        &mut self,
        walkers: &[Walker],
        shared: usize,
        clock: &mut PhaseClock,
    ) -> Result<f64> {
        if shared == 0 {
            return Ok(0.0);
        }
        let base = &walkers[0].set.base();
        let readout = Readout::last(Head::Choices(&base[..1]));
        self.report(Phase::Prefill, 0, shared);
        let out = self.model.prefill(&[Sequence { slot: 0, tokens: &base[..shared] }], readout).await?;
        for slot in 1..walkers.len() {
            self.model.share_prefix(0, slot, shared)?;
        }
        clock.record(&out.timing, Phase::Prefill);
        Ok(out.timing.wall_ms)
    }

    /// The batched prefill of every prompt (after the shared prefix), then decode steps for the
    /// requests whose choices are still tied, until all are decided. Returns the decode steps.
    async fn walk_batch(&mut self, walkers: &mut [Walker], shared: usize, clock: &mut PhaseClock) -> Result<usize> {
        let mut decode_steps = 0;
        loop {
            let open: Vec<usize> = (0..walkers.len()).filter(|&i| walkers[i].pick.decided().is_none()).collect();
            if open.is_empty() {
                return Ok(decode_steps);
            }
            let allowed: Vec<Vec<u32>> = open.iter().map(|&i| walkers[i].pick.allowed(&walkers[i].set)).collect();
            let mut union: Vec<u32> = allowed.iter().flatten().copied().collect();
            union.sort_unstable();
            union.dedup();
            let readout = Readout::last(Head::Choices(&union));
            let phase = if walkers[open[0]].pick.picked().is_empty() { Phase::Prefill } else { Phase::Decode };
            let out = match phase {
                Phase::Prefill => {
                    let batch: Vec<Sequence> =
                        open.iter().map(|&i| Sequence { slot: i, tokens: &walkers[i].set.base()[shared..] }).collect();
                    self.report(Phase::Prefill, 0, batch.iter().map(|s| s.tokens.len()).sum());
                    self.model.prefill(&batch, readout).await?
                }
                Phase::Decode => {
                    let last = |i: usize| walkers[i].pick.picked().last().copied().unwrap_or_default();
                    let steps: Vec<(usize, u32)> = open.iter().map(|&i| (i, last(i))).collect();
                    self.report(Phase::Decode, decode_steps, steps.len());
                    decode_steps += 1;
                    self.model.decode(&steps, readout).await?
                }
            };
            clock.record(&out.timing, phase);
            for ((&i, allowed), row) in open.iter().zip(&allowed).zip(&out.rows) {
                let w = &mut walkers[i];
                let logits: Vec<f32> =
                    allowed.iter().filter_map(|t| union.binary_search(t).ok().map(|at| row.logits[at])).collect();
                if allowed.len() > 1 && w.fork.is_none() {
                    w.fork = Some(fork_logits(&w.set, w.pick.picked().len(), allowed, &logits));
                }
                w.pick.step(&w.set, &logits);
            }
        }
    }
}

/// Longest common token prefix of every set's base, leaving each at least one token of its own;
/// 0 for a single request (nothing to share it with: a prefix pass would only add a pass).
fn shared_prefix_len(sets: &[&ChoiceSet]) -> usize {
    if sets.len() < 2 {
        return 0;
    }
    let first = sets[0].base();
    let common = sets[1..]
        .iter()
        .map(|s| first.iter().zip(s.base()).take_while(|(a, b)| a == b).count())
        .min()
        .unwrap_or(first.len());
    let shortest = sets.iter().map(|s| s.base().len()).min().unwrap_or(0);
    common.min(shortest.saturating_sub(1))
}
