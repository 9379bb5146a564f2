//! Strategies A (token by token, schema-constrained or free) and B (prefill + one token) on one
//! request in KV slot 0, and the sequence log-probability analysis.

use super::{
    Answer, Engine, FreeStop, JudgeRequest, Judgment, JudgmentContext, Phase, PhaseClock, PrefixIn, Room, Strategy,
    choice_set, free_token_limit,
};
use crate::choice::{ChoiceSet, ConstrainedPick, check_choices, fork_logits};
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::model::{ForwardOut, Head, Positions, Readout, Sequence};

/// The LM head a constrained walk reads the allowed tokens from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum HeadKind {
    /// The whole vocabulary (what a generation engine computes), the allowed ids read from it.
    FullVocabulary,
    /// Only the allowed ids' rows.
    ChoiceRows,
}

/// Where a constrained walk stops.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WalkUntil {
    /// Once one choice is left (strategy B).
    Decided,
    /// At the end of the chosen sequence: every token of the reply generated (strategy A).
    ReplyEnd,
}

impl Engine {
    /// Answers one request with one strategy of a single request (not [`Strategy::Batched`]).
    /// `top_k` > 0 also reports the unconstrained top tokens where the answer is read (full
    /// heads). The model grows to fit the request.
    pub async fn judge(&mut self, req: &JudgeRequest, strategy: Strategy, top_k: usize) -> Result<Judgment> {
        let start = now_ms();
        self.running = strategy;
        let tok = &self.tokenizer;
        check_choices(tok, &req.choices)?;
        let system = req.system.as_deref();
        let mut clock = PhaseClock::default();
        let answer = match strategy {
            Strategy::TokenByTokenFree => {
                let prompt = tok.encode(&tok.chat_prompt(system, &req.user, "")?)?;
                clock.timings.tokenize = now_ms() - start;
                self.generate_free(req, &prompt, top_k, &mut clock).await?
            }
            Strategy::TokenByToken => {
                // The reply's JSON, boilerplate and all, is the sequence each choice stands for.
                let set = choice_set(tok, req, PrefixIn::Reply)?;
                clock.timings.tokenize = now_ms() - start;
                self.walk(&set, HeadKind::FullVocabulary, WalkUntil::ReplyEnd, top_k, &mut clock).await?
            }
            Strategy::PrefillOneToken | Strategy::PrefillOneTokenFullHead => {
                let set = choice_set(tok, req, PrefixIn::Prompt)?;
                clock.timings.tokenize = now_ms() - start;
                let head = match strategy {
                    Strategy::PrefillOneTokenFullHead => HeadKind::FullVocabulary,
                    _ => HeadKind::ChoiceRows,
                };
                self.walk(&set, head, WalkUntil::Decided, top_k, &mut clock).await?
            }
            Strategy::Batched => {
                return Err(Error::Input("strategy c judges a batch of requests (judge_batch)".into()));
            }
        };
        clock.timings.total = now_ms() - start;
        self.judgment(strategy, &req.choices, answer, clock)
    }

    /// The record of `answer`, its generated text decoded.
    pub(super) fn judgment(
        &self,
        strategy: Strategy,
        choices: &[String],
        answer: Answer,
        clock: PhaseClock,
    ) -> Result<Judgment> {
        let context = JudgmentContext {
            strategy,
            choices,
            generated_text: self.tokenizer.decode(&answer.picked)?,
            timings: clock.timings,
            gpu_timings: clock.gpu,
            encode_timings: clock.encode,
            decode_steps_encoded_ahead: clock.encoded_ahead,
            synthetic: self.synthetic(),
        };
        Ok(Judgment::new(answer, context))
    }

    /// Grows the model for one sequence of `prompt` tokens and `generated` more.
    fn room_for_one(&mut self, prompt: usize, generated: usize, choice_ids: usize) -> Result<()> {
        let longest = prompt + generated;
        self.make_room(Room::one(longest, prompt, choice_ids))
    }

    /// The log-probability of each whole choice (tokens and closing) after B's prompt:
    /// log p(t1 | prompt) + log p(t2 | prompt, t1) + ... The prompt is prefilled once in slot 0
    /// and copied to one slot per choice; all continuations then run as one batch, reading
    /// only the needed logits and each position's logsumexp. An analysis, not a strategy: it
    /// costs a second, batched pass, and is not part of B's timings.
    pub async fn sequence_logprobs(&mut self, req: &JudgeRequest) -> Result<Vec<f32>> {
        let set = choice_set(&self.tokenizer, req, PrefixIn::Prompt)?;
        let n = set.sequences().len();
        let rows: usize = set.sequences().iter().map(|s| s.len() - 1).sum();
        let longest = set.sequences().iter().map(Vec::len).max().unwrap_or(0);
        let union = set.all_tokens();
        let base = set.base().len();
        let batch_tokens = base.max(rows);
        let room = Room {
            slots: n + 1,
            longest: base + longest,
            batch_tokens,
            rows,
            full_rows: rows,
            choice_ids: union.len(),
        };
        self.make_room(room)?;
        self.model.forget_all();
        let out =
            self.model.prefill(&[Sequence { slot: 0, tokens: set.base() }], full_head(&union, Positions::Last)).await?;
        let logprob = |row: &crate::model::RowOut, token: u32| {
            union.binary_search(&token).ok().and_then(|at| row.logprob(at)).ok_or_else(|| missing_logit(token))
        };
        let mut result: Vec<f32> =
            set.sequences().iter().map(|s| logprob(&out.rows[0], s[0])).collect::<Result<_>>()?;
        if rows == 0 {
            return Ok(result);
        }
        let mut batch = Vec::new();
        for (c, seq) in set.sequences().iter().enumerate() {
            if seq.len() > 1 {
                self.model.share_prefix(0, c + 1, base)?;
                batch.push(Sequence { slot: c + 1, tokens: &seq[..seq.len() - 1] });
            }
        }
        let out = self.model.prefill(&batch, full_head(&union, Positions::All)).await?;
        let mut row = out.rows.iter();
        for (c, seq) in set.sequences().iter().enumerate() {
            for &next in &seq[1..] {
                let at = row.next().ok_or_else(|| Error::Gpu("fewer rows read back than asked".into()))?;
                result[c] += logprob(at, next)?;
            }
        }
        Ok(result)
    }

    /// Prefills `set.base()` in slot 0, then walks the choices' trie one forward pass per token
    /// until `until`.
    async fn walk(
        &mut self,
        set: &ChoiceSet,
        head: HeadKind,
        until: WalkUntil,
        top_k: usize,
        clock: &mut PhaseClock,
    ) -> Result<Answer> {
        let longest = set.sequences().iter().map(Vec::len).max().unwrap_or(0);
        let union = set.all_tokens();
        self.room_for_one(set.base().len(), longest, union.len())?;
        self.model.forget(0)?;
        let mut pick = ConstrainedPick::new(set);
        let mut answer = Answer { prompt_tokens: set.base().len(), healed_tokens: set.healed(), ..Answer::default() };
        loop {
            let allowed = pick.allowed(set);
            let readout = match head {
                HeadKind::FullVocabulary => Readout::last(Head::Full { top_k: top_k.max(1), ids: &allowed }),
                HeadKind::ChoiceRows => Readout::last(Head::Choices(&allowed)),
            };
            let (out, phase) = self.step(set.base(), pick.picked(), readout).await?;
            clock.record(&out.timing, phase);
            let row = &out.rows[0];
            if allowed.len() > 1 && answer.choice_logits.is_empty() {
                // Where the choices first differ: the answer position.
                answer.choice_logits = fork_logits(set, pick.picked().len(), &allowed, &row.logits);
                answer.top = (head == HeadKind::FullVocabulary && top_k > 0).then(|| row.top.clone());
            }
            pick.step(set, &row.logits);
            if let Some(index) = pick.decided()
                && (until == WalkUntil::Decided || pick.picked().len() == set.sequences()[index].len())
            {
                if answer.choice_logits.is_empty() {
                    // Never reached a fork: cannot happen with two distinct choices.
                    return Err(Error::Input("the choices never differ".into()));
                }
                answer.index = Some(index);
                answer.decode_steps = pick.picked().len() - 1;
                answer.probs = pick.probs().to_vec();
                answer.picked = pick.into_picked();
                return Ok(answer);
            }
        }
    }

    /// The prefill of `prompt` in slot 0 when nothing is `picked` yet, else a decode step of the
    /// last picked token.
    async fn step(&mut self, prompt: &[u32], picked: &[u32], readout: Readout<'_>) -> Result<(ForwardOut, Phase)> {
        Ok(match picked.last() {
            None => {
                self.report(Phase::Prefill, 0, prompt.len());
                (self.model.prefill(&[Sequence { slot: 0, tokens: prompt }], readout).await?, Phase::Prefill)
            }
            Some(&token) => {
                self.report(Phase::Decode, picked.len() - 1, 1);
                (self.model.decode(&[(0, token)], readout).await?, Phase::Decode)
            }
        })
    }

    /// Strategy A-free: greedy generation until the JSON object closes, a special token (the
    /// end of the turn), or the token limit ([`free_token_limit`]).
    async fn generate_free(
        &mut self,
        req: &JudgeRequest,
        prompt: &[u32],
        top_k: usize,
        clock: &mut PhaseClock,
    ) -> Result<Answer> {
        let limit = free_token_limit(&self.tokenizer, req)?;
        self.room_for_one(prompt.len(), limit, 1)?;
        self.model.forget(0)?;
        let eos = self.model.config().eos_ids();
        let mut answer = Answer { prompt_tokens: prompt.len(), ..Answer::default() };
        let mut text = String::new();
        answer.free_stop = Some(FreeStop::TokenLimit);
        for pass in 0..limit {
            let readout = Readout::last(Head::Full { top_k: top_k.max(1), ids: &[] });
            let (out, phase) = self.step(prompt, &answer.picked, readout).await?;
            clock.record(&out.timing, phase);
            answer.decode_steps = pass;
            let row = &out.rows[0];
            if answer.top.is_none() && top_k > 0 {
                answer.top = Some(row.top.clone());
            }
            let next = row.top[0].0;
            // `<|endoftext|>` ends a reply as surely as `<|im_end|>`, whichever the config lists.
            if eos.contains(&next) || self.tokenizer.is_special_id(next) {
                answer.free_stop = Some(FreeStop::EndOfTurn);
                break;
            }
            answer.picked.push(next);
            text = self.tokenizer.decode(&answer.picked)?;
            if super::json_object_closed(&text) {
                answer.free_stop = Some(FreeStop::Closed);
                break;
            }
        }
        answer.index = super::parse_choice(&text, &req.choices);
        Ok(answer)
    }
}

/// The full-vocabulary head reading `ids` (and each position's logsumexp) at `positions`.
fn full_head(ids: &[u32], positions: Positions) -> Readout<'_> {
    Readout { positions, head: Head::Full { top_k: 1, ids }, hidden: false }
}

fn missing_logit(token: u32) -> Error {
    Error::Gpu(format!("no logit read back for token {token}"))
}
