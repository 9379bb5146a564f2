//! One judgment answered three ways on the same engine, every phase timed:
//!
//! - A, token by token: the reply `{"choice": "<c>"}` is generated one forward pass per token,
//!   either `schema`-constrained (boilerplate forced, the choice constrained: what JSON-schema
//!   engines do; every token still costs a decode step) or `free` (greedy until the JSON closes).
//! - B, prefill + one token: the prompt ends with the response prefix `{"choice": "`; the answer
//!   is read at the prefill's last position, so no decode step is needed when the choices'
//!   first tokens differ. Its head computes either the full vocabulary or the choices' rows.
//! - C, batched: many judgments in one prefill of variable-length sequences, optionally over
//!   a shared prefix (a document) whose KV cache is computed once.
//!
//! `record.rs` holds what goes in and comes out, `single.rs` strategies A and B, `batch.rs` C.
//! The engine sizes its model itself: every call grows it to fit the request.

mod batch;
mod record;
mod single;

use std::rc::Rc;

use serde::Serialize;

pub use batch::PrefixSharing;

pub use record::{
    Answer, BatchRecord, BatchTimings, DEFAULT_PREFIX, FreeStop, JudgeRequest, Judgment, JudgmentContext, PhaseTimings,
    Strategy, Timings, json_object_closed, parse_choice,
};

use crate::choice::{ChoiceSet, Spelling};
use crate::error::{ContextLimit, Error, Result};
use crate::gpu::{Gpu, GpuWeights};
use crate::model::{ForwardTiming, Model, ModelOptions, Readout, RowOut, Sequence};
use crate::tokenizer::Tokenizer;

/// Most requests in one batch (strategy C): each is tokenized on the host before the model
/// runs, so a larger list is split by the caller (the CLI's `--batch-size` stops here too).
pub const MAX_BATCH: usize = 4096;

/// Tokens strategy A-free may spend on its reply's words and boilerplate, besides the choice.
pub const FREE_TOKEN_LIMIT: usize = 32;

/// Most tokens A-free generates for `req` before giving up on a closing `}`:
/// [`FREE_TOKEN_LIMIT`] plus the longest choice's own tokens, so a long choice is not cut off.
pub fn free_token_limit(tok: &Tokenizer, req: &JudgeRequest) -> Result<usize> {
    let mut longest = 0;
    for c in &req.choices {
        longest = longest.max(tok.encode(c)?.len());
    }
    Ok(FREE_TOKEN_LIMIT + longest)
}

/// Options of [`Engine::judge_all`].
#[derive(Debug, Clone, Copy, Default)]
pub struct JudgeOptions {
    /// Also report the unconstrained top-k tokens where the answer is read (full heads).
    pub top_k: usize,
    /// Also give B's records each choice's full-sequence log-probability (a second pass).
    pub sequence_logprobs: bool,
}

/// A model with its tokenizer: everything needed to judge.
pub struct Engine {
    model: Model,
    tokenizer: Tokenizer,
    /// Hears of every forward pass before it runs ([`Engine::set_progress`]).
    progress: Option<ProgressHook>,
    /// The strategy being run, for progress reports.
    running: Strategy,
}

/// What [`Engine::probe`] measured.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Probe {
    pub tokens: usize,
    pub prefill_ms: f64,
    pub decode_ms: f64,
}

/// What hears of each forward pass ([`Engine::set_progress`]).
pub type ProgressHook = Box<dyn FnMut(&Progress)>;

/// A forward pass about to run: which strategy, prefill or decode, and how far along.
#[derive(Debug, Clone, Serialize)]
pub struct Progress {
    pub strategy: Strategy,
    pub phase: &'static str,
    /// Decode steps done before this pass (0 for the prefill).
    pub step: usize,
    /// Tokens in this pass (all sequences together).
    pub tokens: usize,
}

/// Sizes a call needs: `slots` sequences of up to `longest` tokens each (generation included),
/// `batch_tokens` in the largest forward, `rows` read out at once (`full_rows` of them through
/// the full-vocabulary head).
struct Room {
    slots: usize,
    longest: usize,
    batch_tokens: usize,
    rows: usize,
    full_rows: usize,
    choice_ids: usize,
}

impl Room {
    /// One sequence of up to `longest` tokens, `batch_tokens` of them in its largest forward,
    /// one row read out (through either head).
    fn one(longest: usize, batch_tokens: usize, choice_ids: usize) -> Self {
        Room { slots: 1, longest, batch_tokens, rows: 1, full_rows: 1, choice_ids }
    }
}

/// Sizes grow in steps of this many tokens, so requests of similar lengths reuse a set-up.
const GROWTH_STEP: usize = 64;

impl Engine {
    pub fn new(model: Model, tokenizer: Tokenizer) -> Self {
        Self { model, tokenizer, progress: None, running: Strategy::PrefillOneToken }
    }

    /// Calls `progress` before every forward pass of later calls (`None`: stop).
    pub fn set_progress(&mut self, progress: Option<ProgressHook>) {
        self.progress = progress;
    }

    /// Reports a forward pass about to run.
    fn report(&mut self, phase: Phase, step: usize, tokens: usize) {
        let strategy = self.running;
        if let Some(progress) = self.progress.as_mut() {
            let phase = if phase == Phase::Prefill { "prefill" } else { "decode" };
            progress(&Progress { strategy, phase, step, tokens });
        }
    }

    /// An engine on `weights` at small starting sizes ([`ModelOptions::STARTING`]); each call
    /// grows them as it needs.
    pub fn load(gpu: Rc<Gpu>, weights: GpuWeights, tokenizer: Tokenizer) -> Result<Self> {
        // A tokenizer of another model would give ids past the embedding: say so here, naming
        // both, rather than blame a prompt later.
        let (ids, vocab) = (tokenizer.vocab_size(), weights.config().vocab_size);
        if ids > vocab {
            return Err(Error::Tokenizer(format!(
                "it knows {ids} token ids, more than the model's vocabulary of {vocab} (vocab_size): \
                 the tokenizer and the weights are from different models"
            )));
        }
        Ok(Self::new(Model::new(gpu, weights, ModelOptions::STARTING)?, tokenizer))
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn model_mut(&mut self) -> &mut Model {
        &mut self.model
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    fn synthetic(&self) -> bool {
        self.model.weights().synthetic()
    }

    /// Answers `req` with each of `strategies` in turn (the CLI's and the page's `judge`).
    pub async fn judge_all(
        &mut self,
        req: &JudgeRequest,
        strategies: &[Strategy],
        options: JudgeOptions,
    ) -> Result<Vec<Judgment>> {
        let mut out = Vec::with_capacity(strategies.len());
        for &strategy in strategies {
            let mut record = self.judge(req, strategy, options.top_k).await?;
            if options.sequence_logprobs && strategy.reads_answer_at_prefill() {
                record.sequence_logprobs = Some(self.sequence_logprobs(req).await?);
            }
            out.push(record);
        }
        Ok(out)
    }

    /// The last position of `ids` through the whole model: every logit and the final hidden
    /// state (the `logits` diagnostic; tests compare it with the CPU reference).
    pub async fn logits(&mut self, ids: &[u32]) -> Result<RowOut> {
        let n = ids.len();
        self.make_room(Room::one(n, n, 1))?;
        self.model.forget(0)?;
        let readout = Readout { hidden: true, ..Readout::LOGITS };
        let mut out = self.model.prefill(&[Sequence { slot: 0, tokens: ids }], readout).await?;
        Ok(out.rows.remove(0))
    }

    /// A quick measure of this device before any judgment: the wall milliseconds of a prefill
    /// of `tokens` tokens and of one decode step after it (slot 0, which it leaves empty). The
    /// page estimates a long run from it.
    pub async fn probe(&mut self, tokens: usize) -> Result<Probe> {
        let tokens = tokens.clamp(1, self.model.config().max_position_embeddings - 1);
        self.make_room(Room::one(tokens + 1, tokens, 1))?;
        self.model.forget(0)?;
        // Any ids will do: the work does not depend on them.
        let vocab = self.model.config().vocab_size as u32;
        let ids: Vec<u32> = (0..tokens as u32).map(|i| 1 + i % (vocab - 1)).collect();
        let prefill = self.model.prefill(&[Sequence { slot: 0, tokens: &ids }], Readout::ARGMAX).await?;
        let decode = self.model.decode(&[(0, 1)], Readout::ARGMAX).await?;
        self.model.forget(0)?;
        Ok(Probe { tokens, prefill_ms: prefill.timing.wall_ms, decode_ms: decode.timing.wall_ms })
    }

    /// Grows the model to `room`, or fails if a sequence cannot fit the model's context.
    fn make_room(&mut self, room: Room) -> Result<()> {
        let context = self.model.config().max_position_embeddings;
        if room.longest > context {
            return Err(Error::ContextOverflow { tokens: room.longest, limit: ContextLimit::Model { context } });
        }
        // Kernels run a grid row per token of a pass.
        let grid = self.model.gpu().limits().max_compute_workgroups_per_dimension as usize;
        if room.batch_tokens > grid {
            return Err(Error::BatchPassTooLarge { tokens: room.batch_tokens, grid });
        }
        let step = |n: usize| n.next_multiple_of(GROWTH_STEP);
        // More tokens than one pass holds on this device prefill in several (Model::prefill).
        let pass = Model::pass_tokens(self.model.gpu(), self.model.config());
        self.model.grow_to(ModelOptions {
            max_tokens: step(room.batch_tokens).min(pass),
            kv_slots: room.slots,
            kv_capacity: step(room.longest).min(context),
            max_rows: room.rows,
            max_full_rows: room.full_rows,
            max_choice_ids: room.choice_ids,
        })
    }
}

/// Where a request's response prefix goes: at the end of the prompt (B and C: the answer is
/// read where the prompt ends), or at the start of every reply (A: the model writes it).
#[derive(Clone, Copy, PartialEq, Eq)]
enum PrefixIn {
    Prompt,
    Reply,
}

/// `req`'s prompt and its choices tokenized after it, each spelled as the reply after the
/// response prefix writes it (see [`Spelling`]).
fn choice_set(tok: &Tokenizer, req: &JudgeRequest, prefix_in: PrefixIn) -> Result<ChoiceSet> {
    let prefix = req.prefix();
    let spelling = Spelling::after(prefix, tok.eos_token());
    let system = req.system.as_deref();
    match prefix_in {
        PrefixIn::Prompt => {
            ChoiceSet::new(tok, &tok.chat_prompt(system, &req.user, prefix)?, "", &req.choices, &spelling)
        }
        PrefixIn::Reply => {
            ChoiceSet::new(tok, &tok.chat_prompt(system, &req.user, "")?, prefix, &req.choices, &spelling)
        }
    }
}

/// Timing bookkeeping of one judgment.
#[derive(Clone, Default)]
struct PhaseClock {
    timings: Timings,
    gpu: Option<PhaseTimings>,
    encode: PhaseTimings,
    /// Decode passes that ran commands encoded ahead.
    encoded_ahead: usize,
}

impl PhaseTimings {
    /// Adds a pass's milliseconds to its phase.
    fn record(&mut self, ms: f64, phase: Phase) {
        match phase {
            Phase::Prefill => self.prefill += ms,
            Phase::Decode => self.decode.push(ms),
        }
    }
}

/// Which phase a forward pass belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Prefill,
    Decode,
}

impl PhaseClock {
    fn record(&mut self, t: &ForwardTiming, phase: Phase) {
        self.timings.readback += t.readback_ms;
        match phase {
            Phase::Prefill => self.timings.prefill += t.wall_ms,
            Phase::Decode => self.timings.decode.push(t.wall_ms),
        }
        self.encode.record(t.encode_ms, phase);
        self.encoded_ahead += usize::from(phase == Phase::Decode && t.encoded_ahead);
        if let Some(ms) = t.gpu_ms() {
            self.gpu.get_or_insert_with(PhaseTimings::default).record(ms, phase);
        }
    }
}
