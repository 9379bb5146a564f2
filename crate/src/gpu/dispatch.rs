//! Where kernels are dispatched. Normally all dispatches of a phase share one compute pass. In
//! profile mode each dispatch gets a pass of its own with a timestamp pair around it, which works
//! on every device with `timestamp-query` (browsers included), and the dispatch is recorded with
//! its kernel, layer and the work it must do, so its GPU time can be set beside its bytes and
//! FLOPs. A listing encodes nothing: it only lists what would be dispatched, so that commands
//! encoded ahead can be checked against the call that came.

use std::marker::PhantomData;

use crate::error::{Error, Result};
use crate::gpu::{Gpu, Kernel, read_buffer};

/// The bytes a dispatch must move and the FLOPs it must do (lower bounds from the shapes).
#[derive(Debug, Clone, Copy, Default)]
pub struct Work {
    pub bytes: u64,
    pub flops: u64,
}

/// One recorded dispatch.
#[derive(Debug, Clone)]
pub struct DispatchRecord {
    pub kernel: &'static str,
    pub layer: Option<usize>,
    pub work: Work,
}

/// Timestamp pairs the profiler holds: WebGPU allows 4,096 queries in one set.
const MAX_TIMED: usize = 2048;

/// Per-dispatch GPU times for profile mode: a query set, its resolve and staging buffers, and the
/// dispatches recorded since [`Profiler::clear`].
pub struct Profiler {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    staging: wgpu::Buffer,
    records: Vec<DispatchRecord>,
}

impl Profiler {
    /// `None` where the device cannot time passes (no `timestamp-query`).
    pub fn new(gpu: &Gpu) -> Option<Self> {
        let bytes = 16 * MAX_TIMED as u64;
        gpu.timestamps.then(|| Self {
            set: gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("profiler"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * MAX_TIMED as u32,
            }),
            resolve: gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("profiler"),
                size: bytes,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            staging: gpu.staging("profiler", bytes),
            records: Vec::new(),
        })
    }

    pub fn clear(&mut self) {
        self.records.clear();
    }

    /// Dispatches recorded so far.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Resolves the stamps of the recorded dispatches into the staging buffer.
    pub fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        let n = self.records.len().min(MAX_TIMED) as u32;
        if n > 0 {
            encoder.resolve_query_set(&self.set, 0..2 * n, &self.resolve, 0);
            encoder.copy_buffer_to_buffer(&self.resolve, 0, &self.staging, 0, Some(16 * u64::from(n)));
        }
    }

    /// After the submit that [`Profiler::resolve`] was encoded in: each recorded dispatch with its
    /// GPU time in milliseconds.
    pub async fn read(&self, gpu: &Gpu) -> Result<Vec<(DispatchRecord, f64)>> {
        if self.records.len() > MAX_TIMED {
            return Err(Error::Input(format!(
                "{} dispatches in one profiled call; the profiler times at most {MAX_TIMED}, so this model cannot be profiled",
                self.records.len()
            )));
        }
        let bytes = read_buffer(gpu, &self.staging, 16 * self.records.len() as u64).await?;
        let stamps: Vec<u64> = bytemuck::pod_collect_to_vec(&bytes[..16 * self.records.len()]);
        let period = f64::from(gpu.queue.get_timestamp_period());
        Ok(self
            .records
            .iter()
            .zip(stamps.chunks_exact(2))
            .map(|(r, t)| (r.clone(), t[1].saturating_sub(t[0]) as f64 * period / 1e6))
            .collect())
    }
}

/// One dispatch of a listing: everything that decides the commands it encodes.
#[derive(Debug, PartialEq, Eq)]
pub struct Listed {
    /// The kernel's name (its pipeline decides; this is for reading a listing).
    pub kernel: &'static str,
    pipeline: wgpu::ComputePipeline,
    group: wgpu::BindGroup,
    grid: (u32, u32, u32),
}

/// Encodes dispatches into one compute pass, or (profile mode) each into a timed pass of its own,
/// or only lists them.
pub struct Dispatcher<'a> {
    mode: Mode<'a>,
    layer: Option<usize>,
}

enum Mode<'a> {
    /// The pass borrows the encoder: its lifetime is forgotten, so the borrow is held here.
    Shared(Box<wgpu::ComputePass<'static>>, PhantomData<&'a mut wgpu::CommandEncoder>),
    Profiled(&'a mut wgpu::CommandEncoder, &'a mut Profiler),
    Listing(&'a mut Vec<Listed>),
    Checking(&'a [Listed], &'a mut ListingCheck),
}

/// Where a walk that compares its dispatches with a listing stands ([`Dispatcher::checking`]).
pub struct ListingCheck {
    at: usize,
    same: bool,
}

impl Default for ListingCheck {
    fn default() -> Self {
        Self { at: 0, same: true }
    }
}

impl ListingCheck {
    /// Whether the dispatches walked so far are exactly the whole `listing`.
    pub fn matched(&self, listing: &[Listed]) -> bool {
        self.same && self.at == listing.len()
    }
}

impl<'a> Dispatcher<'a> {
    /// All dispatches in one pass, with these timestamp writes (or none).
    pub fn new(
        encoder: &'a mut wgpu::CommandEncoder,
        label: &str,
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) -> Self {
        let pass = encoder
            .begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(label), timestamp_writes })
            .forget_lifetime();
        Self { mode: Mode::Shared(Box::new(pass), PhantomData), layer: None }
    }

    /// Each dispatch timed in a pass of its own and recorded in `profiler`.
    pub fn profiled(encoder: &'a mut wgpu::CommandEncoder, profiler: &'a mut Profiler) -> Self {
        Self { mode: Mode::Profiled(encoder, profiler), layer: None }
    }

    /// Nothing encoded: each dispatch appended to `listing`.
    pub fn listing(listing: &'a mut Vec<Listed>) -> Self {
        Self { mode: Mode::Listing(listing), layer: None }
    }

    /// Nothing encoded: each dispatch compared with the next one of `listing`, from where
    /// `check` stands.
    pub fn checking(listing: &'a [Listed], check: &'a mut ListingCheck) -> Self {
        Self { mode: Mode::Checking(listing, check), layer: None }
    }

    /// The decoder layer that the following dispatches belong to (`None`: outside the layers).
    pub fn set_layer(&mut self, layer: Option<usize>) {
        self.layer = layer;
    }

    /// Dispatches `kernel` with `group` over `grid` workgroups.
    pub fn dispatch(&mut self, kernel: &Kernel, group: &wgpu::BindGroup, grid: (u32, u32, u32), work: Work) {
        let encode = |pass: &mut wgpu::ComputePass| {
            pass.set_pipeline(&kernel.pipeline);
            pass.set_bind_group(0, group, &[]);
            pass.dispatch_workgroups(grid.0, grid.1, grid.2);
        };
        match &mut self.mode {
            Mode::Shared(pass, _) => encode(pass),
            Mode::Listing(listing) => listing.push(Listed {
                kernel: kernel.name,
                pipeline: kernel.pipeline.clone(),
                group: group.clone(),
                grid,
            }),
            Mode::Checking(listing, check) => {
                let next = listing.get(check.at);
                check.same &=
                    next.is_some_and(|e| e.grid == grid && e.pipeline == kernel.pipeline && e.group == *group);
                check.at += 1;
            }
            Mode::Profiled(encoder, profiler) => {
                let i = profiler.records.len() as u32;
                profiler.records.push(DispatchRecord { kernel: kernel.name, layer: self.layer, work });
                // Past the query set's size the dispatch still runs, untimed; `read` says so.
                let timestamp_writes = (i < MAX_TIMED as u32).then(|| wgpu::ComputePassTimestampWrites {
                    query_set: &profiler.set,
                    beginning_of_pass_write_index: Some(2 * i),
                    end_of_pass_write_index: Some(2 * i + 1),
                });
                let desc = wgpu::ComputePassDescriptor { label: Some(kernel.name), timestamp_writes };
                encode(&mut encoder.begin_compute_pass(&desc));
            }
        }
    }
}
