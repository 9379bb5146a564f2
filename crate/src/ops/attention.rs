//! The attention block's kernels: the KV-cache write and copy, and attention. RoPE has no kernel
//! of its own: whichever kernel writes the new keys to the cache applies it to them (kv_write,
//! or in a decode step the attention kernels: attention_append.wgsl), and attention to the
//! queries (rotary.wgsl).

use std::rc::Rc;

use super::{
    ATTENTION, ATTENTION_COMBINE, ATTENTION_DIRECT, ATTENTION_GROUPED, ATTENTION_SPLIT, KV_COPY, KV_WRITE, Pass,
    div_up, grid_2d, uniform, work, workgroup,
};
use crate::error::{Error, Result};
use crate::gpu::{Gpu, Kernel};

uniform!(
    /// kv_write.wgsl's `Shape`.
    KvWriteShape { kv_dim: u32, head_dim: u32, stride: u32, k_col: u32 }
);
uniform!(
    /// attention_shape.wgsl's `Shape`, read by every attention kernel.
    AttentionShape {
        heads: u32,
        kv_heads: u32,
        head_dim: u32,
        splits: u32,
        q_stride: u32,
        _pad0: u32,
        _pad1: u32,
        _pad2: u32,
    }
);
uniform!(
    /// kv_copy.wgsl's `Shape`.
    KvCopyShape { src: u32, dst: u32, rows: u32, kv_dim: u32 }
);

/// Where the new tokens' keys and values are: in `qkv` ([M, stride]), keys from column `k_col`
/// (before RoPE), then the values.
pub struct NewKeysValues<'a> {
    pub qkv: &'a wgpu::Buffer,
    pub stride: usize,
    pub k_col: usize,
}

/// Threads per workgroup of kv_write and kv_copy, a cache value each.
const KV_WORKGROUP: u32 = 64;

/// Appends keys (RoPE applied on the way) and values to the cache — new: [`NewKeysValues`];
/// caches: [rows, kv_dim]; inv_freq: [D / 2] ([`crate::config::rope_inv_freq`]).
pub struct KvWrite {
    kernel: Rc<Kernel>,
    group: wgpu::BindGroup,
    kv_dim: usize,
}

impl KvWrite {
    /// `new` = the new tokens' keys and values; `cache` = one layer's (keys, values).
    pub fn new(
        gpu: &Gpu,
        token_meta: &wgpu::Buffer,
        inv_freq: &wgpu::Buffer,
        new: NewKeysValues,
        cache: (&wgpu::Buffer, &wgpu::Buffer),
        (kv_dim, head_dim): (usize, usize),
    ) -> Self {
        let kernel = gpu.kernel(&KV_WRITE, &[workgroup(KV_WORKGROUP)]);
        let (stride, k_col) = (new.stride as u32, new.k_col as u32);
        let shape = KvWriteShape { kv_dim: kv_dim as u32, head_dim: head_dim as u32, stride, k_col };
        let shape = gpu.uniform("kv_write", &shape);
        let group = gpu.bind(&kernel, &[&shape, token_meta, new.qkv, cache.0, cache.1, inv_freq]);
        Self { kernel, group, kv_dim }
    }

    pub fn encode(&self, pass: &mut Pass, m: u32) {
        let values = u64::from(m) * self.kv_dim as u64;
        pass.dispatch(
            &self.kernel,
            &self.group,
            (div_up(self.kv_dim, KV_WORKGROUP as usize), m, 1),
            work(values * 20, values * 3),
        );
    }
}

/// Keys per workgroup of the split decode attention, one per thread: the workgroup size `WG`
/// of attention_split.wgsl (and of attention.wgsl, whose threads hold 4 values of a head each,
/// and of attention_combine.wgsl), and attention_combine.wgsl's `CHUNK`.
pub const ATTENTION_CHUNK: usize = 64;

/// Longest head the attention kernels hold in workgroup memory (a config is checked against it
/// before any weight is read).
pub(crate) const MAX_HEAD_DIM: usize = 256;
const _: () = assert!(4 * ATTENTION_CHUNK >= MAX_HEAD_DIM, "attention.wgsl: 4 values of a head per thread");
const _: () = assert!(ATTENTION_CHUNK.is_power_of_two(), "workgroup_reduce.wgsl halves WG");

/// Most query heads per KV head that the grouped prefill attention takes in one workgroup
/// (attention_grouped.wgsl's `MAX_HEADS`): 7 in Qwen2.5-0.5B, 6 in 1.5B.
const GROUPED_MAX_HEADS: usize = 8;
/// Most vec4s of a group's queries (its `QUADS`): 4 output vec4s per thread.
const GROUPED_QUADS: usize = 4 * ATTENTION_CHUNK;

/// Query heads per workgroup of the barrier-free attention (attention_direct.wgsl's
/// `WORKGROUP`): one CPU SIMD width of 8 lanes (AVX2 f32).
const DIRECT_HEADS: usize = 8;

/// Loop passes one invocation of an attention kernel may run, all its loops together, on a
/// device that may limit them. lavapipe (llvmpipe) ends an invocation's loops after 65,535
/// passes in all, with no error: past that a kernel returns a softmax cut short. A loop's exit
/// test counts as a pass. So there the barrier-free and grouped kernels, whose threads walk
/// every key of a token, give way to the whole kernel where their loops would pass this (with a
/// margin): the whole kernel's threads take a few keys of each block of 256, about 230 passes a
/// block at D = 256, so it stays within it past 60,000 keys (D a multiple of 4; Qwen2.5's
/// context is 32,768). CPU implementations and the CPU-like kernel family keep to it; GPUs run
/// grouped at any length.
const LOOP_BUDGET: u64 = 60_000;

/// Batches of at most this many tokens (decode) take the split attention, when a token sees
/// more than [`split_attention_after`](crate::gpu::Tuning::split_attention_after) keys.
const SPLIT_MAX_TOKENS: u32 = 8;

/// How many keys a batch's tokens attend to (from the batch plan).
#[derive(Debug, Clone, Copy, Default)]
pub struct AttendedKeys {
    /// Most keys any one token sees.
    pub longest: u32,
    /// (token, key) pairs: each token's keys, summed.
    pub pairs: u64,
    /// Cache rows read at least once: each sequence's keys, summed.
    pub rows: u64,
    /// Every token is the only new one of its sequence (a decode step), so no token attends to
    /// another's new key: the whole and split kernels then append the new keys and values
    /// themselves.
    pub decode_step: bool,
}

/// Attention's sizes: query and key/value heads, head dim, and the KV capacity of a slot.
#[derive(Debug, Clone, Copy)]
pub struct AttentionDims {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub capacity: usize,
}

impl AttentionDims {
    /// Whether the barrier-free kernel (attention_direct.wgsl) stays within [`LOOP_BUDGET`] for
    /// a token that sees `keys` keys: per key one pass of the key loop and its two loops over the
    /// head in steps of 16 values (each with its exit test), and outside it two loops over the
    /// head.
    pub fn direct_takes(&self, keys: u32) -> bool {
        let steps = self.head_dim.div_ceil(16) as u64;
        let per_key = 1 + 2 * (steps + 1);
        u64::from(keys) * per_key + 16 * steps + self.head_dim as u64 + 3 <= LOOP_BUDGET
    }

    /// Whether the grouped prefill kernel (attention_grouped.wgsl) takes these heads
    /// ([`grouped_fits`]) and stays within [`LOOP_BUDGET`] for `keys` keys, counted from above:
    /// per block of
    /// [`ATTENTION_CHUNK`] keys, three loops over the group's heads, the key loads in steps of
    /// 16 values with a loop over the heads in each, the maximum's reduction with a loop over the
    /// heads in each step, and the value loops of the four output quads (each loop with its exit
    /// test).
    pub fn grouped_takes(&self, keys: u32) -> bool {
        let heads = (self.heads / self.kv_heads) as u64 + 1;
        let key_steps = (self.head_dim / 16) as u64;
        let reduce_steps = ATTENTION_CHUNK.ilog2() as u64 + 1;
        let values = 4 * (ATTENTION_CHUNK as u64 / 4 + 1 + 3 + 1);
        let per_block = 1 + 3 * heads + (key_steps + 1) + key_steps * heads + reduce_steps * heads + values;
        let blocks = u64::from(keys).div_ceil(ATTENTION_CHUNK as u64);
        grouped_fits(self) && blocks * per_block + 8 <= LOOP_BUDGET
    }

    fn splits(&self) -> usize {
        self.capacity.div_ceil(ATTENTION_CHUNK)
    }

    /// Bytes of the scratch buffer the split decode attention needs (shared by all layers).
    pub fn partial_bytes(&self) -> u64 {
        let per_token = self.heads * self.splits() * (self.head_dim + 2);
        (SPLIT_MAX_TOKENS as usize * per_token * 4) as u64
    }
}

/// Attention's buffers: token_meta [M] (cache base, position); q: [M, q_stride], the QKV
/// projection's output (heads * D queries, then kv_heads * D keys and as many values, before
/// RoPE); out: [M, heads * D]; caches: [rows, kv_heads * D]; partial:
/// [`AttentionDims::partial_bytes`] of scratch; inv_freq: [D / 2] ([`crate::config::rope_inv_freq`]).
pub struct AttentionBuffers<'a> {
    pub token_meta: &'a wgpu::Buffer,
    pub q: &'a wgpu::Buffer,
    pub q_stride: usize,
    pub k_cache: &'a wgpu::Buffer,
    pub v_cache: &'a wgpu::Buffer,
    pub out: &'a wgpu::Buffer,
    pub partial: &'a wgpu::Buffer,
    pub inv_freq: &'a wgpu::Buffer,
}

/// Causal GQA attention over the cache, after the new keys and values join it. GPUs: in
/// prefill one workgroup per (KV head, token) walks the token's keys for all query heads of the
/// KV head, reading each key and value once for them (where the head shapes allow it, else one
/// workgroup per (head, token)); in decode (M <= 8) past [`Tuning::split_attention_after`] keys
/// (one chunk of [`ATTENTION_CHUNK`] by default), the keys are split in such chunks, one
/// workgroup per (head, token, chunk), then merged, so a step's cost barely grows with the
/// context; other decode steps run one workgroup per (head, token). In a decode step the whole
/// and split kernels also append the new keys and values (no kv_write dispatch; where D % 4 ==
/// 0). GPU kernels read keys and values 16 bytes at a time. CPU-like devices
/// ([`Gpu::direct_kernels`]): one invocation per (head, token) up to
/// [`AttentionDims::direct_takes`]'s context (the whole kernel past it), no barriers (theirs are
/// expensive, and a few threads gain nothing from more workgroups).
///
/// [`Tuning::split_attention_after`]: crate::gpu::Tuning::split_attention_after
pub struct Attention {
    kv_write: KvWrite,
    /// Each GPU kernel plain, and appending the new keys and values (`APPEND`).
    whole: [(Rc<Kernel>, wgpu::BindGroup); 2],
    /// Where the head shapes allow it ([`grouped_fits`]).
    grouped: Option<(Rc<Kernel>, wgpu::BindGroup)>,
    split: [(Rc<Kernel>, wgpu::BindGroup); 2],
    combine: (Rc<Kernel>, wgpu::BindGroup),
    direct: (Rc<Kernel>, wgpu::BindGroup),
    heads: u32,
    dims: AttentionDims,
    cpu_like: bool,
    /// Keep each path within [`LOOP_BUDGET`]: a CPU implementation, or the CPU-like family.
    loop_limited: bool,
    /// Decode splits past this many keys ([`crate::gpu::Tuning::split_attention_after`]).
    split_after: u32,
}

impl Attention {
    pub fn new(gpu: &Gpu, io: AttentionBuffers, dims: AttentionDims) -> Result<Self> {
        if dims.head_dim > MAX_HEAD_DIM {
            return Err(Error::Config(format!(
                "head_dim {} is larger than the attention kernels support ({MAX_HEAD_DIM})",
                dims.head_dim
            )));
        }
        let shape = AttentionShape {
            heads: dims.heads as u32,
            kv_heads: dims.kv_heads as u32,
            head_dim: dims.head_dim as u32,
            splits: dims.splits() as u32,
            q_stride: io.q_stride as u32,
            _pad0: 0,
            _pad1: 0,
            _pad2: 0,
        };
        let shape = gpu.uniform("attention", &shape);
        let with_constants = |spec, constants: &[(&'static str, f64)], buffers: &[&wgpu::Buffer]| {
            let kernel = gpu.kernel(spec, constants);
            let group = gpu.bind(&kernel, buffers);
            (kernel, group)
        };
        let wg = ("WG", ATTENTION_CHUNK as f64);
        let append = |on: bool| ("APPEND", f64::from(u8::from(on)));
        let whole = [&shape, io.token_meta, io.q, io.k_cache, io.v_cache, io.out, io.inv_freq];
        let split = [&shape, io.token_meta, io.q, io.k_cache, io.v_cache, io.partial, io.inv_freq];
        let (kv_dim, head_dim) = (dims.kv_heads * dims.head_dim, dims.head_dim);
        let new = NewKeysValues { qkv: io.q, stride: io.q_stride, k_col: dims.heads * head_dim };
        let caches = (io.k_cache, io.v_cache);
        Ok(Self {
            kv_write: KvWrite::new(gpu, io.token_meta, io.inv_freq, new, caches, (kv_dim, head_dim)),
            whole: [false, true].map(|on| with_constants(&ATTENTION, &[wg, append(on)], &whole)),
            grouped: grouped_fits(&dims).then(|| {
                let sizes = [
                    wg,
                    ("MAX_HEADS", GROUPED_MAX_HEADS as f64),
                    ("SCORES", (GROUPED_MAX_HEADS * ATTENTION_CHUNK) as f64),
                    ("QUADS", GROUPED_QUADS as f64),
                ];
                with_constants(&ATTENTION_GROUPED, &sizes, &whole)
            }),
            direct: with_constants(
                &ATTENTION_DIRECT,
                &[workgroup(DIRECT_HEADS as u32), ("STEPS", dims.head_dim.div_ceil(16) as f64)],
                &whole,
            ),
            split: [false, true].map(|on| with_constants(&ATTENTION_SPLIT, &[wg, append(on)], &split)),
            combine: with_constants(
                &ATTENTION_COMBINE,
                &[wg, ("CHUNK", ATTENTION_CHUNK as f64)],
                &[&shape, io.token_meta, io.partial, io.out],
            ),
            heads: dims.heads as u32,
            dims,
            cpu_like: gpu.direct_kernels(),
            loop_limited: gpu.direct_kernels() || gpu.info().device_type == wgpu::DeviceType::Cpu,
            split_after: gpu.tuning().split_attention_after,
        })
    }

    /// Whether this device keeps the direct and grouped paths within [`LOOP_BUDGET`].
    pub fn loop_limited(&self) -> bool {
        self.loop_limited
    }

    /// Encodes the new keys' and values' write to the cache and attention for `m` tokens
    /// attending to `keys`.
    pub fn encode(&self, pass: &mut Pass, m: u32, keys: AttendedKeys) {
        let path = match self.cpu_like {
            true => AttentionPath::Direct,
            false if m <= SPLIT_MAX_TOKENS && keys.longest > self.split_after => AttentionPath::Split,
            false if keys.decode_step => AttentionPath::Whole,
            false => AttentionPath::Grouped,
        };
        self.encode_path(pass, m, keys, path);
    }

    /// [`Attention::encode`] by the given path (each is exact for any batch on any device);
    /// split only for m <= 8, which its scratch buffer holds, grouped only where the head shapes
    /// allow it, and on loop-limited devices grouped and direct only within [`LOOP_BUDGET`]:
    /// else whole.
    pub fn encode_path(&self, pass: &mut Pass, m: u32, keys: AttendedKeys, path: AttentionPath) {
        let path = match path {
            AttentionPath::Split if m > SPLIT_MAX_TOKENS => AttentionPath::Whole,
            AttentionPath::Grouped if self.grouped.is_none() => AttentionPath::Whole,
            AttentionPath::Grouped if self.loop_limited && !self.dims.grouped_takes(keys.longest) => {
                AttentionPath::Whole
            }
            AttentionPath::Direct if self.loop_limited && !self.dims.direct_takes(keys.longest) => AttentionPath::Whole,
            path => path,
        };
        let d = &self.dims;
        let (heads, kv_heads, head_dim) = (d.heads as u64, d.kv_heads as u64, d.head_dim as u64);
        let queries = u64::from(m) * heads * head_dim;
        // Appending writes the new key 16 bytes at a time (attention_append.wgsl).
        let append = keys.decode_step
            && d.head_dim.is_multiple_of(4)
            && matches!(path, AttentionPath::Whole | AttentionPath::Split);
        // Appended rows are read from q, not from the cache, and written to the cache.
        let new_rows = if append { u64::from(m) } else { 0 };
        let cache = keys.rows.saturating_sub(new_rows) * kv_heads * head_dim * 2;
        let appended = 2 * new_rows * kv_heads * head_dim * 2;
        let scores = 4 * heads * head_dim * keys.pairs;
        if !append {
            self.kv_write.encode(pass, m);
        }
        let kernel = usize::from(append);
        match (path, &self.grouped) {
            (AttentionPath::Split, _) => {
                let chunks = keys.longest.div_ceil(ATTENTION_CHUNK as u32).max(1);
                let partial = u64::from(m) * heads * u64::from(chunks) * (head_dim + 2);
                let (split_kernel, group) = &self.split[kernel];
                let split = work(4 * (queries + cache + partial + appended), scores);
                pass.dispatch(split_kernel, group, (self.heads, m, chunks), split);
                let combine = work(4 * (partial + queries), 2 * partial);
                pass.dispatch(&self.combine.0, &self.combine.1, (self.heads, m, 1), combine);
            }
            (AttentionPath::Direct, _) => {
                let grid = (div_up(d.heads, DIRECT_HEADS), m, 1);
                pass.dispatch(&self.direct.0, &self.direct.1, grid, work(4 * (2 * queries + cache), scores))
            }
            (AttentionPath::Grouped, Some((grouped, group))) => {
                let grid = (d.kv_heads as u32, m, 1);
                pass.dispatch(grouped, group, grid, work(4 * (2 * queries + cache), scores))
            }
            _ => {
                let (whole, group) = &self.whole[kernel];
                pass.dispatch(whole, group, (self.heads, m, 1), work(4 * (2 * queries + cache + appended), scores))
            }
        }
    }
}

/// How [`Attention`] runs: one workgroup walks all keys of a (head, token), or of a (KV head,
/// token) for all its query heads (prefill), or the keys are split across workgroups and merged
/// (decode), or one invocation walks them (CPU-like devices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionPath {
    Whole,
    Grouped,
    Split,
    Direct,
}

/// Whether attention_grouped.wgsl takes these heads: whole 16-value steps of a head (its key
/// loads), at most [`GROUPED_MAX_HEADS`] query heads per KV head, and their queries in
/// [`GROUPED_QUADS`] vec4s of workgroup memory.
fn grouped_fits(dims: &AttentionDims) -> bool {
    let group = dims.heads / dims.kv_heads;
    dims.head_dim.is_multiple_of(16) && group <= GROUPED_MAX_HEADS && group * dims.head_dim <= 4 * GROUPED_QUADS
}

/// Copies `rows` cache rows from row `src` to row `dst` in one layer's keys and values
/// (a rare, per-batch operation, so its bind group is made on the spot).
pub fn kv_copy(gpu: &Gpu, pass: &mut Pass, cache: (&wgpu::Buffer, &wgpu::Buffer), shape: KvCopyShape) {
    let kernel = gpu.kernel(&KV_COPY, &[workgroup(KV_WORKGROUP)]);
    let group = gpu.bind(&kernel, &[&gpu.uniform("kv_copy", &shape), cache.0, cache.1]);
    let values = u64::from(shape.rows) * u64::from(shape.kv_dim);
    let (x, y) = grid_2d(values.div_ceil(u64::from(KV_WORKGROUP)) as u32);
    pass.dispatch(&kernel, &group, (x, y, 1), work(values * 16, 0));
}
