//! The tokenizer of a GGUF file, from its metadata: llama.cpp stores a byte-level BPE
//! vocabulary as `tokenizer.ggml.tokens` (by id), `token_type`, `merges` ("a b" strings) and
//! names the pre-tokenizer (`tokenizer.ggml.pre`); the chat template is
//! `tokenizer.chat_template`. They are turned back into the `tokenizer.json` and
//! `tokenizer_config.json` a Hugging Face folder would have, so one tokenizer implementation
//! serves both sources.

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::gguf::{GgufHeader, MetaValue};
use crate::tokenizer::{Tokenizer, TokenizerSource};

/// llama.cpp's token types.
const NORMAL: i64 = 1;
const CONTROL: i64 = 3;
const USER_DEFINED: i64 = 4;
const UNUSED: i64 = 5;

/// The `qwen2` pre-tokenizer's split pattern (Qwen2's `tokenizer.json`).
const QWEN2_SPLIT: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

fn err(problem: impl Into<String>) -> Error {
    Error::GgufMetadata(problem.into())
}

fn strings<'a>(header: &'a GgufHeader, key: &str) -> Result<Vec<&'a str>> {
    match header.get(key)? {
        MetaValue::Array(items) => items
            .iter()
            .map(|v| match v {
                MetaValue::Str(s) => Ok(s.as_str()),
                other => Err(err(format!("{key} holds {}, not text", other.describe()))),
            })
            .collect(),
        other => Err(err(format!("{key} is {}, not a list", other.describe()))),
    }
}

/// The tokenizer and chat template of a GGUF file.
pub fn tokenizer(header: &GgufHeader) -> Result<Tokenizer> {
    let model = header.str("tokenizer.ggml.model")?;
    let pre = header.str("tokenizer.ggml.pre")?;
    if model != "gpt2" || pre != "qwen2" {
        return Err(err(format!(
            "tokenizer {model:?} with pre-tokenizer {pre:?}: onetoken reads Qwen2's (\"gpt2\", \"qwen2\")"
        )));
    }
    let tokens = strings(header, "tokenizer.ggml.tokens")?;
    let types: Vec<i64> = match header.get("tokenizer.ggml.token_type")? {
        MetaValue::Array(items) => items
            .iter()
            .map(|v| match v {
                MetaValue::Int(t) => Ok(*t),
                MetaValue::UInt(t) => Ok(*t as i64),
                other => Err(err(format!("token_type holds {}", other.describe()))),
            })
            .collect::<Result<_>>()?,
        other => return Err(err(format!("token_type is {}, not a list", other.describe()))),
    };
    if types.len() != tokens.len() {
        return Err(err(format!("{} tokens but {} token types", tokens.len(), types.len())));
    }
    let mut vocab = serde_json::Map::new();
    let mut added = Vec::new();
    for (id, (&token, &ty)) in tokens.iter().zip(&types).enumerate() {
        match ty {
            NORMAL => {
                if vocab.insert(token.to_string(), id.into()).is_some() {
                    return Err(err(format!("token {token:?} appears twice")));
                }
            }
            CONTROL | USER_DEFINED => added.push(json!({
                "id": id, "content": token, "single_word": false, "lstrip": false, "rstrip": false,
                "normalized": false, "special": ty == CONTROL,
            })),
            UNUSED => {} // padding of the embedding past the real vocabulary
            other => {
                return Err(err(format!("token {id} ({token:?}) has type {other}, not one a BPE vocabulary uses")));
            }
        }
    }
    let merges = strings(header, "tokenizer.ggml.merges")?
        .into_iter()
        .map(|m| match m.split(' ').collect::<Vec<_>>()[..] {
            [a, b] => Ok(json!([a, b])),
            _ => Err(err(format!("merge {m:?} is not two tokens"))),
        })
        .collect::<Result<Vec<Value>>>()?;
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false});
    let tokenizer_json = json!({
        "version": "1.0",
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated", "invert": false},
            byte_level,
        ]},
        "post_processor": byte_level,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": vocab, "merges": merges},
    });
    let token_text = |key: &str| {
        let id = header.uint(&format!("tokenizer.ggml.{key}")).ok()?;
        tokens.get(id as usize).map(|t| t.to_string())
    };
    let mut config = serde_json::Map::new();
    if let Ok(template) = header.str("tokenizer.chat_template") {
        config.insert("chat_template".into(), template.into());
    }
    for (key, field) in [("eos_token_id", "eos_token"), ("padding_token_id", "pad_token")] {
        if let Some(text) = token_text(key) {
            config.insert(field.into(), text.into());
        }
    }
    let add_bos = matches!(header.metadata.get("tokenizer.ggml.add_bos_token"), Some(MetaValue::Bool(true)));
    if let Some(text) = token_text("bos_token_id").filter(|_| add_bos) {
        config.insert("bos_token".into(), text.into());
    }
    Tokenizer::from_source(
        &serde_json::to_vec(&tokenizer_json).expect("plain JSON"),
        Some(&serde_json::to_vec(&Value::Object(config)).expect("plain JSON")),
        TokenizerSource::GGUF,
    )
}
