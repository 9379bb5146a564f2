//! The linear layers: one interface (linear.wgsl), three kernels (matmul, matvec, linear_direct).

use std::rc::Rc;

use super::{
    LINEAR_BLOCKS, LINEAR_BLOCKS_UNIFORM_X, LINEAR_DIRECT, MATMUL, MATVEC, Pass, SPLIT_SUM, div_up, grid_2d, uniform,
    work, workgroup,
};
use crate::gpu::{Gpu, Kernel, KernelSpec, PackedMatrix, Tuning, WEIGHT_TEXTURE_WIDTH};

uniform!(
    /// linear.wgsl's `Shape`, one per weight chunk.
    LinearShape { k: u32, n: u32, n_offset: u32, out_cols: u32, row_start: u32, eps: f32, splits: u32, _pad2: u32 }
);

/// Most token rows the matvec kernel serves (8 at a time, in its two vec4 accumulators): the
/// largest, and default, [`Tuning::matvec_max_rows`] (why matvec up to here: see its default).
pub const MATVEC_MAX_ROWS: u32 = 32;

/// Invocations per workgroup of linear_direct (its `WORKGROUP`): small, so that a layer of few
/// rows (896 for Qwen2.5-0.5B's o_proj) still makes enough workgroups for every CPU thread
/// (lavapipe, 2 threads: 224 invocations in 4 workgroups of 64 left the down projection 12%
/// slower than in 14 of 16).
const DIRECT_WORKGROUP: u32 = 16;

/// The block of token rows x weight rows one invocation of linear_direct computes (its
/// `BLOCK_M` and `BLOCK_N`).
#[derive(Debug, Clone, Copy)]
struct DirectBlock {
    m: u32,
    n: u32,
}

/// linear_direct's blocks on lavapipe (llvmpipe), by batch: one token row (decode; a block of
/// more would compute it over again), a few (up to 4), and more (prefill). lavapipe's cost is
/// the values each invocation loads (see linear_direct.wgsl), and larger blocks load each one
/// for more products. Measured there (2 threads, bf16, 0.5B's shapes): at 128 token rows 16 x 16
/// blocks took 59 / 312 / 324 ms for 896x896 / 896x4864 / 4864x896 where 4 x 4 took 153 / 816 /
/// 772 (8 x 8: 93 / 540 / 529; 32 x 8 and 8 x 32 slower than 16 x 16); at 16 rows 8.4 / 38 /
/// 49 ms against 14 / 77 / 76 for 4 x 8; for one row 1 x 8 read the weights about 15% faster
/// than 1 x 4. (Those were measured with the weights in storage; read from textures, as now,
/// 16 x 16 took 21-24 / 79-120 ms at 128 rows of 896x896 / 896x4864 where 16 x 8, 8 x 16, 8 x 8
/// and 4 x 8 took 24-42 / 118-189, and one row's 1 x 4, 1 x 8 and 1 x 16 were within this
/// machine's noise of each other.)
const LAVAPIPE_BLOCKS: [DirectBlock; 3] =
    [DirectBlock { m: 1, n: 8 }, DirectBlock { m: 4, n: 8 }, DirectBlock { m: 16, n: 16 }];

/// linear_direct's blocks on other CPU-like devices (SwiftShader, the browser's CPU WebGPU), in
/// linear_direct.wgsl: 1 x 4 for one token row, else 4 x 4. Measured natively on Chromium's
/// SwiftShader Vulkan driver, linear_blocks.wgsl ran decode at half their speed in lavapipe's
/// blocks and prefill at two thirds, and at these blocks four times slower: SwiftShader seems
/// to keep its loops, so its arrays stay dynamically indexed.
const SMALL_BLOCKS: [DirectBlock; 3] =
    [DirectBlock { m: 1, n: 4 }, DirectBlock { m: 4, n: 4 }, DirectBlock { m: 4, n: 4 }];

/// The kernel and blocks for this device: linear_blocks.wgsl in lavapipe's blocks where the
/// adapter is llvmpipe (whose weights are textures: [`Gpu::weight_textures`]), else
/// linear_direct.wgsl (whose blocks are 4 weight rows wide, without a `BLOCK_N`) in the small
/// ones.
fn direct_kernel(gpu: &Gpu) -> (&'static KernelSpec, &'static [DirectBlock; 3]) {
    if gpu.weight_textures() { (&LINEAR_BLOCKS, &LAVAPIPE_BLOCKS) } else { (&LINEAR_DIRECT, &SMALL_BLOCKS) }
}

/// Bytes of the uniform binding through which lavapipe reads a window of x
/// (linear_x_uniform.wgsl's array): WebGPU's default most for a uniform binding (lavapipe's too),
/// 16,384 values: one token row of up to 16,320 (less the slack of an aligned start), or a
/// block of 16 rows of up to 1,020.
pub const LINEAR_X_UNIFORM_BYTES: u64 = 64 << 10;

/// Whether this device's linear layers read x through a uniform binding, a window of token rows
/// at a time (where x is a [`linear_input`] and a block's rows fit: [`window_rows`]): lavapipe's
/// direct kernel, whose storage loads are lane by lane and whose uniform loads at an offset the
/// same for all lanes are one. Measured there (2 threads, bf16, 0.5B's shapes), one token row:
/// 896x896 / 896x4864 / 4864x896 took 1.63 / 7.99 / 8.69 ms where x read as storage took 1.97 /
/// 9.35 / 10.60, about what they took with x not read at all (1.58 / 7.60 / 8.48): the weights
/// alone are left; 128 token rows in 16-row windows: 896x896 and 896x4864 took 24-29 and
/// 113-118 ms where x read as storage took 39-47 and 213-244, and 4864x896 with x in 8 parts
/// ([`activation_part`]) 127-130 ms where x whole, read as storage, took 212-245 (medians of
/// noisy runs: this machine's own copy bandwidth varied from 1.6 to 2.2 GB/s between them).
///
/// Only where a storage binding holds 16 windows or more: the x buffers' slack (a window's
/// length, [`linear_input_slack`]) is then a small part of the binding that also holds the
/// tokens (WebGPU's default binding is 128 MiB; a device held to less, as a test's is, keeps x
/// in storage).
fn reads_x_uniform(gpu: &Gpu) -> bool {
    gpu.weight_textures() // lavapipe's direct kernels
        && gpu.limits().max_uniform_buffer_binding_size >= LINEAR_X_UNIFORM_BYTES
        && gpu.max_binding() >= 16 * LINEAR_X_UNIFORM_BYTES
}

/// A buffer for linear layers to read as x, `bytes` long: storage, and where the device reads
/// x through a uniform binding, a uniform buffer [`linear_input_slack`] longer.
pub fn linear_input(gpu: &Gpu, label: &str, bytes: u64) -> wgpu::Buffer {
    if reads_x_uniform(gpu) {
        gpu.storage_and_uniform(label, bytes + linear_input_slack(gpu))
    } else {
        gpu.storage(label, bytes)
    }
}

/// Bytes a [`linear_input`] holds past its values (bound whole as storage, all of it must fit
/// one binding): where the device reads x through uniform windows, a window's length, so that a
/// window starting at any of its rows stays inside it; else none.
pub fn linear_input_slack(gpu: &Gpu) -> u64 {
    if reads_x_uniform(gpu) { LINEAR_X_UNIFORM_BYTES } else { 0 }
}

/// linear_blocks.wgsl's `MAX_BLOCK`: the most rows of either side of a block.
const DIRECT_MAX_BLOCK: u32 = 16;
const _: () = {
    let mut i = 0;
    while i < 2 * LAVAPIPE_BLOCKS.len() {
        let b = if i < 3 { LAVAPIPE_BLOCKS[i] } else { SMALL_BLOCKS[i - 3] };
        assert!(
            b.m <= DIRECT_MAX_BLOCK && b.n <= DIRECT_MAX_BLOCK && b.n.is_multiple_of(4),
            "linear_direct.wgsl's bounds"
        );
        i += 1;
    }
};

/// Token rows of x that one uniform window holds for a block of `block_m` rows at K = `k`
/// ([`reads_x_uniform`]), a window starting at a multiple of `stride` bytes at or before its
/// first row: the block's rows where they fit, else as many as fit where that is half the block
/// or more; `None` for fewer. A block's rows share each load of the weights, lavapipe's larger
/// cost: at K = 4,864 (3 rows) x read as storage in 16-row blocks would be faster; x that wide is
/// kept in parts instead ([`activation_part`]).
fn window_rows(block_m: u32, k: usize, stride: u32) -> Option<u32> {
    let fit = (LINEAR_X_UNIFORM_BYTES - u64::from(stride)) / (4 * k as u64).max(1);
    let rows = fit.min(u64::from(block_m)) as u32;
    (rows > 0 && 2 * rows >= block_m).then_some(rows)
}

/// Columns per part in which lavapipe keeps an activation `cols` wide for a linear layer to
/// read as x (linear.wgsl's `Y_PART` for the layers writing it, linear_x_uniform.wgsl's
/// `X_PART` for the one reading it), where a uniform window of a prefill's block of token rows
/// cannot hold its rows whole: the fewest equal parts, of whole blocks of 32 values (quantized
/// rows' blocks), that it can hold. 0.5B's MLP activation (4,864 wide) in 8 parts of 608, 1.5B's
/// (8,960) in 10 of 896. 0: the activation is kept whole (`[M, cols]`), as elsewhere.
pub fn activation_part(gpu: &Gpu, cols: usize) -> usize {
    let (block, stride) = (LAVAPIPE_BLOCKS[2].m, gpu.record_stride());
    let whole_rows_fit = |cols| window_rows(block, cols, stride) == Some(block);
    if !reads_x_uniform(gpu) || whole_rows_fit(cols) || !cols.is_multiple_of(32) {
        return 0;
    }
    let blocks = cols / 32;
    (2..=blocks).filter(|p| blocks.is_multiple_of(*p)).map(|p| cols / p).find(|&part| whole_rows_fit(part)).unwrap_or(0)
}

/// The value of x at which the window of `rows` token rows from `first_row` on of part `part`
/// of x (`[parts][M][cols]`; one part: `[M, cols]`) starts: its first value, rounded down to a
/// whole `align` of values (a dynamic offset's alignment). linear_x_uniform.wgsl's
/// x_window_start, alike.
fn window_start(part: u32, m: u32, first_row: u32, cols: usize, align: u32) -> u32 {
    let first = (u64::from(part) * u64::from(m) + u64::from(first_row)) * cols as u64;
    (first / u64::from(align) * u64::from(align)) as u32
}

/// A direct kernel reading x through uniform windows: one dispatch per window of `rows` token
/// rows and part of x (`parts` of `cols` columns), each binding x at its [`window_start`] and
/// the window's record in `table` (linear_x_uniform.wgsl's `Window`: record `j * parts + part`
/// for window j).
struct Windowed {
    kernel: Rc<Kernel>,
    /// Parts after the first, where x is in parts: adding their dot products to the first's.
    later_parts: Option<Rc<Kernel>>,
    rows: u32,
    /// Weight rows of the kernel's block (its `BLOCK_N`).
    block_n: u32,
    cols: usize,
    parts: usize,
    table: Rc<wgpu::Buffer>,
}

/// The index in `blocks` of the block for `m` token rows: the first that covers them, else the
/// largest.
fn direct_block(blocks: &[DirectBlock; 3], m: u32) -> usize {
    blocks.iter().position(|b| m <= b.m).unwrap_or(blocks.len() - 1)
}

/// matvec's workgroup: `lanes` threads along each of `rows` weight rows (its `LANES` and `ROWS`),
/// 256 threads in all (the size of its workgroup arrays).
#[derive(Debug, Clone, Copy)]
struct MatvecShape {
    lanes: u32,
    rows: u32,
}

/// 8 rows of 32 lanes: as many rows as a block of token rows, since a folded norm sums token row
/// r in the workgroup's thread row r.
const MATVEC_NARROW: MatvecShape = MatvecShape { lanes: 32, rows: 8 };

/// 4 rows of 64 lanes, for long rows (K >= [`MATVEC_WIDE_K`]) without a folded norm: 0.5B's
/// down_proj (896 rows of 4,864) makes 112 workgroups of 8 rows, fewer than an H200's 132
/// compute units, and with four 16-byte loads in flight per thread they hold about 1.8 MB in
/// flight, where streaming 4.8 TB/s across a loaded memory latency of 0.6 to 1 us wants 3 to 5
/// MB. The same rows in 4-row workgroups of 64 lanes double the threads and the loads in flight.
/// Short rows stay narrow: at K = 896 a 64-lane thread would have under two loads to make.
const MATVEC_WIDE: MatvecShape = MatvecShape { lanes: 64, rows: 4 };
const MATVEC_WIDE_K: usize = 2048;
const _: () = assert!(MATVEC_NARROW.lanes * MATVEC_NARROW.rows == 256 && MATVEC_WIDE.lanes * MATVEC_WIDE.rows == 256);

/// matvec's workgroup shapes by their lanes per weight row: 32 (8 rows) and 64 (4 rows). The
/// decode microbenchmark times a layer at each, so a GPU's run says which suits it.
pub const MATVEC_LANES: [u32; 2] = [MATVEC_NARROW.lanes, MATVEC_WIDE.lanes];

impl MatvecShape {
    /// The shape a layer of K = `k` runs (`norm`: with a folded norm, which needs 8 rows).
    fn for_layer(k: usize, norm: bool) -> Self {
        if !norm && k >= MATVEC_WIDE_K { MATVEC_WIDE } else { MATVEC_NARROW }
    }

    /// The shape `lanes` wide, one of [`MATVEC_LANES`].
    fn of_lanes(lanes: u32) -> Option<Self> {
        [MATVEC_NARROW, MATVEC_WIDE].into_iter().find(|s| s.lanes == lanes)
    }
}

/// matvec built for one layer, and its workgroup's shape.
struct Matvec {
    kernel: Rc<Kernel>,
    shape: MatvecShape,
}

impl Matvec {
    /// matvec in workgroups of `shape` with these constants.
    fn new(gpu: &Gpu, shape: MatvecShape, constants: &[(&'static str, f64)]) -> Self {
        let sizes = [("LANES", f64::from(shape.lanes)), ("ROWS", f64::from(shape.rows))];
        Self { kernel: gpu.kernel(&MATVEC, &[constants, &sizes[..]].concat()), shape }
    }

    /// The grid for a chunk of `rows` weight rows.
    fn grid(&self, rows: usize) -> (u32, u32, u32) {
        let (x, y) = grid_2d(div_up(rows, self.shape.rows as usize));
        (x, y, 1)
    }
}

/// Fewest values of K per part: a part's fixed costs (its first loads, its stores, its share of
/// the second pass) stay small beside its loop of at least 16 steps. So 0.5B's qkv and o_proj
/// (K = 896) split in 3 where their tiles are few: at 64 tokens o_proj makes 56 workgroups of 32
/// x 32, each walking 56 steps with 2 warps on a compute unit of a 132-unit GPU; in 3 parts, 168
/// of 19 steps. Layers of K < 512 never split.
const SPLIT_MIN_K: usize = 256;

/// Most parts of K (split-K: matmul's SPLIT, then split_sum): the second pass reads `parts`
/// partial sums per output. A layer's parts follow from its K alone (they are in its uniform):
/// at 0.5B's down_proj and 128 tokens the 8 parts' sums are 3.7 MB written and read again, small
/// beside the layer's 8.7 MB of weights and 1.1 GFLOP, and they keep 7 workgroups in flight per
/// compute unit of a 132-unit GPU.
const MAX_SPLITS: usize = 8;

/// Threads per workgroup of split_sum, one output each.
const SPLIT_SUM_WORKGROUP: u32 = 64;

/// Where split-K layers write their partial sums: one buffer that every layer of a model shares
/// (they run one after another), sized for the largest split any of them makes: fewer than
/// [`Tuning::split_k_below_tiles`] tiles of 32 x 32 outputs, in up to [`MAX_SPLITS`] parts (8 MiB
/// by default).
pub struct SplitPartials(wgpu::Buffer);

impl SplitPartials {
    /// `None` where no layer splits K: the CPU-like family, or a tuning that never splits.
    pub fn new(gpu: &Gpu) -> Option<Self> {
        let tiles = gpu.tuning().split_k_below_tiles as usize;
        let floats = MAX_SPLITS * tiles * 32 * 32;
        (!gpu.direct_kernels() && tiles > 0).then(|| Self(gpu.storage("split-K partials", (floats * 4) as u64)))
    }
}

impl Drop for SplitPartials {
    fn drop(&mut self) {
        self.0.destroy();
    }
}

/// The buffers a [`Linear`] reads and writes. `tokens` is linear.wgsl's `Tokens` uniform (M in
/// its first field); `bias` is optional; `y` has `out_cols` columns, of which the layer writes
/// its N from `first_col` on (0 but where several layers fill one output side by side). With
/// `partials`, the GPU family's matmul may split K (see [`Tuning::split_k_below_tiles`]). x and
/// y are `[M, K]` and `[M, out_cols]`, or in parts where [`activation_part`] says (lavapipe).
pub struct LinearBuffers<'a> {
    pub tokens: &'a wgpu::Buffer,
    pub x: &'a wgpu::Buffer,
    pub bias: Option<&'a wgpu::Buffer>,
    pub y: &'a wgpu::Buffer,
    pub out_cols: usize,
    pub first_col: usize,
    pub partials: Option<&'a SplitPartials>,
    /// Columns per part where x or y is in parts ([`activation_part`]; 0: whole).
    pub x_part: usize,
    pub y_part: usize,
}

impl<'a> LinearBuffers<'a> {
    /// A layer that writes all `n` columns of a whole `y` from a whole `x`, splitting no K; the
    /// other cases start from it (`LinearBuffers { partials, ..LinearBuffers::whole(..) }`).
    pub fn whole(
        tokens: &'a wgpu::Buffer,
        x: &'a wgpu::Buffer,
        bias: Option<&'a wgpu::Buffer>,
        y: &'a wgpu::Buffer,
        n: usize,
    ) -> Self {
        LinearBuffers { tokens, x, bias, y, out_cols: n, first_col: 0, partials: None, x_part: 0, y_part: 0 }
    }
}

/// The operation before a [`Linear`] that its matvec applies as it reads x ([`Linear::folded`]).
#[derive(Clone, Copy)]
pub enum Fold<'a> {
    /// RMSNorm of x (the residual stream): its weight (`[K]` f32) and epsilon.
    Norm { weight: &'a wgpu::Buffer, eps: f64 },
    /// SwiGLU: silu(x) * up, x being the gate projection; up: `[M, K]`.
    Glu { up: &'a wgpu::Buffer },
}

/// Which kernels run the layer.
enum Kernels {
    /// GPUs: matvec for M <= [`Tuning::matvec_max_rows`] (when K allows it), else matmul in
    /// 64 x 64 or 32 x 32 tiles, or for few 32 x 32 tiles split over K where the layer allows it.
    Tiled { matmul_64: Rc<Kernel>, matmul_32: Rc<Kernel>, matvec: Option<Matvec>, split: Option<SplitKernels> },
    /// CPU-like devices: the barrier-free kernel, one per block of the device's table
    /// ([`LAVAPIPE_BLOCKS`] or [`SMALL_BLOCKS`]); `windowed`: each block's reading x through
    /// uniform windows, where the device and x allow it ([`reads_x_uniform`], [`window_rows`]).
    Direct { blocks: &'static [DirectBlock; 3], kernels: [Rc<Kernel>; 3], windowed: [Option<Windowed>; 3] },
    /// GPUs, the operation before the layer folded in: matvec, applying it as it reads x.
    Folded { matvec: Matvec },
}

/// Split-K's two passes: matmul in 32 x 32 tiles writing the parts' sums, and their sum.
struct SplitKernels {
    matmul: Rc<Kernel>,
    sum: Rc<Kernel>,
    /// Parts of K (2 to [`MAX_SPLITS`]).
    parts: u32,
}

/// One weight chunk's bind groups: the layer's; with split-K its two passes' (the matmul
/// writing into the partials, the sum reading them); for the direct family's `windowed`
/// kernels, x through a uniform window (by block).
struct Chunk {
    group: wgpu::BindGroup,
    split: Option<(wgpu::BindGroup, wgpu::BindGroup)>,
    windowed: [Option<wgpu::BindGroup>; 3],
    rows: usize,
}

/// How a [`Linear`] stores its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// `y = x @ W^T + b`.
    Overwrite,
    /// `y += x @ W^T + b`: adds into the residual stream.
    Accumulate,
}

/// A HF Linear: `y[m, :] (+)= x[m, :] @ W^T + b` — x: [M, K], W: [N, K] packed (row chunks),
/// b: [N], y: [M, out_cols]; [`Store`] says whether it adds into y. The kernel family is the
/// device's ([`Gpu::direct_kernels`]).
pub struct Linear {
    kernels: Kernels,
    chunks: Vec<Chunk>,
    /// K, bytes per weight row, and whether y is read too (accumulate).
    k: usize,
    row_bytes: usize,
    accumulate: bool,
    /// Inputs read besides x (the profile's bytes): a folded norm's weight, once; a folded
    /// SwiGLU's up projection, a row per token row.
    extra_reads: (usize, usize),
    /// Gate and up rows in pairs, an output per pair ([`Linear::swiglu`]).
    swiglu: bool,
    /// Where the kernels change path (the device's).
    tuning: Tuning,
    /// The device's alignment of a dynamic offset ([`Gpu::record_stride`]).
    record_stride: u32,
}

impl Linear {
    pub fn new(gpu: &Gpu, w: &PackedMatrix, io: LinearBuffers, store: Store) -> Self {
        Self::build(gpu, w, io, store, None, false, None)
    }

    /// [`Linear::new`] whose matvec runs in workgroups `lanes` wide (one of [`MATVEC_LANES`])
    /// whatever K, for the decode microbenchmark to set the shapes beside each other. `None`
    /// where there is no such shape or the layer runs no matvec (CPU-like devices, K not a
    /// multiple of 8).
    pub fn with_matvec_lanes(gpu: &Gpu, w: &PackedMatrix, io: LinearBuffers, store: Store, lanes: u32) -> Option<Self> {
        let shape = MatvecShape::of_lanes(lanes)?;
        Self::runs_matvec(gpu, w).then(|| Self::build(gpu, w, io, store, None, false, Some(shape)))
    }

    /// Lanes per weight row of the layer's matvec (`None`: it runs none).
    pub fn matvec_lanes(&self) -> Option<u32> {
        match &self.kernels {
            Kernels::Tiled { matvec: Some(m), .. } | Kernels::Folded { matvec: m } => Some(m.shape.lanes),
            _ => None,
        }
    }

    /// The layer applied to `fold`(x): matvec applies the operation (an RMSNorm, or SwiGLU) to
    /// each value as it reads it, so the operation costs no dispatch (nor a pass over memory) of
    /// its own. Meant for the batches matvec serves (up to [`Tuning::matvec_max_rows`] token
    /// rows; it is exact for any). `None` where matvec cannot run the layer: CPU-like devices, K not a
    /// multiple of 8.
    pub fn folded(gpu: &Gpu, w: &PackedMatrix, io: LinearBuffers, store: Store, fold: Fold) -> Option<Self> {
        Self::runs_matvec(gpu, w).then(|| Self::build(gpu, w, io, store, Some(fold), false, None))
    }

    /// The MLP's first half as one layer: `w` holds gate_proj's rows, then up_proj's (the same
    /// count, biases alike), and the layer writes `y[m, o] = silu(gate[m, o]) * up[m, o]`
    /// (`[M, rows / 2]`) where a plain layer writes its dot products: no `[M, 2 x intermediate]`
    /// in memory, no SwiGLU pass. With `fold`, the norm before it folds in too (matvec).
    /// `None` where the kernels cannot pair rows: CPU-like devices, a matrix split over
    /// bindings (see [`Linear::pairs_rows`]), and with `fold` where it cannot fold.
    pub fn swiglu(gpu: &Gpu, w: &PackedMatrix, io: LinearBuffers, fold: Option<Fold>) -> Option<Self> {
        let foldable = fold.is_none() || Self::runs_matvec(gpu, w);
        (Self::pairs_rows(gpu, w) && foldable).then(|| Self::build(gpu, w, io, Store::Overwrite, fold, true, None))
    }

    /// Whether [`Linear::swiglu`] can run a gate and up pair as `w`: the GPU family's kernels
    /// read row o and its partner n / 2 + o in one workgroup, so the matrix must be one chunk.
    pub fn pairs_rows(gpu: &Gpu, w: &PackedMatrix) -> bool {
        !gpu.direct_kernels() && w.chunks().len() == 1 && w.rows().is_multiple_of(2)
    }

    /// Whether matvec can run this layer (and so apply a [`Fold`]): the GPU family, K a multiple
    /// of 8 (see `build`).
    fn runs_matvec(gpu: &Gpu, w: &PackedMatrix) -> bool {
        !gpu.direct_kernels() && w.cols().is_multiple_of(8)
    }

    /// The layer; `matvec`: its matvec's workgroup shape, else the one for its K.
    fn build(
        gpu: &Gpu,
        w: &PackedMatrix,
        io: LinearBuffers,
        store: Store,
        fold: Option<Fold>,
        swiglu: bool,
        matvec: Option<MatvecShape>,
    ) -> Self {
        let accumulate = store == Store::Accumulate;
        let flag = |name, on: bool| (name, f64::from(u8::from(on)));
        debug_assert!(io.y_part == 0 || gpu.direct_kernels(), "y in parts: lavapipe's direct kernels only");
        // The override constants of a kernel of the layer adding a bias, or into y, or neither (a
        // part of x after the first adds into y, without the bias: `later_parts`).
        let constants_for = |bias: bool, accumulate: bool| {
            let flags =
                [w.dtype_constant(), flag("HAS_BIAS", bias), flag("ACCUMULATE", accumulate), flag("SWIGLU", swiglu)];
            let y_part = (io.y_part > 0).then_some(("Y_PART", io.y_part as f64));
            [&flags[..], y_part.as_slice()].concat()
        };
        let constants = constants_for(io.bias.is_some(), accumulate);
        let with = |extra: &[(&'static str, f64)]| [&constants[..], extra].concat();
        // What a fold adds: matvec's switch, its binding 6 and epsilon, and the bytes it reads
        // besides x (once, and per token row). Without a bias (or a fold) the shader never reads
        // binding 4 (or 6); x stands in.
        let k = w.cols();
        let (switch, aux, eps, extra_reads) = match fold {
            Some(Fold::Norm { weight, eps }) => (Some("NORM"), weight, eps as f32, (k * 4, 0)),
            Some(Fold::Glu { up }) => (Some("GLU"), up, 0.0, (0, k * 4)),
            None => (None, io.x, 0.0, (0, 0)),
        };
        let bias = io.bias.unwrap_or(io.x);
        let parts = (k / SPLIT_MIN_K).min(MAX_SPLITS) as u32;
        let kernels = if let Some(switch) = switch {
            let norm = matches!(fold, Some(Fold::Norm { .. }));
            let shape = matvec.unwrap_or(MatvecShape::for_layer(k, norm));
            Kernels::Folded { matvec: Matvec::new(gpu, shape, &with(&[(switch, 1.0)])) }
        } else if gpu.direct_kernels() {
            let (spec, blocks) = direct_kernel(gpu);
            let direct_with =
                |spec, b: DirectBlock, constants: &[(&'static str, f64)], extra: &[(&'static str, f64)]| {
                    let block = [workgroup(DIRECT_WORKGROUP), ("BLOCK_M", f64::from(b.m))];
                    let lavapipe = [("BLOCK_N", f64::from(b.n)), ("TEXTURE_WIDTH", f64::from(WEIGHT_TEXTURE_WIDTH))];
                    let lavapipe = if gpu.weight_textures() { &lavapipe[..] } else { &[] };
                    gpu.kernel(spec, &[constants, &block[..], lavapipe, extra].concat())
                };
            let direct = |spec, b| direct_with(spec, b, &constants, &[]);
            // x a linear_input: its token rows, past which it holds a window's length.
            let x_rows = (io.x.size().saturating_sub(LINEAR_X_UNIFORM_BYTES) / (4 * k as u64).max(1)) as usize;
            let uniform_x = reads_x_uniform(gpu) && io.x.usage().contains(wgpu::BufferUsages::UNIFORM) && x_rows > 0;
            let stride = gpu.record_stride();
            let windowed = blocks.map(|b| {
                // x in parts, but for one token row: its parts side by side are the row.
                let x_part = if b.m == 1 { 0 } else { io.x_part };
                let (cols, parts) = if x_part > 0 { (x_part, k / x_part) } else { (k, 1) };
                let rows = window_rows(b.m, cols, stride).filter(|_| uniform_x)?;
                // A record for a window from every row: the last rows of a batch may start one of
                // another kernel's windows anywhere (see `encode`).
                let table = gpu.record_table(("x windows", 1, parts as u32), x_rows * parts, |j| {
                    [(j / parts) as u32, (j % parts) as u32, stride / 4, 0]
                });
                let block = DirectBlock { m: rows, n: b.n };
                let x_part = ("X_PART", x_part as f64);
                let kernel = direct_with(&LINEAR_BLOCKS_UNIFORM_X, block, &constants, &[x_part]);
                // Parts after the first add to the first's sums, whose bias is in.
                let later_parts = (parts > 1)
                    .then(|| direct_with(&LINEAR_BLOCKS_UNIFORM_X, block, &constants_for(false, true), &[x_part]));
                Some(Windowed { kernel, later_parts, rows, block_n: b.n, cols, parts, table })
            });
            // x in parts is read through windows alone (activation_part makes sure they fit),
            // but for one token row, whose parts side by side are the row.
            debug_assert!(
                io.x_part == 0
                    || (k.is_multiple_of(io.x_part)
                        && blocks.iter().zip(&windowed).all(|(b, w)| b.m == 1 || w.is_some())),
                "x in parts, not windows"
            );
            Kernels::Direct { blocks, kernels: blocks.map(|b| direct(spec, b)), windowed }
        } else {
            Kernels::Tiled {
                matmul_64: gpu.kernel(&MATMUL, &with(&[("TILE", 64.0)])),
                matmul_32: gpu.kernel(&MATMUL, &with(&[("TILE", 32.0)])),
                // matvec reads 16 bytes at a time: 8 values of a 16-bit row, 4 of an f32 one, 16
                // or 32 quantized ones (rows of whole blocks, 16-byte aligned).
                matvec: k
                    .is_multiple_of(8)
                    .then(|| Matvec::new(gpu, matvec.unwrap_or(MatvecShape::for_layer(k, false)), &constants)),
                // Split-K needs the whole dot product of nothing but x (no fold here; no pairs)
                // and K long enough for two parts.
                split: (!swiglu && parts > 1 && io.partials.is_some()).then(|| SplitKernels {
                    matmul: gpu.kernel(&MATMUL, &with(&[("TILE", 32.0), ("SPLIT", 1.0)])),
                    sum: gpu.kernel(&SPLIT_SUM, &with(&[workgroup(SPLIT_SUM_WORKGROUP)])),
                    parts,
                }),
            }
        };
        // Where the layer splits, the partials its two passes write and read.
        let partials = match &kernels {
            Kernels::Tiled { split: Some(_), .. } => io.partials,
            _ => None,
        };
        let textures = matches!(kernels, Kernels::Direct { .. } if gpu.weight_textures()).then(|| w.textures(gpu));
        let chunks = w
            .chunks()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let shape = LinearShape {
                    k: k as u32,
                    n: c.rows as u32,
                    n_offset: (io.first_col + c.row_start) as u32,
                    out_cols: io.out_cols as u32,
                    row_start: c.row_start as u32,
                    eps,
                    splits: parts,
                    _pad2: 0,
                };
                let shape = gpu.uniform("linear", &shape);
                let layout = match &kernels {
                    Kernels::Tiled { matmul_64, .. } => matmul_64,
                    Kernels::Direct { kernels, .. } => &kernels[0],
                    Kernels::Folded { matvec } => &matvec.kernel,
                };
                let buffers = [io.tokens, &shape, io.x, &c.buffer, bias, io.y, aux];
                // w as a texture where the kernels read one (lavapipe's direct kernels).
                let texture = textures.map(|t| t[i].create_view(&Default::default()));
                let group = gpu.bind_resources(layout, &resources(&buffers, texture.as_ref()));
                let split = partials.map(|SplitPartials(partials)| {
                    let to_partials = gpu.bind(layout, &[io.tokens, &shape, io.x, &c.buffer, bias, partials, aux]);
                    (to_partials, gpu.bind(layout, &[io.tokens, &shape, partials, &c.buffer, bias, io.y, partials]))
                });
                let windowed = match &kernels {
                    Kernels::Direct { windowed, .. } => windowed.each_ref().map(|w| {
                        // The same buffers, x as a window at an offset, and the window's record.
                        let w = w.as_ref()?;
                        let range = |buffer, size| {
                            let size = wgpu::BufferSize::new(size);
                            wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer, offset: 0, size })
                        };
                        let mut resources = resources(&buffers, texture.as_ref());
                        resources[2] = range(io.x, LINEAR_X_UNIFORM_BYTES);
                        resources.push(range(&w.table, 16));
                        Some(gpu.bind_resources(&w.kernel, &resources))
                    }),
                    _ => [None, None, None],
                };
                Chunk { group, split, windowed, rows: c.rows }
            })
            .collect();
        let tuning = gpu.tuning();
        let record_stride = gpu.record_stride();
        Self {
            kernels,
            chunks,
            k,
            row_bytes: w.row_bytes() as usize,
            accumulate,
            extra_reads,
            swiglu,
            tuning,
            record_stride,
        }
    }

    /// Encodes the layer for `m` token rows.
    pub fn encode(&self, pass: &mut Pass, m: u32) {
        // Counted in u64: on wasm32 a usize 2 m k n wraps (0.5B's gate and up at 256 tokens: 4.5e9).
        let k = self.k as u64;
        for chunk in &self.chunks {
            let rows = chunk.rows as u64;
            let outputs = if self.swiglu { rows / 2 } else { rows };
            let weights = rows * self.row_bytes as u64;
            // Bytes of y and of x for `m` token rows, and their FLOPs.
            let y_bytes = |m: u64| m * outputs * 4 * (1 + u64::from(self.accumulate));
            let x_bytes = |m: u64| m * k * 4 + self.extra_reads.0 as u64 + m * self.extra_reads.1 as u64;
            let flops = |m: u64| 2 * m * k * rows;
            if let Some((main, main_group)) = self.windowed_for(m, chunk) {
                // A dispatch per window and part of x, each reading the weights' columns of its
                // part (as each block of token rows of one dispatch would) and storing into y
                // (the first part's first: the others add). Up to half a window's rows left at
                // the end run in the windows of the few-rows block where there is one (33 token
                // rows: two windows of 16 and one of 4, not three of 16, a third of them idle):
                // each of its dispatches reads the weights for 4 rows alone, which on lavapipe
                // costs about as much as 16 x 16 blocks spend on 2 or 3 (0.5B's o_proj: 0.4 ms,
                // and 2.6 for 16 rows), so more rows take a whole window.
                let mut first_row = 0;
                while first_row < m {
                    let left = m - first_row;
                    let (windowed, group) = match self.tail_windows(chunk) {
                        Some(small) if left <= main.rows / 2 => small,
                        _ => (main, main_group),
                    };
                    let grid = (div_up(chunk.rows, (windowed.block_n * DIRECT_WORKGROUP) as usize), 1, 1);
                    let (cols, parts, stride) = (windowed.cols, windowed.parts, self.record_stride);
                    let part_share = |bytes: u64| bytes / parts as u64;
                    let m_j = u64::from(left.min(windowed.rows));
                    for part in 0..parts as u32 {
                        let x_offset = 4 * window_start(part, m, first_row, cols, stride / 4);
                        let offsets = [x_offset, (first_row * parts as u32 + part) * stride];
                        let (kernel, y) = match (part, &windowed.later_parts) {
                            (1.., Some(later)) => (later, 2 * y_bytes(m_j) / (1 + u64::from(self.accumulate))),
                            _ => (&windowed.kernel, y_bytes(m_j)),
                        };
                        let bytes = part_share(weights + x_bytes(m_j)) + y;
                        let work = work(bytes, part_share(flops(m_j)));
                        pass.dispatch_at(kernel, group, &offsets, grid, work);
                    }
                    first_row += windowed.rows;
                }
                continue;
            }
            let m_ = u64::from(m);
            let (x, y) = (x_bytes(m_), y_bytes(m_));
            if let (Some(split), Some((to_partials, from_partials))) = (self.split_for(m, chunk.rows), &chunk.split) {
                let partials = u64::from(split.parts) * m_ * rows * 4;
                let grid = (div_up(chunk.rows, 32), m.div_ceil(32), split.parts);
                pass.dispatch(&split.matmul, to_partials, grid, work(weights + x + partials, flops(m_)));
                let grid = (div_up(chunk.rows, SPLIT_SUM_WORKGROUP as usize), m, 1);
                pass.dispatch(&split.sum, from_partials, grid, work(partials + y, partials / 4));
                continue;
            }
            let (kernel, group, grid) = self.pick(m, chunk);
            pass.dispatch(kernel, group, grid, work(weights + x + y, flops(m_)));
        }
    }

    /// The name of the kernel that runs `m` token rows (1: a decode step); with split-K, its
    /// first pass's.
    pub fn kernel_name(&self, m: u32) -> &'static str {
        self.chunks.first().map_or("none", |c| match self.split_for(m, c.rows) {
            Some(split) => split.matmul.name,
            None => self.pick(m, c).0.name,
        })
    }

    /// The parts of K that `m` token rows run in, where the layer splits K for them.
    pub fn split_parts(&self, m: u32) -> Option<u32> {
        self.chunks.first().and_then(|c| self.split_for(m, c.rows)).map(|split| split.parts)
    }

    /// Split-K's kernels where `m` token rows and a chunk of `rows` weight rows run split: the
    /// layer can, and matmul would run fewer than [`Tuning::split_k_below_tiles`] 32 x 32 tiles.
    fn split_for(&self, m: u32, rows: usize) -> Option<&SplitKernels> {
        match &self.kernels {
            Kernels::Tiled { split: Some(split), matvec, .. } => {
                let matvec_runs = matvec.is_some() && m <= self.tuning.matvec_max_rows;
                let tiles_32 = div_up(rows, 32) * m.div_ceil(32);
                (!matvec_runs && tiles_32 < self.tuning.split_k_below_tiles).then_some(split)
            }
            _ => None,
        }
    }

    /// Token rows per window where `m` token rows read x through uniform windows, a dispatch
    /// each (lavapipe; see [`reads_x_uniform`]).
    pub fn x_window_rows(&self, m: u32) -> Option<u32> {
        self.chunks.first().and_then(|c| self.windowed_for(m, c)).map(|(w, _)| w.rows)
    }

    /// The windowed kernel of the few-rows block (4 x 8) and `chunk`'s bind group for it, for
    /// the last rows of a batch: not the one-row block's, which reads x whole (x in parts is one
    /// token row's values side by side only where the batch is that row).
    fn tail_windows<'a>(&'a self, chunk: &'a Chunk) -> Option<(&'a Windowed, &'a wgpu::BindGroup)> {
        match &self.kernels {
            Kernels::Direct { windowed, .. } => windowed[1].as_ref().zip(chunk.windowed[1].as_ref()),
            _ => None,
        }
    }

    /// The windowed kernel and `chunk`'s bind group for it, where `m` token rows run one.
    fn windowed_for<'a>(&'a self, m: u32, chunk: &'a Chunk) -> Option<(&'a Windowed, &'a wgpu::BindGroup)> {
        match &self.kernels {
            Kernels::Direct { blocks, windowed, .. } => {
                let i = direct_block(blocks, m);
                windowed[i].as_ref().zip(chunk.windowed[i].as_ref())
            }
            _ => None,
        }
    }

    /// The kernel, bind group and grid for `m` token rows and `chunk`, unsplit.
    fn pick<'a>(&'a self, m: u32, chunk: &'a Chunk) -> (&'a Kernel, &'a wgpu::BindGroup, (u32, u32, u32)) {
        let rows = chunk.rows;
        match &self.kernels {
            Kernels::Direct { blocks, kernels, .. } => {
                let i = direct_block(blocks, m);
                let block = blocks[i];
                let grid = (div_up(rows, (block.n * DIRECT_WORKGROUP) as usize), m.div_ceil(block.m), 1);
                (&kernels[i], &chunk.group, grid)
            }
            Kernels::Tiled { matvec: Some(matvec), .. } if m <= self.tuning.matvec_max_rows => {
                (&matvec.kernel, &chunk.group, matvec.grid(rows))
            }
            Kernels::Folded { matvec } => (&matvec.kernel, &chunk.group, matvec.grid(rows)),
            Kernels::Tiled { matmul_64, matmul_32, .. } => {
                if div_up(rows, 64) * m.div_ceil(64) >= self.tuning.matmul_64_from_tiles {
                    (matmul_64, &chunk.group, (div_up(rows, 64), m.div_ceil(64), 1))
                } else {
                    (matmul_32, &chunk.group, (div_up(rows, 32), m.div_ceil(32), 1))
                }
            }
        }
    }
}

/// Bindings of linear.wgsl's `buffers` (in binding order), w the texture `weights` where given.
fn resources<'a>(
    buffers: &[&'a wgpu::Buffer],
    weights: Option<&'a wgpu::TextureView>,
) -> Vec<wgpu::BindingResource<'a>> {
    let mut resources: Vec<_> = buffers.iter().map(|b| b.as_entire_binding()).collect();
    if let Some(view) = weights {
        resources[3] = wgpu::BindingResource::TextureView(view);
    }
    resources
}
