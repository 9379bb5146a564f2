//! What the benchmark judges: the article's example at a chosen prompt length, and batches of
//! questions over one document.

use crate::error::Result;
use crate::judge::{Engine, JudgeRequest};
use crate::tokenizer::Tokenizer;

const SENTENCES: [&str; 4] = [
    "The harbour was quiet in the early morning and the sky above it was a clear, pale blue. ",
    "Fishing boats came back one by one, their red hulls bright against the grey stone walls. ",
    "A yellow tram crossed the bridge while gulls circled over the market stalls. ",
    "By noon the wind had turned and thin clouds drifted in from the west. ",
];

/// A document of about `tokens` tokens (whole words), from a few plain sentences.
/// Its sentence count is found by doubling and then halving the gap, so a long document takes
/// a few dozen encodings, not one per sentence (at 16,000 tokens that was 900 encodings, 7 s).
pub fn document(tok: &Tokenizer, tokens: usize) -> Result<String> {
    let sentences = |n: usize| -> String { (0..n).map(|i| SENTENCES[i % SENTENCES.len()]).collect() };
    let count = |text: &str| -> Result<usize> { Ok(tok.encode(text)?.len()) };
    // The fewest sentences reaching `tokens`: `short` falls short, `long` reaches it. A sentence
    // adds tokens, so the count grows with the sentences.
    let (mut short, mut long) = (0, 1);
    while count(&sentences(long))? < tokens {
        (short, long) = (long, long * 2);
    }
    while long - short > 1 {
        let mid = short + (long - short) / 2;
        if count(&sentences(mid))? < tokens {
            short = mid;
        } else {
            long = mid;
        }
    }
    let mut text = if tokens == 0 { String::new() } else { sentences(long) };
    // Then drop words from its end (fewer than one sentence's worth) down to `tokens`.
    while count(&text)? > tokens {
        match text.trim_end().rfind(' ') {
            Some(cut) => text.truncate(cut + 1),
            None => break,
        }
    }
    Ok(text)
}

/// The article's example, its document sized so strategy B prefills about `tokens` tokens.
pub fn request_of_length(engine: &Engine, tokens: usize) -> Result<JudgeRequest> {
    let base = |doc: &str| JudgeRequest {
        system: Some("You are a careful judge. Answer in JSON.".into()),
        user: format!("{doc}\nWhat color was the sky?"),
        choices: vec!["blue".into(), "red".into(), "yellow".into()],
        prefix: None,
    };
    let empty = base("");
    let tok = engine.tokenizer();
    let overhead = tok.encode(&tok.chat_prompt(empty.system.as_deref(), &empty.user, empty.prefix())?)?.len();
    let doc = document(tok, tokens.saturating_sub(overhead))?;
    Ok(base(&doc))
}

/// `n` yes/no questions about one document (strategy C's workload).
pub fn questions(doc: &str, n: usize) -> Vec<JudgeRequest> {
    (0..n)
        .map(|i| JudgeRequest {
            system: Some("You are a careful judge. Answer in JSON.".into()),
            user: format!("{doc}\nQuestion {}: was the {} mentioned?", i + 1, ["sky", "boat", "tram", "wind"][i % 4]),
            choices: vec!["yes".into(), "no".into()],
            prefix: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain search it replaces: a sentence at a time, then a word at a time.
    fn one_sentence_at_a_time(tok: &Tokenizer, tokens: usize) -> String {
        let mut text = String::new();
        let mut i = 0;
        while tok.encode(&text).unwrap().len() < tokens {
            text.push_str(SENTENCES[i % SENTENCES.len()]);
            i += 1;
        }
        while tok.encode(&text).unwrap().len() > tokens {
            match text.trim_end().rfind(' ') {
                Some(cut) => text.truncate(cut + 1),
                None => break,
            }
        }
        text
    }

    #[test]
    fn a_document_is_the_longest_run_of_whole_words_within_its_tokens() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen2.5-0.5b");
        let tok = Tokenizer::load(&dir).unwrap();
        for tokens in [0, 1, 2, 17, 18, 19, 64, 333, 1000, 2500] {
            let doc = document(&tok, tokens).unwrap();
            assert_eq!(doc, one_sentence_at_a_time(&tok, tokens), "{tokens} tokens");
            // A word is one to three tokens; the first word with its space is two.
            let count = tok.encode(&doc).unwrap().len();
            assert!(count <= tokens.max(2) && count + 3 >= tokens, "{tokens} tokens: {count}");
        }
    }
}
