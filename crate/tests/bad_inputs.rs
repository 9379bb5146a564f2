//! The bad-input table, natively: each broken model folder or request makes the CLI exit with
//! code 1 and one clear line on stderr naming the file (or input) and the problem; never a
//! panic, never a silent success. The table is printed (`--nocapture`) as the note's evidence.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{fixture, join_safetensors, split_safetensors, without_tensors};

/// A copy of the tiny model folder in a fresh temporary directory, for one row to break.
fn tiny_copy(row: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("onetoken-bad-input-{}-{row}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(fixture("tiny-qwen2").join(f), dir.join(f)).unwrap();
    }
    dir
}

fn edit_json(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(path, v.to_string()).unwrap();
}

fn edit_header(dir: &Path, edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) {
    let path = dir.join("model.safetensors");
    let (mut header, data) = split_safetensors(&std::fs::read(&path).unwrap());
    edit(header.as_object_mut().unwrap());
    std::fs::write(path, join_safetensors(&header, &data)).unwrap();
}

/// Runs `judge --model DIR --request FILE` and returns (exit code, stderr).
fn judge(dir: &Path, request: &serde_json::Value) -> (Option<i32>, String) {
    let req = dir.join("request.json");
    std::fs::write(&req, request.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_onetoken"))
        .args(["judge", "--strategy", "b", "--model"])
        .arg(dir)
        .arg("--request")
        .arg(&req)
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

fn request() -> serde_json::Value {
    serde_json::json!({"user": "Which color is the sky?", "choices": ["blue", "red"]})
}

#[test]
fn every_row_of_the_bad_input_table_fails_with_one_clear_line() {
    type Break = Box<dyn Fn(&Path) -> serde_json::Value>;
    let rows: Vec<(&str, Break, &str)> = vec![
        (
            "truncated weights",
            Box::new(|d: &Path| {
                let bytes = std::fs::read(d.join("model.safetensors")).unwrap();
                std::fs::write(d.join("model.safetensors"), &bytes[..bytes.len() - 1000]).unwrap();
                request()
            }),
            "model file model.safetensors: truncated",
        ),
        (
            "corrupt header",
            Box::new(|d: &Path| {
                let mut bytes = std::fs::read(d.join("model.safetensors")).unwrap();
                bytes[12] = b'#';
                std::fs::write(d.join("model.safetensors"), bytes).unwrap();
                request()
            }),
            "model file model.safetensors: header entry __#etadata__: missing field `dtype`",
        ),
        (
            "header length past the file",
            Box::new(|d: &Path| {
                let mut bytes = std::fs::read(d.join("model.safetensors")).unwrap();
                bytes[..8].copy_from_slice(&(1u64 << 20).to_le_bytes());
                std::fs::write(d.join("model.safetensors"), bytes).unwrap();
                request()
            }),
            "model file model.safetensors",
        ),
        (
            "wrong dtype",
            Box::new(|d: &Path| {
                edit_header(d, |h| h["model.norm.weight"]["dtype"] = "I8".into());
                request()
            }),
            "tensor model.norm.weight: dtype I8 is not supported",
        ),
        (
            "wrong shape",
            Box::new(|d: &Path| {
                edit_header(d, |h| h["model.norm.weight"]["shape"] = serde_json::json!([32, 2]));
                request()
            }),
            "tensor model.norm.weight: expected shape [64], found [32, 2]",
        ),
        (
            "a shape whose size wraps around",
            Box::new(|d: &Path| {
                // 2^63 + 32 rows of 2 values: 2^64 + 64 values, which a wrapping product reads as
                // the 64 values the entry's bytes hold.
                edit_header(d, |h| h["model.norm.weight"]["shape"] = serde_json::json!([(1u64 << 63) + 32, 2]));
                request()
            }),
            "tensor model.norm.weight: shape [9223372036854775840, 2] has more values than any file holds",
        ),
        (
            "missing tensor",
            Box::new(|d: &Path| {
                let bytes = std::fs::read(d.join("model.safetensors")).unwrap();
                std::fs::write(d.join("model.safetensors"), without_tensors(&bytes, &["model.norm.weight"])).unwrap();
                request()
            }),
            "missing tensor(s) for this config: model.norm.weight",
        ),
        (
            "heads not dividing hidden",
            Box::new(|d: &Path| {
                edit_json(&d.join("config.json"), |c| c["num_attention_heads"] = 5.into());
                request()
            }),
            "config.json: num_attention_heads (5) does not divide hidden_size (64)",
        ),
        (
            "a context of one token",
            Box::new(|d: &Path| {
                edit_json(&d.join("config.json"), |c| c["max_position_embeddings"] = 1.into());
                request()
            }),
            "config.json: max_position_embeddings 1 is too small (at least 2)",
        ),
        (
            "vocabulary mismatch",
            Box::new(|d: &Path| {
                edit_json(&d.join("config.json"), |c| c["vocab_size"] = 1000.into());
                request()
            }),
            "tensor model.embed_tokens.weight: expected shape [1000, 64], found [512, 64]",
        ),
        (
            "a tokenizer of a larger model",
            Box::new(|d: &Path| {
                std::fs::copy(fixture("qwen2.5-0.5b").join("tokenizer.json"), d.join("tokenizer.json")).unwrap();
                request()
            }),
            "tokenizer: it knows 151665 token ids, more than the model's vocabulary of 512 (vocab_size)",
        ),
        (
            "heads wider than attention holds",
            Box::new(|d: &Path| {
                edit_json(&d.join("config.json"), |c| {
                    c["hidden_size"] = 512.into();
                    c["num_attention_heads"] = 1.into();
                    c["num_key_value_heads"] = 1.into();
                });
                request()
            }),
            "config.json: head_dim 512 (hidden_size / num_attention_heads) is larger than this engine's attention supports (256)",
        ),
        (
            "an odd intermediate size",
            Box::new(|d: &Path| {
                edit_json(&d.join("config.json"), |c| c["intermediate_size"] = 127.into());
                request()
            }),
            "config.json: intermediate_size 127 must be even",
        ),
        (
            "a context of 2^32 tokens",
            Box::new(|d: &Path| {
                edit_json(&d.join("config.json"), |c| c["max_position_embeddings"] = 4_294_967_295u64.into());
                request()
            }),
            "config.json: max_position_embeddings 4294967295 is larger than any model this reads (at most 2097152)",
        ),
        (
            "tokenizer.json not a tokenizer",
            Box::new(|d: &Path| {
                std::fs::write(d.join("tokenizer.json"), "{\"hello\": 1}").unwrap();
                request()
            }),
            "tokenizer: tokenizer.json is not a Hugging Face tokenizer",
        ),
        (
            "chat template syntax error",
            Box::new(|d: &Path| {
                edit_json(&d.join("tokenizer_config.json"), |c| c["chat_template"] = "{% for m in messages %}".into());
                request()
            }),
            "chat template: ",
        ),
        (
            "missing config.json",
            Box::new(|d: &Path| {
                std::fs::remove_file(d.join("config.json")).unwrap();
                request()
            }),
            "config.json: No such file",
        ),
        (
            "document past the context",
            Box::new(|_: &Path| serde_json::json!({"user": "blue ".repeat(5000), "choices": ["blue", "red"]})),
            "does not fit: the model's context is 4096 tokens",
        ),
        ("empty choices", Box::new(|_: &Path| serde_json::json!({"user": "q", "choices": []})), "input: no choices"),
        (
            "duplicate choices",
            Box::new(|_: &Path| serde_json::json!({"user": "q", "choices": ["a", "a"]})),
            "are the same",
        ),
        (
            "thousands of choices",
            Box::new(|_: &Path| {
                let choices: Vec<String> = (0..5000).map(|i| format!("option {i}")).collect();
                serde_json::json!({"user": "q", "choices": choices})
            }),
            "input: 5000 choices: give at most 256",
        ),
        (
            "a request that is not one",
            Box::new(|_: &Path| serde_json::json!({"question": "q"})),
            "not a judgment request",
        ),
    ];
    println!("| row | message |\n|---|---|");
    let mut wrong = Vec::new();
    for (name, breaks, want) in rows {
        let dir = tiny_copy(&name.replace(' ', "-"));
        let req = breaks(&dir);
        let (code, stderr) = judge(&dir, &req);
        std::fs::remove_dir_all(&dir).unwrap();
        let line = stderr.trim_end();
        println!("| {name} | `{}` |", line.replace(&dir.display().to_string(), "DIR"));
        let clear = code == Some(1) && !line.contains('\n') && line.starts_with("error: ") && line.contains(want);
        if !clear || stderr.contains("panicked") {
            wrong.push(format!("{name}: exit {code:?}, {stderr:?} should be one line saying {want:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
