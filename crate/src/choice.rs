//! Choices as tokens, and the constrained pick: pure functions over token ids and logits,
//! tested on the CPU, outside the model.
//!
//! A choice's tokens are found *in context*: the prompt (ending with the response prefix) plus
//! the choice plus the closing `"}` is tokenized whole, and the tokens after the prompt are the
//! choice's. Where a choice's first bytes merge with the prompt's last token (BPE can join
//! them), the prompt is backed off by that token and the choice sequences start earlier: token
//! healing. Choices become a trie over these sequences; a pick takes the best allowed next
//! token and continues while more than one choice is still possible.

use crate::error::{Error, Result};
use crate::tokenizer::Tokenizer;

/// The closing the client appends after the choice: `{"choice": "<c>` + this.
pub const CLOSING: &str = "\"}";

/// A set of choices tokenized after a prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct ChoiceSet {
    choices: Vec<String>,
    /// Token ids to prefill: the prompt's, less the `healed` last ones.
    base: Vec<u32>,
    /// Prompt tokens backed off because a choice merges with them (0 almost always).
    healed: usize,
    /// Per choice, its tokens after `base` (choice + closing, and any healed prompt bytes).
    sequences: Vec<Vec<u32>>,
}

impl ChoiceSet {
    /// Tokenizes `choices` after `prompt`, checking them first (see [`check_choices`]).
    pub fn new(tok: &Tokenizer, prompt: &str, choices: &[String], closing: &str) -> Result<Self> {
        check_choices(tok, choices)?;
        let prompt_ids = tok.encode(prompt)?;
        let mut full = Vec::with_capacity(choices.len());
        for c in choices {
            full.push(tok.encode(&format!("{prompt}{c}{closing}"))?);
        }
        // The longest run of prompt tokens that every choice's tokenization keeps intact.
        let keep = full.iter().map(|f| common_prefix(&prompt_ids, f)).min().unwrap_or(0);
        let sequences: Vec<Vec<u32>> = full.iter().map(|f| f[keep..].to_vec()).collect();
        for (i, a) in sequences.iter().enumerate() {
            for (j, b) in sequences.iter().enumerate() {
                if i != j && b.starts_with(a) {
                    let what = if a == b { "tokenize identically" } else { "are a token prefix of each other" };
                    return Err(Error::Input(format!("choices {:?} and {:?} {what}", choices[i], choices[j])));
                }
            }
        }
        Ok(Self {
            choices: choices.to_vec(),
            healed: prompt_ids.len() - keep,
            base: prompt_ids[..keep].to_vec(),
            sequences,
        })
    }

    /// The choices, as given.
    pub fn choices(&self) -> &[String] {
        &self.choices
    }

    /// Token ids to prefill: the prompt's, less the [`ChoiceSet::healed`] last ones.
    pub fn base(&self) -> &[u32] {
        &self.base
    }

    /// Prompt tokens backed off because a choice merges with them (0 almost always).
    pub fn healed(&self) -> usize {
        self.healed
    }

    /// Per choice, its tokens after the base (choice + closing, and any healed prompt bytes).
    pub fn sequences(&self) -> &[Vec<u32>] {
        &self.sequences
    }

    /// Tokens of the longest choice sequence.
    pub fn longest_sequence(&self) -> usize {
        self.sequences.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// Each choice's first token, in choice order.
    pub fn first_tokens(&self) -> Vec<u32> {
        self.sequences.iter().map(|s| s[0]).collect()
    }

    /// Whether one token decides the choice (their first tokens all differ).
    pub fn first_token_decides(&self) -> bool {
        let first = self.first_tokens();
        first.iter().enumerate().all(|(i, t)| !first[..i].contains(t))
    }

    /// Every token id that appears in any choice's sequence (for a batch's shared choice head).
    pub fn all_tokens(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.sequences.iter().flatten().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// The checks every choice list passes: at least two, none empty, none a special token, no
/// two the same.
pub fn check_choices(tok: &Tokenizer, choices: &[String]) -> Result<()> {
    match choices.len() {
        0 => return Err(Error::Input("no choices: give at least two".into())),
        1 => return Err(Error::Input(format!("only one choice ({:?}): give at least two", choices[0]))),
        _ => {}
    }
    for (i, c) in choices.iter().enumerate() {
        if c.trim().is_empty() {
            return Err(Error::Input(format!("choice {} is empty", i + 1)));
        }
        if tok.is_special(c.trim()) {
            return Err(Error::Input(format!("choice {c:?} is a special token, not text")));
        }
        if let Some(j) = choices[..i].iter().position(|d| d == c) {
            return Err(Error::Input(format!("choices {} and {} are the same ({c:?})", j + 1, i + 1)));
        }
    }
    Ok(())
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A constrained walk down the choices' trie, one token per step.
#[derive(Debug, Clone)]
pub struct ConstrainedPick {
    /// Choices still possible, in choice order.
    alive: Vec<usize>,
    /// Tokens picked so far.
    picked: Vec<u32>,
}

impl ConstrainedPick {
    pub fn new(set: &ChoiceSet) -> Self {
        Self { alive: (0..set.choices.len()).collect(), picked: Vec::new() }
    }

    /// Choices still possible, in choice order.
    pub fn alive(&self) -> &[usize] {
        &self.alive
    }

    /// Tokens picked so far.
    pub fn picked(&self) -> &[u32] {
        &self.picked
    }

    /// The picked tokens, once the walk is over.
    pub fn into_picked(self) -> Vec<u32> {
        self.picked
    }

    /// The distinct tokens allowed next, in the order of the first choice that has each.
    pub fn allowed(&self, set: &ChoiceSet) -> Vec<u32> {
        let depth = self.picked.len();
        let mut out = Vec::new();
        for &c in &self.alive {
            if let Some(&t) = set.sequences[c].get(depth)
                && !out.contains(&t)
            {
                out.push(t);
            }
        }
        out
    }

    /// Takes the allowed token with the largest logit (`logits[i]` belongs to `allowed()[i]`;
    /// ties go to the first listed choice) and keeps only the choices that have it.
    pub fn step(&mut self, set: &ChoiceSet, logits: &[f32]) -> u32 {
        let allowed = self.allowed(set);
        let best = argmax(&logits[..allowed.len()]);
        let token = allowed[best];
        let depth = self.picked.len();
        self.alive.retain(|&c| set.sequences[c].get(depth) == Some(&token));
        self.picked.push(token);
        token
    }

    /// The choice, once only one is possible.
    pub fn decided(&self) -> Option<usize> {
        (self.alive.len() == 1).then(|| self.alive[0])
    }
}

/// Where the choices first differ (`depth`, with `allowed` the tokens allowed there and
/// `logits[i]` the logit of `allowed[i]`): each choice's logit in choice order, and the
/// probabilities over the choices from them ([`first_token_probs`]).
pub fn fork_logits(set: &ChoiceSet, depth: usize, allowed: &[u32], logits: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let tokens: Vec<u32> = set.sequences.iter().map(|s| s[depth]).collect();
    let choice_logits: Vec<f32> =
        tokens.iter().map(|t| logits[allowed.iter().position(|a| a == t).expect("allowed")]).collect();
    let probs = first_token_probs(&tokens, &choice_logits);
    (choice_logits, probs)
}

/// Index of the largest value; the earliest wins ties.
pub fn argmax(x: &[f32]) -> usize {
    let mut best = 0;
    for (i, v) in x.iter().enumerate() {
        if *v > x[best] {
            best = i;
        }
    }
    best
}

/// Probabilities over the choices from their first-token logits (in choice order): a softmax
/// over the distinct allowed first tokens; choices that share a first token share its
/// probability equally (the full-sequence log-probabilities tell them apart).
pub fn first_token_probs(first_tokens: &[u32], logits: &[f32]) -> Vec<f32> {
    let mut distinct: Vec<(u32, f32, usize)> = Vec::new();
    for (&t, &l) in first_tokens.iter().zip(logits) {
        match distinct.iter_mut().find(|d| d.0 == t) {
            Some(d) => d.2 += 1,
            None => distinct.push((t, l, 1)),
        }
    }
    let max = distinct.iter().map(|d| d.1).fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = distinct.iter().map(|d| (d.1 - max).exp()).sum();
    first_tokens
        .iter()
        .map(|t| {
            let d = distinct.iter().find(|d| d.0 == *t).expect("listed");
            (d.1 - max).exp() / sum / d.2 as f32
        })
        .collect()
}
