//! The CLI's contract: its JSON lines parse and carry every field other tools read.

mod common;

use std::process::Command;

use common::*;

fn onetoken(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_onetoken")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

fn lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn scratch(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("onetoken-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

const FIELDS: [&str; 12] = [
    "strategy",
    "choice",
    "choice_index",
    "choice_logits",
    "probs",
    "prompt_tokens",
    "generated_token_ids",
    "decode_steps",
    "top",
    "timings_ms",
    "gpu_timings_ms",
    "synthetic",
];

#[test]
fn judge_prints_one_record_per_strategy_with_every_field() {
    let model = fixture("tiny-qwen2").display().to_string();
    let request =
        scratch("request.json", r#"{"system": "You judge colors.", "user": "Sky?", "choices": ["blue", "red"]}"#);
    let (ok, out, err) = onetoken(&["judge", "--model", &model, "--request", &request, "--top-k", "4"]);
    assert!(ok, "{err}");
    let records = lines(&out);
    let names: Vec<&str> = records.iter().map(|r| r["strategy"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "a-free", "b", "b-full-head"]);
    for r in &records {
        for f in FIELDS {
            assert!(r.get(f).is_some(), "{} lacks {f}", r["strategy"]);
        }
        for f in ["tokenize", "prefill", "decode", "readback", "total"] {
            assert!(r["timings_ms"].get(f).is_some(), "timings_ms.{f}");
        }
    }
    assert_eq!(records[2]["decode_steps"], 0);
    assert!(records[2]["top"].is_null(), "the choice head has no full distribution");
    assert_eq!(records[3]["top"].as_array().unwrap().len(), 4);
    assert_eq!(records[0]["choice_index"], records[2]["choice_index"]);
}

#[test]
fn judge_requests_prints_the_batch_record_then_each_judgment() {
    let model = fixture("tiny-qwen2").display().to_string();
    let jsonl = [
        r#"{"user": "Doc: sky blue, car red. Sky?", "choices": ["blue", "red"]}"#,
        r#"{"user": "Doc: sky blue, car red. Car?", "choices": ["blue", "red"]}"#,
    ]
    .join("\n");
    let path = scratch("requests.jsonl", &jsonl);
    let (ok, out, err) = onetoken(&["judge", "--model", &model, "--requests", &path, "--shared-prefix"]);
    assert!(ok, "{err}");
    // Options of one request's strategies do not apply to batches: refused, not ignored.
    for extra in [&["--strategy", "a"][..], &["--top-k", "3"], &["--sequence-logprobs"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_onetoken"))
            .args(["judge", "--model", &model, "--requests", &path])
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.code() == Some(2) && err.contains("cannot be used with"), "{extra:?}: {err}");
    }
    let request = scratch("one.json", r#"{"user": "Sky?", "choices": ["blue", "red"]}"#);
    let (ok, _, err) = onetoken(&["judge", "--model", &model, "--request", &request, "--shared-prefix"]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");
    let records = lines(&out);
    assert_eq!(records.len(), 3);
    for f in ["judgments", "shared_prefix_tokens", "batch_prefill_tokens", "timings_ms", "judgments_per_s"] {
        assert!(records[0].get(f).is_some(), "batch record lacks {f}");
    }
    assert!(records[0]["shared_prefix_tokens"].as_u64().unwrap() > 0);
    for r in &records[1..] {
        for f in FIELDS {
            assert!(r.get(f).is_some(), "judgment lacks {f}");
        }
    }
}

#[test]
fn logits_prints_top_hidden_norm_and_tokens() {
    let model = fixture("tiny-qwen2").display().to_string();
    let r = tiny_ref();
    let id_list: Vec<String> = ids(&r["input_ids"]).iter().map(u32::to_string).collect();
    let (ok, out, err) = onetoken(&["logits", "--model", &model, "--ids", &id_list.join(","), "--top-k", "5"]);
    assert!(ok, "{err}");
    let v = &lines(&out)[0];
    let top: Vec<u32> = v["top"].as_array().unwrap().iter().map(|p| p[0].as_u64().unwrap() as u32).collect();
    assert_eq!(top, ids(&r["last_top5_ids"]));
    assert_eq!(v["tokens"], 16);
    let want = r["final_hidden_norm_after_model_norm_last"].as_f64().unwrap();
    assert!((v["hidden_norm"].as_f64().unwrap() - want).abs() < 1e-3);
}

#[test]
fn help_lists_the_commands_and_bad_input_fails_clearly() {
    let (ok, out, _) = onetoken(&["--help"]);
    assert!(ok);
    for cmd in ["logits", "judge", "bench"] {
        assert!(out.contains(cmd), "{out}");
    }
    let model = fixture("tiny-qwen2").display().to_string();
    let bad = scratch("bad.json", r#"{"user": "q", "choices": ["x", "x"]}"#);
    let (ok, _, err) = onetoken(&["judge", "--model", &model, "--request", &bad]);
    assert!(!ok);
    assert!(err.contains("choices 1 and 2 are the same"), "{err}");
    let (ok, _, err) = onetoken(&["judge", "--model", "/nonexistent", "--request", &bad]);
    assert!(!ok);
    assert!(err.contains("/nonexistent/config.json"), "{err}");
    let (ok, _, err) = onetoken(&["judge", "--synthetic", "qwen9", "--request", &bad]);
    assert!(!ok && err.contains("unknown model name"), "{err}");
    // Before any measuring: a profile of a length with nothing to prefill.
    let (ok, _, err) = onetoken(&["bench", "--model", &model, "--profile", "--lengths", "0,8"]);
    assert!(!ok && err.contains("a length of 0 has nothing to prefill"), "{err}");
    let past_context = vec!["1"; 4097].join(",");
    let (ok, _, err) = onetoken(&["logits", "--model", &model, "--ids", &past_context]);
    assert!(!ok && err.contains("4097 tokens") && err.contains("the model's context is 4096 tokens"), "{err}");
}

#[test]
fn sequence_logprobs_is_an_option_of_b() {
    let model = fixture("tiny-qwen2").display().to_string();
    let request = scratch("seq.json", r#"{"user": "City?", "choices": ["New York", "New Jersey"]}"#);
    let (ok, out, err) =
        onetoken(&["judge", "--model", &model, "--request", &request, "--strategy", "b", "--sequence-logprobs"]);
    assert!(ok, "{err}");
    let r = &lines(&out)[0];
    let lps = r["sequence_logprobs"].as_array().unwrap();
    assert_eq!(lps.len(), 2);
    assert!(lps.iter().all(|lp| lp.as_f64().unwrap() < 0.0));
    // Without the flag the field is null.
    let (_, out, _) = onetoken(&["judge", "--model", &model, "--request", &request, "--strategy", "b"]);
    assert!(lines(&out)[0]["sequence_logprobs"].is_null());
}

/// `--tune` moves a threshold of the tiled kernels: here decode attention splits after 8 keys
/// (by default after 64), which a 12-token prompt's decode step then does; the bench reports the
/// tuning it ran, and a bad setting fails naming it.
#[test]
fn tune_is_honoured_and_reported() {
    let model = fixture("tiny-qwen2").display().to_string();
    let args = ["bench", "--model", &model, "--json", "--lengths", "12", "--batch-sizes", "1", "--repeats", "1"];
    let tuned = ["--profile", "--kernels", "tiled", "--tune", "split-attention-after=8"];
    let (ok, out, err) = onetoken(&[&args[..], &tuned].concat());
    assert!(ok, "{err}");
    assert!(err.contains("tuned split-attention-after=8"), "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let tuning = &report["device"]["tuning"];
    assert_eq!([&tuning["split_attention_after"], &tuning["matvec_max_rows"]], [8, 32], "{tuning}");
    let phases = report["profile"]["phases"].as_array().unwrap();
    let decode = phases.iter().find(|p| p["phase"] == "decode").unwrap();
    let split = decode["dispatches"].as_array().unwrap().iter().filter(|d| d["kernel"] == "attention_split").count();
    assert_eq!(split, 2, "one split attention a layer: {decode}");
    for (tune, message) in [
        ("matvec-max-rows=33", "matvec serves at most 32 token rows"),
        ("split-after=3", "no tuning setting \"split-after\""),
        ("matvec-max-rows=many", "not a whole number"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_onetoken"))
            .args(["logits", "--model", &model, "--ids", "1", "--tune", tune])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        // A command line that does not parse exits 2 (the README's exit codes).
        assert!(out.status.code() == Some(2) && err.contains(message), "{tune}: {:?} {err}", out.status);
    }
    // The help states the defaults as the code has them.
    let (ok, help, _) = onetoken(&["logits", "--help"]);
    assert!(ok && help.contains(&onetoken::gpu::Tuning::defaults_text()), "{help}");
}

/// bench's progress lines on stderr give each step's figures as it ends, the report's own: a
/// run cut short (by a timeout) has said what it measured so far.
fn progress_lines_carry_the_figures(report: &serde_json::Value, err: &str) {
    let f = |v: &serde_json::Value| v.as_f64().unwrap();
    let has = |line: String| assert!(err.contains(&line), "stderr should hold {line:?}:\n{err}");
    let micro = &report["micro"];
    has(format!(
        "bench: microbenchmarks: copy {:.1} GB/s, read {:.1} GB/s, FMA {:.1} GFLOP/s, a dependent dispatch {:.1} us\n",
        f(&micro["copy_gbps"]),
        f(&micro["read_gbps"]),
        f(&micro["fma_gflops"]),
        f(&micro["dispatch_us"])
    ));
    for row in report["sweep"].as_array().unwrap() {
        let a = &row["a"];
        let steps: Vec<f64> = a["decode_ms"].as_array().unwrap().iter().map(f).collect();
        let gpu_steps: Vec<f64> = a["gpu_decode_ms"].as_array().unwrap().iter().map(f).collect();
        has(format!(
            "bench: prompt of {} tokens: A {:.1} ms (prefill {:.1} ms + {} steps of {:.2} ms; GPU {:.1} ms + {:.2} ms), \
             B {:.1} ms, B full head {:.1} ms: A/B {:.2}\n",
            row["length"],
            f(&a["total_ms"]),
            f(&a["prefill_ms"]),
            steps.len(),
            onetoken::cost::median(&steps),
            f(&a["gpu_prefill_ms"]),
            onetoken::cost::median(&gpu_steps),
            f(&row["b"]["total_ms"]),
            f(&row["b_full_head"]["total_ms"]),
            f(&row["speedup"])
        ));
    }
    let ahead = &report["encode_ahead"];
    has(format!(
        "bench: a decode step {:.2} ms encoded ahead ({} of {} steps), {:.2} ms encoded when asked for\n",
        f(&ahead["decode_ms"]),
        ahead["steps_encoded_ahead"],
        ahead["decode_steps"],
        f(&ahead["decode_ms_on_demand"])
    ));
    for b in report["batch"].as_array().unwrap() {
        let shared = if b["shared_prefix"] == true { ", shared prefix" } else { "" };
        has(format!(
            "bench: batch of {} judgments{shared}: {:.1} ms, {:.1} judgments/s\n",
            b["judgments"],
            f(&b["total_ms"]),
            f(&b["judgments_per_s"])
        ));
    }
    for pair in report["profile"]["phases"].as_array().unwrap().chunks(2) {
        let summary = |p: &serde_json::Value| {
            format!(
                "{:.2} ms on the GPU in {} dispatches (their sum {:.2} ms, most in {} (",
                f(&p["gpu_ms"]),
                p["dispatch_count"],
                f(&p["kernels_ms"]),
                p["kernels"][0]["kernel"].as_str().unwrap()
            )
        };
        has(format!("bench: profile at {} tokens: prefill {}", pair[0]["tokens"], summary(&pair[0])));
        has(format!("; a decode step {}", summary(&pair[1])));
    }
}

#[test]
fn bench_profile_times_every_dispatch_and_kernels_are_honoured() {
    let model = fixture("tiny-qwen2").display().to_string();
    for kernels in ["tiled", "direct"] {
        let args = ["bench", "--model", &model, "--json", "--lengths", "12,70", "--batch-sizes", "1", "--repeats", "1"];
        let (ok, out, err) = onetoken(&[&args[..], &["--profile", "--kernels", kernels]].concat());
        assert!(ok, "{err}");
        let report: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(report["device"]["kernels"], kernels);
        assert_eq!(report["repeats"], 1, "each point is one run, as asked");
        progress_lines_carry_the_figures(&report, &err);
        // Two lengths fit the cost model's prefill line, whose fixed cost is never negative.
        assert!(report["cost_model"]["prefill"]["per_token_ms"].is_f64(), "{}", report["cost_model"]);
        assert!(report["cost_model"]["prefill"]["fixed_ms"].as_f64().unwrap() >= 0.0, "{}", report["cost_model"]);
        assert!(report["sweep"][1]["predicted_speedup"].as_f64().unwrap() > 0.0, "{}", report["sweep"][1]);
        // Read bandwidth, read as the linear kernels read their weights (textures: lavapipe's
        // direct kernels), and decode's fraction of it.
        let micro = &report["micro"];
        assert_eq!(micro["read_from"], if kernels == "tiled" { "storage" } else { "texture" });
        let (read, copy) = (micro["read_gbps"].as_f64().unwrap(), micro["copy_gbps"].as_f64().unwrap());
        let roofline = &report["roofline"];
        let decode = roofline["decode_gbps"].as_f64().unwrap();
        assert!(read > 0.0 && (roofline["decode_read_fraction"].as_f64().unwrap() - decode / read).abs() < 1e-9);
        let floor = report["model"]["decode_bytes"].as_f64().unwrap() / (read.max(copy) * 1e6);
        assert!((roofline["decode_floor_ms"].as_f64().unwrap() - floor).abs() < 1e-9 * floor, "{roofline}");
        // What a dispatch that waits for the one before it costs, doing nothing.
        let dispatch_us = report["micro"]["dispatch_us"].as_f64().unwrap();
        assert!(dispatch_us > 0.0 && dispatch_us < 10_000.0, "{dispatch_us}");
        // The decode kernel alone at Qwen2.5-0.5B's three linear shapes.
        let linear = report["micro"]["linear"].as_array().unwrap();
        let shapes: Vec<(u64, u64)> =
            linear.iter().map(|l| (l["k"].as_u64().unwrap(), l["n"].as_u64().unwrap())).collect();
        assert_eq!(shapes, [(896, 896), (896, 4864), (4864, 896)]);
        for l in linear {
            assert_eq!(l["kernel"], if kernels == "tiled" { "matvec" } else { "linear_direct" });
            assert!(l["gpu_ms"].as_f64().unwrap() > 0.0 && l["gbps"].as_f64().unwrap() > 0.0, "{l}");
            let fraction = l["gbps"].as_f64().unwrap() / report["micro"]["copy_gbps"].as_f64().unwrap();
            assert!((l["copy_fraction"].as_f64().unwrap() - fraction).abs() < 1e-9);
            let fraction = l["gbps"].as_f64().unwrap() / read;
            assert!((l["read_fraction"].as_f64().unwrap() - fraction).abs() < 1e-9, "{l}");
            // matvec's pick for this K (64 lanes a row from K = 2,048), and its other shape
            // timed beside it; linear_direct has neither.
            if kernels == "tiled" {
                let picked = if l["k"] == 4864 { 64 } else { 32 };
                assert_eq!(l["lanes"], picked, "{l}");
                let other = &l["other_shape"];
                assert_eq!(other["lanes"], 96 - picked, "{l}");
                assert!(other["gpu_ms"].as_f64().unwrap() > 0.0, "{l}");
                let gbps = other["gbps"].as_f64().unwrap();
                assert!((other["copy_fraction"].as_f64().unwrap() - gbps / copy).abs() < 1e-9, "{l}");
                assert!((other["read_fraction"].as_f64().unwrap() - gbps / read).abs() < 1e-9, "{l}");
            } else {
                assert!(l["lanes"].is_null() && l["other_shape"].is_null(), "{l}");
            }
        }
        // The prefill kernel alone at the same shapes and 128 token rows: on GPUs the layers of
        // few tiles also run split: down_proj's long K in 8 parts of 608, the square layer's in 3
        // (304, 304, 288); gate and up make tiles enough.
        let prefill = report["micro"]["prefill_linear"].as_array().unwrap();
        let shapes: Vec<(u64, u64, u64)> = prefill
            .iter()
            .map(|l| (l["m"].as_u64().unwrap(), l["k"].as_u64().unwrap(), l["n"].as_u64().unwrap()))
            .collect();
        assert_eq!(shapes, [(128, 896, 896), (128, 896, 4864), (128, 4864, 896)]);
        for l in prefill {
            assert_eq!(l["kernel"], if kernels == "tiled" { "matmul" } else { "linear_direct" });
            let fraction = l["gflops"].as_f64().unwrap() / report["micro"]["fma_gflops"].as_f64().unwrap();
            assert!(
                l["gpu_ms"].as_f64().unwrap() > 0.0 && (l["fma_fraction"].as_f64().unwrap() - fraction).abs() < 1e-9
            );
            let (k, n) = (l["k"].as_u64().unwrap(), l["n"].as_u64().unwrap());
            let parts = match (kernels, k, n) {
                ("tiled", 4864, _) => Some(8),
                ("tiled", 896, 896) => Some(3),
                _ => None,
            };
            assert_eq!(l["split"]["parts"].as_u64(), parts, "{l}");
            if parts.is_some() {
                let (ms, gflops) = (l["split"]["gpu_ms"].as_f64().unwrap(), l["split"]["gflops"].as_f64().unwrap());
                assert!((ms * gflops * 1e6 - 2.0 * 128.0 * (k * n) as f64).abs() < 1.0, "{l}");
            }
        }
        // A prefill's attention over the longest prompt (70 tokens) with the model's heads, by
        // every path: the grouped kernel takes the tiny model's 4:2 heads of 16 values.
        let attention = &report["micro"]["prefill_attention"];
        assert_eq!([&attention["tokens"], &attention["heads"], &attention["kv_heads"]], [70, 4, 2]);
        let paths: Vec<(&str, &str)> = attention["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["path"].as_str().unwrap(), p["kernel"].as_str().unwrap()))
            .collect();
        assert_eq!(paths, [("whole", "attention"), ("grouped", "attention_grouped"), ("direct", "attention_direct")]);
        for p in attention["paths"].as_array().unwrap() {
            let fraction = p["gflops"].as_f64().unwrap() / report["micro"]["fma_gflops"].as_f64().unwrap();
            assert!(
                p["gpu_ms"].as_f64().unwrap() > 0.0 && (p["fma_fraction"].as_f64().unwrap() - fraction).abs() < 1e-9
            );
        }
        // lavapipe writes timestamps inside a pass: the profiled call runs in its own passes.
        assert_eq!(report["profile"]["timing"], "inside-passes");
        let phases = report["profile"]["phases"].as_array().unwrap();
        let names: Vec<(&str, u64)> =
            phases.iter().map(|p| (p["phase"].as_str().unwrap(), p["tokens"].as_u64().unwrap())).collect();
        assert_eq!(names, [("prefill", 12), ("decode", 1), ("prefill", 70), ("decode", 1)]);
        for (i, p) in phases.iter().enumerate() {
            // The decode steps follow 12 prompt tokens (one chunk of keys), then 70 (two).
            let long_decode = i == 3;
            let dispatches = p["dispatches"].as_array().unwrap();
            // Embedding, 2 layers x 10, gather, norm, head, top-k (two passes: chunks, then
            // their merge). RoPE has no dispatch of its own; Q, K and V are one matrix (the tiny
            // model's are bf16 alike). On GPUs gate and up are one layer that writes
            // silu(gate) * up (-2), up to 32 token rows both norms fold into the matvecs after
            // them (-2), and decode attention appends the new keys and values itself (-1: no
            // kv_write); past 64 keys it is split and merged (+1).
            // lavapipe's direct family reads x through uniform windows of 16 token rows, a
            // dispatch each, up to 8 rows left at the end in windows of 4: a 70-token prefill
            // runs each of a layer's 5 linear layers in 4 + 2, a 12-token one in 1.
            let tokens = p["tokens"].as_u64().unwrap() as usize;
            let tail = match tokens % 16 {
                0 => 0,
                left @ 1..=8 => left.div_ceil(4),
                _ => 1,
            };
            let windows = if kernels == "direct" { tokens / 16 + tail } else { 1 };
            let per_layer = match (kernels, p["phase"].as_str().unwrap()) {
                ("tiled", "decode") if long_decode => 6,
                ("tiled", "decode") => 5,
                ("tiled", _) if p["tokens"] == 12 => 6,
                ("tiled", _) => 8,
                _ => 5 + 5 * windows,
            };
            assert_eq!(dispatches.len(), 1 + 2 * per_layer + 5, "{}", p["phase"]);
            assert_eq!(p["dispatch_count"].as_u64().unwrap() as usize, dispatches.len());
            let mut sum = 0.0;
            for d in dispatches {
                assert!(!d["kernel"].as_str().unwrap().is_empty());
                // Workgroups along x, y, z: none empty; a 70-token matmul's rows of 32 x 32
                // tiles (the tiny model's few tiles): 3.
                let grid: Vec<u64> = d["grid"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
                assert!(grid.len() == 3 && grid.iter().all(|&g| g > 0), "{d}");
                if d["kernel"] == "matmul" {
                    assert_eq!(grid[1], 3, "{d}");
                }
                assert!(d["layer"].is_null() || d["layer"].as_u64().unwrap() < 2);
                assert!(d["bytes"].as_u64().is_some() && d["flops"].as_u64().is_some());
                sum += d["gpu_ms"].as_f64().unwrap();
            }
            // 5 linear layers a layer (4 on GPUs: gate and up paired) and the LM head: the tiled
            // family runs up to 32 token rows (decode, the head, the 12-token prefill) as matvec,
            // more as matmul.
            let names: Vec<&str> = dispatches.iter().map(|d| d["kernel"].as_str().unwrap()).collect();
            let count = |kernel: &str| names.iter().filter(|&&n| n == kernel).count();
            match (kernels, p["phase"].as_str().unwrap()) {
                ("direct", _) => assert_eq!(count("linear_direct"), 2 * 5 * windows + 1, "{names:?}"),
                (_, "prefill") if p["tokens"] == 70 => {
                    assert_eq!((count("matmul"), count("matvec")), (8, 1), "{names:?}")
                }
                _ => assert_eq!(count("matvec"), 9, "{names:?}"),
            }
            assert_eq!(count("silu_mul"), if kernels == "direct" { 2 } else { 0 }, "{names:?}");
            let decode_on_gpu = kernels == "tiled" && p["phase"] == "decode";
            assert_eq!(count("kv_write"), if decode_on_gpu { 0 } else { 2 }, "{names:?}");
            let split = usize::from(decode_on_gpu && long_decode) * 2;
            assert_eq!((count("attention_split"), count("attention_combine")), (split, split), "{names:?}");
            // A GPU prefill attends by KV group (the tiny model's 4:2 heads of 16 values); a
            // decode step up to 64 keys appends in the whole kernel.
            let prefill_on_gpu = kernels == "tiled" && p["phase"] == "prefill";
            assert_eq!(count("attention_grouped"), if prefill_on_gpu { 2 } else { 0 }, "{names:?}");
            let whole = usize::from(decode_on_gpu && !long_decode) * 2;
            assert_eq!(count("attention"), whole, "{names:?}");
            // The FLOPs the dispatches count are the forward's: per token and layer 2 x (QKV
            // 64 x 128 + o 64 x 64 + gate and up 64 x 256 + down 128 x 64), the head's 2 x 64 x
            // 512 for the one row it scores, and in each layer attention's 4 x 4 heads x 16 per
            // (query, key) pair, the query's own key included.
            let flops_of = |names: &[&str]| -> u64 {
                let of = |d: &&serde_json::Value| names.contains(&d["kernel"].as_str().unwrap());
                dispatches.iter().filter(of).map(|d| d["flops"].as_u64().unwrap()).sum()
            };
            let (tokens, context) = (p["tokens"].as_u64().unwrap(), p["context"].as_u64().unwrap());
            let linear = 2 * 2 * tokens * (64 * 128 + 64 * 64 + 64 * 256 + 128 * 64) + 2 * 64 * 512;
            assert_eq!(flops_of(&["matmul", "matvec", "linear_direct"]), linear, "{}", p["phase"]);
            let pairs = tokens * context + tokens * (tokens + 1) / 2;
            let attention = ["attention", "attention_grouped", "attention_direct", "attention_split"];
            assert_eq!(flops_of(&attention), 2 * 4 * 4 * 16 * pairs, "{}", p["phase"]);
            let kernels_ms = p["kernels_ms"].as_f64().unwrap();
            assert!((kernels_ms - sum).abs() < 1e-6 * sum.max(1.0), "{kernels_ms} vs {sum}");
            assert!(kernels_ms > 0.0 && p["gpu_ms"].as_f64().unwrap() > 0.0);
            // Runs averaged, until they add up to 50 ms (profile::runs_for).
            assert!((1..=64).contains(&p["runs"].as_u64().unwrap()), "{}", p["runs"]);
            let totals: u64 = p["kernels"].as_array().unwrap().iter().map(|k| k["count"].as_u64().unwrap()).sum();
            assert_eq!(totals as usize, dispatches.len());
            // Each kernel's GB/s against both bandwidth probes.
            for k in p["kernels"].as_array().unwrap() {
                let gbps = k["gbps"].as_f64().unwrap();
                assert!((k["copy_fraction"].as_f64().unwrap() - gbps / copy).abs() < 1e-9, "{k}");
                assert!((k["read_fraction"].as_f64().unwrap() - gbps / read).abs() < 1e-9, "{k}");
            }
        }
        // A's decode steps at the first length, encoded ahead (the sweep's) and when asked for.
        let a = &report["sweep"][0]["a"];
        assert_eq!(a["encode_decode_ms"].as_array().unwrap().len(), a["decode_ms"].as_array().unwrap().len());
        let ahead = &report["encode_ahead"];
        assert_eq!(ahead["prompt_tokens"], a["prompt_tokens"]);
        for f in ["decode_ms", "decode_ms_on_demand", "encode_ms", "encode_ms_on_demand"] {
            assert!(ahead[f].as_f64().unwrap() > 0.0, "encode_ahead.{f}: {ahead}");
        }
        let (steps, encoded_ahead) =
            (ahead["decode_steps"].as_u64().unwrap(), ahead["steps_encoded_ahead"].as_u64().unwrap());
        // Every step, the fork's (where the allowed ids change in number) too.
        assert!(encoded_ahead == steps && steps == a["decode_steps"], "{ahead}");
        assert_eq!(ahead["steps_encoded_ahead"], a["steps_encoded_ahead"]);
        // Runs of each kind in turn: --repeats 1.
        assert_eq!(ahead["runs"], 1, "{ahead}");
    }
    let (ok, _, err) = onetoken(&["logits", "--model", &model, "--ids", "1", "--kernels", "fast"]);
    assert!(!ok && err.contains("use tiled or direct"), "{err}");
}

#[test]
fn a_headless_run_keeps_stderr_free_of_window_system_noise() {
    let out = Command::new(env!("CARGO_BIN_EXE_onetoken"))
        .args(["logits", "--model", &fixture("tiny-qwen2").display().to_string(), "--ids", "1,2,3"])
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("NODEVICE_SELECT")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.is_empty(), "stderr: {stderr}");
}

#[test]
fn quant_quantizes_on_load_on_the_gpu_and_in_the_cpu_reference() {
    let model = fixture("tiny-qwen2").display().to_string();
    let args = ["logits", "--model", &model, "--ids", "1,5,9,200", "--top-k", "5"];
    let top = |extra: &[&str]| {
        let (ok, out, err) = onetoken(&[&args[..], extra].concat());
        assert!(ok, "{err}");
        lines(&out)[0]["top"].clone()
    };
    for quant in ["q8_0", "q4_0"] {
        let (gpu, cpu) = (top(&["--quant", quant]), top(&["--quant", quant, "--cpu"]));
        let ids = |v: &serde_json::Value| v.as_array().unwrap().iter().map(|p| p[0].clone()).collect::<Vec<_>>();
        assert_eq!(ids(&gpu), ids(&cpu), "{quant}: GPU and CPU reference agree");
        let logit = |v: &serde_json::Value| v[0][1].as_f64().unwrap();
        assert!((logit(&gpu) - logit(&cpu)).abs() < 1e-3);
        assert_ne!(logit(&gpu), logit(&top(&[])), "{quant} changes the weights");
    }
    let (ok, _, err) = onetoken(&[&args[..], &["--quant", "q3"]].concat());
    assert!(!ok && err.contains("use q8_0, q5_0 or q4_0"), "{err}");
    let bench = ["bench", "--model", &model, "--json", "--lengths", "8,16", "--batch-sizes", "1", "--repeats", "1"];
    let report = |extra: &[&str]| -> serde_json::Value {
        let (ok, out, err) = onetoken(&[&bench[..], extra].concat());
        assert!(ok, "{err}");
        serde_json::from_str(&out).unwrap()
    };
    let (plain, q4) = (report(&[]), report(&["--quant", "q4_0"]));
    // Both lengths are below the shortest prompt the bench builds: one request, measured once.
    assert_eq!(plain["sweep"].as_array().unwrap().len(), 1, "{}", plain["sweep"]);
    assert_eq!(plain["sweep_merged"], serde_json::json!([16]));
    assert!(plain["sweep"][0]["b"]["prompt_tokens"].as_u64().unwrap() > 16);
    // One prompt length fits no line through the prefills (two do: the bench test's).
    assert!(plain["cost_model"].is_null(), "{}", plain["cost_model"]);
    assert!(plain["sweep"][0]["predicted_speedup"].is_null(), "{}", plain["sweep"][0]);
    assert_eq!((plain["model"]["quant"].as_str(), q4["model"]["quant"].as_str()), (Some("bf16"), Some("q4_0")));
    // The real bytes: per layer 448 rows of 64 values (q, k, v, o, gate, up) and 64 of 128
    // (down), twice, and the tied head's 512 rows of 64. A q4_0 row of 64 is 32 bytes of
    // nibbles and 16 of scales (2 f16, padded); of 128, 64 + 16.
    assert_eq!(plain["model"]["decode_bytes"], 2 * (448 * 128 + 64 * 256) + 512 * 128);
    assert_eq!(q4["model"]["decode_bytes"], 2 * (448 * 48 + 64 * 80) + 512 * 48);
}

#[test]
fn a_gguf_file_is_a_whole_model_for_logits_judge_and_bench() {
    let gguf = fixture("tiny-qwen2/model.gguf").display().to_string();
    let logits = ["logits", "--model", &gguf, "--ids", "1,5,9,200", "--top-k", "5"];
    let top = |extra: &[&str]| {
        let (ok, out, err) = onetoken(&[&logits[..], extra].concat());
        assert!(ok, "{err}");
        lines(&out)[0]["top"].clone()
    };
    let (gpu, cpu) = (top(&[]), top(&["--cpu"]));
    for (g, c) in gpu.as_array().unwrap().iter().zip(cpu.as_array().unwrap()) {
        assert_eq!(g[0], c[0], "GPU and CPU reference pick the same ids");
        assert!((g[1].as_f64().unwrap() - c[1].as_f64().unwrap()).abs() < 1e-3);
    }
    let request = scratch("gguf-request.json", r#"{"user": "Which color is the sky?", "choices": ["blue", "red"]}"#);
    let (ok, out, err) = onetoken(&["judge", "--model", &gguf, "--request", &request, "--strategy", "b"]);
    assert!(ok, "{err}");
    assert!(lines(&out)[0]["choice_index"].is_u64(), "{out}");
    let bench = ["bench", "--model", &gguf, "--json", "--lengths", "8", "--batch-sizes", "1", "--repeats", "1"];
    let (ok, out, err) = onetoken(&bench);
    assert!(ok, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["model"]["quant"], "gguf:q8_0");
    // The real bytes of the file's mix as the GPU keeps it (rows of 64 values unless said):
    // Q8_0 rows are 64 + 16 bytes (quants, scales padded to 16), Q5_0 32 + 16 + 16 (nibbles,
    // fifth bits, scales), Q4_0 32 + 16, F16 128, F32 256.
    let (q8, q5, q4) = (80, 64, 48);
    let layer_0 = 64 * q8 + 32 * q4 + 32 * q5 + 64 * 128 + 128 * q5 + 128 * q4 + 64 * 256; // down: BF16 rows of 128
    let layer_1 = 64 * q4 + 32 * q8 + 32 * 256 + 64 * q5 + 128 * q8 + 128 * 128 + 64 * (64 + 16); // down: Q4_0 rows of 128
    assert_eq!(report["model"]["decode_bytes"], layer_0 + layer_1 + 512 * q8);
    let (ok, _, err) = onetoken(&[&logits[..], &["--quant", "q4_0"]].concat());
    assert!(!ok && err.contains("--quant q4_0 does not match this GGUF file (q8_0)"), "{err}");
}

/// Resident memory of a running process, in kB (Linux).
#[cfg(target_os = "linux")]
fn resident_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(target_os = "linux")]
#[test]
fn judge_requests_streams_5000_requests_in_batches_with_flat_memory() {
    use std::io::BufRead;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let colors = ["blue", "red", "yellow", "green"];
    let jsonl: String = (0..5000)
        .map(|i| {
            let choices: Vec<&str> = (0..3).map(|c| colors[(i + c) % 4]).collect();
            format!("{}\n", serde_json::json!({"user": format!("Question {i}: which color is thing {}?", i * 7 % 97), "choices": choices}))
        })
        .collect();
    let path = scratch("requests-5000.jsonl", &jsonl);
    let model = fixture("tiny-qwen2").display().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_onetoken"))
        .args(["judge", "--model", &model, "--requests", &path])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (pid, stdout) = (child.id(), child.stdout.take().unwrap());
    let read = std::sync::Arc::new(AtomicUsize::new(0));
    let reader = {
        let read = read.clone();
        std::thread::spawn(move || {
            let mut out = Vec::new();
            for line in std::io::BufReader::new(stdout).lines() {
                out.push(serde_json::from_str::<serde_json::Value>(&line.unwrap()).unwrap());
                read.fetch_add(1, Ordering::Relaxed);
            }
            out
        })
    };
    // (lines printed so far, resident kB), sampled while it runs.
    let mut samples = Vec::new();
    while !reader.is_finished() {
        if let Some(kb) = resident_kb(pid) {
            samples.push((read.load(Ordering::Relaxed), kb));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = reader.join().unwrap();
    assert!(child.wait().unwrap().success());
    // 79 batches of at most 64, each its record then its judgments, in order.
    let records: Vec<&serde_json::Value> = out.iter().filter(|r| r.get("judgments").is_some()).collect();
    assert_eq!((records.len(), out.len() - records.len()), (79, 5000));
    assert_eq!(records.iter().map(|r| r["judgments"].as_u64().unwrap()).sum::<u64>(), 5000);
    assert_eq!(out[0]["judgments"], 64);
    assert!(out[1..65].iter().all(|r| r.get("choice").is_some()));
    // Streamed: output came while it ran, not all at the end.
    assert!(
        samples.iter().any(|&(lines, _)| lines > 0 && lines < out.len() / 2),
        "no output before the end: {samples:?}"
    );
    // Flat: the peak is within 16 MB of the resident size once a tenth was answered.
    let early = samples.iter().find(|&&(lines, _)| lines >= out.len() / 10).map(|&(_, kb)| kb).unwrap();
    let peak = samples.iter().map(|&(_, kb)| kb).max().unwrap();
    println!("resident memory: {early} kB after a tenth, peak {peak} kB, {} samples", samples.len());
    assert!(peak <= early + 16 * 1024, "memory grew from {early} kB to {peak} kB");
}
