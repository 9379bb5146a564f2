//! GPU time of compute passes from timestamp queries (where the device has `timestamp-query`):
//! a begin and an end stamp per pass, resolved and copied out with the pass's other results.
//! Browsers round these to 100 us, so callers aggregate over repeats.

use crate::gpu::Gpu;

pub struct PassTimer {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    passes: u32,
}

impl Drop for PassTimer {
    fn drop(&mut self) {
        self.set.destroy();
        self.resolve.destroy();
    }
}

impl PassTimer {
    /// A timer for `passes` passes; `None` where the device cannot time them.
    pub fn new(gpu: &Gpu, passes: u32) -> Option<Self> {
        gpu.timestamps().then(|| Self {
            set: gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("pass timer"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * passes,
            }),
            resolve: gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("pass timer"),
                size: Self::bytes_for(passes),
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            passes,
        })
    }

    fn bytes_for(passes: u32) -> u64 {
        16 * u64::from(passes)
    }

    /// Bytes [`PassTimer::copy_to`] writes.
    pub fn bytes(&self) -> u64 {
        Self::bytes_for(self.passes)
    }

    /// The timestamp writes of pass `i`, for its `ComputePassDescriptor`.
    pub fn writes(&self, i: u32) -> wgpu::ComputePassTimestampWrites<'_> {
        wgpu::ComputePassTimestampWrites {
            query_set: &self.set,
            beginning_of_pass_write_index: Some(2 * i),
            end_of_pass_write_index: Some(2 * i + 1),
        }
    }

    /// Resolves the stamps and copies them to `staging` at `offset` (a multiple of 8).
    pub fn copy_to(&self, encoder: &mut wgpu::CommandEncoder, staging: &wgpu::Buffer, offset: u64) {
        encoder.resolve_query_set(&self.set, 0..2 * self.passes, &self.resolve, 0);
        encoder.copy_buffer_to_buffer(&self.resolve, 0, staging, offset, Some(self.bytes()));
    }

    /// Milliseconds of pass `i`, from the bytes copied by [`PassTimer::copy_to`].
    pub fn ms(gpu: &Gpu, stamps: &[u8], i: usize) -> f64 {
        let t: Vec<u64> = bytemuck::pod_collect_to_vec(&stamps[16 * i..16 * i + 16]);
        t[1].saturating_sub(t[0]) as f64 * f64::from(gpu.queue.get_timestamp_period()) / 1e6
    }
}
