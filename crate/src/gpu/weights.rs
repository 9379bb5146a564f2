//! A model's weights on the GPU, with HF names. Matrices stay packed in their file's dtype
//! ([`PackedMatrix`], split over binding limits); norm weights and biases, a few KB each, are
//! widened to f32. Weights arrive from a safetensors stream ([`GpuLoader`], a [`TensorSink`]) or
//! are generated on the GPU (`crate::ops::synthetic_weights`).

use std::collections::HashMap;
use std::rc::Rc;

use crate::config::Qwen2Config;
use crate::error::{Error, Result};
use crate::gpu::{Gpu, PackedMatrix};
use crate::hf_names::{EMBED_TOKENS, LM_HEAD, LayerNames, LinearNames, NORM};
use crate::quant::{Quant, WeightFormat};
use crate::weights::{TensorInfo, TensorSink, TensorType};

/// A HF Linear: weight `[out, in]`, optional bias `[out]`.
pub struct GpuLinear {
    pub weight: PackedMatrix,
    pub bias: Option<wgpu::Buffer>,
}

/// One decoder layer.
pub struct GpuLayer {
    pub input_layernorm: wgpu::Buffer, // [hidden] f32
    /// q_proj, k_proj and v_proj ([hidden | kv_dim | kv_dim, hidden] + biases) as row blocks of
    /// one output `[hidden + 2 kv_dim]`: a single matrix (one dispatch) where the three share a
    /// storage format, else the three as stored (a GGUF file may mix block types).
    pub qkv_proj: Vec<GpuLinear>,
    pub o_proj: GpuLinear,                      // [hidden, hidden]
    pub post_attention_layernorm: wgpu::Buffer, // [hidden] f32
    pub mlp_input: MlpInput,
    pub down_proj: GpuLinear, // [hidden, intermediate]
}

/// gate_proj and up_proj, `[intermediate, hidden]` each.
pub enum MlpInput {
    /// One matrix, gate rows then up rows (`[2 intermediate, hidden]`), which the GPU family's
    /// kernels read in pairs to write silu(gate) * up at once ([`crate::ops::Linear::swiglu`]):
    /// where the two share a storage format and bias-ness and fit one storage binding together.
    Paired(GpuLinear),
    /// The two as stored: on CPU-like devices, and where they differ in storage format (a GGUF
    /// file may mix block types), bias-ness or shape, or do not fit one binding together.
    Separate { gate_proj: GpuLinear, up_proj: GpuLinear },
}

pub struct GpuWeights {
    config: Qwen2Config,
    embed_tokens: PackedMatrix, // [vocab, hidden]
    layers: Vec<GpuLayer>,
    norm: wgpu::Buffer, // [hidden] f32
    /// `[vocab, hidden]`; `None` when tied to `embed_tokens`.
    lm_head: Option<PackedMatrix>,
    /// Generated, not trained: answers are meaningless.
    synthetic: bool,
    /// How the weights are stored, as reports name it (`bf16`, `q4_0`, `gguf:q4_k_m`).
    label: String,
}

impl GpuWeights {
    pub fn config(&self) -> &Qwen2Config {
        &self.config
    }

    /// `model.embed_tokens`: `[vocab, hidden]`.
    pub fn embed_tokens(&self) -> &PackedMatrix {
        &self.embed_tokens
    }

    /// The decoder layers, in order.
    pub fn layers(&self) -> &[GpuLayer] {
        &self.layers
    }

    /// `model.norm`: `[hidden]` f32.
    pub fn norm(&self) -> &wgpu::Buffer {
        &self.norm
    }

    /// Generated, not trained: answers are meaningless (timings are real).
    pub fn synthetic(&self) -> bool {
        self.synthetic
    }

    /// How the weights are stored, as the bench JSON's `quant` names it: `bf16`, `f16`,
    /// `q8_0`, `q4_0` (every matrix alike), or `gguf:<file type>` for a GGUF file's mix.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The LM head matrix (the embedding when tied).
    pub fn head(&self) -> &PackedMatrix {
        self.lm_head.as_ref().unwrap_or(&self.embed_tokens)
    }

    /// Bytes of weights one decode step reads: every matrix once (the tied head counted once as
    /// the head; the embedding gather reads only one row).
    pub fn decode_bytes(&self) -> u64 {
        let layer: u64 = self.layers.iter().map(|l| l.linears().map(|lin| lin.weight.bytes()).sum::<u64>()).sum();
        layer + self.head().bytes()
    }
}

impl GpuLayer {
    /// Every linear layer's weights.
    fn linears(&self) -> impl Iterator<Item = &GpuLinear> {
        let mlp_input = match &self.mlp_input {
            MlpInput::Paired(gate_up) => vec![gate_up],
            MlpInput::Separate { gate_proj, up_proj } => vec![gate_proj, up_proj],
        };
        self.qkv_proj.iter().chain([&self.o_proj]).chain(mlp_input).chain([&self.down_proj])
    }
}

/// A bias is destroyed with its layer (the weight matrix destroys itself: [`PackedMatrix`]).
impl Drop for GpuLinear {
    fn drop(&mut self) {
        self.bias.iter().for_each(wgpu::Buffer::destroy);
    }
}

/// Whether `parts` can be one linear layer: they share a storage format (and width), and all
/// have biases or none do.
fn fusible(parts: &[&GpuLinear]) -> bool {
    let Some(first) = parts.first() else { return false };
    let (format, cols) = (first.weight.format(), first.weight.cols());
    let alike = |p: &&GpuLinear| {
        p.weight.format() == format && p.weight.cols() == cols && p.bias.is_some() == first.bias.is_some()
    };
    parts.iter().all(alike)
}

/// [`fusible`] `parts` as one linear layer whose rows are theirs in order (biases too). The copy
/// is submitted at once and the parts destroyed, so loading holds at most one layer's worth
/// twice.
fn fuse_rows(gpu: &Gpu, name: &str, parts: Vec<GpuLinear>) -> Result<GpuLinear> {
    let rows: usize = parts.iter().map(|p| p.weight.rows()).sum();
    let (format, cols) = (parts[0].weight.format(), parts[0].weight.cols());
    let weight = PackedMatrix::new(gpu, name, rows, cols, format)?;
    let bias = parts[0].bias.as_ref().map(|_| gpu.storage(name, (rows * 4) as u64));
    let mut encoder = gpu.device().create_command_encoder(&Default::default());
    let mut row = 0;
    for p in &parts {
        weight.copy_rows_from(&mut encoder, &p.weight, row);
        if let (Some(from), Some(to)) = (&p.bias, &bias) {
            encoder.copy_buffer_to_buffer(from, 0, to, (row * 4) as u64, (p.weight.rows() * 4) as u64);
        }
        row += p.weight.rows();
    }
    gpu.queue().submit([encoder.finish()]);
    Ok(GpuLinear { weight, bias }) // the parts are destroyed once the copies are done
}

/// q_proj, k_proj and v_proj as one matrix where they are [`fusible`] ([`GpuLayer::qkv_proj`]).
fn fuse_qkv(gpu: &Gpu, name: &str, parts: [GpuLinear; 3]) -> Result<Vec<GpuLinear>> {
    if fusible(&parts.each_ref()) { Ok(vec![fuse_rows(gpu, name, parts.into())?]) } else { Ok(parts.into()) }
}

/// gate_proj and up_proj as one matrix where the device's kernels pair their rows (see
/// [`MlpInput`]; the conditions of [`crate::ops::Linear::pairs_rows`], checked before fusing),
/// else as they are.
fn pair_gate_up(gpu: &Gpu, name: &str, gate_proj: GpuLinear, up_proj: GpuLinear) -> Result<MlpInput> {
    let (gate, up) = (&gate_proj.weight, &up_proj.weight);
    let one_binding = gate.rows() + up.rows() <= PackedMatrix::rows_per_chunk(gpu, gate.row_bytes());
    if gpu.direct_kernels() || gate.rows() != up.rows() || !one_binding || !fusible(&[&gate_proj, &up_proj]) {
        return Ok(MlpInput::Separate { gate_proj, up_proj });
    }
    Ok(MlpInput::Paired(fuse_rows(gpu, name, vec![gate_proj, up_proj])?))
}

/// A model's weights are destroyed when the last user lets go of them, not left to the
/// browser's garbage collector (on the web, wgpu drops a buffer without destroying it): the
/// norms here, the matrices and biases by their own types.
impl Drop for GpuWeights {
    fn drop(&mut self) {
        self.norm.destroy();
        for l in &self.layers {
            l.input_layernorm.destroy();
            l.post_attention_layernorm.destroy();
        }
    }
}

/// One tensor on the GPU: a matrix stays packed, a vector is f32.
pub(crate) enum Tensor {
    Matrix(PackedMatrix),
    Vector(wgpu::Buffer),
}

impl GpuWeights {
    /// The weights from their tensors by HF name; `synthetic` marks generated ones. Each layer's
    /// Q, K and V projections become one matrix where they can ([`GpuLayer::qkv_proj`]), and
    /// so do its gate and up projections ([`MlpInput`]).
    pub(crate) fn from_tensors(
        gpu: &Gpu,
        config: Qwen2Config,
        tensors: HashMap<String, Tensor>,
        synthetic: bool,
    ) -> Result<Self> {
        let (mut matrices, mut vectors) = (HashMap::new(), HashMap::new());
        for (name, tensor) in tensors {
            match tensor {
                Tensor::Matrix(m) => matrices.insert(name, m).map(drop),
                Tensor::Vector(v) => vectors.insert(name, v).map(drop),
            };
        }
        let missing = |n: &str| Error::MissingTensors(vec![n.into()]);
        let mut mat = |n: &str| matrices.remove(n).ok_or_else(|| missing(n));
        let mut vec = |n: &str| vectors.remove(n).ok_or_else(|| missing(n));
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for l in 0..config.num_hidden_layers {
            let n = LayerNames::new(l);
            let mut linear = |names: &LinearNames| -> Result<GpuLinear> {
                let bias = names.bias.as_deref().map(&mut vec).transpose()?;
                Ok(GpuLinear { weight: mat(&names.weight)?, bias })
            };
            let qkv = [linear(&n.q_proj)?, linear(&n.k_proj)?, linear(&n.v_proj)?];
            let (o_proj, gate_proj, up_proj, down_proj) =
                (linear(&n.o_proj)?, linear(&n.gate_proj)?, linear(&n.up_proj)?, linear(&n.down_proj)?);
            layers.push(GpuLayer {
                input_layernorm: vec(&n.input_layernorm)?,
                qkv_proj: fuse_qkv(gpu, &format!("model.layers.{l}.self_attn.qkv_proj"), qkv)?,
                o_proj,
                post_attention_layernorm: vec(&n.post_attention_layernorm)?,
                mlp_input: pair_gate_up(gpu, &format!("model.layers.{l}.mlp.gate_up_proj"), gate_proj, up_proj)?,
                down_proj,
            });
        }
        if gpu.weight_textures() {
            // The layers' matrices are read as textures alone (the embedding's rows are also
            // gathered, and the head's chosen rows read, from its buffers).
            layers.iter().flat_map(GpuLayer::linears).for_each(|l| l.weight.keep_textures_only(gpu));
        }
        let embed_tokens = mat(EMBED_TOKENS)?;
        let lm_head = if config.tie_word_embeddings { None } else { Some(mat(LM_HEAD)?) };
        let norm = vec(NORM)?;
        let label = embed_tokens.format().name().to_string();
        Ok(GpuWeights { config, embed_tokens, layers, norm, lm_head, synthetic, label })
    }
}

/// A [`TensorSink`] that uploads a tensor stream (safetensors or GGUF) to the GPU as it
/// arrives: matrices are written piece by piece (never whole in memory), converted a row at a
/// time where the GPU keeps them in another layout ([`WeightFormat::for_stored`]: quantized on
/// load with a [`Quant`], GGUF blocks rearranged); vectors are widened to f32 when complete.
/// Wrap it in [`crate::weights::CheckedSink`] so names and shapes are checked first.
pub struct GpuLoader {
    gpu: Rc<Gpu>,
    config: Qwen2Config,
    quant: Option<Quant>,
    /// What the bench JSON calls the weights (`bf16`, `q8_0`, `gguf:q4_k_m`); by default the
    /// format of the embedding.
    label: Option<String>,
    tensors: HashMap<String, Tensor>,
    /// The tensor being received: its matrix write position, bytes not yet written (a partial
    /// 4-byte word, as wgpu writes whole words, or a partial row when converting), or a
    /// vector's bytes.
    written: u64,
    carry: Vec<u8>,
    vector_bytes: Vec<u8>,
    /// Bytes written since the last flush of wgpu's staging memory.
    unflushed: u64,
}

/// A load that stops part way (a failed or cancelled download, a bad file) frees what it put on
/// the GPU: the vectors here, the matrices themselves ([`PackedMatrix`]).
impl Drop for GpuLoader {
    fn drop(&mut self) {
        for tensor in self.tensors.values() {
            if let Tensor::Vector(buffer) = tensor {
                buffer.destroy();
            }
        }
    }
}

/// Submit queued writes after this many bytes, so staging memory stays bounded.
const FLUSH_BYTES: u64 = 64 << 20;

impl GpuLoader {
    /// Matrices keep their file's float type, or are quantized to `quant`.
    pub fn new(gpu: Rc<Gpu>, config: &Qwen2Config, quant: Option<Quant>) -> Self {
        Self {
            gpu,
            config: config.clone(),
            quant,
            label: None,
            tensors: HashMap::new(),
            written: 0,
            carry: Vec::new(),
            vector_bytes: Vec::new(),
            unflushed: 0,
        }
    }

    /// Names the weights' format for reports (a GGUF file's `gguf:<file type>`).
    pub fn labelled(mut self, label: String) -> Self {
        self.label = Some(label);
        self
    }

    /// The weights, once every file has been streamed (and checked).
    pub fn finish(mut self) -> Result<GpuWeights> {
        self.gpu.queue.submit([]);
        self.gpu.check()?;
        let tensors = std::mem::take(&mut self.tensors);
        let mut weights = GpuWeights::from_tensors(&self.gpu, self.config.clone(), tensors, false)?;
        if let Some(label) = self.label.take() {
            weights.label = label;
        }
        Ok(weights)
    }

    fn write(&mut self, name: &str, bytes: &[u8]) {
        if let Some(Tensor::Matrix(m)) = self.tensors.get(name) {
            m.write(&self.gpu, self.written, bytes);
            self.written += bytes.len() as u64;
            self.unflushed += bytes.len() as u64;
        }
    }

    /// Writes the whole words of `bytes`, keeping a partial word for the next piece.
    fn write_raw(&mut self, name: &str, mut bytes: &[u8]) {
        if !self.carry.is_empty() {
            let take = (4 - self.carry.len()).min(bytes.len());
            self.carry.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.carry.len() == 4 {
                let word = std::mem::take(&mut self.carry);
                self.write(name, &word);
            }
        }
        let aligned = bytes.len() / 4 * 4;
        if aligned > 0 {
            self.write(name, &bytes[..aligned]);
        }
        self.carry.extend_from_slice(&bytes[aligned..]);
    }

    /// Converts and writes every complete row of the bytes so far, keeping a partial row.
    fn write_converted(&mut self, t: &TensorInfo, format: WeightFormat, bytes: &[u8]) {
        self.carry.extend_from_slice(bytes);
        let cols = t.shape[1];
        let row = t.ty.bytes_of(cols).expect("headers hold whole blocks per row");
        let whole = self.carry.len() / row * row;
        if whole > 0 {
            let mut converted = Vec::with_capacity(whole / row * format.row_bytes(cols));
            format.convert_rows(t.ty, &self.carry[..whole], cols, &mut converted);
            self.write(&t.name, &converted);
            self.carry.drain(..whole);
        }
    }
}

impl TensorSink for GpuLoader {
    fn header(&mut self, _file: &str, tensors: &[TensorInfo]) -> Result<()> {
        for t in tensors {
            // A tied checkpoint's copy of the head is not needed: the embedding serves.
            if t.name == LM_HEAD && self.config.tie_word_embeddings {
                continue;
            }
            if let [rows, cols] = t.shape[..] {
                let format = WeightFormat::for_stored(t.ty, self.quant);
                let m = PackedMatrix::new(&self.gpu, &t.name, rows, cols, format)?;
                self.tensors.insert(t.name.clone(), Tensor::Matrix(m));
            }
        }
        Ok(())
    }

    fn piece(&mut self, t: &TensorInfo, offset: u64, bytes: &[u8]) -> Result<()> {
        if offset == 0 {
            (self.written, self.carry, self.vector_bytes) = Default::default();
        }
        if t.shape.len() != 2 {
            self.vector_bytes.extend_from_slice(bytes);
            if offset + bytes.len() as u64 == t.byte_len() {
                let mut values = Vec::with_capacity(t.numel());
                t.ty.to_f32(&self.vector_bytes, &mut values);
                let buffer = self.gpu.storage_from(&t.name, &values);
                self.tensors.insert(t.name.clone(), Tensor::Vector(buffer));
            }
            return Ok(());
        }
        let Some(Tensor::Matrix(m)) = self.tensors.get(&t.name) else {
            return Ok(()); // not kept (a tied checkpoint's head)
        };
        match (m.format(), t.ty) {
            (WeightFormat::Float(stored), TensorType::Float(file)) if stored == file => self.write_raw(&t.name, bytes),
            (format, _) => self.write_converted(t, format, bytes),
        }
        if self.unflushed >= FLUSH_BYTES {
            self.gpu.queue.submit([]);
            self.unflushed = 0;
        }
        Ok(())
    }
}

/// Reads a model folder's weights onto the GPU (natively; the browser streams downloads
/// through the same [`GpuLoader`]).
#[cfg(not(target_arch = "wasm32"))]
pub fn load_dir(gpu: &Rc<Gpu>, dir: &std::path::Path, quant: Option<Quant>) -> Result<GpuWeights> {
    let config = Qwen2Config::load(dir)?;
    crate::weights::read_model_dir(dir, &config, GpuLoader::new(gpu.clone(), &config, quant))?.finish()
}

/// Reads a GGUF file's weights onto the GPU, and its tokenizer. `quant` must match how the
/// file stores its matrices ([`crate::gguf::GgufHeader::check_quant`]).
#[cfg(not(target_arch = "wasm32"))]
pub fn load_gguf(
    gpu: &Rc<Gpu>,
    path: &std::path::Path,
    quant: Option<Quant>,
) -> Result<(GpuWeights, crate::tokenizer::Tokenizer)> {
    let make = |header: &crate::gguf::GgufHeader, config: &Qwen2Config| {
        header.check_quant(quant)?;
        Ok(GpuLoader::new(gpu.clone(), config, None).labelled(header.quant_label()))
    };
    let (header, loader) = crate::gguf::read_file(path, Some(make))?;
    let tokenizer = crate::gguf::tokenizer(&header)?;
    Ok((loader.expect("a sink was given").finish()?, tokenizer))
}
