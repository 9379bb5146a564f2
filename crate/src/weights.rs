//! Safetensors reading, tensor by tensor, over any byte stream.
//!
//! A safetensors file is `[u64 header length][JSON header][data]`. [`SafetensorsStream`] is a push
//! parser: feed it the file's bytes in order, in chunks of any size (a native file read, or a
//! browser download as it arrives), and it hands each tensor's bytes to a [`TensorSink`] as they
//! pass. It never holds more than the header and one chunk, so a 3 GB model never sits in memory
//! whole. Every offset is checked before any data is accepted, so a broken file fails early with
//! the file and tensor named.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::config::Qwen2Config;
use crate::error::{Error, Result};
use crate::gguf::BlockType;
use crate::hf_names::{LM_HEAD, expected_tensors};

/// Element type of a stored tensor. GPU code keeps 16-bit types packed; the CPU widens to f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    BF16,
    F16,
    F32,
}

impl Dtype {
    pub fn size(self) -> usize {
        match self {
            Dtype::BF16 | Dtype::F16 => 2,
            Dtype::F32 => 4,
        }
    }

    fn parse(name: &str, tensor: &str) -> Result<Self> {
        match name {
            "BF16" => Ok(Dtype::BF16),
            "F16" => Ok(Dtype::F16),
            "F32" => Ok(Dtype::F32),
            other => {
                Err(Error::TensorDtype { name: tensor.into(), dtype: other.into(), readable: &["BF16", "F16", "F32"] })
            }
        }
    }

    /// Little-endian bytes of `values` in this dtype (16-bit types rounded to nearest even).
    pub fn from_f32(self, values: &[f32]) -> Vec<u8> {
        match self {
            Dtype::BF16 => values.iter().flat_map(|v| half::bf16::from_f32(*v).to_le_bytes()).collect(),
            Dtype::F16 => values.iter().flat_map(|v| half::f16::from_f32(*v).to_le_bytes()).collect(),
            Dtype::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    /// `values` rounded to this dtype and widened back: what a kernel sees.
    pub fn round(self, values: &[f32]) -> Vec<f32> {
        let mut out = Vec::with_capacity(values.len());
        self.to_f32(&self.from_f32(values), &mut out);
        out
    }

    /// Widens little-endian stored values to f32.
    pub fn to_f32(self, bytes: &[u8], out: &mut Vec<f32>) {
        match self {
            Dtype::BF16 => out.extend(bytes.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())),
            Dtype::F16 => out.extend(bytes.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())),
            Dtype::F32 => out.extend(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        }
    }
}

/// How a file stores a tensor's values: plain floats, or GGUF blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TensorType {
    Float(Dtype),
    Blocks(BlockType),
}

impl TensorType {
    /// The file format's name of the type (`BF16`, `Q4_K`, ...).
    pub fn name(self) -> String {
        match self {
            TensorType::Float(d) => format!("{d:?}"),
            TensorType::Blocks(b) => b.name().into(),
        }
    }

    /// The smallest whole unit: (values, bytes); one value of a float type, one block.
    pub fn unit(self) -> (usize, usize) {
        match self {
            TensorType::Float(d) => (1, d.size()),
            TensorType::Blocks(b) => (b.values(), b.bytes()),
        }
    }

    /// Bytes of `values` values; `None` unless they fill whole units.
    pub fn bytes_of(self, values: usize) -> Option<usize> {
        let (n, bytes) = self.unit();
        values.is_multiple_of(n).then(|| values / n * bytes)
    }

    /// Widens whole units of stored bytes to f32 (dequantizing blocks).
    pub fn to_f32(self, bytes: &[u8], out: &mut Vec<f32>) {
        match self {
            TensorType::Float(d) => d.to_f32(bytes, out),
            TensorType::Blocks(b) => b.dequantize(bytes, out),
        }
    }
}

/// One tensor of a header, under its HF name. `start..end` are byte offsets into the bytes
/// after the header.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    pub ty: TensorType,
    /// HF order: `[rows, cols]` for a matrix.
    pub shape: Vec<usize>,
    pub start: u64,
    pub end: u64,
}

impl TensorInfo {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn byte_len(&self) -> u64 {
        self.end - self.start
    }
}

/// Where a stream's tensors go: a CPU collector, a GPU uploader, a checker.
pub trait TensorSink {
    /// The whole header, before any data: reject it here to stop before a byte is copied.
    fn header(&mut self, file: &str, tensors: &[TensorInfo]) -> Result<()>;
    /// Consecutive pieces of one tensor's bytes; `offset` is where `bytes` starts in the tensor.
    fn piece(&mut self, tensor: &TensorInfo, offset: u64, bytes: &[u8]) -> Result<()>;
}

/// Largest header accepted: real headers are a few hundred KB; this stops a garbage length
/// from allocating gigabytes.
const MAX_HEADER: u64 = 100 << 20;

#[derive(Deserialize)]
struct RawTensor {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [u64; 2],
}

/// The tensors' bytes of one file, after its header: handed to a sink piece by piece as they
/// pass, whatever the chunking. Shared by the safetensors and GGUF parsers.
pub(crate) struct DataSection {
    file: String,
    /// Sorted by start offset, non-overlapping.
    tensors: Vec<TensorInfo>,
    /// Where the last tensor ends; the file may run on for `slack` bytes of padding.
    len: u64,
    slack: u64,
    /// Bytes consumed so far; index of the first tensor not yet fully delivered.
    read: u64,
    next: usize,
    announced: bool,
}

impl DataSection {
    /// Checks that the tensors do not overlap and, when the bytes after the header are known
    /// (`available`), that they hold every tensor.
    pub(crate) fn new(file: &str, mut tensors: Vec<TensorInfo>, available: Option<u64>, slack: u64) -> Result<Self> {
        let err = |problem: String| Error::model_file(file, problem);
        tensors.sort_by_key(|t| (t.start, t.end));
        for pair in tensors.windows(2) {
            if pair[1].start < pair[0].end {
                return Err(err(format!(
                    "tensors {} and {} overlap ({}..{} and {}..{})",
                    pair[0].name, pair[1].name, pair[0].start, pair[0].end, pair[1].start, pair[1].end
                )));
            }
        }
        let len = tensors.last().map_or(0, |t| t.end);
        if let Some(t) = tensors.last()
            && len.checked_add(slack).is_none()
        {
            return Err(err(format!("tensor {} ends at data byte {}, past what any file holds", t.name, t.end)));
        }
        if let Some(data) = available
            && data < len
        {
            let t = tensors.iter().find(|t| t.end > data).expect("some tensor runs past");
            return Err(err(format!(
                "truncated: tensor {} ends at data byte {}, but the file has only {data} data bytes",
                t.name, t.end
            )));
        }
        Ok(Self { file: file.into(), tensors, len, slack, read: 0, next: 0, announced: false })
    }

    /// Feeds the next data bytes; the sink hears the header first.
    pub(crate) fn push(&mut self, chunk: &[u8], sink: &mut dyn TensorSink) -> Result<()> {
        if !self.announced {
            sink.header(&self.file, &self.tensors)?;
            self.announced = true;
        }
        let chunk_start = self.read;
        let chunk_end = chunk_start + chunk.len() as u64;
        if chunk_end > self.len + self.slack {
            return Err(Error::model_file(
                &self.file,
                format!("file is longer than its header says ({} data bytes expected)", self.len),
            ));
        }
        while let Some(t) = self.tensors.get(self.next) {
            let (lo, hi) = (t.start.max(chunk_start), t.end.min(chunk_end));
            if lo < hi {
                let bytes = &chunk[(lo - chunk_start) as usize..(hi - chunk_start) as usize];
                sink.piece(t, lo - t.start, bytes)?;
            }
            if t.end <= chunk_end {
                self.next += 1;
            } else {
                break;
            }
        }
        self.read = chunk_end;
        Ok(())
    }

    /// Checks that every tensor arrived.
    pub(crate) fn finish(&self) -> Result<()> {
        if self.read < self.len {
            let t = &self.tensors[self.next];
            return Err(Error::model_file(
                &self.file,
                format!(
                    "truncated: tensor {} ends at data byte {}, but the file has only {} data bytes",
                    t.name, t.end, self.read
                ),
            ));
        }
        Ok(())
    }
}

/// Push parser of one safetensors file. See the module docs.
pub struct SafetensorsStream {
    file: String,
    /// Total length when known (a file, or a download with Content-Length).
    file_len: Option<u64>,
    /// Header bytes gathered so far, until the header is parsed.
    head: Vec<u8>,
    /// The tensors, once the header is parsed.
    data: Option<DataSection>,
}

impl SafetensorsStream {
    pub fn new(file: impl Into<String>, file_len: Option<u64>) -> Self {
        Self { file: file.into(), file_len, head: Vec::new(), data: None }
    }

    fn err(&self, problem: impl Into<String>) -> Error {
        Error::model_file(&self.file, problem)
    }

    /// Feeds the next bytes of the file.
    pub fn push(&mut self, mut chunk: &[u8], sink: &mut dyn TensorSink) -> Result<()> {
        if self.data.is_none() {
            chunk = self.read_header(chunk)?;
        }
        match &mut self.data {
            Some(data) => data.push(chunk, sink),
            None => Ok(()),
        }
    }

    /// Gathers and parses the header; returns what is left of `chunk` after it.
    fn read_header<'a>(&mut self, chunk: &'a [u8]) -> Result<&'a [u8]> {
        let want = if self.head.len() < 8 {
            8 - self.head.len()
        } else {
            (8 + self.header_len()? - self.head.len() as u64) as usize
        };
        let take = want.min(chunk.len());
        self.head.extend_from_slice(&chunk[..take]);
        let rest = &chunk[take..];
        if take < want {
            return Ok(rest);
        }
        if self.head.len() == 8 {
            self.header_len()?; // validates the length before gathering the JSON
            return self.read_header(rest);
        }
        let tensors = self.parse_header()?;
        let available = self.file_len.map(|len| len - self.head.len() as u64);
        self.data = Some(DataSection::new(&self.file, tensors, available, 0)?);
        Ok(rest)
    }

    fn header_len(&self) -> Result<u64> {
        let n = u64::from_le_bytes(self.head[..8].try_into().expect("8 bytes"));
        let too_long = self.file_len.is_some_and(|len| n > len.saturating_sub(8));
        if n == 0 || n > MAX_HEADER || too_long {
            return Err(self.err(format!(
                "header length {n} is impossible{} (not a safetensors file, or truncated)",
                self.file_len.map(|l| format!(" for a file of {l} bytes")).unwrap_or_default()
            )));
        }
        Ok(n)
    }

    fn parse_header(&self) -> Result<Vec<TensorInfo>> {
        let json = &self.head[8..];
        let raw: BTreeMap<String, serde_json::Value> =
            serde_json::from_slice(json).map_err(|e| self.err(format!("header is not valid JSON: {e}")))?;
        let mut tensors = Vec::new();
        for (name, value) in raw {
            if name == "__metadata__" {
                continue;
            }
            let t: RawTensor =
                serde_json::from_value(value).map_err(|e| self.err(format!("header entry {name}: {e}")))?;
            let dtype = Dtype::parse(&t.dtype, &name)?;
            let [start, end] = t.data_offsets;
            // In u64 and checked: a corrupt shape must not wrap into one that matches.
            let numel = t.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d as u64));
            let Some(bytes) = numel.and_then(|n| n.checked_mul(dtype.size() as u64)) else {
                return Err(self.err(format!("tensor {name}: shape {:?} has more values than any file holds", t.shape)));
            };
            if end < start || bytes != end - start {
                let numel = bytes / dtype.size() as u64;
                return Err(self
                    .err(format!("tensor {name}: offsets {start}..{end} do not hold {numel} values of {:?}", dtype)));
            }
            tensors.push(TensorInfo { name, ty: TensorType::Float(dtype), shape: t.shape, start, end });
        }
        Ok(tensors)
    }

    /// Checks that the whole file arrived.
    pub fn finish(&self) -> Result<()> {
        match &self.data {
            Some(data) => data.finish(),
            None => Err(self.err(format!("truncated: the header is incomplete ({} bytes read)", self.head.len()))),
        }
    }
}

/// Checks each header against the config as it arrives (shapes, unknown names) and, at the end,
/// that every expected tensor was seen exactly once. Wrap a sink with it.
pub struct CheckedSink<S> {
    expected: BTreeMap<String, Vec<usize>>,
    /// Tied checkpoints may still carry `lm_head.weight`; it is shape-checked and not required.
    tied: bool,
    /// Tensor name -> file it came from, to report duplicates across shards.
    seen: BTreeMap<String, String>,
    pub inner: S,
}

impl<S: TensorSink> CheckedSink<S> {
    pub fn new(config: &Qwen2Config, inner: S) -> Self {
        let mut expected: BTreeMap<_, _> = expected_tensors(config).into_iter().collect();
        expected.insert(LM_HEAD.into(), vec![config.vocab_size, config.hidden_size]);
        Self { expected, tied: config.tie_word_embeddings, seen: BTreeMap::new(), inner }
    }

    /// Call after the last file: reports every missing tensor by name.
    pub fn finish(self) -> Result<S> {
        let missing: Vec<String> = self
            .expected
            .keys()
            .filter(|n| !(self.seen.contains_key(*n) || (self.tied && *n == LM_HEAD)))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(Error::MissingTensors(missing));
        }
        Ok(self.inner)
    }
}

impl<S: TensorSink> TensorSink for CheckedSink<S> {
    fn header(&mut self, file: &str, tensors: &[TensorInfo]) -> Result<()> {
        let extra: Vec<String> =
            tensors.iter().filter(|t| !self.expected.contains_key(&t.name)).map(|t| t.name.clone()).collect();
        if !extra.is_empty() {
            return Err(Error::ExtraTensors(extra));
        }
        for t in tensors {
            let expected = &self.expected[&t.name];
            if *expected != t.shape {
                return Err(Error::TensorShape {
                    name: t.name.clone(),
                    expected: expected.clone(),
                    found: t.shape.clone(),
                });
            }
            if let Some(first) = self.seen.insert(t.name.clone(), file.to_string()) {
                return Err(Error::model_file(file, format!("tensor {} was already read from {first}", t.name)));
            }
        }
        self.inner.header(file, tensors)
    }

    fn piece(&mut self, tensor: &TensorInfo, offset: u64, bytes: &[u8]) -> Result<()> {
        self.inner.piece(tensor, offset, bytes)
    }
}

/// The safetensors files of a model folder, in reading order: the shards named by
/// `model.safetensors.index.json` when it exists, else `model.safetensors`.
pub fn shard_names(index_json: Option<&[u8]>) -> Result<Vec<String>> {
    let Some(bytes) = index_json else {
        return Ok(vec!["model.safetensors".into()]);
    };
    #[derive(Deserialize)]
    struct Index {
        weight_map: BTreeMap<String, String>,
    }
    let index: Index =
        serde_json::from_slice(bytes).map_err(|e| Error::model_file("model.safetensors.index.json", e.to_string()))?;
    let mut files: Vec<String> = index.weight_map.into_values().collect();
    files.sort();
    files.dedup();
    if files.is_empty() {
        return Err(Error::model_file("model.safetensors.index.json", "weight_map is empty"));
    }
    Ok(files)
}

/// Streams every shard of a model folder on disk into `sink`, checked against `config`.
#[cfg(not(target_arch = "wasm32"))]
pub fn read_model_dir<S: TensorSink>(dir: &std::path::Path, config: &Qwen2Config, sink: S) -> Result<S> {
    use std::io::Read;
    let io = |path: &std::path::Path| {
        let path = path.display().to_string();
        move |source| Error::Io { path, source }
    };
    let index_path = dir.join("model.safetensors.index.json");
    let index = match std::fs::read(&index_path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(&index_path)(e)),
    };
    let mut checked = CheckedSink::new(config, sink);
    let mut buf = vec![0u8; 8 << 20];
    for name in shard_names(index.as_deref())? {
        let path = dir.join(&name);
        let mut file = std::fs::File::open(&path).map_err(io(&path))?;
        let len = file.metadata().map_err(io(&path))?.len();
        let mut stream = SafetensorsStream::new(name, Some(len));
        loop {
            let n = file.read(&mut buf).map_err(io(&path))?;
            if n == 0 {
                break;
            }
            stream.push(&buf[..n], &mut checked)?;
        }
        stream.finish()?;
    }
    checked.finish()
}
