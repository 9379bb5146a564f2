//! The GPU side: device and limits, kernels (pipelines cached by name + constants), buffers
//! (tensors split over binding-size limits) and readback. One code path for native wgpu and
//! WebGPU in the browser, except device polling, which only native needs.

mod buffers;
mod device;
mod dispatch;
mod kernels;
mod timer;
mod tuning;
mod weights;

pub use buffers::{DestroyOnDrop, PackedMatrix, WEIGHT_TEXTURE_WIDTH, read_buffer, read_buffer_timed};
pub use device::{Gpu, GpuOptions, KernelFamily};
pub use dispatch::{DispatchRecord, DispatchTiming, Dispatcher, Listed, ListingCheck, Profiler, Work};
pub use kernels::{
    BLOCK_QUANTS, Binding, Kernel, KernelSpec, LINEAR, LINEAR_W, LINEAR_W_TEXTURE, LINEAR_X, LINEAR_X_UNIFORM, PACKED,
    WEIGHT_PAIRS,
};
pub use timer::PassTimer;
pub use tuning::Tuning;
pub(crate) use weights::Tensor;
pub use weights::{GpuLayer, GpuLinear, GpuLoader, GpuWeights, MlpInput};
#[cfg(not(target_arch = "wasm32"))]
pub use weights::{load_dir, load_gguf};
