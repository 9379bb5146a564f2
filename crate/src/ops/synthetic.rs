//! Synthetic weights generated on the GPU (values defined in [`crate::synthetic`]): a model of a
//! real checkpoint's shapes with no download.

use std::collections::HashMap;

use super::{Pass, SYNTHETIC, div_up, grid_2d, uniform, work, workgroup};
use crate::config::Qwen2Config;
use crate::error::Result;
use crate::gpu::{Dispatcher, Gpu, GpuWeights, PackedMatrix, Tensor};
use crate::hf_names::expected_tensors;
use crate::quant::{Quant, WeightFormat};
use crate::synthetic;
use crate::weights::Dtype;

uniform!(
    /// synthetic.wgsl's `Shape`.
    SyntheticShape { seed: u32, first: u32, pairs: u32, scale: f32 }
);

/// Threads per workgroup of the generator, a pair of values each.
const SYNTHETIC_WORKGROUP: u32 = 256;

/// Fills a matrix with the synthetic weights of tensor `seed` (see `synthetic.wgsl`).
pub fn fill_synthetic(gpu: &Gpu, pass: &mut Pass, m: &PackedMatrix, seed: u32, scale: f32) {
    let kernel = gpu.kernel(&SYNTHETIC, &[workgroup(SYNTHETIC_WORKGROUP)]);
    for c in m.chunks() {
        let pairs = c.rows * m.cols() / 2;
        let shape = SyntheticShape { seed, first: (c.row_start * m.cols()) as u32, pairs: pairs as u32, scale };
        let group = gpu.bind(&kernel, &[&gpu.uniform("synthetic", &shape), &c.buffer]);
        let (x, y) = grid_2d(div_up(pairs, SYNTHETIC_WORKGROUP as usize));
        pass.dispatch(&kernel, &group, (x, y, 1), work(c.rows as u64 * m.row_bytes(), 0));
    }
}

/// A model of `config`'s shapes with synthetic bf16 weights, generated on the GPU in one
/// submit (norm weights and biases, a few KB, come from the CPU). With a [`Quant`], the same
/// values are quantized on the CPU, a few rows at a time, and uploaded.
pub fn synthetic_weights(gpu: &Gpu, config: &Qwen2Config, quant: Option<Quant>) -> Result<GpuWeights> {
    config.validate()?;
    let mut tensors = HashMap::new();
    let mut encoder = gpu.device().create_command_encoder(&Default::default());
    {
        let mut pass = Dispatcher::new(&mut encoder, "synthetic weights", None);
        for (name, shape) in expected_tensors(config) {
            let tensor = match (&shape[..], quant) {
                (&[rows, cols], None) => {
                    let m = PackedMatrix::new(gpu, &name, rows, cols, WeightFormat::Float(Dtype::BF16))?;
                    fill_synthetic(gpu, &mut pass, &m, synthetic::seed(&name), synthetic::SCALE);
                    Tensor::Matrix(m)
                }
                (&[rows, cols], Some(q)) => Tensor::Matrix(quantized_synthetic(gpu, &name, (rows, cols), q)?),
                _ => Tensor::Vector(gpu.storage_from(&name, &synthetic::vector(&name, shape[0]))),
            };
            tensors.insert(name, tensor);
        }
    }
    gpu.queue().submit([encoder.finish()]);
    gpu.check()?;
    GpuWeights::from_tensors(gpu, config.clone(), tensors, true)
}

/// A synthetic matrix (the bf16 values the GPU generator makes), quantized on the CPU.
fn quantized_synthetic(gpu: &Gpu, name: &str, (rows, cols): (usize, usize), quant: Quant) -> Result<PackedMatrix> {
    let format = WeightFormat::Quant(quant);
    let m = PackedMatrix::new(gpu, name, rows, cols, format)?;
    let seed = synthetic::seed(name);
    // Rows per upload: about 4 MB of values at a time.
    let batch = (1 << 20) / cols.max(1) + 1;
    for first in (0..rows).step_by(batch) {
        let n = batch.min(rows - first);
        let start = (first * cols) as u32;
        let values: Vec<f32> = (start..start + (n * cols) as u32).map(|i| synthetic::matrix_value(seed, i)).collect();
        m.write(gpu, (first as u64) * m.row_bytes(), &format.encode(&values, cols));
        gpu.queue().submit([]); // lets wgpu free the staged bytes
    }
    Ok(m)
}
