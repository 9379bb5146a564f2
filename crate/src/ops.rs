//! One Rust type per WGSL kernel: it builds the kernel's bind groups once (shapes go into a small
//! uniform made at the same time) and encodes its dispatch into a compute pass. Each uniform
//! struct mirrors the `Shape` struct of its shader, 16 bytes, asserted below.
//!
//! Notation: M = tokens in the batch, R = rows read out, H = hidden, K/N = a Linear's in/out.

use std::rc::Rc;

use bytemuck::{Pod, Zeroable};

use crate::gpu::{Binding::*, Gpu, Kernel, KernelSpec, LINEAR, PACKED, PackedMatrix};

type Pass<'a> = wgpu::ComputePass<'a>;

macro_rules! spec {
    ($name:literal, prelude: [$($p:expr),*], [$($b:expr),*]) => {
        KernelSpec {
            name: $name,
            source: include_str!(concat!("../../shaders/", $name, ".wgsl")),
            prelude: &[$($p),*],
            bindings: &[$($b),*],
        }
    };
}

pub const EMBEDDING: KernelSpec = spec!("embedding", prelude: [PACKED], [Uniform, Read, Read, ReadWrite]);
pub const RMS_NORM: KernelSpec = spec!("rms_norm", prelude: [], [Uniform, Read, Read, ReadWrite]);
pub const MATMUL: KernelSpec =
    spec!("matmul", prelude: [PACKED, LINEAR], [Uniform, Uniform, Read, Read, Read, ReadWrite]);
pub const MATVEC: KernelSpec =
    spec!("matvec", prelude: [PACKED, LINEAR], [Uniform, Uniform, Read, Read, Read, ReadWrite]);
pub const LINEAR_DIRECT: KernelSpec =
    spec!("linear_direct", prelude: [PACKED, LINEAR], [Uniform, Uniform, Read, Read, Read, ReadWrite]);
pub const ROPE: KernelSpec = spec!("rope", prelude: [], [Uniform, Read, Read, ReadWrite]);
pub const KV_WRITE: KernelSpec = spec!("kv_write", prelude: [], [Uniform, Read, Read, Read, ReadWrite, ReadWrite]);
pub const ATTENTION: KernelSpec = spec!("attention", prelude: [], [Uniform, Read, Read, Read, Read, ReadWrite]);
pub const SILU_MUL: KernelSpec = spec!("silu_mul", prelude: [], [Uniform, ReadWrite, Read]);
pub const GATHER_ROWS: KernelSpec = spec!("gather_rows", prelude: [], [Uniform, Read, Read, ReadWrite]);
pub const TOP_K: KernelSpec = spec!("top_k", prelude: [], [Uniform, Uniform, Read, ReadWrite]);
pub const LM_HEAD_ROWS: KernelSpec = spec!("lm_head_rows", prelude: [PACKED], [Uniform, Read, Read, Read, ReadWrite]);
pub const KV_COPY: KernelSpec = spec!("kv_copy", prelude: [], [Uniform, ReadWrite, ReadWrite]);
pub const SYNTHETIC: KernelSpec = spec!("synthetic", prelude: [], [Uniform, ReadWrite]);

/// Largest decode batch the matvec kernel takes (its accumulators are `array<f32, 8>`).
pub const MATVEC_MAX_ROWS: u32 = 8;

/// A 16-byte uniform of four 32-bit fields (every shader's `Shape` has this layout).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct Shape4([u32; 4]);
const _: () = assert!(std::mem::size_of::<Shape4>() == 16);

impl Shape4 {
    fn new(a: u32, b: u32, c: u32, d: u32) -> Self {
        Self([a, b, c, d])
    }
}

fn div_up(a: usize, b: usize) -> u32 {
    a.div_ceil(b) as u32
}

/// Workgroups for `count` groups laid out as (x, y) within the 65,535-per-dimension limit;
/// shaders rebuild the index as `x + y * num_workgroups.x` and skip the excess.
fn grid_2d(count: u32) -> (u32, u32) {
    if count <= 65_535 { (count, 1) } else { (65_535, count.div_ceil(65_535)) }
}

fn run(pass: &mut Pass, kernel: &Kernel, group: &wgpu::BindGroup, grid: (u32, u32, u32)) {
    pass.set_pipeline(&kernel.pipeline);
    pass.set_bind_group(0, group, &[]);
    pass.dispatch_workgroups(grid.0, grid.1, grid.2);
}

/// `out[t, :] = embed_tokens[ids[t], :]` — ids: [M] u32, out: [M, H] f32; one dispatch per
/// row chunk of the (possibly split) embedding.
pub struct Embedding {
    kernel: Rc<Kernel>,
    chunks: Vec<wgpu::BindGroup>,
    cols: usize,
}

impl Embedding {
    pub fn new(gpu: &Gpu, ids: &wgpu::Buffer, table: &PackedMatrix, out: &wgpu::Buffer) -> Self {
        let kernel = gpu.kernel(&EMBEDDING, &[table.dtype_constant()]);
        let chunks = table
            .chunks
            .iter()
            .map(|c| {
                let shape =
                    gpu.uniform("embedding", &Shape4::new(table.cols as u32, c.row_start as u32, c.rows as u32, 0));
                gpu.bind(&kernel, &[&shape, ids, &c.buffer, out])
            })
            .collect();
        Self { kernel, chunks, cols: table.cols }
    }

    pub fn encode(&self, pass: &mut Pass, m: u32) {
        for group in &self.chunks {
            run(pass, &self.kernel, group, (div_up(self.cols / 2, 64), m, 1));
        }
    }
}

/// `out[r, :] = rms_norm(x[r, :]) * weight` — x, out: [rows, H]; weight: [H].
pub struct RmsNorm {
    kernel: Rc<Kernel>,
    group: wgpu::BindGroup,
}

impl RmsNorm {
    pub fn new(gpu: &Gpu, x: &wgpu::Buffer, weight: &wgpu::Buffer, out: &wgpu::Buffer, cols: usize, eps: f64) -> Self {
        let kernel = gpu.kernel(&RMS_NORM, &[]);
        let shape = gpu.uniform("rms_norm", &Shape4::new(cols as u32, (eps as f32).to_bits(), 0, 0));
        let group = gpu.bind(&kernel, &[&shape, x, weight, out]);
        Self { kernel, group }
    }

    pub fn encode(&self, pass: &mut Pass, rows: u32) {
        run(pass, &self.kernel, &self.group, (rows, 1, 1));
    }
}

/// A HF Linear: `y[m, :] (+)= x[m, :] @ W^T + b` — x: [M, K], W: [N, K] packed (row chunks),
/// b: [N], y: [M, out_cols]. Tiled matmul for prefill; for M <= 8 (decode) a matvec that
/// reads each weight once for all rows. On CPU-like devices ([`Gpu::direct_kernels`]) one
/// barrier-free kernel serves both. `accumulate` adds into y (the residual stream).
pub struct Linear {
    matmul: Rc<Kernel>,
    matvec: Rc<Kernel>,
    /// The barrier-free kernel with 4 token rows per invocation, and with 1 (M = 1).
    direct: Option<(Rc<Kernel>, Rc<Kernel>)>,
    chunks: Vec<(wgpu::BindGroup, usize)>,
}

impl Linear {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &Gpu,
        tokens: &wgpu::Buffer,
        x: &wgpu::Buffer,
        w: &PackedMatrix,
        bias: Option<&wgpu::Buffer>,
        y: &wgpu::Buffer,
        out_cols: usize,
        accumulate: bool,
    ) -> Self {
        let constants = [
            w.dtype_constant(),
            ("HAS_BIAS", f64::from(u8::from(bias.is_some()))),
            ("ACCUMULATE", f64::from(u8::from(accumulate))),
        ];
        let matmul = gpu.kernel(&MATMUL, &constants);
        let matvec = gpu.kernel(&MATVEC, &constants);
        let direct = gpu.direct_kernels.then(|| {
            let one = [constants[0], constants[1], constants[2], ("BLOCK_M", 1.0)];
            (gpu.kernel(&LINEAR_DIRECT, &constants), gpu.kernel(&LINEAR_DIRECT, &one))
        });
        // Without a bias the shader never reads binding 4; x stands in for it.
        let bias = bias.unwrap_or(x);
        let chunks = w
            .chunks
            .iter()
            .map(|c| {
                let shape = Shape4::new(w.cols as u32, c.rows as u32, c.row_start as u32, out_cols as u32);
                let shape = gpu.uniform("linear", &shape);
                (gpu.bind(&matmul, &[tokens, &shape, x, &c.buffer, bias, y]), c.rows)
            })
            .collect();
        Self { matmul, matvec, direct, chunks }
    }

    pub fn encode(&self, pass: &mut Pass, m: u32) {
        for (group, rows) in &self.chunks {
            if let Some((block4, block1)) = &self.direct {
                let (kernel, y) = if m == 1 { (block1, 1) } else { (block4, m.div_ceil(4)) };
                run(pass, kernel, group, (div_up(*rows, 4 * 64), y, 1));
            } else if m <= MATVEC_MAX_ROWS {
                let (x, y) = grid_2d(div_up(*rows, 4));
                run(pass, &self.matvec, group, (x, y, 1));
            } else {
                run(pass, &self.matmul, group, (div_up(*rows, 64), m.div_ceil(64), 1));
            }
        }
    }
}

/// Rotary embedding in place — x: [M, heads * D]; meta: [M] (cache base, position);
/// inv_freq: [D / 2] from [`crate::reference::rope_inv_freq`].
pub struct Rope {
    kernel: Rc<Kernel>,
    group: wgpu::BindGroup,
    threads: usize,
}

impl Rope {
    pub fn new(
        gpu: &Gpu,
        meta: &wgpu::Buffer,
        inv_freq: &wgpu::Buffer,
        x: &wgpu::Buffer,
        heads: usize,
        head_dim: usize,
    ) -> Self {
        let kernel = gpu.kernel(&ROPE, &[]);
        let shape = gpu.uniform("rope", &Shape4::new(heads as u32, head_dim as u32, 0, 0));
        let group = gpu.bind(&kernel, &[&shape, meta, inv_freq, x]);
        Self { kernel, group, threads: heads * head_dim / 2 }
    }

    pub fn encode(&self, pass: &mut Pass, m: u32) {
        run(pass, &self.kernel, &self.group, (div_up(self.threads, 64), m, 1));
    }
}

/// Appends keys and values to the cache — k, v: [M, kv_dim]; caches: [rows, kv_dim].
pub struct KvWrite {
    kernel: Rc<Kernel>,
    group: wgpu::BindGroup,
    kv_dim: usize,
}

impl KvWrite {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &Gpu,
        meta: &wgpu::Buffer,
        k: &wgpu::Buffer,
        v: &wgpu::Buffer,
        k_cache: &wgpu::Buffer,
        v_cache: &wgpu::Buffer,
        kv_dim: usize,
    ) -> Self {
        let kernel = gpu.kernel(&KV_WRITE, &[]);
        let shape = gpu.uniform("kv_write", &Shape4::new(kv_dim as u32, 0, 0, 0));
        let group = gpu.bind(&kernel, &[&shape, meta, k, v, k_cache, v_cache]);
        Self { kernel, group, kv_dim }
    }

    pub fn encode(&self, pass: &mut Pass, m: u32) {
        run(pass, &self.kernel, &self.group, (div_up(self.kv_dim, 64), m, 1));
    }
}

/// Causal GQA attention over the cache — q, out: [M, heads * D]; caches: [rows, kv_heads * D].
pub struct Attention {
    kernel: Rc<Kernel>,
    group: wgpu::BindGroup,
    heads: u32,
}

impl Attention {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &Gpu,
        meta: &wgpu::Buffer,
        q: &wgpu::Buffer,
        k_cache: &wgpu::Buffer,
        v_cache: &wgpu::Buffer,
        out: &wgpu::Buffer,
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
    ) -> Self {
        let kernel = gpu.kernel(&ATTENTION, &[]);
        let shape = gpu.uniform("attention", &Shape4::new(heads as u32, kv_heads as u32, head_dim as u32, 0));
        let group = gpu.bind(&kernel, &[&shape, meta, q, k_cache, v_cache, out]);
        Self { kernel, group, heads: heads as u32 }
    }

    pub fn encode(&self, pass: &mut Pass, m: u32) {
        run(pass, &self.kernel, &self.group, (self.heads, m, 1));
    }
}

/// SwiGLU in place — gate = silu(gate) * up; both [M, intermediate].
pub struct SiluMul {
    kernel: Rc<Kernel>,
    group: wgpu::BindGroup,
    cols: usize,
}

impl SiluMul {
    pub fn new(gpu: &Gpu, gate: &wgpu::Buffer, up: &wgpu::Buffer, cols: usize) -> Self {
        let kernel = gpu.kernel(&SILU_MUL, &[]);
        let shape = gpu.uniform("silu_mul", &Shape4::new(cols as u32, 0, 0, 0));
        let group = gpu.bind(&kernel, &[&shape, gate, up]);
        Self { kernel, group, cols }
    }

    pub fn encode(&self, pass: &mut Pass, m: u32) {
        run(pass, &self.kernel, &self.group, (div_up(self.cols, 256), m, 1));
    }
}

/// `out[r, :] = x[which[r], :]` — which: [R]; x: [M, H]; out: [R, H].
pub struct GatherRows {
    kernel: Rc<Kernel>,
    group: wgpu::BindGroup,
    cols: usize,
}

impl GatherRows {
    pub fn new(gpu: &Gpu, which: &wgpu::Buffer, x: &wgpu::Buffer, out: &wgpu::Buffer, cols: usize) -> Self {
        let kernel = gpu.kernel(&GATHER_ROWS, &[]);
        let shape = gpu.uniform("gather_rows", &Shape4::new(cols as u32, 0, 0, 0));
        let group = gpu.bind(&kernel, &[&shape, which, x, out]);
        Self { kernel, group, cols }
    }

    pub fn encode(&self, pass: &mut Pass, rows: u32) {
        run(pass, &self.kernel, &self.group, (div_up(self.cols, 64), rows, 1));
    }
}

/// Most entries [`TopK`] finds per row.
pub const TOP_K_MAX: usize = 64;

/// Full-vocabulary readout without copying rows to the CPU — logits: [R, vocab];
/// out: [R, 1 + TOP_K_MAX] pairs: (logsumexp bits, 0), then the k best (id, logit bits).
/// `rows` is the uniform (R, k).
pub struct TopK {
    kernel: Rc<Kernel>,
    group: wgpu::BindGroup,
}

impl TopK {
    pub fn new(gpu: &Gpu, rows: &wgpu::Buffer, logits: &wgpu::Buffer, out: &wgpu::Buffer, vocab: usize) -> Self {
        let kernel = gpu.kernel(&TOP_K, &[]);
        let shape = gpu.uniform("top_k", &Shape4::new(vocab as u32, 1 + TOP_K_MAX as u32, 0, 0));
        let group = gpu.bind(&kernel, &[rows, &shape, logits, out]);
        Self { kernel, group }
    }

    pub fn encode(&self, pass: &mut Pass, rows: u32) {
        run(pass, &self.kernel, &self.group, (rows, 1, 1));
    }
}

/// The LM head over chosen vocabulary rows only — ids: [k]; x: [R, H]; logits: [R, k].
pub struct LmHeadRows {
    kernel: Rc<Kernel>,
    chunks: Vec<wgpu::BindGroup>,
}

impl LmHeadRows {
    pub fn new(gpu: &Gpu, ids: &wgpu::Buffer, x: &wgpu::Buffer, head: &PackedMatrix, logits: &wgpu::Buffer) -> Self {
        let kernel = gpu.kernel(&LM_HEAD_ROWS, &[head.dtype_constant()]);
        let chunks = head
            .chunks
            .iter()
            .map(|c| {
                let shape =
                    gpu.uniform("lm_head_rows", &Shape4::new(head.cols as u32, c.row_start as u32, c.rows as u32, 0));
                gpu.bind(&kernel, &[&shape, ids, x, &c.buffer, logits])
            })
            .collect();
        Self { kernel, chunks }
    }

    pub fn encode(&self, pass: &mut Pass, ids: u32, rows: u32) {
        for group in &self.chunks {
            run(pass, &self.kernel, group, (ids, rows, 1));
        }
    }
}

/// Fills a matrix with the synthetic weights of tensor `seed` (see `synthetic.wgsl`).
pub fn fill_synthetic(gpu: &Gpu, pass: &mut Pass, m: &PackedMatrix, seed: u32, scale: f32) {
    let kernel = gpu.kernel(&SYNTHETIC, &[]);
    for c in &m.chunks {
        let pairs = c.rows * m.cols / 2;
        let first = (c.row_start * m.cols) as u32;
        let shape = gpu.uniform("synthetic", &Shape4::new(seed, first, pairs as u32, scale.to_bits()));
        let group = gpu.bind(&kernel, &[&shape, &c.buffer]);
        let (x, y) = grid_2d(div_up(pairs, 256));
        run(pass, &kernel, &group, (x, y, 1));
    }
}

/// Copies `rows` cache rows from row `src` to row `dst` in one layer's keys and values
/// (a rare, per-batch operation, so its bind group is made on the spot).
#[allow(clippy::too_many_arguments)]
pub fn kv_copy(
    gpu: &Gpu,
    pass: &mut Pass,
    k: &wgpu::Buffer,
    v: &wgpu::Buffer,
    src: u32,
    dst: u32,
    rows: u32,
    kv_dim: u32,
) {
    let kernel = gpu.kernel(&KV_COPY, &[]);
    let shape = gpu.uniform("kv_copy", &Shape4::new(src, dst, rows, kv_dim));
    let group = gpu.bind(&kernel, &[&shape, k, v]);
    run(pass, &kernel, &group, (kv_dim.div_ceil(64), rows, 1));
}
