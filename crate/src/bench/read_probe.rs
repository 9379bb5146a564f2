//! The read-bandwidth probe (bench_read.wgsl): a matrix of weights read the way the linear
//! kernels read theirs on this device (a storage buffer, or a texture where they read textures:
//! lavapipe), with almost nothing written. Its bytes per second are the ceiling of a decode step.

use super::micro::{MAX_PROBE_GROUPS, PROBE_WORKGROUP};
use crate::gpu::Binding::*;
use crate::gpu::{
    Dispatcher, Gpu, Kernel, KernelSpec, LINEAR_W, LINEAR_W_TEXTURE, PackedMatrix, WEIGHT_TEXTURE_WIDTH, Work,
};
use crate::ops::workgroup;
use std::rc::Rc;

/// Binding 2 is bound to the shape again: bench_read.wgsl leaves it unused, so that w is
/// binding 3 as both of weight_load's files declare it.
const READ: KernelSpec = KernelSpec {
    name: "bench_read",
    source: include_str!("../../../shaders/bench_read.wgsl"),
    prelude: &[LINEAR_W],
    bindings: &[Uniform, ReadWrite, Uniform, Read],
};
const READ_TEXTURE: KernelSpec =
    KernelSpec { prelude: &[LINEAR_W_TEXTURE], bindings: &[Uniform, ReadWrite, Uniform, Texture], ..READ };

/// One dispatch that reads the first chunk of a matrix once.
pub(super) struct ReadProbe {
    kernel: Rc<Kernel>,
    group: wgpu::BindGroup,
    shape: wgpu::Buffer,
    /// `[MAX_PROBE_GROUPS]` u32: each workgroup's texels folded by xor.
    pub out: wgpu::Buffer,
    texels: u64,
    /// Where it reads from: `storage` or `texture`.
    pub source: &'static str,
}

impl ReadProbe {
    /// Reads the first chunk of `matrix` (written by now).
    pub fn new(gpu: &Gpu, matrix: &PackedMatrix) -> Self {
        let chunk = &matrix.chunks()[0];
        let texels = chunk.buffer.size() / 16;
        let shape = gpu.uniform("read probe shape", &[texels as u32, 0, 0, 0]);
        let out = gpu.storage("read probe out", u64::from(MAX_PROBE_GROUPS) * 4);
        let mut constants = vec![workgroup(PROBE_WORKGROUP)];
        let (spec, source, view) = if gpu.weight_textures() {
            constants.push(("TEXTURE_WIDTH", f64::from(WEIGHT_TEXTURE_WIDTH)));
            let view = matrix.textures(gpu)[0].create_view(&Default::default());
            (&READ_TEXTURE, "texture", Some(view))
        } else {
            (&READ, "storage", None)
        };
        let kernel = gpu.kernel(spec, &constants);
        let w = match &view {
            Some(view) => wgpu::BindingResource::TextureView(view),
            None => chunk.buffer.as_entire_binding(),
        };
        let resources = [shape.as_entire_binding(), out.as_entire_binding(), shape.as_entire_binding(), w];
        let group = gpu.bind_resources(&kernel, &resources);
        Self { kernel, group, shape, out, texels, source }
    }

    /// Bytes one dispatch reads.
    pub fn bytes(&self) -> u64 {
        self.texels * 16
    }

    /// Workgroups a dispatch of at most `at_most` runs: none without a texel to read.
    pub fn groups(&self, at_most: u32) -> u32 {
        (self.texels.div_ceil(u64::from(PROBE_WORKGROUP)) as u32).clamp(1, at_most.min(MAX_PROBE_GROUPS))
    }

    /// Reads the chunk once in [`ReadProbe::groups`]`(at_most)` workgroups.
    pub fn dispatch(&self, p: &mut Dispatcher, at_most: u32) {
        p.dispatch(&self.kernel, &self.group, (self.groups(at_most), 1, 1), Work::default());
    }
}

impl Drop for ReadProbe {
    fn drop(&mut self) {
        self.shape.destroy();
        self.out.destroy();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::{GpuOptions, read_buffer};
    use crate::quant::WeightFormat;
    use crate::weights::Dtype;

    /// xor of the little-endian u32 words of `bytes`.
    fn folded(bytes: &[u8]) -> u32 {
        bytes.chunks_exact(4).fold(0, |acc, w| acc ^ u32::from_le_bytes(w.try_into().unwrap()))
    }

    /// The probe reads every texel of the chunk once (none twice: xor would cancel it), in as
    /// many workgroups as it has texels for and in fewer that loop, from a texture on lavapipe.
    #[test]
    fn the_read_probe_reads_every_texel_once() {
        let gpu = Gpu::new_blocking(GpuOptions::default()).unwrap();
        // 67 rows of 2050 bf16 values: 274,700 bytes, a texture's last row in part.
        let (rows, cols) = (67, 2050);
        let bf16 = WeightFormat::Float(Dtype::BF16);
        let matrix = PackedMatrix::new(&gpu, "probe weights", rows, cols, bf16).unwrap();
        let bytes: Vec<u8> = (0..rows * cols * 2).map(|i| (i * 7 + i / 251) as u8).collect();
        matrix.write(&gpu, 0, &bytes);
        let probe = ReadProbe::new(&gpu, &matrix);
        assert_eq!(probe.source, if gpu.weight_textures() { "texture" } else { "storage" });
        assert_eq!(probe.bytes(), (bytes.len() as u64).next_multiple_of(16));
        for (max_groups, groups) in [(MAX_PROBE_GROUPS, 68), (3, 3)] {
            assert_eq!(probe.groups(max_groups), groups);
            let staging = gpu.staging("probe out", u64::from(groups) * 4);
            let mut encoder = gpu.device().create_command_encoder(&Default::default());
            probe.dispatch(&mut Dispatcher::new(&mut encoder, "read probe", None), max_groups);
            encoder.copy_buffer_to_buffer(&probe.out, 0, &staging, 0, u64::from(groups) * 4);
            gpu.queue().submit([encoder.finish()]);
            let out = pollster::block_on(read_buffer(&gpu, &staging, u64::from(groups) * 4)).unwrap();
            assert_eq!(folded(&out), folded(&bytes), "{max_groups} workgroups at most");
        }
    }
}
