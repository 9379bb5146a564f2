//! Optional: the real Qwen2.5 0.5B weights. Ignored by default (CI needs no download); run it
//! with `ONETOKEN_MODEL_DIR=<folder> cargo test --test real_weights -- --ignored`, the folder
//! from `scripts/fetch-model.sh` (and `ONETOKEN_GGUF=<file>` for the GGUF test: a .gguf of the
//! same model, such as the Q4_K_M file the folder was dequantized from).

use std::path::PathBuf;
use std::rc::Rc;

use onetoken::gpu::{Gpu, GpuOptions, load_dir};
use onetoken::judge::{Engine, JudgeRequest, Strategy};
use onetoken::model::{Model, ModelOptions, Readout, Sequence};
use onetoken::reference::CpuModel;
use onetoken::tokenizer::Tokenizer;

fn model_dir() -> PathBuf {
    std::env::var_os("ONETOKEN_MODEL_DIR")
        .map(PathBuf::from)
        .expect("set ONETOKEN_MODEL_DIR to a Qwen2.5 Instruct folder (scripts/fetch-model.sh)")
}

#[test]
#[ignore = "needs real weights: ONETOKEN_MODEL_DIR (scripts/fetch-model.sh)"]
fn real_model_answers_coherently_on_cpu_and_gpu() {
    let dir = model_dir();
    let tok = Tokenizer::load(&dir).unwrap();
    let prompt = tok.chat_prompt(None, "What is the capital of France? Answer in one sentence.", "").unwrap();
    let ids = tok.encode(&prompt).unwrap();

    let cpu = CpuModel::load(&dir).unwrap();
    let cpu_tokens = cpu.greedy(&ids, 8).unwrap();
    let answer = tok.decode(&cpu_tokens).unwrap();
    eprintln!("CPU reference answer: {answer:?}");
    assert!(answer.contains("Paris"), "{answer:?}");
    drop(cpu);

    let gpu = Rc::new(Gpu::new_blocking(GpuOptions::default()).unwrap());
    let weights = load_dir(&gpu, &dir, None).unwrap();
    let options = ModelOptions {
        max_tokens: 256,
        kv_slots: 1,
        kv_capacity: 256,
        max_rows: 8,
        max_full_rows: 8,
        max_choice_ids: 16,
    };
    let mut model = Model::new(gpu, weights, options).unwrap();
    let mut next =
        pollster::block_on(model.prefill(&[Sequence { slot: 0, tokens: &ids }], Readout::ARGMAX)).unwrap().rows[0].top
            [0]
        .0;
    let mut gpu_tokens = vec![next];
    while gpu_tokens.len() < 8 {
        next = pollster::block_on(model.decode(&[(0, next)], Readout::ARGMAX)).unwrap().rows[0].top[0].0;
        gpu_tokens.push(next);
    }
    assert_eq!(gpu_tokens, cpu_tokens, "GPU greedy {:?}", tok.decode(&gpu_tokens));

    let mut engine = Engine::new(model, tok);
    let req = JudgeRequest {
        system: None,
        user: "What is the capital of France?".into(),
        choices: vec!["London".into(), "Paris".into(), "Berlin".into()],
        prefix: None,
    };
    for strategy in [Strategy::TokenByToken, Strategy::PrefillOneToken] {
        let j = pollster::block_on(engine.judge(&req, strategy, 0)).unwrap();
        assert_eq!(j.choice.as_deref(), Some("Paris"), "{}: {:?}", strategy.name(), j.probs);
    }
}

/// The GGUF the folder was made from (real weights: `ONETOKEN_GGUF`, e.g. the Q4_K_M file).
fn gguf_file() -> PathBuf {
    std::env::var_os("ONETOKEN_GGUF").map(PathBuf::from).expect("set ONETOKEN_GGUF to a Qwen2.5 Instruct .gguf")
}

#[test]
#[ignore = "needs real weights: ONETOKEN_MODEL_DIR and ONETOKEN_GGUF, the same model"]
fn a_real_gguf_answers_as_its_16_bit_folder() {
    let requests = [
        ("What color is the sky on a clear day?", vec!["blue", "green", "red"]),
        (
            "Is this review positive or negative? 'The food was cold and the waiter was rude.'",
            vec!["positive", "negative"],
        ),
        ("Which is the largest planet in the solar system?", vec!["Mars", "Jupiter", "Venus", "Earth"]),
        ("Which language is 'Bonjour'?", vec!["French", "German", "Spanish"]),
    ];
    let gpu = Rc::new(Gpu::new_blocking(GpuOptions::default()).unwrap());
    let (dir, file) = (model_dir(), gguf_file());
    let mut folder =
        Engine::load(gpu.clone(), load_dir(&gpu, &dir, None).unwrap(), Tokenizer::load(&dir).unwrap()).unwrap();
    let (weights, tokenizer) = onetoken::gpu::load_gguf(&gpu, &file, None).unwrap();
    assert!(weights.label().starts_with("gguf:"));
    let mut gguf = Engine::load(gpu, weights, tokenizer).unwrap();
    for (user, choices) in requests {
        let req = JudgeRequest {
            system: None,
            user: user.into(),
            choices: choices.iter().map(|c| c.to_string()).collect(),
            prefix: None,
        };
        let a = pollster::block_on(folder.judge(&req, Strategy::PrefillOneToken, 0)).unwrap();
        let b = pollster::block_on(gguf.judge(&req, Strategy::PrefillOneToken, 0)).unwrap();
        eprintln!("{user}: folder {:?} {:?}, gguf {:?} {:?}", a.choice, a.choice_logits, b.choice, b.choice_logits);
        assert_eq!(a.choice, b.choice, "{user}");
        for (x, y) in a.choice_logits.iter().zip(&b.choice_logits) {
            assert!((x - y).abs() < 0.5, "{user}: choice logits {x} vs {y}");
        }
    }
}
