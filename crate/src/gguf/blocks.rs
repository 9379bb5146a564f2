//! GGUF's block-quantized tensor types and their dequantization, as ggml defines them
//! (`dequantize_row_*` in ggml-quants.c, checked against the `gguf` Python package's
//! dequantization by `tests/gguf_blocks.rs`).
//!
//! A block holds a fixed number of values (32, or 256 for the K-quants) in a fixed number of
//! bytes; a row of a matrix is a whole number of blocks. Arithmetic order follows ggml's
//! (scale products first), so values come out bit-equal to llama.cpp's.

use half::f16;

use crate::quant::Quant;

/// The block-quantized types onetoken reads: what llama.cpp's Q8_0 and Q4_K_M files of
/// Qwen2.5 contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)] // ggml's names
pub enum BlockType {
    Q4_0,
    Q5_0,
    Q8_0,
    Q4_K,
    Q6_K,
}

/// Values per K-quant super-block.
const QK_K: usize = 256;

impl BlockType {
    /// The type from GGUF's `ggml_type` number, when it is a block type read here.
    pub fn from_ggml(code: u32) -> Option<Self> {
        Some(match code {
            2 => BlockType::Q4_0,
            6 => BlockType::Q5_0,
            8 => BlockType::Q8_0,
            12 => BlockType::Q4_K,
            14 => BlockType::Q6_K,
            _ => return None,
        })
    }

    /// ggml's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            BlockType::Q4_0 => "Q4_0",
            BlockType::Q5_0 => "Q5_0",
            BlockType::Q8_0 => "Q8_0",
            BlockType::Q4_K => "Q4_K",
            BlockType::Q6_K => "Q6_K",
        }
    }

    /// Values per block.
    pub fn values(self) -> usize {
        match self {
            BlockType::Q4_0 | BlockType::Q5_0 | BlockType::Q8_0 => 32,
            BlockType::Q4_K | BlockType::Q6_K => QK_K,
        }
    }

    /// Bytes per block.
    pub fn bytes(self) -> usize {
        match self {
            BlockType::Q4_0 => 2 + 16,
            BlockType::Q5_0 => 2 + 4 + 16,
            BlockType::Q8_0 => 2 + 32,
            BlockType::Q4_K => 2 + 2 + 12 + 128,
            BlockType::Q6_K => 128 + 64 + 16 + 2,
        }
    }

    /// The GPU format that holds these blocks as they are: the same scales and quants,
    /// rearranged for the kernels.
    pub fn gpu_quant(self) -> Quant {
        match self {
            BlockType::Q8_0 => Quant::Q8_0,
            BlockType::Q5_0 => Quant::Q5_0,
            BlockType::Q4_0 => Quant::Q4_0,
            BlockType::Q4_K => Quant::Q4_K,
            BlockType::Q6_K => Quant::Q6_K,
        }
    }

    /// Appends the values of whole blocks (`bytes.len()` a multiple of [`Self::bytes`]).
    pub fn dequantize(self, bytes: &[u8], out: &mut Vec<f32>) {
        for block in bytes.chunks_exact(self.bytes()) {
            match self {
                BlockType::Q4_0 => q4_0(block, out),
                BlockType::Q5_0 => q5_0(block, out),
                BlockType::Q8_0 => q8_0(block, out),
                BlockType::Q4_K => q4_k(block, out),
                BlockType::Q6_K => q6_k(block, out),
            }
        }
    }
}

fn half_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// `d: f16, qs: [i8; 32]`: `x = q * d`.
fn q8_0(b: &[u8], out: &mut Vec<f32>) {
    let d = half_at(b, 0);
    out.extend(b[2..34].iter().map(|&q| f32::from(q as i8) * d));
}

/// `d: f16, qs: [u8; 16]`, value j in the low nibble of byte j, value j + 16 in its high one:
/// `x = (q - 8) * d`.
fn q4_0(b: &[u8], out: &mut Vec<f32>) {
    let (d, qs) = (half_at(b, 0), &b[2..18]);
    out.extend(qs.iter().map(|&q| f32::from(q & 15) - 8.0).map(|q| q * d));
    out.extend(qs.iter().map(|&q| f32::from(q >> 4) - 8.0).map(|q| q * d));
}

/// `d: f16, qh: u32, qs: [u8; 16]`: Q4_0's nibbles with a fifth bit each from `qh` (bit j for
/// value j): `x = (q - 16) * d`.
fn q5_0(b: &[u8], out: &mut Vec<f32>) {
    let d = half_at(b, 0);
    out.extend(q5_0_quants(b).map(|q| f32::from(q) * d));
}

/// A Q5_0 block's `q - 16`, in -16..=15, in value order.
fn q5_0_quants(b: &[u8]) -> [i8; 32] {
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    std::array::from_fn(|j| {
        let nibble = if j < 16 { qs[j] & 15 } else { qs[j - 16] >> 4 };
        (nibble | ((((qh >> j) & 1) as u8) << 4)) as i8 - 16
    })
}

/// `d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128]`: eight sub-blocks of 32 with a 6-bit
/// scale and a 6-bit min each; `x = d * scale * q - dmin * min`, q a nibble.
fn q4_k(b: &[u8], out: &mut Vec<f32>) {
    let (d, dmin) = (half_at(b, 0), half_at(b, 2));
    let (scales, qs) = (&b[4..16], &b[16..144]);
    for (pair, q) in qs.chunks_exact(32).enumerate() {
        for (half, shift) in [(0, 0), (1, 4)] {
            let (sc, m) = scale_min_k4(2 * pair + half, scales);
            let (d1, m1) = (d * f32::from(sc), dmin * f32::from(m));
            out.extend(q.iter().map(|&v| d1 * f32::from((v >> shift) & 15) - m1));
        }
    }
}

/// Scale and min of Q4_K sub-block `j`, packed 6 bits each into 12 bytes.
pub(crate) fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        ((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4))
    }
}

/// `ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16`: sixteen sub-blocks of 16 with a
/// signed 8-bit scale each; `x = d * scale * (q - 32)`, q 6 bits (4 from `ql`, 2 from `qh`).
fn q6_k(b: &[u8], out: &mut Vec<f32>) {
    let d = half_at(b, 208);
    let start = out.len();
    out.resize(start + QK_K, 0.0);
    let y = &mut out[start..];
    for half in 0..2 {
        let (ql, qh) = (&b[64 * half..64 * half + 64], &b[128 + 32 * half..128 + 32 * half + 32]);
        let sc = &b[192 + 8 * half..192 + 8 * half + 8];
        let y = &mut y[128 * half..128 * half + 128];
        for l in 0..32 {
            let is = l / 16;
            let q = |low: u8, shift: u32| f32::from(((low & 15) | (((qh[l] >> shift) & 3) << 4)) as i8 - 32);
            let scale = |i: usize| d * f32::from(sc[is + i] as i8);
            y[l] = scale(0) * q(ql[l], 0);
            y[l + 32] = scale(2) * q(ql[l + 32], 2);
            y[l + 64] = scale(4) * q(ql[l] >> 4, 4);
            y[l + 96] = scale(6) * q(ql[l + 32] >> 4, 6);
        }
    }
}
