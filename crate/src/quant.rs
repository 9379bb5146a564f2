//! Quantized weights: blocks of 32 values with one f16 scale each, llama.cpp's Q8_0, Q5_0 and
//! Q4_0 schemes (the same scale and rounding rules, so a GGUF block converts exactly).
//!
//! - Q8_0: `d = max|x| / 127`, `q = round(x / d)` in -127..=127, `x ≈ q * d`.
//! - Q5_0: `d = m / -16` where `m` is the value of largest magnitude (with its sign),
//!   `q = min(31, trunc(x / d + 16.5))` in 0..=31, `x ≈ (q - 16) * d`.
//! - Q4_0: `d = m / -8`, `q = min(15, trunc(x / d + 8.5))` in 0..=15, `x ≈ (q - 8) * d`.
//!
//! As with llama.cpp, `d` is rounded to f16 when stored, and values dequantize with that f16 `d`.
//!
//! GPU layout, per matrix row of `cols` values (`cols` a multiple of 32): first the quants, in
//! value order (Q8_0: one signed byte each; Q4_0 and Q5_0: one nibble each, value i of a block
//! in bits 4(i % 8) of its word i / 8), for Q5_0 then each block's fifth bits as one u32 (bit i
//! for value i) padded to 16 bytes, then the row's scales as f16, two per u32 word (block 2j in
//! the low half), zero-padded to 16 bytes. Rows therefore start 16-byte aligned, so `matvec`
//! reads them as `vec4<u32>` (one load is 16 Q8_0 values or one whole Q4_0 or Q5_0 block's
//! nibbles), and row chunks split the same way as 16-bit matrices.

use crate::error::{Error, Result};
use crate::gguf::BlockType;
use crate::weights::{Dtype, TensorType};

/// How a weight matrix is stored on the GPU: in its file's float type, or quantized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    Float(Dtype),
    Quant(Quant),
}

impl WeightFormat {
    /// The bench JSON's name: `bf16`, `f16`, `f32`, `q8_0`, `q4_0`.
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::Float(Dtype::BF16) => "bf16",
            WeightFormat::Float(Dtype::F16) => "f16",
            WeightFormat::Float(Dtype::F32) => "f32",
            WeightFormat::Quant(q) => q.name(),
        }
    }

    /// The `DTYPE` override of `packed.wgsl`.
    pub fn shader_code(self) -> u32 {
        match self {
            WeightFormat::Float(Dtype::BF16) => 0,
            WeightFormat::Float(Dtype::F16) => 1,
            WeightFormat::Float(Dtype::F32) => 2,
            WeightFormat::Quant(Quant::Q8_0) => 3,
            WeightFormat::Quant(Quant::Q4_0) => 4,
            WeightFormat::Quant(Quant::Q5_0) => 5,
            WeightFormat::Quant(Quant::Q4_K) => 6,
            WeightFormat::Quant(Quant::Q6_K) => 7,
        }
    }

    /// Bytes of one row of `cols` values.
    pub fn row_bytes(self, cols: usize) -> usize {
        match self {
            WeightFormat::Float(d) => cols * d.size(),
            WeightFormat::Quant(q) => q.row_bytes(cols),
        }
    }

    /// Rows of `cols` values in this format (16-bit types rounded to nearest even).
    pub fn encode(self, values: &[f32], cols: usize) -> Vec<u8> {
        match self {
            WeightFormat::Float(d) => d.from_f32(values),
            WeightFormat::Quant(q) => {
                let mut out = Vec::with_capacity(values.len() / cols * q.row_bytes(cols));
                for row in values.chunks_exact(cols) {
                    q.quantize_row(row, &mut out);
                }
                out
            }
        }
    }

    /// How a matrix a file stores as `ty` is kept on the GPU: floats as stored, or quantized to
    /// `quant`; GGUF blocks as they are (every block type has a GPU format the kernels read).
    pub fn for_stored(ty: TensorType, quant: Option<Quant>) -> Self {
        match (ty, quant) {
            (TensorType::Float(d), None) => WeightFormat::Float(d),
            (TensorType::Float(_), Some(q)) => WeightFormat::Quant(q),
            (TensorType::Blocks(b), _) => WeightFormat::Quant(b.gpu_quant()),
        }
    }

    /// Appends whole rows of `cols` values, stored in a file as `ty`, in this format.
    pub fn convert_rows(self, ty: TensorType, bytes: &[u8], cols: usize, out: &mut Vec<u8>) {
        let row_bytes = ty.bytes_of(cols).expect("rows of whole blocks");
        match (ty, self) {
            (TensorType::Float(d), WeightFormat::Float(f)) if d == f => out.extend_from_slice(bytes),
            (TensorType::Blocks(b), WeightFormat::Quant(q)) if b.gpu_quant() == q => {
                for row in bytes.chunks_exact(row_bytes) {
                    q.row_from_gguf(row, cols, out);
                }
            }
            _ => {
                let mut values = Vec::with_capacity(bytes.len() / row_bytes * cols);
                ty.to_f32(bytes, &mut values);
                out.extend(self.encode(&values, cols));
            }
        }
    }

    /// Rows of `cols` values back from this format, as the kernels compute them.
    pub fn decode(self, bytes: &[u8], cols: usize) -> Vec<f32> {
        match self {
            WeightFormat::Float(d) => {
                let mut out = Vec::with_capacity(bytes.len() / d.size());
                d.to_f32(bytes, &mut out);
                out
            }
            WeightFormat::Quant(q) => {
                bytes.chunks_exact(q.row_bytes(cols)).flat_map(|r| q.dequantize_row(r, cols)).collect()
            }
        }
    }

    /// `values` (rows of `cols`) stored and read back: what a kernel sees.
    pub fn round(self, values: &[f32], cols: usize) -> Vec<f32> {
        match self {
            WeightFormat::Float(d) => d.round(values),
            WeightFormat::Quant(q) => q.round(values, cols),
        }
    }
}

/// Values per block, each block with one scale.
pub const BLOCK: usize = 32;

/// Values per K-quant super-block.
const K_BLOCK: usize = 256;

/// Bytes per Q6_K super-block after the quants on the GPU: 16 scales, `d`, 2 zero bytes.
const Q6K_HEAD: usize = 20;

/// Where value `v` (0..256) of a GGUF Q6_K block keeps its low nibble and high 2 bits: `ql` and
/// `qh` hold the two halves of 128 values in turn; within a half, groups of 32 share `ql` bytes
/// (groups 0 and 2 low and high nibble of bytes 0..32, groups 1 and 3 of bytes 32..64) and each
/// `qh` byte holds the 2 bits of the four groups.
fn q6k_low(block: &[u8], v: usize) -> u8 {
    let (half, group, l) = (v / 128, v % 128 / 32, v % 32);
    (block[64 * half + 32 * (group % 2) + l] >> (4 * (group / 2))) & 15
}
fn q6k_high(block: &[u8], v: usize) -> u8 {
    let (half, group, l) = (v / 128, v % 128 / 32, v % 32);
    (block[128 + 32 * half + l] >> (2 * group)) & 3
}

/// A quantized format of weight matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)] // ggml's names
pub enum Quant {
    Q8_0,
    Q5_0,
    Q4_0,
    /// llama.cpp's Q4_K, for GGUF files (not offered for quantizing on load): super-blocks of
    /// 256 values in eight blocks of 32, each with a 6-bit scale and min under the super-block's
    /// f16 `d` and `dmin`: `x = d * scale * q - dmin * min`, q a nibble.
    Q4_K,
    /// llama.cpp's Q6_K, for GGUF files: super-blocks of 256 values in sixteen blocks of 16,
    /// each with a signed 8-bit scale under the super-block's f16 `d`: `x = d * scale * (q - 32)`,
    /// q 6 bits (a nibble and 2 high bits).
    Q6_K,
}

impl std::str::FromStr for Quant {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
        match name {
            "q8_0" => Ok(Quant::Q8_0),
            "q5_0" => Ok(Quant::Q5_0),
            "q4_0" => Ok(Quant::Q4_0),
            _ => Err(Error::Input(format!("quantization {name:?}: use q8_0, q5_0 or q4_0"))),
        }
    }
}

impl Quant {
    /// The CLI's and the bench JSON's name.
    pub fn name(self) -> &'static str {
        match self {
            Quant::Q8_0 => "q8_0",
            Quant::Q5_0 => "q5_0",
            Quant::Q4_0 => "q4_0",
            Quant::Q4_K => "q4_k",
            Quant::Q6_K => "q6_k",
        }
    }

    /// The GGUF block type laid out by the same rules.
    pub fn block_type(self) -> BlockType {
        match self {
            Quant::Q8_0 => BlockType::Q8_0,
            Quant::Q5_0 => BlockType::Q5_0,
            Quant::Q4_0 => BlockType::Q4_0,
            Quant::Q4_K => BlockType::Q4_K,
            Quant::Q6_K => BlockType::Q6_K,
        }
    }

    /// Bytes of one row's quants (Q5_0: and its fifth bits, padded to 16; Q6_K: and its high
    /// 2 bits, 4 values a byte).
    pub fn quant_bytes(self, cols: usize) -> usize {
        match self {
            Quant::Q8_0 => cols,
            Quant::Q5_0 => cols / 2 + (4 * cols / BLOCK).next_multiple_of(16),
            Quant::Q4_0 | Quant::Q4_K => cols / 2,
            Quant::Q6_K => cols / 2 + cols / 4,
        }
    }

    /// Bytes of one row on the GPU: quants, then scales (f16 per block, padded to 16; Q4_K: 16
    /// bytes per super-block, `d`, `dmin` and the packed scales and mins as GGUF has them;
    /// Q6_K: 20 bytes per super-block, its 16 scales, `d` and 2 zero bytes, padded to 16).
    pub fn row_bytes(self, cols: usize) -> usize {
        let scales = match self {
            Quant::Q4_K => cols / K_BLOCK * 16,
            Quant::Q6_K => (cols / K_BLOCK * Q6K_HEAD).next_multiple_of(16),
            _ => (2 * cols / BLOCK).next_multiple_of(16),
        };
        self.quant_bytes(cols) + scales
    }

    /// Checks that rows of `cols` values can be quantized (whole blocks).
    pub fn check_cols(self, tensor: &str, cols: usize) -> Result<()> {
        let block = self.block_type().values();
        if cols == 0 || !cols.is_multiple_of(block) {
            return Err(Error::Input(format!(
                "{tensor}: {} needs rows of a multiple of {block} values, not {cols}",
                self.name()
            )));
        }
        Ok(())
    }

    /// Appends one row (`values.len()` a multiple of [`BLOCK`], of 256 for Q4_K) in the GPU
    /// layout.
    pub fn quantize_row(self, values: &[f32], out: &mut Vec<u8>) {
        // K-quants: GGUF super-blocks first, then the GPU layout.
        let blocks: Vec<u8> = match self {
            Quant::Q4_K => values.chunks_exact(K_BLOCK).flat_map(quantize_q4_k_block).collect(),
            Quant::Q6_K => values.chunks_exact(K_BLOCK).flat_map(quantize_q6_k_block).collect(),
            _ => Vec::new(),
        };
        if !blocks.is_empty() {
            return self.row_from_gguf(&blocks, values.len(), out);
        }
        let start = out.len();
        let mut scales = Vec::with_capacity(values.len() / BLOCK);
        let mut high_bits = Vec::new();
        for block in values.chunks_exact(BLOCK) {
            let (d, quants) = match self {
                Quant::Q8_0 => quantize_q8_0(block),
                Quant::Q5_0 => quantize_symmetric(block, 16),
                // (the K-quants returned above)
                Quant::Q4_0 | Quant::Q4_K | Quant::Q6_K => quantize_symmetric(block, 8),
            };
            scales.push(d);
            match self {
                Quant::Q8_0 => out.extend(quants.iter().map(|&q| q as u8)),
                _ => out.extend(quants.chunks_exact(2).map(|q| (q[0] as u8 & 15) | ((q[1] as u8 & 15) << 4))),
            }
            let bits = quants.iter().enumerate().fold(0u32, |h, (i, &q)| h | (u32::from(q as u8 >> 4) << i));
            high_bits.push(bits);
        }
        if self == Quant::Q5_0 {
            out.extend(high_bits.iter().flat_map(|h| h.to_le_bytes()));
            out.resize(start + self.quant_bytes(values.len()), 0);
        }
        out.extend(scales.iter().flat_map(|d| d.to_le_bytes()));
        out.resize(start + self.row_bytes(values.len()), 0);
    }

    /// One row of `cols` values back from the GPU layout, as the kernels compute them.
    pub fn dequantize_row(self, row: &[u8], cols: usize) -> Vec<f32> {
        let scales = &row[self.quant_bytes(cols)..];
        let high = &row[cols / 2..];
        (0..cols)
            .map(|i| {
                let b = i / BLOCK;
                let d = half::f16::from_le_bytes([scales[2 * b], scales[2 * b + 1]]).to_f32();
                let nibble = (row[i / 2] >> (4 * (i % 2))) & 15;
                let q = match self {
                    Quant::Q8_0 => f32::from(row[i] as i8),
                    Quant::Q5_0 => f32::from(nibble | (((high[4 * b + i % BLOCK / 8] >> (i % 8)) & 1) << 4)) - 16.0,
                    Quant::Q4_0 => f32::from(nibble) - 8.0,
                    Quant::Q4_K => {
                        // The super-block's d, dmin and packed scales, then ggml's arithmetic.
                        let head = &row[cols / 2 + 16 * (i / K_BLOCK)..][..16];
                        let half = |at: usize| half::f16::from_le_bytes([head[at], head[at + 1]]).to_f32();
                        let (scale, min) = crate::gguf::scale_min_k4(b % 8, &head[4..]);
                        return half(0) * f32::from(scale) * f32::from(nibble) - half(2) * f32::from(min);
                    }
                    Quant::Q6_K => {
                        // The high 2 bits, then the super-block's scale of this 16 and its d.
                        let high = (row[cols / 2 + i / 4] >> (2 * (i % 4))) & 3;
                        let head = &row[self.quant_bytes(cols) + Q6K_HEAD * (i / K_BLOCK)..][..Q6K_HEAD];
                        let d = half::f16::from_le_bytes([head[16], head[17]]).to_f32();
                        let scale = f32::from(head[i % K_BLOCK / 16] as i8);
                        return d * scale * (f32::from(nibble | (high << 4)) - 32.0);
                    }
                };
                q * d
            })
            .collect()
    }

    /// Appends one row of `cols` values given in GGUF blocks of this type, in the GPU layout:
    /// the same scales and quants, rearranged.
    pub fn row_from_gguf(self, blocks: &[u8], cols: usize, out: &mut Vec<u8>) {
        let start = out.len();
        let block_bytes = self.block_type().bytes();
        let blocks = &blocks[..cols / self.block_type().values() * block_bytes];
        for block in blocks.chunks_exact(block_bytes) {
            match self {
                Quant::Q8_0 => out.extend_from_slice(&block[2..]),
                Quant::Q5_0 => out.extend(nibbles_in_value_order(&block[6..])),
                Quant::Q4_0 => out.extend(nibbles_in_value_order(&block[2..])),
                // Eight blocks of 32: block 2p's values in the low nibbles of bytes 32p..32p+32,
                // block 2p + 1's in the high ones.
                Quant::Q4_K => out.extend((0..K_BLOCK / 2).map(|k| {
                    let nibble = |v: usize| (block[16 + 32 * (v / 64) + v % 32] >> (4 * (v / 32 % 2))) & 15;
                    nibble(2 * k) | (nibble(2 * k + 1) << 4)
                })),
                Quant::Q6_K => {
                    out.extend((0..K_BLOCK / 2).map(|k| q6k_low(block, 2 * k) | (q6k_low(block, 2 * k + 1) << 4)))
                }
            }
        }
        match self {
            Quant::Q5_0 => blocks.chunks_exact(block_bytes).for_each(|b| out.extend_from_slice(&b[2..6])),
            Quant::Q6_K => blocks.chunks_exact(block_bytes).for_each(|b| {
                out.extend(
                    (0..K_BLOCK / 4).map(|k| (0..4).fold(0, |byte, j| byte | (q6k_high(b, 4 * k + j) << (2 * j)))),
                )
            }),
            _ => {}
        }
        out.resize(start + self.quant_bytes(cols), 0);
        for block in blocks.chunks_exact(block_bytes) {
            match self {
                Quant::Q4_K => out.extend_from_slice(&block[..16]),
                Quant::Q6_K => out.extend(block[192..210].iter().copied().chain([0, 0])),
                _ => out.extend_from_slice(&block[..2]),
            }
        }
        out.resize(start + self.row_bytes(cols), 0);
    }

    /// `values` (whole rows of `cols`) quantized and back: what a kernel sees.
    pub fn round(self, values: &[f32], cols: usize) -> Vec<f32> {
        let mut row = Vec::with_capacity(self.row_bytes(cols));
        values
            .chunks_exact(cols)
            .flat_map(|r| {
                row.clear();
                self.quantize_row(r, &mut row);
                self.dequantize_row(&row, cols)
            })
            .collect()
    }
}

/// llama.cpp's `quantize_row_q8_0_ref` for one block: the f16 scale and 32 signed quants.
fn quantize_q8_0(x: &[f32]) -> (half::f16, Vec<i8>) {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    (half::f16::from_f32(d), x.iter().map(|v| (v * id).round() as i8).collect())
}

/// A Q4_K super-block of 256 values in GGUF's layout, by a plain rule: each block of 32 gets
/// scale `(max - min) / 15` and min `-min` (min at most 0), both rounded to 6 bits under the
/// super-block's f16 `d` and `dmin`. Simpler than llama.cpp's search (which GGUF files come
/// with); it serves tests and the CPU reference's checks of the layout.
fn quantize_q4_k_block(x: &[f32]) -> Vec<u8> {
    let ranges: Vec<(f32, f32)> = x
        .chunks_exact(BLOCK)
        .map(|b| {
            let lo = b.iter().fold(0.0f32, |m, &v| m.min(v));
            let hi = b.iter().fold(lo, |m, &v| m.max(v));
            ((hi - lo) / 15.0, -lo)
        })
        .collect();
    let d = half::f16::from_f32(ranges.iter().fold(0.0f32, |m, r| m.max(r.0)) / 63.0);
    let dmin = half::f16::from_f32(ranges.iter().fold(0.0f32, |m, r| m.max(r.1)) / 63.0);
    let six = |v: f32, unit: f32| if unit > 0.0 { (v / unit).round().clamp(0.0, 63.0) as u8 } else { 0 };
    let sc: Vec<u8> = ranges.iter().map(|r| six(r.0, d.to_f32())).collect();
    let mn: Vec<u8> = ranges.iter().map(|r| six(r.1, dmin.to_f32())).collect();
    let mut block = [d.to_le_bytes(), dmin.to_le_bytes()].concat();
    let mut packed = [0u8; 12];
    for j in 0..4 {
        packed[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6);
        packed[j + 4] = (mn[j] & 63) | ((mn[j + 4] >> 4) << 6);
        packed[j + 8] = (sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4);
    }
    block.extend(packed);
    let mut qs = [0u8; 128];
    for (j, b) in x.chunks_exact(BLOCK).enumerate() {
        let (d1, m1) = (d.to_f32() * f32::from(sc[j]), dmin.to_f32() * f32::from(mn[j]));
        for (i, &v) in b.iter().enumerate() {
            let q = if d1 > 0.0 { ((v + m1) / d1).round().clamp(0.0, 15.0) as u8 } else { 0 };
            qs[32 * (j / 2) + i] |= q << (4 * (j % 2));
        }
    }
    block.extend(qs);
    block
}

/// A Q6_K super-block of 256 values in GGUF's layout, by a plain rule: each block of 16 gets
/// scale `max|x| / 31`, rounded to 8 bits under the super-block's f16 `d`; `q = round(x / (d *
/// scale))` in -32..=31. For tests (GGUF files bring their own).
fn quantize_q6_k_block(x: &[f32]) -> Vec<u8> {
    let scales: Vec<f32> = x.chunks_exact(16).map(|b| b.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 31.0).collect();
    let d = half::f16::from_f32(scales.iter().fold(0.0f32, |m, &s| m.max(s)) / 127.0);
    let sc: Vec<i8> = scales
        .iter()
        .map(|&s| if d.to_f32() > 0.0 { (s / d.to_f32()).round().clamp(0.0, 127.0) as i8 } else { 0 })
        .collect();
    let mut block = vec![0u8; 210];
    for (v, &value) in x.iter().enumerate() {
        let unit = d.to_f32() * f32::from(sc[v / 16]);
        let q = if unit > 0.0 { (value / unit).round().clamp(-32.0, 31.0) as i8 } else { 0 };
        let q = (q + 32) as u8;
        let (half, group, l) = (v / 128, v % 128 / 32, v % 32);
        block[64 * half + 32 * (group % 2) + l] |= (q & 15) << (4 * (group / 2));
        block[128 + 32 * half + l] |= (q >> 4) << (2 * group);
    }
    block[192..208].copy_from_slice(&sc.iter().map(|&s| s as u8).collect::<Vec<_>>());
    block[208..210].copy_from_slice(&d.to_le_bytes());
    block
}

/// A GGUF block's 16 bytes of 4-bit quants (byte j: value j in its low nibble, value j + 16 in
/// its high one) in value order, two per byte, low nibble first.
fn nibbles_in_value_order(qs: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let nibble = |v: usize| (qs[v % 16] >> (4 * (v / 16))) & 15;
    (0..BLOCK / 2).map(move |j| nibble(2 * j) | (nibble(2 * j + 1) << 4))
}

/// llama.cpp's `quantize_row_q4_0_ref` (`half` 8) and `quantize_row_q5_0_ref` (`half` 16) for
/// one block: the f16 scale and 32 quants in 0..2 * half.
fn quantize_symmetric(x: &[f32], half: i8) -> (half::f16, Vec<i8>) {
    let max = x.iter().fold(0.0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
    let d = max / -f32::from(half);
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let bias = f32::from(half) + 0.5;
    (half::f16::from_f32(d), x.iter().map(|v| ((v * id + bias) as i8).min(2 * half - 1)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(n: usize) -> Vec<f32> {
        (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 40.0).collect()
    }

    #[test]
    fn q8_0_matches_the_reference_rule_and_layout() {
        let mut x = vec![0.0f32; 32];
        x[0] = 127.0; // the largest magnitude: d = 1
        x[1] = -63.5; // rounds away from zero
        x[2] = 0.4;
        let mut row = Vec::new();
        Quant::Q8_0.quantize_row(&x, &mut row);
        assert_eq!(row.len(), 32 + 16);
        assert_eq!(&row[..3], &[127u8, (-64i8) as u8, 0]);
        assert_eq!(half::f16::from_le_bytes([row[32], row[33]]).to_f32(), 1.0);
        assert!(row[34..].iter().all(|&b| b == 0), "scales padded with zeros");
    }

    #[test]
    fn q4_0_matches_the_reference_rule_and_layout() {
        let mut x = vec![0.0f32; 32];
        x[0] = -8.0; // the largest magnitude: d = -8 / -8 = 1
        x[1] = 7.0;
        x[2] = 7.6; // 7.6 + 8.5 = 16.1 -> clamped to 15
        x[3] = -0.4; // -0.4 + 8.5 = 8.1 -> 8
        let mut row = Vec::new();
        Quant::Q4_0.quantize_row(&x, &mut row);
        assert_eq!(row.len(), 16 + 16);
        // value 0 -> q 0, value 1 -> q 15; value 2 -> 15, value 3 -> 8; zeros -> 8.
        assert_eq!(&row[..3], &[0xf0, 0x8f, 0x88]);
        assert_eq!(half::f16::from_le_bytes([row[16], row[17]]).to_f32(), 1.0);
        let back = Quant::Q4_0.dequantize_row(&row, 32);
        assert_eq!(&back[..4], &[-8.0, 7.0, 7.0, 0.0]);
    }

    /// A row of 512 values in GGUF `blocks` keeps `row_bytes` on the GPU and dequantizes there
    /// exactly as ggml dequantizes the blocks.
    fn assert_gguf_row_dequantizes_as_ggml(quant: Quant, ty: BlockType, blocks: &[u8], row_bytes: usize) {
        let mut row = Vec::new();
        quant.row_from_gguf(blocks, 512, &mut row);
        assert_eq!(row.len(), quant.row_bytes(512));
        assert_eq!(row.len(), row_bytes);
        let mut ggml = Vec::new();
        ty.dequantize(blocks, &mut ggml);
        assert_eq!(quant.dequantize_row(&row, 512), ggml);
    }

    #[test]
    fn q4_k_keeps_ggml_layout_and_values_within_a_step() {
        let x = ramp(2 * 512);
        let back = Quant::Q4_K.round(&x, 512);
        for (block, got) in x.chunks(BLOCK).zip(back.chunks(BLOCK)) {
            let lo = block.iter().fold(0.0f32, |m, &v| m.min(v));
            let hi = block.iter().fold(lo, |m, &v| m.max(v));
            // A step of (hi - lo) / 15, with its 6-bit scale and min rounded: a step at most.
            let step = (hi - lo) / 15.0;
            for (a, b) in block.iter().zip(got) {
                assert!((a - b).abs() <= step, "{a} -> {b} (step {step})");
            }
        }
        // GGUF blocks come back exactly as ggml dequantizes them.
        let blocks: Vec<u8> = x[..512].chunks(K_BLOCK).flat_map(quantize_q4_k_block).collect();
        assert_gguf_row_dequantizes_as_ggml(Quant::Q4_K, BlockType::Q4_K, &blocks, 256 + 2 * 16);
        assert!(Quant::Q4_K.check_cols("w", 896).is_err(), "rows of whole super-blocks");
    }

    #[test]
    fn q6_k_keeps_ggml_layout_and_values_within_a_step() {
        let x = ramp(2 * 512);
        let back = Quant::Q6_K.round(&x, 512);
        for (block, got) in x.chunks(16).zip(back.chunks(16)) {
            // A step of max|x| / 31, with the 8-bit scale rounded: a step at most.
            let step = block.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 31.0;
            for (a, b) in block.iter().zip(got) {
                assert!((a - b).abs() <= step, "{a} -> {b} (step {step})");
            }
        }
        let blocks: Vec<u8> = x[..512].chunks(K_BLOCK).flat_map(quantize_q6_k_block).collect();
        assert_gguf_row_dequantizes_as_ggml(Quant::Q6_K, BlockType::Q6_K, &blocks, 256 + 128 + 48);
    }

    #[test]
    fn round_trips_stay_within_a_step() {
        let x = ramp(3 * 64);
        for q in [Quant::Q8_0, Quant::Q5_0, Quant::Q4_0] {
            let back = q.round(&x, 64);
            for (block, got) in x.chunks(BLOCK).zip(back.chunks(BLOCK)) {
                let amax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                // Half a step (Q4_0: a whole step at the end opposite the largest value, where
                // the quants stop at +7), plus the largest quant times the f16 rounding of d.
                let (step, top, steps) = match q {
                    Quant::Q8_0 => (amax / 127.0, 127.0, 0.5),
                    Quant::Q5_0 => (amax / 16.0, 16.0, 1.0),
                    Quant::Q4_0 => (amax / 8.0, 8.0, 1.0),
                    Quant::Q4_K | Quant::Q6_K => unreachable!("not in the list"),
                };
                let bound = steps * step + top * step / 2048.0 + 1e-6;
                for (a, b) in block.iter().zip(got) {
                    assert!((a - b).abs() <= bound, "{q:?}: {a} -> {b}");
                }
            }
        }
        assert_eq!(Quant::Q8_0.round(&[0.0; 32], 32), vec![0.0; 32]);
        assert!(Quant::Q4_0.check_cols("w", 48).is_err());
        assert_eq!(Quant::row_bytes(Quant::Q4_0, 896), 448 + 64);
    }
}
