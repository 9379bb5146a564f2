//! The native command-line tool: the same engine as the page, for tests, benchmarks and scripts.
//! Every command prints one JSON object per line on stdout; errors go to stderr with exit code 1.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use std::rc::Rc;

use onetoken::gpu::{Gpu, GpuOptions, GpuWeights, load_dir};
use onetoken::model::{Head, Model, ModelOptions, Readout, Rows, Sequence};
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
        source: ModelSource,
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
}

/// Where the model comes from: a folder, or synthetic weights of a named shape.
#[derive(clap::Args)]
#[group(required = true, multiple = false)]
struct ModelSource {
    /// Model folder: config.json, model.safetensors (or shards), tokenizer.json, tokenizer_config.json.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Synthetic weights with a real model's shapes, made on the GPU (meaningless answers):
    /// qwen2.5-0.5b or qwen2.5-1.5b. Uses the bundled Qwen2.5 tokenizer.
    #[arg(long)]
    synthetic: Option<String>,
}

impl ModelSource {
    fn config(&self) -> Result<Qwen2Config> {
        match (&self.model, &self.synthetic) {
            (Some(dir), _) => {
                let path = dir.join("config.json");
                let bytes =
                    std::fs::read(&path).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
                Qwen2Config::from_json(&bytes)
            }
            (None, Some(name)) => Qwen2Config::named(name),
            (None, None) => unreachable!("clap requires one"),
        }
    }

    fn tokenizer(&self) -> Result<Tokenizer> {
        match &self.model {
            Some(dir) => Tokenizer::load(dir),
            None => Tokenizer::from_bytes(QWEN_TOKENIZER, Some(QWEN_TOKENIZER_CONFIG)),
        }
    }

    fn gpu_weights(&self, gpu: &Gpu) -> Result<GpuWeights> {
        match &self.model {
            Some(dir) => load_dir(gpu, dir),
            None => GpuWeights::synthetic(gpu, &self.config()?),
        }
    }

    fn cpu_model(&self) -> Result<CpuModel> {
        match &self.model {
            Some(dir) => CpuModel::load(dir),
            None => {
                let config = self.config()?;
                CpuModel::from_tensors(config.clone(), onetoken::synthetic::cpu_tensors(&config))
            }
        }
    }
}

/// The Qwen2.5 tokenizer, bundled so synthetic models need no files.
const QWEN_TOKENIZER: &[u8] = include_bytes!("../../tests/fixtures/qwen2.5-0.5b/tokenizer.json");
const QWEN_TOKENIZER_CONFIG: &[u8] = include_bytes!("../../tests/fixtures/qwen2.5-0.5b/tokenizer_config.json");

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Logits { source, ids, text, top_k, cpu } => {
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
                let gpu = Rc::new(Gpu::new_blocking(GpuOptions::default())?);
                let weights = source.gpu_weights(&gpu)?;
                let n = ids.len();
                let options =
                    ModelOptions { max_tokens: n, kv_slots: 1, kv_capacity: n, max_rows: 1, max_choice_ids: 1 };
                let mut model = Model::new(gpu, weights, options)?;
                let readout = Readout { rows: Rows::Last, head: Head::Logits, hidden: true };
                let mut out = pollster::block_on(model.prefill(&[Sequence { slot: 0, tokens: &ids }], readout))?;
                let row = out.rows.remove(0);
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
    }
    Ok(())
}

/// The `k` largest logits as `[id, logit]` pairs, largest first.
fn top_k_pairs(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut order: Vec<u32> = (0..logits.len() as u32).collect();
    order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]).then(a.cmp(&b)));
    order.into_iter().take(k).map(|i| (i, logits[i as usize])).collect()
}
