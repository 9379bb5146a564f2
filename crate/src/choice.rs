//! Choices as tokens, and the constrained pick: pure functions over token ids and logits,
//! tested on the CPU, outside the model.
//!
//! A choice's tokens are found *in context*: the prompt (ending with the response prefix) plus
//! the choice as the reply would spell it plus its closing (see [`Spelling`]) is tokenized
//! whole, and the tokens after the prompt are the choice's. Where a choice's first bytes merge with the prompt's last token (BPE can join
//! them), the prompt is backed off by that token and the choice sequences start earlier: token
//! healing. Choices become a trie over these sequences; a pick takes the best allowed next
//! token and continues while more than one choice is still possible.

use crate::error::{ChoiceProblem, Error, Result};
use crate::tokenizer::Tokenizer;

/// How a reply spells a choice where its prefix ends, and what closes it.
///
/// A prefix that leaves a JSON string open (`{"choice": "`) takes the choice JSON-escaped (a
/// quote or backslash in a choice is written `\"`, `\\`, as a model writing JSON would), then
/// the quote and the brackets the prefix opened: `"}`. Any other prefix (`Answer: `) takes the
/// choice as it is, then the end of the turn (the tokenizer's EOS, `<|im_end|>` for Qwen), so
/// "1" and "10" are told apart by what follows the "1".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spelling {
    json_string: bool,
    closing: String,
}

impl Spelling {
    /// The spelling a reply opened with `prefix` implies; `end_of_turn` closes a plain reply.
    pub fn after(prefix: &str, end_of_turn: Option<&str>) -> Self {
        let (mut open, mut scan) = (Vec::new(), JsonScanner::default());
        for ch in prefix.chars() {
            match scan.structural(ch) {
                Some('{') => open.push('}'),
                Some('[') => open.push(']'),
                Some('}' | ']') => {
                    open.pop();
                }
                _ => {}
            }
        }
        if scan.in_string() {
            let closing = std::iter::once('"').chain(open.into_iter().rev()).collect();
            Self { json_string: true, closing }
        } else {
            Self { json_string: false, closing: end_of_turn.unwrap_or_default().to_string() }
        }
    }

    /// `choice` as the reply writes it, closing included.
    pub fn write(&self, choice: &str) -> String {
        let body = if self.json_string {
            let quoted = serde_json::to_string(choice).expect("a string serializes");
            quoted[1..quoted.len() - 1].to_string()
        } else {
            choice.to_string()
        };
        format!("{body}{}", self.closing)
    }

    /// What follows every choice: `"}` after the default prefix.
    pub fn closing(&self) -> &str {
        &self.closing
    }
}

/// Reads JSON text a character at a time, telling its structure from the inside of its strings
/// (escapes included).
#[derive(Default)]
pub(crate) struct JsonScanner {
    in_string: bool,
    escaped: bool,
}

impl JsonScanner {
    /// `ch` where it is structure; `None` inside a string (its quotes included).
    pub(crate) fn structural(&mut self, ch: char) -> Option<char> {
        if self.in_string {
            match (self.escaped, ch) {
                (true, _) => self.escaped = false,
                (false, '\\') => self.escaped = true,
                (false, '"') => self.in_string = false,
                _ => {}
            }
            return None;
        }
        if ch == '"' {
            self.in_string = true;
            return None;
        }
        Some(ch)
    }

    /// Whether the text so far ends inside a string.
    pub(crate) fn in_string(&self) -> bool {
        self.in_string
    }
}

/// A set of choices tokenized after a prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct ChoiceSet {
    choices: Vec<String>,
    /// Token ids to prefill: the prompt's, less the `healed` last ones.
    base: Vec<u32>,
    /// Prompt tokens backed off because a choice merges with them (0 almost always).
    healed: usize,
    /// Per choice, its tokens after `base` (the choice as spelled, its closing, and any healed
    /// prompt bytes).
    sequences: Vec<Vec<u32>>,
}

impl ChoiceSet {
    /// Tokenizes `choices` after `prompt`, each preceded by `lead` (text the prompt leaves
    /// to the reply, empty for B) and written as `spelling` says; checks them first (see
    /// [`check_choices`]).
    pub fn new(tok: &Tokenizer, prompt: &str, lead: &str, choices: &[String], spelling: &Spelling) -> Result<Self> {
        check_choices(tok, choices)?;
        let prompt_ids = tok.encode(prompt)?;
        let mut full = Vec::with_capacity(choices.len());
        for c in choices {
            full.push(tok.encode(&format!("{prompt}{lead}{}", spelling.write(c)))?);
        }
        // The longest run of prompt tokens that every choice's tokenization keeps intact.
        let keep = full.iter().map(|f| common_prefix(&prompt_ids, f)).min().unwrap_or(0);
        let sequences: Vec<Vec<u32>> = full.iter().map(|f| f[keep..].to_vec()).collect();
        for (i, a) in sequences.iter().enumerate() {
            for (j, b) in sequences.iter().enumerate() {
                if i != j && b.starts_with(a) {
                    let (first, second) = (choices[i].clone(), choices[j].clone());
                    let problem = if a == b {
                        ChoiceProblem::SameTokens { first, second }
                    } else {
                        ChoiceProblem::TokenPrefix { first, second }
                    };
                    return Err(Error::Choices(problem));
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

    /// Per choice, its tokens after the base (lead, choice, closing, and any healed prompt
    /// bytes).
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

/// Most choices a judgment takes: each is tokenized with its whole prompt before the model
/// runs (and cannot be cancelled then), so a list of thousands would stall the engine.
pub const MAX_CHOICES: usize = 256;

/// The checks every choice list passes: two to [`MAX_CHOICES`], none empty, none a special
/// token, no two the same.
pub fn check_choices(tok: &Tokenizer, choices: &[String]) -> Result<()> {
    match choices.len() {
        0 => return Err(Error::Choices(ChoiceProblem::NoChoices)),
        1 => return Err(Error::Choices(ChoiceProblem::OneChoice { choice: choices[0].clone() })),
        count if count > MAX_CHOICES => {
            return Err(Error::Choices(ChoiceProblem::TooManyChoices { count, max: MAX_CHOICES }));
        }
        _ => {}
    }
    for (i, c) in choices.iter().enumerate() {
        if c.trim().is_empty() {
            return Err(Error::Choices(ChoiceProblem::EmptyChoice { index: i + 1 }));
        }
        if tok.is_special(c.trim()) {
            return Err(Error::Choices(ChoiceProblem::SpecialTokenChoice { choice: c.clone() }));
        }
        if let Some(j) = choices[..i].iter().position(|d| d == c) {
            let problem = ChoiceProblem::SameChoices { first: j + 1, second: i + 1, choice: c.clone() };
            return Err(Error::Choices(problem));
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
    /// Per choice, the probability of its branch so far (see [`ConstrainedPick::probs`]).
    probs: Vec<f32>,
}

impl ConstrainedPick {
    pub fn new(set: &ChoiceSet) -> Self {
        Self { alive: (0..set.choices.len()).collect(), picked: Vec::new(), probs: vec![1.0; set.choices.len()] }
    }

    /// Probabilities over the choices from the walk's steps: at each step a softmax over the
    /// allowed tokens; a choice's probability is the product along its path for as long as it
    /// stayed possible. Choices that leave the walk together on one token share that branch's
    /// probability equally (no pass ever told them apart). They sum to 1 once one choice is left.
    pub fn probs(&self) -> &[f32] {
        &self.probs
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
        let logits = &logits[..allowed.len()];
        let best = argmax(logits);
        let token = allowed[best];
        let depth = self.picked.len();
        let next = |c: usize| set.sequences[c].get(depth);
        let max = logits[best];
        let sum: f32 = logits.iter().map(|l| (l - max).exp()).sum();
        for &c in &self.alive {
            let Some(t) = next(c) else { continue };
            let at = allowed.iter().position(|a| a == t).expect("allowed");
            let p = (logits[at] - max).exp() / sum;
            // A branch the walk leaves here is split among the choices on it.
            let sharing = if *t == token { 1 } else { self.alive.iter().filter(|&&d| next(d) == Some(t)).count() };
            self.probs[c] *= p / sharing as f32;
        }
        self.alive.retain(|&c| next(c) == Some(&token));
        self.picked.push(token);
        token
    }

    /// The choice, once only one is possible.
    pub fn decided(&self) -> Option<usize> {
        (self.alive.len() == 1).then(|| self.alive[0])
    }
}

/// Where the choices first differ (`depth`, with `allowed` the tokens allowed there and
/// `logits[i]` the logit of `allowed[i]`): each choice's logit, in choice order.
pub fn fork_logits(set: &ChoiceSet, depth: usize, allowed: &[u32], logits: &[f32]) -> Vec<f32> {
    set.sequences.iter().map(|s| logits[allowed.iter().position(|a| *a == s[depth]).expect("allowed")]).collect()
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
