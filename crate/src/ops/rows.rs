//! Row-wise kernels: the embedding gather, RMSNorm, SwiGLU, the read-out gather, the LM head's
//! top-k and choice rows.

use std::rc::Rc;

use super::{
    EMBEDDING, GATHER_ROWS, LM_HEAD_ROWS, Pass, RMS_NORM, RMS_NORM_ROWS, SILU_MUL, TOP_K, div_up, uniform, work,
    workgroup,
};
use crate::gpu::{Gpu, Kernel, KernelSpec, PackedMatrix, Work};

uniform!(
    /// The `Shape` of embedding.wgsl and lm_head_rows.wgsl: one row chunk of a vocabulary matrix.
    ChunkShape { cols: u32, row_start: u32, rows: u32, _pad: u32 }
);
uniform!(
    /// The `Shape` of rms_norm.wgsl and rms_norm_rows.wgsl.
    RmsNormShape { cols: u32, eps: f32, _pad0: u32, _pad1: u32 }
);
uniform!(
    /// The `Shape` of silu_mul.wgsl and gather_rows.wgsl.
    ColsShape { cols: u32, _pad0: u32, _pad1: u32, _pad2: u32 }
);
uniform!(
    /// top_k.wgsl's `Shape`.
    TopKShape { cols: u32, stride: u32, _pad0: u32, _pad1: u32 }
);

fn cols_shape(cols: usize) -> ColsShape {
    ColsShape { cols: cols as u32, _pad0: 0, _pad1: 0, _pad2: 0 }
}

fn chunk_shape(m: &PackedMatrix, row_start: usize, rows: usize) -> ChunkShape {
    ChunkShape { cols: m.cols() as u32, row_start: row_start as u32, rows: rows as u32, _pad: 0 }
}

/// Threads per workgroup of the embedding (a pair of values each), silu_mul and gather_rows (a
/// value each).
const EMBEDDING_WORKGROUP: u32 = 64;
const SILU_MUL_WORKGROUP: u32 = 256;
const GATHER_ROWS_WORKGROUP: u32 = 64;

/// `out[t, :] = embed_tokens[ids[t], :]` — ids: [M] u32, out: [M, H] f32; one dispatch per
/// row chunk of the (possibly split) embedding.
pub struct Embedding(PerChunk);

impl Embedding {
    pub fn new(gpu: &Gpu, ids: &wgpu::Buffer, table: &PackedMatrix, out: &wgpu::Buffer) -> Self {
        let spec = (&EMBEDDING, &[workgroup(EMBEDDING_WORKGROUP)][..]);
        Self(PerChunk::new(gpu, spec, table, |kernel, shape, chunk| gpu.bind(kernel, &[shape, ids, chunk, out])))
    }

    pub fn encode(&self, pass: &mut Pass, m: u32) {
        // Each token's row is read from one chunk: the bytes are shared out among them.
        let c = &self.0;
        let bytes = u64::from(m) * (c.row_bytes + 4 * c.cols) as u64 / c.count() as u64;
        c.dispatch_each(pass, (div_up(c.cols / 2, EMBEDDING_WORKGROUP as usize), m, 1), work(bytes, 0));
    }
}

/// A kernel over a vocabulary matrix, bound once per row chunk with that chunk's
/// [`ChunkShape`] (the embedding gather and the choice rows of the LM head).
struct PerChunk {
    kernel: Rc<Kernel>,
    groups: Vec<wgpu::BindGroup>,
    cols: usize,
    row_bytes: usize,
}

impl PerChunk {
    /// `bind(kernel, shape, chunk)` makes one chunk's bind group; `constants` are the kernel's
    /// own besides the matrix's DTYPE.
    fn new(
        gpu: &Gpu,
        (spec, constants): (&KernelSpec, &[(&'static str, f64)]),
        m: &PackedMatrix,
        bind: impl Fn(&Kernel, &wgpu::Buffer, &wgpu::Buffer) -> wgpu::BindGroup,
    ) -> Self {
        let kernel = gpu.kernel(spec, &[&[m.dtype_constant()], constants].concat());
        let groups = m
            .chunks()
            .iter()
            .map(|c| bind(&kernel, &gpu.uniform(spec.name, &chunk_shape(m, c.row_start, c.rows)), &c.buffer))
            .collect();
        Self { kernel, groups, cols: m.cols(), row_bytes: m.row_bytes() as usize }
    }

    fn count(&self) -> usize {
        self.groups.len().max(1)
    }

    /// One dispatch per chunk, each doing `work` (a share of the whole).
    fn dispatch_each(&self, pass: &mut Pass, grid: (u32, u32, u32), work: Work) {
        for group in &self.groups {
            pass.dispatch(&self.kernel, group, grid, work);
        }
    }
}

/// `out[r, :] = rms_norm(x[r, :]) * weight` — x, out: [rows, H]; weight: [H].
pub struct RmsNorm {
    kernel: Rc<Kernel>,
    group: wgpu::BindGroup,
    cols: usize,
}

impl RmsNorm {
    /// On CPU-like devices (and a hidden size of whole vec4s) a row per invocation
    /// (rms_norm_rows.wgsl), else a workgroup per row (rms_norm.wgsl); one grid either way.
    pub fn new(gpu: &Gpu, x: &wgpu::Buffer, weight: &wgpu::Buffer, out: &wgpu::Buffer, cols: usize, eps: f64) -> Self {
        let spec = if gpu.direct_kernels() && cols.is_multiple_of(4) { &RMS_NORM_ROWS } else { &RMS_NORM };
        let kernel = gpu.kernel(spec, &[]);
        let shape = RmsNormShape { cols: cols as u32, eps: eps as f32, _pad0: 0, _pad1: 0 };
        let group = gpu.bind(&kernel, &[&gpu.uniform("rms_norm", &shape), x, weight, out]);
        Self { kernel, group, cols }
    }

    pub fn encode(&self, pass: &mut Pass, rows: u32) {
        let values = u64::from(rows) * self.cols as u64;
        pass.dispatch(&self.kernel, &self.group, (rows, 1, 1), work(values * 8 + self.cols as u64 * 4, values * 4));
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
        let kernel = gpu.kernel(&SILU_MUL, &[workgroup(SILU_MUL_WORKGROUP)]);
        let group = gpu.bind(&kernel, &[&gpu.uniform("silu_mul", &cols_shape(cols)), gate, up]);
        Self { kernel, group, cols }
    }

    pub fn encode(&self, pass: &mut Pass, m: u32) {
        let values = u64::from(m) * self.cols as u64;
        pass.dispatch(
            &self.kernel,
            &self.group,
            (div_up(self.cols, SILU_MUL_WORKGROUP as usize), m, 1),
            work(values * 12, values * 5),
        );
    }
}

/// `out[r, :] = x[token_rows[r], :]` — token_rows: [R]; x: [M, H]; out: [R, H].
pub struct GatherRows {
    kernel: Rc<Kernel>,
    group: wgpu::BindGroup,
    cols: usize,
}

impl GatherRows {
    pub fn new(gpu: &Gpu, token_rows: &wgpu::Buffer, x: &wgpu::Buffer, out: &wgpu::Buffer, cols: usize) -> Self {
        let kernel = gpu.kernel(&GATHER_ROWS, &[workgroup(GATHER_ROWS_WORKGROUP)]);
        let group = gpu.bind(&kernel, &[&gpu.uniform("gather_rows", &cols_shape(cols)), token_rows, x, out]);
        Self { kernel, group, cols }
    }

    pub fn encode(&self, pass: &mut Pass, rows: u32) {
        let values = u64::from(rows) * self.cols as u64;
        pass.dispatch(
            &self.kernel,
            &self.group,
            (div_up(self.cols, GATHER_ROWS_WORKGROUP as usize), rows, 1),
            work(values * 8, 0),
        );
    }
}

/// Most entries [`TopK`] finds per row.
pub const TOP_K_MAX: usize = 64;

/// Logits per workgroup of [`TopK`]'s first pass and threads per workgroup (top_k.wgsl's
/// `CHUNK` and `WG`) on GPUs: 149 chunks of Qwen2.5's 151,936, so one row's first pass fills a
/// GPU, 4 logits a thread.
const TOP_K_GPU: (usize, u32) = (1024, 256);

/// The same on CPU-like devices: workgroups of 8 (one 256-bit SIMD batch of lavapipe's), 4,096
/// logits each. A CPU runs a workgroup's threads as SIMD batches of one thread and each of the
/// kernel's barriers as a switch between them: one workgroup of 256 per row took 1.9-2.3 ms a
/// decode step on lavapipe (0.5B), where these take 0.5-1.1 (and 8 to 32 threads, 1,024 to 8,192
/// logits, all read about alike); one thread per workgroup, 1.7-3.1 ms.
const TOP_K_CPU: (usize, u32) = (4096, 8);

/// Full-vocabulary readout without copying rows to the CPU — logits: [R, vocab];
/// out: [R, 1 + TOP_K_MAX] pairs: (logsumexp bits, 0), then the k best (id, logit bits).
/// `rows` is the uniform (R, k), R at most `max_rows`. Two passes: the k best and the sum of
/// each chunk of logits (into a scratch buffer of its own), then of the chunks. Chunks and
/// workgroups are sized for the device: [`TOP_K_GPU`], [`TOP_K_CPU`] (on CPU-like devices,
/// 256 threads a workgroup read a decode step's row in 1.6 ms as one chunk and 10.6 ms as
/// 149, on lavapipe: there the workgroup's size, not the chunks' count, was the cost).
pub struct TopK {
    chunks: Rc<Kernel>,
    merge: Rc<Kernel>,
    group: wgpu::BindGroup,
    vocab: usize,
    chunk: usize,
    /// `[R, chunks, 1 + TOP_K_MAX]` each chunk's best pairs, for the merge pass.
    scratch: wgpu::Buffer,
}

impl Drop for TopK {
    fn drop(&mut self) {
        self.scratch.destroy(); // on the web a dropped buffer lingers until garbage collection
    }
}

impl TopK {
    pub fn new(
        gpu: &Gpu,
        rows: &wgpu::Buffer,
        logits: &wgpu::Buffer,
        out: &wgpu::Buffer,
        vocab: usize,
        max_rows: usize,
    ) -> Self {
        let stride = 1 + TOP_K_MAX;
        let (chunk, wg) = if gpu.direct_kernels() { TOP_K_CPU } else { TOP_K_GPU };
        let pass = |merge: bool| {
            let constants = [("MERGE", f64::from(u8::from(merge))), ("CHUNK", chunk as f64), ("WG", f64::from(wg))];
            gpu.kernel(&TOP_K, &constants)
        };
        let (chunks, merge) = (pass(false), pass(true));
        let shape = TopKShape { cols: vocab as u32, stride: stride as u32, _pad0: 0, _pad1: 0 };
        let scratch = gpu.storage("top_k chunks", (max_rows * vocab.div_ceil(chunk) * stride * 8) as u64);
        let group = gpu.bind(&chunks, &[rows, &gpu.uniform("top_k", &shape), logits, &scratch, out]);
        Self { chunks, merge, group, vocab, chunk, scratch }
    }

    /// Finds the `k` best of each of `rows` rows (k passes over each row's logits, then over
    /// its chunks' k best).
    pub fn encode(&self, pass: &mut Pass, rows: u32, k: usize) {
        let count = self.vocab.div_ceil(self.chunk);
        let reads = u64::from(rows) * (self.vocab * k) as u64;
        let written = u64::from(rows) * (count * (1 + k)) as u64;
        pass.dispatch(&self.chunks, &self.group, (count as u32, rows, 1), work(reads * 4 + written * 8, reads * 2));
        let merged = written * k as u64;
        pass.dispatch(&self.merge, &self.group, (1, rows, 1), work(merged * 8, merged * 2));
    }
}

/// The LM head over chosen vocabulary rows only — ids: [k]; x: [R, H]; logits: [R, k].
pub struct LmHeadRows(PerChunk);

impl LmHeadRows {
    pub fn new(gpu: &Gpu, ids: &wgpu::Buffer, x: &wgpu::Buffer, head: &PackedMatrix, logits: &wgpu::Buffer) -> Self {
        Self(PerChunk::new(gpu, (&LM_HEAD_ROWS, &[]), head, |kernel, shape, chunk| {
            gpu.bind(kernel, &[shape, ids, x, chunk, logits])
        }))
    }

    pub fn encode(&self, pass: &mut Pass, ids: u32, rows: u32) {
        // Each id's row lives in one chunk: the work is shared out among them.
        let c = &self.0;
        let (n_ids, n_rows, cols, chunks) = (u64::from(ids), u64::from(rows), c.cols as u64, c.count() as u64);
        let bytes = (n_ids * c.row_bytes as u64 + n_rows * cols * 4) / chunks;
        c.dispatch_each(pass, (ids, rows, 1), work(bytes, 2 * n_ids * n_rows * cols / chunks));
    }
}
