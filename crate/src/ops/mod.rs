//! One Rust type per WGSL kernel: it builds the kernel's bind groups once (shapes go into a small
//! uniform made at the same time) and encodes its dispatch into a compute pass. Each uniform is a
//! `#[repr(C)]` struct whose fields match the `Shape` struct of its shader, size asserted.
//!
//! Notation: M = tokens in the batch, R = rows read out, H = hidden, K/N = a Linear's in/out.

mod attention;
mod linear;
mod rows;
mod synthetic;

pub(crate) use attention::MAX_HEAD_DIM;
pub use attention::{
    ATTENTION_CHUNK, AttendedKeys, Attention, AttentionBuffers, AttentionDims, AttentionPath, KvCopyShape, KvWrite,
    NewKeysValues, kv_copy,
};
pub use linear::{
    Fold, LINEAR_X_UNIFORM_BYTES, Linear, LinearBuffers, MATVEC_LANES, MATVEC_MAX_ROWS, SplitPartials, Store,
    activation_part, linear_input, linear_input_slack,
};
pub use rows::{Embedding, GatherRows, LmHeadRows, RmsNorm, SiluMul, TOP_K_MAX, TopK};
pub use synthetic::{fill_synthetic, synthetic_weights};

use crate::gpu::{
    BLOCK_QUANTS, Binding, Binding::*, Dispatcher, KernelSpec, LINEAR, LINEAR_W, LINEAR_W_TEXTURE, LINEAR_X,
    LINEAR_X_UNIFORM, PACKED, WEIGHT_PAIRS, Work,
};

type Pass<'a> = Dispatcher<'a>;

macro_rules! spec {
    ($name:literal, prelude: [$($p:expr),*], $bindings:expr) => {
        KernelSpec {
            name: $name,
            source: include_str!(concat!("../../../shaders/", $name, ".wgsl")),
            prelude: &[$($p),*],
            bindings: $bindings,
        }
    };
}

/// A `#[repr(C)]` uniform mirroring a shader's `Shape` struct (all fields 4 bytes; padding
/// fields start with `_`), its size asserted to be a multiple of 16 bytes.
macro_rules! uniform {
    ($(#[$doc:meta])* $name:ident { $($field:ident: $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
        pub struct $name {
            $(pub $field: $ty),*
        }
        const _: () = assert!(std::mem::size_of::<$name>() % 16 == 0);
    };
}
pub(crate) use uniform;

/// RoPE applied as a kernel reads keys or queries.
const ROTARY: &str = include_str!("../../../shaders/rotary.wgsl");

/// The uniform `Shape` every attention kernel reads (`AttentionShape`).
const ATTENTION_SHAPE: &str = include_str!("../../../shaders/attention_shape.wgsl");

/// A decode step's new keys and values read from q and appended to the cache by attention.
const ATTENTION_APPEND: &str = include_str!("../../../shaders/attention_append.wgsl");

/// A query read with RoPE applied, a vec4 at a time, by the GPU attention kernels.
const ATTENTION_QUERY: &str = include_str!("../../../shaders/attention_query.wgsl");

/// The whole and split attention's weighing of the values, a quad of a head per thread over a
/// subset of the keys.
const ATTENTION_VALUES: &str = include_str!("../../../shaders/attention_values.wgsl");

/// A workgroup-wide maximum or sum, shared by the attention kernels.
const WORKGROUP_REDUCE: &str = include_str!("../../../shaders/workgroup_reduce.wgsl");

/// linear.wgsl's bindings: tokens, shape, x, w, bias, y, aux.
const LINEAR_BINDINGS: &[Binding] = &[Uniform, Uniform, Read, Read, Read, ReadWrite, Read];
/// [`LINEAR_BINDINGS`] with w a texture (linear_w_texture.wgsl).
const LINEAR_BINDINGS_W_TEXTURE: &[Binding] = &[Uniform, Uniform, Read, Texture, Read, ReadWrite, Read];

pub const EMBEDDING: KernelSpec =
    spec!("embedding", prelude: [PACKED, WEIGHT_PAIRS], &[Uniform, Read, Read, ReadWrite]);
pub const RMS_NORM: KernelSpec = spec!("rms_norm", prelude: [], &[Uniform, Read, Read, ReadWrite]);
/// RMSNorm for CPU-like devices (rms_norm_rows.wgsl): a row per invocation, no barriers; under
/// rms_norm's name in profiles.
pub const RMS_NORM_ROWS: KernelSpec = KernelSpec {
    name: "rms_norm",
    source: include_str!("../../../shaders/rms_norm_rows.wgsl"),
    prelude: &[],
    bindings: &[Uniform, Read, Read, ReadWrite],
};
pub const MATMUL: KernelSpec =
    spec!("matmul", prelude: [PACKED, WEIGHT_PAIRS, LINEAR, LINEAR_X, LINEAR_W], LINEAR_BINDINGS);
pub const MATVEC: KernelSpec = spec!("matvec", prelude: [PACKED, LINEAR, LINEAR_X, LINEAR_W], LINEAR_BINDINGS);
pub const SPLIT_SUM: KernelSpec = spec!("split_sum", prelude: [PACKED, LINEAR, LINEAR_X, LINEAR_W], LINEAR_BINDINGS);
pub const LINEAR_DIRECT: KernelSpec =
    spec!("linear_direct", prelude: [PACKED, WEIGHT_PAIRS, LINEAR, LINEAR_X, LINEAR_W, BLOCK_QUANTS], LINEAR_BINDINGS);
/// linear_direct for lavapipe (linear_blocks.wgsl): the same products in larger blocks, w read
/// from a texture, under the same name in profiles.
pub const LINEAR_BLOCKS: KernelSpec = KernelSpec {
    name: "linear_direct",
    source: include_str!("../../../shaders/linear_blocks.wgsl"),
    prelude: &[PACKED, WEIGHT_PAIRS, LINEAR, LINEAR_X, LINEAR_W_TEXTURE, BLOCK_QUANTS],
    bindings: LINEAR_BINDINGS_W_TEXTURE,
};
/// [`LINEAR_BLOCKS`] reading x through a uniform binding, a window of token rows at a time
/// (lavapipe: see linear_x_uniform.wgsl).
pub const LINEAR_BLOCKS_UNIFORM_X: KernelSpec = KernelSpec {
    prelude: &[PACKED, WEIGHT_PAIRS, LINEAR, LINEAR_X_UNIFORM, LINEAR_W_TEXTURE, BLOCK_QUANTS],
    // linear.wgsl's, x a window at an offset, w a texture, and the window's record.
    bindings: &[Uniform, Uniform, UniformAtOffset, Texture, Read, ReadWrite, Read, UniformAtOffset],
    ..LINEAR_BLOCKS
};
pub const KV_WRITE: KernelSpec =
    spec!("kv_write", prelude: [ROTARY], &[Uniform, Read, Read, ReadWrite, ReadWrite, Read]);
pub const ATTENTION: KernelSpec = spec!(
    "attention",
    prelude: [ATTENTION_SHAPE, ROTARY, ATTENTION_QUERY, WORKGROUP_REDUCE, ATTENTION_APPEND, ATTENTION_VALUES],
    &[Uniform, Read, Read, ReadWrite, ReadWrite, ReadWrite, Read]
);
pub const ATTENTION_SPLIT: KernelSpec = spec!(
    "attention_split",
    prelude: [ATTENTION_SHAPE, ROTARY, ATTENTION_QUERY, WORKGROUP_REDUCE, ATTENTION_APPEND, ATTENTION_VALUES],
    &[Uniform, Read, Read, ReadWrite, ReadWrite, ReadWrite, Read]
);
pub const ATTENTION_GROUPED: KernelSpec = spec!(
    "attention_grouped",
    prelude: [ATTENTION_SHAPE, ROTARY, ATTENTION_QUERY],
    &[Uniform, Read, Read, Read, Read, ReadWrite, Read]
);
pub const ATTENTION_DIRECT: KernelSpec =
    spec!("attention_direct", prelude: [ATTENTION_SHAPE, ROTARY], &[Uniform, Read, Read, Read, Read, ReadWrite, Read]);
pub const ATTENTION_COMBINE: KernelSpec =
    spec!("attention_combine", prelude: [ATTENTION_SHAPE, WORKGROUP_REDUCE], &[Uniform, Read, Read, ReadWrite]);
pub const SILU_MUL: KernelSpec = spec!("silu_mul", prelude: [], &[Uniform, ReadWrite, Read]);
pub const GATHER_ROWS: KernelSpec = spec!("gather_rows", prelude: [], &[Uniform, Read, Read, ReadWrite]);
pub const TOP_K: KernelSpec = spec!("top_k", prelude: [], &[Uniform, Uniform, Read, ReadWrite, ReadWrite]);
pub const LM_HEAD_ROWS: KernelSpec =
    spec!("lm_head_rows", prelude: [PACKED, WEIGHT_PAIRS], &[Uniform, Read, Read, Read, ReadWrite]);
pub const KV_COPY: KernelSpec = spec!("kv_copy", prelude: [], &[Uniform, ReadWrite, ReadWrite]);
pub const SYNTHETIC: KernelSpec = spec!("synthetic", prelude: [], &[Uniform, ReadWrite]);

/// The override constant `WORKGROUP`: threads per workgroup of a kernel whose grid arithmetic
/// reads the same Rust constant, so the size is stated once.
pub(crate) fn workgroup(size: u32) -> (&'static str, f64) {
    ("WORKGROUP", f64::from(size))
}

fn div_up(a: usize, b: usize) -> u32 {
    a.div_ceil(b) as u32
}

/// Workgroups for `count` groups laid out as (x, y) within the 65,535-per-dimension limit;
/// shaders rebuild the index as `x + y * num_workgroups.x` and skip the excess.
fn grid_2d(count: u32) -> (u32, u32) {
    if count <= 65_535 { (count, 1) } else { (65_535, count.div_ceil(65_535)) }
}

/// Work of a dispatch: bytes moved and FLOPs done. Callers count in u64, not usize: on wasm32 a
/// layer's or the cache's counts pass 2^32 (f32 = 4 bytes).
fn work(bytes: u64, flops: u64) -> Work {
    Work { bytes, flops }
}
