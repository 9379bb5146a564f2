//! The three strategies on the tiny model: same answers, batch = singles, heads agree.

mod common;

use std::rc::Rc;

use common::*;
use onetoken::gpu::{Gpu, GpuOptions, load_dir};
use onetoken::judge::{Engine, JudgeRequest, PrefixSharing, Strategy};
use onetoken::model::{Model, ModelOptions};
use onetoken::tokenizer::Tokenizer;

fn engine(slots: usize) -> Engine {
    let gpu = Rc::new(Gpu::new_blocking(GpuOptions::default()).unwrap());
    let weights = load_dir(&gpu, &fixture("tiny-qwen2"), None).unwrap();
    let options = ModelOptions {
        max_tokens: 2048,
        kv_slots: slots,
        kv_capacity: 256,
        max_rows: 64,
        max_full_rows: 1,
        max_choice_ids: 64,
    };
    let model = Model::new(gpu, weights, options).unwrap();
    Engine::new(model, Tokenizer::load(&fixture("tiny-qwen2")).unwrap())
}

fn request(user: &str, choices: &[&str]) -> JudgeRequest {
    JudgeRequest {
        system: Some("You judge colors.".into()),
        user: user.into(),
        choices: choices.iter().map(|c| c.to_string()).collect(),
        prefix: None,
    }
}

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    pollster::block_on(f)
}

#[test]
fn schema_token_by_token_and_prefill_one_token_agree() {
    let mut e = engine(1);
    for req in
        [request("Which color is the sky?", &["blue", "red", "yellow"]), request("예 또는 아니오?", &["예", "아니오"])]
    {
        let a = block(e.judge(&req, Strategy::TokenByToken, 0)).unwrap();
        let b = block(e.judge(&req, Strategy::PrefillOneToken, 0)).unwrap();
        assert_eq!(a.choice_index, b.choice_index, "{:?}", req.user);
        assert_close(&a.choice_logits, &b.choice_logits, 1e-3, 1e-3, "A vs B choice logits");
        // B reads the answer from the prefill; A generates the whole JSON reply.
        assert_eq!(b.decode_steps, 0);
        assert_eq!(b.timings_ms.decode.len(), 0);
        assert!(a.decode_steps >= 3, "A took {} decode steps", a.decode_steps);
        assert_eq!(a.timings_ms.decode.len(), a.decode_steps);
        // Every step runs the commands the pass before encoded ahead, the fork's too (where the
        // allowed ids change in number).
        assert_eq!(a.decode_steps_encoded_ahead, a.decode_steps);
        let choice = a.choice.clone().unwrap();
        assert_eq!(a.generated_text, format!("{{\"choice\": \"{choice}\"}}"));
        assert!(b.prompt_tokens > a.prompt_tokens);
        let sum: f32 = b.probs.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5);
    }
}

/// A quote or backslash in a choice is written JSON-escaped: A's reply is valid JSON naming
/// the choice as given, and A and B score the same text.
#[test]
fn choices_with_quotes_are_written_as_json_strings() {
    let mut e = engine(1);
    let req = request("Which one?", &["say \"hi\"", "C:\\temp", "plain"]);
    let a = block(e.judge(&req, Strategy::TokenByToken, 0)).unwrap();
    let b = block(e.judge(&req, Strategy::PrefillOneToken, 0)).unwrap();
    assert_eq!(a.choice_index, b.choice_index);
    assert_close(&a.choice_logits, &b.choice_logits, 1e-3, 1e-3, "A vs B choice logits");
    let reply: serde_json::Value = serde_json::from_str(&a.generated_text).unwrap();
    assert_eq!(reply["choice"].as_str(), a.choice.as_deref(), "{}", a.generated_text);
    assert_eq!(onetoken::judge::parse_choice(&a.generated_text, &req.choices), a.choice_index);
}

/// After a plain-text prefix every choice ends with the end of the turn: "1" and "10" are
/// both answers, and A's reply is the prefix, the choice and `<|im_end|>`.
#[test]
fn a_plain_prefix_ends_each_choice_with_the_end_of_the_turn() {
    let mut e = engine(1);
    let mut req = request("How many?", &["1", "10", "2"]);
    req.prefix = Some("Answer: ".into());
    let a = block(e.judge(&req, Strategy::TokenByToken, 0)).unwrap();
    let b = block(e.judge(&req, Strategy::PrefillOneToken, 0)).unwrap();
    assert_eq!(a.choice_index, b.choice_index);
    let choice = a.choice.clone().unwrap();
    assert_eq!(a.generated_text, format!("Answer: {choice}<|im_end|>"));
}

#[test]
fn full_head_equals_choice_head() {
    let mut e = engine(1);
    let req = request("Which color is the sky?", &["blue", "red", "yellow"]);
    let b = block(e.judge(&req, Strategy::PrefillOneToken, 5)).unwrap();
    let full = block(e.judge(&req, Strategy::PrefillOneTokenFullHead, 5)).unwrap();
    assert_eq!(b.choice_index, full.choice_index);
    assert_close(&b.choice_logits, &full.choice_logits, 1e-5, 1e-5, "choice vs full head");
    assert!(b.top.is_none());
    assert_eq!(full.top.as_ref().unwrap().len(), 5);
}

#[test]
fn free_generation_runs_until_the_json_closes_or_the_limit() {
    let mut e = engine(1);
    let req = request("Which color is the sky?", &["blue", "red"]);
    let free = block(e.judge(&req, Strategy::TokenByTokenFree, 3)).unwrap();
    // The tiny model's reply is noise: it closes no JSON, so it runs to the limit (or EOS).
    let limit = onetoken::judge::free_token_limit(e.tokenizer(), &req).unwrap();
    assert!(free.generated_token_ids.len() <= limit);
    // A forward pass per decode step, the one that read an end token it did not keep included.
    assert_eq!(free.timings_ms.decode.len(), free.decode_steps);
    assert!(free.decode_steps + 1 >= free.generated_token_ids.len());
    // Why it stopped, so a reply cut off is not read as one that named no choice.
    use onetoken::judge::FreeStop;
    let stop = free.free_stop.unwrap();
    let closed = onetoken::judge::json_object_closed(&free.generated_text);
    match stop {
        FreeStop::TokenLimit => assert!(free.generated_token_ids.len() == limit && !closed),
        FreeStop::Closed => assert!(closed),
        FreeStop::EndOfTurn => assert_eq!(free.decode_steps, free.generated_token_ids.len()),
    }
    let record = serde_json::to_value(&free).unwrap();
    assert!(["closed", "end_of_turn", "token_limit"].contains(&record["free_stop"].as_str().unwrap()));
    let b = block(e.judge(&req, Strategy::PrefillOneToken, 0)).unwrap();
    assert!(serde_json::to_value(&b).unwrap().get("free_stop").is_none(), "A-free only");
    assert_eq!(free.top.unwrap().len(), 3);
}

#[test]
fn a_batch_equals_each_judgment_alone_shared_prefix_or_not() {
    let doc = "Document: the sky was blue, the sun was yellow and the car was red. ";
    let reqs = [
        request(&format!("{doc}What color was the sky?"), &["blue", "red", "yellow"]),
        request(&format!("{doc}What color was the car?"), &["red", "blue"]),
        request(&format!("{doc}Was the sun yellow?"), &["예", "아니오"]),
        request(&format!("{doc}Which is longer?"), &["New York", "New Jersey", "Boston"]),
    ];
    let mut e = engine(4);
    let (plain, plain_j) = block(e.judge_batch(&reqs, PrefixSharing::Off)).unwrap();
    let (shared, shared_j) = block(e.judge_batch(&reqs, PrefixSharing::Shared)).unwrap();
    assert_eq!(plain.shared_prefix_tokens, 0);
    assert!(shared.shared_prefix_tokens > 10, "{}", shared.shared_prefix_tokens);
    assert!(shared.batch_prefill_tokens < plain.batch_prefill_tokens);
    for (i, req) in reqs.iter().enumerate() {
        let alone = block(e.judge(req, Strategy::PrefillOneToken, 0)).unwrap();
        for (what, j) in [("plain", &plain_j[i]), ("shared", &shared_j[i])] {
            assert_eq!(j.choice_index, alone.choice_index, "{what} batch, request {i}");
            assert_close(&j.choice_logits, &alone.choice_logits, 1e-4, 1e-4, &format!("{what} batch logits {i}"));
            assert_eq!(j.generated_token_ids, alone.generated_token_ids);
            assert_close(&j.probs, &alone.probs, 1e-4, 1e-4, &format!("{what} batch probs {i}"));
            assert!((j.probs.iter().sum::<f32>() - 1.0).abs() < 1e-4, "{:?}", j.probs);
        }
    }
}

/// A batch's head reads the union of its requests' choice tokens: forty yes/no questions need
/// three ids ("yes", "no", the closing), not 120, so an engine sized for 64 is not rebuilt in
/// the timed run. One request has nothing to share a prefix with.
#[test]
fn a_batch_is_sized_by_the_choice_tokens_it_reads() {
    let mut e = engine(40);
    let reqs: Vec<JudgeRequest> = (0..40).map(|i| request(&format!("Question {i}: blue?"), &["yes", "no"])).collect();
    let before = e.model().options();
    let (record, _) = block(e.judge_batch(&reqs, PrefixSharing::Shared)).unwrap();
    assert_eq!(record.judgments, 40);
    assert_eq!(e.model().options().max_choice_ids, before.max_choice_ids, "no resize for the head");
    // Its rows are read through the choices' rows: no row of vocabulary logits is added.
    assert_eq!(e.model().options().max_full_rows, 1);
    let (one, _) = block(e.judge_batch(&reqs[..1], PrefixSharing::Shared)).unwrap();
    assert_eq!(one.shared_prefix_tokens, 0);
}

/// An engine at its starting sizes (64 tokens a call) grows to prefill a shared document of
/// more than that in one call, however short the questions after it are.
#[test]
fn a_shared_document_longer_than_the_starting_sizes_is_prefilled_once() {
    let gpu = Rc::new(Gpu::new_blocking(GpuOptions::default()).unwrap());
    let weights = load_dir(&gpu, &fixture("tiny-qwen2"), None).unwrap();
    let mut e = Engine::load(gpu, weights, Tokenizer::load(&fixture("tiny-qwen2")).unwrap()).unwrap();
    let doc = "Document: the sky was blue, the sun was yellow and the car was red. ".repeat(4);
    let reqs = [request(&format!("{doc}Sky?"), &["blue", "red"]), request(&format!("{doc}Car?"), &["red", "blue"])];
    let (record, judgments) = block(e.judge_batch(&reqs, PrefixSharing::Shared)).unwrap();
    assert!(record.shared_prefix_tokens > 64, "{}", record.shared_prefix_tokens);
    assert!(record.batch_prefill_tokens < 64, "{}", record.batch_prefill_tokens);
    for (req, j) in reqs.iter().zip(&judgments) {
        let alone = block(e.judge(req, Strategy::PrefillOneToken, 0)).unwrap();
        assert_eq!(j.choice_index, alone.choice_index);
        assert_close(&j.choice_logits, &alone.choice_logits, 1e-4, 1e-4, "shared batch over a long document");
    }
}

#[test]
fn bad_requests_fail_before_any_work() {
    let mut e = engine(2);
    let bad =
        |e: &mut Engine, req: JudgeRequest| block(e.judge(&req, Strategy::PrefillOneToken, 0)).unwrap_err().to_string();
    assert!(bad(&mut e, request("q", &[])).contains("no choices"));
    assert!(bad(&mut e, request("q", &["x"])).contains("only one choice"));
    assert!(bad(&mut e, request("q", &["x", "x"])).contains("are the same"));
    assert!(bad(&mut e, request("q", &["x", " "])).contains("is empty"));
    assert!(bad(&mut e, request("q", &["x", "<|im_end|>"])).contains("special token"));
    let past_context = "blue ".repeat(5000);
    let msg = bad(&mut e, request(&past_context, &["x", "y"]));
    assert!(msg.contains("does not fit") && msg.contains("the model's context is 4096 tokens"), "{msg}");
    let batch = [request("a", &["x", "y"]), request(&past_context, &["x", "y"])];
    assert!(block(e.judge_batch(&batch, PrefixSharing::Off)).unwrap_err().to_string().contains("4096"));
    let bad_choice = [request("a", &["x", "y"]), request("b", &["x", "x"])];
    let err = block(e.judge_batch(&bad_choice, PrefixSharing::Off)).unwrap_err();
    assert_eq!(err.to_string(), r#"request 2: input: choices 1 and 2 are the same ("x")"#);
    // The same as data for the page, which words it in its own language.
    let details = serde_json::json!({"reason": "same_choices", "first": 1, "second": 2, "choice": "x", "request": 2});
    assert_eq!((err.code(), err.details()), ("input", Some(details)));
    let huge = vec![request("a", &["x", "y"]); onetoken::judge::MAX_BATCH + 1];
    let msg = block(e.judge_batch(&huge, PrefixSharing::Off)).unwrap_err().to_string();
    assert!(msg.contains("a batch of 4097 requests: give at most 4096 (split it)"), "{msg}");
    assert!(block(e.judge(&request("a", &["x", "y"]), Strategy::Batched, 0)).is_err());
    assert!((0..2).all(|s| e.model().tokens_in(s).unwrap() == 0));
}

#[test]
fn the_engine_sizes_itself_to_each_request_up_to_the_context() {
    let mut e = engine(1);
    let req = request(&"blue ".repeat(400), &["x", "y"]);
    let b = block(e.judge(&req, Strategy::PrefillOneToken, 0)).unwrap();
    assert!(b.prompt_tokens > 400 && e.model().kv_capacity() > 400);
    let three = [request("a", &["x", "y"]), request("b", &["x", "y"]), request("c", &["x", "y"])];
    let long = e.model().options();
    let (record, _) = block(e.judge_batch(&three, PrefixSharing::Off)).unwrap();
    assert_eq!(record.judgments, 3);
    // Three slots at the long prompt's capacity would be a cache bigger than the two set-ups
    // together: the batch gets a cache of its own sizes (other sizes only grow).
    let short = e.model().options();
    assert!(short.kv_slots >= 3 && short.kv_capacity < 400, "{short:?}");
    assert!(short.max_tokens >= long.max_tokens, "{short:?}");
    let again = block(e.judge(&req, Strategy::PrefillOneToken, 0)).unwrap();
    assert_eq!((again.choice, again.probs), (b.choice, b.probs));
    assert!(e.model().kv_capacity() > 400);
}

#[test]
fn sequence_log_probabilities_equal_the_cpu_reference() {
    use onetoken::choice::{ChoiceSet, Spelling};
    use onetoken::reference::{CpuKvCache, CpuModel, Logits};
    let mut e = engine(1);
    let req = request("Which city?", &["New York", "New Jersey", "Boston"]);
    let got = block(e.sequence_logprobs(&req)).unwrap();

    let cpu = CpuModel::load(&fixture("tiny-qwen2")).unwrap();
    let prompt = e.tokenizer().chat_prompt(req.system.as_deref(), &req.user, req.prefix()).unwrap();
    let spelling = Spelling::after(req.prefix(), e.tokenizer().eos_token());
    let set = ChoiceSet::new(e.tokenizer(), &prompt, "", &req.choices, &spelling).unwrap();
    let vocab = cpu.config.vocab_size;
    let want: Vec<f32> = set
        .sequences()
        .iter()
        .map(|seq| {
            let ids: Vec<u32> = set.base().iter().chain(&seq[..seq.len() - 1]).copied().collect();
            let out = cpu.forward(&ids, &mut CpuKvCache::new(&cpu.config), Logits::All).unwrap();
            let first = set.base().len() - 1;
            seq.iter()
                .enumerate()
                .map(|(i, &t)| {
                    let row = &out.logits[(first + i) * vocab..(first + i + 1) * vocab];
                    let max = row.iter().copied().fold(f32::MIN, f32::max);
                    let lse = max + row.iter().map(|l| (l - max).exp()).sum::<f32>().ln();
                    row[t as usize] - lse
                })
                .sum()
        })
        .collect();
    assert_close(&got, &want, 1e-3, 1e-4, "sequence log-probabilities");
    assert!(got.iter().all(|lp| *lp < 0.0));
}

#[test]
fn progress_hears_every_forward_pass_and_cancel_stops_at_the_next() {
    use onetoken::judge::Progress;
    use std::cell::RefCell;
    let mut e = engine(1);
    let req = request("Which color is the sky?", &["blue", "red", "yellow"]);
    let seen = Rc::new(RefCell::new(Vec::new()));
    let log = seen.clone();
    e.set_progress(Some(Box::new(move |p: &Progress| log.borrow_mut().push((p.strategy, p.phase, p.step)))));
    let a = block(e.judge(&req, Strategy::TokenByToken, 0)).unwrap();
    let passes = seen.borrow().clone();
    assert_eq!(passes.len(), 1 + a.decode_steps);
    assert_eq!(passes[0], (Strategy::TokenByToken, "prefill", 0));
    assert!(passes[1..].iter().enumerate().all(|(i, &p)| p == (Strategy::TokenByToken, "decode", i)));

    // A cancel raised as the third pass is announced stops the judgment there: it never runs.
    let flag = e.model().cancel_flag();
    let raise = flag.clone();
    let count = Rc::new(RefCell::new(0));
    let counter = count.clone();
    e.set_progress(Some(Box::new(move |_: &Progress| {
        *counter.borrow_mut() += 1;
        if *counter.borrow() == 3 {
            raise.set(true);
        }
    })));
    let err = block(e.judge(&req, Strategy::TokenByToken, 0)).unwrap_err();
    assert_eq!((err.code(), *count.borrow()), ("cancelled", 3));
    // Cleared, the engine answers as before, with the same answer.
    flag.set(false);
    e.set_progress(None);
    let again = block(e.judge(&req, Strategy::TokenByToken, 0)).unwrap();
    assert_eq!(again.generated_token_ids, a.generated_token_ids);
}

#[test]
fn a_probe_times_a_prefill_and_a_decode_step_and_leaves_the_slot_empty() {
    let mut e = engine(1);
    let p = block(e.probe(16)).unwrap();
    assert_eq!(p.tokens, 16);
    assert!(p.prefill_ms > 0.0 && p.decode_ms > 0.0, "{p:?}");
    assert_eq!(e.model().tokens_in(0).unwrap(), 0);
    // Past the context, the probe shortens itself rather than failing.
    assert_eq!(block(e.probe(1_000_000)).unwrap().tokens, 4095);
}

/// A cancel during the bench's batches stops the bench with `cancelled`, as it does in the
/// sweep: it is not taken for a batch size this device cannot run, which the bench skips.
#[test]
fn a_cancel_during_the_bench_batches_stops_the_bench() {
    use onetoken::bench::{BenchOptions, BenchProgress, run};
    let mut e = engine(2);
    let options = BenchOptions { lengths: vec![12], batch_sizes: vec![1, 2], repeats: 1, ..Default::default() };
    let flag = e.model().cancel_flag();
    let raise = flag.clone();
    let mut lines = Vec::new();
    let err = block(run(&mut e, &options, &mut |step: &BenchProgress| {
        let line = step.to_string();
        if line.starts_with("batch of 1 judgments") {
            raise.set(true);
        }
        lines.push(line);
    }))
    .unwrap_err();
    assert_eq!(err.code(), "cancelled", "{err}");
    assert_eq!(lines.last().map(String::as_str), Some("batch of 1 judgments"), "{lines:?}");
    // Cleared, the bench runs every batch but one the device cannot take in one pass (700
    // judgments without a shared prefix are over 65,535 tokens), which it skips with the reason.
    flag.set(false);
    let options = BenchOptions { batch_sizes: vec![1, 700], ..options };
    let report = block(run(&mut e, &options, &mut |_: &BenchProgress| {})).unwrap();
    let ran: Vec<_> = report.batch.iter().map(|b| (b.judgments, b.shared_prefix)).collect();
    assert_eq!(ran, [(1, false), (1, true), (700, true)]);
    let [skip] = &report.batch_skipped[..] else { panic!("{:?}", report.batch_skipped) };
    assert_eq!((skip.judgments, skip.shared_prefix, skip.code), (700, false, "input"));
    assert!(skip.reason.contains("in one pass is more than this device runs"), "{}", skip.reason);
    let details = skip.details.as_ref().expect("a skip past a limit has details");
    assert_eq!(details["reason"], "batch_pass_too_large");
    assert!(details["tokens"].as_u64() > details["limit"].as_u64(), "{details}");
}

/// Weights holding NaN give NaN logits, which would rank as any choice: the judgment fails,
/// naming why, instead of answering.
#[test]
fn weights_that_give_nan_logits_fail_clearly_instead_of_answering() {
    let dir = std::env::temp_dir().join(format!("onetoken-nan-{}-{}", std::process::id(), unique_id()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["config.json", "tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(fixture("tiny-qwen2").join(f), dir.join(f)).unwrap();
    }
    let bytes = std::fs::read(fixture("tiny-qwen2/model.safetensors")).unwrap();
    let (header, mut data) = split_safetensors(&bytes);
    let norm = &header["model.norm.weight"];
    assert_eq!(norm["dtype"], "BF16");
    let [from, to] = [0, 1].map(|i| norm["data_offsets"][i].as_u64().unwrap() as usize);
    data[from..to].chunks_mut(2).for_each(|v| v.copy_from_slice(&0x7fc0u16.to_le_bytes())); // bf16 NaN
    std::fs::write(dir.join("model.safetensors"), join_safetensors(&header, &data)).unwrap();

    let gpu = Rc::new(Gpu::new_blocking(GpuOptions::default()).unwrap());
    let weights = load_dir(&gpu, &dir, None).unwrap();
    let model = Model::new(gpu, weights, ModelOptions::STARTING).unwrap();
    let mut e = Engine::new(model, Tokenizer::load(&dir).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
    for strategy in [Strategy::PrefillOneToken, Strategy::TokenByToken] {
        let err = block(e.judge(&request("Which color is the sky?", &["blue", "red"]), strategy, 0)).unwrap_err();
        assert_eq!(err.code(), "model_file");
        assert!(err.to_string().contains("the model's output is not a number"), "{err}");
    }
}

/// On a device that binds little (here 64 KiB), a prompt whose MLP activations exceed one
/// binding is prefilled in several passes and judged as on a device that binds it whole.
#[test]
fn a_prompt_past_one_binding_is_judged_in_passes_as_in_one() {
    let small = Rc::new(Gpu::new_blocking(GpuOptions { max_binding: Some(64 << 10), ..Default::default() }).unwrap());
    let weights = load_dir(&small, &fixture("tiny-qwen2"), None).unwrap();
    let model = Model::new(small.clone(), weights, ModelOptions::STARTING).unwrap();
    let mut e_small = Engine::new(model, Tokenizer::load(&fixture("tiny-qwen2")).unwrap());
    let config = e_small.model().config().clone();
    assert_eq!(Model::pass_tokens(&small, &config), 128);
    let mut e = engine(1);
    let req = request(&"blue ".repeat(400), &["x", "y"]);
    for strategy in [Strategy::PrefillOneToken, Strategy::TokenByToken] {
        let (want, got) =
            (block(e.judge(&req, strategy, 0)).unwrap(), block(e_small.judge(&req, strategy, 0)).unwrap());
        assert!(got.prompt_tokens > 400 && e_small.model().options().max_tokens <= 128);
        assert_eq!(got.choice, want.choice);
        assert_close(&got.probs, &want.probs, 1e-4, 1e-4, "probs");
    }
    // A batch of more tokens than one pass: each judgment as from one pass.
    let batch: Vec<JudgeRequest> =
        ["Blue?", "Red?", "Green?", "Gray?", "Black?"].map(|q| request(q, &["x", "y"])).into();
    let (_, want) = block(e.judge_batch(&batch, PrefixSharing::Off)).unwrap();
    let (record, got) = block(e_small.judge_batch(&batch, PrefixSharing::Off)).unwrap();
    assert!(record.batch_prefill_tokens > 128, "{}", record.batch_prefill_tokens);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.choice, w.choice);
        assert_close(&g.probs, &w.probs, 1e-4, 1e-4, "batch probs");
    }
}
