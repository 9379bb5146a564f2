//! Choice tokenization in context and the constrained pick, on the real Qwen2.5 tokenizer.

mod common;

use common::*;
use onetoken::choice::{ChoiceSet, ConstrainedPick, Spelling};
use onetoken::tokenizer::Tokenizer;

fn qwen() -> Tokenizer {
    Tokenizer::load(&fixture("qwen2.5-0.5b")).unwrap()
}

fn prompt(tok: &Tokenizer, prefix: &str) -> String {
    tok.chat_prompt(Some("You are a helpful assistant."), "Which color is the sky?", prefix).unwrap()
}

fn set(tok: &Tokenizer, prefix: &str, choices: &[&str]) -> ChoiceSet {
    let choices: Vec<String> = choices.iter().map(|c| c.to_string()).collect();
    ChoiceSet::new(tok, &prompt(tok, prefix), "", &choices, &Spelling::after(prefix, tok.eos_token())).unwrap()
}

fn err(tok: &Tokenizer, choices: &[&str]) -> String {
    let choices: Vec<String> = choices.iter().map(|c| c.to_string()).collect();
    let prefix = "{\"choice\": \"";
    ChoiceSet::new(tok, &prompt(tok, prefix), "", &choices, &Spelling::after(prefix, tok.eos_token()))
        .unwrap_err()
        .to_string()
}

#[test]
fn choices_are_tokenized_in_context_with_the_closing() {
    let tok = qwen();
    let s = set(&tok, "{\"choice\": \"", &["blue", "red", "yellow"]);
    assert_eq!(s.healed(), 0);
    assert_eq!(s.base(), tok.encode(&prompt(&tok, "{\"choice\": \"")).unwrap());
    for (c, seq) in s.choices().iter().zip(s.sequences()) {
        assert_eq!(tok.decode(seq).unwrap(), format!("{c}\"}}"));
    }
    assert!(s.first_token_decides());
}

#[test]
fn a_shared_first_token_needs_more_steps() {
    let tok = qwen();
    let s = set(&tok, "{\"choice\": \"", &["New York", "New Jersey", "Boston"]);
    assert!(!s.first_token_decides());
    assert_eq!(s.sequences()[0][0], s.sequences()[1][0]);
    let mut pick = ConstrainedPick::new(&s);
    // Step 1: "New" (shared) vs "Boston"; give "New" the higher logit.
    let allowed = pick.allowed(&s);
    assert_eq!(allowed, vec![s.sequences()[0][0], s.sequences()[2][0]]);
    pick.step(&s, &[2.0, 1.0]);
    assert_eq!(pick.decided(), None);
    assert_eq!(pick.alive(), vec![0, 1]);
    // Step 2: " York" vs " Jersey".
    assert_eq!(pick.allowed(&s), vec![s.sequences()[0][1], s.sequences()[1][1]]);
    pick.step(&s, &[0.5, 0.7]);
    assert_eq!(pick.decided(), Some(1));
    // Probabilities along the walk: "New" times " York" or " Jersey", and "Boston".
    let p_new = 1.0 / (1.0 + (-1f32).exp());
    let p_jersey = 1.0 / (1.0 + (-0.2f32).exp());
    let want = [p_new * (1.0 - p_jersey), p_new * p_jersey, 1.0 - p_new];
    assert_close(pick.probs(), &want, 1e-6, 0.0, "walk probabilities");
    // The pick agrees with its probabilities here: " Jersey" is the likelier of the New pair.
    assert!(pick.probs()[1] > pick.probs()[0]);

    // Leaving on "Boston" at once, the two New choices share the branch they never split.
    let mut pick = ConstrainedPick::new(&s);
    pick.step(&s, &[1.0, 2.0]);
    assert_eq!(pick.decided(), Some(2));
    let p_boston = 1.0 / (1.0 + (-1f32).exp());
    let want = [(1.0 - p_boston) / 2.0, (1.0 - p_boston) / 2.0, p_boston];
    assert_close(pick.probs(), &want, 1e-6, 0.0, "a branch left together is shared");
    assert!((pick.probs().iter().sum::<f32>() - 1.0).abs() < 1e-6);
}

#[test]
fn ties_go_to_the_first_listed_choice() {
    let tok = qwen();
    let s = set(&tok, "{\"choice\": \"", &["red", "blue"]);
    let mut pick = ConstrainedPick::new(&s);
    pick.step(&s, &[1.0, 1.0]);
    assert_eq!(pick.decided(), Some(0));
}

#[test]
fn a_prefix_ending_in_a_space_is_healed() {
    // "The answer is " ends with a lone space token; " blue" is one token, so the space is
    // backed off the prompt and becomes part of every choice's first token. A plain-text
    // prefix ends its choices with the end of the turn, not with JSON.
    let tok = qwen();
    let s = set(&tok, "The answer is ", &["blue", "red"]);
    assert_eq!(s.healed(), 1);
    let text = tok.decode(&s.sequences()[0]).unwrap();
    assert_eq!(text, " blue<|im_end|>");
    assert!(tok.decode(s.base()).unwrap().ends_with("The answer is"));
}

#[test]
fn a_reply_spells_each_choice_as_its_prefix_implies() {
    let eot = Some("<|im_end|>");
    // Inside a JSON string: escaped, then the quote and whatever the prefix opened.
    let json = Spelling::after("{\"choice\": \"", eot);
    assert_eq!(json.write("say \"hi\" \\ bye"), "say \\\"hi\\\" \\\\ bye\"}");
    assert_eq!(json.write("예"), "예\"}");
    assert_eq!(Spelling::after("{\"a\": [{\"b\": \"", eot).closing(), "\"}]}");
    assert_eq!(Spelling::after("{\"a\": {\"x\": 1}, \"b\": \"", eot).closing(), "\"}");
    assert_eq!(Spelling::after("{\"note\": \"a \\\" and {\", \"b\": \"", eot).closing(), "\"}");
    // Plain text: as given, then the end of the turn (nothing where the tokenizer names none).
    assert_eq!(Spelling::after("Answer: ", eot).write("a \"b\""), "a \"b\"<|im_end|>");
    assert_eq!(Spelling::after("{\"choice\": ", eot).closing(), "<|im_end|>");
    assert_eq!(Spelling::after("Answer: ", None).write("1"), "1");

    // "1" and "10" after a plain prefix: the "1" is followed by the end of the turn or by "0",
    // so the first choice is a real sequence, not the second one's first token alone.
    let tok = qwen();
    let s = set(&tok, "Answer: ", &["1", "10"]);
    assert_eq!(tok.decode(&s.sequences()[0]).unwrap(), "1<|im_end|>");
    assert_eq!(tok.decode(&s.sequences()[1]).unwrap(), "10<|im_end|>");
    assert_eq!(s.sequences()[0][0], s.sequences()[1][0]);
    assert!(!s.first_token_decides());

    // A quote in a choice is written escaped, so the closing quote stays the closing quote.
    let s = set(&tok, "{\"choice\": \"", &["\"quoted\"", "plain"]);
    // (The prompt's ` "` merges with the backslash, so it is healed into the choice's tokens.)
    let text = tok.decode(&s.sequences()[0]).unwrap();
    assert!(text.ends_with(r#"\"quoted\""}"#) && s.healed() == 1, "{text:?}");
}

#[test]
fn leading_spaces_korean_emoji_numbers_and_many_choices() {
    let tok = qwen();
    let spaced = set(&tok, "{\"choice\": \"", &[" blue", "blue"]);
    assert_ne!(spaced.sequences()[0], spaced.sequences()[1]);

    let korean = set(&tok, "{\"choice\": \"", &["예", "아니오"]);
    assert_eq!(tok.decode(&korean.sequences()[1]).unwrap(), "아니오\"}");
    assert!(korean.first_token_decides());

    let emoji = set(&tok, "{\"choice\": \"", &["👍", "👎"]);
    // Both emoji start with the same UTF-8 bytes, so byte-level BPE may share a first token;
    // either way the sequences decode back to the emoji.
    assert_eq!(tok.decode(&emoji.sequences()[0]).unwrap(), "👍\"}");
    assert_eq!(tok.decode(&emoji.sequences()[1]).unwrap(), "👎\"}");

    // Qwen splits numbers into single digits: "12" and "13" share the token "1".
    let numbers = set(&tok, "{\"choice\": \"", &["12", "13", "7"]);
    assert_eq!(numbers.sequences()[0][0], numbers.sequences()[1][0]);
    assert!(!numbers.first_token_decides());

    let many: Vec<String> = (0..15).map(|i| format!("option {i}")).collect();
    let many_refs: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
    let s = set(&tok, "{\"choice\": \"", &many_refs);
    assert_eq!(s.sequences().len(), 15);
    let mut pick = ConstrainedPick::new(&s);
    // Steer to "option 14" (digits split: "1" is shared by 1 and 10-14, then "4" decides).
    let target = &s.sequences()[14];
    while pick.decided().is_none() {
        let next = target[pick.picked().len()];
        let logits: Vec<f32> = pick.allowed(&s).iter().map(|&t| if t == next { 1.0 } else { 0.0 }).collect();
        pick.step(&s, &logits);
    }
    assert_eq!(pick.decided(), Some(14));
    assert!(pick.picked().len() >= 2);
}

#[test]
fn bad_choice_lists_get_clear_errors() {
    let tok = qwen();
    assert!(err(&tok, &[]).contains("no choices"));
    assert!(err(&tok, &["red"]).contains("only one choice"));
    assert!(err(&tok, &["red", "", "blue"]).contains("choice 2 is empty"));
    assert!(err(&tok, &["red", "blue", "red"]).contains("choices 1 and 3 are the same"));
    assert!(err(&tok, &["red", "<|im_end|>"]).contains("is a special token"));
    // Composed and decomposed é normalise to the same tokens.
    assert!(err(&tok, &["café", "cafe\u{301}"]).contains("tokenize identically"));
}
