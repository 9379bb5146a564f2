// Prefill linear layer (interface in linear.wgsl) for GPUs: x holds all tokens of all sequences.
// A workgroup computes TILE tokens x TILE weight rows (a TILE x TILE block of y; with SWIGLU
// TILE x TILE / 2) in steps of BK along K: both tiles go through workgroup memory, and each of
// its (TILE / 4)^2 threads keeps a
// 4 x 4 block of results in four named vec4 accumulators. (An indexed local array here was left
// in slow local memory by a real GPU's compiler: 18x slower.) TILE = 32 gives four times more
// workgroups than 64 and serves small batches, where 64 would leave most of a GPU idle.
// With SWIGLU a tile's first TILE / 2 weight rows are gate rows and the others the up rows of
// the same outputs, so each thread holds both halves of its two outputs (see store_swiglu).
// With SPLIT (split-K) the grid's z splits K into shape.splits parts of whole BK steps: each
// workgroup sums its part only and writes it to y, bound to a [splits, M, N] partials buffer that
// split_sum.wgsl adds up. It serves small batches whose few tiles each walk a long K (down_proj):
// more, shorter workgroups in flight instead of a few long ones.
override TILE: u32 = 64u;        // 32 or 64: at least 32, so each tile load has a thread
override SPLIT: bool = false;
const BK: u32 = 16u;             // K per step
const ROW: u32 = 5u;             // vec4s per tile row: BK / 4 + 1 of padding against bank conflicts
// Tiles row-major, [TILE, BK] plus padding, read 4 k at a time.
var<workgroup> xs: array<vec4<f32>, TILE * ROW>;
var<workgroup> ws: array<vec4<f32>, TILE * ROW>;

// Values k .. k + 7 of token row m (k a multiple of 8; zero past M or K, as in the last step
// when K % 16 == 8): two 16-byte loads where rows are whole 16 bytes (K a multiple of 8, as
// every Qwen2.5 size), else value by value.
fn x_eight(m: u32, k: u32) -> array<vec4<f32>, 2> {
    if m >= tokens.m || k >= shape.k {
        return array(vec4<f32>(0.0), vec4<f32>(0.0));
    }
    if shape.k % 8u == 0u {
        let at = (m * shape.k + k) / 4u;
        return array(x[at], x[at + 1u]);
    }
    let at = m * shape.k + k;
    return array(
        vec4<f32>(x_or_zero(at, k), x_or_zero(at + 1u, k + 1u), x_or_zero(at + 2u, k + 2u), x_or_zero(at + 3u, k + 3u)),
        vec4<f32>(x_or_zero(at + 4u, k + 4u), x_or_zero(at + 5u, k + 5u), x_or_zero(at + 6u, k + 6u), x_or_zero(at + 7u, k + 7u)),
    );
}

// Value `at` of x, which is column `col` of its row: zero past K (not read).
fn x_or_zero(at: u32, col: u32) -> f32 {
    if col >= shape.k {
        return 0.0;
    }
    return x_value(at);
}

// Values k .. k + 7 of weight row n (zero past N or K): one 16-byte load of a 16-bit row where
// rows are whole 16 bytes, else pair by pair (f32 and quantized rows, other K).
fn w_eight(n: u32, k: u32) -> array<vec4<f32>, 2> {
    if n >= shape.n || k >= shape.k {
        return array(vec4<f32>(0.0), vec4<f32>(0.0));
    }
    let base = n * row_words(shape.k);
    if DTYPE < 2u && shape.k % 8u == 0u {
        return unpack_eight(weight_load(base / 4u + k / 8u));
    }
    let p = k / 2u;
    return array(
        vec4<f32>(pair_or_zero(base, p), pair_or_zero(base, p + 1u)),
        vec4<f32>(pair_or_zero(base, p + 2u), pair_or_zero(base, p + 3u)),
    );
}

// Values 2p and 2p + 1 of the weight row starting at word `base`: zero past K (K is even).
fn pair_or_zero(base: u32, p: u32) -> vec2<f32> {
    if 2u * p >= shape.k {
        return vec2<f32>(0.0);
    }
    return weight_pair_at(base, p, shape.k);
}

// Thread (tx, ty) computes tokens m0 + ty + i * TILE / 4 and tile rows tx + j * TILE / 4 of the
// weights (i, j < 4): neighbouring threads store neighbouring columns.
@compute @workgroup_size(TILE / 4u, TILE / 4u)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let m0 = wg.y * TILE;
    let step = TILE / 4u;
    // This workgroup's values of K: all of them, or with SPLIT its part.
    let part = select(shape.k, (shape.k + shape.splits * BK - 1u) / (shape.splits * BK) * BK, SPLIT);
    let k_begin = wg.z * part;
    let k_end = min(k_begin + part, shape.k);
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    // Tile loads: each of the first TILE * BK / 8 threads (one each: there are (TILE / 4)^2,
    // as many or more for TILE >= 32) brings 8 consecutive values of one row of both tiles, 16 bytes a
    // load (neighbouring threads: the row's next 8, then the next row). The next step's loads
    // are issued before this step's FMAs, so their latency overlaps them: with few workgroups
    // per compute unit (a small batch) nothing else would hide it. They wait in named vec4s.
    let loads = tid < TILE * BK / 8u;
    let row = tid / (BK / 8u);
    let col = 8u * (tid % (BK / 8u));
    let n = block_weight_row(wg.x, row, TILE);  // reads as zeros past the layer
    let at = row * ROW + col / 4u;
    var x_lo = vec4<f32>(0.0);
    var x_hi = vec4<f32>(0.0);
    var w_lo = vec4<f32>(0.0);
    var w_hi = vec4<f32>(0.0);
    if loads {
        let xv = x_eight(m0 + row, k_begin + col);
        let wv = w_eight(n, k_begin + col);
        x_lo = xv[0];
        x_hi = xv[1];
        w_lo = wv[0];
        w_hi = wv[1];
    }
    for (var k0 = k_begin; k0 < k_end; k0 += BK) {
        if loads {
            xs[at] = x_lo;
            xs[at + 1u] = x_hi;
            ws[at] = w_lo;
            ws[at + 1u] = w_hi;
            let xv = x_eight(m0 + row, k0 + BK + col);  // zeros past K; past k_end, unused
            let wv = w_eight(n, k0 + BK + col);
            x_lo = xv[0];
            x_hi = xv[1];
            w_lo = wv[0];
            w_hi = wv[1];
        }
        workgroupBarrier();
        for (var q = 0u; q < BK / 4u; q++) {
            let a0 = xs[(lid.y) * ROW + q];
            let a1 = xs[(lid.y + step) * ROW + q];
            let a2 = xs[(lid.y + 2u * step) * ROW + q];
            let a3 = xs[(lid.y + 3u * step) * ROW + q];
            let b0 = ws[(lid.x) * ROW + q];
            let b1 = ws[(lid.x + step) * ROW + q];
            let b2 = ws[(lid.x + 2u * step) * ROW + q];
            let b3 = ws[(lid.x + 3u * step) * ROW + q];
            // Outer products, one k at a time: each multiply-add lands on an accumulator, so
            // a GPU fuses every one into an FMA. (acc += dot(a, b) costs a multiply, three
            // FMAs and an add per four: the add cannot join the chain without reassociating.)
            let bx = vec4<f32>(b0.x, b1.x, b2.x, b3.x);
            let by = vec4<f32>(b0.y, b1.y, b2.y, b3.y);
            let bz = vec4<f32>(b0.z, b1.z, b2.z, b3.z);
            let bw = vec4<f32>(b0.w, b1.w, b2.w, b3.w);
            acc0 = outer_step(acc0, a0, bx, by, bz, bw);
            acc1 = outer_step(acc1, a1, bx, by, bz, bw);
            acc2 = outer_step(acc2, a2, bx, by, bz, bw);
            acc3 = outer_step(acc3, a3, bx, by, bz, bw);
        }
        workgroupBarrier();
    }
    if SWIGLU {
        let o = wg.x * (TILE / 2u) + lid.x;
        store_swiglu_row(m0 + lid.y, o, step, acc0);
        store_swiglu_row(m0 + lid.y + step, o, step, acc1);
        store_swiglu_row(m0 + lid.y + 2u * step, o, step, acc2);
        store_swiglu_row(m0 + lid.y + 3u * step, o, step, acc3);
        return;
    }
    let n0 = wg.x * TILE + lid.x;
    if SPLIT {
        store_partial_row(wg.z, m0 + lid.y, n0, step, acc0);
        store_partial_row(wg.z, m0 + lid.y + step, n0, step, acc1);
        store_partial_row(wg.z, m0 + lid.y + 2u * step, n0, step, acc2);
        store_partial_row(wg.z, m0 + lid.y + 3u * step, n0, step, acc3);
        return;
    }
    store_row(m0 + lid.y, n0, step, acc0);
    store_row(m0 + lid.y + step, n0, step, acc1);
    store_row(m0 + lid.y + 2u * step, n0, step, acc2);
    store_row(m0 + lid.y + 3u * step, n0, step, acc3);
}

// acc plus token row a (4 values of k) times the 4 weight rows' values at those k, given k by k
// (bx: the rows' values at a.x's k, and so on).
fn outer_step(acc: vec4<f32>, a: vec4<f32>, bx: vec4<f32>, by: vec4<f32>, bz: vec4<f32>, bw: vec4<f32>) -> vec4<f32> {
    return a.w * bw + (a.z * bz + (a.y * by + (a.x * bx + acc)));
}

// Token m's results for weight rows n, n + step, n + 2 step, n + 3 step.
fn store_row(m: u32, n: u32, step: u32, v: vec4<f32>) {
    store(m, n, v.x);
    store(m, n + step, v.y);
    store(m, n + 2u * step, v.z);
    store(m, n + 3u * step, v.w);
}

// With SWIGLU, token m's outputs o and o + step: tile rows lid.x and lid.x + step are their
// gate rows, and those TILE / 2 further their up rows (2 step = TILE / 2).
fn store_swiglu_row(m: u32, o: u32, step: u32, v: vec4<f32>) {
    store_swiglu(m, o, v.x, v.z);
    store_swiglu(m, o + step, v.y, v.w);
}

// With SPLIT, token m's sums over K part `split` for weight rows n, n + step, n + 2 step and
// n + 3 step.
fn store_partial_row(split: u32, m: u32, n: u32, step: u32, v: vec4<f32>) {
    store_partial(split, m, n, v.x);
    store_partial(split, m, n + step, v.y);
    store_partial(split, m, n + 2u * step, v.z);
    store_partial(split, m, n + 3u * step, v.w);
}

// partials[split, m, n] (y is the [splits, M, N] partials buffer): no bias, nothing added.
// Out-of-range (m, n) are skipped.
fn store_partial(split: u32, m: u32, n: u32, v: f32) {
    if m >= tokens.m || n >= shape.n {
        return;
    }
    y[(split * tokens.m + m) * shape.n + n] = v;
}
