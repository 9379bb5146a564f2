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

use serde::{Deserialize, Serialize};

use crate::choice::{CLOSING, ChoiceSet, ConstrainedPick, check_choices, fork_logits};
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::model::{ForwardOut, ForwardTiming, Head, Model, ModelOptions, Readout, Rows, Sequence};
use crate::tokenizer::Tokenizer;

/// The response prefix strategy B prefills by default.
pub const DEFAULT_PREFIX: &str = "{\"choice\": \"";

/// Most tokens strategy A-free generates before giving up on a closing `}`.
pub const FREE_TOKEN_LIMIT: usize = 32;

/// A judgment request: the CLI's request file, the page's `judge()` argument.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeRequest {
    /// System prompt; without it the chat template's default applies.
    #[serde(default)]
    pub system: Option<String>,
    pub user: String,
    pub choices: Vec<String>,
    /// Response prefix for strategy B (default `{"choice": "`).
    #[serde(default)]
    pub prefix: Option<String>,
}

impl JudgeRequest {
    pub fn prefix(&self) -> &str {
        self.prefix.as_deref().unwrap_or(DEFAULT_PREFIX)
    }
}

/// How to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// A, schema-constrained: every token of the JSON reply is a forward pass.
    TokenByToken,
    /// A, free: greedy until the JSON closes, EOS or [`FREE_TOKEN_LIMIT`].
    TokenByTokenFree,
    /// B with the choices' head rows only.
    PrefillOneToken,
    /// B with the full-vocabulary head.
    PrefillOneTokenFullHead,
}

impl Strategy {
    pub const ALL: [Strategy; 4] = [
        Strategy::TokenByToken,
        Strategy::TokenByTokenFree,
        Strategy::PrefillOneToken,
        Strategy::PrefillOneTokenFullHead,
    ];

    /// The CLI's and the page's name.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::TokenByToken => "a",
            Strategy::TokenByTokenFree => "a-free",
            Strategy::PrefillOneToken => "b",
            Strategy::PrefillOneTokenFullHead => "b-full-head",
        }
    }

    /// `all`, or one name.
    pub fn parse_list(name: &str) -> Result<Vec<Strategy>> {
        if name == "all" {
            return Ok(Self::ALL.to_vec());
        }
        Self::ALL
            .iter()
            .copied()
            .find(|s| s.name() == name)
            .map(|s| vec![s])
            .ok_or_else(|| Error::Input(format!("unknown strategy {name:?} (all, a, a-free, b, b-full-head)")))
    }
}

/// Milliseconds of wall time per phase (always present).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    /// Chat template, tokenization and choice tokenization on the CPU.
    pub tokenize: f64,
    /// The prefill pass: submit, GPU work, readback.
    pub prefill: f64,
    /// Each decode step, in order.
    pub decode: Vec<f64>,
    /// Copying results out of mapped buffers (part of prefill and decode).
    pub readback: f64,
    /// The whole judgment.
    pub total: f64,
}

/// Milliseconds of GPU time per phase, from timestamp queries.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GpuTimings {
    pub prefill: f64,
    pub decode: Vec<f64>,
}

/// The record of one judgment (the CLI prints it as one JSON line).
#[derive(Debug, Clone, Serialize)]
pub struct Judgment {
    pub strategy: &'static str,
    /// The chosen choice; `None` when A-free's reply names none of them.
    pub choice: Option<String>,
    pub choice_index: Option<usize>,
    /// Logits of each choice's token where the choices first differ, in choice order.
    pub choice_logits: Vec<f32>,
    /// Probabilities over the choices from those logits.
    pub probs: Vec<f32>,
    /// Tokens prefilled (prompt, response prefix included).
    pub prompt_tokens: usize,
    pub generated_token_ids: Vec<u32>,
    pub generated_text: String,
    /// Forward passes after the prefill.
    pub decode_steps: usize,
    /// Prompt tokens backed off for token healing (see `choice.rs`).
    pub healed_tokens: usize,
    /// With `top_k`: `[id, logit]` of the unconstrained distribution where the answer is read
    /// (full-vocabulary heads only; `None` for the choice head).
    pub top: Option<Vec<(u32, f32)>>,
    pub timings_ms: Timings,
    pub gpu_timings_ms: Option<GpuTimings>,
    /// Synthetic weights: the answer is meaningless; the timings are real.
    pub synthetic: bool,
    /// On request ([`Engine::sequence_logprobs`]): each choice's full-sequence log-probability
    /// (its tokens and the closing) after B's prompt; `None` otherwise.
    pub sequence_logprobs: Option<Vec<f32>>,
}

/// A batch of judgments (strategy C).
#[derive(Debug, Clone, Serialize)]
pub struct BatchRecord {
    pub strategy: &'static str,
    pub judgments: usize,
    /// Tokens of the shared prefix computed once (0 without `shared_prefix`).
    pub shared_prefix_tokens: usize,
    /// Tokens in the batched prefill (suffixes only, with a shared prefix).
    pub batch_prefill_tokens: usize,
    /// Longest sequence of the batch: the bound on its latency.
    pub longest_prompt_tokens: usize,
    pub decode_steps: usize,
    pub timings_ms: BatchTimings,
    pub gpu_timings_ms: Option<GpuTimings>,
    pub judgments_per_s: f64,
    pub synthetic: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct BatchTimings {
    pub tokenize: f64,
    /// Prefill of the shared prefix (0 without one).
    pub shared_prefill: f64,
    pub prefill: f64,
    pub decode: Vec<f64>,
    pub total: f64,
}

/// A model with its tokenizer: everything needed to judge.
pub struct Engine {
    pub model: Model,
    pub tokenizer: Tokenizer,
}

/// Timing bookkeeping of one judgment.
#[derive(Default)]
struct Clock {
    timings: Timings,
    gpu: Option<GpuTimings>,
}

impl Clock {
    fn record(&mut self, t: &ForwardTiming, prefill: bool) {
        self.timings.readback += t.readback_ms;
        let gpu = match (t.gpu_layers_ms, t.gpu_head_ms) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        if prefill {
            self.timings.prefill += t.wall_ms;
        } else {
            self.timings.decode.push(t.wall_ms);
        }
        if let Some(ms) = gpu {
            let g = self.gpu.get_or_insert_with(GpuTimings::default);
            if prefill { g.prefill += ms } else { g.decode.push(ms) }
        }
    }
}

/// What a constrained walk found.
struct Walk {
    index: usize,
    picked: Vec<u32>,
    choice_logits: Vec<f32>,
    probs: Vec<f32>,
    top: Option<Vec<(u32, f32)>>,
}

impl Engine {
    pub fn new(model: Model, tokenizer: Tokenizer) -> Self {
        Self { model, tokenizer }
    }

    /// Makes sure the model's buffers fit these requests (every prompt with room to generate;
    /// with `batch`, all of them at once), setting them up again at the needed sizes if not.
    pub fn fit(&mut self, reqs: &[JudgeRequest], batch: bool) -> Result<()> {
        let tok = &self.tokenizer;
        let (mut longest, mut total) = (0, 0);
        for r in reqs {
            let n = tok.encode(&tok.chat_prompt(r.system.as_deref(), &r.user, r.prefix())?)?.len();
            longest = longest.max(n);
            total += n;
        }
        // Room for A's reply (the prefix, a choice, the closing) or A-free's token limit.
        let room = longest + FREE_TOKEN_LIMIT.max(48);
        let context = self.model.config.max_position_embeddings;
        if longest > context {
            return Err(Error::ContextOverflow {
                tokens: longest,
                limit: format!("the model's context is {context} tokens"),
            });
        }
        let n = if batch { reqs.len().max(1) } else { 1 };
        let need = ModelOptions {
            max_tokens: if batch { total.max(room) } else { room },
            kv_slots: n,
            kv_capacity: room.min(context),
            max_rows: n,
            max_choice_ids: 256,
        };
        let o = self.model.options;
        if o.max_tokens < need.max_tokens
            || o.kv_slots < need.kv_slots
            || o.kv_capacity < need.kv_capacity
            || o.max_rows < need.max_rows
            || o.max_choice_ids < need.max_choice_ids
        {
            self.model = self.model.resized(need)?;
        }
        Ok(())
    }

    fn synthetic(&self) -> bool {
        self.model.weights.synthetic
    }

    /// Answers one request with one strategy. `top_k` > 0 also reports the unconstrained top
    /// tokens where the answer is read (full-vocabulary heads).
    pub async fn judge(&mut self, req: &JudgeRequest, strategy: Strategy, top_k: usize) -> Result<Judgment> {
        let start = now_ms();
        let tok = &self.tokenizer;
        check_choices(tok, &req.choices)?;
        let system = req.system.as_deref();
        let mut clock = Clock::default();
        let record = match strategy {
            Strategy::TokenByTokenFree => {
                let prompt = tok.encode(&tok.chat_prompt(system, &req.user, "")?)?;
                clock.timings.tokenize = now_ms() - start;
                self.free(req, &prompt, top_k, &mut clock).await?
            }
            Strategy::TokenByToken => {
                // The reply's JSON, boilerplate and all, is the sequence each choice stands for.
                let prompt = tok.chat_prompt(system, &req.user, "")?;
                let prefix = req.prefix();
                let replies: Vec<String> = req.choices.iter().map(|c| format!("{prefix}{c}")).collect();
                let set = ChoiceSet::new(tok, &prompt, &replies, CLOSING)?;
                clock.timings.tokenize = now_ms() - start;
                let walk = self.walk(&set, true, true, top_k, &mut clock).await?;
                self.record_walk(req, strategy, &set, walk)?
            }
            Strategy::PrefillOneToken | Strategy::PrefillOneTokenFullHead => {
                let prompt = tok.chat_prompt(system, &req.user, req.prefix())?;
                let set = ChoiceSet::new(tok, &prompt, &req.choices, CLOSING)?;
                clock.timings.tokenize = now_ms() - start;
                let full = strategy == Strategy::PrefillOneTokenFullHead;
                let walk = self.walk(&set, full, false, top_k, &mut clock).await?;
                self.record_walk(req, strategy, &set, walk)?
            }
        };
        let mut record = record;
        clock.timings.total = now_ms() - start;
        record.timings_ms = clock.timings;
        record.gpu_timings_ms = clock.gpu;
        Ok(record)
    }

    fn record_walk(&self, req: &JudgeRequest, strategy: Strategy, set: &ChoiceSet, walk: Walk) -> Result<Judgment> {
        Ok(Judgment {
            strategy: strategy.name(),
            choice: Some(req.choices[walk.index].clone()),
            choice_index: Some(walk.index),
            choice_logits: walk.choice_logits,
            probs: walk.probs,
            prompt_tokens: set.base.len(),
            generated_text: self.tokenizer.decode(&walk.picked)?,
            decode_steps: walk.picked.len() - 1,
            generated_token_ids: walk.picked,
            healed_tokens: set.healed,
            top: walk.top,
            timings_ms: Timings::default(),
            gpu_timings_ms: None,
            synthetic: self.synthetic(),
            sequence_logprobs: None,
        })
    }

    /// The log-probability of each whole choice (tokens and closing) after B's prompt:
    /// log p(t1 | prompt) + log p(t2 | prompt, t1) + ... The prompt is prefilled once in slot 0
    /// and copied to one slot per choice; all continuations then run as one batch, reading
    /// only the needed logits and each position's logsumexp. An analysis, not a strategy: it
    /// costs a second, batched pass, and is not part of B's timings.
    pub async fn sequence_logprobs(&mut self, req: &JudgeRequest) -> Result<Vec<f32>> {
        let tok = &self.tokenizer;
        let prompt = tok.chat_prompt(req.system.as_deref(), &req.user, req.prefix())?;
        let set = ChoiceSet::new(tok, &prompt, &req.choices, CLOSING)?;
        let n = set.choices.len();
        let rows: usize = set.sequences.iter().map(|s| s.len() - 1).sum();
        let longest = set.sequences.iter().map(Vec::len).max().unwrap_or(0);
        let union = set.all_tokens();
        let o = self.model.options;
        let need = ModelOptions {
            max_tokens: o.max_tokens.max(set.base.len()).max(rows),
            kv_slots: o.kv_slots.max(n + 1),
            kv_capacity: o.kv_capacity.max(set.base.len() + longest),
            max_rows: o.max_rows.max(rows),
            max_choice_ids: o.max_choice_ids.max(union.len()),
        };
        if need.kv_slots > o.kv_slots
            || need.max_rows > o.max_rows
            || need.max_tokens > o.max_tokens
            || need.kv_capacity > o.kv_capacity
            || need.max_choice_ids > o.max_choice_ids
        {
            self.model = self.model.resized(need)?;
        }
        self.check_fits(set.base.len() + longest)?;
        self.model.kv.reset_all();
        let first = Readout { rows: Rows::Last, head: Head::Full { top_k: 1, ids: &union }, hidden: false };
        let out = self.model.prefill(&[Sequence { slot: 0, tokens: &set.base }], first).await?;
        let logprob = |row: &crate::model::RowOut, token: u32| {
            let at = union.binary_search(&token).expect("in union");
            row.logits[at] - row.logsumexp.expect("full head")
        };
        let mut result: Vec<f32> = set.sequences.iter().map(|s| logprob(&out.rows[0], s[0])).collect();
        if rows > 0 {
            let mut batch = Vec::new();
            for (c, seq) in set.sequences.iter().enumerate() {
                if seq.len() > 1 {
                    self.model.kv.copy_prefix(&self.model.gpu, 0, c + 1, set.base.len())?;
                    batch.push(Sequence { slot: c + 1, tokens: &seq[..seq.len() - 1] });
                }
            }
            let all = Readout { rows: Rows::All, head: Head::Full { top_k: 1, ids: &union }, hidden: false };
            let out = self.model.prefill(&batch, all).await?;
            let mut row = out.rows.iter();
            for (c, seq) in set.sequences.iter().enumerate() {
                for &next in &seq[1..] {
                    result[c] += logprob(row.next().expect("one row per continuation token"), next);
                }
            }
        }
        Ok(result)
    }

    /// Fails before any GPU work if `tokens` cannot fit one KV slot.
    fn check_fits(&self, tokens: usize) -> Result<()> {
        let m = &self.model;
        let limit = m.kv.capacity.min(m.options.max_tokens).min(m.config.max_position_embeddings);
        if tokens > limit {
            return Err(Error::ContextOverflow {
                tokens,
                limit: format!(
                    "this engine takes {limit} tokens per sequence (KV capacity {}, prefill {}, model context {})",
                    m.kv.capacity, m.options.max_tokens, m.config.max_position_embeddings
                ),
            });
        }
        Ok(())
    }

    /// Prefills `set.base` in slot 0, then walks the choices' trie one forward pass per token:
    /// until one choice is left (`to_end` false: strategy B), or to the end of its sequence
    /// (`to_end` true: strategy A, where every token of the reply is generated).
    async fn walk(
        &mut self,
        set: &ChoiceSet,
        full_head: bool,
        to_end: bool,
        top_k: usize,
        clock: &mut Clock,
    ) -> Result<Walk> {
        let longest = set.sequences.iter().map(Vec::len).max().unwrap_or(0);
        self.check_fits(set.base.len() + longest)?;
        self.model.kv.reset(0);
        let mut pick = ConstrainedPick::new(set);
        let (mut choice_logits, mut probs, mut top) = (Vec::new(), Vec::new(), None);
        loop {
            let allowed = pick.allowed(set);
            let head = if full_head { Head::Full { top_k: top_k.max(1), ids: &allowed } } else { Head::Rows(&allowed) };
            let readout = Readout { rows: Rows::Last, head, hidden: false };
            let out: ForwardOut = match pick.picked.last() {
                None => self.model.prefill(&[Sequence { slot: 0, tokens: &set.base }], readout).await?,
                Some(&last) => self.model.decode(&[(0, last)], readout).await?,
            };
            clock.record(&out.timing, pick.picked.is_empty());
            let row = &out.rows[0];
            let depth = pick.picked.len();
            if allowed.len() > 1 && choice_logits.is_empty() {
                // Where the choices first differ: the answer position.
                (choice_logits, probs) = fork_logits(set, depth, &allowed, &row.logits);
                top = (full_head && top_k > 0).then(|| row.top.clone());
            }
            pick.step(set, &row.logits);
            if let Some(index) = pick.decided()
                && (!to_end || pick.picked.len() == set.sequences[index].len())
            {
                if choice_logits.is_empty() {
                    // Never reached a fork: cannot happen with two distinct choices.
                    return Err(Error::Input("the choices never differ".into()));
                }
                return Ok(Walk { index, picked: pick.picked, choice_logits, probs, top });
            }
        }
    }

    /// Strategy A-free: greedy generation until the JSON object closes, EOS, or the limit.
    async fn free(&mut self, req: &JudgeRequest, prompt: &[u32], top_k: usize, clock: &mut Clock) -> Result<Judgment> {
        self.check_fits(prompt.len() + FREE_TOKEN_LIMIT)?;
        self.model.kv.reset(0);
        let eos = self.model.config.eos_ids();
        let im_end = self.tokenizer.token_id("<|im_end|>");
        let mut generated = Vec::new();
        let mut top = None;
        let mut text = String::new();
        while generated.len() < FREE_TOKEN_LIMIT {
            let readout =
                Readout { rows: Rows::Last, head: Head::Full { top_k: top_k.max(1), ids: &[] }, hidden: false };
            let out = match generated.last() {
                None => self.model.prefill(&[Sequence { slot: 0, tokens: prompt }], readout).await?,
                Some(&last) => self.model.decode(&[(0, last)], readout).await?,
            };
            clock.record(&out.timing, generated.is_empty());
            let row = &out.rows[0];
            if top.is_none() && top_k > 0 {
                top = Some(row.top.clone());
            }
            let next = row.top[0].0;
            if eos.contains(&next) || Some(next) == im_end {
                break;
            }
            generated.push(next);
            text = self.tokenizer.decode(&generated)?;
            if json_object_closed(&text) {
                break;
            }
        }
        let index = parse_choice(&text, &req.choices);
        Ok(Judgment {
            strategy: Strategy::TokenByTokenFree.name(),
            choice: index.map(|i| req.choices[i].clone()),
            choice_index: index,
            choice_logits: Vec::new(),
            probs: Vec::new(),
            prompt_tokens: prompt.len(),
            decode_steps: generated.len().saturating_sub(1),
            generated_token_ids: generated,
            generated_text: text,
            healed_tokens: 0,
            top,
            timings_ms: Timings::default(),
            gpu_timings_ms: None,
            synthetic: self.synthetic(),
            sequence_logprobs: None,
        })
    }

    /// Strategy C: every request in one batched prefill (each in its own KV slot), answered
    /// by strategy B's choice head. With `shared_prefix`, the prompts' longest common token
    /// prefix (the document) is prefilled once in slot 0 and copied to every slot first.
    pub async fn judge_batch(
        &mut self,
        reqs: &[JudgeRequest],
        shared_prefix: bool,
    ) -> Result<(BatchRecord, Vec<Judgment>)> {
        let start = now_ms();
        let n = reqs.len();
        if n == 0 {
            return Err(Error::Input("an empty batch of requests".into()));
        }
        if n > self.model.kv.slots {
            return Err(Error::Input(format!("{n} requests; this engine has {} KV slots", self.model.kv.slots)));
        }
        let tok = &self.tokenizer;
        let mut sets = Vec::with_capacity(n);
        for (i, r) in reqs.iter().enumerate() {
            let prompt = tok.chat_prompt(r.system.as_deref(), &r.user, r.prefix())?;
            let set = ChoiceSet::new(tok, &prompt, &r.choices, CLOSING)
                .map_err(|e| Error::Input(format!("request {}: {e}", i + 1)))?;
            self.check_fits(set.base.len() + set.sequences.iter().map(Vec::len).max().unwrap_or(0))?;
            sets.push(set);
        }
        let shared = if shared_prefix { shared_prefix_len(&sets) } else { 0 };
        let batch_tokens: usize = sets.iter().map(|s| s.base.len() - shared).sum();
        if batch_tokens > self.model.options.max_tokens {
            return Err(Error::Input(format!(
                "the batch has {batch_tokens} prompt tokens; this engine prefills at most {} in one pass",
                self.model.options.max_tokens
            )));
        }
        let mut clock = Clock::default();
        clock.timings.tokenize = now_ms() - start;
        let mut shared_prefill = 0.0;
        self.model.kv.reset_all();
        if shared > 0 {
            let readout = Readout { rows: Rows::Last, head: Head::Rows(&sets[0].base[..1]), hidden: false };
            let out = self.model.prefill(&[Sequence { slot: 0, tokens: &sets[0].base[..shared] }], readout).await?;
            for slot in 1..n {
                self.model.kv.copy_prefix(&self.model.gpu, 0, slot, shared)?;
            }
            shared_prefill = out.timing.wall_ms;
            clock.record(&out.timing, true);
        }
        let mut picks: Vec<ConstrainedPick> = sets.iter().map(ConstrainedPick::new).collect();
        let mut firsts: Vec<Option<(Vec<f32>, Vec<f32>)>> = vec![None; n];
        let mut decode_steps = 0;
        loop {
            let open: Vec<usize> = (0..n).filter(|&i| picks[i].decided().is_none()).collect();
            if open.is_empty() {
                break;
            }
            let allowed: Vec<Vec<u32>> = open.iter().map(|&i| picks[i].allowed(&sets[i])).collect();
            let mut union: Vec<u32> = allowed.iter().flatten().copied().collect();
            union.sort_unstable();
            union.dedup();
            let readout = Readout { rows: Rows::Last, head: Head::Rows(&union), hidden: false };
            let first = picks[open[0]].picked.is_empty();
            let out = if first {
                let batch: Vec<Sequence> =
                    open.iter().map(|&i| Sequence { slot: i, tokens: &sets[i].base[shared..] }).collect();
                self.model.prefill(&batch, readout).await?
            } else {
                let steps: Vec<(usize, u32)> =
                    open.iter().map(|&i| (i, *picks[i].picked.last().expect("picked"))).collect();
                decode_steps += 1;
                self.model.decode(&steps, readout).await?
            };
            clock.record(&out.timing, first);
            for ((&i, allowed), row) in open.iter().zip(&allowed).zip(&out.rows) {
                let logits: Vec<f32> =
                    allowed.iter().map(|t| row.logits[union.binary_search(t).expect("in union")]).collect();
                if allowed.len() > 1 && firsts[i].is_none() {
                    firsts[i] = Some(fork_logits(&sets[i], picks[i].picked.len(), allowed, &logits));
                }
                picks[i].step(&sets[i], &logits);
            }
        }
        clock.timings.total = now_ms() - start;
        let total_s = clock.timings.total / 1e3;
        let judgments: Vec<Judgment> = (0..n)
            .map(|i| {
                let index = picks[i].decided().expect("all decided");
                let (choice_logits, probs) = firsts[i].clone().unwrap_or_default();
                let picked = picks[i].picked.clone();
                Ok(Judgment {
                    strategy: "c",
                    choice: Some(reqs[i].choices[index].clone()),
                    choice_index: Some(index),
                    choice_logits,
                    probs,
                    prompt_tokens: sets[i].base.len(),
                    generated_text: self.tokenizer.decode(&picked)?,
                    decode_steps: picked.len() - 1,
                    generated_token_ids: picked,
                    healed_tokens: sets[i].healed,
                    top: None,
                    timings_ms: clock.timings.clone(),
                    gpu_timings_ms: clock.gpu.clone(),
                    synthetic: self.synthetic(),
                    sequence_logprobs: None,
                })
            })
            .collect::<Result<_>>()?;
        let record = BatchRecord {
            strategy: "c",
            judgments: n,
            shared_prefix_tokens: shared,
            batch_prefill_tokens: batch_tokens,
            longest_prompt_tokens: sets.iter().map(|s| s.base.len()).max().unwrap_or(0),
            decode_steps,
            timings_ms: BatchTimings {
                tokenize: clock.timings.tokenize,
                shared_prefill,
                prefill: clock.timings.prefill - shared_prefill,
                decode: clock.timings.decode,
                total: clock.timings.total,
            },
            gpu_timings_ms: clock.gpu,
            judgments_per_s: n as f64 / total_s,
            synthetic: self.synthetic(),
        };
        Ok((record, judgments))
    }
}

/// Longest common token prefix of every set's base, leaving each at least one token of its own.
fn shared_prefix_len(sets: &[ChoiceSet]) -> usize {
    let first = &sets[0].base;
    let common = sets[1..]
        .iter()
        .map(|s| first.iter().zip(&s.base).take_while(|(a, b)| a == b).count())
        .min()
        .unwrap_or(first.len());
    let shortest = sets.iter().map(|s| s.base.len()).min().unwrap_or(0);
    common.min(shortest.saturating_sub(1))
}

/// Whether `text` holds a complete top-level JSON object (braces balanced outside strings).
pub fn json_object_closed(text: &str) -> bool {
    let (mut depth, mut in_string, mut escaped, mut opened) = (0i32, false, false, false);
    for ch in text.chars() {
        if in_string {
            match (escaped, ch) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match ch {
            '"' => in_string = true,
            '{' => {
                depth += 1;
                opened = true;
            }
            '}' => {
                depth -= 1;
                if opened && depth == 0 {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// The choice a free-form reply names: the `"choice"` field of the first JSON object in it,
/// matched exactly, then ignoring case and surrounding spaces.
pub fn parse_choice(text: &str, choices: &[String]) -> Option<usize> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    let value: serde_json::Value = serde_json::from_str(text.get(start..=end)?).ok()?;
    let named = value.get("choice")?.as_str()?;
    choices
        .iter()
        .position(|c| c == named)
        .or_else(|| choices.iter().position(|c| c.trim().eq_ignore_ascii_case(named.trim())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_replies_are_parsed() {
        let choices: Vec<String> = ["blue", "red"].map(String::from).to_vec();
        assert!(json_object_closed("{\"choice\": \"blue\"}"));
        assert!(!json_object_closed("{\"choice\": \"bl}ue"));
        assert!(!json_object_closed("{\"a\": {\"b\": 1}"));
        assert_eq!(parse_choice("Sure! {\"choice\": \"red\"}", &choices), Some(1));
        assert_eq!(parse_choice("{\"choice\": \" Blue \"}", &choices), Some(0));
        assert_eq!(parse_choice("{\"choice\": \"green\"}", &choices), None);
        assert_eq!(parse_choice("no json", &choices), None);
        assert_eq!(Strategy::parse_list("all").unwrap().len(), 4);
        assert!(Strategy::parse_list("c").is_err());
    }
}
