//! One forward call laid out for the GPU: the batch checked against the model's sizes, its
//! per-token inputs, and the uniforms the kernels read.

use super::kv_cache::KvCache;
use super::readout::{Head, Positions, Readout};
use super::{ModelOptions, Sequence};
use crate::error::{Error, Result};
use crate::ops::{AttendedKeys, TOP_K_MAX};

#[derive(Default)]
pub(super) struct Plan {
    /// `[M]` token ids of every sequence's new tokens, in batch order.
    pub ids: Vec<u32>,
    /// `[M, 2]` (KV-cache row base, position) of each token: the shaders' `token_meta`.
    pub token_meta: Vec<u32>,
    /// `[R]` token index of each read-out position.
    pub read_positions: Vec<u32>,
    /// `[k]` vocabulary ids whose logits the GPU computes and reads back: the read-out's own,
    /// then repeats of its last up to k (see [`CHOICE_IDS_STEP`]).
    pub choice_ids: Vec<u32>,
    /// How many of `choice_ids` the read-out asked for (the rest are padding).
    pub asked_choices: usize,
    /// Best pairs found by the full head (0: no full head).
    pub top_k: usize,
    pub keys: AttendedKeys,
}

/// The GPU computes the logits of a read-out's ids in whole steps of this many (or up to the
/// model's `max_choice_ids` where that is fewer). A constrained walk's allowed ids change in
/// number from step to step (one, then two where the choices part, then one again): padded,
/// its steps dispatch alike, so each can run the commands the one before encoded ahead
/// ([`super::Model::forward`]). The padding costs a few rows of the LM head.
pub const CHOICE_IDS_STEP: usize = 8;

/// The buffers [`Plan::encode_input_copies`] fills from the uploaded inputs.
pub(super) struct PlanInputs<'a> {
    pub tokens: &'a wgpu::Buffer,         // uniform (M, 0, 0, 0)
    pub rows: &'a wgpu::Buffer,           // uniform (R, top_k, 0, 0)
    pub ids: &'a wgpu::Buffer,            // [M]
    pub token_meta: &'a wgpu::Buffer,     // [M, 2]
    pub read_positions: &'a wgpu::Buffer, // [R]
    pub choice_ids: &'a wgpu::Buffer,     // [k]
}

/// Checks `batch` against the cache and the vocabulary: sequences of tokens, each slot once,
/// each fitting its slot. A prefill run in several passes checks the whole batch first, so a
/// bad one is refused before any pass changes the cache.
pub(super) fn check_sequences(batch: &[Sequence<'_>], kv: &KvCache, vocab: usize) -> Result<()> {
    if batch.is_empty() {
        return Err(Error::Input("an empty batch".into()));
    }
    let mut slots_seen = vec![false; kv.slots()];
    for (i, seq) in batch.iter().enumerate() {
        if seq.tokens.is_empty() {
            let which = match batch.len() {
                1 => "the prompt".to_string(),
                _ => format!("sequence {i} of the batch (KV slot {})", seq.slot),
            };
            return Err(Error::Input(format!("{which} has no tokens: there is nothing to run (was its text empty?)")));
        }
        kv.check_room(seq.slot, seq.tokens.len())?;
        if std::mem::replace(&mut slots_seen[seq.slot], true) {
            return Err(Error::Input(format!("slot {} appears twice in one batch", seq.slot)));
        }
        if let Some(&bad) = seq.tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(Error::Input(format!("token id {bad} is outside the vocabulary ({vocab})")));
        }
    }
    Ok(())
}

impl Plan {
    /// Checks `batch` and `readout` against the model's sizes and the cache, and lays them out.
    pub fn new(
        batch: &[Sequence<'_>],
        readout: Readout<'_>,
        kv: &KvCache,
        o: &ModelOptions,
        vocab: usize,
    ) -> Result<Self> {
        check_sequences(batch, kv, vocab)?;
        let mut plan = Plan::default();
        for seq in batch {
            plan.push(seq, kv.row_base(seq.slot), kv.tokens_in(seq.slot)?, readout.positions);
        }
        plan.keys.decode_step = batch.iter().all(|seq| seq.tokens.len() == 1);
        plan.check_sizes(o)?;
        plan.set_head(readout, o, vocab)?;
        Ok(plan)
    }

    /// Appends one sequence that starts at `start` in the cache rows from `base`.
    fn push(&mut self, seq: &Sequence<'_>, base: usize, start: usize, positions: Positions) {
        let (base, start) = (base as u32, start as u32);
        let first = self.ids.len() as u32;
        for (i, &t) in seq.tokens.iter().enumerate() {
            self.ids.push(t);
            self.token_meta.extend([base, start + i as u32]);
        }
        let seen = start + seq.tokens.len() as u32;
        self.keys.longest = self.keys.longest.max(seen);
        self.keys.rows += u64::from(seen);
        self.keys.pairs += (start + 1..=seen).map(u64::from).sum::<u64>();
        let last = self.ids.len() as u32 - 1;
        match positions {
            Positions::Last => self.read_positions.push(last),
            Positions::All => self.read_positions.extend(first..=last),
        }
    }

    fn check_sizes(&self, o: &ModelOptions) -> Result<()> {
        if self.ids.len() > o.max_tokens {
            return Err(Error::Input(format!(
                "a batch of {} tokens; this model was set up for at most {} per call",
                self.ids.len(),
                o.max_tokens
            )));
        }
        if self.read_positions.len() > o.max_rows {
            return Err(Error::Input(format!(
                "{} rows to read out; this model was set up for at most {}",
                self.read_positions.len(),
                o.max_rows
            )));
        }
        Ok(())
    }

    fn set_head(&mut self, readout: Readout<'_>, o: &ModelOptions, vocab: usize) -> Result<()> {
        let ids = readout.ids();
        if ids.len() > o.max_choice_ids || (ids.is_empty() && matches!(readout.head, Head::Choices(_))) {
            return Err(Error::Input(format!(
                "{} vocabulary ids to read (1 to {} allowed)",
                ids.len(),
                o.max_choice_ids
            )));
        }
        if let Some(&bad) = ids.iter().find(|&&t| t as usize >= vocab) {
            return Err(Error::Input(format!("choice id {bad} is outside the vocabulary")));
        }
        let padded = if ids.is_empty() { 0 } else { ids.len().next_multiple_of(CHOICE_IDS_STEP).min(o.max_choice_ids) };
        self.asked_choices = ids.len();
        self.choice_ids = ids.to_vec();
        self.choice_ids.resize(padded, ids.last().copied().unwrap_or(0));
        self.top_k = match readout.head {
            Head::Full { top_k, .. } if !(1..=TOP_K_MAX).contains(&top_k) => {
                return Err(Error::Input(format!("top_k {top_k} (1 to {TOP_K_MAX} allowed)")));
            }
            Head::Full { top_k, .. } => top_k,
            Head::Logits => 1,
            Head::Choices(_) => 0,
        };
        if self.top_k > 0 && self.read_positions.len() > o.max_full_rows {
            return Err(Error::Input(format!(
                "{} rows to read through the full-vocabulary head; this model was set up for at most {}",
                self.read_positions.len(),
                o.max_full_rows
            )));
        }
        Ok(())
    }

    /// Tokens in the batch (M).
    pub fn tokens(&self) -> u32 {
        self.ids.len() as u32
    }

    /// Read-out positions (R).
    pub fn rows(&self) -> u32 {
        self.read_positions.len() as u32
    }

    /// k: vocabulary ids whose logits the GPU computes (the read-out's, padded).
    pub fn choices(&self) -> usize {
        self.choice_ids.len()
    }

    /// Writes the per-call inputs into `packed` in one write: the uniforms, the ids, the token
    /// meta, the read-out positions and the (padded) choice ids, back to back. Each write is a staging
    /// allocation and a copy, on the CPU's path before the GPU can start; the copies to where
    /// the kernels read them are encoded with the commands ([`Plan::encode_input_copies`]).
    pub fn upload(&self, queue: &wgpu::Queue, packed: &wgpu::Buffer) {
        let uniforms = [self.tokens(), 0, 0, 0, self.rows(), self.top_k as u32, 0, 0];
        let words: Vec<u32> =
            [&uniforms[..], &self.ids, &self.token_meta, &self.read_positions, &self.choice_ids].concat();
        queue.write_buffer(packed, 0, bytemuck::cast_slice(&words));
    }

    /// Copies the inputs [`Plan::upload`] packed into `packed` to the buffers the kernels read.
    /// Their sizes depend on the token, read-out and choice counts only.
    pub fn encode_input_copies(&self, encoder: &mut wgpu::CommandEncoder, packed: &wgpu::Buffer, to: PlanInputs) {
        let sections = [
            (to.tokens, 4),
            (to.rows, 4),
            (to.ids, self.ids.len()),
            (to.token_meta, self.token_meta.len()),
            (to.read_positions, self.read_positions.len()),
            (to.choice_ids, self.choices()),
        ];
        let mut at = 0;
        for (buffer, words) in sections {
            let bytes = 4 * words as u64;
            if bytes > 0 {
                encoder.copy_buffer_to_buffer(packed, at, buffer, 0, Some(bytes));
            }
            at += bytes;
        }
    }
}
