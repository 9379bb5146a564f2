//! The Hugging Face tensor names of a Qwen2 checkpoint, written once: the loader's checks, the
//! GPU weights and the CPU reference all take their names from here.

use crate::config::Qwen2Config;

pub const EMBED_TOKENS: &str = "model.embed_tokens.weight";
pub const NORM: &str = "model.norm.weight";
/// Present only when the head is not tied to the embedding.
pub const LM_HEAD: &str = "lm_head.weight";

/// A Linear's tensors: weight `[out, in]`, and a bias `[out]` where it has one.
pub struct LinearNames {
    pub weight: String,
    pub bias: Option<String>,
}

/// The tensors of one decoder layer, under `model.layers.{l}.`.
pub struct LayerNames {
    pub input_layernorm: String,
    pub q_proj: LinearNames,
    pub k_proj: LinearNames,
    pub v_proj: LinearNames,
    pub o_proj: LinearNames,
    pub post_attention_layernorm: String,
    pub gate_proj: LinearNames,
    pub up_proj: LinearNames,
    pub down_proj: LinearNames,
}

impl LayerNames {
    pub fn new(layer: usize) -> Self {
        let path = |part: &str| format!("model.layers.{layer}.{part}");
        let linear = |module: &str, bias: bool| LinearNames {
            weight: path(&format!("{module}.weight")),
            bias: bias.then(|| path(&format!("{module}.bias"))),
        };
        Self {
            input_layernorm: path("input_layernorm.weight"),
            q_proj: linear("self_attn.q_proj", true),
            k_proj: linear("self_attn.k_proj", true),
            v_proj: linear("self_attn.v_proj", true),
            o_proj: linear("self_attn.o_proj", false),
            post_attention_layernorm: path("post_attention_layernorm.weight"),
            gate_proj: linear("mlp.gate_proj", false),
            up_proj: linear("mlp.up_proj", false),
            down_proj: linear("mlp.down_proj", false),
        }
    }
}

/// The HF name of a GGUF tensor name (`blk.3.attn_q.weight` -> `model.layers.3.self_attn.q_proj.weight`),
/// or `None` for a name a Qwen2 model does not use.
pub fn from_gguf_name(name: &str) -> Option<String> {
    let top = match name {
        "token_embd.weight" => Some(EMBED_TOKENS),
        "output_norm.weight" => Some(NORM),
        "output.weight" => Some(LM_HEAD),
        _ => None,
    };
    if let Some(hf) = top {
        return Some(hf.into());
    }
    let rest = name.strip_prefix("blk.")?;
    let (layer, part) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (module, suffix) = part.rsplit_once('.')?;
    let hf = match module {
        "attn_norm" => "input_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "ffn_norm" => "post_attention_layernorm",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        _ => return None,
    };
    matches!(suffix, "weight" | "bias").then(|| format!("model.layers.{layer}.{hf}.{suffix}"))
}

/// The tensors a Qwen2 checkpoint must hold, with `[out, in]` shapes. `lm_head.weight` is
/// listed only when the head is not tied.
pub fn expected_tensors(c: &Qwen2Config) -> Vec<(String, Vec<usize>)> {
    let (h, i, kv, v) = (c.hidden_size, c.intermediate_size, c.kv_dim(), c.vocab_size);
    let mut out = vec![(EMBED_TOKENS.to_string(), vec![v, h])];
    for l in 0..c.num_hidden_layers {
        let n = LayerNames::new(l);
        out.push((n.input_layernorm, vec![h]));
        for (linear, rows, cols) in [(n.q_proj, h, h), (n.k_proj, kv, h), (n.v_proj, kv, h), (n.o_proj, h, h)] {
            push_linear(&mut out, linear, rows, cols);
        }
        out.push((n.post_attention_layernorm, vec![h]));
        for (linear, rows, cols) in [(n.gate_proj, i, h), (n.up_proj, i, h), (n.down_proj, h, i)] {
            push_linear(&mut out, linear, rows, cols);
        }
    }
    out.push((NORM.into(), vec![h]));
    if !c.tie_word_embeddings {
        out.push((LM_HEAD.into(), vec![v, h]));
    }
    out
}

fn push_linear(out: &mut Vec<(String, Vec<usize>)>, linear: LinearNames, rows: usize, cols: usize) {
    out.push((linear.weight, vec![rows, cols]));
    if let Some(bias) = linear.bias {
        out.push((bias, vec![rows]));
    }
}
