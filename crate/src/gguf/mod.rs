//! GGUF files (llama.cpp's format) as a model source: a whole model in one file, weights,
//! shapes, tokenizer and chat template. [`GgufStream`] is a push parser like the safetensors
//! one: it gathers the header (a few MB), then hands each tensor's bytes to a
//! [`TensorSink`] as they pass, under HF names, so the same loaders and checks serve both.

mod blocks;
mod header;
mod vocab;

pub use blocks::BlockType;
pub(crate) use blocks::scale_min_k4;
pub use header::{GgufHeader, HeaderError, MAX_HEADER, MetaValue};
pub use vocab::tokenizer;

use crate::config::{EosIds, Qwen2Config};
use crate::error::{Error, Result};
use crate::hf_names::{EMBED_TOKENS, LM_HEAD};
use crate::quant::Quant;
use crate::weights::{DataSection, TensorSink, TensorType};

/// Where a GGUF file names its architecture (in a model of another one's error).
const ARCHITECTURE: &str = "GGUF metadata: general.architecture";

/// Push parser of one GGUF file: [`Self::push_header`] until it returns true,
/// [`Self::take_header`], then [`Self::push`] the rest of the file, then [`Self::finish`].
pub struct GgufStream {
    file: String,
    file_len: Option<u64>,
    /// The bytes gathered until the header parses; afterwards, the data bytes that came with it.
    head: Vec<u8>,
    /// Parse again once this many bytes are gathered (parsing restarts from the beginning, so
    /// attempts are spaced out).
    retry_at: usize,
    header: Option<GgufHeader>,
    data: Option<DataSection>,
}

impl GgufStream {
    pub fn new(file: impl Into<String>, file_len: Option<u64>) -> Self {
        Self { file: file.into(), file_len, head: Vec::new(), retry_at: 0, header: None, data: None }
    }

    fn err(&self, problem: impl Into<String>) -> Error {
        Error::model_file(&self.file, problem)
    }

    /// Gathers the file's first bytes; true once the header is parsed (see [`Self::take_header`]).
    pub fn push_header(&mut self, chunk: &[u8]) -> Result<bool> {
        if self.data.is_some() {
            return Err(self.err("push_header after the header was complete"));
        }
        self.head.extend_from_slice(chunk);
        if self.head.len() < self.retry_at {
            return Ok(false);
        }
        match GgufHeader::parse(&self.head) {
            Ok(header) => {
                let available = match self.file_len {
                    Some(len) => Some(len.checked_sub(header.len as u64).ok_or_else(|| {
                        self.err(format!("truncated: the header runs past the end of the file ({len} bytes)"))
                    })?),
                    None => None,
                };
                self.data = Some(DataSection::new(&self.file, header.tensors.clone(), available, header.alignment)?);
                self.head.drain(..header.len);
                self.header = Some(header);
                Ok(true)
            }
            Err(HeaderError::Incomplete { needed }) => {
                if self.file_len.is_some_and(|len| needed as u64 > len) {
                    return Err(self
                        .err(format!("truncated: the header runs past the end of the file ({needed} bytes needed)")));
                }
                self.retry_at = needed.max(self.head.len() + self.head.len() / 2);
                Ok(false)
            }
            Err(HeaderError::NotQwen2 { found }) => Err(Error::NotQwen2 { key: ARCHITECTURE, found }),
            Err(HeaderError::TensorType { name, type_name }) => {
                Err(Error::TensorDtype { name, dtype: type_name, readable: header::READABLE_TYPES })
            }
            Err(HeaderError::Bad(problem)) => Err(self.err(problem)),
        }
    }

    /// The header, once [`Self::push_header`] has returned true. The stream keeps only the
    /// tensor list it needs, so the caller owns (and can drop) the metadata: a 151,936-token
    /// vocabulary need not stay in memory while the weights stream.
    pub fn take_header(&mut self) -> Option<GgufHeader> {
        self.header.take()
    }

    /// Feeds the bytes after the header to `sink` (first those gathered with the header).
    pub fn push(&mut self, chunk: &[u8], sink: &mut dyn TensorSink) -> Result<()> {
        let Some(data) = self.data.as_mut() else {
            return Err(Error::model_file(&self.file, "push before the header was complete"));
        };
        if !self.head.is_empty() {
            data.push(&std::mem::take(&mut self.head), sink)?;
        }
        data.push(chunk, sink)
    }

    /// Checks that the whole file arrived.
    pub fn finish(&self) -> Result<()> {
        match &self.data {
            Some(data) => data.finish(),
            None => Err(self.incomplete_header()),
        }
    }

    /// The error of a file that ends inside its header.
    fn incomplete_header(&self) -> Error {
        self.err(format!("truncated: the header is incomplete ({} bytes read)", self.head.len()))
    }
}

impl GgufHeader {
    fn float(&self, key: &str, default: f64) -> Result<f64> {
        match self.metadata.get(key) {
            None => Ok(default),
            Some(MetaValue::Float(v)) => Ok(*v),
            Some(other) => Err(Error::GgufMetadata(format!("{key} is {}, not a number", other.describe()))),
        }
    }

    /// The model's shape from its `qwen2.*` metadata (the vocabulary size from the embedding,
    /// the head tied unless `output.weight` is present), validated as `config.json` is.
    pub fn config(&self) -> Result<Qwen2Config> {
        // Any other architecture was refused with the header.
        let arch = self.str("general.architecture")?;
        let count = |key: &str| self.uint(&format!("qwen2.{key}")).map(|v| v as usize);
        let embed = self.tensors.iter().find(|t| t.name == EMBED_TOKENS);
        let vocab_size = embed.ok_or_else(|| Error::MissingTensors(vec![EMBED_TOKENS.into()]))?.shape[0];
        let token = |key: &str| self.uint(&format!("tokenizer.ggml.{key}")).ok().map(|v| v as u32);
        let config = Qwen2Config {
            model_type: arch.into(),
            hidden_size: count("embedding_length")?,
            intermediate_size: count("feed_forward_length")?,
            num_hidden_layers: count("block_count")?,
            num_attention_heads: count("attention.head_count")?,
            num_key_value_heads: count("attention.head_count_kv")?,
            vocab_size,
            rms_norm_eps: self.float("qwen2.attention.layer_norm_rms_epsilon", 1e-6)?,
            rope_theta: self.float("qwen2.rope.freq_base", 1e6)?,
            max_position_embeddings: count("context_length")?,
            tie_word_embeddings: !self.tensors.iter().any(|t| t.name == LM_HEAD),
            torch_dtype: None,
            hidden_act: "silu".into(),
            use_sliding_window: false,
            bos_token_id: token("bos_token_id"),
            eos_token_id: token("eos_token_id").map(EosIds::One),
        };
        config.validate().map_err(|e| match e {
            Error::Config(problem) => Error::GgufMetadata(problem),
            other => other,
        })?;
        Ok(config)
    }

    /// llama.cpp's name of the file's quantization mix (`general.file_type`), lower case:
    /// `q4_k_m`, `q8_0`, `f16`...
    pub fn file_type(&self) -> String {
        let names = [
            (0, "f32"),
            (1, "f16"),
            (2, "q4_0"),
            (3, "q4_1"),
            (7, "q8_0"),
            (8, "q5_0"),
            (9, "q5_1"),
            (10, "q2_k"),
            (11, "q3_k_s"),
            (12, "q3_k_m"),
            (13, "q3_k_l"),
            (14, "q4_k_s"),
            (15, "q4_k_m"),
            (16, "q5_k_s"),
            (17, "q5_k_m"),
            (18, "q6_k"),
            (32, "bf16"),
        ];
        match self.uint("general.file_type") {
            Ok(code) => names.iter().find(|(c, _)| *c == code).map_or(format!("type{code}"), |(_, n)| n.to_string()),
            Err(_) => "unknown".into(),
        }
    }

    /// The bench JSON's `quant` of this file: `gguf:<file type>`.
    pub fn quant_label(&self) -> String {
        format!("gguf:{}", self.file_type())
    }

    /// `--quant` on a GGUF file is allowed only when it names how the matrices are already
    /// stored (a file's blocks are used as stored, not quantized again).
    pub fn check_quant(&self, quant: Option<Quant>) -> Result<()> {
        let Some(q) = quant else { return Ok(()) };
        let stored = |ty: TensorType| ty == TensorType::Blocks(q.block_type());
        if self.tensors.iter().filter(|t| t.shape.len() == 2).all(|t| stored(t.ty)) {
            return Ok(());
        }
        Err(Error::Input(format!(
            "--quant {} does not match this GGUF file ({}): its weights are used as stored; leave --quant out",
            q.name(),
            self.file_type()
        )))
    }
}

/// Streams a GGUF file given piece by piece (a file's reads, a download's chunks): the header,
/// then, with `sink` (made from the header and its config), every tensor, checked against the
/// config as a model folder's are. Without a sink it stops after the header.
pub fn read_pieces<S: TensorSink, P: AsRef<[u8]>>(
    name: &str,
    len: Option<u64>,
    pieces: impl IntoIterator<Item = Result<P>>,
    sink: Option<impl FnOnce(&GgufHeader, &Qwen2Config) -> Result<S>>,
) -> Result<(GgufHeader, Option<S>)> {
    let mut stream = GgufStream::new(name, len);
    let mut pieces = pieces.into_iter();
    let mut parsed = false;
    while !parsed {
        let piece = pieces.next().ok_or_else(|| stream.incomplete_header())??;
        parsed = stream.push_header(piece.as_ref())?;
    }
    let header = stream.take_header().expect("parsed");
    let Some(make) = sink else { return Ok((header, None)) };
    let config = header.config()?;
    let mut checked = crate::weights::CheckedSink::new(&config, make(&header, &config)?);
    stream.push(&[], &mut checked)?;
    for piece in pieces {
        stream.push(piece?.as_ref(), &mut checked)?;
    }
    stream.finish()?;
    Ok((header, Some(checked.finish()?)))
}

/// Reads a GGUF file's header only (a few MB at the start of the file).
#[cfg(not(target_arch = "wasm32"))]
pub fn read_header(path: &std::path::Path) -> Result<GgufHeader> {
    read_file(path, None::<fn(&GgufHeader, &Qwen2Config) -> Result<NoSink>>).map(|(header, _)| header)
}

/// A sink for reading headers only; never fed.
#[cfg(not(target_arch = "wasm32"))]
struct NoSink;

#[cfg(not(target_arch = "wasm32"))]
impl TensorSink for NoSink {
    fn header(&mut self, _: &str, _: &[crate::weights::TensorInfo]) -> Result<()> {
        Ok(())
    }
    fn piece(&mut self, _: &crate::weights::TensorInfo, _: u64, _: &[u8]) -> Result<()> {
        Ok(())
    }
}

/// Streams a GGUF file from disk ([`read_pieces`], 8 MB reads).
#[cfg(not(target_arch = "wasm32"))]
pub fn read_file<S: TensorSink>(
    path: &std::path::Path,
    sink: Option<impl FnOnce(&GgufHeader, &Qwen2Config) -> Result<S>>,
) -> Result<(GgufHeader, Option<S>)> {
    use std::io::Read;
    let io = |source| Error::Io { path: path.display().to_string(), source };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    let mut buf = vec![0u8; 8 << 20];
    let reads = std::iter::from_fn(|| match file.read(&mut buf) {
        Ok(0) => None,
        Ok(n) => Some(Ok(buf[..n].to_vec())),
        Err(e) => Some(Err(io(e))),
    });
    read_pieces(&name, Some(len), reads, sink)
}
