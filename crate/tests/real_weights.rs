//! Optional: the real Qwen2.5 0.5B weights. Ignored by default (CI needs no download); run it
//! with `ONETOKEN_MODEL_DIR=<folder> cargo test --test real_weights -- --ignored`, the folder
//! from `scripts/fetch-model.sh`.

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
    let options = ModelOptions { max_tokens: 256, kv_slots: 1, kv_capacity: 256, max_rows: 8, max_choice_ids: 16 };
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
