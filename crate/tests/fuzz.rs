//! Bounded fuzzing of every parser of outside bytes: the safetensors stream (header, offsets,
//! dtypes, lengths), the GGUF stream (header, metadata, tensor infos, the tokenizer built from
//! its metadata), the sharded index, config.json, the tokenizer with its chat template, and the
//! judgment request. Inputs are valid files mutated at random (bytes flipped, inserted, cut,
//! lengths and numbers set to edge values, JSON values replaced), seeded and reproducible. Each
//! must give `Ok` or a specific `Err` within a time bound: never a panic, never a hang.
//!
//! `ONETOKEN_FUZZ_ITERATIONS` sets the inputs per target (default 300, a few seconds);
//! `scripts/fuzz.sh` runs a long campaign in release.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::time::Duration;

use common::fixture;
use onetoken::Qwen2Config;
use onetoken::gguf::GgufHeader;
use onetoken::judge::JudgeRequest;
use onetoken::reference::F32Tensors;
use onetoken::tokenizer::Tokenizer;
use onetoken::weights::{CheckedSink, SafetensorsStream, shard_names};

fn iterations() -> usize {
    std::env::var("ONETOKEN_FUZZ_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(300)
}

/// The seeds to try: `ONETOKEN_FUZZ_SEED` replays one (a failure names its seed).
fn seeds() -> std::ops::Range<u64> {
    match std::env::var("ONETOKEN_FUZZ_SEED").ok().and_then(|v| v.parse::<u64>().ok()) {
        Some(seed) => seed..seed + 1,
        None => 0..iterations() as u64,
    }
}

/// A small xorshift generator: reproducible inputs without an RNG crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// `bytes` with 1-4 random mutations, biased toward the first `hot` bytes (a header).
fn mutate_bytes(rng: &mut Rng, bytes: &[u8], hot: usize) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for _ in 0..1 + rng.below(4) {
        let limit = if rng.below(4) > 0 { hot.min(out.len()) } else { out.len() };
        let at = rng.below(limit.max(1));
        let last = out.len().saturating_sub(1);
        match rng.below(7) {
            0 if !out.is_empty() => out[at.min(last)] ^= 1 << rng.below(8),
            1 if !out.is_empty() => out[at.min(last)] = *rng.pick(&[0, 0xff, b'"', b'{', b'}', b'9', b'-']),
            2 => out.insert(at.min(out.len()), rng.next() as u8),
            3 if at < out.len() => {
                let end = (at + 1 + rng.below(64)).min(out.len());
                out.drain(at..end);
            }
            4 => out.truncate(at),
            5 if out.len() >= 8 => {
                // The header length: a u64 at the start of a safetensors file.
                let len: u64 = *rng.pick(&[0, 1, 7, u64::MAX, u64::MAX / 2, 1 << 40, (out.len() as u64) * 2]);
                out[..8].copy_from_slice(&len.to_le_bytes());
            }
            _ => {
                let start = rng.below(out.len().max(1));
                let end = (start + rng.below(32)).min(out.len());
                let copy = out[start..end].to_vec();
                let at = at.min(out.len());
                out.splice(at..at, copy);
            }
        }
    }
    out
}

/// A JSON document with 1-3 values replaced by edge cases.
fn mutate_json(rng: &mut Rng, value: &serde_json::Value) -> serde_json::Value {
    let mut out = value.clone();
    for _ in 0..1 + rng.below(3) {
        replace_somewhere(rng, &mut out);
    }
    out
}

fn edge_value(rng: &mut Rng) -> serde_json::Value {
    use serde_json::json;
    rng.pick(&[
        json!(0),
        json!(-1),
        json!(1),
        json!(3),
        json!(u64::MAX),
        json!(1e300),
        json!(0.5),
        json!(null),
        json!(""),
        json!("x"),
        json!([]),
        json!({}),
        json!([0, 1]),
        json!(true),
        json!("{% for i in range(999999999) %}x{% endfor %}"),
        json!("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"),
        json!("{{ messages[0]['content'] * 100000000 }}"),
    ])
    .clone()
}

fn replace_somewhere(rng: &mut Rng, v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) if !map.is_empty() => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = rng.pick(&keys).clone();
            match rng.below(4) {
                0 => drop(map.remove(&key)),
                1 => replace_somewhere(rng, map.get_mut(&key).expect("listed")),
                _ => drop(map.insert(key, edge_value(rng))),
            }
        }
        serde_json::Value::Array(items) if !items.is_empty() => {
            let at = rng.below(items.len());
            if rng.below(2) == 0 { replace_somewhere(rng, &mut items[at]) } else { items[at] = edge_value(rng) }
        }
        _ => *v = edge_value(rng),
    }
}

/// Runs `f` on its own thread: a panic or a run past `limit` fails the test, naming the input.
fn bounded<T: Send + 'static>(what: &str, limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, recv) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(catch_unwind(AssertUnwindSafe(f)));
    });
    match recv.recv_timeout(limit) {
        Ok(Ok(v)) => v,
        Ok(Err(_)) => panic!("{what}: panicked"),
        Err(_) => panic!("{what}: no answer within {limit:?} (a hang)"),
    }
}

const LIMIT: Duration = Duration::from_secs(20);

/// What a target's inputs gave: how many loaded, which kinds of error.
#[derive(Default)]
struct Tally {
    ok: usize,
    errors: std::collections::BTreeSet<&'static str>,
}

impl Tally {
    fn record(&mut self, seed: u64, result: onetoken::Result<()>) {
        match result {
            Ok(()) => self.ok += 1,
            Err(e) => {
                let message = e.to_string();
                assert!(message.len() > 10, "seed {seed}: an unhelpful error {message:?}");
                self.errors.insert(e.code());
            }
        }
    }

    fn report(&self, target: &str) {
        eprintln!("{target}: {} inputs, {} loaded, error kinds {:?}", seeds().count(), self.ok, self.errors);
        assert!(seeds().count() < 100 || self.errors.contains("model_file"), "the mutations reach the parser");
    }
}

#[test]
fn safetensors_streams_of_mutated_files_end_in_ok_or_a_clear_error() {
    let bytes = std::fs::read(fixture("tiny-qwen2/model.safetensors")).unwrap();
    let config = Qwen2Config::load(&fixture("tiny-qwen2")).unwrap();
    let header = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut tally = Tally::default();
    for seed in seeds() {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let input = mutate_bytes(&mut rng, &bytes, header);
        let chunk = 1 + rng.below(70_000);
        let config = config.clone();
        let result = bounded(&format!("safetensors seed {seed}"), LIMIT, move || {
            let mut sink = CheckedSink::new(&config, F32Tensors::default());
            let mut stream = SafetensorsStream::new("model.safetensors", Some(input.len() as u64));
            for piece in input.chunks(chunk) {
                stream.push(piece, &mut sink)?;
            }
            stream.finish()?;
            sink.finish().map(drop)
        });
        tally.record(seed, result);
    }
    tally.report("safetensors");
}

#[test]
fn gguf_streams_of_mutated_files_end_in_ok_or_a_clear_error() {
    let bytes = std::fs::read(fixture("tiny-qwen2/model.gguf")).unwrap();
    let header = GgufHeader::parse(&bytes).unwrap().len;
    let mut tally = Tally::default();
    for seed in seeds() {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 3);
        let mut input = mutate_bytes(&mut rng, &bytes, header);
        if rng.below(2) == 0 && input.len() > 8 {
            // A count, length, dimension or offset set to an edge value.
            let at = rng.below(header.min(input.len() - 8));
            let value: u64 = *rng.pick(&[0, 1, 3, 31, 255, u32::MAX as u64, 1 << 40, u64::MAX, u64::MAX / 32]);
            input[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        let chunk = 1 + rng.below(70_000);
        let result = bounded(&format!("gguf seed {seed}"), LIMIT, move || {
            let pieces = input.chunks(chunk).map(Ok);
            let make = |_: &GgufHeader, _: &Qwen2Config| Ok(F32Tensors::default());
            let (header, _) = onetoken::gguf::read_pieces("model.gguf", Some(input.len() as u64), pieces, Some(make))?;
            onetoken::gguf::tokenizer(&header).map(drop)
        });
        tally.record(seed, result);
    }
    tally.report("gguf");
}

#[test]
fn mutated_configs_indexes_and_requests_parse_or_fail_clearly() {
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("tiny-qwen2/config.json")).unwrap()).unwrap();
    let index = serde_json::json!({"metadata": {"total_size": 4}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}});
    let request = serde_json::json!({"system": "s", "user": "u", "choices": ["a", "b"], "prefix": "{\"choice\": \""});
    for seed in seeds() {
        let mut rng = Rng(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1);
        let inputs = [
            mutate_json(&mut rng, &config).to_string().into_bytes(),
            mutate_bytes(&mut rng, config.to_string().as_bytes(), 700),
            mutate_json(&mut rng, &index).to_string().into_bytes(),
            mutate_json(&mut rng, &request).to_string().into_bytes(),
        ];
        bounded(&format!("json seed {seed}"), LIMIT, move || {
            if let Ok(c) = Qwen2Config::from_json(&inputs[0]) {
                // A config that parses is one the engine can size from.
                assert!(c.hidden_size > 0 && c.hidden_size.is_multiple_of(c.num_attention_heads));
                assert!(c.num_attention_heads.is_multiple_of(c.num_key_value_heads));
            }
            let _ = Qwen2Config::from_json(&inputs[1]);
            if let Ok(names) = shard_names(Some(&inputs[2])) {
                assert!(!names.is_empty());
            }
            let _ = serde_json::from_slice::<JudgeRequest>(&inputs[3]);
        });
    }
}

#[test]
fn mutated_tokenizer_configs_and_chat_templates_render_or_fail_clearly() {
    let tokenizer = std::fs::read(fixture("tiny-qwen2/tokenizer.json")).unwrap();
    let tokenizer_config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("tiny-qwen2/tokenizer_config.json")).unwrap()).unwrap();
    let template = tokenizer_config["chat_template"].as_str().unwrap().to_string();
    let (mut rendered, mut refused) = (0, 0);
    for seed in seeds() {
        let mut rng = Rng(seed.wrapping_mul(0xA24B_AED4_963E_E407) | 1);
        let mut config = mutate_json(&mut rng, &tokenizer_config);
        if rng.below(2) == 0 {
            // The template itself, cut or spliced at random.
            let bytes = mutate_bytes(&mut rng, template.as_bytes(), template.len());
            config["chat_template"] = String::from_utf8_lossy(&bytes).into_owned().into();
        }
        let (tokenizer, config) = (tokenizer.clone(), config.to_string().into_bytes());
        let outcome = bounded(&format!("template seed {seed}"), LIMIT, move || {
            let tok = Tokenizer::from_bytes(&tokenizer, Some(&config))?;
            tok.chat_prompt(Some("s"), "u", "{\"choice\": \"")
        });
        match outcome {
            Ok(_) => rendered += 1,
            Err(e) => {
                assert!(matches!(e.code(), "tokenizer"), "seed {seed}: {e}");
                refused += 1;
            }
        }
    }
    eprintln!("chat templates: {rendered} rendered, {refused} refused");
    assert!(rendered > 0 && refused > 0);
}

#[test]
fn templates_that_loop_or_recurse_forever_run_out_of_fuel() {
    let tokenizer = std::fs::read(fixture("tiny-qwen2/tokenizer.json")).unwrap();
    for template in [
        "{% for i in range(999999999) %}x{% endfor %}",
        "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
        "{% for m in messages %}{% for i in range(99999) %}{% for j in range(99999) %}.{% endfor %}{% endfor %}{% endfor %}",
    ] {
        let err = template_error(&tokenizer, template);
        assert_eq!(err.code(), "tokenizer", "{template}: {err}");
    }
}

/// The error rendering a prompt with `template` gives, within [`LIMIT`].
fn template_error(tokenizer: &[u8], template: &'static str) -> onetoken::Error {
    let config = serde_json::json!({ "chat_template": template }).to_string().into_bytes();
    let tokenizer = tokenizer.to_vec();
    bounded(template, LIMIT, move || {
        Tokenizer::from_bytes(&tokenizer, Some(&config)).and_then(|t| t.chat_prompt(None, "u", ""))
    })
    .unwrap_err()
}

#[test]
fn templates_that_write_without_end_are_refused_by_size() {
    let tokenizer = std::fs::read(fixture("tiny-qwen2/tokenizer.json")).unwrap();
    for (template, message) in [
        // Within the fuel, each a 100 MB string (minijinja's own cap on one repetition).
        ("{% for i in range(99999) %}{{ 'x' * 100000000 }}{% endfor %}", "the chat template wrote more than"),
        ("{{ messages | tojson(indent=99999999999) }}", "tojson: an indent of at most 64"),
    ] {
        let err = template_error(&tokenizer, template);
        assert_eq!(err.code(), "tokenizer", "{template}: {err}");
        assert!(err.to_string().contains(message), "{template}: {err}");
    }
    // A long message still renders whole: the limit grows with the messages.
    let config =
        serde_json::json!({ "chat_template": "{% for m in messages %}{{ m.content }}{{ m.content }}{% endfor %}" });
    let tok = Tokenizer::from_bytes(&tokenizer, Some(config.to_string().as_bytes())).unwrap();
    let long = "word ".repeat(1 << 20);
    assert_eq!(tok.chat_prompt(None, &long, "").unwrap().len(), 2 * long.len());
}
