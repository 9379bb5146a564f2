//! The GGUF header: magic, version, metadata key/values and tensor infos, parsed from bytes
//! that may still be arriving. Every length and count is checked against what is left, so a
//! broken file fails with a specific message instead of allocating or reading out of bounds.
//!
//! Layout (little-endian): `"GGUF"`, `version: u32` (2 or 3), `tensor_count: u64`,
//! `kv_count: u64`, the key/values (`key: string, type: u32, value`), the tensor infos
//! (`name: string, n_dims: u32, dims: [u64; n_dims], type: u32, offset: u64`), then padding to
//! `general.alignment` (default 32) and the data. A string is `len: u64` then UTF-8 bytes.
//! Dims run innermost first: a matrix is `[cols, rows]`.

use std::collections::BTreeMap;

use crate::gguf::BlockType;
use crate::hf_names::from_gguf_name;
use crate::weights::{Dtype, TensorInfo, TensorType};

/// Largest header read: Qwen2.5's, with a 151,936-token vocabulary and its merges, is ~6 MB.
pub const MAX_HEADER: usize = 64 << 20;

/// Most metadata values a header may hold, arrays' items included: each takes 32 bytes in
/// memory however few it takes in the file, so 64 MB of one-byte items would take 2 GB. Qwen2.5's
/// tokenizer (tokens, their types, merges) is about 455,000.
const MAX_VALUES: usize = 1 << 22;

/// Deepest nesting of metadata arrays accepted.
const MAX_DEPTH: usize = 4;

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    UInt(u64),
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Array(Vec<MetaValue>),
}

impl MetaValue {
    /// A short description for messages (an array by its length, text cut at 40 characters).
    pub fn describe(&self) -> String {
        match self {
            MetaValue::Array(items) => format!("an array of {} items", items.len()),
            MetaValue::Str(s) if s.chars().count() > 40 => format!("{:?}...", s.chars().take(40).collect::<String>()),
            other => format!("{other:?}"),
        }
    }
}

/// A parsed header.
#[derive(Debug, Clone)]
pub struct GgufHeader {
    pub version: u32,
    pub metadata: BTreeMap<String, MetaValue>,
    /// Under their HF names (GGUF names without a counterpart keep theirs), `start..end`
    /// counted from the end of the header.
    pub tensors: Vec<TensorInfo>,
    /// Bytes of the header, without the padding that follows it.
    pub len: usize,
    /// Data alignment: the padding after the header, and after each tensor.
    pub alignment: u64,
}

/// Why a header could not be parsed yet, or at all.
#[derive(Debug, PartialEq)]
pub enum HeaderError {
    /// The first `needed` bytes are not all there yet.
    Incomplete {
        needed: usize,
    },
    /// A model of another architecture than qwen2 (general.architecture).
    NotQwen2 {
        found: String,
    },
    /// A tensor of an element type this does not read (its GGUF name, and the type's name).
    TensorType {
        name: String,
        type_name: String,
    },
    Bad(String),
}

/// The GGUF element types a tensor may have here.
pub const READABLE_TYPES: &[&str] = &["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q5_0", "Q4_K", "Q6_K"];

type Parse<T> = std::result::Result<T, HeaderError>;

fn bad<T>(problem: impl Into<String>) -> Parse<T> {
    Err(HeaderError::Bad(problem.into()))
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Metadata values read so far (see [`MAX_VALUES`]).
    values: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Parse<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&end| end <= MAX_HEADER);
        let Some(end) = end else {
            return bad(format!(
                "header runs past {} MB at byte {} (a length is impossible)",
                MAX_HEADER >> 20,
                self.pos
            ));
        };
        if end > self.bytes.len() {
            return Err(HeaderError::Incomplete { needed: end });
        }
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Parse<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self) -> Parse<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Parse<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A count of items of at least `item_bytes` each: no larger than the header could hold,
    /// and the bytes for them present before they are parsed (so a large count neither
    /// allocates nor restarts parsing before its bytes arrive).
    fn count(&mut self, what: &str, item_bytes: usize) -> Parse<usize> {
        let n = self.u64()?;
        let item_bytes = item_bytes.max(1);
        if n > (MAX_HEADER / item_bytes) as u64 {
            return bad(format!("{what} count {n} is impossible"));
        }
        let needed = self.pos + n as usize * item_bytes;
        if needed > self.bytes.len() {
            return Err(HeaderError::Incomplete { needed });
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &str) -> Parse<String> {
        let len = self.u64()?;
        if len > MAX_HEADER as u64 {
            return bad(format!("{what} of {len} bytes is impossible"));
        }
        let bytes = self.take(len as usize)?;
        String::from_utf8(bytes.to_vec()).or_else(|_| bad(format!("{what} is not UTF-8")))
    }

    fn value(&mut self, ty: u32, key: &str, depth: usize) -> Parse<MetaValue> {
        self.values += 1;
        if self.values > MAX_VALUES {
            return bad(format!("metadata {key}: more than {MAX_VALUES} values in the header"));
        }
        Ok(match ty {
            0 => MetaValue::UInt(self.array::<1>()?[0].into()),
            1 => MetaValue::Int((self.array::<1>()?[0] as i8).into()),
            2 => MetaValue::UInt(u16::from_le_bytes(self.array()?).into()),
            3 => MetaValue::Int(i16::from_le_bytes(self.array()?).into()),
            4 => MetaValue::UInt(self.u32()?.into()),
            5 => MetaValue::Int(i32::from_le_bytes(self.array()?).into()),
            6 => MetaValue::Float(f32::from_le_bytes(self.array()?).into()),
            7 => match self.array::<1>()?[0] {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => return bad(format!("metadata {key}: bool byte {b}")),
            },
            8 => MetaValue::Str(self.string(&format!("metadata {key}"))?),
            9 => {
                if depth >= MAX_DEPTH {
                    return bad(format!("metadata {key}: arrays nested deeper than {MAX_DEPTH}"));
                }
                let item = self.u32()?;
                let n = self.count(&format!("metadata {key}: array"), value_bytes(item))?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(item, key, depth + 1)?);
                }
                MetaValue::Array(items)
            }
            10 => MetaValue::UInt(self.u64()?),
            11 => MetaValue::Int(i64::from_le_bytes(self.array()?)),
            12 => MetaValue::Float(f64::from_le_bytes(self.array()?)),
            other => return bad(format!("metadata {key}: unknown value type {other}")),
        })
    }
}

/// Fewest bytes a value of type `ty` takes (a string: its length).
fn value_bytes(ty: u32) -> usize {
    match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        _ => 8,
    }
}

/// ggml's names of the tensor types not read here, for a clear error.
fn ggml_type_name(code: u32) -> String {
    let names = [
        (3, "Q4_1"),
        (7, "Q5_1"),
        (9, "Q8_1"),
        (10, "Q2_K"),
        (11, "Q3_K"),
        (13, "Q5_K"),
        (15, "Q8_K"),
        (16, "IQ2_XXS"),
        (17, "IQ2_XS"),
        (18, "IQ3_XXS"),
        (19, "IQ1_S"),
        (20, "IQ4_NL"),
        (21, "IQ3_S"),
        (22, "IQ2_S"),
        (23, "IQ4_XS"),
        (24, "I8"),
        (25, "I16"),
        (26, "I32"),
        (27, "I64"),
        (28, "F64"),
        (29, "IQ1_M"),
        (34, "TQ1_0"),
        (35, "TQ2_0"),
        (39, "MXFP4"),
    ];
    names.iter().find(|(c, _)| *c == code).map_or(format!("number {code}"), |(_, n)| n.to_string())
}

fn tensor_type(code: u32) -> Option<TensorType> {
    match code {
        0 => Some(TensorType::Float(Dtype::F32)),
        1 => Some(TensorType::Float(Dtype::F16)),
        30 => Some(TensorType::Float(Dtype::BF16)),
        _ => BlockType::from_ggml(code).map(TensorType::Blocks),
    }
}

impl GgufHeader {
    /// Parses the header from the file's first bytes (`bytes` may run on into the data).
    pub fn parse(bytes: &[u8]) -> Parse<Self> {
        let mut r = Reader { bytes, pos: 0, values: 0 };
        if r.take(4)? != b"GGUF" {
            return bad("not a GGUF file (the first bytes are not \"GGUF\")");
        }
        let version = r.u32()?;
        if !(2..=3).contains(&version) {
            return bad(format!("GGUF version {version} is not read (versions 2 and 3 are)"));
        }
        let tensor_count = r.count("tensor", 8 + 4 + 4 + 8)?;
        let kv_count = r.count("metadata", 8 + 4 + 1)?;
        let mut metadata = BTreeMap::new();
        for _ in 0..kv_count {
            let key = r.string("a metadata key")?;
            let ty = r.u32()?;
            let value = r.value(ty, &key, 0)?;
            if metadata.insert(key.clone(), value).is_some() {
                return bad(format!("metadata key {key} appears twice"));
            }
        }
        // Another architecture is named as such before its tensors are read: a llama file of
        // Q4_1 tensors is not a Qwen2 file of a type not read.
        if let Some(MetaValue::Str(arch)) = metadata.get("general.architecture")
            && arch != "qwen2"
        {
            return Err(HeaderError::NotQwen2 { found: arch.clone() });
        }
        let alignment = match metadata.get("general.alignment") {
            None => 32,
            Some(MetaValue::UInt(a)) if a.is_power_of_two() => *a,
            Some(MetaValue::UInt(a)) => return bad(format!("general.alignment {a} is not a power of two")),
            Some(other) => return bad(format!("general.alignment is {}, not an unsigned integer", other.describe())),
        };
        let mut tensors = Vec::with_capacity(tensor_count);
        let mut infos = Vec::with_capacity(tensor_count);
        for _ in 0..tensor_count {
            let name = r.string("a tensor name")?;
            let n_dims = r.u32()?;
            if !(1..=4).contains(&n_dims) {
                return bad(format!("tensor {name}: {n_dims} dimensions (1 to 4 are possible)"));
            }
            let mut dims = Vec::with_capacity(n_dims as usize);
            for _ in 0..n_dims {
                dims.push(r.u64()?);
            }
            let code = r.u32()?;
            let offset = r.u64()?;
            infos.push((name, dims, code, offset));
        }
        let len = r.pos;
        let pad = (len as u64).next_multiple_of(alignment) - len as u64;
        for (name, dims, code, offset) in infos {
            let ty = tensor_type(code)
                .ok_or_else(|| HeaderError::TensorType { name: name.clone(), type_name: ggml_type_name(code) })?;
            // Counted in u64: on wasm32 a usize product wraps. Every dim is at most the count,
            // so a count that fits usize makes the usize shape exact.
            let numel = dims
                .iter()
                .try_fold(1u64, |n, &d| n.checked_mul(d))
                .filter(|&n| n > 0 && n < 1 << 40 && usize::try_from(n).is_ok());
            let Some(numel) = numel else {
                return bad(format!("tensor {name}: dimensions {dims:?} are impossible"));
            };
            let shape: Vec<usize> = dims.iter().rev().map(|&d| d as usize).collect();
            if !dims[0].is_multiple_of(ty.unit().0 as u64) {
                return bad(format!("tensor {name}: rows of {} values are not whole {} blocks", dims[0], ty.name()));
            }
            if !offset.is_multiple_of(alignment) {
                return bad(format!("tensor {name}: offset {offset} is not a multiple of the alignment {alignment}"));
            }
            let (block, block_bytes) = ty.unit();
            let bytes = numel / block as u64 * block_bytes as u64; // whole blocks, as rows are
            let start = offset.checked_add(pad).filter(|s| s.checked_add(bytes).is_some());
            let Some(start) = start else {
                return bad(format!("tensor {name}: offset {offset} is impossible"));
            };
            let name = from_gguf_name(&name).unwrap_or(name);
            tensors.push(TensorInfo { name, ty, shape, start, end: start + bytes });
        }
        Ok(GgufHeader { version, metadata, tensors, len, alignment })
    }

    /// A metadata value, or a clear error naming the missing key.
    pub fn get(&self, key: &str) -> crate::Result<&MetaValue> {
        self.metadata.get(key).ok_or_else(|| crate::Error::GgufMetadata(format!("no key {key}")))
    }

    /// An unsigned integer value (any integer type that holds one).
    pub fn uint(&self, key: &str) -> crate::Result<u64> {
        match self.get(key)? {
            MetaValue::UInt(v) => Ok(*v),
            MetaValue::Int(v) if *v >= 0 => Ok(*v as u64),
            other => Err(crate::Error::GgufMetadata(format!("{key} is {}, not a count", other.describe()))),
        }
    }

    /// A string value.
    pub fn str(&self, key: &str) -> crate::Result<&str> {
        match self.get(key)? {
            MetaValue::Str(s) => Ok(s),
            other => Err(crate::Error::GgufMetadata(format!("{key} is {}, not text", other.describe()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readable_types_named_in_errors_are_those_read() {
        let mut read: Vec<String> = (0..64).filter_map(tensor_type).map(TensorType::name).collect();
        let mut named: Vec<String> = READABLE_TYPES.iter().map(|s| s.to_string()).collect();
        read.sort();
        named.sort();
        assert_eq!(read, named);
    }
}
