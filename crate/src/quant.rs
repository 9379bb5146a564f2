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
    /// `quant`; GGUF blocks in a format the kernels read (Q8_0, Q5_0 and Q4_0 blocks as they
    /// are, K-quants requantized to Q8_0).
    pub fn for_stored(ty: TensorType, quant: Option<Quant>) -> Self {
        match (ty, quant) {
            (TensorType::Float(d), None) => WeightFormat::Float(d),
            (TensorType::Float(_), Some(q)) => WeightFormat::Quant(q),
            (TensorType::Blocks(b), _) => WeightFormat::Quant(b.gpu_quant().unwrap_or(Quant::Q8_0)),
        }
    }

    /// Appends whole rows of `cols` values, stored in a file as `ty`, in this format.
    pub fn convert_rows(self, ty: TensorType, bytes: &[u8], cols: usize, out: &mut Vec<u8>) {
        let row_bytes = ty.bytes_of(cols).expect("rows of whole blocks");
        match (ty, self) {
            (TensorType::Float(d), WeightFormat::Float(f)) if d == f => out.extend_from_slice(bytes),
            (TensorType::Blocks(b), WeightFormat::Quant(q)) if b.gpu_quant() == Some(q) => {
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

/// A quantized format of weight matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quant {
    Q8_0,
    Q5_0,
    Q4_0,
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
        }
    }

    /// The GGUF block type laid out by the same rules.
    pub fn block_type(self) -> BlockType {
        match self {
            Quant::Q8_0 => BlockType::Q8_0,
            Quant::Q5_0 => BlockType::Q5_0,
            Quant::Q4_0 => BlockType::Q4_0,
        }
    }

    /// Bytes of one row's quants (Q5_0: and its fifth bits, padded to 16).
    pub fn quant_bytes(self, cols: usize) -> usize {
        match self {
            Quant::Q8_0 => cols,
            Quant::Q5_0 => cols / 2 + (4 * cols / BLOCK).next_multiple_of(16),
            Quant::Q4_0 => cols / 2,
        }
    }

    /// Bytes of one row's scales, padded to 16.
    pub fn scale_bytes(cols: usize) -> usize {
        (2 * cols / BLOCK).next_multiple_of(16)
    }

    /// Bytes of one row on the GPU: quants, then padded scales.
    pub fn row_bytes(self, cols: usize) -> usize {
        self.quant_bytes(cols) + Self::scale_bytes(cols)
    }

    /// Checks that rows of `cols` values can be quantized (whole blocks).
    pub fn check_cols(self, tensor: &str, cols: usize) -> Result<()> {
        if cols == 0 || !cols.is_multiple_of(BLOCK) {
            return Err(Error::Input(format!(
                "{tensor}: {} needs rows of a multiple of {BLOCK} values, not {cols}",
                self.name()
            )));
        }
        Ok(())
    }

    /// Appends one row (`values.len()` a multiple of [`BLOCK`]) in the GPU layout.
    pub fn quantize_row(self, values: &[f32], out: &mut Vec<u8>) {
        let start = out.len();
        let mut scales = Vec::with_capacity(values.len() / BLOCK);
        let mut high_bits = Vec::new();
        for block in values.chunks_exact(BLOCK) {
            let (d, quants) = match self {
                Quant::Q8_0 => quantize_q8_0(block),
                Quant::Q5_0 => quantize_symmetric(block, 16),
                Quant::Q4_0 => quantize_symmetric(block, 8),
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
        let blocks = &blocks[..cols / BLOCK * block_bytes];
        for block in blocks.chunks_exact(block_bytes) {
            match self {
                Quant::Q8_0 => out.extend_from_slice(&block[2..]),
                Quant::Q5_0 => out.extend(nibbles_in_value_order(&block[6..])),
                Quant::Q4_0 => out.extend(nibbles_in_value_order(&block[2..])),
            }
        }
        if self == Quant::Q5_0 {
            for block in blocks.chunks_exact(block_bytes) {
                out.extend_from_slice(&block[2..6]);
            }
            out.resize(start + self.quant_bytes(cols), 0);
        }
        for block in blocks.chunks_exact(block_bytes) {
            out.extend_from_slice(&block[..2]);
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
