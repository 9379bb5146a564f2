//! The whole GPU forward against HF transformers (tiny fixture) and against the CPU reference.

mod common;

use std::rc::Rc;

use common::*;
use onetoken::choice::argmax;
use onetoken::gpu::{DispatchTiming, Gpu, GpuOptions, KernelFamily, MlpInput, Tuning, load_dir};
use onetoken::model::{Head, Model, ModelOptions, Positions, Readout, Sequence};
use onetoken::reference::{CpuKvCache, CpuModel, Logits};

fn tiny_model(weight_chunk_bytes: Option<u64>) -> Model {
    tiny_model_with(weight_chunk_bytes, None)
}

fn tiny_model_with(weight_chunk_bytes: Option<u64>, kernels: Option<KernelFamily>) -> Model {
    tiny_model_tuned(weight_chunk_bytes, kernels, Tuning::default())
}

fn tiny_model_tuned(weight_chunk_bytes: Option<u64>, kernels: Option<KernelFamily>, tuning: Tuning) -> Model {
    let options = GpuOptions { weight_chunk_bytes, kernels, tuning, ..Default::default() };
    let gpu = Rc::new(Gpu::new_blocking(options).unwrap());
    let weights = load_dir(&gpu, &fixture("tiny-qwen2"), None).unwrap();
    let options = ModelOptions {
        max_tokens: 64,
        kv_slots: 4,
        kv_capacity: 64,
        max_rows: 32,
        max_full_rows: 32,
        max_choice_ids: 16,
    };
    Model::new(gpu, weights, options).unwrap()
}

const LOGITS_ALL: Readout = Readout { positions: Positions::All, head: Head::Logits, hidden: true };
const LOGITS_LAST: Readout = Readout { positions: Positions::Last, head: Head::Logits, hidden: false };

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    pollster::block_on(f)
}

#[test]
fn logits_at_every_position_match_hf() {
    for family in [KernelFamily::Tiled, KernelFamily::Direct] {
        logits_match_hf(tiny_model_with(None, Some(family)));
    }
}

fn logits_match_hf(mut model: Model) {
    let r = tiny_ref();
    let input = ids(&r["input_ids"]);
    let out = block(model.prefill(&[Sequence { slot: 0, tokens: &input }], LOGITS_ALL)).unwrap();
    assert_eq!(out.rows.len(), 16);
    for (pos, want) in r["logits"].as_array().unwrap().iter().enumerate() {
        let row = &out.rows[pos];
        assert_close(&row.logits, &floats(want), 1e-3, 0.0, &format!("GPU logits at position {pos}"));
        assert_eq!(row.top[0].0, ids(&r["argmax"])[pos], "argmax at position {pos}");
    }
    let last = &out.rows[15].hidden;
    let norm = last.iter().map(|v| v * v).sum::<f32>().sqrt();
    let want = r["final_hidden_norm_after_model_norm_last"].as_f64().unwrap() as f32;
    assert_close(&[norm], &[want], 1e-3, 1e-4, "final hidden norm");
}

#[test]
fn greedy_decode_with_the_kv_cache_matches_hf() {
    for family in [KernelFamily::Tiled, KernelFamily::Direct] {
        greedy_matches_hf(tiny_model_with(None, Some(family)));
    }
}

fn greedy_matches_hf(mut model: Model) {
    let r = tiny_ref();
    let input = ids(&r["input_ids"]);
    let mut next =
        block(model.prefill(&[Sequence { slot: 0, tokens: &input }], Readout::ARGMAX)).unwrap().rows[0].top[0].0;
    let mut tokens = vec![next];
    for _ in 1..8 {
        next = block(model.decode(&[(0, next)], Readout::ARGMAX)).unwrap().rows[0].top[0].0;
        tokens.push(next);
    }
    assert_eq!(tokens, ids(&r["greedy8_kv_cache"]));
    assert_eq!(model.tokens_in(0).unwrap(), 16 + 7);
}

#[test]
fn decode_with_the_cache_equals_a_fresh_prefill_of_the_longer_sequence() {
    let r = tiny_ref();
    let input = ids(&r["input_ids"]);
    for family in [KernelFamily::Tiled, KernelFamily::Direct] {
        let mut model = tiny_model_with(None, Some(family));
        block(model.prefill(&[Sequence { slot: 1, tokens: &input[..12] }], Readout::ARGMAX)).unwrap();
        let mut last = Vec::new();
        for &t in &input[12..] {
            last = block(model.decode(&[(1, t)], LOGITS_LAST)).unwrap().rows.remove(0).logits;
        }
        let fresh = block(model.prefill(&[Sequence { slot: 2, tokens: &input }], LOGITS_LAST)).unwrap();
        assert_close(&last, &fresh.rows[0].logits, 1e-4, 1e-4, &format!("{family:?} decoded vs fresh prefill"));
    }
}

/// Each tuning of the tiled kernels runs the paths it names, and on every path the forward
/// still gives HF's logits at every position and its greedy tokens through the KV cache.
#[test]
fn every_tuning_runs_its_paths_and_matches_hf() {
    let input = ids(&tiny_ref()["input_ids"]);
    // (tuning, dispatches of each kernel in a 16-token prefill that reads out every position, and
    // in the decode step after it). The tiny model has 2 layers of 4 linear layers (gate and up
    // paired) and the LM head.
    type Counts = [(&'static str, usize); 4];
    let cases: [(&str, Counts, Counts); 5] = [
        // 16 rows run matvec, both norms folded in (the head's own norm remains); up to 64
        // keys a decode step attends in the whole kernel.
        (
            "",
            [("matvec", 9), ("matmul", 0), ("rms_norm", 1), ("attention_grouped", 2)],
            [("matvec", 9), ("attention", 2), ("attention_split", 0), ("attention_combine", 0)],
        ),
        (
            "split-attention-after=8",
            [("matvec", 9), ("matmul", 0), ("rms_norm", 1), ("attention_split", 0)],
            [("matvec", 9), ("attention", 0), ("attention_split", 2), ("attention_combine", 2)],
        ),
        // 16 rows past matvec's 8: matmul, the norms as passes of their own; a decode step's
        // row still takes matvec.
        (
            "matvec-max-rows=8",
            [("matvec", 0), ("matmul", 9), ("rms_norm", 5), ("attention_grouped", 2)],
            [("matvec", 9), ("matmul", 0), ("rms_norm", 1), ("attention", 2)],
        ),
        // No matvec at all: a decode step's one row runs matmul.
        (
            "matvec-max-rows=0",
            [("matvec", 0), ("matmul", 9), ("rms_norm", 5), ("attention_grouped", 2)],
            [("matvec", 0), ("matmul", 9), ("rms_norm", 5), ("attention", 2)],
        ),
        // Every matmul in 64 x 64 tiles (by default these few tiles run 32 x 32).
        (
            "matvec-max-rows=0,matmul-64-from-tiles=0",
            [("matvec", 0), ("matmul", 9), ("rms_norm", 5), ("split_sum", 0)],
            [("matvec", 0), ("matmul", 9), ("rms_norm", 5), ("split_sum", 0)],
        ),
    ];
    let r = tiny_ref();
    for (tune, prefill_counts, decode_counts) in cases {
        let tuning: Tuning = tune.parse().unwrap();
        let mut model = tiny_model_tuned(None, Some(KernelFamily::Tiled), tuning);
        model.set_profiling(true).unwrap();
        let prefill = block(model.prefill(&[Sequence { slot: 0, tokens: &input }], LOGITS_ALL)).unwrap();
        for (pos, want) in r["logits"].as_array().unwrap().iter().enumerate() {
            let what = format!("{tune:?}: logits at position {pos}");
            assert_close(&prefill.rows[pos].logits, &floats(want), 1e-3, 0.0, &what);
        }
        let mut tokens = vec![prefill.rows[15].top[0].0];
        let mut steps = Vec::new();
        for _ in 1..8 {
            let step = block(model.decode(&[(0, tokens[tokens.len() - 1])], Readout::ARGMAX)).unwrap();
            tokens.push(step.rows[0].top[0].0);
            steps.push(step);
        }
        assert_eq!(tokens, ids(&r["greedy8_kv_cache"]), "{tune:?}: greedy tokens");
        for (phase, out, counts) in [("prefill", &prefill, prefill_counts), ("decode", &steps[0], decode_counts)] {
            for (kernel, want) in counts {
                let got = out.profile.iter().filter(|(d, _)| d.kernel == kernel).count();
                assert_eq!(got, want, "{tune:?}: {kernel} dispatches in the {phase}");
            }
        }
        // Layer 0's QKV (128 weight rows) over the 16 tokens, where matmul runs it: 4 tiles of
        // 32 rows, or 2 of 64.
        let tile = if tune.contains("matmul-64-from-tiles=0") { 64 } else { 32 };
        if let Some((qkv, _)) = prefill.profile.iter().find(|(d, _)| d.kernel == "matmul") {
            assert_eq!(qkv.grid, [128 / tile, 1, 1], "{tune:?}: the QKV matmul's workgroups");
        }
    }
}

#[test]
fn a_ragged_batch_equals_each_sequence_alone() {
    let r = tiny_ref();
    let input = ids(&r["input_ids"]);
    let seqs: [&[u32]; 3] = [&input[..5], &input, &input[3..12]];
    for family in [KernelFamily::Tiled, KernelFamily::Direct] {
        let mut model = tiny_model_with(None, Some(family));
        let batch: Vec<Sequence> = seqs.iter().enumerate().map(|(slot, t)| Sequence { slot, tokens: t }).collect();
        let together = block(model.prefill(&batch, LOGITS_LAST)).unwrap();
        // A decode step for all three at once, too (B = 3: each appends its own key).
        let steps = [(0, 7), (1, 9), (2, 11)];
        let together_next = block(model.decode(&steps, LOGITS_LAST)).unwrap();
        for (i, tokens) in seqs.iter().enumerate() {
            let what = |part: &str| format!("{family:?} {part} row {i}");
            let mut alone = tiny_model_with(None, Some(family));
            let one = block(alone.prefill(&[Sequence { slot: 0, tokens }], LOGITS_LAST)).unwrap();
            assert_close(&together.rows[i].logits, &one.rows[0].logits, 1e-4, 1e-4, &what("batch"));
            let next = block(alone.decode(&[(0, steps[i].1)], LOGITS_LAST)).unwrap();
            assert_close(&together_next.rows[i].logits, &next.rows[0].logits, 1e-4, 1e-4, &what("decode"));
        }
    }
}

#[test]
fn split_tensors_give_the_same_logits() {
    // 2 KiB bindings: the [512, 64] bf16 embedding (128 B rows) splits into 32 chunks, and
    // every layer matrix into several. Whole, the GPU family pairs each layer's gate and up
    // projections into one matrix; split, it cannot, and runs them apart as CPU-like devices do.
    let r = tiny_ref();
    let input = ids(&r["input_ids"]);
    for family in [KernelFamily::Tiled, KernelFamily::Direct] {
        let mut split = tiny_model_with(Some(2048), Some(family));
        assert_eq!(split.weights().embed_tokens().chunks().len(), 32);
        let mut whole = tiny_model_with(None, Some(family));
        let paired = |m: &Model| m.weights().layers().iter().all(|l| matches!(l.mlp_input, MlpInput::Paired(_)));
        assert_eq!((paired(&whole), paired(&split)), (family == KernelFamily::Tiled, false));
        let a = block(split.prefill(&[Sequence { slot: 0, tokens: &input }], LOGITS_ALL)).unwrap();
        let b = block(whole.prefill(&[Sequence { slot: 0, tokens: &input }], LOGITS_ALL)).unwrap();
        for (i, (x, y)) in a.rows.iter().zip(&b.rows).enumerate() {
            assert_close(&x.logits, &y.logits, 1e-5, 1e-5, &format!("{family:?} split vs whole, position {i}"));
        }
    }
}

#[test]
fn choice_head_equals_the_full_head_at_those_ids() {
    let r = tiny_ref();
    let input = ids(&r["input_ids"]);
    let choices = [148u32, 53, 0, 511, 107];
    let mut model = tiny_model(Some(4096));
    let full = block(model.prefill(&[Sequence { slot: 0, tokens: &input }], LOGITS_LAST)).unwrap();
    let readout = Readout { positions: Positions::Last, head: Head::Choices(&choices), hidden: false };
    let picked = block(model.prefill(&[Sequence { slot: 1, tokens: &input }], readout)).unwrap();
    let want: Vec<f32> = choices.iter().map(|&c| full.rows[0].logits[c as usize]).collect();
    assert_close(&picked.rows[0].logits, &want, 1e-5, 1e-5, "choice head");
    assert!(picked.rows[0].top.is_empty() && picked.rows[0].logsumexp.is_none());

    // The full head with ids: the same logits, plus top-k and logsumexp found on the GPU.
    let readout = Readout { positions: Positions::Last, head: Head::Full { top_k: 5, ids: &choices }, hidden: false };
    let both = block(model.prefill(&[Sequence { slot: 2, tokens: &input }], readout)).unwrap();
    assert_close(&both.rows[0].logits, &want, 1e-5, 1e-5, "full head, choice ids");
    let r = tiny_ref();
    let top: Vec<u32> = both.rows[0].top.iter().map(|t| t.0).collect();
    assert_eq!(top, ids(&r["last_top5_ids"]));
    let top_logits: Vec<f32> = both.rows[0].top.iter().map(|t| t.1).collect();
    assert_close(&top_logits, &floats(&r["last_top5_logits"]), 1e-3, 0.0, "top-5 logits");
    let all = &full.rows[0].logits;
    let max = all.iter().copied().fold(f32::MIN, f32::max);
    let lse = max + all.iter().map(|l| (l - max).exp()).sum::<f32>().ln();
    assert_close(&[both.rows[0].logsumexp.unwrap()], &[lse], 1e-4, 1e-5, "logsumexp");
}

#[test]
fn bad_batches_are_refused_before_any_work() {
    let mut model = tiny_model(None);
    let err =
        |model: &mut Model, batch: &[Sequence]| block(model.prefill(batch, Readout::ARGMAX)).err().unwrap().to_string();
    let long = vec![1u32; 65];
    assert!(err(&mut model, &[Sequence { slot: 0, tokens: &long }]).contains("does not fit"));
    assert!(err(&mut model, &[Sequence { slot: 9, tokens: &[1] }]).contains("KV slot 9 does not exist"));
    assert!(err(&mut model, &[Sequence { slot: 0, tokens: &[] }]).contains("the prompt has no tokens"));
    let second_empty = [Sequence { slot: 2, tokens: &[1] }, Sequence { slot: 3, tokens: &[] }];
    assert!(err(&mut model, &second_empty).contains("sequence 1 of the batch (KV slot 3) has no tokens"));
    assert!(err(&mut model, &[Sequence { slot: 0, tokens: &[600] }]).contains("outside the vocabulary"));
    let twice = [Sequence { slot: 1, tokens: &[1] }, Sequence { slot: 1, tokens: &[2] }];
    assert!(err(&mut model, &twice).contains("appears twice"));
    assert!(err(&mut model, &[]).contains("empty batch"));
    // Past one pass (64 tokens here), a bad token in what would be the second pass is refused
    // before the first runs.
    let mut late_bad = vec![1u32; 40];
    late_bad[39] = 600;
    let two_passes = [Sequence { slot: 0, tokens: &[1; 40] }, Sequence { slot: 1, tokens: &late_bad }];
    assert!(err(&mut model, &two_passes).contains("outside the vocabulary"));
    // Nothing above reached the cache.
    assert!((0..4).all(|s| model.tokens_in(s).unwrap() == 0));
    assert!(model.tokens_in(4).unwrap_err().to_string().contains("KV slot 4 does not exist"));
    assert!(model.forget(7).is_err() && model.share_prefix(0, 9, 0).is_err());
}

/// A prefill of more tokens than the set-up's `max_tokens` runs in passes (a sequence split
/// across them continues in the cache) and reads out what one pass would.
#[test]
fn a_prefill_past_one_pass_runs_in_passes_and_equals_one_pass() {
    let input: Vec<u32> = (0..30).map(|i| (i * 37 + 5) % 512).collect();
    let mut whole = tiny_model(None);
    let mut split = tiny_model(None);
    split.resize(ModelOptions { max_tokens: 16, ..split.options() }).unwrap();
    // 5 + 30 + 25 tokens: the second sequence runs in three passes.
    let batch = [
        Sequence { slot: 0, tokens: &input[..5] },
        Sequence { slot: 1, tokens: &input },
        Sequence { slot: 2, tokens: &input[5..] },
    ];
    let want = block(whole.prefill(&batch, Readout::last(Head::Full { top_k: 3, ids: &[7, 9] }))).unwrap();
    let got = block(split.prefill(&batch, Readout::last(Head::Full { top_k: 3, ids: &[7, 9] }))).unwrap();
    assert_eq!(got.rows.len(), 3);
    for (i, (g, w)) in got.rows.iter().zip(&want.rows).enumerate() {
        assert_close(&g.logits, &w.logits, 1e-5, 1e-5, &format!("row {i}"));
        assert_eq!(g.top.iter().map(|t| t.0).collect::<Vec<_>>(), w.top.iter().map(|t| t.0).collect::<Vec<_>>());
    }
    assert!(got.timing.wall_ms > 0.0);
    // The cache holds every token: the next decode step agrees too.
    let step = [(0, 11), (1, 12), (2, 13)];
    let (a, b) = (block(whole.decode(&step, LOGITS_LAST)).unwrap(), block(split.decode(&step, LOGITS_LAST)).unwrap());
    for (g, w) in b.rows.iter().zip(&a.rows) {
        assert_close(&g.logits, &w.logits, 1e-5, 1e-5, "decode after the passes");
    }
}

/// A resize frees the old set-up before making the new one (the two never hold memory at
/// once); one that cannot be made leaves the old sizes set up again, and the model answers.
#[test]
fn a_resize_that_cannot_be_made_leaves_the_old_sizes_working() {
    let r = tiny_ref();
    let input = ids(&r["input_ids"]);
    let mut model = tiny_model(None);
    let before = model.options();
    let want = block(model.prefill(&[Sequence { slot: 0, tokens: &input }], LOGITS_LAST)).unwrap();
    // A KV cache past any binding: refused by name.
    let huge = ModelOptions { kv_slots: 1 << 24, ..before };
    let err = model.resize(huge).unwrap_err().to_string();
    assert!(err.contains("KV cache") && err.contains("max_storage_buffer_binding_size"), "{err}");
    assert_eq!(model.options(), before);
    let again = block(model.prefill(&[Sequence { slot: 1, tokens: &input }], LOGITS_LAST)).unwrap();
    assert_eq!(again.rows[0].logits, want.rows[0].logits);
    let grown = ModelOptions { kv_capacity: 128, ..before };
    model.resize(grown).unwrap();
    assert_eq!(model.options(), grown);
    let grown_out = block(model.prefill(&[Sequence { slot: 0, tokens: &input }], LOGITS_LAST)).unwrap();
    assert_close(&grown_out.rows[0].logits, &want.rows[0].logits, 1e-5, 1e-5, "after a resize");
}

/// The full-vocabulary head's logits are sized by its own rows: a set-up for many read-out rows
/// through the choices' rows (strategy C) holds one row of vocabulary logits, and a full-head
/// read of more rows than that is refused by name.
#[test]
fn a_full_head_reads_at_most_the_rows_it_was_set_up_for() {
    let gpu = Rc::new(Gpu::new_blocking(GpuOptions::default()).unwrap());
    let weights = load_dir(&gpu, &fixture("tiny-qwen2"), None).unwrap();
    let options =
        ModelOptions { max_tokens: 64, kv_slots: 4, kv_capacity: 16, max_rows: 4, max_full_rows: 1, max_choice_ids: 8 };
    let mut model = Model::new(gpu, weights, options).unwrap();
    let batch: Vec<Sequence> = (0..4).map(|slot| Sequence { slot, tokens: &[5, 6, 7] }).collect();
    let choices = Readout { positions: Positions::Last, head: Head::Choices(&[148, 53]), hidden: false };
    assert_eq!(block(model.prefill(&batch, choices)).unwrap().rows.len(), 4);
    model.forget_all();
    let err = block(model.prefill(&batch, Readout::ARGMAX)).err().unwrap().to_string();
    assert!(err.contains("4 rows to read through the full-vocabulary head") && err.contains("at most 1"), "{err}");
    assert!((0..4).all(|s| model.tokens_in(s).unwrap() == 0), "refused before any work");
    assert_eq!(block(model.prefill(&batch[..1], Readout::ARGMAX)).unwrap().rows.len(), 1);
}

/// Sizes whose kernels would need more workgroups along one grid dimension than the device
/// dispatches (a workgroup per token, read-out row or choice id) are refused when the model is
/// set up, not when a dispatch fails validation.
#[test]
fn model_sizes_past_the_device_grid_are_refused_at_set_up() {
    let gpu = Rc::new(Gpu::new_blocking(GpuOptions::default()).unwrap());
    let weights = Rc::new(load_dir(&gpu, &fixture("tiny-qwen2"), None).unwrap());
    let grid = gpu.limits().max_compute_workgroups_per_dimension as usize;
    let fits = ModelOptions { max_tokens: grid, ..ModelOptions::single(16) };
    assert!(Model::new(gpu.clone(), weights.clone(), fits).is_ok());
    for too_many in [
        ModelOptions { max_tokens: grid + 1, ..fits },
        ModelOptions { max_rows: grid + 1, max_tokens: 16, ..fits },
        ModelOptions { max_choice_ids: grid + 1, max_tokens: 16, ..fits },
    ] {
        let err = Model::new(gpu.clone(), weights.clone(), too_many).err().unwrap().to_string();
        assert!(err.contains("max_compute_workgroups_per_dimension"), "{err}");
    }
}

#[test]
fn shared_prefix_copy_then_continue_equals_a_full_prefill() {
    let r = tiny_ref();
    let input = ids(&r["input_ids"]);
    for family in [KernelFamily::Tiled, KernelFamily::Direct] {
        let mut model = tiny_model_with(None, Some(family));
        block(model.prefill(&[Sequence { slot: 0, tokens: &input[..10] }], Readout::ARGMAX)).unwrap();
        model.share_prefix(0, 3, 10).unwrap();
        let cont = block(model.prefill(&[Sequence { slot: 3, tokens: &input[10..] }], LOGITS_LAST)).unwrap();
        let full = block(model.prefill(&[Sequence { slot: 1, tokens: &input }], LOGITS_LAST)).unwrap();
        assert_close(&cont.rows[0].logits, &full.rows[0].logits, 1e-4, 1e-4, &format!("{family:?} shared prefix"));
    }
}

/// A slot cut back to its prompt takes the next token again as if the first had never come:
/// the same logits, bit for bit, and a different token after the cut equals that token decoded
/// straight after the prompt. (The profile repeats decode steps this way.)
#[test]
fn a_truncated_slot_continues_from_where_it_was_cut() {
    let r = tiny_ref();
    let input = ids(&r["input_ids"]);
    let mut model = tiny_model(None);
    block(model.prefill(&[Sequence { slot: 0, tokens: &input[..12] }], Readout::ARGMAX)).unwrap();
    let step = |model: &mut Model, t: u32| block(model.decode(&[(0, t)], LOGITS_LAST)).unwrap().rows.remove(0).logits;
    let first = step(&mut model, input[12]);
    step(&mut model, input[13]);
    model.truncate(0, 12).unwrap();
    assert_eq!(step(&mut model, input[12]), first, "the step again after the cut");
    model.truncate(0, 12).unwrap();
    let other = step(&mut model, input[14]);
    block(model.prefill(&[Sequence { slot: 1, tokens: &input[..12] }], Readout::ARGMAX)).unwrap();
    let straight = block(model.decode(&[(1, input[14])], LOGITS_LAST)).unwrap().rows.remove(0).logits;
    assert_close(&other, &straight, 1e-5, 1e-5, "another token after the cut");
    assert_eq!(model.tokens_in(0).unwrap(), 13);
    let err = model.truncate(0, 14).unwrap_err().to_string();
    assert!(err.contains("holds 13 tokens, so it cannot keep 14"), "{err}");
    assert!(model.truncate(9, 0).unwrap_err().to_string().contains("KV slot 9 does not exist"));
}

/// Profile mode times every dispatch inside the call's own passes where the device can write
/// timestamps inside a pass (natively, lavapipe included), else (as in a browser; forced here)
/// in a pass of its own per dispatch. Either way it records the same dispatches, each timed,
/// and changes no result.
#[test]
fn profile_mode_stamps_inside_the_passes_where_it_can_and_changes_no_result() {
    let input = ids(&tiny_ref()["input_ids"]);
    let run = |profile_pass_per_dispatch: bool| {
        let gpu = Rc::new(Gpu::new_blocking(GpuOptions { profile_pass_per_dispatch, ..Default::default() }).unwrap());
        let weights = load_dir(&gpu, &fixture("tiny-qwen2"), None).unwrap();
        let options = ModelOptions { max_choice_ids: 4, ..ModelOptions::single(64) };
        let mut model = Model::new(gpu, weights, options).unwrap();
        let prompt = [Sequence { slot: 0, tokens: &input[..12] }];
        let plain = block(model.prefill(&prompt, LOGITS_LAST)).unwrap();
        assert!(plain.profile.is_empty(), "profile mode is off by default");
        model.forget(0).unwrap();
        model.set_profiling(true).unwrap();
        let profiled = block(model.prefill(&prompt, LOGITS_LAST)).unwrap();
        let step = block(model.decode(&[(0, input[12])], LOGITS_LAST)).unwrap();
        assert_eq!(profiled.rows[0].logits, plain.rows[0].logits, "profiling changes no result");
        (model.dispatch_timing().unwrap(), profiled, step)
    };
    let (inside, per_pass) = (run(false), run(true));
    assert_eq!(inside.0, DispatchTiming::InsidePasses, "lavapipe writes timestamps inside passes");
    assert_eq!(per_pass.0, DispatchTiming::PassPerDispatch);
    for (a, b) in [(&inside.1, &per_pass.1), (&inside.2, &per_pass.2)] {
        let names = |o: &onetoken::model::ForwardOut| -> Vec<_> {
            o.profile.iter().map(|(d, _)| (d.kernel, d.layer)).collect()
        };
        assert_eq!(names(a), names(b), "the same dispatches either way");
        assert!(!a.profile.is_empty());
        for out in [a, b] {
            assert!(out.profile.iter().all(|(_, ms)| ms.is_finite() && *ms >= 0.0));
            let sum: f64 = out.profile.iter().map(|(_, ms)| ms).sum();
            let layers_and_head = out.timing.gpu_ms().unwrap();
            assert!(sum > 0.0 && (layers_and_head - sum).abs() < 1e-9 * sum, "the phase is the dispatches' sum");
        }
        assert_eq!(a.rows[0].logits, b.rows[0].logits);
    }
}

/// Decode steps whose commands were encoded during the step before equal steps encoded when
/// asked for, bit for bit, across the step whose keys outgrow one attention chunk; a call that
/// dispatches otherwise than the step encoded ahead (its read-out changed, a prefill, another
/// slot's step over a different number of attention chunks) encodes its own.
#[test]
fn decode_steps_encoded_ahead_equal_steps_encoded_on_demand() {
    let r = tiny_ref();
    let input = ids(&r["input_ids"]);
    let chunk = onetoken::ops::ATTENTION_CHUNK;
    // A prompt ending two keys short of one attention chunk.
    let prompt: Vec<u32> = input.iter().copied().cycle().take(chunk - 2).collect();
    let (choices, fewer) = ([3u32, 5, 8], [3u32, 5]);
    let full = Readout { positions: Positions::Last, head: Head::Full { top_k: 4, ids: &choices }, hidden: true };
    let narrower = Readout::last(Head::Choices(&fewer));
    let no_hidden = Readout { hidden: false, ..full };
    // Calls, in order: a prefill of the prompt in slot 0, then `steps`, then the ones below.
    // (readout, slot, token): in slot 0 the steps to keys chunk - 1 ..= chunk + 2, one without
    // the hidden state (only the read-back differs), then two with a narrower read-out.
    let steps = [
        (full, 0, 7),
        (full, 0, 9),
        (full, 0, 11),
        (full, 0, 2),
        (no_hidden, 0, 3),
        (narrower, 0, 4),
        (narrower, 0, 6),
    ];
    for family in [KernelFamily::Tiled, KernelFamily::Direct] {
        let run = |ahead: bool| {
            let gpu = Rc::new(Gpu::new_blocking(GpuOptions { kernels: Some(family), ..Default::default() }).unwrap());
            let weights = load_dir(&gpu, &fixture("tiny-qwen2"), None).unwrap();
            let options = ModelOptions {
                max_tokens: 64,
                kv_slots: 2,
                kv_capacity: 2 * chunk,
                max_rows: 2,
                max_full_rows: 2,
                max_choice_ids: 4,
            };
            let mut model = Model::new(gpu, weights, options).unwrap();
            model.set_encoding_ahead(ahead);
            let mut outs = vec![block(model.prefill(&[Sequence { slot: 0, tokens: &prompt }], full)).unwrap()];
            for &(readout, slot, token) in &steps {
                outs.push(block(model.decode(&[(slot, token)], readout)).unwrap());
            }
            outs.push(block(model.prefill(&[Sequence { slot: 1, tokens: &input }], narrower)).unwrap());
            outs.push(block(model.decode(&[(0, 1)], narrower)).unwrap());
            outs.push(block(model.decode(&[(1, 1)], narrower)).unwrap());
            // Greedy, then the same step reading the whole logit row.
            outs.push(block(model.decode(&[(1, 2)], Readout::ARGMAX)).unwrap());
            outs.push(block(model.decode(&[(1, 3)], LOGITS_LAST)).unwrap());
            outs
        };
        let (ahead, on_demand) = (run(true), run(false));
        let used: Vec<bool> = ahead.iter().map(|o| o.timing.encoded_ahead).collect();
        // GPU kernels split attention past one chunk of keys: slot 0's step (2 chunks) and slot
        // 1's (1 chunk) then dispatch differently. The CPU-like kernels do not, so slot 0's
        // commands serve slot 1 (its cache rows and positions are uploaded inputs).
        let same_for_another_slot = family == KernelFamily::Direct;
        // Prefill; the four steps; without hidden; the narrower read-out, then again; slot 1's
        // prefill; then a
        // step in slot 0 after the one predicted in slot 1, and the other way round; greedy (a
        // new read-out), then the whole logit row (never encoded ahead).
        let steps_in_turn = [same_for_another_slot, same_for_another_slot];
        let want =
            [&[false, true, true, true, true, false, false, true, false][..], &steps_in_turn, &[false, false]].concat();
        assert_eq!(used, want, "{family:?}: which calls ran commands encoded ahead");
        assert!(on_demand.iter().all(|o| !o.timing.encoded_ahead), "{family:?}: none encoded ahead when off");
        for (i, (a, b)) in ahead.iter().zip(&on_demand).enumerate() {
            let (a, b) = (&a.rows[0], &b.rows[0]);
            let what = format!("{family:?} call {i}");
            assert_eq!(a.top, b.top, "{what}: top");
            assert_eq!(a.logits, b.logits, "{what}: logits");
            assert_eq!(a.hidden, b.hidden, "{what}: hidden");
            assert_eq!(a.logsumexp, b.logsumexp, "{what}: logsumexp");
        }
    }
}

/// A constrained walk's allowed ids change in number from step to step (one, then several
/// where the choices part, then one): padded to whole steps of CHOICE_IDS_STEP, such steps
/// dispatch alike and run the commands the step before encoded ahead, reading back exactly the
/// ids asked for and the logits a step encoded when asked for reads; past one step of ids
/// (9 of them) a call dispatches otherwise and encodes its own.
#[test]
fn steps_whose_ids_change_in_number_run_commands_encoded_ahead() {
    let prompt = ids(&tiny_ref()["input_ids"]);
    let nine: Vec<u32> = (20..29).collect();
    let walk: [&[u32]; 6] = [&[3], &[3, 5], &[5], &[7, 8, 9], &[2], &nine];
    let run = |ahead: bool| {
        let mut model = tiny_model(None);
        model.set_encoding_ahead(ahead);
        let head = |ids| Readout::last(Head::Full { top_k: 2, ids });
        let mut outs = vec![block(model.prefill(&[Sequence { slot: 0, tokens: &prompt }], head(walk[0]))).unwrap()];
        for (i, ids) in walk.iter().enumerate() {
            outs.push(block(model.decode(&[(0, 10 + i as u32)], head(ids))).unwrap());
        }
        outs
    };
    let (ahead, on_demand) = (run(true), run(false));
    let used: Vec<bool> = ahead.iter().map(|o| o.timing.encoded_ahead).collect();
    assert_eq!(used, [false, true, true, true, true, true, false], "which calls ran commands encoded ahead");
    for (i, (a, b)) in ahead.iter().zip(&on_demand).enumerate() {
        let asked = if i == 0 { walk[0] } else { walk[i - 1] };
        assert_eq!(a.rows[0].logits.len(), asked.len(), "call {i}: one logit per id asked for");
        assert_eq!(a.rows[0].logits, b.rows[0].logits, "call {i}: logits");
        assert_eq!(a.rows[0].top, b.rows[0].top, "call {i}: top");
    }
    // The ids' logits are those of the whole row (the padding moves none of them).
    let mut model = tiny_model(None);
    let full = block(model.prefill(&[Sequence { slot: 0, tokens: &prompt }], LOGITS_LAST)).unwrap();
    let mut model = tiny_model(None);
    let three = Readout::last(Head::Choices(&[7, 8, 9]));
    let some = block(model.prefill(&[Sequence { slot: 0, tokens: &prompt }], three)).unwrap();
    for (j, id) in [7, 8, 9].into_iter().enumerate() {
        let want = full.rows[0].logits[id];
        assert!((some.rows[0].logits[j] - want).abs() < 1e-4, "id {id}: {} vs {want}", some.rows[0].logits[j]);
    }
}

/// The real Qwen2.5-0.5B shapes with synthetic weights: GPU top-5 equal to the CPU reference,
/// after a prompt and after a decode step, with either kernel family (the GPU family pairs
/// gate and up at 4,864 rows each and appends the decode step's keys in attention).
#[test]
fn synthetic_qwen2_5_0_5b_top5_matches_the_cpu_reference() {
    let config = onetoken::Qwen2Config::qwen2_5_0_5b();
    let prompt = [9707u32, 11, 1879, 0, 785, 3974, 13876, 38835];
    let next = 1234u32;
    let cpu = CpuModel::from_tensors(config.clone(), onetoken::synthetic::cpu_tensors(&config)).unwrap();
    let mut cache = CpuKvCache::new(&config);
    let cpu_prompt = cpu.forward(&prompt, &mut cache, Logits::Last).unwrap().logits;
    let cpu_next = cpu.forward(&[next], &mut cache, Logits::Last).unwrap().logits;
    let top5 = |l: &[f32]| {
        let mut order: Vec<usize> = (0..l.len()).collect();
        order.sort_by(|&a, &b| l[b].total_cmp(&l[a]));
        order.truncate(5);
        order
    };
    for family in [KernelFamily::Tiled, KernelFamily::Direct] {
        let gpu = Rc::new(Gpu::new_blocking(GpuOptions { kernels: Some(family), ..Default::default() }).unwrap());
        let weights = onetoken::ops::synthetic_weights(&gpu, &config, None).unwrap();
        let paired = weights.layers().iter().all(|l| matches!(l.mlp_input, MlpInput::Paired(_)));
        assert_eq!(paired, family == KernelFamily::Tiled);
        let options = ModelOptions { max_choice_ids: 8, ..ModelOptions::single(16) };
        let mut model = Model::new(gpu, weights, options).unwrap();
        let gpu_prompt = block(model.prefill(&[Sequence { slot: 0, tokens: &prompt }], LOGITS_LAST)).unwrap();
        let gpu_next = block(model.decode(&[(0, next)], LOGITS_LAST)).unwrap();
        for (what, g, c) in
            [("prompt", &gpu_prompt.rows[0].logits, &cpu_prompt), ("decode", &gpu_next.rows[0].logits, &cpu_next)]
        {
            let what = format!("synthetic 0.5B {family:?} {what}");
            eprintln!("{what}: GPU top-5 {:?}, CPU top-5 {:?}", top5(g), top5(c));
            assert_eq!(top5(g), top5(c), "{what}");
            assert_eq!(argmax(g), argmax(c), "{what}");
            assert_close(g, c, 2e-3, 2e-3, &what);
        }
    }
}

/// A prefill of more tokens than matvec serves, on the GPU family, with an intermediate size
/// long enough that down_proj splits K (matmul writing partial sums, split_sum adding them):
/// the split runs in every layer, the layers share one partials buffer, and the logits equal
/// the CPU reference's, after the prompt and after a decode step (matvec, no split). Tuned never
/// to split, the same prefill runs unsplit, to the same logits.
#[test]
fn a_prefill_whose_down_proj_splits_k_matches_the_cpu_reference() {
    let mut config = onetoken::Qwen2Config::qwen2_5_0_5b();
    (config.hidden_size, config.intermediate_size, config.num_hidden_layers) = (128, 1600, 3);
    (config.num_attention_heads, config.num_key_value_heads, config.vocab_size) = (2, 1, 1000);
    let prompt: Vec<u32> = (0..45u32).map(|i| (i * 37 + 11) % 1000).collect();
    let next = 321u32;
    let cpu = CpuModel::from_tensors(config.clone(), onetoken::synthetic::cpu_tensors(&config)).unwrap();
    let mut cache = CpuKvCache::new(&config);
    let cpu_prompt = cpu.forward(&prompt, &mut cache, Logits::Last).unwrap().logits;
    let cpu_next = cpu.forward(&[next], &mut cache, Logits::Last).unwrap().logits;
    for (tune, splits) in [("", config.num_hidden_layers), ("split-k-below-tiles=0", 0)] {
        let tuning = tune.parse().unwrap();
        let options = GpuOptions { kernels: Some(KernelFamily::Tiled), tuning, ..Default::default() };
        let gpu = Rc::new(Gpu::new_blocking(options).unwrap());
        let weights = onetoken::ops::synthetic_weights(&gpu, &config, None).unwrap();
        let options = ModelOptions { max_choice_ids: 8, ..ModelOptions::single(64) };
        let mut model = Model::new(gpu, weights, options).unwrap();
        model.set_profiling(true).unwrap();
        let gpu_prompt = block(model.prefill(&[Sequence { slot: 0, tokens: &prompt }], LOGITS_LAST)).unwrap();
        let sums =
            |out: &onetoken::model::ForwardOut| out.profile.iter().filter(|(d, _)| d.kernel == "split_sum").count();
        assert_eq!(sums(&gpu_prompt), splits, "{tune:?}: split down_proj layers");
        let gpu_next = block(model.decode(&[(0, next)], LOGITS_LAST)).unwrap();
        assert_eq!(sums(&gpu_next), 0, "a decode step runs matvec");
        for (what, g, c) in
            [("prompt", &gpu_prompt.rows[0].logits, &cpu_prompt), ("decode", &gpu_next.rows[0].logits, &cpu_next)]
        {
            assert_eq!(argmax(g), argmax(c), "split-K model {what} {tune:?}");
            assert_close(g, c, 1e-3, 1e-3, &format!("split-K model {what} {tune:?}"));
        }
    }
}
