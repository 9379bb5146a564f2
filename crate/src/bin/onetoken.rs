//! The native command-line tool: the same engine as the page, for tests, benchmarks and scripts.
//! Every command prints one JSON object per line on stdout; errors go to stderr with exit code 1.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use onetoken::reference::{CpuKvCache, CpuModel, Logits};
use onetoken::tokenizer::Tokenizer;
use onetoken::{Error, Result};

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
        /// Model folder: config.json, model.safetensors (or shards), tokenizer files.
        #[arg(long)]
        model: PathBuf,
        /// Comma-separated token ids.
        #[arg(long, value_delimiter = ',', conflicts_with = "text")]
        ids: Option<Vec<u32>>,
        /// Text, tokenized with the model's tokenizer (no chat template).
        #[arg(long)]
        text: Option<String>,
        #[arg(long, default_value_t = 20)]
        top_k: usize,
        /// Run the CPU reference forward.
        #[arg(long)]
        cpu: bool,
    },
}

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
        Command::Logits {
            model,
            ids,
            text,
            top_k,
            cpu,
        } => {
            let ids = match (ids, text) {
                (Some(ids), _) => ids,
                (None, Some(text)) => Tokenizer::load(&model)?.encode(&text)?,
                (None, None) => return Err(Error::Input("give --ids or --text".into())),
            };
            if !cpu {
                return Err(Error::Input("only --cpu is available in this build".into()));
            }
            let m = CpuModel::load(&model)?;
            let out = m.forward(&ids, &mut CpuKvCache::new(&m.config), Logits::Last)?;
            let norm = out.last_hidden.iter().map(|v| v * v).sum::<f32>().sqrt();
            let json = serde_json::json!({
                "top": top_k_pairs(&out.logits, top_k),
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
    order.sort_by(|&a, &b| {
        logits[b as usize]
            .total_cmp(&logits[a as usize])
            .then(a.cmp(&b))
    });
    order
        .into_iter()
        .take(k)
        .map(|i| (i, logits[i as usize]))
        .collect()
}
