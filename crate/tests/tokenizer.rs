//! Token ids and chat rendering against the Python `tokenizers` package and HF transformers'
//! `apply_chat_template` (fixtures/tokenizer_cases.json, made by scripts/make-tokenizer-fixture.py),
//! for each tokenizer.json and for the same tokenizer read from GGUF metadata.

mod common;

use common::*;
use onetoken::tokenizer::{Message, Tokenizer};

fn cases() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(fixture("tokenizer_cases.json")).unwrap()).unwrap()
}

/// A fixture's tokenizers: from its tokenizer.json, and from GGUF metadata written by
/// llama.cpp's gguf-py (qwen2.5-0.5b: a real Qwen2.5 GGUF's metadata; tiny-qwen2: the tiny
/// model's GGUF).
fn tokenizers(name: &str) -> Vec<(String, Tokenizer)> {
    let gguf = if name == "tiny-qwen2" { "model.gguf" } else { "tokenizer.gguf" };
    let header = onetoken::gguf::read_header(&fixture(name).join(gguf)).unwrap();
    vec![
        (format!("{name} tokenizer.json"), Tokenizer::load(&fixture(name)).unwrap()),
        (format!("{name} {gguf}"), onetoken::gguf::tokenizer(&header).unwrap()),
    ]
}

fn messages(v: &serde_json::Value) -> Vec<Message> {
    serde_json::from_value(v.clone()).unwrap()
}

#[test]
fn ids_equal_the_python_tokenizers_package() {
    let cases = cases();
    for fixture_name in ["qwen2.5-0.5b", "tiny-qwen2"] {
        for (name, tok) in tokenizers(fixture_name) {
            for case in cases["encode"][fixture_name].as_array().unwrap() {
                let text = case["text"].as_str().unwrap();
                assert_eq!(tok.encode(text).unwrap(), ids(&case["ids"]), "{name}: {text:?}");
                assert_eq!(tok.decode(&ids(&case["ids"])).unwrap(), nfc(text), "{name}: decode {text:?}");
            }
        }
    }
}

/// The tokenizer normalises to NFC, so decoding gives the composed form back.
fn nfc(text: &str) -> String {
    text.replace("e\u{301}", "é")
}

#[test]
fn chat_template_renders_byte_for_byte_as_hf() {
    let cases = cases();
    for (fixture_name, key) in [("qwen2.5-0.5b", "chat"), ("tiny-qwen2", "chat_tiny")] {
        for (name, tok) in tokenizers(fixture_name) {
            for case in cases[key].as_array().unwrap() {
                let got = tok
                    .render_chat(
                        &messages(&case["messages"]),
                        case["add_generation_prompt"].as_bool().unwrap(),
                        case["continue_final_message"].as_bool().unwrap(),
                    )
                    .unwrap();
                assert_eq!(got, case["text"].as_str().unwrap(), "{name}: {}", case["name"]);
                assert_eq!(tok.encode(&got).unwrap(), ids(&case["ids"]), "{name}: ids of {}", case["name"]);
            }
        }
    }
}

#[test]
fn judgment_prompt_opens_the_reply_with_the_prefix() {
    let tok = Tokenizer::load(&fixture("qwen2.5-0.5b")).unwrap();
    let plain = tok.chat_prompt(Some("You are a helpful assistant."), "Hello", "").unwrap();
    assert_eq!(
        plain,
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
    );
    let judged = tok.chat_prompt(Some("You are a helpful assistant."), "Hello", "{\"choice\": \"").unwrap();
    assert_eq!(judged, format!("{plain}{{\"choice\": \""));
    let default_system = tok.chat_prompt(None, "Hello", "").unwrap();
    assert!(default_system.starts_with("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud."));
}

#[test]
fn special_tokens_are_known() {
    let tok = Tokenizer::load(&fixture("qwen2.5-0.5b")).unwrap();
    assert_eq!(tok.token_id("<|im_end|>"), Some(151_645));
    assert!(tok.is_special("<|im_end|>"));
    assert!(!tok.is_special("blue"));
    assert_eq!(tok.vocab_size(), 151_665);
    // A-free stops at any of them: `<|endoftext|>` as well as the config's `<|im_end|>`.
    assert!(tok.is_special_id(151_643) && tok.is_special_id(151_645));
    assert!(!tok.is_special_id(tok.token_id("blue").unwrap()));
    assert_eq!(tok.eos_token(), Some("<|im_end|>"));
}

#[test]
fn bad_tokenizer_files_are_reported() {
    let err = Tokenizer::from_bytes(b"{not json", None).err().unwrap().to_string();
    assert!(err.contains("tokenizer.json is not a Hugging Face tokenizer"), "{err}");
    let tok_json = std::fs::read(fixture("tiny-qwen2/tokenizer.json")).unwrap();
    let err = Tokenizer::from_bytes(&tok_json, Some(b"[")).err().unwrap().to_string();
    assert!(err.contains("tokenizer_config.json is not valid JSON"), "{err}");
    let no_template = Tokenizer::from_bytes(&tok_json, None).unwrap();
    let err = no_template.chat_prompt(None, "hi", "").unwrap_err().to_string();
    assert!(err.contains("no chat_template"), "{err}");
}

#[test]
fn a_tokenizer_file_that_truncates_or_pads_still_encodes_a_prompt_whole() {
    let path = fixture("qwen2.5-0.5b/tokenizer.json");
    let mut file: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let plain = Tokenizer::from_bytes(&serde_json::to_vec(&file).unwrap(), None).unwrap();
    let text = "What color is the sky on a clear day? Answer with one of the given choices.";
    let want = plain.encode(text).unwrap();
    assert!(want.len() > 8);
    file["truncation"] =
        serde_json::json!({"direction": "Right", "max_length": 4, "strategy": "LongestFirst", "stride": 0});
    file["padding"] = serde_json::json!({"strategy": {"Fixed": 64}, "direction": "Right", "pad_to_multiple_of": null,
        "pad_id": 151643, "pad_type_id": 0, "pad_token": "<|endoftext|>"});
    let asks = Tokenizer::from_bytes(&serde_json::to_vec(&file).unwrap(), None).unwrap();
    assert_eq!(asks.encode(text).unwrap(), want);
}
