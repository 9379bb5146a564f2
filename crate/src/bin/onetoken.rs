//! The native command-line tool: the same engine as the page, for tests, benchmarks and scripts.
//! Every command prints one JSON object per line on stdout; errors go to stderr with exit code 1
//! (2 for a command line that does not parse).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use std::rc::Rc;

use onetoken::bench::{BenchOptions, BenchReport};
use onetoken::gpu::{Gpu, GpuOptions, GpuWeights, KernelFamily, Tuning, load_dir, load_gguf};
use onetoken::judge::{Engine, JudgeOptions, JudgeRequest, PrefixSharing, Strategy};
use onetoken::quant::Quant;
use onetoken::reference::{CpuKvCache, CpuModel, Logits};
use onetoken::tokenizer::Tokenizer;
use onetoken::{Error, Qwen2Config, Result};

#[derive(Parser)]
#[command(
    name = "onetoken",
    version,
    about = "Qwen2.5 on WebGPU: measure prefill vs decode, answer judgments in one token"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Logits of the last position of a prompt: top-k ids with their logits, as JSON.
    Logits {
        #[command(flatten)]
        source: ModelArgs,
        #[command(flatten)]
        device: DeviceArgs,
        /// Comma-separated token ids.
        #[arg(long, value_delimiter = ',', conflicts_with = "text")]
        ids: Option<Vec<u32>>,
        /// Text, tokenized with the model's tokenizer (no chat template).
        #[arg(long)]
        text: Option<String>,
        #[arg(long, default_value_t = 20)]
        top_k: usize,
        /// Run the CPU reference forward instead of the GPU.
        #[arg(long)]
        cpu: bool,
    },
    /// Answer a judgment with strategies A, B (and C with --requests): one JSON line each.
    Judge(JudgeArgs),
    /// Measure prefill vs decode, A vs B, batches, and the device's roofline.
    Bench(BenchArgs),
}

#[derive(clap::Args)]
struct JudgeArgs {
    #[command(flatten)]
    source: ModelArgs,
    #[command(flatten)]
    device: DeviceArgs,
    /// One request: {"system": "...", "user": "...", "choices": [...], "prefix": "..."}.
    #[arg(long, conflicts_with = "requests", required_unless_present = "requests")]
    request: Option<PathBuf>,
    /// Many requests, one JSON object per line, judged in batches (strategy C). Read and
    /// answered as a stream: each batch prints its record, then its judgments, as it finishes.
    #[arg(long)]
    requests: Option<PathBuf>,
    /// With --requests: the most requests judged as one batch.
    #[arg(long, default_value_t = 64, conflicts_with = "request", value_parser = clap::value_parser!(u32).range(1..=onetoken::judge::MAX_BATCH as i64))]
    batch_size: u32,
    /// all, a (token by token, schema), a-free, b (prefill + one token, choice head), b-full-head.
    /// (--requests judges by strategy C.)
    #[arg(long, default_value = "all", conflicts_with = "requests")]
    strategy: String,
    /// Also report the unconstrained top-N tokens where the answer is read (not with --requests).
    #[arg(long, default_value_t = 0, conflicts_with = "requests")]
    top_k: usize,
    /// With --requests: prefill the prompts' common prefix (the document) once.
    #[arg(long, conflicts_with = "request")]
    shared_prefix: bool,
    /// Also give B's records each choice's full-sequence log-probability (a second pass; not
    /// with --requests).
    #[arg(long, conflicts_with = "requests")]
    sequence_logprobs: bool,
}

#[derive(clap::Args)]
struct BenchArgs {
    #[command(flatten)]
    source: ModelArgs,
    #[command(flatten)]
    device: DeviceArgs,
    /// Print one JSON document (what the page charts) instead of a table.
    #[arg(long)]
    json: bool,
    /// Prompt lengths of the sweep.
    #[arg(long, value_delimiter = ',', default_values_t = BenchOptions::default().lengths)]
    lengths: Vec<usize>,
    /// Batch sizes of strategy C.
    #[arg(long, value_delimiter = ',', default_values_t = BenchOptions::default().batch_sizes)]
    batch_sizes: Vec<usize>,
    /// Runs per point (the median is kept).
    #[arg(long, default_value_t = BenchOptions::default().repeats)]
    repeats: usize,
    /// Also time every kernel of one prefill and one decode step per length (needs GPU
    /// timestamps): the `profile` of the JSON, a table per phase otherwise.
    #[arg(long)]
    profile: bool,
}

/// How the GPU is used.
#[derive(clap::Args)]
struct DeviceArgs {
    /// Linear-layer kernels: tiled (GPUs) or direct (barrier-free, for CPU implementations such
    /// as lavapipe). Default: by device type.
    #[arg(long, value_name = "tiled|direct")]
    kernels: Option<KernelFamily>,
    /// Where the tiled kernels change path, over the defaults (the same results, another speed):
    /// NAME=VALUE pairs, comma-separated (the help lists the settings and their defaults).
    #[arg(long, value_name = "NAME=VALUE,...", help = tune_help())]
    tune: Option<Tuning>,
}

/// `--tune`'s help: the settings' defaults as [`Tuning::default`] has them.
fn tune_help() -> String {
    format!(
        "Where the tiled kernels change path, over the defaults (the same results, another speed): NAME=VALUE \
         pairs, comma-separated. Defaults: {}",
        Tuning::defaults_text()
    )
}

impl DeviceArgs {
    fn gpu(&self) -> Result<Rc<Gpu>> {
        let options = GpuOptions { kernels: self.kernels, tuning: self.tune.unwrap_or_default(), ..Default::default() };
        Ok(Rc::new(Gpu::new_blocking(options)?))
    }
}

/// Where the model comes from: a folder, or synthetic weights of a named shape.
#[derive(clap::Args)]
#[group(required = true, multiple = false)]
struct ModelSource {
    /// Model folder (config.json, model.safetensors or shards, tokenizer.json,
    /// tokenizer_config.json), or a GGUF file (a whole model: weights, tokenizer, template).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Synthetic weights with a real model's shapes, made on the GPU (meaningless answers):
    /// qwen2.5-0.5b or qwen2.5-1.5b. Uses the bundled Qwen2.5 tokenizer.
    #[arg(long)]
    synthetic: Option<String>,
}

/// The model, and how its matrices are stored.
#[derive(clap::Args)]
struct ModelArgs {
    #[command(flatten)]
    source: ModelSource,
    /// Quantize the weight matrices on load: q8_0, q5_0 or q4_0 (blocks of 32 values with one
    /// scale, llama.cpp's Q8_0, Q5_0 and Q4_0). Default: as stored (synthetic weights: bf16). A GGUF file's
    /// weights are used as stored: there it must name the file's own type, or be left out.
    #[arg(long, value_name = "q8_0|q5_0|q4_0")]
    quant: Option<Quant>,
}

/// Where `--model` points.
enum ModelPath<'a> {
    Folder(&'a Path),
    Gguf(&'a Path),
}

impl ModelArgs {
    fn path(&self) -> Option<ModelPath<'_>> {
        let path = self.source.model.as_deref()?;
        let gguf = path.is_file() || path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
        Some(if gguf { ModelPath::Gguf(path) } else { ModelPath::Folder(path) })
    }

    fn tokenizer(&self) -> Result<Tokenizer> {
        match self.path() {
            Some(ModelPath::Folder(dir)) => Tokenizer::load(dir),
            Some(ModelPath::Gguf(file)) => onetoken::gguf::tokenizer(&onetoken::gguf::read_header(file)?),
            None => Tokenizer::from_bytes(QWEN_TOKENIZER, Some(QWEN_TOKENIZER_CONFIG)),
        }
    }

    /// The weights on the GPU, and the tokenizer.
    fn load(&self, gpu: &Rc<Gpu>) -> Result<(GpuWeights, Tokenizer)> {
        match (self.path(), &self.source.synthetic) {
            (Some(ModelPath::Folder(dir)), _) => Ok((load_dir(gpu, dir, self.quant)?, Tokenizer::load(dir)?)),
            (Some(ModelPath::Gguf(file)), _) => load_gguf(gpu, file, self.quant),
            (None, Some(name)) => {
                let weights = onetoken::ops::synthetic_weights(gpu, &Qwen2Config::named(name)?, self.quant)?;
                Ok((weights, self.tokenizer()?))
            }
            (None, None) => unreachable!("clap requires one"),
        }
    }

    /// The CPU reference of the same weights (quantized and read back with `--quant`; a GGUF
    /// file's as the GPU keeps them).
    fn cpu_model(&self) -> Result<CpuModel> {
        let model = match (self.path(), &self.source.synthetic) {
            (Some(ModelPath::Folder(dir)), _) => CpuModel::load(dir)?,
            (Some(ModelPath::Gguf(file)), _) => {
                onetoken::gguf::read_header(file)?.check_quant(self.quant)?;
                return CpuModel::load_gguf(file);
            }
            (None, Some(name)) => {
                let config = Qwen2Config::named(name)?;
                CpuModel::from_tensors(config.clone(), onetoken::synthetic::cpu_tensors(&config))?
            }
            (None, None) => unreachable!("clap requires one"),
        };
        Ok(match self.quant {
            Some(q) => model.quantized(q)?,
            None => model,
        })
    }
}

/// The Qwen2.5 tokenizer, bundled so synthetic models need no files.
const QWEN_TOKENIZER: &[u8] = include_bytes!("../../tests/fixtures/qwen2.5-0.5b/tokenizer.json");
const QWEN_TOKENIZER_CONFIG: &[u8] = include_bytes!("../../tests/fixtures/qwen2.5-0.5b/tokenizer_config.json");

fn main() -> ExitCode {
    keep_off_the_display_stack();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Mesa's implicit Vulkan layer that picks the display's GPU connects to the window system when
/// the instance is made, and prints "XDG_RUNTIME_DIR is invalid" on a headless machine. A CLI has
/// no display (the adapter is chosen by power preference), so the layer is turned off unless the
/// user set it up themselves.
fn keep_off_the_display_stack() {
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        // SAFETY: called first thing in main, before any other thread exists.
        unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Logits { source, device, ids, text, top_k, cpu } => {
            let ids = match (ids, text) {
                (Some(ids), _) => ids,
                (None, Some(text)) => source.tokenizer()?.encode(&text)?,
                (None, None) => return Err(Error::Input("give --ids or --text".into())),
            };
            let (logits, hidden) = if cpu {
                let m = source.cpu_model()?;
                let out = m.forward(&ids, &mut CpuKvCache::new(&m.config), Logits::Last)?;
                (out.logits, out.last_hidden)
            } else {
                let row = pollster::block_on(engine(&source, &device)?.logits(&ids))?;
                (row.logits, row.hidden)
            };
            let norm = hidden.iter().map(|v| v * v).sum::<f32>().sqrt();
            let json = serde_json::json!({
                "top": top_k_pairs(&logits, top_k),
                "hidden_norm": norm,
                "tokens": ids.len(),
            });
            println!("{json}");
        }
        Command::Judge(args) => judge(args)?,
        Command::Bench(args) => bench(args)?,
    }
    Ok(())
}

fn read_json<T: serde::de::DeserializeOwned>(path: &std::path::Path, text: &str, line: Option<usize>) -> Result<T> {
    serde_json::from_str(text).map_err(|e| {
        let at = line.map(|l| format!(" line {l}")).unwrap_or_default();
        Error::Input(format!("{}{at}: not a judgment request: {e}", path.display()))
    })
}

fn read_text(path: &std::path::Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.display().to_string(), source })
}

/// `judge --requests`: the file read line by line and judged `--batch-size` requests at a time,
/// each batch printed as it finishes, so memory stays flat however many requests there are.
fn judge_stream(args: &JudgeArgs, path: &Path) -> Result<()> {
    use std::io::BufRead;
    let io = |source| Error::Io { path: path.display().to_string(), source };
    let lines = std::io::BufReader::new(std::fs::File::open(path).map_err(io)?).lines();
    let mut engine = engine(&args.source, &args.device)?;
    let sharing = PrefixSharing::from_flag(args.shared_prefix);
    let mut judge = |batch: &[JudgeRequest]| -> Result<()> {
        let (record, judgments) = pollster::block_on(engine.judge_batch(batch, sharing))?;
        print(&record);
        judgments.iter().for_each(print);
        Ok(())
    };
    let (mut batch, mut seen) = (Vec::with_capacity(args.batch_size as usize), 0);
    for (i, line) in lines.enumerate() {
        let line = line.map_err(io)?;
        if line.trim().is_empty() {
            continue;
        }
        batch.push(read_json(path, &line, Some(i + 1))?);
        seen += 1;
        if batch.len() == args.batch_size as usize {
            judge(&batch)?;
            batch.clear();
        }
    }
    if seen == 0 {
        return Err(Error::Input(format!("{}: no requests (one JSON object per line)", path.display())));
    }
    if !batch.is_empty() {
        judge(&batch)?;
    }
    Ok(())
}

/// The engine on this device and model (it sizes itself to each request).
fn engine(source: &ModelArgs, device: &DeviceArgs) -> Result<Engine> {
    let gpu = device.gpu()?;
    let (weights, tokenizer) = source.load(&gpu)?;
    Engine::load(gpu, weights, tokenizer)
}

/// Prints one JSON line.
fn print<T: serde::Serialize>(value: &T) {
    println!("{}", serde_json::to_string(value).expect("plain data serialises"));
}

fn judge(args: JudgeArgs) -> Result<()> {
    if let Some(path) = &args.requests {
        return judge_stream(&args, path);
    }
    let path = args.request.as_ref().expect("clap requires --request or --requests");
    let req: JudgeRequest = read_json(path, &read_text(path)?, None)?;
    let strategies = Strategy::parse_list(&args.strategy)?;
    let mut engine = engine(&args.source, &args.device)?;
    let options = JudgeOptions { top_k: args.top_k, sequence_logprobs: args.sequence_logprobs };
    for record in pollster::block_on(engine.judge_all(&req, &strategies, options))? {
        print(&record);
    }
    Ok(())
}

fn bench(args: BenchArgs) -> Result<()> {
    let options = BenchOptions {
        lengths: args.lengths,
        batch_sizes: args.batch_sizes,
        repeats: args.repeats,
        profile: args.profile,
        ..Default::default()
    };
    let mut engine = engine(&args.source, &args.device)?;
    eprintln!("device: {}", engine.model().gpu().describe());
    let report =
        pollster::block_on(onetoken::bench::run(&mut engine, &options, &mut |line| eprintln!("bench: {line}")))?;
    if args.json {
        println!("{}", serde_json::to_string(&report).expect("serialisable"));
        return Ok(());
    }
    print_report(&report);
    Ok(())
}

fn print_report(r: &BenchReport) {
    println!("device: {} ({}), timestamps: {}", r.device.name, r.device.backend, r.device.timestamps);
    println!(
        "model: {} parameters, hidden {}, {} layers, {} weights{}; one decode step reads {:.1} MB of them",
        r.model.parameters,
        r.model.hidden_size,
        r.model.layers,
        r.model.quant,
        if r.model.synthetic { " (synthetic weights: answers meaningless, timings real)" } else { "" },
        r.model.decode_bytes as f64 / 1e6
    );
    let m = &r.micro;
    println!(
        "micro: copy {:.1} GB/s, read {:.1} GB/s ({}, as the linear kernels read their weights), FMA {:.1} GFLOP/s",
        m.copy_gbps, m.read_gbps, m.read_from, m.fma_gflops
    );
    println!("micro: a dispatch waiting for the one before it: {:.2} us", r.micro.dispatch_us);
    for l in &r.micro.linear {
        let shapes = match (l.lanes, &l.other_shape) {
            (Some(lanes), Some(o)) => format!(
                " ({lanes} lanes a row; {} lanes: {:.3} ms, {:.0}% of copy, {:.0}% of read, {:.2}x the time)",
                o.lanes,
                o.gpu_ms,
                100.0 * o.copy_fraction,
                100.0 * o.read_fraction,
                o.gpu_ms / l.gpu_ms
            ),
            _ => String::new(),
        };
        println!(
            "micro: {} of 1 x {} by bf16 [{}, {}]: {:.3} ms, {:.1} GB/s = {:.0}% of copy, {:.0}% of read{shapes}",
            l.kernel,
            l.k,
            l.n,
            l.k,
            l.gpu_ms,
            l.gbps,
            100.0 * l.copy_fraction,
            100.0 * l.read_fraction
        );
    }
    for l in &r.micro.prefill_linear {
        let split = l.split.as_ref().map_or(String::new(), |s| {
            format!(
                "; split over K in {}: {:.3} ms, {:.0}% of FMA ({:.2}x)",
                s.parts,
                s.gpu_ms,
                100.0 * s.fma_fraction,
                l.gpu_ms / s.gpu_ms
            )
        });
        println!(
            "micro: {} of {} x {} by bf16 [{}, {}]: {:.3} ms, {:.1} GFLOP/s = {:.0}% of FMA{split}",
            l.kernel,
            l.m,
            l.k,
            l.n,
            l.k,
            l.gpu_ms,
            l.gflops,
            100.0 * l.fma_fraction
        );
    }
    let a = &r.micro.prefill_attention;
    let paths: Vec<String> = a
        .paths
        .iter()
        .map(|p| format!("{} ({}) {:.3} ms = {:.1}% of FMA", p.path, p.kernel, p.gpu_ms, 100.0 * p.fma_fraction))
        .collect();
    println!(
        "micro: prefill attention over {} tokens, {}:{} heads of {}: {}",
        a.tokens,
        a.heads,
        a.kv_heads,
        a.head_dim,
        paths.join(", ")
    );
    println!(
        "\n{:>6} {:>10} {:>10} {:>6} {:>10} {:>10} {:>10} {:>7} {:>7}",
        "P", "A ms", "A pred", "steps", "B ms", "B full ms", "B pred", "A/B", "A/Bfull"
    );
    // A prediction, or "-" without a cost model.
    let predicted = |ms: Option<f64>| ms.map_or("-".into(), |ms| format!("{ms:.1}"));
    for s in &r.sweep {
        println!(
            "{:>6} {:>10.1} {:>10} {:>6} {:>10.1} {:>10.1} {:>10} {:>7.2} {:>7.2}",
            s.b.prompt_tokens,
            s.a.total_ms,
            predicted(s.predicted_a_ms),
            s.a.decode_steps,
            s.b.total_ms,
            s.b_full_head.total_ms,
            predicted(s.predicted_b_ms),
            s.speedup,
            s.speedup_full_head
        );
    }
    if let (false, Some(shortest)) = (r.sweep_merged.is_empty(), r.sweep.iter().map(|s| s.b.prompt_tokens).min()) {
        let merged: Vec<String> = r.sweep_merged.iter().map(usize::to_string).collect();
        println!(
            "lengths {} are below the shortest prompt the bench builds ({shortest} tokens): measured once, in its row",
            merged.join(", ")
        );
    }
    println!("\ndecode: {:.2} ms/step (wall, median)", r.decode_ms_per_step);
    if let Some(e) = &r.encode_ahead {
        println!(
            "decode after {} tokens: {:.2} ms/step with the commands encoded during the step before ({} of {} steps; {:.3} ms before the GPU starts), {:.2} ms/step encoded when asked for ({:.3} ms); medians of {} runs of each, in turn",
            e.prompt_tokens,
            e.decode_ms,
            e.steps_encoded_ahead,
            e.decode_steps,
            e.encode_ms,
            e.decode_ms_on_demand,
            e.encode_ms_on_demand,
            e.runs
        );
    }
    match &r.cost_model {
        Some(m) => println!(
            "cost model: T = {:.2} ms + {:.4} ms x P + N x {:.2} ms",
            m.prefill.fixed_ms, m.prefill.per_token_ms, m.decode_ms
        ),
        None => println!("cost model: not fitted (it takes a sweep of two or more prompt lengths)"),
    }
    let f = &r.roofline;
    println!(
        "roofline, wall time (every overhead): decode {:.1} GB/s = {:.0}% of copy bandwidth, {:.0}% of read \
         (floor {:.2} ms/step); prefill ({} tokens) {:.1} GFLOP/s = {:.0}% of FMA",
        f.decode_gbps,
        100.0 * f.decode_fraction,
        100.0 * f.decode_read_fraction,
        f.decode_floor_ms,
        f.prefill_tokens,
        f.prefill_gflops,
        100.0 * f.prefill_fraction
    );
    if let (Some(d), Some(df), Some(dr), Some(p), Some(pf)) = (
        f.gpu_decode_gbps,
        f.gpu_decode_fraction,
        f.gpu_decode_read_fraction,
        f.gpu_prefill_gflops,
        f.gpu_prefill_fraction,
    ) {
        println!(
            "roofline, GPU time (the kernels): decode {d:.1} GB/s = {:.0}% of copy bandwidth, {:.0}% of read; \
             prefill {p:.1} GFLOP/s = {:.0}% of FMA",
            100.0 * df,
            100.0 * dr,
            100.0 * pf
        );
    }
    println!("\n{:>6} {:>8} {:>10} {:>12} {:>14}", "N", "shared", "tokens", "latency ms", "judgments/s");
    for b in &r.batch {
        println!(
            "{:>6} {:>8} {:>10} {:>12.1} {:>14.2}",
            b.judgments, b.shared_prefix, b.prefill_tokens, b.total_ms, b.judgments_per_s
        );
    }
    for s in &r.batch_skipped {
        let sharing = if s.shared_prefix { "shared prefix" } else { "no shared prefix" };
        println!("skipped: {} judgments ({sharing}): {}", s.judgments, s.reason);
    }
    if let Some(p) = &r.profile {
        print_profile(p, r.micro.dispatch_us);
    }
}

/// `part` as a percentage of `whole`; "-" where there is no whole (a device without timestamps).
fn percent(part: f64, whole: f64) -> String {
    if whole > 0.0 { format!("{:.0}%", 100.0 * part / whole) } else { "-".into() }
}

/// Per phase: its GPU time, the kernels' sum and count (and what that many dispatches cost at
/// `dispatch_us` each, doing nothing), then each kernel's share and roofline.
fn print_profile(p: &onetoken::profile::Profile, dispatch_us: f64) {
    let timing = match p.timing {
        onetoken::gpu::DispatchTiming::InsidePasses => {
            "a timestamp pair around each dispatch, inside the call's passes"
        }
        onetoken::gpu::DispatchTiming::PassPerDispatch => "each dispatch in a timed pass of its own",
    };
    println!("\nprofile: {timing}");
    for phase in &p.phases {
        println!(
            "\n{} of {} tokens after {}: GPU {:.3} ms; kernels one by one {:.3} ms ({} of it) in {} dispatches \
             (their fixed cost alone {:.3} ms), mean of {} runs",
            phase.phase,
            phase.tokens,
            phase.context,
            phase.gpu_ms,
            phase.kernels_ms,
            percent(phase.kernels_ms, phase.gpu_ms),
            phase.dispatch_count,
            phase.dispatch_count as f64 * dispatch_us / 1000.0,
            phase.runs
        );
        println!(
            "{:>18} {:>6} {:>10} {:>9} {:>9} {:>7} {:>7} {:>7}",
            "kernel", "count", "GPU ms", "GB/s", "GFLOP/s", "%copy", "%read", "%FMA"
        );
        for k in &phase.kernels {
            println!(
                "{:>18} {:>6} {:>10.3} {:>9.1} {:>9.1} {:>7.1} {:>7.1} {:>7.1}",
                k.kernel,
                k.count,
                k.gpu_ms,
                k.gbps,
                k.gflops,
                100.0 * k.copy_fraction,
                100.0 * k.read_fraction,
                100.0 * k.fma_fraction
            );
        }
    }
}

/// The `k` largest logits as `[id, logit]` pairs, largest first.
fn top_k_pairs(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut order: Vec<u32> = (0..logits.len() as u32).collect();
    order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]).then(a.cmp(&b)));
    order.into_iter().take(k).map(|i| (i, logits[i as usize])).collect()
}
