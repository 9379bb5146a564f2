//! Where kernels are dispatched. Normally all dispatches of a phase share one compute pass. In
//! profile mode each dispatch is timed by a timestamp pair ([`DispatchTiming`]): natively,
//! where the adapter can, written around it inside that same pass, so a profiled call runs the
//! passes of an unprofiled one; else (browsers) each dispatch gets a pass of its own, timed at
//! its beginning and end. The dispatch is recorded with its kernel, layer and the work it must
//! do, so its GPU time can be set beside its bytes and FLOPs. A listing encodes nothing: it only
//! lists what would be dispatched, so that commands encoded ahead can be checked against the
//! call that came.

use std::marker::PhantomData;

use serde::Serialize;

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
    /// Workgroups along x, y and z: how much of the GPU the dispatch can fill.
    pub grid: [u32; 3],
}

/// How profile mode times each dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DispatchTiming {
    /// A timestamp pair around each dispatch, inside the passes an unprofiled call runs
    /// (`TIMESTAMP_QUERY_INSIDE_PASSES`, natively where the adapter has it). A pair's first
    /// stamp waits for the dispatches before it, so it also counts the barrier and launch of its
    /// own, and the pairs add up to nearly the whole pass.
    InsidePasses,
    /// Each dispatch in a compute pass of its own, stamped at the pass's beginning and end: all
    /// that WebGPU allows. Each pass may carry a fixed cost of its own (lavapipe's do).
    PassPerDispatch,
}

/// Timestamp pairs the profiler holds: WebGPU allows 4,096 queries in one set.
const MAX_TIMED: usize = 2048;

/// Per-dispatch GPU times for profile mode: a query set, its resolve and staging buffers, and the
/// dispatches recorded since [`Profiler::clear`].
pub struct Profiler {
    timing: DispatchTiming,
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    staging: wgpu::Buffer,
    records: Vec<DispatchRecord>,
}

impl Profiler {
    /// A profiler that times dispatches as `timing` says (one the device has:
    /// [`Gpu::dispatch_timing`]).
    pub fn new(gpu: &Gpu, timing: DispatchTiming) -> Self {
        let bytes = 16 * MAX_TIMED as u64;
        Self {
            timing,
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
        }
    }

    /// Records a dispatch; returns the index of its timestamp pair, `None` past the query set's
    /// size (the dispatch still runs, untimed; `read` says so).
    fn record(&mut self, record: DispatchRecord) -> Option<u32> {
        let i = self.records.len();
        self.records.push(record);
        (i < MAX_TIMED).then_some(i as u32)
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
    offsets: Vec<u32>,
    grid: (u32, u32, u32),
}

/// Encodes dispatches into one compute pass (in profile mode with a timestamp pair around each),
/// or (profile mode, where timestamps inside passes are not to be had) each into a timed pass
/// of its own, or only lists them.
pub struct Dispatcher<'a> {
    mode: Mode<'a>,
    layer: Option<usize>,
}

enum Mode<'a> {
    /// The pass borrows the encoder: its lifetime is forgotten, so the borrow is held here.
    Shared(Box<wgpu::ComputePass<'static>>, PhantomData<&'a mut wgpu::CommandEncoder>),
    /// One pass, a timestamp pair written inside it around each dispatch.
    Stamped(Box<wgpu::ComputePass<'static>>, &'a mut Profiler, PhantomData<&'a mut wgpu::CommandEncoder>),
    /// A timed pass per dispatch.
    PassPerDispatch(&'a mut wgpu::CommandEncoder, &'a mut Profiler),
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
        Self { mode: Mode::Shared(Box::new(begin_pass(encoder, label, timestamp_writes)), PhantomData), layer: None }
    }

    /// Each dispatch timed as `profiler`'s [`DispatchTiming`] says (inside one pass named
    /// `label`, or in a pass of its own) and recorded in it.
    pub fn profiled(encoder: &'a mut wgpu::CommandEncoder, label: &str, profiler: &'a mut Profiler) -> Self {
        let mode = match profiler.timing {
            DispatchTiming::InsidePasses => {
                Mode::Stamped(Box::new(begin_pass(encoder, label, None)), profiler, PhantomData)
            }
            DispatchTiming::PassPerDispatch => Mode::PassPerDispatch(encoder, profiler),
        };
        Self { mode, layer: None }
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
        self.dispatch_at(kernel, group, &[], grid, work);
    }

    /// [`Dispatcher::dispatch`] with `offsets` for the group's bindings at a dynamic offset
    /// ([`Binding::UniformAtOffset`](crate::gpu::Binding), in binding order).
    pub fn dispatch_at(
        &mut self,
        kernel: &Kernel,
        group: &wgpu::BindGroup,
        offsets: &[u32],
        grid: (u32, u32, u32),
        work: Work,
    ) {
        let record = || DispatchRecord { kernel: kernel.name, layer: self.layer, work, grid: [grid.0, grid.1, grid.2] };
        let encode = |pass: &mut wgpu::ComputePass| {
            pass.set_pipeline(&kernel.pipeline);
            pass.set_bind_group(0, group, offsets);
            pass.dispatch_workgroups(grid.0, grid.1, grid.2);
        };
        match &mut self.mode {
            Mode::Shared(pass, _) => encode(pass),
            Mode::Listing(listing) => listing.push(Listed {
                kernel: kernel.name,
                pipeline: kernel.pipeline.clone(),
                group: group.clone(),
                offsets: offsets.to_vec(),
                grid,
            }),
            Mode::Checking(listing, check) => {
                let next = listing.get(check.at);
                check.same &= next.is_some_and(|e| {
                    e.grid == grid && e.pipeline == kernel.pipeline && e.group == *group && e.offsets == offsets
                });
                check.at += 1;
            }
            Mode::Stamped(pass, profiler, _) => match profiler.record(record()) {
                Some(i) => {
                    pass.write_timestamp(&profiler.set, 2 * i);
                    encode(pass);
                    pass.write_timestamp(&profiler.set, 2 * i + 1);
                }
                None => encode(pass),
            },
            Mode::PassPerDispatch(encoder, profiler) => {
                let timestamp_writes = profiler.record(record()).map(|i| wgpu::ComputePassTimestampWrites {
                    query_set: &profiler.set,
                    beginning_of_pass_write_index: Some(2 * i),
                    end_of_pass_write_index: Some(2 * i + 1),
                });
                encode(&mut begin_pass(encoder, kernel.name, timestamp_writes));
            }
        }
    }
}

/// A compute pass named `label`, with these timestamp writes (or none), that no longer borrows
/// `encoder` (the caller holds that borrow for as long as the pass lives).
fn begin_pass(
    encoder: &mut wgpu::CommandEncoder,
    label: &str,
    timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
) -> wgpu::ComputePass<'static> {
    encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(label), timestamp_writes }).forget_lifetime()
}
