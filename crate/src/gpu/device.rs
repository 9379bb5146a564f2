//! Adapter and device creation with the adapter's real limits, and the checks that turn a
//! too-small device into an error naming the limit.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::gpu::PackedMatrix;
use crate::gpu::buffers::RecordTableKey;
use crate::gpu::dispatch::DispatchTiming;
use crate::gpu::kernels::{Kernel, KernelKey};
use crate::gpu::tuning::Tuning;

/// How to open the device.
#[derive(Debug, Clone, Default)]
pub struct GpuOptions {
    /// Split weight matrices into chunks of at most this many bytes even where the device
    /// could bind more: exercises the split path that big embeddings take on real devices.
    pub weight_chunk_bytes: Option<u64>,
    /// Bind at most this many bytes at once even where the device could bind more: runs what a
    /// device with small limits runs (a prefill in several passes, weights in chunks).
    pub max_binding: Option<u64>,
    /// Skip GPU timestamps even where the device has them.
    pub no_timestamps: bool,
    /// Profile mode gives each dispatch a compute pass of its own, as it must in a browser, even
    /// where the device can write timestamps inside a pass.
    pub profile_pass_per_dispatch: bool,
    /// Which kernel family runs the linear layers; `None`: by device type.
    pub kernels: Option<KernelFamily>,
    /// Where the GPU family's kernels change path.
    pub tuning: Tuning,
}

/// Linear-layer kernels: tiled and cooperative (GPUs), or barrier-free (CPU implementations
/// of Vulkan and WebGPU such as lavapipe and SwiftShader, where barriers are expensive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelFamily {
    Tiled,
    Direct,
}

impl KernelFamily {
    /// The name the CLI takes and the bench reports: "tiled" or "direct".
    pub fn name(self) -> &'static str {
        match self {
            Self::Tiled => "tiled",
            Self::Direct => "direct",
        }
    }
}

impl std::str::FromStr for KernelFamily {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
        match name {
            "tiled" => Ok(Self::Tiled),
            "direct" => Ok(Self::Direct),
            _ => Err(Error::Input(format!("kernels {name:?}: use tiled or direct"))),
        }
    }
}

/// An open device with what the engine needs to know about it.
pub struct Gpu {
    pub(in crate::gpu) device: wgpu::Device,
    pub(in crate::gpu) queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    /// How profile mode times each dispatch; `None` where compute passes cannot write
    /// timestamps (no `timestamp-query`).
    dispatch_timing: Option<DispatchTiming>,
    /// Largest buffer bound at once (max_storage_buffer_binding_size, within max_buffer_size).
    pub(in crate::gpu) max_binding: u64,
    /// Largest weight chunk: `max_binding`, or less when forced by [`GpuOptions`].
    pub(in crate::gpu) weight_chunk_bytes: u64,
    /// Linear layers run the barrier-free kernel (see [`KernelFamily`]).
    direct_kernels: bool,
    /// Linear layers read their weights from textures (see [`Gpu::weight_textures`]).
    weight_textures: bool,
    tuning: Tuning,
    pub(in crate::gpu) kernels: RefCell<HashMap<KernelKey, Rc<Kernel>>>,
    /// Uniform record tables shared by key ([`Gpu::record_table`]).
    pub(in crate::gpu) record_tables: RefCell<HashMap<RecordTableKey, (usize, Rc<wgpu::Buffer>)>>,
    lost: ErrorSlot,
    /// The first error the device reported outside a call that returns one (out of memory, a
    /// rejected allocation): kept here instead of wgpu's default panic, returned by [`Gpu::check`].
    uncaptured: UncapturedSlot,
}

// What every kernel of the engine needs, whatever the model.
/// The largest workgroup memory, matmul's two 64-row tiles: 2 x 64 rows x 5 vec4 x 16 bytes.
const MIN_WORKGROUP_STORAGE: u32 = 10_240;
const MIN_INVOCATIONS: u32 = 256;
/// kv_write and attention bind six storage buffers.
const MIN_STORAGE_BUFFERS: u32 = 6;

impl Gpu {
    /// Opens the default high-performance adapter with its own limits.
    pub async fn new(options: GpuOptions) -> Result<Self> {
        options.tuning.check()?;
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|e| Error::NoAdapter(e.to_string()))?;
        let limits = adapter.limits();
        check_limits(&limits)?;
        let timestamps = !options.no_timestamps && adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        // Natively most adapters can also write timestamps between the dispatches of a pass,
        // so a profiled call runs in the passes of an unprofiled one; WebGPU cannot.
        let inside = wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES;
        let dispatch_timing =
            timestamps.then_some(if !options.profile_pass_per_dispatch && adapter.features().contains(inside) {
                DispatchTiming::InsidePasses
            } else {
                DispatchTiming::PassPerDispatch
            });
        let features = match dispatch_timing {
            None => wgpu::Features::empty(),
            Some(DispatchTiming::PassPerDispatch) => wgpu::Features::TIMESTAMP_QUERY,
            Some(DispatchTiming::InsidePasses) => wgpu::Features::TIMESTAMP_QUERY | inside,
        };
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("onetoken"),
                required_features: features,
                required_limits: limits.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| Error::Gpu(format!("the adapter refused a device: {e}")))?;
        let (lost, uncaptured) = watch_errors(&device);
        let max_binding = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
        let max_binding = options.max_binding.unwrap_or(u64::MAX).min(max_binding);
        let info = adapter.get_info();
        let family = options.kernels.unwrap_or(if info.device_type == wgpu::DeviceType::Cpu {
            KernelFamily::Direct
        } else {
            KernelFamily::Tiled
        });
        let weight_textures = family == KernelFamily::Direct && info.name.contains("llvmpipe");
        let texture_chunk = PackedMatrix::texture_chunk_bytes(limits.max_texture_dimension_2d);
        let weight_chunk_bytes = options.weight_chunk_bytes.unwrap_or(u64::MAX).min(max_binding);
        let weight_chunk_bytes =
            if weight_textures { weight_chunk_bytes.min(texture_chunk) } else { weight_chunk_bytes };
        Ok(Self {
            device,
            queue,
            info,
            limits,
            dispatch_timing,
            max_binding,
            weight_chunk_bytes,
            direct_kernels: family == KernelFamily::Direct,
            weight_textures,
            tuning: options.tuning,
            kernels: RefCell::new(HashMap::new()),
            record_tables: RefCell::new(HashMap::new()),
            lost,
            uncaptured,
        })
    }

    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// The adapter's name, backend and type.
    pub fn info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    /// The device's limits (the adapter's own, requested whole).
    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    /// Whether compute passes can write timestamps (`timestamp-query`).
    pub fn timestamps(&self) -> bool {
        self.dispatch_timing.is_some()
    }

    /// How profile mode times each dispatch: `None` where the device has no timestamps.
    pub fn dispatch_timing(&self) -> Option<DispatchTiming> {
        self.dispatch_timing
    }

    /// Largest buffer bound at once (max_storage_buffer_binding_size, within max_buffer_size).
    pub fn max_binding(&self) -> u64 {
        self.max_binding
    }

    /// Whether linear layers read their weights from textures ([`PackedMatrix::textures`]):
    /// lavapipe's direct kernels (linear_blocks.wgsl; why: linear_w_texture.wgsl).
    pub fn weight_textures(&self) -> bool {
        self.weight_textures
    }

    /// Whether linear layers run the barrier-free kernels (see [`KernelFamily`]).
    pub fn direct_kernels(&self) -> bool {
        self.direct_kernels
    }

    /// Where the GPU family's kernels change path ([`GpuOptions::tuning`]).
    pub fn tuning(&self) -> Tuning {
        self.tuning
    }

    /// Opens a device natively, blocking.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new_blocking(options: GpuOptions) -> Result<Self> {
        pollster::block_on(Self::new(options))
    }

    /// An error if the device has been lost (driver reset, tab in the background too long...)
    /// or has reported an error since the last check (which it then forgets).
    pub fn check(&self) -> Result<()> {
        if let Some(why) = self.lost.lock().ok().and_then(|l| l.clone()) {
            return Err(Error::DeviceLost(why));
        }
        match self.uncaptured.lock().ok().and_then(|mut e| e.take()) {
            Some(Uncaptured { out_of_memory: true, message }) => Err(Error::GpuMemory(message)),
            Some(Uncaptured { message, .. }) => Err(Error::Gpu(message)),
            None => Ok(()),
        }
    }

    /// Fails with the limit's name when a buffer of `bytes` cannot be bound.
    pub fn check_binding(&self, what: &str, bytes: u64) -> Result<()> {
        if bytes > self.max_binding {
            return Err(Error::Gpu(format!(
                "{what} needs a {bytes}-byte storage binding; this device allows {} \
                 (max_storage_buffer_binding_size): use a smaller batch or context",
                self.max_binding
            )));
        }
        Ok(())
    }

    /// The linear-layer kernels this device runs.
    pub fn kernel_family(&self) -> KernelFamily {
        if self.direct_kernels { KernelFamily::Direct } else { KernelFamily::Tiled }
    }

    /// A short description: adapter name, backend, the limits that matter here, and any tuning
    /// that differs from the defaults.
    pub fn describe(&self) -> String {
        let changes = self.tuning.changes();
        let tuned = if changes.is_empty() { String::new() } else { format!("; tuned {changes}") };
        format!(
            "{} ({:?}, {:?}); binding limit {} MiB; timestamps {}; {} kernels{tuned}",
            self.info.name,
            self.info.backend,
            self.info.device_type,
            self.max_binding >> 20,
            if self.timestamps() { "yes" } else { "no" },
            if self.direct_kernels { "direct (CPU-like device)" } else { "tiled" }
        )
    }
}

fn check_limit(limit: &'static str, needed: u64, available: u64) -> Result<()> {
    if available < needed {
        return Err(Error::GpuLimit { limit, needed, available });
    }
    Ok(())
}

/// Fails with the first limit below what every kernel of the engine needs.
fn check_limits(limits: &wgpu::Limits) -> Result<()> {
    check_limit(
        "max_compute_workgroup_storage_size",
        MIN_WORKGROUP_STORAGE.into(),
        limits.max_compute_workgroup_storage_size.into(),
    )?;
    check_limit(
        "max_compute_invocations_per_workgroup",
        MIN_INVOCATIONS.into(),
        limits.max_compute_invocations_per_workgroup.into(),
    )?;
    check_limit(
        "max_storage_buffers_per_shader_stage",
        MIN_STORAGE_BUFFERS.into(),
        limits.max_storage_buffers_per_shader_stage.into(),
    )
}

/// Where the device's asynchronous errors land: why it was lost, and the first uncaptured error
/// (out of memory, a rejected allocation), instead of wgpu's default panic.
type ErrorSlot = Arc<Mutex<Option<String>>>;
type UncapturedSlot = Arc<Mutex<Option<Uncaptured>>>;

/// An error the device raised outside any call: out of memory is told apart (the page frees
/// the model in use and tries a load again).
struct Uncaptured {
    out_of_memory: bool,
    message: String,
}

fn watch_errors(device: &wgpu::Device) -> (ErrorSlot, UncapturedSlot) {
    let lost = ErrorSlot::default();
    let flag = lost.clone();
    device.set_device_lost_callback(move |reason, message| {
        if let Ok(mut slot) = flag.lock() {
            *slot = Some(format!("{reason:?}: {message}"));
        }
    });
    let uncaptured = UncapturedSlot::default();
    let slot = uncaptured.clone();
    device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
        let out_of_memory = matches!(e, wgpu::Error::OutOfMemory { .. });
        let message = if out_of_memory {
            format!("out of GPU memory ({e}); try a smaller model, batch or context")
        } else {
            e.to_string()
        };
        if let Ok(mut first) = slot.lock() {
            first.get_or_insert(Uncaptured { out_of_memory, message });
        }
    }));
    (lost, uncaptured)
}
