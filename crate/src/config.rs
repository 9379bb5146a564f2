//! The model's shape: HF `config.json` read with its own field names, validated once, with the
//! derived sizes (head_dim, kv groups) as methods.

use serde::Deserialize;

use crate::error::{Error, Result};

/// A Qwen2 `config.json`. Unknown fields are ignored; the ones below drive the forward pass.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Qwen2Config {
    #[serde(default = "default_model_type")]
    pub model_type: String,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub vocab_size: usize,
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f64,
    #[serde(default = "default_theta")]
    pub rope_theta: f64,
    #[serde(default = "default_max_pos")]
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default)]
    pub torch_dtype: Option<String>,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default)]
    pub use_sliding_window: bool,
    #[serde(default)]
    pub bos_token_id: Option<u32>,
    /// HF allows one id or a list.
    #[serde(default)]
    pub eos_token_id: Option<EosIds>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum EosIds {
    One(u32),
    Many(Vec<u32>),
}

fn default_model_type() -> String {
    "qwen2".into()
}
fn default_eps() -> f64 {
    1e-6
}
fn default_theta() -> f64 {
    1e6
}
fn default_max_pos() -> usize {
    32768
}
fn default_act() -> String {
    "silu".into()
}

/// The longest context a config may declare (Qwen2.5's long-context releases: about 1M): sizes
/// computed from it stay far from overflowing, on wasm32 too.
pub const MAX_CONTEXT: usize = 1 << 21;

impl Qwen2Config {
    /// Reads `config.json` from a model folder.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(dir: &std::path::Path) -> Result<Self> {
        let path = dir.join("config.json");
        let bytes = std::fs::read(&path).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
        Self::from_json(&bytes)
    }

    /// Parses and validates `config.json` bytes.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        let parse_error = |e: serde_json::Error| Error::Config(e.to_string());
        // Another architecture is named as such before its fields are read: a model without
        // (say) num_key_value_heads should not read as a Qwen2 config missing a field.
        #[derive(Deserialize)]
        struct Architecture {
            #[serde(default = "default_model_type")]
            model_type: String,
        }
        let Architecture { model_type } = serde_json::from_slice(bytes).map_err(parse_error)?;
        if model_type != "qwen2" {
            return Err(Error::NotQwen2 { key: "config.json: model_type", found: model_type });
        }
        let config: Self = serde_json::from_slice(bytes).map_err(parse_error)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks everything the forward pass relies on, with one specific message per problem.
    pub fn validate(&self) -> Result<()> {
        let fail = |m: String| Err(Error::Config(m));
        if self.model_type != "qwen2" {
            return Err(Error::NotQwen2 { key: "config.json: model_type", found: self.model_type.clone() });
        }
        if self.hidden_act != "silu" {
            return fail(format!("hidden_act {:?} is not supported (only \"silu\")", self.hidden_act));
        }
        // The upper bounds are far above any Qwen2 release (72B: hidden 8192, intermediate
        // 29568, 80 layers, vocabulary 152064); they keep sizes computed from an untrusted file
        // from overflowing or allocating without bound.
        for (name, v, most) in [
            ("hidden_size", self.hidden_size, 1 << 16),
            ("intermediate_size", self.intermediate_size, 1 << 18),
            ("num_hidden_layers", self.num_hidden_layers, 1 << 10),
            ("num_attention_heads", self.num_attention_heads, 1 << 10),
            ("num_key_value_heads", self.num_key_value_heads, 1 << 10),
            ("vocab_size", self.vocab_size, 1 << 21),
        ] {
            if v == 0 {
                return fail(format!("{name} must be positive"));
            }
            if v > most {
                return fail(format!("{name} {v} is larger than any model this reads (at most {most})"));
            }
        }
        if self.max_position_embeddings > MAX_CONTEXT {
            return fail(format!(
                "max_position_embeddings {} is larger than any model this reads (at most {MAX_CONTEXT})",
                self.max_position_embeddings
            ));
        }
        // A prompt and the token after it; a choice between two tokens.
        for (name, v) in [("max_position_embeddings", self.max_position_embeddings), ("vocab_size", self.vocab_size)] {
            if v < 2 {
                return fail(format!("{name} {v} is too small (at least 2)"));
            }
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return fail(format!(
                "num_attention_heads ({}) does not divide hidden_size ({})",
                self.num_attention_heads, self.hidden_size
            ));
        }
        if !self.num_attention_heads.is_multiple_of(self.num_key_value_heads) {
            return fail(format!(
                "num_key_value_heads ({}) does not divide num_attention_heads ({})",
                self.num_key_value_heads, self.num_attention_heads
            ));
        }
        if !self.head_dim().is_multiple_of(2) {
            return fail(format!("head_dim {} must be even for rotary embeddings", self.head_dim()));
        }
        // Checked here, before minutes of downloading weights, rather than where the kernels
        // are built.
        let most = crate::ops::MAX_HEAD_DIM;
        if self.head_dim() > most {
            return fail(format!(
                "head_dim {} (hidden_size / num_attention_heads) is larger than this engine's attention supports ({most})",
                self.head_dim()
            ));
        }
        for (name, v) in [("hidden_size", self.hidden_size), ("intermediate_size", self.intermediate_size)] {
            if !v.is_multiple_of(2) {
                return fail(format!("{name} {v} must be even (the weights are packed two 16-bit values a word)"));
            }
        }
        if self.use_sliding_window {
            return fail("use_sliding_window = true is not supported".into());
        }
        if !(self.rms_norm_eps > 0.0 && self.rope_theta > 0.0) {
            return fail("rms_norm_eps and rope_theta must be positive".into());
        }
        Ok(())
    }

    /// Width of one attention head.
    /// RoPE frequencies of this model's heads (see [`rope_inv_freq`]).
    pub fn rope_inv_freq(&self) -> Vec<f32> {
        rope_inv_freq(self.head_dim(), self.rope_theta)
    }

    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }

    /// Query heads that share one key/value head (grouped-query attention).
    pub fn kv_groups(&self) -> usize {
        self.num_attention_heads / self.num_key_value_heads
    }

    /// Width of the k and v projections: kv heads x head_dim.
    pub fn kv_dim(&self) -> usize {
        self.num_key_value_heads * self.head_dim()
    }

    /// End-of-sequence ids named by the config.
    pub fn eos_ids(&self) -> Vec<u32> {
        match &self.eos_token_id {
            None => vec![],
            Some(EosIds::One(id)) => vec![*id],
            Some(EosIds::Many(ids)) => ids.clone(),
        }
    }

    /// Number of parameters, counting a tied head once.
    pub fn parameter_count(&self) -> u64 {
        let (h, i, kv, v) =
            (self.hidden_size as u64, self.intermediate_size as u64, self.kv_dim() as u64, self.vocab_size as u64);
        let layer = h * h + h + 2 * (kv * h + kv) + h * h + 3 * h * i + 2 * h;
        let head = if self.tie_word_embeddings { 0 } else { v * h };
        v * h + self.num_hidden_layers as u64 * layer + h + head
    }

    /// The released Qwen2.5-0.5B-Instruct shape.
    pub fn qwen2_5_0_5b() -> Self {
        Self::preset(896, 4864, 24, 14, 2, true)
    }

    /// The released Qwen2.5-1.5B-Instruct shape.
    pub fn qwen2_5_1_5b() -> Self {
        Self::preset(1536, 8960, 28, 12, 2, true)
    }

    /// A named preset (`qwen2.5-0.5b`, `qwen2.5-1.5b`).
    pub fn named(name: &str) -> Result<Self> {
        match name {
            "qwen2.5-0.5b" => Ok(Self::qwen2_5_0_5b()),
            "qwen2.5-1.5b" => Ok(Self::qwen2_5_1_5b()),
            _ => Err(Error::Config(format!("unknown model name {name:?} (known: qwen2.5-0.5b, qwen2.5-1.5b)"))),
        }
    }

    fn preset(hidden: usize, inter: usize, layers: usize, heads: usize, kv: usize, tied: bool) -> Self {
        Self {
            model_type: "qwen2".into(),
            hidden_size: hidden,
            intermediate_size: inter,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            num_key_value_heads: kv,
            vocab_size: 151_936,
            rms_norm_eps: 1e-6,
            rope_theta: 1e6,
            max_position_embeddings: 32768,
            tie_word_embeddings: tied,
            torch_dtype: Some("bfloat16".into()),
            hidden_act: "silu".into(),
            use_sliding_window: false,
            bos_token_id: Some(151_643),
            eos_token_id: Some(EosIds::One(151_645)),
        }
    }
}

/// RoPE frequencies `1 / theta^(2i / D)` for i < D/2, in f32 as HF computes them.
pub fn rope_inv_freq(head_dim: usize, theta: f64) -> Vec<f32> {
    (0..head_dim / 2).map(|i| 1.0 / (theta as f32).powf((2 * i) as f32 / head_dim as f32)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const QWEN_0_5B: &[u8] = include_bytes!("../tests/fixtures/qwen2.5-0.5b/config.json");

    #[test]
    fn reads_the_released_config_and_derives_sizes() {
        let c = Qwen2Config::from_json(QWEN_0_5B).unwrap();
        assert_eq!(c, Qwen2Config::qwen2_5_0_5b().with_version_fields(&c));
        assert_eq!((c.head_dim(), c.kv_groups(), c.kv_dim()), (64, 7, 128));
        assert_eq!(c.eos_ids(), vec![151_645]);
        // 494M parameters in the released 0.5B model.
        assert_eq!(c.parameter_count(), 494_032_768);
        let big = Qwen2Config::qwen2_5_1_5b();
        assert_eq!((big.head_dim(), big.kv_groups()), (128, 6));
    }

    impl Qwen2Config {
        fn with_version_fields(mut self, other: &Self) -> Self {
            self.torch_dtype.clone_from(&other.torch_dtype);
            self
        }
    }

    fn edited(edit: impl Fn(&mut serde_json::Value)) -> String {
        let mut v: serde_json::Value = serde_json::from_slice(QWEN_0_5B).unwrap();
        edit(&mut v);
        Qwen2Config::from_json(v.to_string().as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn another_architecture_is_named_as_data() {
        let mut v: serde_json::Value = serde_json::from_slice(QWEN_0_5B).unwrap();
        v["model_type"] = "qwen3".into();
        let e = Qwen2Config::from_json(v.to_string().as_bytes()).unwrap_err();
        assert_eq!(e.code(), "config");
        assert_eq!(e.details(), Some(serde_json::json!({ "reason": "not_qwen2", "found": "qwen3" })));
        // Named before any field it lacks (a BERT config has no num_key_value_heads).
        let bert = br#"{"model_type": "bert", "hidden_size": 768, "vocab_size": 30522}"#;
        let e = Qwen2Config::from_json(bert).unwrap_err();
        assert_eq!(e.details(), Some(serde_json::json!({ "reason": "not_qwen2", "found": "bert" })), "{e}");
    }

    #[test]
    fn inconsistent_configs_get_specific_errors() {
        let e = edited(|v| v["num_attention_heads"] = 13.into());
        assert!(e.contains("num_attention_heads (13) does not divide hidden_size (896)"), "{e}");
        let e = edited(|v| v["num_key_value_heads"] = 3.into());
        assert!(e.contains("num_key_value_heads (3) does not divide num_attention_heads (14)"), "{e}");
        let e = edited(|v| v["model_type"] = "llama".into());
        assert!(e.contains("model_type \"llama\" is not supported"), "{e}");
        let e = edited(|v| v["hidden_size"] = 0.into());
        assert!(e.contains("hidden_size must be positive"), "{e}");
        let e = edited(|v| {
            v.as_object_mut().unwrap().remove("vocab_size");
        });
        assert!(e.contains("missing field `vocab_size`"), "{e}");
    }
}
