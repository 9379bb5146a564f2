//! What the benchmark judges: the article's example at a chosen prompt length, and batches of
//! questions over one document.

use crate::error::Result;
use crate::judge::{Engine, JudgeRequest};

const SENTENCES: [&str; 4] = [
    "The harbour was quiet in the early morning and the sky above it was a clear, pale blue. ",
    "Fishing boats came back one by one, their red hulls bright against the grey stone walls. ",
    "A yellow tram crossed the bridge while gulls circled over the market stalls. ",
    "By noon the wind had turned and thin clouds drifted in from the west. ",
];

/// A document of about `tokens` tokens (whole words), from a few plain sentences.
pub fn document(engine: &Engine, tokens: usize) -> Result<String> {
    let mut text = String::new();
    let mut i = 0;
    let tok = engine.tokenizer();
    while tok.encode(&text)?.len() < tokens {
        text.push_str(SENTENCES[i % SENTENCES.len()]);
        i += 1;
    }
    while tok.encode(&text)?.len() > tokens {
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
    let doc = document(engine, tokens.saturating_sub(overhead))?;
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
